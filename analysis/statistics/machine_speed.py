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
from perfsweep.records.words import counted

MOVED = 0.03  # a fixed workload's time that moved less than this: the same machine speed
SPREAD = 0.25  # a run that timed the workload this much above the sweep's median: the machine moved


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
    """A line on the machine's speed in `a` and `b`.

    It gives the fixed workload's time in each, and their ratio.
    It is '' where a set timed none of the usual workload.
    Two or more runs a set give the ratio an interval and a word.
    """
    workload = _workload(a + b)
    if workload is None:
        return ""
    times = [list(_timed(runs, workload).values()) for runs in (a, b)]
    if not times[0] or not times[1]:
        return ""
    medians = f"{statistics.median(times[0]):.3g} -> {statistics.median(times[1]):.3g} ms"
    counts = f"medians of {len(times[0])} / {len(times[1])} runs"
    if len(times[0]) < 2 or len(times[1]) < 2:
        return f"the machine's speed: a fixed workload ({workload}) took {medians} ({counts}: too few to tell)"
    samples = [Sample(tuple(np.array([t]) for t in side), tuple(range(len(side)))) for side in times]
    ratio = speedup(samples[0], samples[1])  # B's time over A's
    value, low, high = figures(ratio.value, ratio.low, ratio.high, apart=1.0)
    moved = ratio.excludes(1.0) and abs(ratio.value - 1) > MOVED
    word = (
        f"the machine was {'slower' if ratio.value > 1 else 'faster'} in {names[1]}"
        if moved
        else "the machine's speed held"
    )
    return f"{word}: a fixed workload ({workload}) took {medians}, {value}x [{low}, {high}] ({counts})"


def across(runs: list[RunRecord]) -> list[str]:
    """A flag where the machine's speed moved across a sweep's runs.

    That is a run whose time is over SPREAD above the sweep's median.
    Such runs slowed with the machine, whatever their configuration.
    """
    workload = _workload(runs)
    times = _timed(runs, workload) if workload else {}
    middle = statistics.median(times.values()) if len(times) >= 3 else None
    slow = [name for name, ms in times.items() if middle and ms > middle * (1 + SPREAD)]
    if not slow:
        return []
    return [
        f"MACHINE SPEED: a fixed workload ({workload}) took {min(times.values()):.3g}-{max(times.values()):.3g} ms "
        f"across the runs (median {middle:.3g}): the machine's speed moved during the sweep; "
        f"{counted(len(slow), 'run')} over {SPREAD:.0%} above the median: {', '.join(slow[:3])}"
        + (", ..." if len(slow) > 3 else "")
    ]
