"""PNG plots of a sweep, each showing what its numbers rest on.

- phases: phase times per configuration;
- runs: each run's median beside its configuration's interval;
- speedups: each speed-up as a point with its interval around 1.00x, at the level of the sweep's table.

    python -m perfsweep.commands plots SWEEP_DIR [--out DIR]     writes SWEEP_DIR/plots/{phases,runs,speedups}.png
                                                       (DIR/plots/ with --out), and ranks.png for runs
                                                       across ranks

Each title names the machine most of its runs had.
Each configuration is labelled by the axes and fields that vary in the sweep.
A long label wraps; a figure whose labels need more room gets wider, so that its axes keep their width.
Rows are sorted: the slowest, or the largest effect, is at the top.
An interval from one run's steps is drawn dashed and labelled within-run.
"""

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from perfsweep.analysis.groups import (  # noqa: E402
    Configuration,
    configurations,
    labels,
    ordered,
    phase_columns,
    speedups,
)
from perfsweep.analysis.statistics.bootstrap import median_interval  # noqa: E402
from perfsweep.analysis.statistics.rounds import rule_of  # noqa: E402
from perfsweep.analysis.statistics.speedup import percent  # noqa: E402
from perfsweep.analysis.statistics.variance import across_runs  # noqa: E402
from perfsweep.analysis.statistics.verdict import FASTER, SLOWER, THE_SAME, UNDETERMINED, word  # noqa: E402
from perfsweep.analysis.views import ranks  # noqa: E402
from perfsweep.analysis.views.table import not_compiled, ran  # noqa: E402
from perfsweep.records import DONE, RunRecord, load_sweep  # noqa: E402

WIDE = 100  # values spanning more than this factor are drawn on a log axis
WIDTH = 11.0  # inches: a figure's width, wider where its labels need it (fit)
AXES_WIDTH = 7.0  # inches: the axes are at least this wide, however long the labels beside them
LABEL_CHARS = 40  # a row's label wraps at spaces into lines of at most this many characters
TITLE_CHARS = 110  # a title wraps into lines of at most this many characters: WIDTH at its font size


def _figure(labels: list[str], title: str, values: list[float], runs: list[RunRecord]):
    """A figure of a row per label, bottom up, each label wrapped; it is as tall as the rows' lines need.

    Its title wraps to the figure's width.
    Below it is what ran, as the line above the table says it.
    That is the settings, the machine, torch and the date.
    A plot shared on its own says what its numbers are of.
    """
    wrapped = [textwrap.fill(label, LABEL_CHARS, break_long_words=False, break_on_hyphens=False) for label in labels]
    lines = max((label.count("\n") + 1 for label in wrapped), default=1)
    heading = [
        *textwrap.wrap(title, TITLE_CHARS),
        *(textwrap.wrap(ran(runs, configurations(runs)), TITLE_CHARS) if runs else []),
    ]
    height = 1.4 + 0.2 * (len(heading) - 1) + max(0.45, 0.15 + 0.17 * lines) * len(wrapped)
    fig, ax = plt.subplots(figsize=(WIDTH, height))
    ax.set_yticks(range(len(wrapped)), wrapped)
    fig.suptitle("\n".join(heading), x=0.01, ha="left", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > WIDE:
        ax.set_xscale("log")
    return fig, ax


def fit(fig):
    """Lay the figure out, its axes AXES_WIDTH wide at least: a figure whose labels need more room gets wider."""
    fig.tight_layout()
    ax = fig.axes[0]
    short = AXES_WIDTH - ax.get_position().width * fig.get_figwidth()
    if short > 0:
        fig.set_figwidth(fig.get_figwidth() + short)
        fig.tight_layout()
    return fig


def save(fig, path: Path) -> None:
    fit(fig)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def phases_plot(configs: list[Configuration], names: dict[tuple, str], path: Path) -> None:
    save(phases_figure(configs, names), path)


def phases_figure(configs: list[Configuration], names: dict[tuple, str]):
    """Each configuration's phases as stacked bars; the legend above the axes, in the bars' order, covers none.

    A mark gives the step's own median: medians of phases need not sum to it.
    """
    runs = [r for c in configs for r in c.runs]
    phases = [p for p in phase_columns(runs) if p != "step"]
    order = sorted(configs, key=lambda c: c.median("step"))
    totals = [c.median("step") for c in order]
    title = "Median time per phase of a step, per configuration (geometric mean over its runs)"
    fig, ax = _figure([names[c.key] for c in order], title, totals, runs)
    left = [0.0] * len(order)
    for phase in phases:
        widths = [c.median(phase) or 0.0 for c in order]
        ax.barh(range(len(order)), widths, left=left, label=phase)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.plot(totals, range(len(order)), "|", color="black", markersize=16, markeredgewidth=2, label="the step's median")
    ax.set_xlabel("median ms per step (stacked phases; the mark: the step's own median)")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=len(phases) + 1, fontsize=8, frameon=False)
    return fig


def step_interval(config: Configuration) -> tuple[float, float, float, bool]:
    """A configuration's step time and its 95% interval.

    The interval is across runs with two or more, else within its one run.
    """
    medians = np.array([r.summary.median("step") for r in config.runs])
    if len(medians) >= 2:
        return (*across_runs(medians), True)
    low, high = median_interval(config.runs[0].step_ms())
    return float(medians[0]), low, high, False


