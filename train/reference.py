"""The machine's speed on a fixed workload, timed after each run's window.

It is a product of two fixed matrices, in the run's own process, threads and device.
Two sweeps' runs of one machine time it alike.
So where it took longer, the machine was slower, whatever the code under test did.
It is never part of a measured step.
"""

import time

import torch

from perfsweep.records import Reference
from perfsweep.train.timing import synchronize

SIZE = {"cpu": 384, "cuda": 2048}  # under a millisecond a product on either
WARM, TIMED = 3, 21


def reference(device: torch.device) -> Reference:
    """The shortest time of TIMED products, after WARM untimed ones.

    The shortest is the machine's speed.
    In one quiet process it spread 7%, less than the median did.
    On a GPU, each ends in a synchronize.
    """
    size = SIZE.get(device.type, SIZE["cpu"])
    a = torch.rand(size, size, generator=torch.Generator().manual_seed(0)).to(device)
    out = torch.empty_like(a)
    for _ in range(WARM):
        torch.mm(a, a, out=out)
    synchronize(device)
    times = []
    for _ in range(TIMED):
        start = time.perf_counter()
        torch.mm(a, a, out=out)
        synchronize(device)
        times.append(time.perf_counter() - start)
    threads = f", {torch.get_num_threads()} threads" if device.type == "cpu" else ""
    # a run's precision may let float32 matmuls run as TF32, process-wide (train/precision.py)
    tf32 = " as tf32" if device.type == "cuda" and torch.backends.cuda.matmul.fp32_precision == "tf32" else ""
    workload = f"matmul {size}x{size} float32{tf32} on {device.type}{threads}, fastest of {TIMED}"
    return Reference(workload=workload, ms=min(times) * 1e3)
