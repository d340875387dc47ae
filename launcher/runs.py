"""A run as a job holds it, and what a job does with one: run it, leave it pending, or record it lost.

Shared by the two ways a job runs its runs (launcher/jobs.py: one after another in the job's process;
launcher/warm.py: each in a child forked from the job).
"""

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import records
from sweeps.spec import RunSpec

# What executes a run: (spec, run folder, W&B run id, the launch's details for its status) -> anything.
RunFunction = Callable[[RunSpec, Path, str, dict[str, Any]], Any]


def nothing(*args: Any) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Runner:
    """What runs the runs, handed over by launch.py (train.run's functions): the launcher never imports them."""

    execute: RunFunction
    warm: Callable[[list[RunSpec]], None] = nothing  # imports what these runs need, in a job that forks them
    fork_hazard: Callable[[], str | None] = nothing  # what would leak into a child forked now (None: nothing)


@dataclasses.dataclass(frozen=True)
class RunJob:
    """One run as a job hands it to train: the spec, its folder, its W&B id, how many jobs run at once."""

    spec: RunSpec
    run_dir: Path
    tracker_id: str
    parallelism: int


def run_one(execute: RunFunction, run: RunJob, info: dict[str, Any]) -> Exception | None:
    """Run `run` (its failure is recorded by `execute`); the error it failed with, or None.
    SystemExit, with why, if its records cannot be written: the job must not go on as if it had."""
    try:
        execute(run.spec, run.run_dir, run.tracker_id, {"parallelism": run.parallelism, **info})
        return None
    except records.RecordWriteError as error:
        raise SystemExit(f"perfsweep: run {run.spec.name}: its records cannot be written: {error}") from error
    except Exception as error:
        line = records.RunError(type(error).__name__, str(error)).line(200)
        print(f"perfsweep: run {run.spec.name} failed: {line} (its status.json has the traceback)", file=sys.stderr)
        return error


def leave_pending(runs: list[RunJob], kind: str, reason: str | None = None) -> int:
    """Record runs not started as pending again, interrupted (by `kind`, for `reason`); how many."""
    interrupted = {"type": kind, "at": records.now(), **({"reason": reason} if reason else {})}
    for run in runs:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        history = records.read_status(run.run_dir, move_aside=True).history()
        records.write_status(run.run_dir, records.PENDING, interrupted=interrupted, attempts=history)
    return len(runs)


def log_tail(path: Path | str | None, lines: int = 5) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").strip().splitlines()[-lines:]) if path else ""
    except OSError:
        return ""


def lost(run_dir: Path, what: str, log: Path | str | None, **fields: Any) -> records.Status:
    """The status of a run whose process ended without its final records (`what` ended, and how): failed as
    LostRun, quoting its log's last line (where a job that stops itself says why) and keeping its last lines."""
    run_dir.mkdir(exist_ok=True)
    tail = log_tail(log)
    last = f": {tail.splitlines()[-1].strip()}" if tail else " (killed, timed out or cancelled?)"
    message = f"{what} ended before the run finished{last}; log: {log}"
    return dataclasses.replace(
        records.read_status(run_dir, move_aside=True),
        state=records.FAILED,
        finished_at=records.now(),
        error=records.RunError("LostRun", message, tail),
        **fields,
    )
