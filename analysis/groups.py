"""How runs are grouped for comparison: the axes and fields that vary in a sweep, each run's row group and its
baseline, the phases, and each run's label."""

import dataclasses

from analysis import stats
from conf.schema import DECLARATION
from records import RunRecord
from records.run import Baseline

# How long a run measures, not what: runs that differ only in these are still compared.
MEASURING = ("steps", "warmup_steps")
NOT_AXIS_FIELDS = ("compile.enabled", "compile.mode", "replicate")  # set together with an axis value
_DECLARED = tuple(f"workload.{name}" for name in DECLARATION)  # the workload's declaration: not a setting


def is_declaration(key: str) -> bool:
    return key.startswith(_DECLARED)


def axis_order(runs: list[RunRecord]) -> list[str]:
    """Every axis of the sweep, in the order its workloads declare them (first appearance)."""
    return list(dict.fromkeys(a for r in runs for a in r.axis_order))


def _axis_fields(runs: list[RunRecord], axes: list[str]) -> set[str]:
    """The config keys that the axes show (model.name, workload.impl, workload.size...)."""
    declared = {v for r in runs for k, v in r.fields.items() if k.startswith("workload.axes.")}
    return declared | {f"{a}.name" for a in axes} | {f"workload.{a}" for a in axes} | set(NOT_AXIS_FIELDS)


def varying(runs: list[RunRecord]) -> tuple[list[str], list[str]]:
    """Axis names and other config fields whose values differ between runs."""
    axes = [a for a in axis_order(runs) if len({r.axis(a) for r in runs}) > 1]
    shown = _axis_fields(runs, axis_order(runs))
    fields = sorted(
        k
        for k in runs[0].fields
        if k not in shown and not is_declaration(k) and len({repr(r.fields.get(k)) for r in runs}) > 1
    )
    return axes, fields


def group_key(run: RunRecord, axes: list[str], fields: list[str]) -> tuple:
    """The run's row group: everything that varies except the axis it is compared along and how long it measured."""
    return tuple(run.axis(a) for a in axes if a != run.baseline.axis) + tuple(
        repr(run.fields.get(f)) for f in fields if f not in MEASURING
    )


def compared_along(runs: list[RunRecord], vs: str | None) -> list[RunRecord]:
    """The runs, each compared with the run of its row group whose axis has the value `vs` names (`compile=eager`:
    the compile modes side by side, where the sweep's own baseline axis does not vary); as they are for None."""
    if vs is None:
        return runs
    axis, _, value = vs.partition("=")
    axes = axis_order(runs)
    if axis not in axes:
        raise ValueError(f"--vs {vs}: {axis!r} is not an axis of this sweep; its axes: {', '.join(axes)}")
    values = sorted({r.axis(axis) for r in runs})
    if value not in values:
        raise ValueError(f"--vs {vs}: no run has {axis}={value!r}; its values in this sweep: {', '.join(values)}")
    return [dataclasses.replace(r, baseline=Baseline(axis, value)) for r in runs]


def baselines(runs: list[RunRecord]) -> dict[str, RunRecord]:
    """Each run's baseline: the run of its row group with the baseline's value (absent where there is none)."""
    axes, fields = varying(runs)
    of_group = {group_key(r, axes, fields): r for r in runs if r.is_baseline}
    return {r.name: base for r in runs if (base := of_group.get(group_key(r, axes, fields)))}


def phase_columns(runs: list[RunRecord]) -> list[str]:
    """The phases of every workload in the sweep, in order of first appearance, then the whole step."""
    return [*dict.fromkeys(p for r in runs if r.summary for p in r.summary.phases), "step"]


def labels(runs: list[RunRecord]) -> dict[str, str]:
    """Each run by what varies in the sweep: axis values, then sizes and fields as key=value."""
    axes, fields = varying(runs)

    def label(run: RunRecord) -> str:
        parts = [run.axis_label(a) for a in axes if run.axis(a) != "-"]
        parts += [f"{f}={run.fields.get(f)}" for f in fields if f not in MEASURING]
        return " ".join(parts) or run.name

    return {r.name: label(r) for r in runs}


def speedups(runs: list[RunRecord]) -> list[tuple[RunRecord, RunRecord, stats.Interval]]:
    """Each run that has a baseline in its row group: (run, baseline, its speed-up over the baseline)."""
    base_of = baselines(runs)
    return [
        (run, base, stats.speedup(run.step_ms(), base.step_ms()))
        for run in runs
        if (base := base_of.get(run.name)) is not None and base is not run
    ]
