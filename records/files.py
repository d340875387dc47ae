"""The record files' names, and how every one of them is written and read.

Every file is written to a temporary name, flushed to the disk (fsync) and renamed into place.
The rename is flushed too.
So a reader sees the old file or the new one, never half of one.
That holds even when the writer is killed or its node crashes.
A write that fails removes its temporary file and raises RecordWriteError.

Every file is read through `read_record`.
It returns the file's value, or None where there is no such file.
Otherwise it returns Unreadable: the file and why.
The file may be empty or cut, or hit an I/O error.
Or its value may not be what its record must hold.
So one broken record never stops a reader.
What each record must hold is declared by file name (`declare`).
The declaration sits beside the type its readers make of it.
It is checked as the record is read.
Only two may move an unreadable file aside (`quarantine`).
They are a launcher, which holds the sweep's lock, and the run that owns the file.
It goes to NAME.corrupt-<time>, where it can still be looked at.
"""

import dataclasses
import datetime
import functools
import json
import math
import os
import reprlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# a run's folder
CONFIG, ENV, STEPS, SUMMARY, STATUS = "config.json", "env.json", "steps.parquet", "summary.json", "status.json"
PROFILE = "profile.pt.trace.json.gz"  # a torch.profiler trace, when profile=true or explain=true
OPS = "ops.json"  # explain=true: each operator's calls and self time a step, and what else train/op_breakdown.py counts
RANKS = "ranks.parquet"  # a run across ranks: every rank's steps (rank, grad_sync, probe); steps.parquet: one's
# a sweep's folder
SWEEP, RUNS, JOBS, REPORT = "sweep.json", "runs.jsonl", "jobs.json", "report.html"
PUBLISHED = "published.yaml"  # the published figures of a sweep file of a config dir's, as the launch found them
BISECT = "bisect.json"  # a bisect's folder: its search, beside its points' sweep folders


def explained_in(sweep_dir: Path) -> Path:
    """The sweep folder `perfsweep explain` launches a sweep again into, with explain=true, inside the sweep's own."""
    return Path(sweep_dir) / f"{Path(sweep_dir).name}-explain"


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


def unwritable(folder: Path, make: bool = True) -> str | None:
    """Why nothing can be written into `folder`, made if it is missing (with make=False: its nearest that exists).

    Reasons include a read-only filesystem or no permission.
    The write is tried, not inferred from the folder's mode.
    The mode does not stop root, and does not show a read-only mount.

    Returns:
        The reason, or None if a file can be written.
    """
    folder = Path(folder)
    try:
        if make:
            folder.mkdir(parents=True, exist_ok=True)
        nearest = next(path for path in (folder, *folder.parents) if path.exists())
        if not nearest.is_dir():
            return f"{nearest} is a file"
        with tempfile.TemporaryFile(dir=nearest):
            pass
    except OSError as error:
        return error.strerror or str(error)
    return None


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


def non_finite_as_none(value: Any) -> Any:
    """`value` with every NaN or infinite float as None.

    JSON has no NaN: Python writes a non-standard `NaN` that other readers refuse.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: non_finite_as_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [non_finite_as_none(v) for v in value]
    return value


def write_json(path: Path, obj: Any) -> None:
    atomic_write(
        path, json.dumps(non_finite_as_none(obj), indent=2, sort_keys=True, default=str, allow_nan=False).encode()
    )


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

# Record file name -> why a record parsed from these bytes is not what it must hold (None: it is).
_CHECKS: dict[str, Callable[[bytes, Any], str | None]] = {}


def declare(name: str, kind: str, shape: Any) -> None:
    """Records named `name` must be JSON of `shape`, as pydantic validates it.

    `shape` is a dataclass or TypedDict; in a JSON-lines file, each line must fit it.
    Validation is strict: a string is never read as a number.
    Fields a record lacks take their defaults (a record written before they were added).
    Fields it has beyond the shape's are left alone.
    A record that does not fit is read as Unreadable("not a valid <kind>: <field>: <why>").
    """
    _CHECKS[name] = functools.partial(_json_misfit, kind, shape, name.endswith(".jsonl"))


@functools.cache
def _adapter(shape: Any):
    from pydantic import TypeAdapter  # at the first record checked, not with this module

    return TypeAdapter(shape)


def _json_misfit(kind: str, shape: Any, by_line: bool, data: bytes, value: Any) -> str | None:
    from pydantic import ValidationError

    lines = enumerate(data.splitlines(), 1) if by_line else [(0, data)]
    for number, line in lines:
        if not line.strip():
            continue
        try:
            _adapter(shape).validate_json(line, strict=True)
        except ValidationError as error:
            return f"not a valid {kind}: {f'line {number}: ' if number else ''}{_said(error)}"
    return None


def _said(error) -> str:
    """A pydantic ValidationError as one line.

    It names the fields that do not fit (the first three), why, and what they hold.
    """
    said = []
    for detail in error.errors(include_url=False)[:3]:
        where = ".".join(map(str, detail["loc"]))
        held = "" if detail["type"] == "missing" else f" (it holds {reprlib.repr(detail['input'])})"
        said.append(f"{where}: {detail['msg']}{held}" if where else f"{detail['msg']}{held}")
    more = error.error_count() - len(said)
    return "; ".join(said) + (f"; and {more} more" if more else "")


def read_record(path: Path) -> Any:
    """The record at `path`: JSON, JSON lines, or a Parquet file opened.

    Returns:
        The record, None if there is none, or Unreadable.
    """
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
        value = _PARSERS[path.suffix](data)
        misfit = _CHECKS[path.name](data, value) if path.name in _CHECKS else None
    except UnicodeDecodeError as error:
        return Unreadable(path, f"not text: {error.reason}")
    except ValueError as error:  # JSON's errors; pyarrow's ArrowInvalid is one too
        return Unreadable(path, f"cut or corrupt: {str(error).splitlines()[0][:200]}")
    except Exception as error:  # pyarrow's other errors
        return Unreadable(path, f"cut or corrupt: {type(error).__name__}: {str(error)[:200]}")
    return Unreadable(path, misfit) if misfit else value


def known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The items of `data` that are fields of the dataclass `cls`.

    A record written by another version may hold more.
    """
    names = {field.name for field in dataclasses.fields(cls)}
    return {key: value for key, value in data.items() if key in names}


