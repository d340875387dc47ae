"""The command that measures a run's configuration again: one run, in a sweep folder of its own.

The planner writes its words into the run's config record (`repro`): the config dirs, the sweep's overrides, the
run's own value of each swept key, and `repeats=1`.
The launch records the code under test beside it (status.json's `code_under_test`): its repository and commit, and
how many tracked files differed from that commit.
Where no repository holds the code under test, the user's modules the launch copied are named as in none.
A run of perfsweep's code alone is at perfsweep's own commit, as the run's env.json records it.
A command is never shown without that commit, nor for dirty code without saying so.
"""

import dataclasses
import hashlib
import os
import shlex
from pathlib import Path
from typing import Any

from perfsweep.records.redact import redact, redact_text

PROGRAM = "perfsweep"  # the installed command (pyproject's console script): the same from any folder


@dataclasses.dataclass(frozen=True)
class Repro:
    """A run's command, and the code it measured."""

    words: tuple[str, ...]  # after `perfsweep`: --config-dir DIR..., then the overrides
    code: dict[str, Any] | None = None  # the code under test as its launch found it (records/code.py `under_test`)
    files: tuple[tuple[str, str], ...] = ()  # each file of its config dirs, by path, and its digest when planned

    @property
    def command(self) -> str:
        """The command as a shell reads it, each word quoted where it must be."""
        return shlex.join([PROGRAM, *self.words])

    def caveat(self) -> str:
        """Where the code must be checked out for the command to measure what the run measured.

        A file of its config dirs that changed since the run was planned comes first.
        The command then plans what that file holds now.
        """
        changed = self.changed_files()
        if not changed:
            return self.code_caveat()
        files = ", ".join(map(redact_text, changed))  # home as ~, in a terminal as in what leaves the machine
        return f"{files} changed since the run was planned: the command plans what it holds now; {self.code_caveat()}"

    def changed_files(self) -> list[str]:
        """The files of its config dirs that differ from, or are gone since, what the run's plan read."""
        return [path for path, digest in self.files if file_digest(Path(path)) != digest]

    def code_caveat(self) -> str:
        """Where the code must be checked out for the command to measure what the run measured."""
        code = self.code or {}
        if code.get("in_no_repository"):
            modules = ", ".join(code["in_no_repository"])
            folders = sorted(set((code.get("copied_from") or {}).values()))
            where = os.pathsep.join(folders)
            there = "run it there, or " if len(folders) == 1 else ""
            how = f"{there}with PYTHONPATH={shlex.quote(where)}"
            path = f"; the run's was copied from {where}: {how}" if folders else ""
            return f"{modules} in no git repository: the command measures it as it is where it runs{path}"
        if not code.get("commit"):
            return "no commit recorded: the command measures the code as it is where it runs"
        at = f"{str(code['commit'])[:12]} of {code.get('repository', '?')}"
        if code.get("dirty"):
            files = code.get("dirty_files")
            count = f"{files} file{'s' * (files != 1)}" if isinstance(files, int) else "files"
            return f"code was dirty: {count} uncommitted at {at}; no commit holds what the run measured"
        return f"at commit {at}{'; run it where its modules import: from there, or with PYTHONPATH' * self.users}"

    @property
    def users(self) -> bool:
        """Whether the command runs code of the user's, which imports only where it was found.

        perfsweep's own code imports anywhere it is installed.
        """
        code = self.code or {}
        return code.get("chosen_by") in ("imports", "launch") or "in_no_repository" in code

    def line(self) -> str:
        """The command with its caveat as a shell comment: pasted whole, it runs."""
        return f"{self.command}  # {self.caveat()}"

    def redacted(self) -> "Repro":
        """The command as it may leave the machine (records/redact.py): no secrets, home as ~."""
        return Repro(tuple(redact(list(self.words))), redact(self.code) if self.code else None, self.files)


def file_digest(path: Path) -> str | None:
    """A file's content, as a short digest; None where it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return None


CONFIG_DEPTH = ("*.y*ml", "[!.]*/*.y*ml", "[!.]*/[!.]*/*.y*ml")  # a group's options, and a nested group's


def config_files(dirs: tuple[Path, ...]) -> tuple[tuple[str, str], ...]:
    """Each YAML file of the config dirs, with its digest.

    A file is named by its absolute path.

    Files up to two folders down are read.
    They are a group's options, and a nested group's (`model=timm/resnet`).
    Deeper files and hidden folders are left out.
    Otherwise a config dir at a project's root digests its virtual environment.
    It would do so at every plan.
    """
    found = {path.resolve() for folder in dirs for glob in CONFIG_DEPTH for path in Path(folder).glob(glob)}
    found = sorted(path for path in found if path.is_file())
    return tuple((str(path), digest) for path in found if (digest := file_digest(path)) is not None)


def code_of(
    under_test: dict[str, Any] | None, env: dict[str, Any] | None, copied: dict[str, str] | None
) -> dict[str, Any] | None:
    """The code a run's command must run at.

    That is the code under test; else the user's modules the launch copied (`copied`, status.json's `code`), in no
    repository, those the run named; else perfsweep's own (env.json's `code`).
    """
    if under_test:
        return under_test
    found = ((env or {}).get("user_code") or {}) if isinstance(env, dict) else {}
    # The modules the run named (env.json), of those the launch copied: its folder may hold unrelated code.
    users = sorted(set(copied or {}) - {"perfsweep"})
    users = [m for m in users if m in found] if isinstance(env, dict) else users
    if users:
        sources = {m: str(Path(found[m]["source"]).parent) for m in users if (found.get(m) or {}).get("source")}
        return {"in_no_repository": users, **({"copied_from": sources} if sources else {})}
    own = (env or {}).get("code")
    return {**own, "repository": own.get("source")} if isinstance(own, dict) and own.get("commit") else None
