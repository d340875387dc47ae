"""perfsweep: sweeps of PyTorch training-step timings, recorded to disk and W&B.

The repository's top-level folders are this package's stages (perfsweep.conf, perfsweep.train, ...).
So perfsweep imports under its one name.
A user's own `train.py` or `conf/` never shadows it.
"""
