"""Loads a sweep folder's run records."""

import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sweeps.spec import flatten
from train import records


@dataclasses.dataclass
class RunRecord:
    path: Path  # the run's folder
    name: str
    run_id: str
    axes: dict[str, str]
    baseline: dict[str, str]  # the axis the run is compared along, and the baseline's value
    fields: dict[str, Any]  # the run's config, flattened (model.batch_size, steps, ...)
    status: dict[str, Any]
    summary: dict[str, Any] | None
    env: dict[str, Any] | None

    @property
    def state(self) -> str:
        return self.status["state"]

    def error_line(self, limit: int = 300) -> str:
        """A failed run's error as `Type: first line of its message`, cut to `limit` characters."""
        error = self.status.get("error") or {}
        message = (error.get("message") or "").strip().splitlines()
        line = f"{error.get('type', '?')}: {message[0]}" if message else error.get("type", "?")
        return line if len(line) <= limit else line[: limit - 3] + "..."


def _optional_json(path: Path) -> Any:
    return records.read_json(path) if path.exists() else None


def load_run(run_dir: Path, planned: dict[str, Any] | None = None) -> RunRecord:
    """A run's records; `planned` (its line of runs.jsonl) stands in for config.json until the run starts."""
    path = run_dir / records.CONFIG
    config = records.read_json(path) if path.exists() or planned is None else planned
    status = records.read_status(run_dir)
    if status["state"] == "done":
        pq.read_metadata(run_dir / records.STEPS)  # a done run's steps must be readable: a cut file raises here
    return RunRecord(
        path=run_dir,
        name=run_dir.name,
        run_id=config["run_id"],
        axes=config["axes"],
        baseline=config["baseline"],
        fields=flatten(config["config"]),
        status=status,
        summary=_optional_json(run_dir / records.SUMMARY),
        env=_optional_json(run_dir / records.ENV),
    )


_warned: set[tuple[Path, str]] = set()


def load_sweep(sweep_dir: Path, names: list[str] | None = None) -> list[RunRecord]:
    """Every run in `sweep_dir` (or the named ones); an unreadable run is skipped with a warning naming it."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"no sweep folder at {sweep_dir}")
    planned = records.planned_runs(sweep_dir)
    if names is None:
        names = sorted(set(planned) | {p.parent.name for p in sweep_dir.glob(f"*/{records.CONFIG}")})
    runs = []
    for run_dir in (sweep_dir / name for name in names):
        try:
            runs.append(load_run(run_dir, planned.get(run_dir.name)))
        except (OSError, json.JSONDecodeError, KeyError, pa.ArrowException) as error:
            message = f"skipping run {run_dir.name}: unreadable records ({error})"
            if (run_dir, message) not in _warned:  # one warning per run, however many views load the sweep
                _warned.add((run_dir, message))
                warnings.warn(message, stacklevel=2)
    return runs
