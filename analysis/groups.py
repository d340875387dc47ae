"""How runs are grouped for comparison.

- the axes and fields that vary in a sweep;
- its configurations: the runs that differ only in their replicate, one process each;
- its comparisons: each configuration against the one that differs from it only in one axis, at that axis's baseline
  (each run records its baselines: sweeps/baselines.py);
- the order of a view's rows;
- the phases, and labels.
"""

import dataclasses
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import IN_PROCESS, PAIRED, Sample, Speedup, geometric_mean, speedup
from perfsweep.conf.schema import DECLARATION, NATURAL_BASELINES, PER_SAMPLE, SAME_WORK
from perfsweep.records import FINAL, Repro, RunRecord

# How long a run measures, not what: runs that differ only in these are still compared.
MEASURING = ("steps", "warmup_steps")
# What replicates of one configuration differ in (repeats: the rounds planned when each ran, under repeats=auto),
# and how a sweep is launched, not what a run measures (changed by a launch again, or resume): never a matching key.
# Where its records are is none either: a folder copied and launched into again records its new name.
NOT_CONFIGURATION = ("seed", "replicate", "repeats", "env.dir", "env.repo", "code", "sweep_name", "runs_dir")
LAUNCH_SETTINGS = ("launcher.", "tracker.", "auto.", "baselines.", "cost.")
# Option nodes whose other fields can be a setting of their own: a model's size, a workload's problem size.
OWN_SETTINGS = ("model", "workload")
# Who builds a model is part of it, as its name is: a column of its own only where one name has two builders.
OWN_IDENTITY = ("model.source",)

UNSET = "(unset)"  # the value of a key that a run does not record
USER_KEYS = ("model.kwargs.", "workload.kwargs.", "env.packages.")  # a user's own settings: unset where not recorded


def measures(key: str) -> bool:
    """Whether config key `key` is part of what a run measures: not a replicate's own, nor a launch setting."""
    return key not in NOT_CONFIGURATION and not key.startswith(LAUNCH_SETTINGS)


_DECLARED = tuple(f"workload.{name}" for name in DECLARATION)  # the workload's declaration: not a setting


def is_declaration(key: str) -> bool:
    return key.startswith(_DECLARED)


def axis_order(runs: list[RunRecord]) -> list[str]:
    """Every axis of the sweep, in the order its workloads declare them (first appearance)."""
    return list(dict.fromkeys(a for r in runs for a in r.axis_order))


def environment_axes(runs: list[RunRecord]) -> list[str]:
    """The sweep's package-version axes that vary (torch=2.9.1,2.14.1; env.packages.numpy=...)."""
    packages = {a for a in axis_order(runs) if a == "torch" or any(f"env.packages.{a}" in r.fields for r in runs)}
    return [a for a in axis_order(runs) if a in packages and len({r.axis(a) for r in runs}) > 1]


def _axis_fields(runs: list[RunRecord], axes: list[str]) -> set[str]:
    """The config keys that the axes show (model.name and model._target_, workload.impl, workload.size...)."""
    declared = {v for r in runs for k, v in r.fields.items() if k.startswith("workload.axes.")}
    packages = {f"env.packages.{a}" for a in axes} | ({"torch"} & set(axes))  # the environment's axes
    ranks = {"dist.world_size"} if "world_size" in axes else set()
    named = {f"{a}.name" for a in axes} | {f"{a}._target_" for a in axes}  # a _target_ comes with its name
    own = set(axes)  # a setting made an axis (threads, model.batch_size) shows its own key
    return declared | named | {f"workload.{a}" for a in axes} | packages | ranks | own | {"replicate"}


def _derived(runs: list[RunRecord], axes: list[str], key: str) -> bool:
    """Whether config key `key` is part of an axis's option: its value follows from the axis's value.

    precision.autocast_dtype follows from precision=amp_bf16, compile.mode from compile=max_autotune.
    Such a key is shown by its axis, never as an axis of its own.
    A model's or a workload's other fields are settings of their own (model.image_size, workload.size).
    """
    node = key.split(".")[0]
    if node not in axes or (node in OWN_SETTINGS and key not in OWN_IDENTITY):
        return False
    seen: dict[str, str] = {}
    return all(seen.setdefault(r.axis(node), repr(r.fields.get(key))) == repr(r.fields.get(key)) for r in runs)


