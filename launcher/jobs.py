"""What a submitted job executes: one or more runs, one after another, each with its own records.

The job is checkpointable: when Slurm preempts it or its time runs out (SIGUSR2), submitit
requeues the same pack; on the next start the runs already done are skipped and the
interrupted one starts over, its records replaced, never duplicated.

A job stops early, exiting non-zero with why as its log's last line, where going on would lie: when a run's
records cannot be written (a full or failing disk), and after a CUDA error, which leaves the process's CUDA
context unusable: every later run of the pack would fail with that error as its own, so they are left
pending (with the reason) for a resume to run in a fresh process.
"""

import dataclasses
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import submitit

import records
from sweeps.spec import RunSpec

# What executes a run: (spec, run folder, W&B run id, the launch's details for its status) -> anything.
# launch.py hands the launcher train.run.execute; the launcher never imports the run itself.
RunFunction = Callable[[RunSpec, Path, str, dict[str, Any]], Any]


@dataclasses.dataclass(frozen=True)
class RunJob:
    """One run as a job hands it to train: the spec, its folder, its W&B id, how many jobs run at once."""

    spec: RunSpec
    run_dir: Path
    tracker_id: str
    parallelism: int


def job_info() -> dict[str, Any]:
    """The scheduler's view of this job, for the run's status: job id, host, log file."""
    try:
        env = submitit.JobEnvironment()
    except RuntimeError:  # not in a submitit job (a pack called directly)
        return {}
    if not env.activated():
        return {}
    # The debug executor runs a job inside the launcher: no job folder, no log of its own.
    log = str(env.paths.stdout) if "SUBMITIT_FOLDER" in os.environ else None
    return {"job_id": env.job_id, "host": env.hostname, "log": log}


def process_info() -> dict[str, Any]:
    """The process a run executes in: what to signal, or to look for, when it hangs."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def sticky_cuda_error(error: BaseException) -> bool:
    """A CUDA error (an illegal address, a device-side assert...), after which the process's CUDA context is
    unusable. (A CUDA out-of-memory from torch's allocator is not one: the next run can go on.)"""
    return type(error).__name__ == "AcceleratorError" or "CUDA error" in str(error)


class RunPack(submitit.helpers.Checkpointable):
    """Run each run in turn with `execute`; a run that raises is recorded as failed (by `execute`) and the next
    one goes on, unless the process cannot go on (see the module's docstring)."""

    def __init__(self, execute: RunFunction):
        self.execute = execute

    def __call__(self, runs: list[RunJob]) -> dict[str, str]:
        states = {}
        info = {**process_info(), **job_info()}
        for index, run in enumerate(runs):
            name = run.spec.name
            try:
                if records.read_status(run.run_dir).state == records.DONE:  # by an earlier start of this job
                    states[name] = records.DONE
                    continue
                self.execute(run.spec, run.run_dir, run.tracker_id, {"parallelism": run.parallelism, **info})
                states[name] = records.DONE
            except records.RecordWriteError as error:
                raise SystemExit(f"perfsweep: run {name}: its records cannot be written: {error}") from error
            except Exception as error:
                states[name] = records.FAILED
                line = records.RunError(type(error).__name__, str(error)).line(200)
                print(f"perfsweep: run {name} failed: {line} (its status.json has the traceback)", file=sys.stderr)
                if sticky_cuda_error(error) and runs[index + 1 :]:
                    left = leave_pending(runs[index + 1 :], f"run {name} hit a CUDA error in this process: {line}")
                    raise SystemExit(
                        f"perfsweep: run {name} hit a CUDA error, which leaves this process's GPU unusable; the "
                        f"pack's {left} later runs are pending again: `perfsweep resume` runs them"
                    ) from error
        return states


def leave_pending(runs: list[RunJob], reason: str) -> int:
    """Record runs not started as pending again, with why; how many."""
    interrupted = {"type": "CudaError", "at": records.now(), "reason": reason}
    for run in runs:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        history = records.read_status(run.run_dir, move_aside=True).history()
        records.write_status(run.run_dir, records.PENDING, interrupted=interrupted, attempts=history)
    return len(runs)
