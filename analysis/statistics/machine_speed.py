"""The machine's speed in two sets of runs.

Each run timed a fixed workload after its window.
A run is a process: a set's runs replicate the machine's speed.
Times that differ beyond their spread mean the machine moved.
A difference between two sweeps may then be the machine's.
"""

import collections
import statistics

import numpy as np

from perfsweep.analysis.statistics.speedup import Sample, figures, speedup
from perfsweep.records import RunRecord

MOVED = 0.03  # a fixed workload's time that moved less than this: no move said


def _workload(runs: list[RunRecord]) -> str | None:
    """The fixed workload the most runs timed; None where none timed one."""
    timed = [r.summary.reference["workload"] for r in runs if r.summary and r.summary.reference]
    return collections.Counter(timed).most_common(1)[0][0] if timed else None


def _timed(runs: list[RunRecord], workload: str) -> dict[str, float]:
    """Each run's time of `workload`, by its name."""
    return {
        r.name: r.summary.reference["ms"]
        for r in runs
        if r.summary and (r.summary.reference or {}).get("workload") == workload
    }


def compared(a: list[RunRecord], b: list[RunRecord], names: tuple[str, str] = ("A", "B")) -> str:
    """A line where the machine ran the fixed workload slower or faster in `b` than in `a`; else ''.

    It needs two or more runs a set, and a ratio whose interval across runs excludes 1 by over MOVED.
    The workload is timed at its fastest, which slips between a neighbour's time slices.
    So it shows a CPU that ran slower throughout, not a neighbour's share: their hosts' line says that.
    """
    workload = _workload(a + b)
    times = [list(_timed(runs, workload).values()) for runs in (a, b)] if workload else [[], []]
    if len(times[0]) < 2 or len(times[1]) < 2:
        return ""
    samples = [Sample(tuple(np.array([t]) for t in side), tuple(range(len(side)))) for side in times]
    ratio = speedup(samples[0], samples[1])  # B's time over A's
    if not (ratio.excludes(1.0) and abs(ratio.value - 1) > MOVED):
        return ""
    value, low, high = figures(ratio.value, ratio.low, ratio.high, apart=1.0)
    medians = f"{statistics.median(times[0]):.3g} -> {statistics.median(times[1]):.3g} ms"
    return (
        f"the machine ran {'slower' if ratio.value > 1 else 'faster'} in {names[1]}: a fixed workload ({workload}) "
        f"took {medians}, {value}x [{low}, {high}] (medians of {len(times[0])} / {len(times[1])} runs)"
    )