def derived_keys(runs: list[RunRecord]) -> set[str]:
    """The config keys whose values follow from an axis's value in these runs (precision.autocast_dtype...).

    The keys an axis is shown by (precision.name) are not among them.
    """
    axes = [a for a in axis_order(runs) if len({r.axis(a) for r in runs}) > 1]
    shown = _axis_fields(runs, axis_order(runs))
    return {key for key in {k for r in runs for k in r.fields} - shown if _derived(runs, axes, key)}


def recorded(runs: list[RunRecord]) -> list[str]:
    """The config keys that may part configurations: those every run records, the user's own wherever one does,
    and those that take two values among the runs that record them.

    A setting only some runs record was added to perfsweep since the others ran: alone, it parts nothing.
    A constructor argument that only later runs set (model.kwargs.width) does.
    """
    every = dict.fromkeys(k for r in runs for k in r.fields)
    shared = set.intersection(*(set(r.fields) for r in runs)) if runs else set()

    def varies(key: str) -> bool:
        return len({repr(r.fields[key]) for r in runs if key in r.fields}) > 1

    return [k for k in every if k in shared or k.startswith(USER_KEYS) or varies(k)]


def varying(runs: list[RunRecord]) -> tuple[list[str], list[str]]:
    """Axis names and other config fields whose values differ between configurations (never the replicate)."""
    if not runs:
        return [], []
    axes = [a for a in axis_order(runs) if a != "replicate" and len({r.axis(a) for r in runs}) > 1]
    shown = _axis_fields(runs, axis_order(runs))
    fields = sorted(
        k
        for k in recorded(runs)
        if k not in shown
        and measures(k)
        and not is_declaration(k)
        and len({repr(r.fields.get(k)) for r in runs}) > 1
        and not _derived(runs, axes, k)
    )
    return axes, fields


def baselines_of(run: RunRecord) -> dict[str, str]:
    """The axes the run is compared along, each with the value of the run it is compared with.

    A run records them (its config's `baselines`).
    A run planned before runs recorded them is compared along its workload's baseline axis and the natural ones.
    """
    if run.baselines is not None:
        return run.baselines
    natural = {axis: value for axis, value in NATURAL_BASELINES.items() if axis in run.axes}
    return {**natural, **({run.baseline.axis: run.baseline.value} if run.baseline.axis else {})}


def compared_along(runs: list[RunRecord], vs: str | None) -> list[RunRecord]:
    """The runs, each compared along the one axis `vs` names (AXIS=VALUE), with the run of that value.

    `compile=eager` sets the compile modes side by side; `world_size=1` gives the scaling over one rank.
    A setting of the same work (SAME_WORK: `threads=1`) becomes an axis for it.
    So does a batch size (PER_SAMPLE), compared per sample (speedup_over).
    With `vs` None the runs are returned as they are, each compared along the axes it records.
    """
    if vs is None:
        return runs
    axis, _, value = vs.partition("=")
    if axis in (*SAME_WORK, *PER_SAMPLE) and axis in varying(runs)[1]:
        runs = [_with_axis(r, axis) for r in runs]
    axes = [a for a in axis_order(runs) if a != "replicate"]
    if axis in varying(runs)[1]:
        raise ValueError(
            f"--vs {vs}: {axis} is a setting this sweep varies, not an axis: its values may do different work a step, "
            f"so their step times are not set against each other (the samples/s column ranks them); its axes: "
            f"{', '.join(axes)}; settings compared as axes: {', '.join((*SAME_WORK, *PER_SAMPLE))}"
        )
    if axis not in axes:
        raise ValueError(f"--vs {vs}: {axis!r} is not an axis of this sweep; its axes: {', '.join(axes)}")
    values = sorted({r.axis(axis) for r in runs})
    if not value:
        raise ValueError(
            f"--vs {vs}: give the value to compare against, --vs {axis}=VALUE; its values: {', '.join(values)}"
        )
    named = {r.axis(axis) for r in runs if r.fields.get(f"{axis}._target_") == value}  # an import path names it too
    value = next(iter(named)) if value not in values and len(named) == 1 else value
    if value not in values:
        raise ValueError(f"--vs {vs}: no run has {axis}={value!r}; its values in this sweep: {', '.join(values)}")
    return [dataclasses.replace(r, baselines={axis: value}) for r in runs]


