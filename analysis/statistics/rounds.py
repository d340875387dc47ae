"""repeats=auto's stopping rule: after each look at a sweep's rounds, whether its comparisons are decided.

The comparisons are the table's: each configuration's speed-up over its row group's baseline, across runs.
One is decided when its interval says a word other than undetermined (analysis/statistics/verdict.py):

- slower or faster: it excludes no effect (1.00x);
- the same: it lies within -+half_width of 1.00x.

The sweep looks at a fixed schedule of rounds: 3, 5, 7, ... up to the cap on runs per configuration.
It stops at the first look where every comparison is decided, or at the cap.

Looking again and again at growing data inflates errors.
Stopping when an interval excludes 1 would find absent effects far more often than 5%.
So each look spends an equal share of the 5% error: alpha spending over the fixed schedule (Bonferroni).
At k looks, each look's intervals are at the 1 - 0.05/k level.
The chance that any look's word is wrong then stays under 5%, whenever the sweep stops.
tests/test_calibration.py measures it.
Every view of the sweep keeps the level of its looks (`rule_of`), so the table says what the looks said.
"""

import dataclasses
import math
from pathlib import Path

from perfsweep import records
from perfsweep.analysis.groups import configurations, labels, speedups
from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import Speedup, percent
from perfsweep.analysis.statistics.verdict import UNDETERMINED, word
from perfsweep.conf.schema import AutoConf
from perfsweep.records import RunRecord
from perfsweep.records.words import counted

FIRST_LOOK = 3


def schedule(max_runs: int) -> list[int]:
    """The rounds after which the sweep looks: 3, 5, 7, ... and the cap (fewer when the cap is below 3)."""
    return sorted({*range(min(FIRST_LOOK, max_runs), max_runs, 2), max_runs})


def look_level(looks: int) -> float:
    """The level of each look's intervals: an equal share of the error over the schedule's looks."""
    return 1 - (1 - LEVEL) / looks


@dataclasses.dataclass(frozen=True)
class Rule:
    """How a sweep's comparisons are judged: the level of their intervals, and the margin of `same`."""

    level: float = LEVEL
    margin: float = AutoConf.half_width  # auto.half_width: `same` lies within -+margin of 1.00x
    looks: int = 0  # the looks of repeats=auto that spent the 5% error; 0 for a sweep of fixed repeats

    def word(self, speedup: Speedup) -> str:
        """What the speed-up's interval says at this margin (verdict.word)."""
        return word(speedup, self.margin)

    def spent(self) -> str:
        """Where a level of repeats=auto's looks comes from."""
        return f"repeats=auto's level: the 5% error spent over its {self.looks} looks"


def rule_of(sweep_dir: Path | str, runs: list[RunRecord]) -> Rule:
    """The rule of every view of a sweep.

    The level is that of repeats=auto's looks where its last launch was repeats=auto, else 95%.
    The margin and the looks are the settings of the runs that launch planned first.
    """
    launch = records.last_launch(Path(sweep_dir)) or {}
    launches = (records.read_manifest(Path(sweep_dir)) or {}).get("launches", [])
    earlier = launches[: launches.index(launch)] if launch in launches else []
    before = {name for each in earlier for name in each.get("runs", [])}
    planned = [run for run in runs if run.name in launch.get("runs", [])]
    # the runs it planned first carry its settings: a launch again with a larger auto.max_runs keeps the earlier rounds
    planned = [run for run in planned if run.name not in before] or planned or runs
    margin = setting(planned, "half_width")
    if records.AUTO not in launch.get("argv", []):
        return Rule(LEVEL, margin)
    looks = len(schedule(setting(planned, "max_runs")))
    return Rule(look_level(looks), margin, looks)


def setting(runs: list[RunRecord], name: str) -> float:
    """The runs' auto.`name`: the first run's that has it, else its default."""
    return next((run.fields[f"auto.{name}"] for run in runs if f"auto.{name}" in run.fields), getattr(AutoConf, name))


@dataclasses.dataclass(frozen=True)
class Comparison:
    label: str
    speedup: Speedup  # at the look's level

    def why_undecided(self, rule: Rule) -> str:
        """'' when decided; else why not."""
        s = self.speedup
        if not s.replicated:
            return "one run on a side"
        if not math.isfinite(s.value):
            return "a run has no positive median time"
        if rule.word(s) != UNDETERMINED:
            return ""
        reach = max(s.high - 1, 1 - s.low)
        return f"includes 1.00x and reaches {reach:.1%} from it (the same needs -+{percent(rule.margin)})"


@dataclasses.dataclass(frozen=True)
class Look:
    """What a look at the sweep's first `rounds` rounds found."""

    rounds: int
    rule: Rule
    comparisons: list[Comparison]
    unmeasured: tuple[str, ...] = ()  # planned configurations with no run done or failed yet: none compared

    @property
    def undecided(self) -> list[tuple[Comparison, str]]:
        return [(c, why) for c in self.comparisons if (why := c.why_undecided(self.rule))]

    @property
    def met(self) -> bool:
        return not self.undecided and not self.unmeasured

    def line(self) -> str:
        decided = len(self.comparisons) - len(self.undecided)
        return (
            f"repeats=auto: after {self.rounds} rounds, {decided} of {len(self.comparisons)} comparisons decided "
            f"(intervals at {percent(self.rule.level)}: the 5% error spent over {self.rule.looks} looks)"
            + self.unmeasured_line()
        )

    def unmeasured_line(self) -> str:
        """'; 2 configurations without a done run yet, compared with nothing: ...', or ''."""
        if not self.unmeasured:
            return ""
        return f"; {counted(len(self.unmeasured), 'configuration')} without a done run yet, compared with nothing: " + (
            ", ".join(self.unmeasured)
        )


def look(runs: list[RunRecord], rounds: int, half_width: float, looks: int, unmeasured: tuple[str, ...] = ()) -> Look:
    """The sweep's comparisons from its done runs, at the level each of `looks` looks spends.

    `unmeasured` names the planned configurations that no run has measured yet: the look is not met while any is.
    """
    rule = Rule(look_level(looks), half_width, looks)
    names = labels(configurations(runs))
    comparisons = [Comparison(versus.label(names), s) for versus, s in speedups(runs, rule.level)]
    return Look(rounds, rule, comparisons, unmeasured)


def summary(final: Look, runs: int, minutes: float, stopped: str) -> list[str]:
    """The lines a launch prints when repeats=auto stops: how many runs it took, and what it left undecided.

    `stopped` says why it stopped short of deciding: its cap, or another cause.
    """
    if not runs:
        return [
            f"repeats=auto stopped at its first look ({final.rounds} runs a configuration): no run is done, so "
            "nothing could be compared (the runs' lines above say why)"
        ]
    if not final.comparisons and not final.unmeasured:
        return [
            f"repeats=auto stopped after {final.rounds} rounds: {runs} runs done in {minutes:.1f} min; the sweep makes "
            "no comparisons to decide (no row group has its baseline and another value)"
        ]
    why = "every comparison decided" if final.met else stopped
    lines = [
        f"repeats=auto stopped after {final.rounds} rounds: {runs} runs done in {minutes:.1f} min; {why}; "
        f"{len(final.comparisons) - len(final.undecided)} of {len(final.comparisons)} comparisons decided at the "
        f"{percent(final.rule.level)} level of its looks (slower, faster, or the same within "
        f"-+{percent(final.rule.margin)} of 1.00x){final.unmeasured_line()}"
    ]
    lines += [f"  undecided: {c.label}: {c.speedup}: {why}" for c, why in final.undecided]
    return lines
