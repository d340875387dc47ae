"""The process as the unit: how a sweep's variance splits between its processes and within one, what that asks
of the next sweep, and whether a run's place in the sweep moved its time.

    python -m perfsweep.analysis replicates SWEEP_DIR [--half-width 0.02]

Runs that differ only in `replicate` (and the seed it sets) are one configuration, each run one process. Per
configuration: its runs' median step time with a 95% interval across runs; the spread of a run's median log step
time beyond what its own steps explain (between processes), a step's spread within a run, the lag-1
autocorrelation of consecutive steps and the steps that are worth as independent ones (analysis/evidence.py
`Split`); its speed-up over the baseline configuration of its row group; and the steps per run and runs per
configuration that resolve such a speed-up to -+half-width at the least cost (Kalibera and Jones, 2013), from what
this sweep's runs cost beyond their steps.
"""

import dataclasses
import math
import statistics
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from perfsweep.analysis import evidence
from perfsweep.analysis.groups import (
    Configuration,
    baselines,
    configurations,
    labels,
    phase_columns,
    speedup_over,
    vs_label,
)
from perfsweep.analysis.render import Column, View
from perfsweep.analysis.stats import LEVEL
from perfsweep.records import DONE, RunRecord, load_sweep

ORDER_SIGNIFICANCE = 0.01
OUTSIDE_STEPS = ("startup_s", "warmup_s", "records_s", "wandb_s")  # what a run costs beyond its measured steps


def across_runs(medians: np.ndarray) -> tuple[float, float, float]:
    """The geometric mean of runs' medians and its 95% t-interval (nan bounds for one run)."""
    logs = np.log(medians)
    centre = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return centre, math.nan, math.nan
    low, high, _ = evidence.t_interval(
        float(logs.mean()), float(logs.std(ddof=1) / math.sqrt(len(logs))), len(logs) - 1, LEVEL
    )
    return centre, low, high


def costs(runs: list[RunRecord]) -> tuple[float, float] | None:
    """What a run of this sweep costs beyond its steps, and a step, in seconds (medians over its runs); None where
    the runs' records do not say."""
    outside = [sum(t.get(k, 0.0) for k in OUTSIDE_STEPS) for r in runs if (t := r.status.timing) and "window_s" in t]
    per_step = [r.summary.window_s / r.summary.steps for r in runs if r.summary.window_s and r.summary.steps]
    if not outside or not per_step:
        return None
    return statistics.median(outside), statistics.median(per_step)


def order_effect(configs: list[Configuration]) -> list[str]:
    """A flag where a run's time goes with its place in the sweep: each replicated configuration's runs relative to
    their own geometric mean, against the order the runs started in (Spearman's test at 1%)."""
    replicated = [c for c in configs if len(c.runs) >= 2]
    placed = sorted(
        (r.status.started_at or "", int(r.fields.get("replicate") or 0), float(np.log(m) - np.mean(np.log(ms))))
        for c in replicated
        for ms in [[r.summary.median("step") for r in c.runs]]
        for r, m in zip(c.runs, ms, strict=True)
    )
    if len(placed) < 6 or len(replicated) < 2:
        return []
    offsets = np.array([p[2] for p in placed])
    rho, p = spearmanr(np.arange(len(placed)), offsets)
    if not p < ORDER_SIGNIFICANCE:
        return []
    half = len(offsets) // 2
    moved = math.exp(float(np.median(offsets[half:]) - np.median(offsets[:half]))) - 1
    return [
        f"ORDER EFFECT: a run's step time goes with its place in the sweep (Spearman {rho:+.2f} over {len(placed)} "
        f"runs, p={p:.2g}): the later half {moved:+.1%} against the earlier, each run beside its own "
        "configuration's; order=interleaved (the default) spreads such drift over every configuration"
    ]