def compared_as_asked(runs: list[RunRecord], vs: str | None) -> list[RunRecord]:
    """compared_along, for a view the user asked --vs of: an axis every run ran at one value is refused.

    Compared along it, no row would have a comparison, and the sweep's own would be gone.
    A bisect's point compares along its package whatever ran: a release whose runs failed is left unmeasured.
    """
    compared = compared_along(runs, vs)
    if vs is None:
        return compared
    axis, _, value = vs.partition("=")
    if len({r.axis(axis) for r in compared}) < 2:
        varied = [a for a in axis_order(compared) if a != "replicate" and len({r.axis(a) for r in compared}) > 1]
        raise ValueError(
            f"--vs {vs}: every run of this sweep ran {axis}={value}: nothing to compare along it; the axes it varies: "
            f"{', '.join(varied) or 'none'}"
        )
    return compared


def _with_axis(run: RunRecord, key: str) -> RunRecord:
    """The run with setting `key` as an axis."""
    return dataclasses.replace(
        run, axes={**run.axes, key: str(run.fields.get(key, UNSET))}, axis_order=[*run.axis_order, key]
    )


@dataclasses.dataclass
class Configuration:
    """The runs of a sweep that differ only in their replicate: one configuration, each run one process."""

    key: tuple  # its axes' and fields' values, where they vary
    runs: list[RunRecord]  # in round order

    @property
    def first(self) -> RunRecord:
        return self.runs[0]

    @property
    def rounds(self) -> tuple[int, ...]:
        return tuple(map(round_of, self.runs))

    @property
    def repro(self) -> Repro | None:
        """The command that measures it again: its first replicate's (the others' add their seed).

        None where its runs were planned before runs kept one.
        """
        runs = sorted(self.runs, key=lambda run: run.fields.get("replicate", 0))
        return next((run.repro for run in runs if run.repro), None)

    @property
    def interleaved(self) -> bool:
        """Its runs ran in rounds with the other configurations' (order=interleaved): round r beside round r."""
        return all(r.fields.get("order", "interleaved") == "interleaved" for r in self.runs)

    def sample(self, columns: tuple[str, ...] = ("step_ms",), per_sample: bool = False) -> Sample:
        """Each run's measured steps of the sum of `columns` (ms; per sample where asked), with its round."""
        steps = []
        for run in self.runs:
            measured = run.steps(list(columns)) if columns != ("step_ms",) else {"step_ms": run.step_ms()}
            total = sum(np.asarray(v, dtype=float) for v in measured.values())
            steps.append(total / run.batch if per_sample else total)
        return Sample(tuple(steps), self.rounds)

    def median(self, phase: str) -> float | None:
        """Its time of `phase` (or "step"): the geometric mean over its runs of each run's median.

        A speed-up across runs is a ratio of two of these.
        """
        return self.middle(lambda r: r.summary.median(phase) if r.summary else None)

    def middle(self, value) -> float | None:
        """The geometric mean over its runs of what `value` gives for each (None where none gives a positive)."""
        return geometric_mean(value(r) for r in self.runs)


def round_of(run: RunRecord) -> int:
    """The run's replicate: the round it ran in where its sweep interleaved its configurations."""
    return int(run.axes.get("replicate") or run.fields.get("replicate") or 0)


