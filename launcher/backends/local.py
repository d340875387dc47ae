"""launcher=local: jobs on this host, each a process that submitit's local executor starts.

LocalSpawn runs a job's runs one after another in the job's own process.
LocalFork starts one warm job that forks a child per run (launcher/warm.py).
Jobs at once each get a share of this host's CPUs, and a GPU where runs are pinned.
A job's id is its pid; its start time tells it from a later process with the same pid.
"""

import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import submitit

from perfsweep import user_command
from perfsweep.conf.schema import UNLIMITED_MIN, LauncherConf
from perfsweep.launcher.backends.base import Backend, JobShape, SchedulerUnavailable, across_ranks
from perfsweep.launcher.jobs import RunPack
from perfsweep.launcher.run_job import GRACE_S, RunJob, Runner
from perfsweep.launcher.slots import Place, Slots
from perfsweep.records.lock import holding_host, process_start


def local_gpus() -> int:
    import torch

    return 1 if torch.cuda.is_available() else 0


def pinned_gpus(conf: LauncherConf) -> list[int]:
    """The GPUs local runs are pinned to, one run per GPU at a time.

    They are launcher.gpus, else this host's first GPU.
    """
    if conf.gpus is not None:
        return list(conf.gpus)
    return [0] if conf.gpus_per_node is None and local_gpus() else []


START_MIN = 10  # a job's start before its first run (imports), beyond its runs' limits


def local_job_limit_min(conf: LauncherConf, forked: bool, sides: int = 1) -> float:
    """A local job's own time limit, a backstop.

    Its runs have their limits (launcher.timeout_min, each from its start).
    A warm job has none: it kills a run that goes past its limit itself, and serves a sweep of any length.
    A job that runs its pack in its own process has room for every run of it, retries included.
    A run whose `sides` share its process has room for each side.
    A run stuck in a C call does not stop itself, so the job's limit ends it.
    """
    if forked:
        return UNLIMITED_MIN
    runs = conf.runs_per_job * sides
    return runs * (1 + conf.timeout_retries) * (conf.timeout_min + GRACE_S / 60) + START_MIN


def pid_ids(jobs: dict[str, dict[str, Any]]) -> set[str]:
    """Which local jobs still have their process; a local job's id is its pid.

    The pid must be alive.
    Where its start was recorded, it must have started then.
    The system may have given a dead job's pid to another process.
    """
    alive = set()
    for job_id, recorded in jobs.items():
        try:
            os.kill(int(job_id), 0)
        except (OSError, ValueError):
            continue
        if recorded.get("process_start") in (None, process_start(int(job_id))):
            alive.add(job_id)
    return alive


CONTROLLERS_LOG = "controllers.log"


