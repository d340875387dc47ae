"""Where runs go on this host: a GPU each, a share of the CPUs each, and how many at once.

The launcher's local jobs and the warm job's forks both take their places here.
"""

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Place:
    """Where on this host a run or job goes: the GPU it sees alone (None: not pinned to one) and the CPUs it may
    run on (None: all of this process's)."""

    gpu: int | None = None
    cpus: tuple[int, ...] | None = None

    def enter(self) -> None:
        """Make this process the place's: its CPUs, before it starts a thread (the threads it starts later inherit
        them, unless OMP_PROC_BIND or GOMP_CPU_AFFINITY binds them elsewhere), and its GPU, before it initialises
        CUDA."""
        if self.cpus is not None:
            os.sched_setaffinity(0, self.cpus)
        if self.gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(self.gpu)


NOWHERE = Place()  # pinned to no GPU, on every CPU


def cpu_shares(at_once: int) -> list[tuple[int, ...]]:
    """This process's CPUs split among `at_once` runs at once, a contiguous share each and every share the same
    size, the CPUs left over unused (none for one at a time): runs compared in one sweep must not differ in
    their CPUs by which share they got. Runs at once that each took every CPU would oversubscribe them, and
    OpenMP's spinning threads then slow every step down many times over. With more runs at once than CPUs,
    runs share a CPU each."""
    if at_once < 2:
        return []
    cpus = sorted(os.sched_getaffinity(0))
    size = len(cpus) // at_once
    if size == 0:
        return [(cpus[i % len(cpus)],) for i in range(at_once)]
    return [tuple(cpus[i * size : (i + 1) * size]) for i in range(at_once)]


class Slots:
    """Room on this host for one more run or job: fewer than `parallelism` going and, where runs are pinned to
    GPUs (one run per GPU at a time), a free GPU for it. With `share_cpus`, each of the runs at once is given
    its share of this host's CPUs. The warm job's forks and the launcher's local jobs share it."""

    def __init__(self, parallelism: int, gpus: tuple[int, ...] | list[int] = (), share_cpus: bool = False):
        self.parallelism, self.pinning, self.free = parallelism, bool(gpus), list(gpus)
        at_once = min(parallelism, len(self.free)) if self.pinning else parallelism  # one run per GPU at a time
        self.shares: list[tuple[int, ...]] = cpu_shares(at_once) if share_cpus else []

    def open(self, going: int) -> bool:
        return going < self.parallelism and (self.free or not self.pinning)

    def take(self) -> Place:
        """Where the next one goes: a free GPU where runs are pinned, and a free share of the CPUs if shared."""
        return Place(self.free.pop(0) if self.pinning else None, self.shares.pop(0) if self.shares else None)

    def release(self, place: Place) -> None:
        if place.gpu is not None:
            self.free.append(place.gpu)
        if place.cpus is not None:
            self.shares.append(place.cpus)
