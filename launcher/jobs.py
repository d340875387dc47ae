"""What a submitted job executes: one or more runs, one after another, each with its own records.

The job is checkpointable: when Slurm preempts it or its time runs out (SIGUSR2), submitit
requeues the same pack; on the next start the runs already done are skipped and the
interrupted one starts over, its records replaced, never duplicated.
"""

import dataclasses
import os
import socket
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
    env = submitit.JobEnvironment()
    if not env.activated():
        return {}
    # The debug executor runs a job inside the launcher: no job folder, no log of its own.
    log = str(env.paths.stdout) if "SUBMITIT_FOLDER" in os.environ else None
    return {"job_id": env.job_id, "host": env.hostname, "log": log}


def process_info() -> dict[str, Any]:
    """The process a run executes in: what to signal, or to look for, when it hangs."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


class RunPack(submitit.helpers.Checkpointable):
    """Run each run in turn with `execute`; a run that raises is recorded as failed and the next one goes on."""

    def __init__(self, execute: RunFunction):
        self.execute = execute

    def __call__(self, runs: list[RunJob]) -> dict[str, str]:
        states = {}
        info = {**process_info(), **job_info()}
        for run in runs:
            try:
                if records.read_status(run.run_dir).state == records.DONE:  # by an earlier start of this job
                    states[run.spec.name] = records.DONE
                    continue
                self.execute(run.spec, run.run_dir, run.tracker_id, {"parallelism": run.parallelism, **info})
                states[run.spec.name] = records.DONE
            except Exception:
                states[run.spec.name] = records.FAILED
        return states
