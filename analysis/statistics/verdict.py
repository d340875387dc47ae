"""Verdicts on speed-ups: in a sweep's table, beside a published figure, and across two sweeps.

In a table, a speed-up's interval says it in a word (`word`):

- slower or faster: the interval excludes 1.00x;
- same: it holds 1.00x and lies within -+margin of it;
- undetermined: neither; more runs narrow it.

repeats=auto decides a comparison when its word is one of the first three.
A published figure is a speed-up, a [low, high] range, two times, or a direction.
A speed-up within SAME of 1.0 counts as no effect.
Beside a claimed effect, no effect is within SAME, or half the claim's distance from 1.0 where that is less.
A claimed figure is reproduced by an interval that holds it.
That interval lies within half and twice the figure.
That holds as a ratio, and as an effect: its log's distance from 1.0.
A wider one holds values far from it too: it is undetermined.
A verdict needs runs on both sides; one run gives INDICATIVE.
A compared speed-up is flagged when significant and beyond the threshold.
A slowdown beyond it that the runs leave open is undetermined.
"""

import math
from typing import Any

from perfsweep.analysis.statistics.speedup import Speedup, slow_end

SAME = 0.05  # a speed-up within 5% of 1.0 counts as no effect
WITHIN = 2.0  # a reproduced figure's interval lies within half and twice the published one


def published_speedup(item: dict[str, Any]) -> tuple[float, float] | None:
    """The published speed-up as a (low, high) range, or None when only a direction (or nothing) is given."""
    if item.get("speedup") is not None:
        value = item["speedup"]
        return (float(value[0]), float(value[1])) if isinstance(value, list) else (float(value), float(value))
    times = item.get("published") or {}
    if times.get("of") and times.get("over"):
        value = times["over"] / times["of"]
        return value, value
    return None


def direction(item: dict[str, Any]) -> str | None:
    span = published_speedup(item)
    if span is None:
        return item.get("direction")
    if 1 - SAME <= span[0] and span[1] <= 1 + SAME:
        return "same"
    return "faster" if span[0] > 1 else "slower"


INDICATIVE = "indicative (1 run)"
SLOWER, FASTER, THE_SAME, UNDETERMINED = "slower", "faster", "same", "undetermined"


def word(speedup: Speedup, margin: float) -> str:
    """What a speed-up's interval says of it, as the module's list gives it.

    It is '' where no verdict can rest on the interval: one run on a side, or no time to divide by.
    An interval of no width (every ratio the same, so no test) is undetermined.
    """
    if not speedup.replicated or not math.isfinite(speedup.value):
        return ""
    if math.isnan(speedup.p):
        return UNDETERMINED
    if speedup.excludes(1.0):
        return SLOWER if speedup.value < 1 else FASTER
    return THE_SAME if 1 - margin <= speedup.low and speedup.high <= 1 + margin else UNDETERMINED


DECIDED = ("reproduced", "smaller", "larger", "absent", "reversed", "contradicted")  # the words verdict decides by


def verdict(item: dict[str, Any], ours: Speedup) -> str:
    claim = direction(item)
    if claim is None:
        return "no published figure"
    if not ours.replicated:
        return INDICATIVE
    if claim == "same":
        if 1 - SAME <= ours.low and ours.high <= 1 + SAME:
            return "reproduced"
        return "contradicted" if ours.high < 1 - SAME or ours.low > 1 + SAME else UNDETERMINED
    span = published_speedup(item)
    band = SAME if span is None else min(SAME, min(abs(1 - end) for end in span) / 2)
    if 1 - band <= ours.low and ours.high <= 1 + band:  # too small to be the claimed effect, holding 1.0 or not
        return "absent"
    if not ours.excludes(1.0):
        return UNDETERMINED
    if (ours.value > 1) != (claim == "faster"):
        return "reversed"
    if span is None:
        return "reproduced"
    low, high = span
    between = ours.high < low if claim == "faster" else ours.low > high
    beyond = ours.low > high if claim == "faster" else ours.high < low
    if between or beyond:
        return "smaller" if between else "larger"
    return "reproduced" if _near(ours, low, high) else UNDETERMINED  # else it holds values far from it too


def _near(ours: Speedup, low: float, high: float) -> bool:
    """Whether our interval lies within half and twice the published range, as a ratio and as an effect.

    An effect is a speed-up's distance from 1.0 in log: 1.1x's is half 1.21x's.
    """
    if min(low, ours.low) <= 0 or not math.isfinite(ours.high):  # no log: nothing bounds it
        return False
    ends = [math.log(low), math.log(high)]
    least = max(ends[0] - math.log(WITHIN), min(ends[0] / WITHIN, ends[0] * WITHIN))
    most = min(ends[1] + math.log(WITHIN), max(ends[1] / WITHIN, ends[1] * WITHIN))
    return least <= math.log(ours.low) and math.log(ours.high) <= most


UNDETERMINED_FLAG = "UNDETERMINED"


def flag(speedup: Speedup, significant: bool, threshold: float) -> str:
    """The flag of a gated comparison beyond the threshold.

    Significant in its family, it is a change; from one run a side, a possible one.
    A slowdown beyond the threshold may be neither confirmed nor ruled out.
    It is then undetermined.
    Its interval reaches past the threshold on the slow side.
    So is a speed-up without a time to divide by.
    A gate must not pass it as nothing.
    """
    way = speedup.beyond(threshold)
    one_run = "" if speedup.replicated else "1 run, "
    if significant and way:
        if speedup.replicated:
            return "REGRESSION" if way == "slower" else "improvement"
        return f"{'POSSIBLE REGRESSION' if way == 'slower' else 'possible improvement'} (1 run)"
    if way == "slower":
        return f"{UNDETERMINED_FLAG} (slower, {one_run}not significant)"
    if not math.isfinite(speedup.value):
        return f"{UNDETERMINED_FLAG} (no time to compare)"
    if speedup.low < slow_end(threshold):
        return f"{UNDETERMINED_FLAG} ({one_run}{reaches(speedup)})"
    return ""


def reaches(speedup: Speedup) -> str:
    """'its interval reaches 0.309x': the slow end, rounded down no further than a threshold's digits need."""
    return f"its interval reaches {math.floor(speedup.low * 1000) / 1000:g}x"
