"""A sweep folder's own files: its manifest (sweep.json), its planned runs (runs.jsonl), their jobs (jobs.json)."""

import json
from pathlib import Path
from typing import Any

from records.files import JOBS, RUNS, SWEEP, read_json, read_jsonl, write_json, write_jsonl


def read_manifest(sweep_dir: Path) -> dict[str, Any] | None:
    """sweep.json: uid, created_at, runs (name -> run id), launches (at, argv, runs); None before the first launch."""
    path = Path(sweep_dir) / SWEEP
    return read_json(path) if path.exists() else None


def planned_runs(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """What runs.jsonl holds: run name -> its config record (as config.json has it once the run starts)."""
    path = Path(sweep_dir) / RUNS
    return {row["name"]: row for row in read_jsonl(path)} if path.exists() else {}


def write_planned(sweep_dir: Path, lines: dict[str, str]) -> None:
    """Add runs to runs.jsonl: run name -> its config record as one JSON line (`json_line`); a run planned
    again replaces its line, the other lines are kept as they are."""
    path = Path(sweep_dir) / RUNS
    kept = [line for line in (path.read_text().splitlines() if path.exists() else []) if line.strip()]
    write_jsonl(path, [line for line in kept if json.loads(line)["name"] not in lines] + list(lines.values()))


def record_jobs(sweep_dir: Path, jobs: dict[str, dict[str, Any]]) -> None:
    """Note which job each run was submitted to (run name -> job id, log, launcher)."""
    path = Path(sweep_dir) / JOBS
    write_json(path, {**(read_json(path) if path.exists() else {}), **jobs})


def submitted_jobs(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    path = Path(sweep_dir) / JOBS
    return read_json(path) if path.exists() else {}
