"""The submitit executor a sweep runs on, built from the `launcher` config.

Where runs execute is a parameter: each launcher name maps to one submitit
executor and the parameters it takes; nothing else in perfsweep depends on it.
"""

import dataclasses
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import submitit

from perfsweep.conf.schema import LauncherConf
from perfsweep.launcher.runs import GRACE_S


def local_gpus() -> int:
    import torch

    return 1 if torch.cuda.is_available() else 0


def pinned_gpus(conf: LauncherConf) -> list[int]:
    """The GPUs local runs are pinned to, one run per GPU at a time: launcher.gpus, else this host's first GPU."""
    if conf.gpus is not None:
        return list(conf.gpus)
    return [0] if conf.gpus_per_node is None and local_gpus() else []


def isolation(conf: LauncherConf) -> str:
    """How a job's runs get their own process: fork (from the warm job), or spawn (the job's own process, a
    new interpreter per job); launcher.isolation, else fork where the platform has it. A debug job runs in
    the launcher: never forked."""
    if conf.name == "debug":
        return "spawn"
    return conf.isolation or ("fork" if hasattr(os, "fork") and sys.platform == "linux" else "spawn")


UNLIMITED_MIN = 60 * 24 * 365  # a local warm job's own limit: none that a sweep reaches
START_MIN = 10  # a job's start before its first run (imports), beyond its runs' limits


def local_job_limit_min(conf: LauncherConf) -> float:
    """A local job's own time limit, a backstop: its runs have their limits (launcher.timeout_min, each from its
    start). A warm job, which kills a run that goes past its limit itself and serves a sweep of any length, has
    none; a job that runs its pack in its own process has room for every run of it, retries included (a run
    stuck in a C call does not stop itself, so the job's limit ends it)."""
    if isolation(conf) == "fork":
        return UNLIMITED_MIN
    return conf.runs_per_job * (1 + conf.timeout_retries) * (conf.timeout_min + GRACE_S / 60) + START_MIN


def local_parameters(conf: LauncherConf, job_name: str) -> dict[str, Any]:
    # submitit's LocalExecutor sets CUDA_VISIBLE_DEVICES to the first `gpus_per_node` of `visible_gpus`: 0 hides
    # them all. A run pinned to a GPU gets that one alone (launcher/submit.py sets it at each submission).
    return {"timeout_min": local_job_limit_min(conf), "gpus_per_node": conf.gpus_per_node or 0}


def debug_parameters(conf: LauncherConf, job_name: str) -> dict[str, Any]:
    return {}


def slurm_parameters(conf: LauncherConf, job_name: str) -> dict[str, Any]:
    """The sbatch parameters (names as submitit's SlurmExecutor takes them); unset ones are left out."""
    params = {
        "job_name": job_name,
        "time": math.ceil(conf.timeout_min),
        "array_parallelism": conf.parallelism,
        "gpus_per_node": conf.gpus_per_node or None,
        "partition": conf.partition,
        "account": conf.account,
        "qos": conf.qos,
        "cpus_per_task": conf.cpus_per_task,
        "mem": f"{conf.mem_gb}GB" if conf.mem_gb else None,
        "constraint": conf.constraint,
        "exclusive": True if conf.exclusive else None,
        "setup": list(conf.setup) or None,
        "additional_parameters": dict(conf.sbatch_extra) or None,
        "srun_args": list(conf.srun_args) or None,
    }
    return {key: value for key, value in params.items() if value is not None}


def ranks_parameters(conf: LauncherConf, ranks_per_node: int | None, on_gpus: bool) -> dict[str, Any]:
    """The sbatch parameters that shape a job: for a run across ranks a task per rank, `ranks_per_node` on each of
    launcher.nodes nodes, and a GPU per rank where its ranks are on GPUs (the launcher gives jobs GPUs); else one
    task, with launcher.gpus_per_node."""
    if ranks_per_node is None:
        return {"nodes": 1, "ntasks_per_node": 1, "gpus_per_node": conf.gpus_per_node or None}
    gpus = ranks_per_node if on_gpus and conf.gpus_per_node else conf.gpus_per_node or None
    return {"nodes": conf.nodes, "ntasks_per_node": ranks_per_node, "gpus_per_node": gpus}


class SchedulerUnavailable(RuntimeError):
    """The scheduler did not answer (a controller timeout): which jobs are alive is unknown, not none."""


SQUEUE_RETRY_S = (1.0, 2.0, 4.0)  # waits between squeue attempts: a busy controller often answers the next


