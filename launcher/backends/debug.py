"""launcher=debug: each job runs inside the launcher's own process, when the launcher asks for it.

submitit's DebugExecutor runs a job as the launcher polls it.
Runs are one at a time, so a debugger can step into them.
"""

import os
from pathlib import Path
from typing import Any

import submitit

from perfsweep.launcher.backends.base import Backend, across_ranks
from perfsweep.launcher.backends.local import pid_ids, process_start


class Debug(Backend):
    """Jobs in the launcher's process, one run at a time."""

    def executor(self, folder: Path, job_name: str) -> submitit.Executor:
        return submitit.DebugExecutor(folder=folder)

    def problems(self, plan) -> list[str]:
        problems = super().problems(plan)
        repeats = plan.settings.repeats
        if repeats > 1:
            problems.append(
                f"repeats={repeats} with launcher=debug: the debug launcher runs every run in this process, so "
                "its replicates would share one process's state and compare nothing between processes; use repeats=1 "
                "(one run per configuration, no verdicts) or launcher=local"
            )
        if across := across_ranks(plan):
            names = ",".join(sorted({str(cfg.dist.name) for cfg in across}))
            problems.append(
                f"dist={names} with launcher=debug: a run's ranks are processes of their own, and launcher=debug runs "
                "every run in this one; use launcher=local (or slurm)"
            )
        return problems + self.nodes_problems(plan)

    def at_once(self) -> int:
        return 1

    def job_entry(self, job: submitit.Job) -> dict[str, Any]:
        """The launcher's process, which runs the job.

        The job lives as long as it does.
        """
        return {"launcher_pid": os.getpid(), "process_start": process_start(os.getpid())}

    @staticmethod
    def alive_ids(jobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        launchers = {str(job.get("launcher_pid")): job for job in jobs.values()}
        alive = pid_ids(launchers)
        return {job_id: "" for job_id, job in jobs.items() if str(job.get("launcher_pid")) in alive}
