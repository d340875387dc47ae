"""A run as a job holds it, and what a job does with one: run it, leave it pending, or record it lost.

The two ways a job runs its runs share it:

- launcher/jobs.py runs them one after another in the job's process;
- launcher/warm.py runs each in a child forked from the job.
"""

import contextlib
import dataclasses
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfsweep import records
from perfsweep.launcher.turns import Turn
from perfsweep.records import lifecycle
from perfsweep.sweeps.spec import RunSpec

# What executes a run: (spec, run folder, W&B run id, the launch's details for its status) -> anything.
RunFunction = Callable[[RunSpec, Path, str, dict[str, Any]], Any]


def no_imports(specs: list[RunSpec]) -> list[str]:
    return []


@dataclasses.dataclass(frozen=True)
class Runner:
    """What runs the runs: train.instrumented's functions, handed over by launch.py.

    The launcher never imports them itself.
    """

    execute: RunFunction
    # the modules these runs import once they run, which a job that forks them imports first, once
    imports: Callable[[list[RunSpec]], list[str]] = no_imports
    # What a task of a run's job other than its first runs (launcher=slurm, dist=ddp/fsdp).
    # Such a task is one of the run's ranks: it measures its steps and hands them to the first task.
    # The first task records the run.
    rank: Callable[[RunSpec], Any] | None = None
    # What executes the sides of a comparison in one process (paired): [(spec, folder, W&B id)], launch.
    execute_sides: Callable[[list[tuple[RunSpec, Path, str]], dict[str, Any]], Any] | None = None


@dataclasses.dataclass(frozen=True)
class RunJob:
    """One run as a job hands it to train.

    It holds:

    - the spec, its folder and its W&B id;
    - how many jobs run at once;
    - on this host, its time limit, and how many times it runs again after reaching it.
    """

    spec: RunSpec
    run_dir: Path
    tracker_id: str
    parallelism: int
    limit_s: float | None = None  # None: no limit of its own (on Slurm, the cluster limits the job)
    timeout_retries: int = 0
    python: str | None = None  # the Python of the run's environment (launcher/envs.py); None: the launcher's own
    # launcher=slurm, dist=ddp/fsdp: the run's ranks are its job's tasks, this many a node (None: one task)
    ranks_per_node: int | None = None
    code: dict[str, str] | None = None  # the launch's snapshot of the code (module -> content hash), for its status
    # The launch's code under test and CI run, for its status: {"code_under_test": ..., "ci": ...}
    origin: dict[str, Any] | None = None
    # The other sides of its comparison that this run's process measures beside it (paired).
    sides: tuple["RunJob", ...] = ()
    # Where warm jobs' runs take turns (launcher/turns.py): this run's turn; None: no turns.
    turn: Turn | None = None
    until: float | None = None  # unix time by which the launch's processes end (launcher.budget_s); None: no budget

    @property
    def every(self) -> tuple["RunJob", ...]:
        """This run and the sides its process measures beside it."""
        return (self, *self.sides)


def every_run(runs: list[RunJob]) -> list[RunJob]:
    """Each run of `runs`, and each side that shares a process with one of them."""
    return [side for run in runs for side in run.every]


# A run past its time limit stops itself: RunTimeout, recorded with where it was.
# A run stuck in a C call waits for Python's signal handler, so it may not stop.
# Its job kills one that has not stopped this long after.
GRACE_S = 30.0
BUDGET_GRACE_S = 5.0  # and one that has not stopped this long after the launch's budget ran out


class RunTimeout(records.Stopped):
    """The run reached its time limit (launcher.timeout_min) and was stopped."""


TIMEOUT = RunTimeout.__name__  # the error type a timed-out run's status records
SLURM_WARNING_S = 90  # Slurm signals a job (SIGUSR2, submitit's) this long before its time limit
SLURM_EARLY_S = 60  # and up to this much earlier: Slurm sends it at its own pace


