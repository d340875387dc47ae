"""A copy of the code a launch runs.

Later edits of the working tree then do not change jobs still queued or running.
Jobs import from it and start in it.

Snapshots live in <sweep_dir>/.code/<content hash>/.
perfsweep's code is in its folder `perfsweep/`, the package as it is installed.
Beside it is the user's own code:

- every top-level module and package of the launch's working directory;
- the top-level module of each import path the runs name, where that is a working copy elsewhere.

A package there is a folder with __init__.py, or with modules of its own.
A working copy elsewhere is on PYTHONPATH, or an editable install.
A package installed into site-packages is not copied: it does not change under a sweep.
A file of the user's over MAX_BYTES is data, not code.
One that cannot be read is not code either.
Each is left out, and named in the snapshot's record.
Launches with the same code share one snapshot.
"""

import dataclasses
import hashlib
import os
import shutil
import sys
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


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A launch's copy of the code: its folder, and each top-level module's content hash.

    The modules include perfsweep.
    """

    folder: Path
    modules: dict[str, str]
    shadowing: tuple[str, ...] = ()  # copied modules named as the standard library's: runs import them in its place


def _readable(path: Path, test) -> bool:
    try:
        return test(path)
    except OSError:  # a folder the user may not read (lost+found): not code of theirs
        return False


def _files(place: Path) -> list[Path]:
    """The files of a module (its file) or package (its folder's).

    A package's caches, hidden folders and hidden files are left out.
    """
    if place.is_file():
        return [place]
    inside = (p for p in place.rglob("*") if _readable(p, Path.is_file) and p.suffix != ".pyc")
    return sorted(
        p for p in inside if not any(part.startswith((".", "__pycache__")) for part in p.relative_to(place).parts)
    )


def code_files(root: Path = PROJECT_ROOT) -> list[Path]:
    return [file for entry in CODE for file in _files(root / entry)]


def _is_package(folder: Path) -> bool:
    """Whether Python imports `folder`: one with __init__.py, or a namespace package.

    A namespace package has modules of its own and no __init__.py.
    """
    return folder.is_dir() and any(folder.glob("*.py"))


def _module_places(folder: Path) -> dict[str, Path]:
    """The top-level modules (name.py) and packages in `folder`, by the name they are imported by."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return {}
    modules = [p for p in entries if p.suffix == ".py" and _readable(p, Path.is_file)]
    packages = [p for p in entries if p.suffix == "" and _readable(p, _is_package)]
    return {p.stem: p.absolute() for p in modules + packages if p.stem.isidentifier()}


def user_places(modules: set[str], here: Path) -> dict[str, Path]:
    """Each top-level module of the user's code to copy, with its place (folder or file).

    - those of the launch's working directory `here`, none where that is perfsweep's own folder;
    - those of `modules` that are working copies elsewhere.

    These are not copied:

    - installed packages;
    - modules not found (the launch's checks name those);
    - perfsweep.
    """
    places = {} if here.resolve() == PROJECT_ROOT else _module_places(here)
    for top in sorted(modules - set(places)):
        place = module_place(top)
        if place is not None and is_working_copy(place):
            places[top] = place
    places.pop(PACKAGE, None)
    return dict(sorted(places.items()))


def _copies(top: str, place: Path, left_out: dict[str, list[str]]) -> list[tuple[Path, Path]]:
    """(where in the snapshot, where now) of each file of the user's module to copy.

    The files left out go into `left_out`.
    """
    copies, left_out[top] = [], []
    for path in _files(place):
        try:
            small = path.stat().st_size <= MAX_BYTES and os.access(path, os.R_OK)
        except OSError:
            small = False
        if small:
            copies.append((path.relative_to(place.parent), path))
        else:
            left_out[top].append(str(path))
    return copies


def snapshot(
    into: Path, modules: set[str] = frozenset(), here: Path | None = None, installed: set[Path] = frozenset()
) -> Snapshot:
    """Copy the code into `into`/<hash>, once per distinct content.

    It copies perfsweep's code and the user's.
    The user's is found by user_places: that of the working directory `here`, and of the top-level `modules`.
    `modules` are those the runs name.
    Code inside the `installed` folders is not copied: the runs' environments install it at a commit (bisect --git).
    """
    by_module = {PACKAGE: [(Path(PACKAGE) / path.relative_to(PROJECT_ROOT), path) for path in code_files()]}
    users = user_places(set(modules), here or Path.cwd())
    users = {top: place for top, place in users.items() if not any(place.is_relative_to(r) for r in installed)}
    left_out: dict[str, list[str]] = {}
    by_module |= {top: _copies(top, place, left_out) for top, place in users.items()}
    hashes = {}
    for top, copies in by_module.items():
        digest = hashlib.sha1()
        for destination, path in copies:
            digest.update(str(destination).encode() + b"\0" + path.read_bytes())
        hashes[top] = digest.hexdigest()[:12]
    whole = hashlib.sha1("".join(f"{top}={h}\n" for top, h in sorted(hashes.items())).encode()).hexdigest()[:12]
    target = into / whole
    shadowing = tuple(sorted(set(users) & sys.stdlib_module_names))
    if not target.is_dir():
        _write(target, [copy for copies in by_module.values() for copy in copies], users, left_out)
    return Snapshot(target, hashes, shadowing)


def _write(target: Path, copies: list[tuple[Path, Path]], users: dict[str, Path], left_out: dict) -> None:
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
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
