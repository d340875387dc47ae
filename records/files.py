"""The record files' names, and how every one of them is written and read.

Every file is written to a temporary name, flushed to the disk (fsync) and renamed into place, and the
rename flushed too: a reader sees the old file or the new one, never half of one, even when the writer
is killed or its node crashes. A write that fails removes its temporary file and raises RecordWriteError.

Every file is read through `read_record`, which returns its value, None where there is no such file, or
Unreadable (the file and why: empty, cut, an I/O error): one broken record never stops a reader. Only a
launcher (which holds the sweep's lock) or the run that owns a file moves an unreadable one aside
(`quarantine`), as NAME.corrupt-<time>, where it can still be looked at.
"""

import dataclasses
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


class RecordWriteError(OSError):
    """A record could not be written (a full disk, a read-only or failing filesystem): which, and why."""


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if isinstance(error, OSError) and not isinstance(error, RecordWriteError):
            raise RecordWriteError(error.errno, f"cannot write {path}: {error.strerror or error}") from error
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


@dataclasses.dataclass(frozen=True)
class Unreadable:
    """A record that is there but cannot be read: the file, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path} is unreadable ({self.reason})"


class RecordError(Exception):
    """Raised where a reader cannot go on without a record that is unreadable."""

    def __init__(self, unreadable: Unreadable):
        super().__init__(str(unreadable))
        self.unreadable = unreadable


def _parse_json(data: bytes) -> Any:
    return json.loads(data)


def _parse_jsonl(data: bytes) -> list[Any]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _parse_parquet(data: bytes) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.ParquetFile(pa.BufferReader(data))


_PARSERS = {".json": _parse_json, ".jsonl": _parse_jsonl, ".parquet": _parse_parquet}


def read_record(path: Path) -> Any:
    """The record at `path` (JSON, JSON lines, or a Parquet file opened), None if there is none, or Unreadable."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return Unreadable(path, error.strerror or str(error))
    if not data.strip():
        return Unreadable(path, "empty file")
    try:
        return _PARSERS[path.suffix](data)
    except UnicodeDecodeError as error:
        return Unreadable(path, f"not text: {error.reason}")
    except ValueError as error:  # JSON's errors; pyarrow's ArrowInvalid is one too
        return Unreadable(path, f"cut or corrupt: {str(error).splitlines()[0][:200]}")
    except Exception as error:  # pyarrow's other errors
        return Unreadable(path, f"cut or corrupt: {type(error).__name__}: {str(error)[:200]}")


def read_json(path: Path) -> Any:
    """A JSON record that must be there and readable: RecordError otherwise."""
    value = read_record(path)
    if value is None:
        raise RecordError(Unreadable(Path(path), "missing"))
    if isinstance(value, Unreadable):
        raise RecordError(value)
    return value


def quarantine(path: Path) -> Path | None:
    """Move an unreadable record aside as NAME.corrupt-<time>; where it went (None if it could not be moved)."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:
        os.replace(path, aside)
    except OSError:
        return None
    return aside


def write_jsonl(path: Path, lines: list[str]) -> None:
    """Lines already serialised (one JSON value each, see `json_line`): one file, however many."""
    atomic_write(path, "".join(line + "\n" for line in lines).encode())


def json_line(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def readable_lines(path: Path) -> list[Any]:
    """The lines of a JSON-lines file that can still be read (of a cut or damaged one, the others)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    found = []
    for line in data.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def write_steps(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    atomic_write(path, sink.getvalue().to_pybytes())


def read_steps(path: Path):
    """A run's steps as a pyarrow Table; RecordError if the file is missing or unreadable."""
    found = read_record(path)
    if not hasattr(found, "read"):
        raise RecordError(found or Unreadable(Path(path), "missing"))
    # One thread: a step file is small, and a process that read with Arrow's pool of threads can abort as it exits,
    # its work done ("terminate called without an active exception", apache/arrow#34314).
    return found.read(use_threads=False)


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