def slurm_time_left_s() -> float | None:
    """The seconds Slurm leaves this job before its time limit (squeue's %L); None outside Slurm or unknown."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        left = subprocess.run(["squeue", "-h", "-o", "%L", "-j", job], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    days, _, clock = left.stdout.strip().rpartition("-")
    parts = clock.split(":")
    if not all(part.isdigit() for part in [*parts, *([days] if days else [])]) or not 1 <= len(parts) <= 3:
        return None  # UNLIMITED, NOT_SET, INVALID, or nothing
    seconds = sum(int(part) * 60**power for power, part in enumerate(reversed(parts)))
    return seconds + 86400 * int(days or 0)


def at_time_limit() -> bool:
    """Whether Slurm's SIGUSR2 to this job is its warning of the time limit, not a preemption.

    squeue is asked up to three times: a busy controller can fail to answer once.
    What was read goes to the job's log.
    """
    left = slurm_time_left_s()
    for _ in range(2):
        if left is not None or not os.environ.get("SLURM_JOB_ID"):
            break
        time.sleep(0.5)
        left = slurm_time_left_s()
    read = "unknown" if left is None else f"{left:g} s"
    print(f"perfsweep: SIGUSR2 with {read} of the job's time left (squeue %L)", file=sys.stderr, flush=True)
    return left is not None and left <= SLURM_WARNING_S + SLURM_EARLY_S


SPENT = "launcher.budget_s: the launch's budget ran out before this run's process started"


@contextlib.contextmanager
def time_limit(run: RunJob):
    """Stop the run at its time limit (`run.limit_s` seconds for each of its sides) or at the launch's budget
    (`run.until`), whichever comes first.

    An interval timer (SIGALRM) raises RunTimeout or BudgetSpent in the run.
    Past its time limit, the run records itself failed, with the traceback of where it was.
    Past the budget, it records itself pending, as a run the budget left unstarted is.
    The run stops the timer once its outcome is known.
    So recording it, and W&B after it, are never cut short.
    Python's signal handlers run on the main thread only.
    A run on another thread (a debug launch from a thread) has no limit, and says so.
    """
    seconds = run.limit_s * len(run.every) if run.limit_s is not None else None  # the limit for each side
    left = run.until - time.time() if run.until is not None else None
    if seconds is None and left is None:
        yield
        return
    if left is not None and left <= 0:
        raise records.BudgetSpent(SPENT)
    if threading.current_thread() is not threading.main_thread():
        print(f"perfsweep: run {run.spec.name} runs off the main thread: no time limit", file=sys.stderr)
        yield
        return
    budget_first = left is not None and (seconds is None or left < seconds)
    began = time.monotonic()

    def reached(signum, frame) -> None:
        if budget_first:
            raise records.BudgetSpent(
                f"launcher.budget_s: the launch's budget ran out {time.monotonic() - began:.1f} s into this run's "
                "process, before its steps were done"
            )
        sides = f" for its {len(run.every)} sides" if run.sides else ""
        minutes = f"launcher.timeout_min={run.limit_s / 60:g} ({seconds:g} s{sides})"
        raise RunTimeout(f"the run reached its time limit, {minutes}, and was stopped")

    previous = signal.signal(signal.SIGALRM, reached)
    try:
        signal.setitimer(signal.ITIMER_REAL, left if budget_first else seconds)
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def unrecordable(run: RunJob, error: OSError) -> SystemExit:
    """The job must stop, with why as its log's last line.

    Going on as if the run's records were written would lie.
    """
    return SystemExit(f"perfsweep: run {run.spec.name}: its records cannot be written: {error}")


def ignore_later_interrupts(signum, frame) -> None:
    """Interrupt on the first Ctrl-C only.

    Ctrl-C reaches a run, and a job, twice: from the terminal, then passed on by the job or the launcher.
    The first one interrupts.
    Later ones are ignored, so they cannot cut short the recording of the first.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


@contextlib.contextmanager
def first_interrupt_only():
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = signal.signal(signal.SIGINT, ignore_later_interrupts)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def execute_run(runner: Runner, run: RunJob, info: dict[str, Any]) -> BaseException | None:
    """Run `run` (with its sides, in one process) within its time limit.

    The runner's function records the run's failure.
    A run can fail before it records anything: its folder or status could not be made or read.
    Its failure is recorded here.

    Returns:
        The error the run failed with, or that stopped it (BudgetSpent: left pending, no failure), or None.

    Raises:
        SystemExit: with why, if its records cannot be written.
    """
    launch = {"parallelism": run.parallelism, "code": run.code, **(run.origin or {}), **info}
    try:
        with first_interrupt_only(), time_limit(run):
            if run.sides:  # a side done by an earlier start of this process (a requeue) keeps its records
                left = [side for side in run.every if records.read_status(side.run_dir).state != records.DONE]
                runner.execute_sides([(side.spec, side.run_dir, side.tracker_id) for side in left], launch)
            else:
                runner.execute(run.spec, run.run_dir, run.tracker_id, launch)
        return None
    except records.RecordWriteError as error:
        raise unrecordable(run, error) from error
    except records.BudgetSpent as error:  # pending, as the runs the budget leaves unstarted: no failure
        # a side that failed alone keeps its failure; one that recorded how the budget stopped it keeps that
        recorded = [records.read_status(side.run_dir) for side in run.every]
        unrecorded = [side for side, status in zip(run.every, recorded, strict=True)
                      if not status.over_budget and status.state not in records.FINAL]  # fmt: skip
        leave_pending(unrecorded, records.BUDGET, str(error))
        print(f"perfsweep: run {run.spec.name}: {error}", file=sys.stderr)
        return error
    except (Exception, records.Stopped) as error:  # its own error, or its time limit (RunTimeout)
        failure = records.RunError(type(error).__name__, str(error), traceback.format_exc())
        for side in run.every:
            _record_failure(side, failure)
        print(f"perfsweep: run {run.spec.name} failed: {failure.line(200)} (its status.json has the traceback)",
              file=sys.stderr)  # fmt: skip
        return error


