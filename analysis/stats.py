"""Statistics of step times: medians, and ratios between runs with bootstrap confidence intervals.

A run's steps are resampled with replacement (percentile bootstrap), each resample's median
taken; a ratio's interval resamples both runs' steps independently. Resamples are drawn from a
seeded generator, so the same records give the same interval.
"""

import dataclasses

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3g}x [{self.low:.3g}, {self.high:.3g}]"

    def excludes(self, x: float) -> bool:
        return x < self.low or x > self.high


def resampled_medians(steps: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The median of each of `resamples` bootstrap resamples of `steps`."""
    picks = rng.integers(0, len(steps), size=(resamples, len(steps)))
    return np.median(steps[picks], axis=1)


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
