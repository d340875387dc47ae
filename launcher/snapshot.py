"""A copy of the code a launch runs, so that jobs still queued or running are not changed by later edits of the
working tree. Jobs import from it and start in it.

Snapshots live in <sweep_dir>/.code/<content hash>/: perfsweep's code in its folder `perfsweep/` (the package
as it is installed), and beside it each top-level module of the user's own code that the runs import from a
working copy (the launch's working directory, PYTHONPATH, an editable install). A package installed into
site-packages is not copied: it does not change under a sweep. Launches with the same code share one snapshot.
"""

import hashlib
import os
import shutil
from pathlib import Path

from perfsweep.records import write_json
from perfsweep.records.code import (
    CODE_VERSION,
    PROJECT_ROOT,
    USER_CODE,
    code_identity,
    git_commit,
    is_working_copy,
    module_place,
)

CODE = ("__init__.py", "conf", "records", "sweeps", "train", "launcher", "analysis", "launch.py")
PACKAGE = "perfsweep"  # the folder of the snapshot that holds perfsweep's code


def _files(place: Path) -> list[Path]:
    """The files of a module (its file) or package (its folder's, without caches, hidden folders or files)."""
    if place.is_file():
        return [place]
    inside = (p for p in place.rglob("*") if p.is_file() and p.suffix != ".pyc")
    return sorted(
        p for p in inside if not any(part.startswith((".", "__pycache__")) for part in p.relative_to(place).parts)
    )


def code_files(root: Path = PROJECT_ROOT) -> list[Path]:
    return [file for entry in CODE for file in _files(root / entry)]


def user_files(modules: set[str]) -> dict[str, tuple[Path, list[Path]]]:
    """Each top-level module of the user's code to copy: its place (folder or file) and files. Modules that are
    installed packages, or not found (the launch's checks name those), are not copied."""
    found = {}
    for top in sorted(modules):
        place = module_place(top)
        if place is not None and is_working_copy(place):
            found[top] = (place, _files(place))
    return found


def snapshot(into: Path, modules: set[str] = frozenset()) -> Path:
    """Copy the code into `into`/<hash> (once per distinct content) and return that folder: perfsweep's, and that
    of the user's top-level `modules` which are working copies."""
    # (where it goes in the snapshot, where it is now)
    copies = [(Path(PACKAGE) / path.relative_to(PROJECT_ROOT), path) for path in code_files()]
    users = user_files(modules)
    for place, files in users.values():
        copies += [(path.relative_to(place.parent), path) for path in files]
    digest = hashlib.sha1()
    for destination, path in copies:
        digest.update(str(destination).encode() + b"\0" + path.read_bytes())
    target = into / digest.hexdigest()[:12]
    if target.is_dir():
        return target
    tmp = into / f".{target.name}.{os.getpid()}.tmp"
    for destination, path in copies:
        copy = tmp / destination
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
    write_json(tmp / PACKAGE / CODE_VERSION, {**git_commit(), "source": str(PROJECT_ROOT), "hash": target.name})
    write_json(tmp / PACKAGE / USER_CODE, {top: code_identity(top) | {"copied": True} for top in users})
    try:
        os.replace(tmp, target)
    except OSError:  # another launch made the same snapshot meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return target
