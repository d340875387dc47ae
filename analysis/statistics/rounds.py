"""repeats=auto's stopping rule: after each look at a sweep's rounds, whether its comparisons are decided.

The comparisons are the table's: each configuration's speed-up over its row group's baseline, across runs.
One is decided when its interval excludes no effect (1.00x): it is decisive.
It is decided too when its interval lies within -+half_width of its value: it is known well enough.
The sweep looks at a fixed schedule of rounds: 3, 5, 7, ... up to the cap on runs per configuration.
It stops at the first look where every comparison is decided, or at the cap.

Looking again and again at growing data inflates errors.
Stopping when an interval excludes 1 would find absent effects far more often than 5%.
So each look spends an equal share of the 5% error: alpha spending over the fixed schedule (Bonferroni).
At k looks, each look's intervals are at the 1 - 0.05/k level.
The chance that any look calls an absent effect decisive then stays under 5%, whenever the sweep stops.
tests/test_calibration.py measures it.
The views printed at the end show 95% intervals of the runs done.
"""

import dataclasses

from perfsweep.analysis.groups import configurations, labels, speedups
from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import Speedup
from perfsweep.records import RunRecord

FIRST_LOOK = 3


def schedule(max_runs: int) -> list[int]:
    """The rounds after which the sweep looks: 3, 5, 7, ... and the cap (fewer when the cap is below 3)."""
    return sorted({*range(min(FIRST_LOOK, max_runs), max_runs, 2), max_runs})


def look_level(looks: int) -> float:
    """The level of each look's intervals: an equal share of the error over the schedule's looks."""
    return 1 - (1 - LEVEL) / looks


@dataclasses.dataclass(frozen=True)
class Comparison:
    label: str
    speedup: Speedup  # at the look's level

    def why_undecided(self, half_width: float) -> str:
        """'' when decided; else why not."""
        s = self.speedup
        if not s.replicated:
            return "one run on a side"
        if s.excludes(1.0):
            return ""
        reach = max(s.high / s.value, s.value / s.low) - 1
        if reach <= half_width:
            return ""
        return f"includes 1.00x and reaches -+{reach:.1%} of its value (target -+{half_width:.0%})"


@dataclasses.dataclass(frozen=True)
class Look:
    """What a look at the sweep's first `rounds` rounds found."""

    rounds: int
    level: float
    half_width: float
    comparisons: list[Comparison]

    @property
    def undecided(self) -> list[tuple[Comparison, str]]:
        return [(c, why) for c in self.comparisons if (why := c.why_undecided(self.half_width))]

    @property
    def met(self) -> bool:
        return not self.undecided

    def line(self) -> str:
        decided = len(self.comparisons) - len(self.undecided)
        return (
            f"repeats=auto: after {self.rounds} rounds, {decided} of {len(self.comparisons)} comparisons decided "
            f"(intervals at {self.level:.2%}: the 5% error spent over the looks)"
        )


def look(runs: list[RunRecord], rounds: int, half_width: float, looks: int) -> Look:
    """The sweep's comparisons from its done runs, at the level each of `looks` looks spends."""
    level = look_level(looks)
    names = labels(configurations(runs))
    comparisons = [Comparison(f"{names[c.key]} vs {b.first.baseline.value}", s) for c, b, s in speedups(runs, level)]
    return Look(rounds, level, half_width, comparisons)


def summary(final: Look, runs: int, minutes: float, capped: str) -> list[str]:
    """The lines a launch prints when repeats=auto stops: how many runs it took, and what it left undecided."""
    if not final.comparisons:
        return [
            f"repeats=auto stopped after {final.rounds} rounds: {runs} runs done in {minutes:.1f} min; the sweep makes "
            "no comparisons to decide (no row group has its baseline and another value)"
        ]
    why = "every comparison decided" if final.met else f"cap reached: {capped}"
    lines = [
        f"repeats=auto stopped after {final.rounds} rounds: {runs} runs done in {minutes:.1f} min; {why}; "
        f"{len(final.comparisons) - len(final.undecided)} of {len(final.comparisons)} comparisons decided at the "
        f"{final.level:.2%} level of its looks (decisive, or within -+{final.half_width:.0%})"
    ]
    lines += [f"  undecided: {c.label}: {c.speedup}: {why}" for c, why in final.undecided]
    return lines