def read_json(path: Path) -> Any:
    """A JSON record that must be there and readable: RecordError otherwise."""
    value = read_record(path)
    if value is None:
        raise RecordError(Unreadable(Path(path), "missing"))
    if isinstance(value, Unreadable):
        raise RecordError(value)
    return value


def quarantine(path: Path) -> Path | None:
    """Move an unreadable record aside as NAME.corrupt-<time>.

    Returns:
        Where it went, or None if it could not be moved.
    """
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:
        os.replace(path, aside)
    except OSError:
        return None
    return aside


def write_jsonl(path: Path, lines: list[str]) -> None:
    """Lines already serialised (one JSON value each, see `json_line`) in one file, however many."""
    atomic_write(path, "".join(line + "\n" for line in lines).encode())


def json_line(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def readable_lines(path: Path) -> list[Any]:
    """The lines of a JSON-lines file that can still be read and hold what a line must.

    Of a cut or damaged file, these are the others.
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    check = _CHECKS.get(Path(path).name)
    readable = []
    for line in data.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if check is None or check(line, [value]) is None:
            readable.append(value)
    return readable


def write_steps(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from perfsweep.records.columns import table_of

    sink = pa.BufferOutputStream()
    pq.write_table(table_of(rows), sink)
    atomic_write(path, sink.getvalue().to_pybytes())


def _steps_misfit(data: bytes, steps_file: Any) -> str | None:
    why = _columns_misfit(steps_file.schema_arrow) or _flags_misfit(steps_file)
    return f"not a valid step file: {why}" if why else None


def _columns_misfit(schema: Any) -> str | None:
    """Every reader of a step file takes its columns by name.

    It takes each column once: the step times and every phase's as numbers, the warm-up flags as booleans.
    """
    import pyarrow as pa

    twice = sorted({name for name in schema.names if schema.names.count(name) > 1})
    if twice:
        return f"more than one column named {twice[0]}"
    for column, fits, kind in (("step_ms", _numbers, "numbers"), ("warmup", pa.types.is_boolean, "booleans")):
        if column not in schema.names:
            return f"no column {column}"
        if not fits(schema.field(column).type):
            return f"{column} holds {schema.field(column).type}, not {kind}"
    for field in schema:
        if field.name.endswith("_ms") and not _numbers(field.type):
            return f"{field.name} holds {field.type}, not numbers"
    return None


def _flags_misfit(steps_file: Any) -> str | None:
    """A step file needs a measured step, and every step flagged warm-up or not.

    The views compare measured steps.
    """
    warmup = steps_file.read(columns=["warmup"], use_threads=False).column(0)
    if warmup.null_count:
        return f"{warmup.null_count} of its {len(warmup)} steps have no warmup flag"
    if all(warmup.to_pylist()):
        return f"no measured step ({len(warmup)} steps, all of them warm-up)"
    return None


def _numbers(kind: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


_CHECKS[STEPS] = _steps_misfit


def read_steps(path: Path):
    """A run's steps as a pyarrow Table; RecordError if the file is missing or unreadable."""
    record = read_record(path)
    if not hasattr(record, "read"):
        raise RecordError(record or Unreadable(Path(path), "missing"))
    # One thread: a step file is small, and a process that read with Arrow's pool of threads can abort as it exits,
    # its work done ("terminate called without an active exception", apache/arrow#34314).
    return record.read(use_threads=False)


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