def configurations(runs: list[RunRecord]) -> list[Configuration]:
    """The runs grouped into configurations, in order of first appearance, each one's runs by round."""
    axes, fields = varying(runs)
    by_key: dict[tuple, list[RunRecord]] = {}
    for run in runs:
        key = tuple(run.axis(a) for a in axes) + tuple(repr(run.fields.get(f)) for f in fields)
        by_key.setdefault(key, []).append(run)
    return [Configuration(key, sorted(members, key=round_of)) for key, members in by_key.items()]


@dataclasses.dataclass(frozen=True)
class Versus:
    """One comparison of the sweep: a configuration against the one that differs only in `axis`, at its baseline."""

    config: Configuration
    base: Configuration
    axis: str

    @property
    def value(self) -> str:
        """The baseline's value of the axis (tensor, contiguous, fp32...)."""
        return self.base.first.axis(self.axis)

    def label(self, names: dict[tuple, str]) -> str:
        """'subclass channels_last vs tensor'."""
        return f"{names[self.config.key]} vs {self.value}"


def in_order(value: Any) -> tuple:
    """A value's place in its column: numbers first, by size, a number written as text among them.

    Text follows, by the numbers in it (numpy 2.2.9 before 2.2.10), then as written.
    """
    text = value if isinstance(value, str) else repr(value)
    number = None if isinstance(value, bool) else _as_number(value)
    if number is not None and math.isfinite(number):
        return (0, number, text)
    parts = re.split(r"(\d+)", text)  # digits at the odd places, text at the even ones
    return (1, [int(part) if place % 2 else part for place, part in enumerate(parts)], text)


