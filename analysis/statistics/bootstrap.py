"""Statistics of step times: a run's median with a bootstrap interval, and rank correlations over models.

A run's steps are resampled with replacement (percentile bootstrap), and each resample's median taken.
Resamples come from a seeded generator, so the same records give the same interval.

A resample's median is drawn without building the resample.
Resampling n steps draws n uniform indices into the sorted steps.
Their median is the m-th of n uniform order statistics, distributed Beta(m, n - m + 1).
So each bootstrap median costs O(1) after one sort, exactly as if the resample had been built.
A thousand-run sweep is summarised in seconds.
"""

import dataclasses

import numpy as np

from perfsweep.analysis.statistics.distributions import spearman_rho

RESAMPLES = 2000
LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

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


def percentile_interval(resampled: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The percentile-bootstrap interval at `level` of a statistic's resampled values (nan ones left out)."""
    tail = (1 - level) / 2 * 100
    low, high = np.nanpercentile(resampled, [tail, 100 - tail])
    return float(low), float(high)


def median_interval(steps: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """A percentile-bootstrap interval of the median of `steps` at LEVEL."""
    medians = resampled_medians(steps, resamples, np.random.default_rng(seed))
    return percentile_interval(medians)


def rank_correlation(x: np.ndarray, runs: list[np.ndarray], resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """Spearman's rho between `x` and each model's median run.

    Its percentile-bootstrap interval at LEVEL resamples the models.
    It also resamples each model's runs.
    So two models whose runs overlap trade places in some resamples.
    Our run-to-run noise then widens the interval.
    """
    x = np.asarray(x, dtype=float)
    runs = [np.atleast_1d(np.asarray(r, dtype=float)) for r in runs]
    rng = np.random.default_rng(seed)
    # (resamples, models): each model's median over a resample of its runs
    medians = np.stack([np.median(r[rng.integers(0, len(r), (resamples, len(r)))], axis=1) for r in runs], axis=1)
    picks = rng.integers(0, len(x), (resamples, len(x)))
    rhos = np.array([spearman_rho(x[i], medians[k, i]) for k, i in enumerate(picks)])
    return Interval(spearman_rho(x, [np.median(r) for r in runs]), *percentile_interval(rhos))
