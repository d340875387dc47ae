"""A configuration's variance, between its processes and within one.

The split follows Kalibera and Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013).
The within-run part is corrected for the correlation of consecutive steps.
It says whether more steps per run or more runs narrow an interval.
It says how many of each a target half-width needs.
"""

import dataclasses
import math
import statistics

import numpy as np

from perfsweep.analysis.statistics import distributions
from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import Sample, paired_rounds, round_ratios, t_interval
from perfsweep.records import RunRecord

OUTSIDE_STEPS = ("startup_s", "warmup_s", "records_s", "wandb_s")  # what a run costs beyond its measured steps


def across_runs(medians: np.ndarray) -> tuple[float, float, float]:
    """The geometric mean of runs' medians and its 95% t-interval (nan bounds for one run)."""
    logs = np.log(medians)
    centre = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return centre, math.nan, math.nan
    low, high, _ = t_interval(float(logs.mean()), float(logs.std(ddof=1) / math.sqrt(len(logs))), len(logs) - 1, LEVEL)
    return centre, low, high


def costs(runs: list[RunRecord]) -> tuple[float, float] | None:
    """What a run of this sweep costs beyond its steps, and what a step costs, in seconds.

    Both are medians over its runs; None where the runs' records do not say.
    """
    outside = [sum(t.get(k, 0.0) for k in OUTSIDE_STEPS) for r in runs if (t := r.status.timing) and "window_s" in t]
    per_step = [r.summary.window_s / r.summary.steps for r in runs if r.summary.window_s and r.summary.steps]
    if not outside or not per_step:
        return None
    return statistics.median(outside), statistics.median(per_step)


@dataclasses.dataclass(frozen=True)
class Split:
    """A configuration's variance of log step time, between its processes and within one."""

    runs: int
    steps: int  # per run (the median)
    between: float  # sd of a run's median log step time beyond what its own steps' noise explains
    within: float  # sd of a step's log time within a run (robust: from the median absolute deviation)
    rho: float  # lag-1 autocorrelation of consecutive steps within a run

    @property
    def effective_steps(self) -> float:
        """Steps per run as independent ones: steps (1 - rho) / (1 + rho), at most the steps."""
        rho = min(max(self.rho, 0.0), 0.95)
        return max(1.0, self.steps * (1 - rho) / (1 + rho))

    def run_variance(self, steps: float) -> float:
        """The variance of one run's median log step time when it measures `steps` steps."""
        return self.between**2 + math.pi / 2 * self.within**2 / max(1.0, steps * self.effective_steps / self.steps)

    def plan(self, half_width: float, run_cost_s: float, step_s: float, level: float = LEVEL) -> tuple[int, int | None]:
        """(steps per run, runs per configuration) that resolve a speed-up to -+`half_width` at the least cost.

        The speed-up is between two such configurations; `half_width` 0.02 is 2%.
        A run costs `run_cost_s` beyond its steps, and a step costs `step_s`.
        Steps per run follow Kalibera and Jones's optimum:
        sqrt(run cost x within variance / (step cost x between variance)).
        They count steps as independent as these.
        The runs are None where no number of runs resolves it (`runs_for`).
        """
        if not math.isfinite(self.run_variance(self.steps)):
            return self.steps, None
        inflation = math.pi / 2 * self.steps / self.effective_steps
        if self.between > 0:
            steps = math.sqrt(run_cost_s * self.within**2 * inflation / (step_s * self.between**2))
        else:
            steps = 4 * self.steps  # no spread between processes seen: more steps are what narrows it
        steps = int(min(max(math.ceil(steps), 5), 1000))
        return steps, self.runs_for(half_width, steps, level)

    def runs_for(self, half_width: float, steps: float, level: float = LEVEL) -> int | None:
        """The fewest runs of `steps` steps per configuration that resolve a speed-up to -+`half_width`.

        None where no number of runs does (`fewest_runs`), as for a half-width of 0 or less.
        """
        if not half_width > 0:
            return None
        return fewest_runs(math.sqrt(2 * self.run_variance(steps)), math.log1p(half_width), level)

    def at_most(self, level: float = LEVEL) -> "Split":
        """The split with the spread between processes at the upper bound of its one-sided `level` interval.

        Few processes estimate it poorly, and a spread measured near 0 would plan for no spread at all.
        The variance of the runs' medians, (n - 1) s^2 / chi2(1 - level, n - 1) at most, less what their steps
        explain.
        """
        total = self.run_variance(self.steps)
        steps_part = total - self.between**2
        upper = (self.runs - 1) * total / distributions.chi2_ppf(1 - level, self.runs - 1)
        return dataclasses.replace(self, between=math.sqrt(max(0.0, upper - steps_part)))

    def decided_in(self, budget_s: float, run_cost_s: float, step_s: float) -> float | None:
        """The smallest half-width (0.03: -+3%) that `plan` resolves within `budget_s` of the machine's time.

        The plan's two configurations each take its runs of its steps.
        Half-widths are tried on a grid of 5% steps from 0.01% to 100%; None where even 100% takes longer.
        """

        def fits(half_width: float) -> bool:
            steps, runs = self.plan(half_width, run_cost_s, step_s)
            return runs is not None and 2 * runs * (run_cost_s + steps * step_s) <= budget_s

        grid = [1e-4 * 1.05**i for i in range(int(math.log(1e4) / math.log(1.05)) + 1)]
        if not fits(grid[-1]):
            return None
        low, high = -1, len(grid) - 1  # grid[high] fits; grid[low] does not (or is below the grid)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if fits(grid[middle]) else (middle, high)
        return grid[high]


