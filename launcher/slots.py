"""Where runs go on this host: a GPU each, a share of the CPUs each, and how many at once.

The launcher's local jobs and the warm job's forks both take their places here.
"""

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Place:
    """Where on this host a run or job goes.

    `gpu` is the one GPU it sees; None: it is pinned to none.
    `cpus` are the CPUs it may run on; None: all of this process's.
    """

    gpu: int | None = None
    cpus: tuple[int, ...] | None = None

    def enter(self) -> None:
        """Move this process to the place.

        Call it before the process starts a thread and before it initialises CUDA.
        Threads started later inherit the CPUs, unless OMP_PROC_BIND or GOMP_CPU_AFFINITY binds them.
        """
        if self.cpus is not None:
            os.sched_setaffinity(0, self.cpus)
        if self.gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(self.gpu)


NOWHERE = Place()  # pinned to no GPU, on every CPU


def cpu_shares(at_once: int) -> list[tuple[int, ...]]:
    """This process's CPUs split among `at_once` runs at once.

    Each run gets a contiguous share, and every share has the same size.
    Runs compared in one sweep must not differ by the share they got.
    The CPUs left over stay unused; one run at a time gets no share (all CPUs).
    Runs that each took every CPU would oversubscribe them.
    OpenMP's spinning threads then slow every step down many times over.
    With more runs at once than CPUs, runs share a CPU each.
    """
    if at_once < 2:
        return []
    cpus = sorted(os.sched_getaffinity(0))
    size = len(cpus) // at_once
    if size == 0:
        return [(cpus[i % len(cpus)],) for i in range(at_once)]
    return [tuple(cpus[i * size : (i + 1) * size]) for i in range(at_once)]


class Slots:
    """Room on this host for one more run or job.

    There is room while fewer than `parallelism` are going.
    Where runs are pinned to GPUs, one runs per GPU at a time, so a GPU must be free too.
    With `share_cpus`, each run at once gets its share of this host's CPUs.
    The warm job's forks and the launcher's local jobs both use it.
    """

    def __init__(self, parallelism: int, gpus: tuple[int, ...] | list[int] = (), share_cpus: bool = False):
        self.parallelism, self.pinning, self.free = parallelism, bool(gpus), list(gpus)
        at_once = min(parallelism, len(self.free)) if self.pinning else parallelism  # one run per GPU at a time
        self.shares: list[tuple[int, ...]] = cpu_shares(at_once) if share_cpus else []

    def open(self, going: int) -> bool:
        return going < self.parallelism and (self.free or not self.pinning)

    def take(self) -> Place:
        """Where the next one goes: a free GPU if pinned, and a free CPU share if shared."""
        return Place(self.free.pop(0) if self.pinning else None, self.shares.pop(0) if self.shares else None)

    def release(self, place: Place) -> None:
        if place.gpu is not None:
            self.free.append(place.gpu)
        if place.cpus is not None:
            self.shares.append(place.cpus)
