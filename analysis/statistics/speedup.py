"""What a speed-up rests on, with the process as the unit of replication.

Steps of one process share its state: the allocator, the clocks, cuDNN's algorithms, where the OS put its threads.
So two processes of one configuration differ by more than the steps of either suggest.
Each run (one process) therefore counts once, by its median time.

- Two or more runs a side: a t-interval on the runs' log medians.
  It is paired by round where both configurations ran in the same interleaved rounds of one sweep.
  Round r of A then sits beside round r of B, and drift over the sweep cancels.
  Otherwise it is Welch's.
- One run on a side: only steps can be resampled, each run's on their own (a percentile bootstrap).
  The ratio is still that of the geometric means of run medians, the times the views print beside it.
  The interval is labelled `within-run`.
  It leaves the difference between processes out, and no verdict may rest on it.
"""

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np

from perfsweep.analysis.statistics import distributions
from perfsweep.analysis.statistics.bootstrap import LEVEL, RESAMPLES, Interval, percentile_interval, resampled_medians

WITHIN_RUN = "within-run"
PAIRED = "paired by round"
IN_PROCESS = "paired in process"  # each round's two runs were sides of one process (pairing=auto)
ACROSS = "across runs"


WIDE = 10.0  # an interval whose high bound is this many times its low one spans an order of magnitude or more
MORE_DIGITS = 3  # the most digits added to keep a figure out of a printed interval (figures' `apart`)
MOVED_BY = 0.05  # the most a printed bound is moved from the computed one, as a share of it


def figures(value: float, low: float, high: float, apart: float | tuple[float, ...] = ()) -> tuple[str, str, str]:
    """The three figures, to the digits their interval supports.

    The digits resolve half of the half-width: at most three significant, at least one each.
    torch.utils.benchmark trims a measurement the same way.
    Rounding outward may move a bound by more than MOVED_BY of itself.
    That bound then gets a digit more: 92 [69, 122], not 90 [60, 130].
    Examples: 0.93 [0.90, 0.96], 0.931 [0.928, 0.934], 152 [140, 165], 2.0 [0.9, 4.4].
    An interval may span an order of magnitude or more.
    Two runs of a noisy ratio do.
    Each figure then gets two significant digits of its own, a bound more where 5% needs them.
    So it reads 0.82 [5.0e-07, 1.32e+06], not 0.8237666 [0.0000005, 1315583.57].
    And it reads 1.1 [0.129, 9.9], not 1.130 [0.129, 9.829].
    The low bound's digits are not the others'.
    The bounds are rounded outward: a printed interval is never narrower than the one computed.
    `apart` is a figure the interval excludes, such as a ratio's 1, or several: a published speed-up too.
    The bounds then get the digits that keep them out, up to MORE_DIGITS more.
    So 1.04 is not printed 1.0 beside the word faster.
    """
    apart = (apart,) if isinstance(apart, float | int) else tuple(apart)
    if 0 < low and high > WIDE * low and math.isfinite(high) and math.isfinite(value) and value > 0:
        near_low = any(low > x for x in apart)  # a bound that may touch a figure of `apart` gets the digits
        near_high = any(high < x for x in apart) or not near_low
        for digits in range(2, 2 + MORE_DIGITS + 1):
            wide = (
                _significant(value, round, digits),  # as many as the bound that keeps `apart` out: 1.03x [1.01, ...]
                _bound(low, math.floor, digits if near_low else 2, 1e-9),
                _bound(high, math.ceil, digits if near_high else 2, -1e-9),
            )
            if not _touches(wide, low, high, apart):
                break
        return wide
    half = max(high - value, value - low)
    place = math.floor(math.log10(half / 2)) if half > 0 and math.isfinite(half) else -6
    if value and math.isfinite(value):
        place = max(place, math.floor(math.log10(abs(value))) - 2)
    smallest = min((abs(x) for x in (value, low, high) if x and math.isfinite(x)), default=1.0)
    place = min(place, math.floor(math.log10(smallest)))
    while place > math.floor(math.log10(smallest)) - 2 and _moved(_at(place, value, low, high), low, high):
        place -= 1
    for more in range(MORE_DIGITS + 1):
        shown = _at(place - more, value, low, high)
        if not _touches(shown, low, high, apart):
            break
    return _trimmed(shown, place - more, value, apart)


