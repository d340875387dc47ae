"""The machine's speed in two sets of runs.

Each run timed a fixed workload after its window.
Each process counts once: its sides' fastest, where it held paired sides.
Times that differ beyond their spread mean the machine moved.
A difference between two sweeps may then be the machine's.
"""

import collections
import math

import numpy as np

from perfsweep.analysis.statistics.speedup import Sample, Speedup, figures, speedup
from perfsweep.records import RunRecord

MOVED = 0.03  # a ratio whose interval reaches within this of 1: no move said


def _workload(a: list[RunRecord], b: list[RunRecord]) -> str | None:
    """The fixed workload that both sets timed the most; None where they share none.

    Runs of another version, or of TF32 matmuls, timed another.
    """
    counts = [collections.Counter(r.summary.reference["workload"] for r in runs if r.summary and r.summary.reference)
              for runs in (a, b)]  # fmt: skip
    shared = [(min(counts[0][w], counts[1][w]), w) for w in counts[0] if counts[1][w]]
    return max(shared)[1] if shared else None


def _timed(runs: list[RunRecord], workload: str) -> list[float]:
    """Each process's fastest time of `workload`, once a process: older paired records timed it once a side."""
    by_process: dict[str, float] = {}
    for r in runs:
        if r.summary and (r.summary.reference or {}).get("workload") == workload:
            process = r.summary.paired.process if r.summary.paired else r.name
            by_process[process] = min(by_process.get(process, math.inf), r.summary.reference["ms"])
    return list(by_process.values())


def moved(a: list[RunRecord], b: list[RunRecord]) -> tuple[Speedup, str, list[Sample]] | None:
    """B's speed-up over A on the fixed workload, the workload, and each set's times; None where it did not move.

    It needs two or more processes a set, and a ratio whose interval across them lies beyond 1 -+ MOVED.
    The workload is timed at its fastest, which can slip between a neighbour's time slices.
    So it shows a CPU that ran slower throughout, not a neighbour's share: their hosts' line says that.
    """
    workload = _workload(a, b)
    times = [_timed(runs, workload) for runs in (a, b)] if workload else [[], []]
    if len(times[0]) < 2 or len(times[1]) < 2:
        return None
    samples = [Sample(tuple(np.array([t]) for t in side), tuple(range(len(side)))) for side in times]
    ratio = speedup(samples[1], samples[0])  # B's speed-up over A, as every other ratio of compare and history
    if not (ratio.low > 1 + MOVED or ratio.high < 1 - MOVED):
        return None
    return ratio, workload, samples


def compared(a: list[RunRecord], b: list[RunRecord], names: tuple[str, str] = ("A", "B")) -> str:
    """A line where the machine ran the fixed workload slower or faster in `b` than in `a` (moved); else ''."""
    if (found := moved(a, b)) is None:
        return ""
    ratio, workload, samples = found
    value, low, high = figures(ratio.value, ratio.low, ratio.high, apart=1.0)
    means = f"{samples[0].middle:.3g} -> {samples[1].middle:.3g} ms"
    return (
        f"the machine ran {'slower' if ratio.value < 1 else 'faster'} in {names[1]}: a fixed workload ({workload}) "
        f"took {means}, {value}x [{low}, {high}] as fast (geometric means of {samples[0].runs} / {samples[1].runs} "
        "processes)"
    )
