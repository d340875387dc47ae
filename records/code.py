"""Which code a run executed.

For perfsweep, that is the git commit of its working tree or of the launch's code snapshot.
For the user's own code that a run imports, it is the same, per module by top-level name.
"""

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path
from stat import S_ISDIR

from perfsweep.records.files import read_json

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # in a job: the launch's snapshot (.code/<hash>/perfsweep/)
CODE_VERSION = "code_version.json"  # in a launch's code snapshot: the commit it was copied from
USER_CODE = "user_code.json"  # in a launch's code snapshot: the user's code it holds, where it was copied from
SNAPSHOTS = ".code"  # in a sweep folder: its launches' snapshots of the code, one folder per content


def snapshot_files(sweep_dir: Path, module: str) -> dict[str, str] | None:
    """Each file of a module the sweep's launches copied, with its content's digest.

    A file is named by its path in the snapshot.

    None where no snapshot holds the module.
    None too where several do.
    """
    held = [
        place
        for folder in sorted((Path(sweep_dir) / SNAPSHOTS).glob("[!.]*"))
        for place in (folder / module, folder / f"{module}.py")
        if place.exists()
    ]
    if len(held) != 1:
        return None
    files = sorted(held[0].rglob("*")) if held[0].is_dir() else [held[0]]
    root = held[0].parent
    return {
        str(f.relative_to(root)): hashlib.sha1(f.read_bytes()).hexdigest()
        for f in files
        if f.is_file() and _copied(f.relative_to(root))
    }


def _copied(path: Path) -> bool:
    """Whether a file of a snapshot is the user's code as copied, not bytecode or the snapshot's own record."""
    made = path.name in (CODE_VERSION, USER_CODE) or path.suffix in (".pyc", ".pyo")
    return not made and not any(part == "__pycache__" or part.startswith(".") for part in path.parts)


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """How one copy of a module became another.

    'mypkg/models.py changed', 'mypkg/old.py gone', 'mypkg/new.py added'."""
    changed = [f"{path} changed" for path in before if path in after and before[path] != after[path]]
    return changed + [f"{p} gone" for p in before if p not in after] + [f"{p} added" for p in after if p not in before]


def git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode(errors="replace").strip()


def commit_of(root: Path, rev: str = "HEAD") -> dict[str, object] | None:
    """The commit `rev` names in the repository at `root`: its hash, subject and commit time (unix seconds).

    A history orders by that time where no repository is at hand to order by.
    None where there is no such commit.
    """
    head = git(root, "log", "-1", "--format=%H%x00%ct%x00%s", rev, "--")
    if not head or head.count("\0") != 2:
        return None
    commit, at, subject = head.split("\0", 2)
    return {"commit": commit, "subject": subject, "committed_at": int(at)}


def git_commit(root: Path = PROJECT_ROOT, path: Path | None = None) -> dict[str, object]:
    """The commit checked out where `root` is, and whether `path` (else the whole tree) differs from it.

    `dirty_files` counts the tracked files that differ from it.
    """
    head = commit_of(root)
    if head is None:
        return {"commit": None, "dirty": None}
    dirty = git(root, "status", "--porcelain", "--untracked-files=no", *([str(path)] if path else []))
    if dirty is None:
        return head | {"dirty": None}
    return head | {"dirty": bool(dirty), "dirty_files": len(dirty.splitlines())}


