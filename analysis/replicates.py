"""The replicate as the unit: statistics across runs of one configuration, and how many runs a claim needs.

    python -m analysis replicates SWEEP_DIR [--effect 0.05]

Runs that differ only in `replicate` (and the seed it sets) are one configuration. Each run counts
once, by its median step time. A configuration's figure is the mean of its runs' medians with a
95% t-interval across runs (with fewer than 10 runs a bootstrap over runs is unreliable; from 10
on, a percentile bootstrap over runs is used instead: the method is printed). A speed-up over the
baseline configuration of the same row group (the sweep's baseline, e.g. the plain Tensor, with the
same other axes) is exp(mean log median(A) -
mean log median(B)) with a Welch t-interval on the logs, so run-to-run variance is in it. Beside
it, for contrast, the step-level interval of the same speed-up from all steps pooled, which leaves
run-to-run variance out. The repeats needed to
resolve an effect of size E at 95% confidence and 80% power come from the pilot's run-to-run spread
(sd of log medians s): n = 2 ((z_0.975 + z_0.8) s / ln(1 + E))^2 per configuration.
"""

import dataclasses
import math
import statistics
from pathlib import Path

import numpy as np

from analysis import stats
from analysis.groups import group_key, phase_columns, varying
from analysis.render import Column, View
from analysis.stats import NOT_CONFIGURATION, Z80, Z975, speedup_across_runs, t975
from records import DONE, RunRecord, load_sweep

BOOTSTRAP_FROM = 10


@dataclasses.dataclass
class Configuration:
    label: str
    runs: list[RunRecord]
    medians: np.ndarray  # each run's median step time (ms)
    steps: np.ndarray  # all runs' measured step times, pooled

    @property
    def log_sd(self) -> float:
        return float(np.std(np.log(self.medians), ddof=1)) if len(self.medians) > 1 else math.nan


def _varying(runs: list[RunRecord]) -> tuple[list[str], list[str]]:
    """The axes and fields that make configurations differ: those that vary, but the replicate and seed."""
    axes, fields = varying(runs)
    return [a for a in axes if a != "replicate"], [f for f in fields if f not in NOT_CONFIGURATION]


def configurations(runs: list[RunRecord]) -> dict[tuple, Configuration]:
    """Done runs grouped by everything but their replicate and seed."""
    axes, fields = _varying(runs)
    groups: dict[tuple, list[RunRecord]] = {}
    for run in runs:
        key = tuple(run.axis(a) for a in axes) + tuple(repr(run.fields.get(f)) for f in fields)
        groups.setdefault(key, []).append(run)
    found = {}
    for key, members in groups.items():
        steps = [r.step_ms() for r in members]
        label = " ".join(key) if key else members[0].name
        found[key] = Configuration(label, members, np.array([np.median(s) for s in steps]), np.concatenate(steps))
    return found


def across_runs(medians: np.ndarray) -> tuple[float, float, float, str]:
    """A configuration's figure and its 95% interval across runs, and the method used."""
    n = len(medians)
    if n < 2:
        return float(medians[0]), math.nan, math.nan, "one run: no interval"
    if n >= BOOTSTRAP_FROM:
        rng = np.random.default_rng(0)
        means = medians[rng.integers(0, n, (stats.RESAMPLES, n))].mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        return float(medians.mean()), float(low), float(high), f"bootstrap over {n} runs"
    half = t975(n - 1) * medians.std(ddof=1) / math.sqrt(n)
    return float(medians.mean()), float(medians.mean() - half), float(medians.mean() + half), f"t-interval, {n} runs"


def repeats_needed(log_sd: float, effect: float) -> int | None:
    """Runs per configuration to resolve a relative effect `effect` (0.05: 5%) at 95% confidence, 80% power."""
    if math.isnan(log_sd):
        return None
    return max(2, math.ceil(2 * ((Z975 + Z80) * log_sd / math.log(1 + effect)) ** 2))


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
    "across runs: each run counts once, by its median step time; step-level: all steps pooled (run-to-run "
    "variance left out). repeats: runs per configuration to resolve that effect at 95% confidence, 80% power, "
    "from this sweep's run-to-run spread."
)


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration's figures across its runs, beside the baseline configuration's."""

    config: Configuration
    baseline: Configuration | None  # the baseline configuration of its row group (none where it has none)

    @property
    def across_runs(self) -> str:
        value, low, high, _ = across_runs(self.config.medians)
        return f"{value:.3g} [{low:.3g}, {high:.3g}]" if not math.isnan(low) else f"{value:.3g} "

    @property
    def step_level(self) -> str:
        low, high = stats.median_interval(self.config.steps)
        return f"[{low:.3g}, {high:.3g}]"

    @property
    def speedup(self) -> str:
        if self.config is self.baseline:
            return "1.00x"
        if self.baseline and len(self.config.medians) > 1 and len(self.baseline.medians) > 1:
            return str(speedup_across_runs(self.config.medians, self.baseline.medians))
        return "-"

    @property
    def pooled_speedup(self) -> str:
        if self.config is self.baseline:
            return "1.00x"
        return str(stats.speedup(self.config.steps, self.baseline.steps)) if self.baseline else "-"


def view(sweep_dir: Path, effect: float = 0.05) -> View:
    """Per configuration: its figure across runs, the step-level interval, the speed-up, the repeats needed."""
    runs = [r for r in load_sweep(sweep_dir) if r.state == DONE and r.summary]
    if not runs:
        return View("Across replicates", [], [], [], empty=f"{sweep_dir}: no done runs")
    found = configurations(runs)
    axes, fields = _varying(runs)
    base_of = {group_key(c.runs[0], axes, fields): c for c in found.values() if c.runs[0].is_baseline}
    baseline = runs[0].baseline
    columns = [
        Column("configuration", lambda row: row.config.label),
        Column("runs", lambda row: str(len(row.config.runs))),
        Column("step ms across runs [95% CI]", lambda row: row.across_runs),
        Column("method", lambda row: across_runs(row.config.medians)[3]),
        Column("step-level CI of the median", lambda row: row.step_level),
        Column(f"speed-up vs {baseline.value}: across runs", lambda row: row.speedup),
        Column("step-level", lambda row: row.pooled_speedup),
        Column(f"repeats for {effect:.0%}", lambda row: str(repeats_needed(row.config.log_sd, effect) or "-")),
    ]
    title = (
        f"{sweep_dir}: {len(runs)} done runs in {len(found)} configurations; phases: {', '.join(phase_columns(runs))}"
    )
    items = [Row(config, base_of.get(group_key(config.runs[0], axes, fields))) for config in found.values()]
    return View("Across replicates", [title], columns, items, notes=[EXPLAINED], flags=drift(runs))
