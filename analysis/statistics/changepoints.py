"""Change points in a configuration's step time over a history of points (commits).

Each point holds its runs' median step times, one per process.
The series is each point's mean log time: the log of the geometric mean over its runs.

The search is ruptures' binary segmentation with the l2 cost (a change in the mean), one point apart at least.
Its penalty sets how much a split must explain to count: 5 ln(n) sigma^2, 2.5 times the BIC-like 2 ln(n) sigma^2.
sigma^2 is one point's noise variance: the larger of two estimates.

- From the replicated runs: the variance between a point's processes, pooled over points, over its runs.
- From the series itself: the smaller of two estimates of what varies between sweeps and not within one (a day's
  machine, a driver). Each reads a history that the other would take for noise.
  - The median absolute difference of neighbouring points (MAD-scaled).
    It holds where fewer than half the neighbours differ by a change.
    A history that steps back and forth (regress, revert, regress) passes that.
  - The series' spread about the segments that, with it, explain the series best.
    Each count of changes on binary segmentation's path (a segment of one point allowed) is scored by Schwarz's
    criterion with the variance unknown (Yao 1988), at the search's own penalty a change.
    The variance is the residuals' over their degrees of freedom, a change spending two: its place and its level.
    It is no less than the replicates'.
    It picks no change where a long history's steps cost more penalty than they explain: the first estimate holds.
  Without replicates, the series' estimate is the first alone.

A segment holds two points at least.
So binary segmentation ends no segment at the newest point alone.
Where its last segment is the newest two points, three readings are weighed by their residuals (`_newest_two`):
- both differ from the segment before: the change stays;
- the newest alone differs: the change moves to it;
- the one before it alone differs: a change, and the newest's revert of it.
  The newest must then lie within the noise of the segment before (one-sided, at 5%): a partial revert is no revert.
Where no change point ends the series, `newest_alone` says how far the newest point stands out.
It judges that against the noise: the others', or its own runs' spread.

Some points' runs spread far wider than the others' (`spread_apart`).
A neighbour took their host, or their runs ran in two modes.
Such a point's mean is not known.
Its level would move a segment's mean, and its spread the noise.
So it is left out of the search.
In a history of 6 points, one beside a 1.86x step made the step read as noise.

Each gives a one-sided p-value that the newer part is slower, for the history's gate to hold a sweep's
configurations to one error rate as a family.
A change point's p-value is its two segments' z-test, multiplied by the places a change point could take:
the search picked the largest of them (Bonferroni's bound).

Calibrated on synthetic histories of 16 points of 3 runs each, a run's spread 5% (2000 histories a row):

| a sweep's own spread | any change point, nothing planted | a 20% step found at its commit, alone |
|---|---|---|
| 0% | 0.2% | 99.8% |
| 3% | 1.6% | 96.2% |
| 5% | 2.8% | 80.5% |

tests/test_history.py holds the 3% row at 5% and 80%.
"""

import dataclasses
import functools
import heapq
import math
from typing import NamedTuple

import numpy as np

from perfsweep.analysis.statistics import distributions

MIN_SIZE = 2  # points a segment holds at least
MIN_POINTS = 2 * MIN_SIZE  # fewer is not enough history to find a change point in
PENALTY = 5.0  # times ln(n) sigma^2
APART = 1e-4  # a point whose runs spread this unlikely far beyond the other points' is left out of the search
MEDIAN_EFFICIENCY = 2 / math.pi  # a median's, against a mean's, of normal data: its reference's degrees of freedom


@dataclasses.dataclass(frozen=True)
class Change:
    """A change point: the first point of a new segment, and the segments' mean times either side."""

    index: int
    before: float  # the segment before's geometric-mean time
    after: float  # the new segment's
    p: float  # one-sided, that the new segment is slower, over the places a change point could take

    @property
    def ratio(self) -> float:
        """The new segment's time over the one before's: above 1 is slower."""
        return self.after / self.before


