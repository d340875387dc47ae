"""What every backend does for a launch: make jobs, shape them, and say which are alive.

A backend is where a sweep's jobs run: this host (forked from a warm job, or one process per job),
the launcher's own process (debug), or a Slurm cluster.
The dispatcher (launcher/submit.py) calls only the methods here.
Each backend is a sibling module, in the shape of submitit's own executors.
Forked runs (launcher/warm.py) are no backend of their own: they are how a started job runs its runs, on this
host or on Slurm alike (launcher.isolation=fork).
"""

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import submitit

from perfsweep.conf.schema import LauncherConf
from perfsweep.launcher.jobs import RunPack
from perfsweep.launcher.run_job import RunJob, Runner
from perfsweep.launcher.slots import Place, Slots

if TYPE_CHECKING:
    from perfsweep.sweeps.plan import Plan


def isolation(conf: LauncherConf) -> str:
    """How a job's runs get their own process: "fork" or "spawn".

    Fork: a warm job forks a child per run. Spawn: a new interpreter per job.
    launcher.isolation decides; else fork where Linux has it.
    A debug job runs in the launcher and is never forked.
    """
    if conf.name == "debug":
        return "spawn"
    return conf.isolation or ("fork" if hasattr(os, "fork") and sys.platform == "linux" else "spawn")


def across_ranks(plan: "Plan") -> list:
    """The configs of the plan's runs across ranks."""
    return [spec.config for spec in plan.runs if spec.config.dist.name != "none"]


class SchedulerUnavailable(RuntimeError):
    """The scheduler did not answer: which jobs are alive is unknown, not none."""


class JobShape(NamedTuple):
    """What a job must be to run a run: its Python, and its ranks as tasks."""

    python: str | None  # the run's environment's Python; None: the launcher's own
    ranks_per_node: int | None  # a run whose ranks are its job's tasks: this many a node
    on_gpus: bool  # those ranks are on GPUs, a GPU each
    sides: int  # the runs each of its run jobs measures in one process (paired), so its job's time is theirs

    @classmethod
    def of(cls, run: RunJob) -> "JobShape":
        on_gpus = run.ranks_per_node is not None and run.spec.config.device != "cpu"
        return cls(run.python, run.ranks_per_node, on_gpus, len(run.every))


@dataclasses.dataclass
class Backend:
    """One place for a sweep's jobs. Subclasses override what differs from running on this host."""

    conf: LauncherConf
    on_this_host = True  # no scheduler: perfsweep keeps `parallelism` jobs going itself
    poll_s = 0.5  # how often the launcher reads its runs' records, unless configured

    def executor(self, folder: Path, job_name: str) -> submitit.Executor:
        raise NotImplementedError

    def problems(self, plan: "Plan") -> list[str]:
        """What this backend cannot do for `plan`'s runs, found before anything is submitted."""
        problems = []
        if self.on_this_host and self.conf.wait is False:
            problems.append(
                f"launcher.wait=false with launcher={self.conf.name}: its runs run under this launcher, which follows "
                "them to their end; wait=false is for launcher=slurm, whose jobs outlive the launcher"
            )
        if self.conf.isolation == "fork" and not hasattr(os, "fork"):
            problems.append(
                "launcher.isolation=fork needs os.fork, which this platform lacks: use launcher.isolation=spawn"
            )
        return problems

    def pack(self, runner: Runner) -> RunPack:
        """What a job executes: its runs, each forked from the job or one after another in its process."""
        return RunPack(runner, isolation(self.conf))

    def slots(self) -> Slots:
        """Room on this host for jobs at once."""
        return Slots(self.conf.parallelism)

    def runs_per_job(self, runs: int) -> int:
        return self.conf.runs_per_job

    def at_once(self) -> int:
        """How many runs run at once, as each run records it."""
        return self.conf.parallelism

    def nodes_problems(self, plan: "Plan") -> list[str]:
        """More nodes than one are for runs across ranks, on Slurm alone."""
        nodes, name = self.conf.nodes, self.conf.name
        if nodes < 1 or (nodes > 1 and name != "slurm"):
            return [f"launcher.nodes={nodes} with launcher={name}: must be 1 (launcher=slurm: 1 or more)"]
        if nodes > 1 and not across_ranks(plan):
            return [
                f"launcher.nodes={nodes} is for runs across ranks (dist=ddp or dist=fsdp, dist.world_size ranks a "
                "node); these runs are one process each"
            ]
        return []

    def run_limit(self) -> tuple[float | None, int]:
        """A run's own time limit in seconds, and how often it runs again after reaching it."""
        return self.conf.timeout_min * 60, self.conf.timeout_retries

    def ranks_per_node(self, run_config: Any) -> int | None:
        """How many of a run's ranks are its job's tasks on a node; None: the run starts its ranks itself."""
        return None

    def shape(self, executor: submitit.Executor, shape: JobShape) -> None:
        """Set the executor's parameters for jobs of `shape`."""

    def place(self, executor: submitit.Executor, place: Place) -> None:
        """Set the executor's parameters for a job put at `place` on this host."""

    def queue_after(self, executor: submitit.Executor, arrays: list[str]) -> None:
        """Hold the next array until these arrays' jobs end: the launch's array before it, or an earlier launch's.

        Only a scheduler queues arrays.
        On this host the launcher starts each job itself.
        """

    def takes_turns(self, packs: list[list[RunJob]]) -> bool:
        """Whether these packs' runs go to a warm job per shape, taking turns in their order (launcher/turns.py)."""
        return False

    def max_array_size(self) -> int:
        """The most jobs one array may hold: launcher.max_array_size, else no limit."""
        return self.conf.max_array_size or sys.maxsize

    def job_entry(self, sweep_dir: Path, job: submitit.Job) -> dict[str, Any]:
        """What jobs.json keeps of a job beside its id and log."""
        return {}

    def waits(self) -> bool:
        """Whether the launch follows its runs to their end."""
        return self.conf.wait if self.conf.wait is not None else self.on_this_host

    def alive(self, jobs: list[submitit.Job]) -> dict[str, str]:
        """Ids of the jobs that have not ended, asked by the launcher that submitted them.

        Each has the scheduler's word on why it waits, as alive_ids.
        """
        return {job.job_id: "" for job in jobs if not job.done()}

    @staticmethod
    def alive_ids(sweep_dir: Path, jobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Ids of the sweep's jobs that have not ended, asked by anyone else (status) from jobs.json.

        Each has the scheduler's word on why it waits.
        It is "" where the job runs, or no scheduler says.
        """
        raise NotImplementedError
