"""Robust per-run statistics of step times, and when a run is too noisy to trust.

    python -m analysis runs SWEEP_DIR

For every phase: median, IQR, p5/p95 and a bootstrap 95% confidence interval of the median
(analysis/stats.py); with CUDA events (device time), the host's median time of the phase beside
it. Outlier steps (beyond 3 IQR from the quartiles) are counted and shown, never dropped: the
median does not need them removed. A run is flagged noisy when its robust coefficient of variation
(IQR / 1.349 / median) is above NOISY, with the reasons found: a trend from the first to the last
fifth of its steps (warm-up too short), outlier steps, or a spread with neither.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from analysis import stats
from analysis.load import load_sweep
from analysis.text import markdown
from train import records

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


def phase_stats(steps: np.ndarray) -> PhaseStats:
    """Statistics of one phase's measured step times (ms)."""
    values = np.sort(np.asarray(steps, dtype=float))
    n = len(values)
    if n == 0:
        raise ValueError("no measured steps")
    p5, q1, median, q3, p95 = np.percentile(values, [5, 25, 50, 75, 95])
    low, high = stats.median_interval(values)
    spread = q3 - q1
    outliers = int(np.sum((values < q1 - OUTLIER_IQR * spread) | (values > q3 + OUTLIER_IQR * spread)))
    return PhaseStats(n, float(median), float(q1), float(q3), float(p5), float(p95), low, high, outliers)


def noise(steps: np.ndarray, stats: PhaseStats) -> list[str]:
    """Why a run's steps (in order) are too spread to trust; empty if they are not."""
    if stats.robust_cv <= NOISY:
        return []
    reasons = []
    fifth = max(1, len(steps) // 5)
    first, last = float(np.median(steps[:fifth])), float(np.median(steps[-fifth:]))
    if abs(first - last) > TREND * last:
        reasons.append(f"first fifth of steps {first:.3g} ms vs last fifth {last:.3g} ms: warm-up not long enough")
    if stats.outliers:
        reasons.append(f"{stats.outliers} outlier steps of {stats.n}")
    if not reasons:
        reasons.append("steps spread without a trend or outliers (a shared or throttling machine?)")
    return [f"robust CV {stats.robust_cv:.0%} > {NOISY:.0%}: " + "; ".join(reasons)]


def measured_steps(run_dir: Path, columns: list[str]) -> dict[str, np.ndarray]:
    """The measured (not warm-up) steps of a run, in order, one array per column."""
    table = pq.read_table(run_dir / records.STEPS, columns=[*columns, "warmup"])
    keep = ~table.column("warmup").to_numpy(zero_copy_only=False)
    return {c: table.column(c).to_numpy()[keep] for c in columns}


@dataclasses.dataclass(frozen=True)
class RunStats:
    name: str
    phases: dict[str, PhaseStats]  # phase (and "step") -> its statistics
    noise: list[str]  # why the run's step times are too spread to trust (from its step column)


def run_stats(run_dir: Path, phases: list[str]) -> RunStats:
    names = [*phases, "step"]
    steps = measured_steps(run_dir, [f"{p}_ms" for p in names])
    by_phase = {p: phase_stats(steps[f"{p}_ms"]) for p in names}
    return RunStats(run_dir.name, by_phase, noise(steps["step_ms"], by_phase["step"]))


def render(sweep_dir: Path) -> str:
    """Every done run's per-phase statistics, and the runs flagged noisy with their reasons."""
    table, flagged = [], []
    done = [run for run in load_sweep(sweep_dir) if run.state == "done"]
    events = any(run.summary.get("timer") == "cuda_event" for run in done)  # device time, with host time beside it
    for run in done:
        found = run_stats(sweep_dir / run.name, run.summary["phases"])
        flagged += [f"NOISY {run.name}: {reason}" for reason in found.noise]
        host = run.summary["median_ms"]
        for phase, s in found.phases.items():
            table.append(
                [
                    run.name,
                    phase,
                    f"{s.median:.3g}",
                    *([f"{host[f'{phase}_host_ms']:.3g}" if f"{phase}_host_ms" in host else "-"] if events else []),
                    f"[{s.ci_low:.3g}, {s.ci_high:.3g}]",
                    f"{s.q1:.3g}-{s.q3:.3g}",
                    f"{s.p5:.3g}-{s.p95:.3g}",
                    f"{s.robust_cv:.1%}",
                    f"{s.outliers}/{s.n}",
                ]
            )
    header = ["run", "phase", "median ms", *(["host median ms"] if events else []), "95% CI", "IQR", "p5-p95"]
    header += ["robust CV", "outliers/steps"]
    return "\n".join([markdown(header, table), *flagged]) if table else f"{sweep_dir}: no done runs"