def _at(place: int, value: float, low: float, high: float) -> tuple[str, str, str]:
    """The figures to the digit 10**place, the bounds rounded outward."""
    return _shown(value, place), _shown(low, place, math.floor, 1e-9), _shown(high, place, math.ceil, -1e-9)


def _shown(x: float, place: int, rounded: Callable[[float], float] = round, slack: float = 0.0) -> str:
    """x to the digit 10**place; inf and nan as they are."""
    if not math.isfinite(x):
        return f"{x:g}"
    return f"{rounded(x / 10.0**place + slack) * 10.0**place:.{max(0, -place)}f}"


def _trimmed(shown: tuple[str, str, str], place: int, value: float, apart: tuple[float, ...]) -> tuple[str, str, str]:
    """The figures, the value to three significant digits at most.

    One place for all three gives the smallest figure's digits to the others.
    So 1.13 [0.129, 1.229] would print as 1.130 [0.129, 1.229].
    Three digits are enough for the value: 1.13 [0.129, 1.229].
    That holds where it then does not print as `apart`.
    The bounds keep the place: rounded outward to fewer digits, 1.011 would read 1.02, at a margin's edge.
    """
    if not value or not math.isfinite(value) or place >= (three := math.floor(math.log10(abs(value))) - 2):
        return shown
    trimmed = _shown(value, three)
    return shown if any(value != x and float(trimmed) == x for x in apart) else (trimmed, *shown[1:])


def _bound(x: float, rounded: Callable[[float], float], digits: int, slack: float) -> str:
    """A bound to `digits` significant digits, or more where fewer would move it too far (MOVED_BY)."""
    shown = _significant(x, rounded, digits, slack)
    while abs(float(shown) - x) > MOVED_BY * x and digits < 2 + MORE_DIGITS:
        digits += 1
        shown = _significant(x, rounded, digits, slack)
    return shown


def _moved(shown: tuple[str, str, str], low: float, high: float) -> bool:
    """Whether rounding outward moved a bound too far (MOVED_BY of itself): 100 printed for 171."""
    return any(
        math.isfinite(x) and x > 0 and abs(float(printed) - x) > MOVED_BY * x
        for printed, x in ((shown[1], low), (shown[2], high))
    )


def _touches(shown: tuple[str, str, str], low: float, high: float, apart: tuple[float, ...]) -> bool:
    """Whether the printed bounds reach a figure of `apart`, which the computed ones exclude."""
    return any((low > x and float(shown[1]) <= x) or (high < x and float(shown[2]) >= x) for x in apart)


def _significant(x: float, rounded: Callable[[float], float], digits: int, slack: float = 0.0) -> str:
    """`x` to `digits` significant digits: written out from 0.001 to 1 000 000, else in exponent form."""
    place = math.floor(math.log10(x)) - digits + 1
    shown = rounded(x / 10.0**place + slack) * 10.0**place
    return f"{shown:.{max(0, -place)}f}" if 1e-3 <= shown < 1e6 else f"{shown:.{digits - 1}e}"


def percent(fraction: float) -> str:
    """A level or a margin as people write it: 95%, 99%, 97.5%, 98.33%, 2%."""
    return f"{round(fraction * 100, 2):g}%"


def geometric_mean(values) -> float | None:
    """The geometric mean of the positive, finite values; None where there are none.

    A time of 0 ms has no logarithm, so it is left out.
    """
    kept = [float(v) for v in values if v is not None and 0 < v < math.inf]
    return float(np.exp(np.mean(np.log(kept)))) if kept else None


