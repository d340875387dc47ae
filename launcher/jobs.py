"""What a submitted job executes: one or more runs, each with its own records.

The job runs them in one of two ways:

- launcher.isolation=fork (launcher/warm.py): the job imports what runs need once, and forks a child per run.
- spawn: the job's own process runs them one after another.

The job is checkpointable.
Slurm sends SIGUSR2 when it preempts the job or the job's time runs out.
submitit then requeues the same pack.
On the next start, the runs already done are skipped.
The interrupted one starts over: its records are replaced, never duplicated.

A job stops early where going on would lie.
It then exits non-zero, with why as its log's last line.
It stops:

- when a run's records cannot be written (a full or failing disk);
- with spawn, after a CUDA error, which leaves the process's CUDA context unusable.

After such an error, every later run of the pack would fail with it as its own.
So they are left pending, with the reason, for a resume to run in a fresh process.
"""

import copy
import os
import socket
import subprocess
import sys
import time
from typing import Any

import submitit

from perfsweep import records, user_command
from perfsweep.launcher.process_end import end_at_exit, in_own_job_process
from perfsweep.launcher.run_job import (
    RunJob,
    Runner,
    again_after_timeout,
    every_run,
    execute_run,
    leave_over_budget,
    leave_pending,
)
from perfsweep.launcher.slots import Place
from perfsweep.launcher.warm import fork_runs


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
    tasks = {"tasks": env.num_tasks} if env.num_tasks > 1 else {}  # a run's ranks, one a task (train/ranks/start.py)
    return {"job_id": env.job_id, "host": env.hostname, "log": log, **tasks}


def process_info() -> dict[str, Any]:
    """The process a run executes in: what to signal, or to look for, when it hangs."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def sticky_cuda_error(error: BaseException) -> bool:
    """Whether `error` is a CUDA error after which the process's CUDA context is unusable.

    Examples are an illegal address or a device-side assert.
    A CUDA out-of-memory from torch's allocator is not one: the next run can go on.
    """
    return type(error).__name__ == "AcceleratorError" or "CUDA error" in str(error)


def stop_job(job_id: str, name: str) -> None:
    """End the job of run `name`, which failed and is recorded so.

    Ending it also ends the run's other ranks, its other tasks.
    One may be waiting for this one's rendezvous, and would wait for dist.timeout_s.
    A task that fails does not stop the others, this one among them.
    It fails the run in its collectives instead.
    This task records that before it ends the job.
    """
    print(
        f"perfsweep: run {name} failed; its job ({job_id}) ends, its other ranks with it", file=sys.stderr, flush=True
    )
    subprocess.run(["scancel", job_id], check=False)


class RunPack(submitit.helpers.Checkpointable):
    """Run each run of a job's pack.

    - isolation=fork: each in a child forked from this warm job.
      `parallelism` run at a time, each pinned to one of `gpus` if given.
    - spawn: one after another in this process.

    Where jobs at once share this host's CPUs, the pack runs on `cpus`.
    """

    def __init__(self, runner: Runner, isolation: str = "spawn", parallelism: int = 1, gpus: tuple[int, ...] = ()):
        self.runner, self.isolation, self.parallelism, self.gpus = runner, isolation, parallelism, tuple(gpus)
        self.cpus: tuple[int, ...] | None = None
        # When the last run this process ran ended: the next one's start-up counts from there.
        # The first run's start-up counts from the process's start.
        # It outlives a pack: launcher=debug runs every pack in the launcher's process.
        self.last_run_ended: float | None = None

    def on_cpus(self, cpus: tuple[int, ...] | None) -> "RunPack":
        """This pack, its job run on `cpus`.

        With None, it is this pack itself, on all of its host's CPUs.
        """
        if cpus is None:
            return self
        placed = copy.copy(self)
        placed.cpus = cpus
        return placed

    def __call__(self, runs: list[RunJob]) -> dict[str, str]:
        states = self._run(runs)
        if in_own_job_process():  # its work done: submitit records what it returns, then the process ends at once
            end_at_exit()
        return states

    def _run(self, runs: list[RunJob]) -> dict[str, str]:
        Place(cpus=self.cpus).enter()
        info = {**process_info(), **job_info()}
        if info.get("tasks"):
            # A run across ranks, a rank a task: torch.distributed's rendezvous (env://) on the job's first node.
            # A MASTER_PORT already set by launcher.setup is kept; RANK and the rest are the task's.
            rendezvous = submitit.helpers.TorchDistributedEnvironment()
            environment = rendezvous.export(set_cuda_visible_devices=False, overwrite=True)
            if environment.rank > 0:
                return self._as_rank(runs)
        if self.isolation == "fork":
            states = fork_runs(self.runner, runs, self.parallelism, self.gpus, info)
        else:
            states = self._in_this_process(runs, info)
        if info.get("tasks") and records.FAILED in states.values():
            stop_job(info["job_id"], runs[0].spec.name)
        return states

    def _in_this_process(self, runs: list[RunJob], info: dict[str, Any]) -> dict[str, str]:
        states, took_s = {}, []
        for index, run in enumerate(runs):
            name = run.spec.name
            if all(records.read_status(side.run_dir).state == records.DONE for side in run.every):  # an earlier start
                states |= {side.spec.name: records.DONE for side in run.every}
                continue
            if leave_over_budget([run], took_s):
                states |= {side.spec.name: records.PENDING for side in run.every}
                continue
            began = time.monotonic()
            error = execute_run(self.runner, run, {**info, "ready_since": self.last_run_ended})
            self.last_run_ended = time.time()
            while error and again_after_timeout(run):
                error = execute_run(self.runner, run, {**info, "ready_since": self.last_run_ended})
                self.last_run_ended = time.time()
            took_s.append(time.monotonic() - began)
            states |= {side.spec.name: ended_state(side, error) for side in run.every}
            if error and sticky_cuda_error(error) and runs[index + 1 :]:
                line = records.RunError(type(error).__name__, str(error)).line(200)
                why = f"run {name} hit a CUDA error in this process: {line}"
                left = leave_pending(every_run(runs[index + 1 :]), "CudaError", why)
                raise SystemExit(
                    f"perfsweep: run {name} hit a CUDA error, which leaves this process's GPU unusable; the pack's "
                    f"{left} later runs are pending again: `{user_command()} resume {run.run_dir.parent}` runs them"
                ) from error
        return states

    def _as_rank(self, runs: list[RunJob]) -> dict[str, str]:
        """A task of the run's job other than its first: one of its ranks.

        The first task records the run.
        It also records its failure where this rank's failure ends it.
        This task's log has the rank's own error.
        """
        (run,) = runs  # a job whose tasks are ranks runs one run (launcher/submit.py)
        if records.read_status(run.run_dir).state == records.DONE:  # by an earlier start of this job
            return {}
        self.runner.rank(run.spec)
        return {}


def ended_state(run: RunJob, error: BaseException | None) -> str:
    """A run's state once its process has returned: its status's, where final (a side may fail alone) or pending
    as the budget stopped it."""
    status = records.read_status(run.run_dir)
    if status.state in records.FINAL or status.over_budget:
        return status.state
    return records.FAILED if error else records.DONE
