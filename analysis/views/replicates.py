"""The process as the unit: how a sweep's variance splits between processes and within one.

It also says what that asks of the next sweep, and whether a run's place in the sweep moved its time.

    python -m perfsweep.commands replicates SWEEP_DIR [--half-width 0.02]

Runs that differ only in `replicate` (and the seed it sets) are one configuration.
Each run is one process.
Per configuration, the view shows:

- its runs' median step time, with a 95% interval across runs;
- between: the spread of a run's median log step time beyond what its own steps explain;
- within: a step's spread within a run;
- rho: the lag-1 autocorrelation of consecutive steps;
- effective steps: what a run's steps are worth as independent ones
  (analysis/statistics/variance.py `Split`);
- between sides: where it shared each process with a baseline (pairing=auto), the part of `between` its ratio keeps
  (the widest of its comparisons');
- its speed-up over each of its baselines, a column per axis the sweep compares along, at the table's level;
- the steps per run and runs per configuration that resolve such a speed-up to -+half-width at the least cost.

The last comes from what this sweep's runs cost beyond their steps (Kalibera and Jones, 2013).
For sides that shared their processes, it plans from the split of their ratio, each part one side's share.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np

from perfsweep.analysis import machines
from perfsweep.analysis.groups import (
    Configuration,
    baselines,
    comparisons,
    configurations,
    in_one_process,
    labels,
    ordered,
    over_baseline,
    phase_columns,
    vs_labels,
)
from perfsweep.analysis.render import Column, View
from perfsweep.analysis.statistics.drift import drift
from perfsweep.analysis.statistics.rounds import rule_of
from perfsweep.analysis.statistics.speedup import PARTS, as_data, as_text, figures, percent
from perfsweep.analysis.statistics.variance import Split, across_runs, costs, sides_split, split
from perfsweep.analysis.views.table import not_compiled
from perfsweep.records import DONE, RunRecord, load_sweep

# The note under the view: what each column says, each column's part only where the view has the column.
EXPLAINED_STEPS = (
    "step ms: geometric mean over a configuration's runs of each run's median [95% t-interval across runs]. "
    "between / within: the spread of a run's median log step time beyond what its steps explain, and of a step within "
    "a run (as a fraction); rho: lag-1 autocorrelation of consecutive steps; effective steps: what a run's steps are "
    "worth as independent ones."
)
EXPLAINED_SIDES = (
    "between sides: for sides that shared each process with a baseline (pairing=auto), the spread between processes "
    "that their ratio keeps, the widest of its comparisons'."
)
EXPLAINED_VS = (
    "vs: speed-up over the configuration that differs only in that column's axis, at its baseline [{level} CI as in "
    "the table: across processes, each one ratio of its sides, where they shared processes (pairing=auto); else "
    "across runs; within-run with one run]."
)
EXPLAINED_PLAN = (
    "for -+{half:.0%}: steps per run x runs per configuration that resolve a speed-up to -+{half:.0%} at the "
    "least cost (Kalibera and Jones, 2013), from this sweep's spread (the ratio's, where the sides shared processes) "
    "and what its runs cost beyond their steps."
)


def explained(half: float, level: float, paired: bool, compared: bool) -> str:
    """The view's note: the step's columns, between sides where `paired`, vs where `compared`, then the plan."""
    parts = [EXPLAINED_STEPS, *([EXPLAINED_SIDES] if paired else []), *([EXPLAINED_VS] if compared else [])]
    return " ".join([*parts, EXPLAINED_PLAN]).format(half=half, level=percent(level))


# The variance split's columns: header, Split's field.
SPLIT = (("between", "between"), ("within", "within"), ("rho", "rho"), ("effective steps", "effective_steps"))


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration's figures across its runs, beside its baselines'."""

    config: Configuration
    baselines: dict[str, Configuration | None]  # along each axis the sweep compares along
    split: Split | None
    sides: Split | None = None  # its ratio to a baseline's split, one side's share, where they shared processes

    @property
    def step_ms(self) -> str:
        value, low, high = self.step_interval
        if math.isnan(low):
            return f"{value:.3g} (1 run)"
        shown = figures(value, low, high)
        return f"{shown[0]} [{shown[1]}, {shown[2]}]"

    @property
    def step_interval(self) -> tuple[float, float, float]:
        """Its step time (ms) and the bounds of its interval across runs (nan with one run)."""
        return across_runs(np.array([r.summary.median("step") for r in self.config.runs]))

    def part(self, name: str) -> str:
        value = self.value(name)
        if value is None:
            return "-"
        return f"{value:.2f}" if name == "rho" else f"{value:.1%}" if name != "effective_steps" else f"{value:.0f}"

    def value(self, name: str) -> float | None:
        """A figure of its variance split (variance.Split), None without one."""
        return None if self.split is None else getattr(self.split, name)

    def plan(self, half_width: float, cost: tuple[float, float] | None) -> str:
        if self.split is None or cost is None:
            return "-"
        spread = self.sides or self.split
        steps, runs = spread.plan(half_width, *cost)
        return "-" if runs is None else f"{steps} x {runs}"