@dataclasses.dataclass(frozen=True)
class Sample:
    """One configuration's measurements of one time: each run's measured steps (ms, in order) and its round."""

    steps: tuple[np.ndarray, ...]
    rounds: tuple[int, ...]  # each run's replicate: the round it ran in where its sweep interleaved them

    @property
    def runs(self) -> int:
        return len(self.steps)

    @functools.cached_property
    def medians(self) -> np.ndarray:
        if len({len(s) for s in self.steps}) == 1:  # runs of one length: one call for all (views make thousands)
            return np.median(np.vstack(self.steps), axis=1)
        return np.array([np.median(s) for s in self.steps])

    @property
    def middle(self) -> float | None:
        """The geometric mean of its runs' medians.

        It is the configuration's time in the table.
        A speed-up across runs is the ratio of two of them.
        """
        return geometric_mean(self.medians)

    @property
    def replicated(self) -> bool:
        return self.runs >= 2


@dataclasses.dataclass(frozen=True)
class Speedup(Interval):
    """A speed-up, with its interval, what it rests on, and its p-value.

    The speed-up is the time of `over` divided by that of `of`.
    Across runs, it is the ratio of their geometric means of run medians.
    The p-value is the chance of a difference this large, either way, where there is none.
    """

    basis: str = WITHIN_RUN
    runs: tuple[int, int] = (1, 1)  # runs of `of`, of `over` (paired: the pairs, on each side)
    p: float = math.nan  # nan where no test was possible (no spread measured)
    se: float = math.nan  # across runs: the standard error of the log speed-up, and its degrees of freedom
    df: float = math.nan

    @property
    def replicated(self) -> bool:
        return self.basis != WITHIN_RUN

    def __str__(self) -> str:
        return self.text()

    def text(self, apart: tuple[float, ...] = ()) -> str:
        """The speed-up and its interval, with the digits that keep 1 and the figures of `apart` out of it."""
        if not math.isfinite(self.value):
            return UNKNOWN
        value, low, high = figures(self.value, self.low, self.high, apart=(1.0, *apart))
        return f"{value}x [{low}, {high}]" + ("" if self.replicated else f" {WITHIN_RUN}")

    def p_text(self) -> str:
        """The p-value as a table shows it.

        One within a run is labelled so: it is blind to the spread between processes.
        At the least value its resamples can give, it reads as a bound.
        """
        if self.replicated or math.isnan(self.p):
            return f"{self.p:.2g}"
        floor = resampled_p(0, RESAMPLES)
        return (f"<={floor:.2g}" if self.p <= floor else f"{self.p:.2g}") + f" {WITHIN_RUN}"

    def beyond(self, threshold: float) -> str:
        """'slower' or 'faster' where the slower side's time is the other's times more than 1 + `threshold`, else ''."""
        if self.value < slow_end(threshold):
            return "slower"
        return "faster" if self.value > 1 + threshold else ""


def slow_end(threshold: float) -> float:
    """The speed-up below which B is slower by more than `threshold`: B's time over A's past 1 + `threshold`.

    So a 5% threshold flags a speed-up under 0.952, and 50% one under 0.667: "1.5x slower", as compare says it.
    """
    return 1 / (1 + threshold)


# A speed-up as data: its ratio, its interval's bounds and level, the word for what the interval says, what it rests on.
PARTS = ("", "low", "high", "level", "word", "basis")


def no_word(speedup: Speedup) -> str:
    return ""


def as_text(found: Speedup | float | None, word: Callable[[Speedup], str] = no_word) -> str:
    """A speed-up over a baseline as a table shows it, its word after its interval.

    `found` is 1.0 for the baseline itself (1.00x), None where the baseline did not run (-).
    """
    if not isinstance(found, Speedup):
        return "-" if found is None else "1.00x"
    return f"{found} {word(found)}".rstrip()


def as_data(
    found: Speedup | float | None, level: float, word: Callable[[Speedup], str] = no_word
) -> dict[str, float | str | None]:
    """The same speed-up by PARTS, its interval at `level`.

    The baseline's is its ratio, 1.0, alone; there is none without a baseline.
    A row pasted elsewhere still says its interval's level.
    repeats=auto's is not 95%.
    """
    if not isinstance(found, Speedup):
        return {"": found}
    parts = (found.value, found.low, found.high, level, word(found) or None, found.basis)
    return dict(zip(PARTS, parts, strict=True))