def _record_failure(run: RunJob, failure: records.RunError) -> None:
    try:
        lifecycle.fail_unless_final(run.run_dir, failure)
    except OSError as error:
        raise unrecordable(run, error) from error


def leave_over_budget(runs: list[RunJob], took_s: list[float], what: str = "process") -> bool:
    """Leave the runs (a process's, or a job's) pending where they would end past the launch's budget; whether so.

    They would where the budget has run out, or where the median of `took_s`, what each earlier process (or job)
    took, runs past it from now.
    Where nothing has ended yet, nothing is known to cost: they start (and the budget stops them if it runs out).
    """
    until = runs[0].until if runs else None
    if until is None:
        return False
    cost = statistics.median(took_s) if took_s else None
    if time.time() >= until:
        why = SPENT
    elif cost is None or time.time() + cost <= until:
        return False
    else:
        why = f"launcher.budget_s: a {what} takes about {cost:.1f} s here, past the launch's budget"
    leave_pending(every_run(runs), records.BUDGET, why)
    return True


def leave_pending(runs: list[RunJob], kind: str, reason: str | None = None) -> int:
    """Record runs not started as pending again, interrupted by `kind` for `reason`.

    Returns:
        How many were left pending: a run done by an earlier start of the job stays done.
    """
    return sum(lifecycle.leave_pending(run.run_dir, kind, reason) is not None for run in runs)


def again_after_timeout(run: RunJob, status: records.Status | None = None) -> bool:
    """Whether the run failed by reaching its time limit and has retries left.

    launcher.timeout_retries counts every timeout the run has had, across launches.
    `status` is the run's status; it is read now if not given.
    """
    status = records.read_status(run.run_dir) if status is None else status
    if status.state != records.FAILED or status.error is None or status.error.type != TIMEOUT:
        return False
    return sum(attempt.get("error") == TIMEOUT for attempt in status.attempts) < run.timeout_retries


def log_tail(path: Path | str | None, lines: int = 5) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").strip().splitlines()[-lines:]) if path else ""
    except OSError:
        return ""


SLURM_END = re.compile(r"\*\*\* JOB \S+ ON \S+ (CANCELLED AT \S+(?: DUE TO [A-Z ]+?)?)(?: \*\*\*|$)")


def slurm_end(log: Path | str | None) -> str:
    """How Slurm says it ended a job, from the job's log (or its stderr beside it): 'CANCELLED AT 2026-... DUE TO TIME
    LIMIT'; "" where it says nothing."""
    if not log:
        return ""
    paths = [Path(log)]
    if paths[0].name.endswith("_log.out"):
        paths.append(paths[0].with_name(paths[0].name.removesuffix("_log.out") + "_log.err"))
    said = [found[1] for path in paths for line in log_tail(path, 30).splitlines() if (found := SLURM_END.search(line))]
    return said[-1] if said else ""


def _ended_before(what: str, log: Path | str | None, before: str, how: str = "") -> tuple[str, str]:
    """A message that `what` ended before the run `before`, and the log's last lines.

    The message says `how` it ended, where that is known, or as Slurm's log says.
    It quotes the log's last line: a job that stops itself says why there.
    """
    how = how or slurm_end(log)
    tail = log_tail(log)
    guess = "" if how else " (killed, timed out or cancelled?)"
    last = f": {tail.splitlines()[-1].strip()}" if tail else guess
    where = f"; log: {log}" if log else ""
    return f"{what}{f' ({how})' if how else ''} ended before the run {before}{last}{where}", tail


def lost(
    run_dir: Path, what: str, log: Path | str | None, kind: str = "LostRun", how: str = "", **fields: Any
) -> records.Status:
    """Record a run whose process ended without its final records as failed.

    Args:
        what: what ended (a job, a process).
        kind: LostRun, or RunTimeout where it was killed past its limit.
        how: how it ended, where that is known.

    Returns:
        The status written, which keeps its log's last lines.
    """
    message, tail = _ended_before(what, log, "finished", how)
    return lifecycle.lose(run_dir, records.RunError(kind, message, tail), **fields)


def never_started(run: RunJob, what: str, log: Path | str | None) -> records.Status:
    """Record a run whose job ended before it started as what it is: pending, with why.

    It is never lost: it never ran.
    """
    leave_pending([run], "JobEnded", _ended_before(what, log, "started")[0])
    return records.read_status(run.run_dir)
