"""Function benchmarks (train/functions/base.py), one module per seed; importing this registers them."""

from perfsweep.train.functions import batching, nested, planted, sampler  # noqa: F401