def repository(place: Path) -> Path | None:
    """The top folder of the git repository that holds `place` (a folder or a file); None outside one."""
    folder = place if place.is_dir() else place.parent
    top = git(folder, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def under_test(named: str | None, places: list[Path], here: Path) -> dict[str, object] | None:
    """The code under test: the repository whose commit a run measured, as `history` orders runs by it.

    It is, the first that applies:

    - the folder the user names (`code=PATH`);
    - the one repository that holds the user's code the runs import (`places`, its working copies);
    - the repository of the launch's working directory `here`.

    None where none is a git repository.
    """
    candidates = [("code", [Path(named).expanduser()] if named else []), ("imports", places), ("launch", [here])]
    for chosen_by, folders in candidates:
        tops = {top for place in folders if (top := repository(place)) is not None}
        if len(tops) == 1:
            top = tops.pop()
            return {"repository": str(top), **git_commit(top), "chosen_by": chosen_by}
    return None


# Each CI's variables: the one that says a job runs there, then the branch, the run's id, the commit, the run's page,
# and the repository as the CI names it (a checkout's path differs from runner to runner).
# The first variable of a tuple that is set and not empty gives the value.
CI_VARIABLES = {
    "github": (
        "GITHUB_ACTIONS",
        ("GITHUB_HEAD_REF", "GITHUB_REF_NAME"),
        ("GITHUB_RUN_ID",),
        ("GITHUB_SHA",),
        (),
        ("GITHUB_REPOSITORY",),
    ),
    "gitlab": (
        "GITLAB_CI",
        ("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", "CI_COMMIT_REF_NAME"),
        ("CI_PIPELINE_ID",),
        ("CI_COMMIT_SHA",),
        ("CI_PIPELINE_URL",),
        ("CI_PROJECT_PATH",),
    ),
    "buildkite": (
        "BUILDKITE",
        ("BUILDKITE_BRANCH",),
        ("BUILDKITE_BUILD_ID",),
        ("BUILDKITE_COMMIT",),
        ("BUILDKITE_BUILD_URL",),
        ("BUILDKITE_REPO",),
    ),
    "jenkins": (
        "JENKINS_URL",
        ("BRANCH_NAME", "GIT_BRANCH"),
        ("BUILD_ID",),
        ("GIT_COMMIT",),
        ("BUILD_URL",),
        ("GIT_URL",),
    ),
}


def ci_run(environ: dict[str, str]) -> dict[str, str | None] | None:
    """The CI run a launch is part of, from the CI's standard variables in `environ`; None outside a known CI."""

    def first(names: tuple[str, ...]) -> str | None:
        return next((environ[name] for name in names if environ.get(name)), None)

    for provider, (marker, branch, run_id, commit, url, repository) in CI_VARIABLES.items():
        if environ.get(marker):
            found = {"provider": provider, "branch": first(branch), "run_id": first(run_id), "commit": first(commit)}
            found["repository"] = first(repository)
            if provider == "github" and found["run_id"]:
                server, repo = environ.get("GITHUB_SERVER_URL", "https://github.com"), environ.get("GITHUB_REPOSITORY")
                url_of_run = f"{server}/{repo}/actions/runs/{found['run_id']}" if repo else None
            else:
                url_of_run = first(url)
            return found | {"url": url_of_run}
    return None


def code_version() -> dict[str, object]:
    """The commit of the code that runs.

    It comes from the snapshot's record if this is a snapshot, else from git.
    """
    recorded = PROJECT_ROOT / CODE_VERSION
    return read_json(recorded) if recorded.is_file() else git_commit()


def _installed_places() -> tuple[str, ...]:
    """Where installed packages and the standard library live: code there is not the user's working copy."""
    paths = sysconfig.get_paths()
    places = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")} | set(site.getsitepackages())
    return tuple(str(Path(p).resolve()) for p in places)


def module_place(top: str) -> Path | None:
    """Where top-level module `top` is found (its folder, or its file), without importing it; None if nowhere."""
    spec = sys.modules[top].__spec__ if top in sys.modules else importlib.util.find_spec(top)
    if spec is None:
        return None
    places = list(spec.submodule_search_locations or [])
    place = places[0] if places else spec.origin
    return Path(place).resolve() if place and place not in ("built-in", "frozen") else None


INSTALLED_PARTS = frozenset({"site-packages", "dist-packages"})  # the folders packages are installed into


def is_working_copy(place: Path) -> bool:
    """Code that may change while a sweep runs.

    The standard library is not.
    An installed package is not: one in a site-packages folder anywhere, a cluster's module system's included.
    An editable install's source is.
    """
    return not str(place).startswith(_installed_places()) and not INSTALLED_PARTS.intersection(place.parts)


INSTALLED = (".dist-info", ".egg-info", "hydra_plugins")  # what in an import folder says what is installed there


def import_path_state() -> tuple[tuple[str, object], ...]:
    """What the folders on sys.path have installed: packages' metadata, Hydra's plugins.

    Installing or removing a package changes its folder's time.
    A folder is listed again only then.
    A folder that installs nothing is left out.
    So edits to the user's code change nothing here.
    An edit inside a .dist-info that is there already goes unseen.
    A file on the path (a zipped egg) counts by its time.
    """
    state = []
    for entry in sys.path:
        place = os.path.abspath(entry or ".")  # '' and relative entries are where the process is now
        try:
            stat = os.stat(place)
        except OSError:
            continue
        installed = _installed_in(place, stat.st_mtime_ns) if S_ISDIR(stat.st_mode) else stat.st_mtime_ns
        if installed:
            state.append((place, installed))
    return tuple(state)


@functools.lru_cache(maxsize=256)
def _installed_in(folder: str, mtime_ns: int) -> tuple[tuple[str, int], ...]:
    """The entries of `folder` that say what it installs, at `mtime_ns`.

    Each entry comes with its own time.
    A package installed again at its version makes its .dist-info anew.
    """
    try:
        with os.scandir(folder) as entries:
            return tuple(sorted((e.name, e.stat().st_mtime_ns) for e in entries if e.name.endswith(INSTALLED)))
    except OSError:
        return ()


@functools.lru_cache(maxsize=4)
def _distributions(state: tuple) -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def installed_distributions() -> dict[str, list[str]]:
    """importlib.metadata.packages_distributions(): top-level module -> the packages that install it.

    A read takes 0.15 s or more, as it opens every installed package's metadata.
    It is read again only where the import path changed (import_path_state).
    The dict is shared: callers read it and never change it.
    """
    return _distributions(import_path_state())


def code_identity(top: str) -> dict[str, object]:
    """What the user's top-level module `top` is, where there are such facts.

    That is where it is found, and the version of the package that installs it.
    It is also the git commit of its folder, and whether the folder differs from it.
    """
    place = module_place(top)
    provides = installed_distributions().get(top, [])
    version = importlib.metadata.version(provides[0]) if provides else None
    identity: dict[str, object] = {"source": str(place) if place else None, "version": version}
    if place is not None and is_working_copy(place):
        folder = place if place.is_dir() else place.parent
        identity |= git_commit(folder, place)
    return identity


def user_code_record() -> dict[str, dict[str, object]]:
    """The user's code the launch's snapshot holds (top-level module -> its identity when copied); {} elsewhere."""
    recorded = PROJECT_ROOT / USER_CODE
    return read_json(recorded) if recorded.is_file() else {}
