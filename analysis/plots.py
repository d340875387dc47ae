"""PNG plots of a sweep: phase times per configuration, step-time distributions, speed-ups with intervals.

    python -m analysis plots SWEEP_DIR     writes SWEEP_DIR/plots/{phases,distributions,speedups}.png

Each run is labelled by the axes and fields that vary in the sweep; bars are sorted, so the
slowest (or the largest effect) is at the top.
"""

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from analysis import stats  # noqa: E402
from analysis.load import RunRecord, load_sweep  # noqa: E402
from analysis.summary import measured_steps  # noqa: E402
from analysis.table import MEASURING, axis, group_key, is_baseline, phase_columns, varying  # noqa: E402
from sweeps.spec import FUNCTION_AXES, TRAIN_AXES  # noqa: E402

WIDE = 100  # values spanning more than this factor are drawn on a log axis


def labels(runs: list[RunRecord]) -> dict[str, str]:
    """Each run by what varies in the sweep: axis values, then sizes and fields as key=value."""
    axes, fields = varying(runs)
    named = {*TRAIN_AXES, *FUNCTION_AXES}

    def label(run: RunRecord) -> str:
        parts = [axis(run, a) if a in named else f"{a}={axis(run, a)}" for a in axes if axis(run, a) != "-"]
        parts += [f"{f}={run.fields.get(f)}" for f in fields if f not in MEASURING]
        return " ".join(parts) or run.name

    return {r.name: label(r) for r in runs}


def _figure(rows: int, title: str, values: list[float]):
    fig, ax = plt.subplots(figsize=(11, 1.4 + 0.45 * rows))
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > WIDE:
        ax.set_xscale("log")
    return fig, ax


def phases_plot(runs: list[RunRecord], names: dict[str, str], path: Path) -> None:
    phases = [p for p in phase_columns(runs) if p != "step"]
    order = sorted(runs, key=lambda r: r.summary["median_ms"]["step_ms"])
    totals = [r.summary["median_ms"]["step_ms"] for r in order]
    fig, ax = _figure(len(order), "Median time per phase of a step, per configuration", totals)
    left = [0.0] * len(order)
    for phase in phases:
        widths = [r.summary["median_ms"].get(f"{phase}_ms", 0.0) for r in order]
        ax.barh([names[r.name] for r in order], widths, left=left, label=phase)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("median ms per step (stacked phases)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def distributions_plot(sweep_dir: Path, runs: list[RunRecord], names: dict[str, str], path: Path) -> None:
    order = sorted(runs, key=lambda r: r.summary["median_ms"]["step_ms"])
    steps = [measured_steps(sweep_dir / r.name, ["step_ms"])["step_ms"] for r in order]
    medians = [r.summary["median_ms"]["step_ms"] for r in order]
    title = "Step time over the measured steps (box: IQR, whiskers: p5-p95; steps beyond them not drawn)"
    fig, ax = _figure(len(order), title, medians)
    labels_ = [names[r.name] for r in order]
    ax.boxplot(steps, orientation="horizontal", whis=(5, 95), tick_labels=labels_, showfliers=False)
    ax.set_xlabel("step time (ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def speedups(sweep_dir: Path, runs: list[RunRecord]) -> list[tuple[RunRecord, RunRecord, stats.Interval]]:
    """Each run that has a baseline in its row group: (run, baseline, its speed-up over the baseline)."""
    axes, fields = varying(runs)
    baselines = {group_key(r, axes, fields): r for r in runs if is_baseline(r)}
    found = []
    for run in runs:
        base = baselines.get(group_key(run, axes, fields))
        if base is None or base is run:
            continue
        mine, theirs = (measured_steps(sweep_dir / r.name, ["step_ms"])["step_ms"] for r in (run, base))
        found.append((run, base, stats.speedup(mine, theirs)))
    return found


def speedups_plot(found, names: dict[str, str], path: Path) -> None:
    order = sorted(found, key=lambda item: item[2].value)
    values = [i.value for _, _, i in order]
    fig, ax = _figure(len(order), "Speed-up over the baseline of the same row group (95% bootstrap interval)", values)
    errors = [[i.value - i.low for _, _, i in order], [i.high - i.value for _, _, i in order]]
    labels_ = [f"{names[r.name]}  (vs {b.baseline['value']})" for r, b, _ in order]
    ax.barh(labels_, values, xerr=errors, color=["tab:red" if v < 1 else "tab:green" for v in values], capsize=3)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("speed-up (x): baseline's median step time / this run's; below 1 is slower")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_plots(sweep_dir: Path) -> list[Path]:
    runs = [r for r in load_sweep(sweep_dir) if r.state == "done" and r.summary]
    if not runs:
        raise ValueError(f"{sweep_dir}: no done runs to plot")
    out = sweep_dir / "plots"
    out.mkdir(exist_ok=True)
    names = labels(runs)
    written = [out / "phases.png", out / "distributions.png"]
    phases_plot(runs, names, written[0])
    distributions_plot(sweep_dir, runs, names, written[1])
    found = speedups(sweep_dir, runs)
    if found:
        written.append(out / "speedups.png")
        speedups_plot(found, names, written[-1])
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis plots", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    args = parser.parse_args(argv)
    try:
        for path in write_plots(args.sweep_dir):
            print(path)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