def fewest_runs(spread: float, distance: float, level: float = LEVEL, least: int = 2) -> int | None:
    """The fewest runs, from `least`, whose t interval at `level` reaches no further than `distance` from its centre.

    `spread` is the standard deviation of one run's figure; the interval's half-width is t x spread / sqrt(runs).
    None where no number of runs does: a distance of 0 or less, or a spread that is not finite.
    A t quantile is above the normal one.
    So the count starts from the runs that the normal quantile needs, a lower bound.
    """
    if not distance > 0 or not spread >= 0 or not math.isfinite(spread):
        return None
    quantile = 0.5 + level / 2
    runs = max(least, 2, math.ceil((distributions.norm_ppf(quantile) * spread / distance) ** 2))
    while distributions.t_ppf(quantile, runs - 1) * spread / math.sqrt(runs) > distance:
        runs += 1
    return runs


def split(sample: Sample) -> Split | None:
    """The variance split of a configuration with two or more runs of two or more steps; None otherwise.

    It is robust to outlier steps, as the medians the views compare are.

    - Within a run: 1.4826 x the median absolute deviation of log step times around the run's median,
      pooled over runs.
    - Between runs: the variance of the runs' log medians, less what their own steps explain.
      A median of n steps varies pi/2 times as much as their mean.
    """
    logs = [np.log(s) for s in sample.steps if len(s) >= 2]
    if len(logs) < 2:
        return None
    centred = [x - np.median(x) for x in logs]
    within = 1.4826 * float(np.median(np.abs(np.concatenate(centred))))
    demeaned = [x - x.mean() for x in logs]
    lagged = sum(float(np.dot(c[:-1], c[1:])) for c in demeaned)
    total = sum(float(np.dot(c, c)) for c in demeaned)
    rho = lagged / total if total else 0.0
    steps = int(np.median([len(x) for x in logs]))
    partial = Split(len(logs), steps, 0.0, within, rho)
    medians = np.array([np.median(x) for x in logs])
    between = max(0.0, float(medians.var(ddof=1)) - math.pi / 2 * within**2 / partial.effective_steps)
    return dataclasses.replace(partial, between=math.sqrt(between))


def sides_split(of: Sample, over: Sample) -> Split | None:
    """The split of the ratio of two sides that shared their processes (pairing=auto), as one side's share.

    Each pair of runs is a round's two sides, measured in one process.
    A process's log ratio is the median of its steps' log ratios (in_process_ratio).
    So the steps' ratios split as a run's steps do: between processes, and within one.
    Both sides add to each part, so each is divided by the square root of 2.
    A plan for two such sides then plans for their ratio.
    Returns None for fewer than two pairs.
    """
    pairs = paired_rounds(of, over)
    if len(pairs) < 2:
        return None
    ratios = split(Sample(tuple(np.exp(round_ratios(of.steps[i], over.steps[j])) for i, j in pairs), ()))
    if ratios is None:
        return None
    return dataclasses.replace(ratios, between=ratios.between / math.sqrt(2), within=ratios.within / math.sqrt(2))