def squeue_ids(jobs: dict[str, dict[str, Any]]) -> set[str]:
    """Which of the job ids Slurm still has queued or running: one squeue call for all arrays (not one per
    job), retried with backoff; SchedulerUnavailable if it keeps failing."""
    if not jobs:
        return set()
    arrays = sorted({job_id.split("_")[0] for job_id in jobs})
    for wait in (*SQUEUE_RETRY_S, None):
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i", "-j", ",".join(arrays)], capture_output=True, text=True)
        if out.returncode == 0:
            return set(out.stdout.split()) & set(jobs)
        if "Invalid job id" in out.stderr:  # every one of them has left the queue
            return set()
        if wait is None:
            tries = len(SQUEUE_RETRY_S) + 1
            raise SchedulerUnavailable(f"squeue failed {tries} times (exit {out.returncode}: {out.stderr.strip()})")
        time.sleep(wait)
    raise AssertionError("unreachable")


def squeue_alive(jobs: list[submitit.Job]) -> set[str]:
    return squeue_ids({job.job_id: {} for job in jobs})


def process_start(pid: int) -> str | None:
    """When a process started (clock ticks since boot, from /proc): a pid with another start is another process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name before ")" may hold spaces


def pid_ids(jobs: dict[str, dict[str, Any]]) -> set[str]:
    """Which local jobs (their ids are process ids) still have their process: the pid is alive and, where its
    start was recorded, started then (the system may have given a dead job's pid to another process)."""
    alive = set()
    for job_id, recorded in jobs.items():
        try:
            os.kill(int(job_id), 0)
        except (OSError, ValueError):
            continue
        if recorded.get("process_start") in (None, process_start(int(job_id))):
            alive.add(job_id)
    return alive


def none_alive(jobs: dict[str, dict[str, Any]]) -> set[str]:
    """Debug jobs run inside the launcher: once it has gone, so have they."""
    return set()


def process_alive(jobs: list[submitit.Job]) -> set[str]:
    """Ids of the jobs whose process has not ended (the debug executor runs a job when asked this)."""
    return {job.job_id for job in jobs if not job.done()}


def cluster_max_array_size() -> int:
    """The most tasks one Slurm array may hold (ids run 0..MaxArraySize-1); ValueError saying what is wrong."""
    if not shutil.which("scontrol"):
        raise ValueError(
            "launcher=slurm reads the cluster's MaxArraySize with scontrol, which is not on PATH; set "
            "launcher.max_array_size=N (the most tasks an array may hold)"
        )
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize" and value.strip().isdigit():
            return int(value) - 1
    why = out.stderr.strip() or "no MaxArraySize in its output"
    raise ValueError(f"cannot read MaxArraySize from `scontrol show config` ({why}); set launcher.max_array_size=N")


CONTROLLERS_LOG = "controllers.log"


class LocalExecutor(submitit.LocalExecutor):
    """submitit's local executor, but each job's controller (the process that starts and stops the job) writes its
    own errors into the executor's folder (CONTROLLERS_LOG), not to the launcher's terminal: Ctrl-C reaches the
    controllers too, and each would print a KeyboardInterrupt traceback from inside submitit under perfsweep's
    message. The jobs' own output goes to their logs, as before."""

    def _submit_command(self, command: str) -> submitit.local.local.LocalJob:
        log = os.open(self.folder / CONTROLLERS_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        terminal = os.dup(2)
        sys.stderr.flush()
        os.dup2(log, 2)  # the controller inherits this process's stderr as it starts
        try:
            return super()._submit_command(command)
        finally:
            os.dup2(terminal, 2)
            os.close(terminal)
            os.close(log)


@dataclasses.dataclass(frozen=True)
class Backend:
    executor: type[submitit.Executor]
    parameters: Callable[[LauncherConf, str], dict[str, Any]]
    alive: Callable[[list[submitit.Job]], set[str]]  # for the launcher that submitted the jobs
    alive_ids: Callable[[dict[str, dict[str, Any]]], set[str]]  # for anyone else (status), from jobs.json
    on_this_host: bool  # jobs run here: no scheduler, so perfsweep keeps `parallelism` jobs going itself
    options: dict[str, Any] = dataclasses.field(default_factory=dict)  # the executor's own


BACKENDS = {
    # A local job is never requeued when its backstop limit ends it: its runs have their own limits.
    "local": Backend(LocalExecutor, local_parameters, process_alive, pid_ids, True, options={"max_num_timeout": 0}),
    "debug": Backend(submitit.DebugExecutor, debug_parameters, process_alive, none_alive, on_this_host=True),
    "slurm": Backend(submitit.SlurmExecutor, slurm_parameters, squeue_alive, squeue_ids, on_this_host=False),
}


def make_executor(conf: LauncherConf, folder: Path, job_name: str) -> submitit.Executor:
    backend = BACKENDS[conf.name]
    executor = backend.executor(folder=folder, **backend.options)
    executor.update_parameters(**backend.parameters(conf, job_name))
    return executor