def drift(runs: list[RunRecord], tolerance: float = 0.1) -> list[str]:
    """Runs whose clock (GPU SM clock, else CPU MHz) at start or end is off the sweep's median by more than 10%."""
    clocks = {r.name: r.summary.clocks for r in runs if r.summary and r.summary.clocks}
    values = [v for c in clocks.values() for v in (c.get("start", {}).get("mhz"), c.get("end", {}).get("mhz")) if v]
    if not values:
        return []
    middle = statistics.median(values)
    flags = []
    for name, c in clocks.items():
        for when in ("start", "end"):
            mhz = (c.get(when) or {}).get("mhz")
            if mhz and abs(mhz - middle) > tolerance * middle:
                flags.append(
                    f"DRIFT {name}: {c[when]['source']} {mhz:.0f} MHz at its {when}, sweep median {middle:.0f}"
                )
    return flags


EXPLAINED = (
    "step ms: geometric mean over a configuration's runs of each run's median [95% t-interval across runs]. "
    "between / within: the spread of a run's median log step time beyond what its steps explain, and of a step within "
    "a run (as a fraction); rho: lag-1 autocorrelation of consecutive steps; effective steps: what a run's steps are "
    "worth as independent ones. vs: speed-up over the baseline configuration [95% CI across runs; within-run with "
    "one run]. for -+{half:.0%}: steps per run x runs per configuration that resolve such a speed-up to -+{half:.0%} "
    "at the least cost (Kalibera and Jones, 2013), from this sweep's spread and what its runs cost beyond their steps."
)


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration's figures across its runs, beside its baseline configuration's."""

    config: Configuration
    baseline: Configuration | None
    split: evidence.Split | None

    @property
    def step_ms(self) -> str:
        value, low, high = across_runs(np.array([r.summary.median("step") for r in self.config.runs]))
        if math.isnan(low):
            return f"{value:.3g} (1 run)"
        shown = evidence.figures(value, low, high)
        return f"{shown[0]} [{shown[1]}, {shown[2]}]"

    @property
    def speedup(self) -> str:
        if self.baseline is None:
            return "-"
        return "1.00x" if self.baseline is self.config else str(speedup_over(self.config, self.baseline))

    def part(self, name: str) -> str:
        if self.split is None:
            return "-"
        value = getattr(self.split, name)
        return f"{value:.2f}" if name == "rho" else f"{value:.1%}" if name != "effective_steps" else f"{value:.0f}"

    def plan(self, half_width: float, cost: tuple[float, float] | None) -> str:
        if self.split is None or cost is None:
            return "-"
        steps, runs = self.split.plan(half_width, *cost)
        return f"{steps} x {runs}"


def view(sweep_dir: Path, half_width: float = 0.02) -> View:
    """Per configuration: its step time across runs, the variance split, the speed-up, and the plan for
    -+half_width."""
    runs = [r for r in load_sweep(sweep_dir) if r.state == DONE and r.summary]
    if not runs:
        return View("Across replicates", [], [], [], empty=f"{sweep_dir}: no done runs")
    configs = configurations(runs)
    base_of = baselines(configs)
    cost = costs(runs)
    names = labels(configs)
    items = [Row(c, base_of.get(c.key), evidence.split(c.sample())) for c in configs]
    columns = [
        Column("configuration", lambda row: names[row.config.key]),
        Column("runs", lambda row: str(len(row.config.runs))),
        Column("step ms [95% CI]", lambda row: row.step_ms),
        Column("between", lambda row: row.part("between")),
        Column("within", lambda row: row.part("within")),
        Column("rho", lambda row: row.part("rho")),
        Column("effective steps", lambda row: row.part("effective_steps")),
        Column(vs_label(configs), lambda row: row.speedup),
        Column(f"for -+{half_width:.0%}: steps x runs", lambda row: row.plan(half_width, cost)),
    ]
    spent = f"; a run costs {cost[0]:.2f} s beyond its steps, a step {cost[1]:.3f} s" if cost else ""
    title = (
        f"{sweep_dir}: {len(runs)} done runs in {len(configs)} configurations; phases: "
        f"{', '.join(phase_columns(runs))}{spent}"
    )
    # (an order effect is flagged under the table, which every launch prints)
    return View(
        "Across replicates", [title], columns, items, notes=[EXPLAINED.format(half=half_width)], flags=drift(runs)
    )