def _as_number(value: Any) -> float | None:
    """The float a number or a number's text is; None where it is neither, or too large for a float."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def ordered(configs: list[Configuration]) -> list[Configuration]:
    """Rows by the sweep's axes, each axis's baseline first, the workload's own compared axis last.

    So a row group holds the configurations that differ only in that axis, its baseline first.
    """
    axes, fields = varying([c.first for c in configs])
    along = baselines(configs)

    def key(config: Configuration) -> tuple:
        run = config.first
        own = run.baseline.axis
        order = [a for a in axes if a != own] + ([own] if own in axes else [])
        first = tuple((a in along and along[a].get(config.key) is not config, in_order(run.axis(a))) for a in order)
        return first + tuple(in_order(run.fields.get(f)) for f in fields if f not in MEASURING)

    return sorted(configs, key=key)


def sweep_baselines(configs: list[Configuration]) -> dict[tuple, dict[str, str]]:
    """Each configuration's baselines, by its key.

    They are its own, and the sweep's for its axes that it records none of.
    A launch of one value of an axis records no baseline along it.
    Another launch's runs in the folder may record one.
    It takes theirs, where they record one value.
    """
    own = {c.key: baselines_of(c.first) for c in configs}
    recorded: dict[str, set[str]] = {}
    for found in own.values():
        for axis, value in found.items():
            recorded.setdefault(axis, set()).add(value)
    single = {axis: next(iter(values)) for axis, values in recorded.items() if len(values) == 1}
    return {c.key: {**{a: v for a, v in single.items() if a in c.first.axes}, **own[c.key]} for c in configs}


def baselines(configs: list[Configuration]) -> dict[str, dict[tuple, Configuration]]:
    """Each axis the sweep compares along -> each configuration's baseline along it, by the configuration's key.

    - The baseline is the configuration that differs only in the axis, with the value the configuration records.
    - A configuration that is another's baseline along the axis is its own.
    - It is absent where the sweep has none, and for a configuration at the baseline's value that none compares with.
    - Axes come in the sweep's order; an axis along which no comparison is made is left out.

    An axis that no candidate baseline has does not part a configuration from its baseline.
    fastai's cast_to_tensor beside the plain step is such an axis: a setting of one workload alone.
    """
    axes, fields = varying([c.first for c in configs])
    by_baseline: dict[tuple[str, str], list[Configuration]] = {}
    chosen = sweep_baselines(configs)
    for config in configs:
        for axis, value in chosen[config.key].items():
            if axis in axes:
                by_baseline.setdefault((axis, value), []).append(config)
    found: dict[str, dict[tuple, Configuration]] = {}
    for (axis, value), members in by_baseline.items():
        candidates = [c for c in configs if c.first.axis(axis) == value]
        keyed = [a for a in axes if a != axis and any(c.first.axis(a) != "-" for c in candidates)]

        def key(run: RunRecord, keyed: list[str] = keyed) -> tuple:
            return tuple(run.axis(a) for a in keyed) + tuple(
                repr(run.fields.get(f)) for f in fields if f not in MEASURING
            )

        of_group: dict[tuple, list[Configuration]] = {}
        for candidate in candidates:
            of_group.setdefault(key(candidate.first), []).append(candidate)
        along = found.setdefault(axis, {})
        along |= {
            c.key: base for c in members if (base := _baseline(c, of_group.get(key(c.first), []))) and base is not c
        }
    for along in found.values():
        for base in list(along.values()):
            along.setdefault(base.key, base)
    return {
        axis: found[axis]
        for axis in axes
        if axis in found and any(base is not config for config, base in _pairs(configs, found[axis]))
    }


def _baseline(config: Configuration, candidates: list[Configuration]) -> Configuration | None:
    """The configuration's baseline among the candidates that differ from it only in the axis and how they measured.

    A lone candidate is it, whatever it measured: a sweep may measure a slow baseline for fewer steps.
    Among several, which measured for other lengths, it is the one that measured as the configuration did.
    None where none did: which to compare with is not known.
    """
    if len(candidates) == 1:
        return candidates[0]
    return next(
        (c for c in candidates if all(c.first.fields.get(k) == config.first.fields.get(k) for k in MEASURING)), None
    )


def _pairs(
    configs: list[Configuration], along: dict[tuple, Configuration]
) -> list[tuple[Configuration, Configuration]]:
    return [(config, base) for config in configs if (base := along.get(config.key)) is not None]


def comparisons(configs: list[Configuration]) -> list[Versus]:
    """Every comparison the sweep makes: each configuration against its baseline along each axis it differs in."""
    return [
        Versus(config, base, axis)
        for axis, along in baselines(configs).items()
        for config, base in _pairs(configs, along)
        if base is not config
    ]


def vs_labels(versus: list[Versus], axes: Iterable[str]) -> dict[str, str]:
    """The heading of each axis's speed-up column (vs_label); two that would read alike name their axes:
    `vs loss=torch` and `vs optim=torch`, not `vs torch` twice."""
    headers = {axis: vs_label(versus, axis) for axis in axes}
    twice = {header for header in headers.values() if list(headers.values()).count(header) > 1}
    return {
        axis: f"vs {axis}={header.removeprefix('vs ')}" if header in twice else header
        for axis, header in headers.items()
    }


def vs_label(versus: list[Versus], axis: str) -> str:
    """The heading of the speed-up column of `axis`: `vs tensor`, or `vs input_type baseline` where values differ.

    Some axes name their runs `axis=value`: ranks, threads, a package's version.
    Their columns are headed so: `vs world_size=1`.
    A sweep of two workloads may compare each along its own axis, with its own baseline.
    """
    along = [v for v in versus if v.axis == axis]
    values = sorted({v.value for v in along})
    if len(values) > 1:
        return f"vs {axis} baseline"
    named = axis == "workload" or any(axis in v.config.first.named_axes for v in along)
    return f"vs {values[0]}" if named else f"vs {axis}={values[0]}"


def phase_columns(runs: list[RunRecord]) -> list[str]:
    """The phases of every workload in the sweep, in order of first appearance, then the whole step."""
    return [*dict.fromkeys(p for r in runs if r.summary for p in r.summary.phases), "step"]


def code_name(run: RunRecord) -> str:
    """What a lone configuration is called where nothing varies: its workload's class, else its model."""
    fields = run.fields
    return str(fields.get("workload._target_") or fields.get("model._target_") or fields.get("model.name") or run.name)


