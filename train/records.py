"""A run's records on disk: the source of truth that W&B and analysis are views of.

    <sweep_dir>/sweep.json             the sweep: uid, the planned run names, launches
    <sweep_dir>/runs.jsonl             every planned run's config.json content, a line each
    <sweep_dir>/jobs.json              the job each submitted run went to: job id, log
    <sweep_dir>/<run>/config.json      resolved config, run id, axes
    <sweep_dir>/<run>/env.json         versions, device, host, git commit, Slurm job id
    <sweep_dir>/<run>/steps.parquet    one row per step (warm-up rows flagged)
    <sweep_dir>/<run>/summary.json     medians per phase, samples/s, memory, losses
    <sweep_dir>/<run>/status.json      pending | running | done | failed (+ error, traceback)
    <sweep_dir>/<run>/profile.pt.trace.json.gz   a torch.profiler trace of 3 steps (profile=true)

Every file is written to a temporary name and renamed into place, so a reader
sees the old file or the new one, never half of one, even when the writer is
killed. (No fsync: records need not survive a crash of the machine itself, and
planning thousands of runs would wait on the disk for each.)
"""

import datetime
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

CONFIG, ENV, STEPS, SUMMARY, STATUS = "config.json", "env.json", "steps.parquet", "summary.json", "status.json"
SWEEP, RUNS, JOBS = "sweep.json", "runs.jsonl", "jobs.json"
STATES = ("pending", "running", "done", "failed")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def write_jsonl(path: Path, rows: list[Any]) -> None:
    atomic_write(path, "".join(json.dumps(row, sort_keys=True, default=str) + "\n" for row in rows).encode())


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_steps(path: Path, rows: list[dict[str, Any]]) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    atomic_write(path, sink.getvalue().to_pybytes())


def read_steps(path: Path) -> pa.Table:
    return pq.read_table(path)


def write_status(run_dir: Path, state: str, **details: Any) -> None:
    if state not in STATES:
        raise ValueError(f"unknown run state {state!r}; states: {', '.join(STATES)}")
    write_json(run_dir / STATUS, {"state": state, "updated_at": now(), **details})


def planned_runs(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """What runs.jsonl holds: run name -> its config record (as config.json has it once the run starts)."""
    path = sweep_dir / RUNS
    return {row["name"]: row for row in read_jsonl(path)} if path.exists() else {}


def read_status(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STATUS
    return read_json(path) if path.exists() else {"state": "pending"}
