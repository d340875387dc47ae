"""Where a sweep's jobs run: one backend per place, each in its own module, all with one interface.

`backend_for` picks the backend of a launcher config.
`BACKENDS` maps each launcher name to its backend class.
"""

from perfsweep.conf.schema import LauncherConf
from perfsweep.launcher.backends.base import Backend, JobShape, SchedulerUnavailable, isolation
from perfsweep.launcher.backends.debug import Debug
from perfsweep.launcher.backends.local import LocalFork, LocalSpawn
from perfsweep.launcher.backends.slurm import Slurm

BACKENDS: dict[str, type[Backend]] = {"local": LocalSpawn, "debug": Debug, "slurm": Slurm}


def backend_for(conf: LauncherConf) -> Backend:
    """The backend that runs `conf`'s jobs."""
    if conf.name == "local" and isolation(conf) == "fork":
        return LocalFork(conf)
    return BACKENDS[conf.name](conf)


__all__ = ["BACKENDS", "Backend", "JobShape", "SchedulerUnavailable", "backend_for", "isolation"]
