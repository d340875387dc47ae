"""Which code a run executed.

For perfsweep, that is the git commit of its working tree or of the launch's code snapshot.
For the user's own code that a run imports, it is the same, per module by top-level name.
"""

import importlib.metadata
import importlib.util
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

from perfsweep.records.files import read_json

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # in a job: the launch's snapshot (.code/<hash>/perfsweep/)
CODE_VERSION = "code_version.json"  # in a launch's code snapshot: the commit it was copied from
USER_CODE = "user_code.json"  # in a launch's code snapshot: the user's code it holds, where it was copied from


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode(errors="replace").strip()


def git_commit(root: Path = PROJECT_ROOT, path: Path | None = None) -> dict[str, object]:
    """The commit checked out where `root` is, and whether `path` (else the whole tree) differs from it."""
    commit = _git(root, "rev-parse", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no", *([str(path)] if path else []))
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None and commit else None}


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


def code_identity(top: str, distributions: dict[str, list[str]] | None = None) -> dict[str, object]:
    """What the user's top-level module `top` is, where there are such facts.

    That is where it is found, and the version of the package that installs it.
    It is also the git commit of its folder, and whether the folder differs from it.

    Args:
        top: the top-level module's name.
        distributions: importlib.metadata.packages_distributions(), read once by a caller that asks of many modules.
    """
    place = module_place(top)
    provides = (distributions or importlib.metadata.packages_distributions()).get(top, [])
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
