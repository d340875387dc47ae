"""A copy of the code a launch runs, so that jobs still queued or running are not changed by later edits of the
working tree. Jobs import from it and start in it.

Snapshots live in <sweep_dir>/.code/<content hash>/: perfsweep's code in its folder `perfsweep/` (the package
as it is installed), and beside it the user's own code. That is every top-level module and package of the
launch's working directory, and the top-level module of each import path the runs name where that is a working
copy elsewhere (PYTHONPATH, an editable install). A package installed into site-packages is not copied: it does
not change under a sweep. A file of the user's over MAX_BYTES is data, not code: it is left out, and named in
the snapshot's record. Launches with the same code share one snapshot.
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
MAX_BYTES = 10 * 2**20


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


def _module_places(folder: Path) -> dict[str, Path]:
    """The top-level modules (name.py) and packages (a folder with __init__.py) in `folder`, by name."""
    found = [p for p in folder.glob("*.py") if p.stem.isidentifier()]
    found += [p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file() and p.name.isidentifier()]
    return {p.stem: p.resolve() for p in found}


def user_places(modules: set[str], here: Path) -> dict[str, Path]:
    """Each top-level module of the user's code to copy, with its place (folder or file): those of the launch's
    working directory `here` (none where that is perfsweep's own folder), and those of `modules` that are working
    copies elsewhere. Installed packages, modules not found (the launch's checks name those) and perfsweep are not
    copied."""
    places = {} if here.resolve() == PROJECT_ROOT else _module_places(here)
    for top in sorted(modules - set(places)):
        place = module_place(top)
        if place is not None and is_working_copy(place):
            places[top] = place
    places.pop(PACKAGE, None)
    return dict(sorted(places.items()))


def snapshot(into: Path, modules: set[str] = frozenset(), here: Path | None = None) -> Path:
    """Copy the code into `into`/<hash> (once per distinct content) and return that folder: perfsweep's, and the
    user's (user_places: of the working directory `here`, and of the top-level `modules` the runs name)."""
    # (where it goes in the snapshot, where it is now)
    copies = [(Path(PACKAGE) / path.relative_to(PROJECT_ROOT), path) for path in code_files()]
    users = user_places(set(modules), here or Path.cwd())
    left_out: dict[str, list[str]] = {}
    for top, place in users.items():
        files = _files(place)
        left_out[top] = [str(path) for path in files if path.stat().st_size > MAX_BYTES]
        copies += [(path.relative_to(place.parent), path) for path in files if str(path) not in left_out[top]]
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
    identities = {top: code_identity(top) | {"copied": True, "left_out": left_out[top]} for top in users}
    write_json(tmp / PACKAGE / USER_CODE, identities)
    try:
        os.replace(tmp, target)
    except OSError:  # another launch made the same snapshot meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return target
