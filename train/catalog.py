"""Every workload and input type perfsweep has: importing this module registers them all.

`workload_class` gives the class of a run's workload.
That is a registered one by name, or the user's by import path.
"""

from perfsweep.conf.schema import WorkloadConf
from perfsweep.train import fastai_loop, functions, step  # noqa: F401  (each registers its workloads)
from perfsweep.train.inputs import INPUT_TYPES
from perfsweep.train.workloads import WORKLOADS, Workload, user_workload

__all__ = ["INPUT_TYPES", "WORKLOADS", "workload_class"]


def workload_class(conf: WorkloadConf) -> type[Workload]:
    """The class of the workload `conf` names.

    That is the user's step (workload._target_), else the one registered.
    """
    return user_workload(conf._target_) if conf._target_ else WORKLOADS[conf.name]