def row(config: Configuration, bases: dict[str, Configuration | None]) -> Row:
    """The configuration's row: its split, and where it shared its processes with a baseline, between sides.

    Of its comparisons in shared processes, the one whose ratio keeps the most spread between processes plans.
    """
    own = split(config.sample())
    shared = [b for b in bases.values() if b is not None and b is not config and in_one_process(config, b)]
    sides = [found for b in shared if own is not None and (found := sides_split(config.sample(), b.sample()))]
    return Row(config, bases, own, max(sides, key=lambda s: s.between) if sides else None)


def view(sweep_dir: Path, half_width: float = 0.02, runs: list[RunRecord] | None = None) -> View:
    """Per configuration: its step time across runs, the variance split, the speed-up, and the plan for -+half_width.

    `runs` are the sweep's runs to show (the table's, compared as it compares them); None: all of the sweep's.
    """
    runs = [r for r in (load_sweep(sweep_dir) if runs is None else runs) if r.state == DONE and r.summary]
    if not runs:
        return View("Across replicates", [], [], [], empty=f"{sweep_dir}: no done runs")
    configs = ordered(configurations(runs))
    along = baselines(configs)
    versus = comparisons(configs)
    cost = costs(runs)
    names = labels(configs)
    rule = rule_of(sweep_dir, runs)
    level = rule.level
    headers = vs_labels(versus, along)
    items = [row(c, {axis: of.get(c.key) for axis, of in along.items()}) for c in configs]
    paired = any(item.sides is not None for item in items)
    columns = [
        Column("configuration", lambda row: names[row.config.key]),
        Column("runs", lambda row: str(len(row.config.runs)), lambda row: len(row.config.runs)),
        Column(
            "step ms [95% CI]",
            lambda row: row.step_ms,
            lambda row: dict(zip(("", "low", "high"), row.step_interval, strict=True)),
            ("", "low", "high"),
        ),
        *(
            Column(name, lambda row, part=part: row.part(part), lambda row, part=part: row.value(part))
            for name, part in SPLIT
        ),
        *(
            [
                Column(
                    "between sides",
                    lambda row: "-" if row.sides is None else f"{row.sides.between:.1%}",
                    lambda row: None if row.sides is None else row.sides.between,
                )
            ]
            if paired
            else []
        ),
        *(
            Column(
                headers[axis],
                lambda row, axis=axis: (
                    as_text(over_baseline(row.config, row.baselines[axis], level), rule.word)
                    + not_compiled(row.config, row.baselines[axis])
                ),
                lambda row, axis=axis: as_data(over_baseline(row.config, row.baselines[axis], level), level, rule.word),
                PARTS,
            )
            for axis in along
        ),
        Column(f"for -+{half_width:.0%}: steps x runs", lambda row: row.plan(half_width, cost)),
    ]
    spent = f"; a run costs {cost[0]:.2f} s beyond its steps, a step {cost[1]:.3f} s" if cost else ""
    machine = machines.named(runs, machines.chosen(runs))  # a torch or threads the sweep chose is its configuration
    title = (
        f"{sweep_dir}: {len(runs)} done runs in {len(configs)} configurations{f' on {machine}' if machine else ''}; "
        f"phases: {', '.join(phase_columns(runs))}{spent}"
    )
    # (an order effect is flagged under the table, which every launch prints)
    return View(
        "Across replicates",
        [title],
        columns,
        items,
        notes=[explained(half_width, level, paired, bool(along))],
        flags=drift(runs),
    )
