"""launcher=debug: each job runs inside the launcher's own process, when the launcher asks for it.

submitit's DebugExecutor runs a job as the launcher polls it.
Runs are one at a time, so a debugger can step into them.
"""

from pathlib import Path
from typing import Any

import submitit

from perfsweep.launcher.backends.base import Backend, across_ranks
from perfsweep.records.lock import launching


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

    def job_entry(self, sweep_dir: Path, job: submitit.Job) -> dict[str, Any]:
        """The launch that runs the job in its process."""
        return {"launch": launching(sweep_dir)}

    @staticmethod
    def alive_ids(sweep_dir: Path, jobs: dict[str, dict[str, Any]]) -> dict[str, str]:
        """A job lives while its launch goes on, holding the sweep's lock.

        Its process may live on after the launch, in a notebook.
        """
        now = launching(sweep_dir)
        return {job_id: "" for job_id, job in jobs.items() if now is not None and job.get("launch") == now}