class LocalExecutor(submitit.LocalExecutor):
    """submitit's local executor, with each job's controller writing its errors into a log.

    A controller is the process that starts and stops a job.
    It writes its own errors into the executor's folder (CONTROLLERS_LOG), not to the launcher's terminal.
    Ctrl-C reaches the controllers too.
    Each would otherwise print a KeyboardInterrupt traceback from inside submitit under perfsweep's message.
    The jobs' own output goes to their logs, as with submitit's executor.
    A controller stops its job on SIGINT, which is how a job is cancelled.
    A launcher started in the background by a script ignores SIGINT, and its children would inherit that.
    So a controller starts with SIGINT's default, whatever the launcher's.
    """

    def _submit_command(self, command: str) -> submitit.local.local.LocalJob:
        log = os.open(self.folder / CONTROLLERS_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        terminal = os.dup(2)
        sys.stderr.flush()
        os.dup2(log, 2)  # the controller inherits this process's stderr as it starts
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        if ignored:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a handler is not inherited: the default is
        try:
            return super()._submit_command(command)
        finally:
            if ignored:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.dup2(terminal, 2)
            os.close(terminal)
            os.close(log)


class LocalSpawn(Backend):
    """Jobs on this host, `parallelism` at once, each running its runs in its own process."""

    forked = False

    def executor(self, folder: Path, job_name: str) -> submitit.Executor:
        # A local job is never requeued when its backstop limit ends it: its runs have their own limits.
        executor = LocalExecutor(folder=folder, max_num_timeout=0)
        # submitit's LocalExecutor sets CUDA_VISIBLE_DEVICES to the first `gpus_per_node` of `visible_gpus`.
        # 0 hides them all; `place` gives a pinned run its one GPU at each submission.
        limit = local_job_limit_min(self.conf, self.forked)
        executor.update_parameters(timeout_min=limit, gpus_per_node=self.conf.gpus_per_node or 0)
        return executor

    def shape(self, executor: submitit.Executor, shape: JobShape) -> None:
        executor.update_parameters(timeout_min=local_job_limit_min(self.conf, self.forked, shape.sides))

    def problems(self, plan) -> list[str]:
        """Beyond the base's: a GPU for each rank of a run across ranks."""
        problems, conf = super().problems(plan) + self.nodes_problems(plan), self.conf
        given = (1 if pinned_gpus(conf) else conf.gpus_per_node or 0) if local_gpus() else None
        wide = max((cfg.dist.world_size for cfg in across_ranks(plan) if cfg.device != "cpu"), default=1)
        if given is not None and wide > given:
            problems.append(
                f"dist.world_size={wide} on GPUs: a rank needs a GPU of its own, and launcher=local gives each run "
                f"{given}; launcher.gpus_per_node={wide} gives a run this host's first {wide} (or device=cpu)"
            )
        elif given is not None and wide > 1 and conf.parallelism > 1:
            problems.append(
                f"launcher.parallelism={conf.parallelism} with dist.world_size={wide} on GPUs: each run is given this "
                f"host's first {given} GPUs, so runs at once would share them; use launcher.parallelism=1"
            )
        return problems

    def slots(self) -> Slots:
        return Slots(self.conf.parallelism, pinned_gpus(self.conf), share_cpus=True)

    def place(self, executor: submitit.Executor, place: Place) -> None:
        if place.gpu is not None:
            executor.update_parameters(visible_gpus=(place.gpu,), gpus_per_node=1)

    def job_entry(self, sweep_dir: Path, job: submitit.Job) -> dict[str, Any]:
        start = process_start(int(job.job_id))
        return {"host": socket.gethostname(), **({"process_start": start} if start else {})}

    @staticmethod
    def alive_ids(sweep_dir: Path, jobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """A job of another host is alive while a launch there holds the sweep: its processes are seen there alone.

        Local jobs end with their launch, which empties the lock file as it ends.
        Without a lock file (launcher.lock=false) they count as ended.
        Nothing says that launch still runs.
        """
        here = socket.gethostname()
        elsewhere = {job_id for job_id, job in jobs.items() if job.get("host", here) != here}
        if elsewhere and (holder := holding_host(sweep_dir)) not in (None, here):
            raise SchedulerUnavailable(
                f"the local jobs ran on {holder}, whose launch holds the sweep: their processes are seen there; where "
                f"that launch is gone (a crash keeps its record), `{user_command()} resume {sweep_dir}` takes the "
                "lock and runs them again, and is refused while it runs"
            )
        return dict.fromkeys(pid_ids({job_id: job for job_id, job in jobs.items() if job_id not in elsewhere}), "")


class LocalFork(LocalSpawn):
    """One warm job on this host that forks every run, `parallelism` at once, each pinned to a free GPU."""

    forked = True

    def pack(self, runner: Runner) -> RunPack:
        return RunPack(runner, "fork", self.conf.parallelism, tuple(pinned_gpus(self.conf)))

    def slots(self) -> Slots:
        return Slots(1, share_cpus=True)  # the job's forks share the CPUs, not the jobs

    def runs_per_job(self, runs: int) -> int:
        return runs  # a warm job for each environment's block of runs

    def takes_turns(self, packs: list[list[RunJob]]) -> bool:
        """Where environments alternate, one run at a time: a warm job each, not one each time they change."""
        return self.conf.parallelism == 1 and len(packs) > len({JobShape.of(pack[0]) for pack in packs})
