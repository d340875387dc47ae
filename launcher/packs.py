"""How a launch groups its runs into jobs, and its jobs into arrays.

A job starts one Python and has one shape of tasks, so only runs of one shape share a job.
"""

import itertools

from perfsweep.launcher.backends import JobShape
from perfsweep.launcher.run_job import RunJob


def chunks_by(items: list, size: int, kind) -> list[tuple[int, list]]:
    """Chunks of up to `size` consecutive items of one kind, each with its index."""
    chunks, start = [], 0
    for _, same in itertools.groupby(items, key=kind):
        group = list(same)
        chunks += [(start + i, group[i : i + size]) for i in range(0, len(group), size)]
        start += len(group)
    return chunks


def by_shape(packs: list[list[RunJob]]) -> list[list[RunJob]]:
    """The packs with those of one shape together, shapes in the order they first come.

    An interleaved sweep then gets an array per shape, not one each time the shape changes.
    """
    shapes: dict[JobShape, list[list[RunJob]]] = {}
    for pack in packs:
        shapes.setdefault(JobShape.of(pack[0]), []).append(pack)
    return [pack for same in shapes.values() for pack in same]


def packs_of(runs: list[RunJob], size: int) -> list[list[RunJob]]:
    """Packs of up to `size` consecutive runs of one shape.

    A run whose ranks are its job's tasks has its job to itself.
    Its tasks must enter each run's collectives together.
    A run that failed on one task would leave the others waiting in the next run's collectives.
    """
    packs = []
    for _, pack in chunks_by(runs, size, JobShape.of):
        packs += [[run] for run in pack] if pack[0].ranks_per_node else [pack]
    return packs