def t_interval(diff: float, se: float, df: float, level: float) -> tuple[float, float, float]:
    """exp of diff -+ t se, and the two-sided p-value of diff = 0.

    Both are nan where runs show no spread at all, as a coarse timer's can.
    That is no test, rather than certainty.
    """
    if se == 0:
        return math.exp(diff), math.exp(diff), math.nan
    half = distributions.t_ppf(0.5 + level / 2, df) * se
    p = 2 * distributions.t_sf(abs(diff) / se, df)
    return math.exp(diff - half), math.exp(diff + half), float(p)


def in_process_ratio(of: np.ndarray, over: np.ndarray) -> float:
    """One process's log speed-up of side `of` over side `over`: the median of its steps' log ratios.

    The sides' blocks run in rounds, so the k-th measured step of each side ran in one round, side by side.
    Noise that drifts over the process (a neighbour, a clock) moves both steps alike, and cancels.
    The ratio of the sides' medians keeps it; this has about half its variance on a shared CPU.
    PyTorch's dynamo benchmarks take the median of the per-repetition ratios for the same reason.
    """
    return float(np.median(round_ratios(of, over)))


def round_ratios(of: np.ndarray, over: np.ndarray) -> np.ndarray:
    """The log ratios of two sides of one process, step by step: the k-th steps of each ran in one round."""
    return np.log(over) - np.log(of)


def paired_rounds(of: Sample, over: Sample) -> list[tuple[int, int]]:
    """The indices of the runs of `of` and `over` that ran in the same round.

    A side with two runs in one round is not paired: its runs are not told apart.
    """
    if len(set(of.rounds)) < of.runs or len(set(over.rounds)) < over.runs:
        return []
    where = {r: i for i, r in enumerate(over.rounds)}
    return [(i, where[r]) for i, r in enumerate(of.rounds) if r in where]


UNKNOWN = "unknown: a run has no positive median time"


def _timed(sample: Sample) -> bool:
    """Whether every run's median time is one a ratio can divide by.

    A coarse timer, or a damaged record, can leave 0 ms, or none.
    """
    return bool(np.all(sample.medians > 0)) and bool(np.all(np.isfinite(sample.medians)))


def speedup(
    of: Sample, over: Sample, paired: bool = False, level: float = LEVEL, seed: int = 0, basis: str = PAIRED
) -> Speedup:
    """How many times faster `of` runs than `over`; below 1, `of` is slower.

    Across runs: the ratio of the geometric means of their runs' medians.
    Paired by round: the geometric mean of the pairs' ratios.
    Paired in process: the same, each process's ratio the median of its steps' ratios (in_process_ratio).
    With one run on a side: the same ratio, its interval from each run's steps resampled.
    `paired`: the two ran in the same interleaved rounds of one sweep.
    `basis` names the pairing: by round, or in process where each round's two runs shared one.
    """
    runs = (of.runs, over.runs)
    if not (_timed(of) and _timed(over)):
        return Speedup(math.nan, math.nan, math.nan, ACROSS if of.replicated and over.replicated else WITHIN_RUN, runs)
    if of.replicated and over.replicated:
        a, b = np.log(of.medians), np.log(over.medians)
        pairs = paired_rounds(of, over) if paired else []
        if len(pairs) >= 2:
            if basis == IN_PROCESS:
                d = np.array([in_process_ratio(of.steps[i], over.steps[j]) for i, j in pairs])
            else:
                d = np.array([b[j] - a[i] for i, j in pairs])
            se, df = float(d.std(ddof=1) / math.sqrt(len(d))), len(d) - 1
            low, high, p = t_interval(float(d.mean()), se, df, level)
            return Speedup(math.exp(float(d.mean())), low, high, basis, (len(d), len(d)), p, se, df)
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if va + vb else 1.0
        diff, se = float(b.mean() - a.mean()), math.sqrt(va + vb)
        low, high, p = t_interval(diff, se, df, level)
        return Speedup(math.exp(diff), low, high, ACROSS, runs, p, se, df)
    rng = np.random.default_rng(seed)
    ratios = _resampled_middle(over, rng) / _resampled_middle(of, rng)
    low, high = percentile_interval(ratios, level)
    crossed = min(np.sum(ratios <= 1), np.sum(ratios >= 1))
    return Speedup(over.middle / of.middle, low, high, WITHIN_RUN, runs, resampled_p(int(crossed), len(ratios)))


