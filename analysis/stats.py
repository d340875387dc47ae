"""Statistics of step times: medians, and ratios between runs with bootstrap confidence intervals.

A run's steps are resampled with replacement (percentile bootstrap), each resample's median
taken; a ratio's interval resamples both runs' steps independently. Resamples are drawn from a
seeded generator, so the same records give the same interval.

A resample's median is drawn without building the resample: resampling n steps draws n uniform
indices into the sorted steps, and their median is the m-th of n uniform order statistics, whose
position is Beta(m, n - m + 1) distributed. So each bootstrap median costs O(1) after one sort,
exactly as if the resample had been built, and a thousand-run sweep is summarised in seconds.
"""

import dataclasses
import math

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
NOT_CONFIGURATION = ("seed", "replicate")  # what replicates of one configuration differ in
# two-sided 95% Student t quantiles for 1..30 degrees of freedom; beyond, the normal's
T975 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]
Z975, Z80 = 1.959964, 0.841621


def _figure(x: float) -> str:
    """Two decimals where they read best (0.52, 1.07), three significant digits beyond (3.31e+03, 152)."""
    return f"{x:.2f}" if 0.1 <= abs(x) < 10 else f"{x:.3g}"


@dataclasses.dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{_figure(self.value)}x [{_figure(self.low)}, {_figure(self.high)}]"

    def excludes(self, x: float) -> bool:
        return x < self.low or x > self.high


def resampled_medians(steps: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The median of each of `resamples` bootstrap resamples of `steps`."""
    ordered = np.sort(np.asarray(steps, dtype=float))
    n = len(ordered)
    m = (n + 1) // 2
    lower = rng.beta(m, n - m + 1, resamples)  # the m-th smallest of n uniforms
    pick = ordered[np.minimum((lower * n).astype(int), n - 1)]
    if n % 2:
        return pick
    upper = lower + (1 - lower) * rng.beta(1, n - m, resamples)  # the next one up: the median of an even n
    return (pick + ordered[np.minimum((upper * n).astype(int), n - 1)]) / 2


def median_interval(steps: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """A percentile-bootstrap interval of the median of `steps` at LEVEL."""
    medians = resampled_medians(steps, resamples, np.random.default_rng(seed))
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def speedup(of: np.ndarray, over: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """How many times faster `of` runs than `over`: median(over) / median(of), per-step times of each,
    with a percentile-bootstrap interval at LEVEL (below 1: `of` is slower)."""
    of, over = np.asarray(of, dtype=float), np.asarray(over, dtype=float)
    if len(of) == 0 or len(over) == 0:
        raise ValueError("a speed-up needs step times of both runs")
    rng = np.random.default_rng(seed)
    ratios = resampled_medians(over, resamples, rng) / resampled_medians(of, resamples, rng)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return Interval(float(np.median(over) / np.median(of)), float(low), float(high))


def t975(df: float) -> float:
    return T975[int(df) - 1] if df < len(T975) + 1 else Z975


def speedup_across_runs(of: np.ndarray, over: np.ndarray) -> Interval:
    """How many times faster `of` runs than `over`, from their runs' medians: Welch t-interval on log medians."""
    a, b = np.log(of), np.log(over)
    diff = b.mean() - a.mean()
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(math.exp(diff), math.exp(diff), math.exp(diff))
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t975(df) * se
    return Interval(math.exp(diff), math.exp(diff - half), math.exp(diff + half))


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    values, tie_group = np.unique(x, return_inverse=True)
    return (np.bincount(tie_group, ranks) / np.bincount(tie_group))[tie_group] if len(values) < len(x) else ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (nan when either side has a single rank)."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def rank_correlation(x: np.ndarray, y: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """Spearman's rho of paired values (one pair per model), with a percentile-bootstrap interval at LEVEL
    that resamples the pairs."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    drawn = (rng.integers(0, len(x), len(x)) for _ in range(resamples))
    rhos = np.array([spearman(x[i], y[i]) for i in drawn])
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.nanpercentile(rhos, [tail, 100 - tail])
    return Interval(spearman(x, y), float(low), float(high))
