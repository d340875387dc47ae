"""PNG plots of a sweep: phase times per configuration, step-time distributions, speed-ups with intervals.

    python -m analysis plots SWEEP_DIR [--out DIR]     writes SWEEP_DIR/plots/{phases,distributions,speedups}.png
                                                       (DIR/plots/ with --out)

Each run is labelled by the axes and fields that vary in the sweep; bars are sorted, so the
slowest (or the largest effect) is at the top.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from analysis.groups import labels, phase_columns, speedups  # noqa: E402
from records import DONE, RunRecord, load_sweep  # noqa: E402

WIDE = 100  # values spanning more than this factor are drawn on a log axis


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
    order = sorted(runs, key=lambda r: r.summary.median("step"))
    totals = [r.summary.median("step") for r in order]
    fig, ax = _figure(len(order), "Median time per phase of a step, per configuration", totals)
    left = [0.0] * len(order)
    for phase in phases:
        widths = [r.summary.median(phase) or 0.0 for r in order]
        ax.barh([names[r.name] for r in order], widths, left=left, label=phase)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("median ms per step (stacked phases)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def distributions_plot(runs: list[RunRecord], names: dict[str, str], path: Path) -> None:
    order = sorted(runs, key=lambda r: r.summary.median("step"))
    steps = [r.step_ms() for r in order]
    medians = [r.summary.median("step") for r in order]
    title = "Step time over the measured steps (box: IQR, whiskers: p5-p95; steps beyond them not drawn)"
    fig, ax = _figure(len(order), title, medians)
    labels_ = [names[r.name] for r in order]
    ax.boxplot(steps, orientation="horizontal", whis=(5, 95), tick_labels=labels_, showfliers=False)
    ax.set_xlabel("step time (ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def speedups_plot(found, names: dict[str, str], path: Path) -> None:
    order = sorted(found, key=lambda item: item[2].value)
    values = [i.value for _, _, i in order]
    fig, ax = _figure(len(order), "Speed-up over the baseline of the same row group (95% bootstrap interval)", values)
    errors = [[i.value - i.low for _, _, i in order], [i.high - i.value for _, _, i in order]]
    labels_ = [f"{names[r.name]}  (vs {b.baseline.value})" for r, b, _ in order]
    ax.barh(labels_, values, xerr=errors, color=["tab:red" if v < 1 else "tab:green" for v in values], capsize=3)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("speed-up (x): baseline's median step time / this run's; below 1 is slower")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_plots(sweep_dir: Path, out: Path | None = None) -> list[Path]:
    """Plot the sweep's done runs into OUT/plots/ (OUT: the sweep folder, unless given); the files written."""
    runs = [r for r in load_sweep(sweep_dir) if r.state == DONE and r.summary]
    if not runs:
        raise ValueError(f"{sweep_dir}: no done runs to plot")
    out = Path(out or sweep_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    names = labels(runs)
    written = [out / "phases.png", out / "distributions.png"]
    phases_plot(runs, names, written[0])
    distributions_plot(runs, names, written[1])
    found = speedups(runs)
    if found:
        written.append(out / "speedups.png")
        speedups_plot(found, names, written[-1])
    return written
