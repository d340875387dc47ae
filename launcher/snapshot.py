"""A copy of perfsweep's code for a launch, so that jobs still queued or running are not changed by
later edits of the working tree. Jobs import from it and start in it.

Snapshots live in <sweep_dir>/.code/<content hash>/, with perfsweep's code in its folder `perfsweep/` (the package
as it is installed): launches with the same code share one.
"""

import hashlib
import os
import shutil
from pathlib import Path

from perfsweep.records import write_json
from perfsweep.records.code import CODE_VERSION, PROJECT_ROOT, git_commit

CODE = ("__init__.py", "conf", "records", "sweeps", "train", "launcher", "analysis", "launch.py")
PACKAGE = "perfsweep"  # the folder of the snapshot that holds perfsweep's code


def code_files(root: Path = PROJECT_ROOT) -> list[Path]:
    files = []
    for entry in CODE:
        path = root / entry
        files += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return [f for f in files if "__pycache__" not in f.parts and f.suffix != ".pyc"]


def snapshot(into: Path) -> Path:
    """Copy the code into `into`/<hash> (once per distinct content) and return that folder."""
    files = code_files()
    digest = hashlib.sha1()
    for path in files:
        digest.update(str(path.relative_to(PROJECT_ROOT)).encode() + b"\0" + path.read_bytes())
    target = into / digest.hexdigest()[:12]
    if target.is_dir():
        return target
    tmp = into / f".{target.name}.{os.getpid()}.tmp"
    for path in files:
        copy = tmp / PACKAGE / path.relative_to(PROJECT_ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
    write_json(tmp / PACKAGE / CODE_VERSION, {**git_commit(), "source": str(PROJECT_ROOT), "hash": target.name})
    try:
        os.replace(tmp, target)
    except OSError:  # another launch made the same snapshot meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return target
