"""A run's step times: robust statistics, and when they are too noisy to trust.

Each phase has a median, IQR, p5/p95 and a bootstrap interval of the median.
That interval is within-run: it leaves the difference between processes out.
Outlier steps lie beyond 3 IQR from the quartiles; they are counted, never dropped.
A run is noisy when its robust CV (IQR / 1.349 / median) is above NOISY.
A trend is a first fifth off the last by more than TREND, in steps whose times go with their number.
"""

import dataclasses
import math

import numpy as np

from perfsweep.analysis.statistics.bootstrap import median_interval
from perfsweep.analysis.statistics.distributions import spearman
from perfsweep.records.words import counted

NOISY = 0.10  # robust CV above which a run's figures are flagged
TREND = 0.05  # first fifth's median off the last fifth's by more than this: still warming up
OUTLIER_IQR = 3.0
# A noisy run's trend needs ranks that agree at this level: fifths of spread steps differ by chance.
LOOSE = 0.05


@dataclasses.dataclass(frozen=True)
class PhaseStats:
    n: int
    median: float
    q1: float
    q3: float
    p5: float
    p95: float
    ci_low: float  # 95% interval of the median
    ci_high: float
    outliers: int

    @property
    def robust_cv(self) -> float:
        return (self.q3 - self.q1) / 1.349 / self.median if self.median else math.inf


def phase_stats(steps: np.ndarray, interval: bool = True) -> PhaseStats:
    """Statistics of one phase's measured step times (ms); the median's interval left nan unless `interval`."""
    values = np.sort(np.asarray(steps, dtype=float))
    n = len(values)
    if n == 0:
        raise ValueError("no measured steps")
    p5, q1, median, q3, p95 = np.percentile(values, [5, 25, 50, 75, 95])
    low, high = median_interval(values) if interval else (math.nan, math.nan)
    spread = q3 - q1
    outliers = int(np.sum((values < q1 - OUTLIER_IQR * spread) | (values > q3 + OUTLIER_IQR * spread)))
    return PhaseStats(n, float(median), float(q1), float(q3), float(p5), float(p95), low, high, outliers)


def trend(steps: np.ndarray, significance: float = 0.001, host: str | None = None) -> str:
    """Why a run's steps (in order) are not yet steady; '' where they are.

    Two things must both hold:

    - its first fifth's median is off its last fifth's by more than TREND;
    - step time goes with step number (Spearman's test).

    Where the fifths and the ranks point opposite ways, the steps moved one way, then the other.

    Steps follow their neighbours, so the test's p-value is held far below the usual 5%.
    `host` is what the host showed during the run (analysis/statistics/host_flags.py).
    It takes the place of a guess at the cause; None where the run's host was not read.
    """
    why = _trend(steps, significance, guess=host is None)
    return _with_host(why, host) if why else ""


def _trend(steps: np.ndarray, significance: float, guess: bool) -> str:
    if len(steps) < 10:
        return ""
    fifth = max(1, len(steps) // 5)
    first, last = float(np.median(steps[:fifth])), float(np.median(steps[-fifth:]))
    if abs(first - last) <= TREND * last:
        return ""
    rho, p = spearman(np.arange(len(steps)), steps)
    if not p < significance:
        return ""
    slowing = "slowing down (a throttling device, a cost that grows?)" if guess else "slowing down"
    why = "warm-up not long enough" if first > last else slowing
    if (rho > 0) != (last > first):
        if significance >= LOOSE:  # a noisy run's: one outlier in a fifth turned its median
            return ""
        why = "step times move one way, then the other"
    return f"first fifth of steps {first:.3g} ms vs last fifth {last:.3g} ms (Spearman {rho:+.2f}): {why}"


def _with_host(line: str, host: str | None) -> str:
    return line if host is None else f"{line}; host: {host}"


def noise(steps: np.ndarray, stats: PhaseStats, host: str | None = None) -> list[str]:
    """Why a run's steps (in order) are too spread to trust; empty if they are not.

    `host` is what the host showed during the run, as for `trend`.
    """
    if stats.robust_cv <= NOISY:
        return []
    reasons = [drift] if (drift := _trend(steps, LOOSE, guess=host is None)) else []
    if stats.outliers:
        reasons.append(f"{counted(stats.outliers, 'outlier step')} of {stats.n}")
    if not reasons:
        guess = " (a shared or throttling machine?)" if host is None else ""
        reasons.append(f"steps spread without a trend or outliers{guess}")
    return [_with_host(f"robust CV {above_noisy(stats.robust_cv)} > {NOISY:.0%}: " + "; ".join(reasons), host)]


def above_noisy(cv: float) -> str:
    """A robust CV above NOISY as a percentage, with the decimals that keep it above: 10.04%, not 10.0%."""
    for decimals in range(1, 4):
        if round(cv * 100, decimals) > NOISY * 100:
            break
    return f"{cv:.{decimals}%}"