def resampled_p(crossed: int, resamples: int) -> float:
    """The two-sided p-value of `resamples` ratios, `crossed` of which lie on the far side of 1.

    (k + 1) / (B + 1): it is never 0, however far the resamples lie from 1 (Davison & Hinkley).
    """
    return min(1.0, 2 * (crossed + 1) / (resamples + 1))


def _resampled_middle(sample: Sample, rng: np.random.Generator) -> np.ndarray:
    """The configuration's time in each bootstrap resample: each run's steps resampled on their own, then the
    geometric mean of the runs' medians, as `Sample.middle` takes it."""
    logs = [np.log(resampled_medians(steps, RESAMPLES, rng)) for steps in sample.steps]
    return np.exp(np.mean(logs, axis=0))


def holm(p: list[float], alpha: float = 1 - LEVEL) -> list[bool]:
    """Which of a family of hypotheses are rejected, holding the family's error rate at `alpha`.

    This is Holm's step-down method.
    The k-th smallest p-value is held to alpha / (m - k + 1).
    Testing stops at the first that is not rejected.
    """
    rejected = [False] * len(p)
    # A nan (no test was possible) is never rejected, and sorts last so that it stops no other test.
    for k, i in enumerate(sorted(range(len(p)), key=lambda i: (math.isnan(p[i]), p[i]))):
        if not p[i] <= alpha / (len(p) - k):
            break
        rejected[i] = True
    return rejected


def suite_speedup(pairs: list[tuple[Sample, Sample]], level: float = LEVEL) -> Speedup | None:
    """The geometric mean over configurations of A's time over B's.

    Its unit is the round.
    `pairs` holds each configuration's sample in A and in B.
    A round's configurations share its processes and its moment on the machine.
    So they move together.
    Their speed-ups are not independent.
    Each round gives one value.
    It is the mean of its configurations' log medians.
    Only rounds that every configuration ran in count.
    A Welch t-interval compares A's rounds with B's.
    Its `runs` are the rounds of each side.
    It is None with fewer than 2 rounds a side.
    It is None with a time of 0 ms: that has no logarithm.
    """
    if not pairs or any(np.any(sample.medians <= 0) for pair in pairs for sample in pair):
        return None
    means = [_round_means([pair[side] for pair in pairs]) for side in (0, 1)]
    if min(len(m) for m in means) < 2:
        return None
    diff = float(np.mean(means[0]) - np.mean(means[1]))
    shares = [float(np.var(m, ddof=1)) / len(m) for m in means]
    se = math.sqrt(sum(shares))
    df = sum(shares) ** 2 / sum(x * x / (len(m) - 1) for x, m in zip(shares, means, strict=True)) if se else 1.0
    low, high, p = t_interval(diff, se, df, level)
    return Speedup(math.exp(diff), low, high, ACROSS, (len(means[0]), len(means[1])), p, se, df)


def _round_means(samples: list[Sample]) -> list[float]:
    """Each round that every sample ran in, as one value.

    It is the mean over the samples of its runs' log medians.
    """
    common = set.intersection(*(set(sample.rounds) for sample in samples))
    by_round = []
    for round_ in sorted(common):
        logs = [np.mean(np.log(s.medians[[r == round_ for r in s.rounds]])) for s in samples]
        by_round.append(float(np.mean(logs)))
    return by_round
