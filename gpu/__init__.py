"""The GPU check: the stages that run perfsweep's GPU paths on a machine with CUDA and keep their tables
(`scripts/gpu-check`); tooling beside the house, as bench/ is, not a measurement of perfsweep itself."""
