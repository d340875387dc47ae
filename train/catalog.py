"""Every workload and input type perfsweep has: importing this module registers them all."""

from train import functions, step  # noqa: F401  (each registers its workloads)
from train.inputs import INPUT_TYPES
from train.workloads import WORKLOADS

__all__ = ["INPUT_TYPES", "WORKLOADS"]
