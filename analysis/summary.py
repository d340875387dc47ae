"""Robust per-run statistics of step times, and when a run is too noisy to trust.

    python -m perfsweep.analysis runs SWEEP_DIR

For every phase: median, IQR, p5/p95 and a bootstrap 95% interval of the median (analysis/stats.py), a
within-run interval: it resamples one process's steps, so it leaves the difference between processes out. With
CUDA events (device time), the host's median time of the phase is beside it. Outlier steps (beyond 3 IQR from
the quartiles) are counted and shown, never dropped: the median does not need them removed. A run is flagged
noisy when its robust coefficient of variation (IQR / 1.349 / median) is above NOISY, with the reasons found: a
trend from the first to the last fifth of its steps (warm-up too short), outlier steps, or a spread with neither.
Every run, noisy or not, is checked for a trend (`trend`): a first fifth off the last by more than TREND, in steps
whose times go with their number.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from perfsweep.analysis import stats
from perfsweep.analysis.ranks import rank_steps
from perfsweep.analysis.render import Column, View, figure
from perfsweep.records import DONE, RunRecord, load_sweep

NOISY = 0.10  # robust CV above which a run's figures are flagged
TREND = 0.05  # first fifth's median off the last fifth's by more than this: still warming up
OUTLIER_IQR = 3.0


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
    low, high = stats.median_interval(values) if interval else (math.nan, math.nan)
    spread = q3 - q1
    outliers = int(np.sum((values < q1 - OUTLIER_IQR * spread) | (values > q3 + OUTLIER_IQR * spread)))
    return PhaseStats(n, float(median), float(q1), float(q3), float(p5), float(p95), low, high, outliers)


def trend(steps: np.ndarray, significance: float = 0.001) -> str:
    """Why a run's steps (in order) are not yet steady, if they are not: its first fifth's median is off its last
    fifth's by more than TREND, and step time goes with step number (Spearman's test; steps follow their
    neighbours, so the test's p-value is held to far below the usual 5%). '' where neither or one holds."""
    if len(steps) < 10:
        return ""
    fifth = max(1, len(steps) // 5)
    first, last = float(np.median(steps[:fifth])), float(np.median(steps[-fifth:]))
    if abs(first - last) <= TREND * last:
        return ""
    rho, p = spearmanr(np.arange(len(steps)), steps)
    if not p < significance:
        return ""
    why = "warm-up not long enough" if first > last else "slowing down (a throttling device, a cost that grows?)"
    return f"first fifth of steps {first:.3g} ms vs last fifth {last:.3g} ms (Spearman {rho:+.2f}): {why}"


def noise(steps: np.ndarray, stats: PhaseStats) -> list[str]:
    """Why a run's steps (in order) are too spread to trust; empty if they are not."""
    if stats.robust_cv <= NOISY:
        return []
    reasons = [drift] if (drift := trend(steps, significance=1.0)) else []
    if stats.outliers:
        reasons.append(f"{stats.outliers} outlier steps of {stats.n}")
    if not reasons:
        reasons.append("steps spread without a trend or outliers (a shared or throttling machine?)")
    return [f"robust CV {stats.robust_cv:.0%} > {NOISY:.0%}: " + "; ".join(reasons)]


@dataclasses.dataclass(frozen=True)
class RunStats:
    name: str
    phases: dict[str, PhaseStats]  # phase (and "step") -> its statistics
    noise: list[str]  # why the run's step times are too spread to trust (from its step column)


def run_stats(run: RunRecord) -> RunStats:
    names = [*run.summary.phases, "step"]
    steps = run.steps([f"{p}_ms" for p in names])
    by_phase = {p: phase_stats(steps[f"{p}_ms"]) for p in names}
    return RunStats(run.name, by_phase, noise(steps["step_ms"], by_phase["step"]))


def rank_stats(run: RunRecord) -> list[tuple[str, dict[str, PhaseStats]]]:
    """A run across ranks: each rank's phases, with gradient sync and without, labelled with the rank."""
    return [
        (f"{run.name} rank {rank}{'' if sync else ' without sync'}{' (probe)' if probe else ''}",
         {name.removesuffix("_ms"): phase_stats(times) for name, times in steps.items()})
        for (rank, sync, probe), steps in rank_steps(run).items()
    ]  # fmt: skip


def _host_median(item: tuple[RunRecord, str, PhaseStats, str]) -> str:
    run, phase, _, label = item
    return figure(run.summary.host_median(phase)) if label == run.name else "-"


def view(sweep_dir: Path) -> View:
    """Every done run's per-phase statistics (a row per run and phase; a run across ranks, then each of its ranks),
    and the runs flagged noisy."""
    done = [run for run in load_sweep(sweep_dir) if run.state == DONE and run.summary]
    measured = [(run, run_stats(run)) for run in done]
    items = [
        (run, phase, s, label)
        for run, stats_ in measured
        for label, phases in [(run.name, stats_.phases), *rank_stats(run)]
        for phase, s in phases.items()
    ]
    columns = [
        Column("run", lambda i: i[3]),
        Column("phase", lambda i: i[1]),
        Column("median ms", lambda i: f"{i[2].median:.3g}"),
    ]
    if any(run.summary.uses_events for run in done):  # device time, with host time beside it
        columns.append(Column("host median ms", _host_median))
    columns += [
        Column("within-run 95% interval", lambda i: f"[{i[2].ci_low:.3g}, {i[2].ci_high:.3g}]"),
        Column("IQR", lambda i: f"{i[2].q1:.3g}-{i[2].q3:.3g}"),
        Column("p5-p95", lambda i: f"{i[2].p5:.3g}-{i[2].p95:.3g}"),
        Column("robust CV", lambda i: f"{i[2].robust_cv:.1%}"),
        Column("outliers/steps", lambda i: f"{i[2].outliers}/{i[2].n}"),
    ]
    flags = [f"NOISY {stats_.name}: {reason}" for _, stats_ in measured for reason in stats_.noise]
    return View("Per-run statistics", [], columns, items, flags=flags, empty=f"{sweep_dir}: no done runs")
