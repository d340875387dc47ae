"""launcher=slurm: jobs on a Slurm cluster, submitted at once as job arrays.

Arrays are split below the cluster's MaxArraySize; Slurm honours `parallelism` as an array's %N.
A run across ranks has a job to itself, a task per rank.
Jobs outlive the launcher: `status` and `resume` follow them later.
The launcher asks squeue once per poll, for all arrays, which jobs are alive.
"""

import math
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import submitit

from perfsweep.conf.schema import LauncherConf
from perfsweep.launcher.backends.base import Backend, JobShape, SchedulerUnavailable
from perfsweep.launcher.run_job import SLURM_EARLY_S, SLURM_WARNING_S
from perfsweep.sweeps.pairing import groups

TIME_BEFORE_WARNING_S = 30  # the least a job's time may leave its run before Slurm's warning
# submitit counts a preemption of a job of 10 minutes or less as a timeout: it requeues such a job this many times
SUBMITIT_TIMEOUTS = 3

SLURM_COMMANDS = ("sbatch", "squeue", "srun")


def slurm_parameters(conf: LauncherConf, job_name: str) -> dict[str, Any]:
    """The sbatch parameters (names as submitit's SlurmExecutor takes them); unset ones are left out."""
    params = {
        "job_name": job_name,
        "time": math.ceil(conf.timeout_min),
        "signal_delay_s": SLURM_WARNING_S,
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
    """The sbatch parameters that shape a job.

    - A run across ranks: a task per rank, `ranks_per_node` on each of launcher.nodes nodes.
      It also gets a GPU per rank where its ranks are on GPUs (the launcher gives jobs GPUs).
    - Else: one task, with launcher.gpus_per_node.
    """
    if ranks_per_node is None:
        return {"nodes": 1, "ntasks_per_node": 1, "gpus_per_node": conf.gpus_per_node or None}
    gpus = ranks_per_node if on_gpus and conf.gpus_per_node else conf.gpus_per_node or None
    return {"nodes": conf.nodes, "ntasks_per_node": ranks_per_node, "gpus_per_node": gpus}


SQUEUE_RETRY_S = (1.0, 2.0, 4.0)  # waits between squeue attempts: a busy controller often answers the next
ASK_S = 60.0  # the longest a Slurm command may take to answer before it counts as failed


def squeue_ids(jobs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Which of the job ids Slurm still has queued or running, each with why it waits.

    The why is Slurm's reason for a pending job: Dependency, JobHeldUser, Resources...
    It is "" for a running job.
    It makes one squeue call for all arrays, not one per job, retried with backoff.
    Jobs sent to other clusters (jobs.json's "clusters") are asked there, one call a cluster list.

    Raises:
        SchedulerUnavailable: if squeue keeps failing.
    """
    if not jobs:
        return {}
    if not shutil.which("squeue"):
        raise SchedulerUnavailable("squeue is not on PATH here: only a host of the cluster can ask it")
    by_clusters: dict[str | None, dict[str, dict[str, Any]]] = {}
    for job_id, job in jobs.items():
        by_clusters.setdefault(job.get("clusters"), {})[job_id] = job
    return {job_id: why for clusters, some in by_clusters.items() for job_id, why in _queued(some, clusters).items()}


def arrays(job_ids: Iterable[str]) -> list[str]:
    """The arrays these Slurm job ids (ARRAY_TASK) are tasks of, in their first order."""
    return list(dict.fromkeys(job_id.split("_")[0] for job_id in job_ids))


def _queued(jobs: dict[str, dict[str, Any]], clusters: str | None) -> dict[str, str]:
    """squeue_ids of jobs of one cluster list (sbatch's --clusters; None: this host's cluster)."""
    ids = ",".join(sorted(arrays(jobs)))
    where = ["--clusters", clusters] if clusters else []
    for wait in (*SQUEUE_RETRY_S, None):
        asked = ["squeue", *where, "-h", "-r", "-o", "%i %T %r", "-j", ids]
        out = _asked(asked)
        if out.returncode == 0:
            rows = [line.split(maxsplit=2) for line in out.stdout.splitlines() if line.strip()]
            return {row[0]: row[2] if row[1] == "PENDING" and len(row) > 2 else "" for row in rows if row[0] in jobs}
        if "Invalid job id" in out.stderr:  # every one of them has left the queue
            return {}
        if wait is None:
            tries = len(SQUEUE_RETRY_S) + 1
            raise SchedulerUnavailable(f"squeue failed {tries} times (exit {out.returncode}: {out.stderr.strip()})")
        time.sleep(wait)
    raise AssertionError("unreachable")


def _asked(command: list[str]) -> subprocess.CompletedProcess:
    """A Slurm command's answer.

    One slower than ASK_S counts as failed (a hung controller or mount).
    """
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=ASK_S)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"{command[0]} did not answer in {ASK_S:g} s")
    except OSError as error:  # gone from PATH, or not executable
        return subprocess.CompletedProcess(command, 127, "", str(error))


def other_clusters(conf: LauncherConf) -> str | None:
    """The clusters sbatch sends the jobs to (launcher.sbatch_extra.clusters); None: this host's."""
    clusters = (conf.sbatch_extra or {}).get("clusters")
    return str(clusters) if clusters else None


def cluster_max_array_size() -> int:
    """The most tasks one Slurm array may hold (ids run 0..MaxArraySize-1); ValueError saying what is wrong."""
    if not shutil.which("scontrol"):
        raise ValueError(
            "launcher=slurm reads the cluster's MaxArraySize with scontrol, which is not on PATH; set "
            "launcher.max_array_size=N (the most tasks an array may hold)"
        )
    out = _asked(["scontrol", "show", "config"])
    if out.returncode != 0:
        said = out.stderr.strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        raise ValueError(
            f"launcher=slurm: Slurm's commands reach no controller here (`scontrol show config`: {said[0]}), so "
            "sbatch would fail too; launch where Slurm is configured (SLURM_CONF names its slurm.conf), or use "
            "launcher=local"
        )
    for line in out.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize" and value.strip().isdigit():
            return int(value) - 1
    why = out.stderr.strip() or "no MaxArraySize in its output"
    raise ValueError(f"cannot read MaxArraySize from `scontrol show config` ({why}); set launcher.max_array_size=N")


def _gpus(gres: str) -> int:
    """A node's GPUs, from sinfo's %G: 'gpu:8', 'gpu:a100:4(S:0-1),gpu:h100:4', or '(null)' for none."""
    count = 0
    for entry in gres.split(","):
        name, _, rest = entry.partition(":")
        last = rest.split("(")[0].rsplit(":", 1)[-1]
        count += int(last) if name == "gpu" and last.isdigit() else 0
    return count


def _holds(row: list[str], cpus: int, mb: int, gpus: int) -> bool:
    """Whether a node holds what a job asks of a node.

    The node is a row of sinfo -N: its partition, CPUs, MB and gres.
    Its GPUs are unknown where sinfo gives no gres: it may hold any.
    """
    return (
        cpus <= int(row[1].rstrip("+"))
        and mb <= int(row[2].rstrip("+"))
        and (not gpus or not row[3] or gpus <= _gpus(row[3]))
    )


def array_size_problems(asked: int) -> list[str]:
    """Where launcher.max_array_size is above the cluster's MaxArraySize: sbatch would refuse such an array.

    A cluster that does not tell its MaxArraySize refuses nothing here: the setting stands in for it.
    """
    try:
        most = cluster_max_array_size()
    except ValueError:
        return []
    if asked <= most:
        return []
    return [
        f"launcher.max_array_size={asked}: the cluster's arrays hold {most} tasks at most (MaxArraySize, scontrol "
        f"show config): sbatch would refuse a larger one; give {most} or fewer, or leave it unset"
    ]


def partition_problems(partition: str) -> list[str]:
    """Where `--partition` (a name, or a list by commas) names one the cluster lacks: sbatch would refuse it.

    Hidden partitions count (sinfo -a). A cluster that does not answer refuses nothing here.
    """
    out = _asked(["sinfo", "-a", "-h", "-o", "%R"])
    known = sorted(set(out.stdout.split()))
    if out.returncode != 0 or not known:
        return []
    if not partition.strip():
        return [
            f"launcher.partition={partition!r} names no partition: give one (sinfo -a lists: {', '.join(known)}), or "
            "leave it unset (null) for the cluster's default"
        ]
    unknown = [name for name in partition.split(",") if name not in known]  # " gpu" is not "gpu" to sbatch
    if not unknown:
        return []
    return [
        f"launcher.partition={partition}: this cluster has no partition {', '.join(map(repr, unknown))} "
        f"(sinfo -a lists: {', '.join(known)})"
    ]


def node_problems(conf: LauncherConf, tasks: int, nodes: int = 1) -> list[str]:
    """Where a job's partition cannot hold it.

    It may have fewer nodes than the job asks.
    Or no node may have the GPUs, or the CPUs and memory, it asks of a node.
    sbatch refuses such GPUs; a job of such CPUs or memory would queue for ever.
    `tasks` is the most tasks a job puts on a node: a run's ranks, else 1.
    `nodes` is the most nodes a job asks: launcher.nodes for a run's ranks, else 1.
    The partition is launcher.partition's, else the cluster's default.
    Of a list, any node of any counts.
    A partition given past launcher.partition (sbatch_extra, SBATCH_PARTITION) is sbatch's to check.
    Options given through launcher.sbatch_extra are passed through unchecked.
    A cluster that does not answer refuses nothing here.
    """
    if not conf.partition and ((conf.sbatch_extra or {}).get("partition") or os.environ.get("SBATCH_PARTITION")):
        return []
    # -a (hidden partitions too) and -p conflict: sinfo refuses both at once, and a named partition shows hidden or not
    where = ["-p", conf.partition] if conf.partition else ["-a"]
    out = _asked(["sinfo", *where, "-h", "-N", "-o", "%P %c %m %G"])
    rows = [line.split() for line in out.stdout.splitlines()] if out.returncode == 0 else []
    rows = [[*row, ""][:4] for row in rows if len(row) in (3, 4)]  # a node's gres, where sinfo gives it
    rows = [row for row in rows if all(part.rstrip("+").isdigit() for part in row[1:3])]
    rows = rows if conf.partition else [row for row in rows if row[0].endswith("*")]  # the default partition
    shapes = [(int(row[1].rstrip("+")), int(row[2].rstrip("+"))) for row in rows]
    cpus, mb = (conf.cpus_per_task or 1) * tasks, (conf.mem_gb or 0) * 1024
    where = f"partition {conf.partition or rows[0][0].rstrip('*')}'s nodes" if rows else ""
    gpus = max((_gpus(row[3]) for row in rows), default=None) if all(row[3] for row in rows) else None  # else unknown
    of_list = f" (the most of {conf.partition})" if "," in (conf.partition or "") else ""
    partitions = Counter(row[0].rstrip("*") for row in rows)  # sinfo -N: a row a node of a partition
    if partitions and nodes > partitions.most_common(1)[0][1]:
        name, most = partitions.most_common(1)[0]
        return [
            f"launcher.nodes={nodes}: a job asks for {nodes} nodes, and partition {name} has {most}{of_list} (sinfo): "
            f"Slurm would queue it for ever (PartitionNodeLimit); give {most} or fewer"
        ]
    holding = Counter(row[0].rstrip("*") for row in rows if _holds(row, cpus, mb, conf.gpus_per_node or 0))
    if holding and nodes > holding.most_common(1)[0][1]:
        name, most = holding.most_common(1)[0]
        return [
            f"launcher.nodes={nodes}: a job asks for {nodes} nodes, each of {cpus} CPUs, {mb} MB and "
            f"{conf.gpus_per_node or 0} GPUs, and partition {name} has {most} such{of_list} (sinfo): Slurm would "
            f"queue it for ever; give {most} or fewer"
        ]
    if gpus is not None and (conf.gpus_per_node or 0) > gpus:
        return [
            f"launcher.gpus_per_node={conf.gpus_per_node}: a job asks a node for {conf.gpus_per_node} GPUs, and "
            f"{where} have {gpus} at most (sinfo's gres): sbatch would refuse it; "
            + (f"give {gpus} or fewer" if gpus else "give 0: they have none")
        ]
    if not shapes or any(cpus <= has_cpus and mb <= has_mb for has_cpus, has_mb in shapes):
        return []
    most_cpus, most_mb = max(c for c, _ in shapes), max(m for _, m in shapes)
    asked = f"launcher.cpus_per_task={conf.cpus_per_task or 'null'}"
    shape = f"{conf.cpus_per_task or 1} a task x {tasks} tasks, a run's ranks a node" if tasks > 1 else "1 task"
    problems = []
    if cpus > most_cpus and most_cpus < tasks:  # the ranks a node are too many, whatever each task asks
        more = (
            f"or spread them over more of its {len(shapes)} nodes (launcher.nodes)"
            if len(shapes) > 1
            else "it has 1 node"
        )
        problems.append(
            f"dist.world_size over launcher.nodes: {tasks} ranks a node, a task and a CPU each at least, and {where} "
            f"have {most_cpus} CPUs at most (sinfo): Slurm would queue it for ever; give {most_cpus} ranks a node or "
            f"fewer; {more}"
        )
    elif cpus > most_cpus:
        fix = f"give {most_cpus // tasks} or fewer"
        problems.append(
            f"{asked}: a job asks a node for {cpus} CPUs ({shape}), and {where} have {most_cpus} at most (sinfo): "
            f"Slurm would queue it for ever; {fix}"
        )
    if mb > most_mb:
        problems.append(
            f"launcher.mem_gb={conf.mem_gb}: a job asks a node for {mb} MB, and {where} have {most_mb} MB at most "
            f"(sinfo): Slurm would queue it for ever; give {most_mb // 1024} or less"
        )
    if not problems:  # each fits some node, but no node holds both
        held = ", ".join(f"{c} CPUs with {m} MB" for c, m in sorted(set(shapes)))
        problems.append(
            f"{asked} with launcher.mem_gb={conf.mem_gb}: a job asks a node for {cpus} CPUs ({shape}) and {mb} MB, "
            f"and no one of {where} has both (sinfo: {held}): Slurm would queue it for ever"
        )
    return problems


class Slurm(Backend):
    """Jobs on a Slurm cluster: every array submitted at once, followed through squeue."""

    on_this_host = False
    poll_s = 5.0  # sparing the cluster's controller

    def executor(self, folder, job_name: str) -> submitit.Executor:
        # A job at its time limit is requeued launcher.timeout_retries times; a preemption, as submitit's default.
        retries = self.conf.timeout_retries or SUBMITIT_TIMEOUTS
        executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=retries)
        executor.update_parameters(**slurm_parameters(self.conf, job_name))
        return executor

    def problems(self, plan) -> list[str]:
        problems = super().problems(plan)
        missing = [command for command in SLURM_COMMANDS if not shutil.which(command)]
        if missing:
            problems.append(
                f"launcher={self.conf.name} needs Slurm's commands ({', '.join(SLURM_COMMANDS)}) on PATH; not found "
                f"here: {', '.join(missing)}"
            )
        elif not self.conf.max_array_size:
            try:
                cluster_max_array_size()
            except ValueError as error:
                problems.append(str(error))
        else:
            problems += array_size_problems(self.conf.max_array_size)
        problems += [
            f"launcher.sbatch_extra.{key}: the script passes it as --{key}=..., and sbatch's one-letter options have "
            f"no such form: give its long name (sbatch --help; clusters for -M)"
            for key in self.conf.sbatch_extra or {}
            if len(str(key)) == 1
        ]
        if "," in (clusters := other_clusters(self.conf) or ""):
            problems.append(
                f"launcher.sbatch_extra.clusters={clusters!r} names several clusters: sbatch sends each job to one of "
                "them, and perfsweep follows a job on the clusters it was sent to, where another job may have its "
                "id; name one"
            )
        if not missing and not clusters and self.conf.partition is not None and self.conf.partition.isprintable():
            problems += partition_problems(self.conf.partition)  # (a control character is refused as such)
        if not missing and not clusters and (self.conf.partition or "").isprintable():
            ranks = [self.ranks_per_node(run.config) for run in plan.runs]
            tasks = max((count or 1 for count in ranks), default=1)
            problems += node_problems(self.conf, tasks, self.conf.nodes if any(ranks) else 1)
        return problems + self.time_problems(plan) + self.nodes_problems(plan)

    def time_problems(self, plan) -> list[str]:
        """A job time that leaves its run no time before Slurm's warning: the plan's shortest job's.

        A job's time is launcher.timeout_min times its process's sides (`shape`).
        """
        sides = min((len(g.runs) if g.paired else 1 for g in groups(list(plan.runs))), default=1)
        minutes = math.ceil(self.conf.timeout_min * sides)
        warned = SLURM_WARNING_S + SLURM_EARLY_S  # the earliest Slurm may warn a job, before its end
        if minutes * 60 - warned >= TIME_BEFORE_WARNING_S:
            return []
        each = f": timeout_min x {sides} sides, its shortest job's" if sides > 1 else ""
        return [
            f"launcher.timeout_min={self.conf.timeout_min:g}: a Slurm job's time is whole minutes "
            f"(--time={minutes}{each}), and Slurm warns it {SLURM_WARNING_S} s before its end, "
            f"or up to {SLURM_EARLY_S} s earlier, where its run stops to start over; that leaves the run no time "
            f"(a warning before the job's start-up ends kills it). Give a job 3 minutes or more (a 3-minute job leaves "
            f"its run {180 - warned} s at least): timeout_min={3 / sides:.3g} or more"
        ]

    def run_limit(self) -> tuple[float | None, int]:
        return None, 0  # the cluster limits each job

    def ranks_per_node(self, run_config: Any) -> int | None:
        return run_config.dist.world_size if run_config.dist.name != "none" else None

    def shape(self, executor: submitit.Executor, shape: JobShape) -> None:
        time = math.ceil(self.conf.timeout_min * shape.sides)  # launcher.timeout_min is each side's
        executor.update_parameters(time=time, **ranks_parameters(self.conf, shape.ranks_per_node, shape.on_gpus))

    def queue_after(self, executor: submitit.Executor, arrays: list[str]) -> None:
        """An array's %N bounds its own tasks alone.

        So an array of a launch waits for its earlier arrays (afterany) where they would run more than %N at once.
        A resume's arrays wait for the sweep's earlier arrays still in flight too.
        """
        executor.update_parameters(dependency=f"afterany:{':'.join(arrays)}" if arrays else None)

    def max_array_size(self) -> int:
        """The most tasks one array may hold: the config's, else the cluster's."""
        return self.conf.max_array_size or cluster_max_array_size()

    def job_entry(self, sweep_dir: Path, job: submitit.Job) -> dict[str, Any]:
        """The clusters its job was sent to (sbatch --clusters), where not this host's: squeue asks them there."""
        clusters = other_clusters(self.conf)
        return {"clusters": clusters} if clusters else {}

    def alive(self, jobs: list[submitit.Job]) -> dict[str, str]:
        return squeue_ids({job.job_id: self.job_entry(None, job) for job in jobs})

    @staticmethod
    def alive_ids(sweep_dir: Path, jobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        return squeue_ids(jobs)
