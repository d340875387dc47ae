"""Two sweeps, run by run: per-phase speed-ups with intervals, regressions and improvements flagged.

    python -m analysis compare SWEEP_A SWEEP_B [--threshold 0.05] [--loss-tolerance 0.05]

A is the reference (before), B the candidate (after): two torch versions, before and after a
change, eager against compiled. Runs are matched by their axes and config, leaving out what each
sweep holds constant but the two do not share (printed as what the sweeps differ in, and below it
where the machines most of their runs had differ: GPU, driver, torch, CUDA...) and how long they
measured. For each matched pair and phase: B's speed-up over A (median time of A / of B) with a
bootstrap 95% interval over steps. A REGRESSION is B slower by more than the threshold with an
interval that excludes 1; an improvement is the same the other way. The final loss is compared
too: a change by more than the tolerance of how far A's loss moved while it trained is flagged,
since a faster step that trains differently is no improvement, and so are NaN or infinite losses
(NON-FINITE LOSS). Exit status 1 when a regression, a loss change or a non-finite loss is found.
"""

import dataclasses
from pathlib import Path

from analysis import machines, stats
from analysis.groups import is_declaration
from analysis.render import Column, View
from records import DONE, RunRecord, load_sweep

NOT_COMPARED = ("sweep", "sweep_name", "runs_dir", "scale", "steps", "warmup_steps", "label")


def identity(run: RunRecord) -> dict[str, str]:
    fields = {k: repr(v) for k, v in run.fields.items() if not k.startswith(("launcher.", "tracker."))}
    return {k: v for k, v in fields.items() if k not in NOT_COMPARED and not is_declaration(k)}


def differences(a: list[RunRecord], b: list[RunRecord]) -> dict[str, tuple[str, str]]:
    """Config keys constant within each sweep whose values differ between them: what is being compared."""
    ids_a, ids_b = [identity(r) for r in a], [identity(r) for r in b]
    found = {}
    for key in ids_a[0].keys() & ids_b[0].keys():
        values_a, values_b = {i.get(key) for i in ids_a}, {i.get(key) for i in ids_b}
        if len(values_a) == 1 and len(values_b) == 1 and values_a != values_b:
            found[key] = (values_a.pop(), values_b.pop())
    return found


def machine_differences(a: list[RunRecord], b: list[RunRecord]) -> dict[str, tuple[str, str]]:
    """Where the machine most of A's runs had and B's differ (analysis/machines.py): GPU, driver, torch..."""
    usual_a, usual_b = machines.usual(a), machines.usual(b)
    if usual_a is None or usual_b is None:
        return {}
    return machines.differences(usual_a.machine, usual_b.machine)


def changes(differ: dict[str, tuple[str, str]]) -> str:
    """'torch 2.11.0 -> 2.14.1, CUDA 13.0 -> 12.8'."""
    return ", ".join(f"{key} {a} -> {b}" for key, (a, b) in differ.items())


def pairs(
    a: list[RunRecord], b: list[RunRecord]
) -> tuple[dict[str, tuple[str, str]], list[tuple[RunRecord, RunRecord]]]:
    differ = differences(a, b)

    def key(run: RunRecord) -> tuple:
        return tuple(sorted((k, v) for k, v in identity(run).items() if k not in differ))

    by_key = {key(r): r for r in b}
    return differ, [(r, by_key[key(r)]) for r in a if key(r) in by_key]


def flag(interval: stats.Interval, threshold: float) -> str:
    if interval.value < 1 - threshold and interval.high < 1:
        return "REGRESSION"
    if interval.value > 1 + threshold and interval.low > 1:
        return "improvement"
    return ""


def loss_changed(a: RunRecord, b: RunRecord, tolerance: float) -> str:
    """A flag if B's final loss is off A's by more than `tolerance` of how far A's loss moved while it trained
    (of A's final loss, if it did not move): numerics may differ a little, training may not."""
    broken = [
        f"{name} {run.summary.nonfinite_losses}" for name, run in (("A", a), ("B", b)) if run.summary.nonfinite_losses
    ]
    if broken:
        return f"NON-FINITE LOSS: NaN or infinite losses in {', '.join(broken)} steps"
    before, after, first = a.summary.loss_last, b.summary.loss_last, a.summary.loss_first
    if before is None or after is None:
        return ""
    scale = abs(first - before) if first is not None and abs(first - before) > 1e-12 else abs(before)
    if abs(after - before) > tolerance * max(scale, 1e-12):
        return f"LOSS CHANGED {before:.4g} -> {after:.4g} (A trained from {first:.4g})"
    return ""


@dataclasses.dataclass(frozen=True)
class Line:
    """One line of the comparison: a phase of a matched pair, or its final loss."""

    run: str
    phase: str
    a_ms: str = ""
    b_ms: str = ""
    speedup: str = ""
    flag: str = ""


COLUMNS = [
    Column("run (A)", lambda line: line.run),
    Column("phase", lambda line: line.phase),
    Column("A ms", lambda line: line.a_ms),
    Column("B ms", lambda line: line.b_ms),
    Column("B speed-up [95% CI]", lambda line: line.speedup),
    Column("flag", lambda line: line.flag),
]


def pair_lines(a: RunRecord, b: RunRecord, threshold: float, loss_tolerance: float) -> list[Line]:
    phases = [*a.summary.phases, "step"]
    columns = [f"{p}_ms" for p in phases]
    steps_a, steps_b = a.steps(columns), b.steps(columns)
    lines = []
    for phase, column in zip(phases, columns, strict=True):
        interval = stats.speedup(steps_b[column], steps_a[column])
        median_a, median_b = a.summary.median(phase), b.summary.median(phase)
        lines.append(
            Line(a.name, phase, f"{median_a:.3g}", f"{median_b:.3g}", str(interval), flag(interval, threshold))
        )
    changed = loss_changed(a, b, loss_tolerance)
    return lines + ([Line(a.name, "final loss", flag=changed)] if changed else [])


def compare(sweep_a: Path, sweep_b: Path, threshold: float, loss_tolerance: float) -> tuple[View, bool]:
    """The comparison as a view, and whether it found a regression (time or loss)."""
    done = [[r for r in load_sweep(d) if r.state == DONE] for d in (sweep_a, sweep_b)]
    if not done[0] or not done[1]:
        raise ValueError(f"both sweeps need done runs: {sweep_a} has {len(done[0])}, {sweep_b} has {len(done[1])}")
    differ, matched = pairs(*done)
    lines = [line for a, b in matched for line in pair_lines(a, b, threshold, loss_tolerance)]
    regressed = any(line.flag.startswith(("REGRESSION", "LOSS CHANGED", "NON-FINITE LOSS")) for line in lines)
    above = [
        f"A: {sweep_a} ({len(done[0])} done runs)  B: {sweep_b} ({len(done[1])} done runs)",
        f"they differ in: {changes(differ) or 'nothing'}",
    ]
    if machines_differ := machine_differences(*done):
        above.append(f"their machines differ in: {changes(machines_differ)}")
    unmatched = len(done[0]) - len(matched)
    notes = [
        f"{len(matched)} runs matched, {unmatched} of A without a match in B; threshold {threshold:.0%}, "
        f"loss tolerance {loss_tolerance:.0%}; speed-up = median time of A / of B (below 1: B is slower)"
    ]
    return View("Comparison", above, COLUMNS, lines, notes=notes), regressed