def runs_plot(configs: list[Configuration], names: dict[tuple, str], path: Path) -> None:
    order = sorted(configs, key=lambda c: c.median("step"))
    intervals = [step_interval(c) for c in order]
    title = "Step time: each run's median (points) and its configuration's 95% interval (line; dashed: within-run)"
    fig, ax = _figure(
        [names[c.key] for c in order], title, [f[0] for f in intervals], [r for c in configs for r in c.runs]
    )
    for y, (config, (value, low, high, replicated)) in enumerate(zip(order, intervals, strict=True)):
        ax.hlines(y, low, high, color="tab:blue", linestyles="solid" if replicated else "dashed", linewidth=2)
        medians = [r.summary.median("step") for r in config.runs]
        ax.plot(medians, [y] * len(medians), "o", color="black", markersize=4, alpha=0.7)
        ax.plot([value], [y], "|", color="tab:blue", markersize=14)
    ax.set_xlabel("step time (ms)")
    save(fig, path)


def speedups_plot(compared, names: dict[tuple, str], path: Path, level: float, margin: float) -> None:
    save(speedups_figure(compared, names, level, margin), path)


# Speed-ups a reader names at a glance; the axis labels those within its range, none closer than a tenth of it.
TICKS = (0.1, 0.2, 0.25, 0.33, 0.5, 0.67, 0.8, 0.9, 0.95, 0.98, 0.99, 1.0, 1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 2, 3, 4)
TICKS += (5, 10)


def ticks(reach: float) -> list[float]:
    """The labelled speed-ups of a log axis from exp(-reach) to exp(reach): 1, then outward, spaced apart."""
    gap, kept = reach / 5, [1.0]
    for side in ([t for t in TICKS if t > 1], [t for t in reversed(TICKS) if t < 1]):
        last = 0.0
        for tick in side:
            if abs(math.log(tick)) <= reach and abs(math.log(tick)) - last >= gap:
                kept.append(tick)
                last = abs(math.log(tick))
    return sorted(kept)


# Each of the table's words (verdict.word) as a colour; no word (one run's steps) is gray and dashed.
COLOURS = {SLOWER: "tab:red", FASTER: "tab:green", THE_SAME: "tab:blue", UNDETERMINED: "tab:gray", "": "tab:gray"}


def speedups_figure(compared, names: dict[tuple, str], level: float, margin: float):
    """Each speed-up as a point with its interval at `level`, the table's, coloured by its word at `margin`."""
    order = sorted(compared, key=lambda item: item[1].value)
    values = [s.value for _, s in order]
    title = (
        f"Speed-up over the configuration that differs in one axis, at its baseline: point and {percent(level)} "
        "interval (red: slower, green: faster, blue: the same, gray: undetermined; dashed: within-run, no verdict)"
    )
    runs = list({id(r): r for versus, _ in order for c in (versus.config, versus.base) for r in c.runs}.values())
    shown = [versus.label(names) + not_compiled(versus.config, versus.base) for versus, _ in order]
    fig, ax = _figure(shown, title, values, runs)
    for y, (_, s) in enumerate(order):
        colour = COLOURS[word(s, margin)]
        ax.hlines(y, s.low, s.high, color=colour, linestyles="solid" if s.replicated else "dashed", linewidth=2)
        ax.plot([s.value], [y], "o", color=colour)
    ax.axvline(1.0, color="black", linewidth=1)
    reach = max(0.01, *(abs(math.log(x)) for _, s in order for x in (s.low, s.high) if x > 0))
    ax.set_xscale("log")
    ax.set_xlim(math.exp(-1.15 * reach), math.exp(1.15 * reach))
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks(1.15 * reach)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("speed-up (x, log scale): the baseline's step time / this configuration's; below 1 is slower")
    return fig


def ranks_plot(across: list[Configuration], names: dict[tuple, str], path: Path) -> None:
    """Runs across ranks: each rank's median step, the geometric mean over its configuration's runs.

    - Filled: the window with gradient sync.
    - Open: for DDP, the window without it; a straggler's open point stands apart.

    FSDP's steps without sync, in its probe, leave the optimizer out.
    They are not a step to set beside these.
    """
    by_label = {}
    for config, rank, sync, probe, means in (row for each in across for row in ranks.rows(each)):
        if not probe:
            by_label.setdefault(f"{names[config.key]}  rank {rank}", {})[sync] = means["step_ms"]
    title = "Step time by rank: median with gradient sync (filled) and without (open; DDP), over a configuration's runs"
    values = [v for found in by_label.values() for v in found.values() if v]
    fig, ax = _figure(list(by_label), title, values, [r for c in across for r in c.runs])
    for y, found in enumerate(by_label.values()):
        for sync in (True, False):
            if found.get(sync):
                ax.plot([found[sync]], [y], "o", color="tab:blue", fillstyle="full" if sync else "none")
    ax.set_xlabel("median step time (ms)")
    save(fig, path)


def write_plots(sweep_dir: Path, out: Path | None = None) -> list[Path]:
    """Plot the sweep's done runs into OUT/plots/; OUT is the sweep folder unless given.

    Returns:
        The files written.
    """
    runs = [r for r in load_sweep(sweep_dir) if r.state == DONE and r.summary]
    if not runs:
        raise ValueError(f"{sweep_dir}: no done runs to plot")
    out = Path(out or sweep_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    configs = ordered(configurations(runs))
    names = labels(configs)
    written = [out / "phases.png", out / "runs.png"]
    phases_plot(configs, names, written[0])
    runs_plot(configs, names, written[1])
    rule = rule_of(sweep_dir, runs)
    level = rule.level
    compared = speedups(runs, level)
    if compared:
        written.append(out / "speedups.png")
        speedups_plot(compared, names, written[-1], level, rule.margin)
    across = [config for config in configs if ranks.rank_steps(config.first)]
    if across:
        written.append(out / "ranks.png")
        ranks_plot(across, names, written[-1])
    return written
