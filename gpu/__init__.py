"""The GPU check (`scripts/gpu-check`).

Its stages run perfsweep's GPU paths on a machine with CUDA and keep their tables.
It is tooling beside the package, as bench/ is.
It does not measure perfsweep itself.
"""
