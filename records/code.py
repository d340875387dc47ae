"""Which code a run executed: the git commit of perfsweep's working tree, or of the launch's code snapshot."""

import subprocess
from pathlib import Path

from perfsweep.records.files import read_json

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # in a job: the launch's snapshot (.code/<hash>/perfsweep/)
CODE_VERSION = "code_version.json"  # in a launch's code snapshot: the commit it was copied from


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode(errors="replace").strip()


def git_commit() -> dict[str, object]:
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None else None}


def code_version() -> dict[str, object]:
    """The commit of the code that runs: from the snapshot's record if this is a snapshot, else from git."""
    recorded = PROJECT_ROOT / CODE_VERSION
    return read_json(recorded) if recorded.is_file() else git_commit()
