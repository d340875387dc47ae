"""Benchmarks: scripts that print figures (python -m perfsweep.bench.NAME), never pass/fail."""
