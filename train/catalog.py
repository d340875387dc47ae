"""Every workload and input type perfsweep has: importing this module registers them all."""

from perfsweep.train import functions, step  # noqa: F401  (each registers its workloads)
from perfsweep.train.inputs import INPUT_TYPES
from perfsweep.train.workloads import WORKLOADS

__all__ = ["INPUT_TYPES", "WORKLOADS"]