def labels(configs: list[Configuration]) -> dict[tuple, str]:
    """Each configuration by what varies in the sweep: axis values, then sizes and fields as key=value; a lone one by
    its code. Configurations that differ only in how they were measured (steps...) keep their runs' names.
    An axis that shares a value with another is named with it."""
    axes, fields = varying([c.first for c in configs])
    # axes that share a value name it with the axis: loss=torch optim=fastai, not torch fastai
    values = {a: {c.first.axis_label(a) for c in configs} - {"-"} for a in axes}
    shared = {a for a in axes for b in axes if a != b and values[a] & values[b]}

    def label(run: RunRecord) -> str:
        parts = [f"{a}={run.axis(a)}" if a in shared else run.axis_label(a) for a in axes if run.axis(a) != "-"]
        parts += [f"{f}={run.fields.get(f, UNSET)}" for f in fields if f not in MEASURING]
        return " ".join(parts) or (code_name(run) if len(configs) == 1 else run.name)

    return {c.key: label(c.first) for c in configs}


def unmeasured(runs: list[RunRecord]) -> list[str]:
    """The configurations of these runs that none has measured, by label: none done, none failed (pending, running,
    or in a job that cannot start)."""
    configs = configurations(runs)
    named = labels(configs)
    return [named[c.key] for c in configs if not any(run.state in FINAL for run in c.runs)]


def speedup_over(config: Configuration, base: Configuration, level: float = LEVEL) -> Speedup:
    """The configuration's speed-up over its baseline in step time.

    Where their batches differ, it is per sample.
    A step of another batch does other work.
    With two or more runs a side it is across runs.
    It is paired by round where the sweep interleaved them, or where each round's two runs shared a process.
    Otherwise it is within-run.
    """
    paired, basis = pairing(config, base)
    each = per_sample(config, base)
    return speedup(
        config.sample(per_sample=each), base.sample(per_sample=each), paired=paired, level=level, basis=basis
    )


def per_sample(config: Configuration, base: Configuration) -> bool:
    """Whether two configurations ran other batches.

    A batch may be asked, or reduced after running out of memory."""
    batches = ({run.batch for run in config.runs}, {run.batch for run in base.runs})
    return None not in batches[0] | batches[1] and batches[0] != batches[1]


def pairing(config: Configuration, base: Configuration) -> tuple[bool, str]:
    """Whether two configurations' runs pair, and how.

    They pair in one process each round, or by round of one sweep.
    """
    shared = in_one_process(config, base)
    return shared or (config.interleaved and base.interleaved), IN_PROCESS if shared else PAIRED


def over_baseline(config: Configuration, base: Configuration | None, level: float = LEVEL) -> Speedup | float | None:
    """The configuration's speed-up over its baseline: 1.0 where it is the baseline, None where none ran."""
    return 1.0 if base is config else None if base is None else speedup_over(config, base, level)


def in_one_process(config: Configuration, base: Configuration) -> bool:
    """Whether each round's run of the two shared one process (pairing=auto): its ratio is that process's own.

    Both sides must carry their process's id and have measured as many steps.
    A side measured again, alone, after its process no longer pairs with the other.
    """
    base_of = {round_of(run): run for run in base.runs}
    pairs = [(run, base_of[round_of(run)]) for run in config.runs if round_of(run) in base_of]
    return bool(pairs) and all(shared_process(run, other) for run, other in pairs)


def shared_process(run: RunRecord, other: RunRecord) -> bool:
    ours, theirs = (r.summary.paired if r.summary else None for r in (run, other))
    return (
        ours is not None
        and theirs is not None
        and bool(ours.process)
        and ours.process == theirs.process
        and run.summary.steps == other.summary.steps
    )


def speedups(runs: list[RunRecord], level: float = LEVEL) -> list[tuple[Versus, Speedup]]:
    """Every comparison the sweep makes, with the configuration's speed-up over its baseline."""
    return [(versus, speedup_over(versus.config, versus.base, level)) for versus in comparisons(configurations(runs))]
