"""The record files' names, and how every one of them is written and read.

Every file is written to a temporary name, flushed to the disk (fsync) and renamed into place, and the
rename flushed too: a reader sees the old file or the new one, never half of one, even when the writer
is killed or its node crashes. A write that fails removes its temporary file.
"""

import datetime
import json
import math
import os
from pathlib import Path
from typing import Any

# a run's folder
CONFIG, ENV, STEPS, SUMMARY, STATUS = "config.json", "env.json", "steps.parquet", "summary.json", "status.json"
PROFILE = "profile.pt.trace.json.gz"  # a torch.profiler trace, when profile=true
# a sweep's folder
SWEEP, RUNS, JOBS, REPORT = "sweep.json", "runs.jsonl", "jobs.json", "report.html"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename into it) to the disk, where the filesystem allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems cannot fsync a folder
        pass
    finally:
        os.close(fd)


def strict(value: Any) -> Any:
    """`value` with every NaN or infinite float as None: JSON has no NaN (Python writes a non-standard `NaN`
    that other readers refuse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(strict(obj), indent=2, sort_keys=True, default=str, allow_nan=False).encode())


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def write_jsonl(path: Path, lines: list[str]) -> None:
    """Lines already serialised (one JSON value each, see `json_line`): one file, however many."""
    atomic_write(path, "".join(line + "\n" for line in lines).encode())


def json_line(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def write_steps(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    atomic_write(path, sink.getvalue().to_pybytes())


def read_steps(path: Path):
    """A run's steps as a pyarrow Table."""
    import pyarrow.parquet as pq

    return pq.read_table(path)


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts to one dict with dotted keys ({"model": {"name": x}} -> {"model.name": x})."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat
