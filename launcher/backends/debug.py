"""launcher=debug: each job runs inside the launcher's own process, when the launcher asks for it.

submitit's DebugExecutor runs a job as the launcher polls it.
Runs are one at a time, so a debugger can step into them.
"""

from pathlib import Path
from typing import Any

import submitit

from perfsweep.launcher.backends.base import Backend


class Debug(Backend):
    """Jobs in the launcher's process, one run at a time."""

    def executor(self, folder: Path, job_name: str) -> submitit.Executor:
        return submitit.DebugExecutor(folder=folder)

    def at_once(self) -> int:
        return 1

    @staticmethod
    def alive_ids(jobs: dict[str, dict[str, Any]]) -> set[str]:
        return set()  # once the launcher has gone, so have its jobs