def _log_moments(points: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each point's runs, their mean log time and their squared deviations from it, summed.

    All points at once: a history is many points of a few runs, where numpy's per-array calls would cost the most.
    """
    sizes = np.array([len(runs) for runs in points], dtype=int)
    logs = np.log(np.concatenate([np.asarray(runs, dtype=float) for runs in points])) if points else np.array([])
    point = np.repeat(np.arange(len(points)), sizes)
    means = np.bincount(point, logs, minlength=len(points)) / np.maximum(sizes, 1)
    squares = np.bincount(point, (logs - means[point]) ** 2, minlength=len(points))
    return sizes, means, squares


def series(points: list[np.ndarray]) -> np.ndarray:
    """Each point's mean log time over its runs."""
    return _log_moments(points)[1]


def _variances(points: list[np.ndarray]) -> tuple[float | None, float | None]:
    """One run's variance in log time, pooled over the replicated points, and one point's from the series."""
    sizes, y, squares = _log_moments(points)
    replicated = sizes >= 2
    per_run = float(squares[replicated].sum() / (sizes[replicated] - 1).sum()) if replicated.any() else None
    if len(y) < 3:
        return per_run, None
    neighbours = (1.4826 * float(np.median(np.abs(np.diff(y))))) ** 2 / 2
    if per_run:
        return per_run, min(neighbours, _segmented_variance(y, per_run / float(np.median(sizes))))
    return per_run, neighbours


def _segmented_variance(y: np.ndarray, floor: float) -> float:
    """One point's variance from the series: its spread about the segments that, with it, explain it best.

    Each count of changes k on binary segmentation's path is scored by n ln(v) + RSS / v + the penalty of k changes.
    v is the residuals' variance, over n - 2k - 1 degrees of freedom, and no less than `floor` (the replicates').
    Where the changes leave no degree of freedom, v is the floor.
    """
    n = len(y)
    best = (math.inf, floor)
    for k, rss in enumerate(_residuals(y)):
        free = n - 2 * k - 1
        v = max(floor, rss / free) if free > 0 else floor
        best = min(best, (n * math.log(v) + rss / v + PENALTY * math.log(n) * k, v))
    return best[1]


def _residuals(y: np.ndarray) -> list[float]:
    """The residual sum of squares along binary segmentation's path: with no change, then after each split.

    Each split is the one that explains the most, of any segment's, as ruptures' Binseg takes them (one point apart).
    """
    found = [float(np.sum((y - y.mean()) ** 2))]
    heap = [_split(y, 0, len(y))]
    while heap:
        explained, at, start, end = heapq.heappop(heap)
        found.append(max(0.0, found[-1] + explained))
        for a, b in ((start, at), (at, end)):
            if b - a >= 2:
                heapq.heappush(heap, _split(y, a, b))
    return found


def _split(y: np.ndarray, start: int, end: int) -> tuple[float, int, int, int]:
    """The best split of y[start:end] in two: minus what it explains (for a min-heap), where, and the segment."""
    part = y[start:end]
    left = np.arange(1, len(part))
    explained = (np.cumsum(part)[:-1] - left * part.mean()) ** 2 * len(part) / (left * (len(part) - left))
    best = int(np.argmax(explained))
    return -float(explained[best]), start + best + 1, start, end


@functools.lru_cache(maxsize=256)
def _variances_of(points: tuple[bytes, ...]) -> tuple[float | None, float | None]:
    """_variances of the points as bytes: a history's views ask for the same points' noise several times."""
    return _variances([np.frombuffer(x) for x in points])


def noise_variance(points: list[np.ndarray], runs: float | None = None) -> float | None:
    """A point's noise variance in log time: the larger of the replicates' and the series' estimates.

    `runs` is the point's runs; by default, the median over the points.
    None where there is neither: no point replicated, and fewer than 3 points.
    """
    per_run, per_point = _variances_of(tuple(np.asarray(x, dtype=float).tobytes() for x in points))
    runs = runs or float(np.median([len(x) for x in points]))
    estimates = [v for v in (per_run / runs if per_run is not None else None, per_point) if v is not None]
    return max(max(estimates), 1e-12) if estimates else None


def spread_apart(points: list[np.ndarray], threshold: float) -> dict[int, float]:
    """The points, but the newest, whose runs spread far wider than the others': each one's ratio.

    Such a point's mean is uncertain by more than `threshold`.
    That is the smallest slowdown a history flags.
    The standard error of its runs' mean log time says by how much.
    Its ratio is its runs' variance over a reference.
    The reference is the median over the other replicated points of theirs.
    Each of those is divided by its chi-squared median over its degrees of freedom.
    A variance's median sits that far below its mean.
    One or two noisy points do not move a median.
    A point stands apart where the ratio passes F's 1 - APART quantile.
    F's second degrees of freedom are the others', times a median's efficiency.
    The newest point is never left out: the gate reads it.
    Fewer than 3 other replicated points give no reference.
    Where every point's runs spread alike, few histories lose a point.
    Synthetic ones of 6 to 30 points lost one in 0-0.7% of 3000.
    Their points had 2 to 5 runs each, spread 5-10%.
    """
    sizes, _, squares = _log_moments(points)
    variances = {i: float(squares[i]) / (sizes[i] - 1) for i in range(len(points)) if sizes[i] >= 2}
    scaled = {i: v * (sizes[i] - 1) / distributions.chi2_ppf(0.5, sizes[i] - 1) for i, v in variances.items()}
    apart = {}
    for i, variance in variances.items():
        others = [j for j in scaled if j != i]
        if i == len(points) - 1 or len(others) < 3 or math.sqrt(variance / sizes[i]) <= math.log1p(threshold):
            continue
        reference = float(np.median([scaled[j] for j in others]))
        df = MEDIAN_EFFICIENCY * sum(sizes[j] - 1 for j in others)
        if reference > 0 and variance / reference > distributions.f_ppf(1 - APART, sizes[i] - 1, df):
            apart[i] = variance / reference
    return apart


def _penalty(points: list[np.ndarray], variance: float) -> float:
    """How much a split must explain to count, in squared log time.

    `variance` is a point's noise.
    """
    return PENALTY * math.log(len(points)) * variance


def smallest_step(points: list[np.ndarray], after: int | None = None) -> float:
    """The smallest step in time (a ratio) that would be a change point, at this history's noise.

    The step comes before the last `after` points; by default, at the middle, where the least is needed.
    A step in a noiseless series explains n1 n2 / n times its square; the penalty must be less.
    A shorter or noisier history finds only larger steps.
    """
    after = after or len(points) - len(points) // 2
    before = len(points) - after
    penalty = _penalty(points, noise_variance(points) or 1e-12)
    return math.exp(math.sqrt(penalty * len(points) / (before * after)))


def changes(points: list[np.ndarray]) -> list[Change] | None:
    """The change points of a history, oldest first; None where it has too few points to tell."""
    if len(points) < MIN_POINTS:
        return None
    y = series(points)
    variance = noise_variance(points) or 1e-12
    penalty = _penalty(points, variance)
    import ruptures  # here: it imports scipy.stats, 0.3 s of every view's start, and only a history searches

    ends = ruptures.Binseg(model="l2", min_size=MIN_SIZE, jump=1).fit(y.reshape(-1, 1)).predict(pen=penalty)
    bounds = _newest_two(y, [0, *ends], variance)
    places = len(y) - 2 * MIN_SIZE + 2  # binary segmentation's places, and the newest point's
    found = []
    for start, index, end in zip(bounds, bounds[1:], bounds[2:], strict=False):
        before, after = y[start:index], y[index:end]
        z = (after.mean() - before.mean()) / math.sqrt(variance * (1 / len(before) + 1 / len(after)))
        p = min(1.0, places * distributions.norm_sf(z))
        found.append(Change(index, float(np.exp(before.mean())), float(np.exp(after.mean())), p))
    return found


def _newest_two(y: np.ndarray, bounds: list[int], variance: float) -> list[int]:
    """The segments' bounds, with a last segment of the newest two points read as they fit best.

    Each reading's residual sum of squares is taken over the last segment and the one before.
    The segment stays where both points part from the one before at least as well as either alone.
    A revert needs the newest point within the noise (`variance`, a point's) of the segment before.
    """
    n = len(y)
    if len(bounds) < 3 or bounds[-2] != n - 2:
        return bounds
    before = y[bounds[-3] : n - 2]
    readings = {"both": _squares(before) + _squares(y[n - 2 :]), "newest": _squares(np.append(before, y[n - 2]))}
    z = (y[n - 1] - before.mean()) / math.sqrt(variance * (1 + 1 / len(before)))
    if distributions.norm_sf(z) > 0.05:  # the newest is not slower than the segment before, beyond the noise
        readings["reverted"] = _squares(np.append(before, y[n - 1]))
    best = min(readings, key=readings.__getitem__)
    return {
        "both": bounds,
        "newest": [*bounds[:-2], n - 1, n],
        "reverted": [*bounds[:-1], n - 1, n],
    }[best]


def _squares(part: np.ndarray) -> float:
    """The residual sum of squares of a segment about its mean."""
    return float(np.sum((part - part.mean()) ** 2))


class Alone(NamedTuple):
    """The newest point's time over its segment's others', with its 95% interval.

    `p` is the one-sided p-value that it is slower.
    """

    ratio: float
    low: float
    high: float
    p: float


def newest_alone(points: list[np.ndarray], since: int) -> Alone | None:
    """The newest point's time over its segment's others' (from `since`), and its test.

    The noise is the other points' (the newest's own difference would inflate it), at the newest's runs.
    Where the newest's own runs spread wider, their spread is the noise.
    A run in a slower mode (another cuDNN algorithm) then moves a point without standing it out.
    That spread comes from the newest's few runs.
    Its tail is then Student's t.
    Its degrees of freedom are Welch's.
    None where the segment has no other point, or where the others show no noise to judge by.
    """
    y = series(points)
    others = y[since:-1]
    newest, typical = noise_variance(points[:-1], len(points[-1])), noise_variance(points[:-1])
    if len(others) == 0 or newest is None or typical is None:
        return None
    runs = len(points[-1])
    own = float(np.var(np.log(points[-1]), ddof=1)) / runs if runs >= 2 else 0.0
    variance = max(newest, own) + typical / len(others)
    difference = y[-1] - others.mean()
    z = difference / math.sqrt(variance)
    if own <= newest:
        half, p = distributions.norm_ppf(0.975) * math.sqrt(variance), distributions.norm_sf(z)
    else:
        df = variance**2 / (own**2 / (runs - 1))  # Welch-Satterthwaite, the others' noise taken as known
        half, p = distributions.t_ppf(0.975, df) * math.sqrt(variance), distributions.t_sf(z, df)
    return Alone(*(float(np.exp(difference + d)) for d in (0.0, -half, half)), p)
