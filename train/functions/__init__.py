"""Function benchmarks (train/functions/registry.py), one module per seed; importing this registers them."""

from train.functions import batching, nested, sampler  # noqa: F401
from train.functions.registry import FUNCTIONS, FunctionBench

__all__ = ["FUNCTIONS", "FunctionBench"]
