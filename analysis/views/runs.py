"""The runs view: each done run's statistics per phase, the host during each run, and the runs flagged noisy.

    python -m perfsweep.commands runs SWEEP_DIR

The statistics are analysis/statistics/steps.py's.
With CUDA events (device time), the host's median time of the phase is beside it.
A run whose host was read has a line of what it showed (analysis/statistics/host_flags.py).
Each run has a line with its command that measures its configuration again (records/repro.py).
"""

import dataclasses
from pathlib import Path

from perfsweep.analysis import machines
from perfsweep.analysis.render import Column, View, figure
from perfsweep.analysis.statistics.host_flags import figures, seen_in
from perfsweep.analysis.statistics.steps import PhaseStats, noise, phase_stats
from perfsweep.analysis.views.ranks import rank_steps
from perfsweep.records import DONE, RunRecord, load_sweep
from perfsweep.records.words import counted


@dataclasses.dataclass(frozen=True)
class RunStats:
    name: str
    phases: dict[str, PhaseStats]  # phase (and "step") -> its statistics
    noise: list[str]  # why the run's step times are too spread to trust (from its step column)


def run_stats(run: RunRecord) -> RunStats:
    names = [*run.summary.phases, "step"]
    steps = run.steps([f"{p}_ms" for p in names])
    by_phase = {p: phase_stats(steps[f"{p}_ms"]) for p in names}
    return RunStats(run.name, by_phase, noise(steps["step_ms"], by_phase["step"], seen_in(run.summary)))


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
    """Every done run's per-phase statistics, the host during each run, and the runs flagged noisy.

    There is a row per run and phase.
    A run across ranks comes first, then each of its ranks.
    """
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
    notes = [f"host during {run.name}: {figures(run.summary.host)}" for run in done if run.summary.host]
    notes += [f"repro {run.name}: {run.repro.line()}" for run in done if run.repro]
    flags = [f"NOISY {stats_.name}: {reason}" for _, stats_ in measured for reason in stats_.noise]
    machine = machines.named(done, machines.chosen(done))
    above = [f"{sweep_dir}: {counted(len(done), 'done run')}{f' on {machine}' if machine else ''}"] if done else []
    return View("Per-run statistics", above, columns, items, notes, flags, empty=f"{sweep_dir}: no done runs")
