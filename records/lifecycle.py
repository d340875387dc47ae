"""A run's life: the one writer of its status.json.

A run is pending until it starts, then running, then done or failed.
A run that is stopped or resubmitted is pending again.
A run whose process ended without a final record is failed as lost.
Each function records one change of state and returns the status written.
Every earlier start of a run is kept in its status's `attempts`.
"""

import dataclasses
from pathlib import Path
from typing import Any

from perfsweep.records.files import STATUS, now, write_json
from perfsweep.records.status import DONE, FAILED, FINAL, PENDING, RUNNING, RunError, Status, read_status


def start(run_dir: Path, **launch: Any) -> Status:
    """Record the run running.

    Args:
        run_dir: the run's folder, made here if missing.
        launch: how it was launched (job, host, pid...).

    Returns:
        The status written: `attempts` holds the earlier starts.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    history = read_status(run_dir, move_aside=True).history()
    return _write(run_dir, Status(RUNNING, **{"attempts": history, "started_at": now(), **launch}))


def finish(run_dir: Path, **details: Any) -> Status:
    """Record the run done."""
    return _write(run_dir, Status(DONE, **{"finished_at": now(), **details}))


def fail(run_dir: Path, error: RunError | dict[str, Any], **details: Any) -> Status:
    """Record the run failed, with its error."""
    return _write(run_dir, Status(FAILED, **{"finished_at": now(), "error": error, **details}))


def fail_unless_final(run_dir: Path, error: RunError) -> Status:
    """Record the run failed, unless it recorded its own end.

    The launcher calls this for a run that failed before it could record anything.
    """
    status = read_status(run_dir)
    if status.state in FINAL:
        return status
    run_dir.mkdir(parents=True, exist_ok=True)
    return _write(run_dir, dataclasses.replace(status, state=FAILED, finished_at=now(), error=error))


def stop(run_dir: Path, kind: str, reason: str | None = None, **launch: Any) -> Status:
    """Record a running run pending again: it was stopped by `kind` (for `reason`) and runs again later."""
    interrupted = {"type": kind, "at": now(), **({"reason": reason} if reason else {})}
    return _write(run_dir, Status(PENDING, interrupted=interrupted, **launch))


def stop_unless_recorded(run_dir: Path, kind: str, reason: str) -> Status:
    """Record a running run pending again, stopped by `kind` for `reason`, unless it recorded its own end.

    The launcher calls this for a run whose process it killed.
    How the run was launched (job, host, pid, start) is kept.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    status = read_status(run_dir, move_aside=True)
    if status.state in FINAL or (status.state == PENDING and status.interrupted):
        return status
    interrupted = {"type": kind, "at": now(), "reason": reason}
    return _write(run_dir, dataclasses.replace(status, state=PENDING, interrupted=interrupted))


def leave_pending(run_dir: Path, kind: str, reason: str | None = None) -> Status | None:
    """Record a run its job did not start as pending again.

    Returns:
        The status written, or None for a run already done (by an earlier start of the job).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    status = read_status(run_dir, move_aside=True)
    if status.state == DONE:
        return None
    interrupted = {"type": kind, "at": now(), **({"reason": reason} if reason else {})}
    return _write(run_dir, Status(PENDING, interrupted=interrupted, attempts=status.history()))


def resubmit(run_dir: Path) -> Status | None:
    """Record a run that has a status as pending again, as it is submitted anew.

    Its last state (failed, lost) becomes history.
    Returns None for a run that has no status yet: it is pending already.
    """
    if not (run_dir / STATUS).exists():
        return None
    history = read_status(run_dir, move_aside=True).history()
    return _write(run_dir, Status(PENDING, resubmitted_at=now(), attempts=history))


def lose(run_dir: Path, error: RunError, **fields: Any) -> Status:
    """Record the run failed as lost: its process ended without its final records.

    Args:
        run_dir: the run's folder.
        error: what ended it (LostRun, or RunTimeout when killed past its limit).
        fields: details to add, such as the job's id.
    """
    run_dir.mkdir(exist_ok=True)
    status = read_status(run_dir, move_aside=True)
    return _write(run_dir, dataclasses.replace(status, state=FAILED, finished_at=now(), error=error, **fields))


def _write(run_dir: Path, status: Status) -> Status:
    status = dataclasses.replace(status, updated_at=now())
    write_json(Path(run_dir) / STATUS, status.to_json())
    return status
