"""Two sweeps, configuration by configuration.

It gives step-time speed-ups with intervals across runs, and a suite-level geometric mean.
The family of comparisons is held to one error rate.

    python -m perfsweep.commands compare SWEEP_A SWEEP_B [--threshold 0.05] [--loss-tolerance 0.05] [--gate-phases]
        [--max-unmatched 0.0]

A is the reference (before), B the candidate (after).
They may be two torch versions, before and after a change, or eager against compiled.
Configurations are matched by their axes and config, leaving out:

- their replicate;
- what each sweep holds constant but the two do not share;
- how long they measured.

What the sweeps differ in is printed: a setting each holds constant, or sets in one and not in the other.
So is how long they measured (steps, warmup_steps), where that differs.
Below it come their code, where it differs (the commit under test, each module's files), and the machines, where
those most of their runs had differ (GPU, driver, torch, CUDA...).
For each matched configuration, B's speed-up over A (median time of A / of B) is shown.
It is shown for the step and each phase, each run counting once (analysis/statistics/speedup.py).

The gate is the step's; `--gate-phases` gates on the phases too.
As in asv, a change is flagged when it is beyond the threshold and statistically significant.
Here the whole family of comparisons is held to a 5% error rate (Holm).
With nothing changed, a compare of 30 configurations flags a REGRESSION in at most 5% of compares.

    REGRESSION             B slower; replicated on both sides (two or more runs each)
    POSSIBLE REGRESSION    the same from one run on a side (a within-run interval, blind to the difference
                           between processes), or one a shared host or a moved machine may explain (below)
    UNDETERMINED           B's interval reaches a slowdown beyond the threshold, and no such slowdown is confirmed
                           (or B's time is unknown): the runs can neither confirm nor rule it out, and more runs
                           decide it; it fails the gate with --fail-undetermined, and where one sweep's host was
                           shared and the other's not, as a possible regression (exit 3)
    SHARED HOST            beside a flagged line, where one sweep's host was shared and the other's not: the
                           change may be that load's, and more runs beside it would measure it again, so the
                           way on is to run that sweep again with its host to itself; such a REGRESSION is a
                           POSSIBLE REGRESSION (shared host); where the runs no neighbour or steal took show
                           the change too (two or more a side), it stays confirmed, and it says so
    MACHINE MOVED          beside a flagged line (an UNDETERMINED one included), where the machine ran a fixed
                           workload slower in one sweep: the change may be the machine's; such a REGRESSION
                           is a POSSIBLE REGRESSION (machine moved)
    NOT COMPILED IN B      a compiled configuration of which a run in B ran none of its ops in a compiled
                           graph, where none of A's ran so: its times are eager ones; exit 3, as a possible
                           regression
    MOVED TOGETHER         where the sweeps' settings and code are the same and every configuration's step fits
                           one move (flagged its way, or its interval holds the other configurations' move): what
                           moved them is the machine's moment, not a change; such a REGRESSION is a POSSIBLE
                           REGRESSION (moved together)
    improvement / possible improvement    the same, the other way (significant only)

The final loss is compared too.
A faster step that trains differently is no improvement.
Runs of A and B are paired by replicate: each ran with `seed` + its replicate.
A pair changed where B's final loss is off A's by more than the tolerance of how far A's loss moved.
Only runs that trained as many steps are held to each other's loss.
A configuration with such pairs gets one line: LOSS CHANGED in k of n run pairs, with their replicates.
NaN or infinite losses are flagged NON-FINITE LOSS, with the side and its replicates.

A configuration of A without a match in B was not compared.
Each side's configurations without a match are named, with the overrides that would launch the other side with them.
Past the share of A's configurations that --max-unmatched allows (default 0: none), A's are flagged UNMATCHED.
They fail the gate: 8 is added to the exit status.
`--max-unmatched 1` lets a B that is a subset of A pass.
Where no configuration matched, nothing is compared: what parts the sweeps is named, and how to match them.

The exit status says what was flagged, so that CI can branch on each:

    0      nothing flagged (an improvement is no failure)
    1      a REGRESSION
    3      a POSSIBLE REGRESSION or NOT COMPILED IN B, and no REGRESSION; or an UNDETERMINED slowdown where
           one sweep's host was shared and the other's not (SHARED HOST): a neighbour can hide a slowdown as
           well as make one
    4      LOSS CHANGED or NON-FINITE LOSS, and no slowdown flagged
    5, 7   a loss flag beside a slowdown: 4 added to 1 or 3
    8      more of A's configurations without a match in B than --max-unmatched allows, and nothing else flagged
    9-15   8 added to one of 1, 3, 4, 5, 7
    16-31  with --fail-undetermined, 16 added to one of 0, 1, 3-15 where a step (or a gated phase) is UNDETERMINED
    2      no comparison was made (no configuration matched, a sweep without done runs, a bad argument)
    70     perfsweep failed (a traceback): no verdict (commands/entry.py's INTERNAL_ERROR)

So `status & 4` says a loss changed, `status & 8` that configurations of A went unmatched.
`status & 16` says the runs could not rule out a slowdown beyond the threshold.
`status & 3` is 1 for a confirmed slowdown, 3 for a possible one.
"""

import dataclasses
import itertools
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from perfsweep import conf
from perfsweep.analysis import machines
from perfsweep.analysis.groups import (
    MEASURING,
    OWN_SETTINGS,
    UNSET,
    Configuration,
    derived_keys,
    in_order,
    is_declaration,
    labels,
    measures,
    round_of,
)
from perfsweep.analysis.render import Column, View, figure
from perfsweep.analysis.statistics import host_flags, machine_speed
from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import (
    PARTS,
    Speedup,
    as_data,
    holm,
    percent,
    slow_end,
    speedup,
    suite_speedup,
)
from perfsweep.analysis.statistics.verdict import FASTER, SLOWER, THE_SAME, UNDETERMINED, UNDETERMINED_FLAG, flag
from perfsweep.analysis.views.explain import explained, largest
from perfsweep.analysis.views.table import ran_eagerly
from perfsweep.records import DONE, FAILED, RUNNING, Repro, RunRecord, load_sweep
from perfsweep.records.code import changed_files, snapshot_files
from perfsweep.records.words import counted, listed

EXIT_REGRESSION, EXIT_POSSIBLE, EXIT_LOSS = 1, 3, 4  # a loss flag adds EXIT_LOSS to the others
EXIT_UNMATCHED = 8  # added where more configurations went without a match than --max-unmatched allows
UNMATCHED = "UNMATCHED"  # the flag of configurations without a match, past --max-unmatched
EXIT_UNDETERMINED = 16  # added where the runs did not rule out a slowdown beyond the threshold
EXIT_NOTHING_COMPARED = 2  # no configuration matched
SHARED_HOST = "SHARED HOST"
OPTIONS = Path(conf.__file__).parent  # perfsweep's own options of each config group: conf/<group>/<option>.yaml
MACHINE_MOVED = "MACHINE MOVED"
MOVED_TOGETHER = "MOVED TOGETHER"  # every configuration moved by one factor, as a machine or a moment moves them
NOT_DONE = "not done in configurations compared on their done runs"  # short_of's line
FAILED_IN_B = "FAILED IN B"  # short_of's line where B's runs failed: what B's code may do
LOSS_FLAGS = ("LOSS CHANGED", "NON-FINITE LOSS")
# B's runs of a compiled configuration ran none of its ops in a compiled graph, where A's did: a possible regression
NOT_COMPILED_IN_B = "NOT COMPILED IN B"
NOT_COMPARED = ("sweep", "sweep_name", "runs_dir", "scale", *MEASURING, "label", "order")
# What a step does: sweeps whose runs differ in it time different work, so their runs are never matched.
WORK = ("workload.name",)

Identity = Callable[[RunRecord], dict[str, str]]


def identity(run: RunRecord, hidden: frozenset[str] = frozenset()) -> dict[str, str]:
    """What the run measured, by config key, as compare matches it; `hidden` keys left out."""
    fields = {k: repr(v) for k, v in run.fields.items() if measures(k) and k not in hidden}
    return {k: v for k, v in fields.items() if k not in NOT_COMPARED and not is_declaration(k)}


def identity_of(runs: list[RunRecord]) -> Identity:
    """The identity of these runs' configurations, without the keys that follow from an axis's value.

    precision.autocast_dtype follows from precision=amp_bf16: the axis names the difference, once.
    """
    hidden = frozenset(derived_keys(runs))
    return lambda run: identity(run, hidden)


def measuring(run: RunRecord) -> dict[str, str]:
    """How long the run measured: its steps and warm-up steps.

    They are not matched on; a difference in them is named.
    """
    return {key: repr(run.fields[key]) for key in MEASURING if key in run.fields}


def measured_differently(matched: list[tuple[Configuration, Configuration]]) -> str:
    """What the matched configurations differ in how long they measured, as a line; '' if nothing.

    Each pair is read on its own: a folder of two launches may measure for two lengths.
    """
    found: dict[str, dict[tuple[str, str], None]] = {}
    for ca, cb in matched:
        for key, pair in differences(ca.runs, cb.runs, of=measuring).items():
            found.setdefault(key, {})[pair] = None
    if not found:
        return ""
    said = ", ".join(f"{key} {a} -> {b}" for key, pairs in found.items() for a, b in pairs)
    return (
        f"they differ in how long they measured: {said}; final losses are compared only between runs that trained "
        "as many steps"
    )


def other_work(differ: dict[str, tuple[str, str]]) -> str:
    """A line where the sweeps' steps do different work; '' if not.

    Another batch or image size does.
    Each speed-up is then per step.
    """
    sizes = {key: values for key, values in differ.items() if key in ("model.batch_size", "model.image_size")}
    if not sizes:
        return ""
    line = f"their steps do different work ({changes(sizes)}): each speed-up is per step, not of the same work"
    if (batch := sizes.get("model.batch_size")) and all(value.isdigit() for value in batch):
        a, b = (int(value) for value in batch)
        line += f"; per sample it is {b / a:.3g} times the speed-up (B's {b} samples a step over A's {a})"
    return line


def steps_trained(run: RunRecord) -> int:
    """The steps the run trained, warm-up included, of those it records."""
    return sum(count for key in MEASURING if isinstance(count := run.fields.get(key), int))


def code_of(run: RunRecord) -> dict[str, str]:
    """The code a run measured: the commit under test, and the files of each module its launch copied."""
    tested = run.status.code_under_test or {}
    found = {f"{module} files": digest[:8] for module, digest in (run.status.code or {}).items()}
    if tested.get("commit"):
        found = {"commit under test": tested["commit"][:8] + ("+dirty" if tested.get("dirty") else "")} | found
    return found


def files_changed(differ: dict[str, tuple[str, str]], sweeps: tuple[Path, Path]) -> str:
    """' (mypkg/models.py changed)': the files of each copied module that differ.

    Each sweep's snapshot must hold the module.

    '' where none can be told.
    """
    found = []
    for key in (k for k in differ if k.endswith(" files")):
        module = key.removesuffix(" files")
        copies = [snapshot_files(sweep, module) for sweep in sweeps]
        if copies[0] is not None and copies[1] is not None:
            found += changed_files(*copies)
    return f" ({listed(found)})" if found else ""


def _keys(*identities: list[dict[str, str]]) -> list[str]:
    """Every key of the identities, in order of first appearance."""
    return list(dict.fromkeys(key for found in identities for i in found for key in i))


def differences(a: list[RunRecord], b: list[RunRecord], of: Identity = identity) -> dict[str, tuple[str, str]]:
    """Keys constant within each sweep whose values differ between them: what is being compared.

    A key that one sweep's runs record and the other's do not differs too: its value there is UNSET.
    A registered workload (WORK) is never one: a training step and an inference step are not one configuration.
    Nor is a step of the user's own against a registered one.
    Two steps of the user's own may be: two versions of one step, compared.
    """
    ids_a, ids_b = [of(r) for r in a], [of(r) for r in b]
    own_steps = all(r.fields.get("workload._target_") for r in [*a, *b])
    differing = {}
    for key in _keys(ids_a, ids_b):
        values_a, values_b = ({i.get(key, UNSET) for i in ids} for ids in (ids_a, ids_b))
        if key in WORK and not own_steps and UNSET not in values_a | values_b:
            continue
        if len(values_a) == 1 and len(values_b) == 1 and values_a != values_b:
            differing[key] = (values_a.pop(), values_b.pop())
    return differing


def machine_differences(a: list[RunRecord], b: list[RunRecord]) -> dict[str, tuple[str, str]]:
    """Where the machine most of A's runs had and B's differ (analysis/machines.py): GPU, driver, torch...

    A label that both sides' configs chose is a setting of each, which the line of what the sweeps differ in names.
    """
    usual_a, usual_b = machines.usual(a), machines.usual(b)
    if usual_a is None or usual_b is None:
        return {}
    return machines.differences(usual_a.machine, usual_b.machine, usual_a.asked & usual_b.asked)


def changes(differ: dict[str, tuple[str, str]]) -> str:
    """'torch 2.11.0 -> 2.14.1, CUDA 13.0 -> 12.8'."""
    return ", ".join(f"{key} {a} -> {b}" for key, (a, b) in differ.items())


@dataclasses.dataclass
class Matching:
    """Two sweeps' configurations: what the sweeps differ in, those matched, and each side's without a match."""

    differ: dict[str, tuple[str, str]]
    matched: list[tuple[Configuration, Configuration]]
    only_a: list[Configuration]
    only_b: list[Configuration]


def matched_on(run: RunRecord, differ: dict, of: Identity = identity) -> tuple:
    """What a run's configuration is matched on: its identity less what the sweeps differ in."""
    return tuple(sorted((k, v) for k, v in of(run).items() if k not in differ))


def pairs(a: list[RunRecord], b: list[RunRecord], of: Identity = identity) -> Matching:
    """What the sweeps differ in, and their configurations matched: A's and B's runs of each."""
    differ = differences(a, b, of)

    def grouped(runs: list[RunRecord]) -> dict[tuple, Configuration]:
        by_key: dict[tuple, list[RunRecord]] = {}
        for run in runs:
            by_key.setdefault(matched_on(run, differ, of), []).append(run)
        return {key: Configuration(key, sorted(members, key=round_of)) for key, members in by_key.items()}

    of_a, of_b = grouped(a), grouped(b)
    return Matching(
        differ,
        [(config, of_b[key]) for key, config in of_a.items() if key in of_b],
        [config for key, config in of_a.items() if key not in of_b],
        [config for key, config in of_b.items() if key not in of_a],
    )


def _value(value: object) -> str:
    """A config value as an override writes it: `64`, `true`, `null`, `tensor`."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _in_order(values) -> list[str]:
    """Distinct values, in a column's order (analysis/groups.py `in_order`)."""
    return sorted(set(values), key=in_order)


def _option(run: RunRecord, group: str) -> str:
    """The value of config group `group` that chose the run's option: its import path, else its name."""
    name, target = run.fields[f"{group}.name"], run.fields.get(f"{group}._target_")
    return target if target and target.rsplit(".", 1)[-1] == name else name


def override(key: str, runs: list[RunRecord], other: list[RunRecord]) -> str:
    """The override that launches `other` with the values of `key` that `runs` have.

    It is `input_type=tensor,subclass` for a config group, `+model.kwargs.width=64` for a key `other` lacks, and
    `without KEY` where `runs` lack the key.
    A group's value that no option file of perfsweep's names goes by its name: `model.name=mobilenetv3_small_100`.
    """
    group = key.removesuffix(".name")
    if group != key and "." not in group:
        chosen = _in_order(_option(run, group) for run in runs)
        if all("." in option or (OPTIONS / group / f"{option}.yaml").is_file() for option in chosen):
            return f"{group}={','.join(chosen)}"
        key = f"{group}.name"  # a timm or torchvision model, named: no option file of perfsweep's has its name
    values = [_value(run.fields[key]) for run in runs if key in run.fields]
    if not values:
        return f"without {key}"
    added = "+" if any(key not in run.fields for run in other) else ""
    return f"{added}{key}={','.join(_in_order(values))}"


def launch(side: str, overrides: list[str]) -> str:
    """'launch B with input_type=tensor +model.kwargs.width=64, without model.kwargs.depth'."""
    given = [o for o in overrides if not o.startswith("without ")]
    words = ([f"with {' '.join(given)}"] if given else []) + [o for o in overrides if o.startswith("without ")]
    return f"launch {side} " + ", ".join(words)


def lacking(side: list[RunRecord], other: list[RunRecord], differ: dict, of: Identity = identity) -> list[str]:
    """The overrides that would launch `other` with `side`'s values of each key where it lacks some: how to match.

    Keys in `differ` are compared along, not matched on.
    A `_target_` goes with its group's name.
    A key where `other` has values that `side` lacks is set to `side`'s too: the launch is narrowed to them.
    Empty where the launch would run a configuration that no run of `side` or `other` had.
    Such a launch may not be valid.
    Empty too where a key is of an option the sweeps differ in: `dist.world_size` where one is `dist=ddp`.
    A model's or a workload's settings are not such keys: two versions of a model share their sizes.
    Nor is a step of the user's own set against a registered one: no launch matches them.
    """
    ids_side, ids_other = [of(r) for r in side], [of(r) for r in other]
    values = {
        key: [{i.get(key, UNSET) for i in ids} for ids in (ids_side, ids_other)] for key in _keys(ids_side, ids_other)
    }
    if not any(ours - theirs for key, (ours, theirs) in values.items() if key not in differ):
        return []
    found = [key for key, (ours, theirs) in values.items() if key not in differ and ours != theirs]
    named = [k for k in found if not (k.endswith("._target_") and k.replace("._target_", ".name") in found)]
    if _across_options(named, differ, [*side, *other]) or not _runs_what_ran(named, ids_side, ids_other, differ):
        return []
    return [override(key, side, other) for key in named]


def _across_options(named: list[str], differ: dict, runs: list[RunRecord]) -> bool:
    """Whether setting `named` would cross an option the sweeps differ in, or a user's step and a registered one."""
    options = {key.split(".")[0] for key in differ if key.endswith((".name", "._target_"))} - set(OWN_SETTINGS)
    own = {bool(r.fields.get("workload._target_")) for r in runs}
    return any(key.split(".")[0] in options for key in named) or (len(own) > 1 and any(k in WORK for k in named))


def _runs_what_ran(named: list[str], ids_side: list[dict], ids_other: list[dict], differ: dict) -> bool:
    """Whether each configuration the launch would run (one of other's, with side's values of `named`) some run had.

    A group's option chosen anew brings its own fields: they are not held to other's.
    """
    chosen = [k.removesuffix(".name") for k in named if k.endswith(".name") and "." not in k.removesuffix(".name")]
    keys = [
        k
        for k in _keys(ids_side, ids_other)
        if k not in differ and (k in named or not k.startswith(tuple(f"{group}." for group in chosen)))
    ]
    had = {tuple(i.get(k, UNSET) for k in keys) for i in [*ids_side, *ids_other]}
    grid = list(itertools.product(*(dict.fromkeys(i.get(k, UNSET) for i in ids_side) for k in named)))
    launched = ({**i, **dict(zip(named, combination, strict=True))} for i in ids_other for combination in grid)
    return all(tuple(i.get(k, UNSET) for k in keys) in had for i in launched)


def parted(
    a: list[RunRecord], b: list[RunRecord], differ: dict, names: tuple[str, str], of: Identity = identity
) -> list[str]:
    """The keys whose values differ between the two sets of runs, each with both sides' values: what parts them."""
    ids_a, ids_b = [of(r) for r in a], [of(r) for r in b]
    lines = []
    for key in (k for k in _keys(ids_a, ids_b) if k not in differ):
        values_a, values_b = ({i.get(key, UNSET) for i in ids} for ids in (ids_a, ids_b))
        if values_a != values_b:
            shown = (", ".join(_in_order(values)) for values in (values_a, values_b))
            lines.append(f"{key}: {names[0]} {next(shown)}; {names[1]} {next(shown)}")
    return lines


def beyond(unmatched: int, of: int, max_unmatched: float) -> bool:
    """Whether `unmatched` of `of` configurations is a larger share than --max-unmatched allows."""
    return of > 0 and unmatched / of > max_unmatched


def unmatched_share(unmatched: int, of: int, max_unmatched: float) -> str:
    """'2 without a match (33%, above --max-unmatched 0%)'; '0 without a match'."""
    if not unmatched:
        return "0 without a match"
    where = "above" if beyond(unmatched, of, max_unmatched) else "within"
    return f"{unmatched} without a match ({unmatched / of:.0%}, {where} --max-unmatched {max_unmatched:.0%})"


def loss_moved(a: RunRecord, b: RunRecord, tolerance: float) -> bool:
    """Whether B's final loss is off A's by more than `tolerance` of how far A's loss moved.

    If A's loss did not move, the tolerance is of A's final loss.
    Numerics may differ a little; training may not.
    """
    before, after, first = a.summary.loss_last, b.summary.loss_last, a.summary.loss_first
    if before is None or after is None:
        return False
    scale = abs(first - before) if first is not None and abs(first - before) > 1e-12 else abs(before)
    return abs(after - before) > tolerance * max(scale, 1e-12)


def replicates(runs: list[RunRecord]) -> str:
    """'replicate 2', or 'replicates 0, 1, 2': the runs by their replicate."""
    numbers = ", ".join(str(round_of(run)) for run in runs)
    return f"{'replicate' if len(runs) == 1 else 'replicates'} {numbers}"


def nonfinite(a: Configuration, b: Configuration) -> str:
    """A flag where runs of either side had NaN or infinite losses, naming each side's replicates."""
    sides = []
    for side, config in (("A", a), ("B", b)):
        broken = [run for run in config.runs if run.summary.nonfinite_losses]
        steps = ", ".join(str(run.summary.nonfinite_losses) for run in broken)
        sides += [f"{side}'s {replicates(broken)} ({steps} steps)"] if broken else []
    return f"NON-FINITE LOSS: NaN or infinite losses in {'; '.join(sides)}" if sides else ""


def loss_changed(a: Configuration, b: Configuration, tolerance: float) -> str:
    """A flag where B's final loss moved from A's (loss_moved) in runs of one replicate.

    Only runs that trained as many steps are paired.

    It says how many of the pairs changed, and which, with their final losses (medians where several).
    """
    # paired by replicate, among the runs that trained as many steps: else not the same training
    of_b = {(round_of(run), steps_trained(run)): run for run in b.runs}
    pairs = [(run, of_b[key]) for run in a.runs if (key := (round_of(run), steps_trained(run))) in of_b]
    changed = [(ra, rb) for ra, rb in pairs if loss_moved(ra, rb, tolerance)]
    if not changed:
        return ""
    which = replicates([ra for ra, _ in changed])
    if len(changed) < len(pairs):
        which += " of " + ", ".join(str(round_of(ra)) for ra, _ in pairs)
    before = statistics.median(ra.summary.loss_last for ra, _ in changed)
    after = statistics.median(rb.summary.loss_last for _, rb in changed)
    firsts = [ra.summary.loss_first for ra, _ in changed if ra.summary.loss_first is not None]
    medians = ", medians" if len(changed) > 1 else ""
    trained = f" (A trained from {statistics.median(firsts):.4g})" if firsts else ""
    return (
        f"LOSS CHANGED in {len(changed)} of {counted(len(pairs), 'run pair')} ({which}): "
        f"final loss {before:.4g} -> {after:.4g}{medians}{trained}"
    )


@dataclasses.dataclass(frozen=True)
class Line:
    """One line of the comparison: a phase of a matched configuration, or its final loss."""

    configuration: str
    phase: str
    runs: str = ""
    a_ms: float | None = None  # a phase's time (ms); none for the final loss
    b_ms: float | None = None
    speedup: Speedup | None = None
    gated: bool = False
    flag: str = ""
    repro: Repro | None = None  # the command that measures B's configuration again
    operators: tuple[str, ...] = ()  # the step's largest operator differences, A to B, where both ran explain=true


def columns(threshold: float) -> list[Column]:
    """The comparison's columns.

    In data, a gated line's word is what it did at the threshold (`kind`).
    A line not gated (a phase, without --gate-phases) was not tested: it has no word.
    """
    return [
        Column("configuration (A)", lambda line: line.configuration),
        Column("phase", lambda line: line.phase),
        Column("runs A/B", lambda line: line.runs),
        Column("A ms", lambda line: figure(line.a_ms) if line.speedup else "", lambda line: line.a_ms),
        Column("B ms", lambda line: figure(line.b_ms) if line.speedup else "", lambda line: line.b_ms),
        Column(
            "B speed-up [95%]",
            lambda line: str(line.speedup) if line.speedup else "",
            lambda line: (
                as_data(line.speedup, LEVEL, lambda _: kind(line, threshold) if line.gated else "")
                if line.speedup
                else {}
            ),
            PARTS,
        ),
        Column(
            "p",
            lambda line: line.speedup.p_text() if line.gated and line.speedup else "",
            lambda line: line.speedup.p if line.gated and line.speedup else None,
        ),
        Column("flag", lambda line: line.flag),
    ]


def config_lines(a: Configuration, b: Configuration, label: str, gate_phases: bool) -> list[Line]:
    """A line per phase both sides time, and the step, of a matched configuration, its flag left for the family's test.

    A step of the user's own may time other phases in B than in A: those have nothing to compare.
    """
    phases = [*(p for p in a.first.summary.phases if p in b.first.summary.phases), "step"]
    runs = f"{len(a.runs)}/{len(b.runs)}"
    lines = []
    for phase in phases:
        ratio = speedup(b.sample((f"{phase}_ms",)), a.sample((f"{phase}_ms",)))
        ms = [c.median(phase) for c in (a, b)]
        lines.append(Line(label, phase, runs, *ms, ratio, gated=phase == "step" or gate_phases, repro=b.repro))
    operators = tuple(largest(a.runs, b.runs)) if explained(a.runs) and explained(b.runs) else ()
    return [*lines[:-1], dataclasses.replace(lines[-1], operators=operators)]


def unconfirmed(line: Line) -> bool:
    """Whether a flagged change is one that its runs could not confirm nor rule out."""
    return line.flag.startswith(UNDETERMINED_FLAG)


def possible(line: Line) -> str:
    """Why a flagged change is possible: '1 run', 'shared host'...

    It is '' where the change is confirmed.
    """
    word, _, why = line.flag.removesuffix(")").partition(" (")
    return why if word.lower().startswith("possible") else ""


def kind(line: Line, threshold: float) -> str:
    """What a configuration's step did: slower or faster (flagged), the same, or undetermined."""
    if line.flag and not unconfirmed(line):
        return SLOWER if "REGRESSION" in line.flag else FASTER
    speedup = line.speedup
    within = speedup.replicated and slow_end(threshold) <= speedup.low and speedup.high <= 1 + threshold
    return THE_SAME if within else UNDETERMINED  # one run a side, or a NaN interval, decides nothing


def kinds(steps: list[Line], threshold: float) -> dict[str, int]:
    """How many configurations' steps did each: slower, faster, the same, undetermined."""
    found = [kind(line, threshold) for line in steps]
    return {k: found.count(k) for k in (SLOWER, FASTER, THE_SAME, UNDETERMINED)}


def counted_kinds(steps: list[Line], threshold: float, strong: Callable[[str], str] = str) -> str:
    """'0 slower, 0 faster, 2 same, 4 undetermined, of 6 configurations compared by their step (...)'.

    A change flagged possible is counted so, with why.
    That is one run on a side, a shared host, or a moved machine.
    `strong` sets a count of changes apart (a comment's bold).
    """
    counts = kinds(steps, threshold)

    def count(way: str, n: int) -> str:
        if way == UNDETERMINED and 0 < (flagged := sum(map(unconfirmed, steps))) < n:  # the rest: no slowdown seen
            return f"{n} {way} ({flagged} of them flagged {UNDETERMINED_FLAG}: a slowdown not ruled out)"
        if way not in (SLOWER, FASTER) or not n:
            return f"{n} {way}"
        why = [possible(line) for line in steps if kind(line, threshold) == way and possible(line)]
        reasons = ", ".join(dict.fromkeys(r.replace("1 run", "one run on a side") for w in why for r in w.split(", ")))
        return strong(f"{n} {way}") + (f" ({len(why)} of them possible: {reasons})" if why else "")

    said = ", ".join(count(way, n) for way, n in counts.items())
    compared = counted(sum(counts.values()), "configuration")
    return (
        f"{said}, of {compared} compared by their step ({SLOWER} or {FASTER}: flagged, "
        f"beyond -+{percent(threshold)} and significant with the family held to 5%, one-run lines a family apart; "
        f"{THE_SAME}: its interval within -+{percent(threshold)}; {UNDETERMINED}: neither)"
    )


def flagged(lines: list[Line], threshold: float) -> list[Line]:
    """The lines with their flags.

    The gated ones are tested as families (Holm).
    Lines across runs are tested apart from those within one run.
    Within-run p-values are blind to the difference between processes and would loosen the others'.
    """
    significant = {}
    for replicated in (True, False):
        gated = [i for i, line in enumerate(lines) if line.gated and line.speedup.replicated == replicated]
        significant |= dict(zip(gated, holm([lines[i].speedup.p for i in gated]), strict=True))
    return [
        dataclasses.replace(line, flag=flag(line.speedup, significant[i], threshold)) if i in significant else line
        for i, line in enumerate(lines)
    ]


def suite(matched: list[tuple[Configuration, Configuration]], shared: bool = False) -> str:
    """The geometric mean of the step's speed-ups over every matched configuration, with rounds as the unit.

    Where the sweeps' hosts differed (`shared`: their others' CPU or steal), the mean moves with them, and says so.
    """
    mean = suite_speedup([(ca.sample(), cb.sample()) for ca, cb in matched])
    if mean is None:
        which = "the configuration has" if len(matched) == 1 else f"the {len(matched)} configurations share"
        return (
            f"suite: no geometric mean with an interval: {which} fewer than 2 rounds on a side with a time above "
            "0 ms in each (repeats=N gives them more; resume runs those not done)"
        )
    host = "; their hosts differ (above), and it moves with them" if shared else ""
    if len(matched) == 1:  # a mean of one is its configuration's speed-up
        runs = f"{mean.runs[0]} runs of A, {mean.runs[1]} of B"
        return f"suite: B's step speed-up over A's, 1 configuration: {mean} ({runs}){host}"
    return (
        f"suite: B's geometric-mean step speed-up over A's, {len(matched)} configurations: {mean} across rounds "
        f"({mean.runs[0]} of A, {mean.runs[1]} of B: a round's configurations move together, so each round counts "
        f"once){host}"
    )


def compare(
    sweep_a: Path,
    sweep_b: Path,
    threshold: float,
    loss_tolerance: float,
    gate_phases: bool = False,
    max_unmatched: float = 0.0,
    fail_undetermined: bool = False,
) -> tuple[View, int]:
    """The comparison as a view, and its exit status (exit_status)."""
    loaded = [load_sweep(d) for d in (sweep_a, sweep_b)]
    done = [[r for r in runs if r.state == DONE and r.summary] for runs in loaded]
    if not done[0] or not done[1]:
        raise ValueError(f"both sweeps need done runs: {sweep_a} has {len(done[0])}, {sweep_b} has {len(done[1])}")
    unfinished = ([r for r in loaded[0] if r.state != DONE], [r for r in loaded[1] if r.state != DONE])
    names = (sweep_a, sweep_b)
    return compare_runs(
        *done, threshold, loss_tolerance, gate_phases, names, max_unmatched, unfinished, fail_undetermined
    )


def compare_runs(
    a: list[RunRecord],
    b: list[RunRecord],
    threshold: float,
    loss_tolerance: float,
    gate_phases: bool = False,
    names: tuple[Path, Path] = (Path("A"), Path("B")),
    max_unmatched: float = 0.0,
    unfinished: tuple[list[RunRecord], list[RunRecord]] = ([], []),
    fail_undetermined: bool = False,
) -> tuple[View, int]:
    """compare, of two sweeps' done runs.

    `max_unmatched` is the share of A's configurations that may go without a match in B before the gate fails.
    `unfinished` holds each sweep's runs that are not done: a configuration of one without a match may be one of them.
    `fail_undetermined` adds EXIT_UNDETERMINED where a slowdown is UNDETERMINED.
    """
    of = identity_of(a + b)
    found = pairs(a, b, of)
    above = [f"A: {names[0]} ({len(a)} done runs)  B: {names[1]} ({len(b)} done runs)"]
    if found.differ or found.matched:  # where nothing matched, what parts them says where they differ
        above.append(f"they differ in: {changes(found.differ) or 'nothing'}")
    if measured := measured_differently(found.matched):
        above.append(measured)
    if work := other_work(found.differ):
        above.append(work)
    if code_differ := differences(a, b, of=code_of):
        above.append(f"their code differs in: {changes(code_differ)}{files_changed(code_differ, names)}")
    if machines_differ := machine_differences(a, b):
        above.append(f"their machines differ in: {changes(machines_differ)}")
    elif machine := machines.shared(a, b):
        above.append(f"both measured on: {machine}")
    if hosts_differ := host_flags.differ(a, b):
        above.append(f"their hosts differ in: {hosts_differ}")
    elif blind := host_flags.unread(a, b):
        above.append(blind)
    if speed := machine_speed.compared(a, b):
        above.append(speed)
    if not found.matched:
        return nothing_matched(above, a, b, found, of), EXIT_NOTHING_COMPARED
    matched = found.matched
    every_a, every_b = [ca for ca, _ in matched] + found.only_a, [cb for _, cb in matched] + found.only_b
    names_a = labels(every_a)  # by what varies among all of A's, matched or not
    lines = [line for ca, cb in matched for line in config_lines(ca, cb, names_a[ca.key], gate_phases)]
    lines = flagged(lines, threshold)
    losses = [
        Line(names_a[ca.key], "final loss", f"{len(ca.runs)}/{len(cb.runs)}", flag=changed)
        for ca, cb in matched
        if (changed := nonfinite(ca, cb) or loss_changed(ca, cb, loss_tolerance))
    ]
    side = host_flags.shared_side(a, b)
    held = quiet_runs_show(matched, names_a, lines, side, threshold) if hosts_differ else {}
    if hosts_differ:  # the load slowed one side; not the changes the quiet runs show too
        lines = [
            line if (line.configuration, line.phase) in held else as_possible(line, side, SHARED_HOST) for line in lines
        ]
    machine = (machine_speed.moved(a, b) or [None])[0]
    if machine is not None:
        slowed = "B" if machine.value < 1 else "A"
        lines = [as_possible(line, slowed, MACHINE_MOVED) if meets(line, machine) else line for line in lines]
    # the same settings, code, machine and lengths: what moved every configuration is no change of theirs
    same = not (found.differ or code_differ or machines_differ or measured) and same_known_code(a, b)
    together = moved_together(matched, lines, names_a) if machine is None and same else None
    if together is not None:
        slowed = "B" if together.value < 1 else "A"
        lines = [as_possible(line, slowed, MOVED_TOGETHER) if meets(line, together) else line for line in lines]
    suspect = [line for line in lines if (line.configuration, line.phase) not in held]
    shared = shared_host(hosts_differ, suspect, side, bool(held)) + quiet_hold(held)
    eager = [
        Line(names_a[ca.key], "compiled graphs", f"{len(ca.runs)}/{len(cb.runs)}", flag=NOT_COMPILED_IN_B)
        for ca, cb in matched
        if any(ran_eagerly(run) for run in cb.runs) and not any(ran_eagerly(run) for run in ca.runs)
    ]
    shown = lines + losses + eager
    unmatched = beyond(len(found.only_a), len(every_a), max_unmatched)
    gate = "the step and each phase" if gate_phases else "the step (phases shown, not gated: --gate-phases)"
    notes = [
        counted_kinds([line for line in lines if line.phase == "step"], threshold),
        f"{len(matched)} of A's {counted(len(every_a), 'configuration')} matched in B, "
        f"{unmatched_share(len(found.only_a), len(every_a), max_unmatched)}; {len(found.only_b)} of B's "
        f"{len(every_b)} without a match in A; gated: {gate}, each change flagged when beyond {percent(threshold)} "
        f"and significant with the family of {sum(x.gated for x in lines)} held to 5% (Holm; one-run lines a family "
        f"apart); a slowdown beyond it that the runs do not rule out, UNDETERMINED ({undetermined_way(bool(shared))}; "
        "--fail-undetermined fails the gate on it, as a shared host does); loss "
        f"tolerance {percent(loss_tolerance)}; speed-up = time of A / of B (below 1: B is slower), each "
        "run counting once by its median",
        suite(matched, bool(hosts_differ)),
    ]
    sides = (
        ("A", found.only_a, every_a, b, unfinished[1], names[1]),
        ("B", found.only_b, every_b, a, unfinished[0], names[0]),
    )
    flags = (
        shared
        + machine_moved(lines, machine)
        + moved_alike(lines, together)
        + [
            (f"{UNMATCHED}: " if unmatched and side == "A" else "")
            + without_match(configs, every, other, found.differ, side, Unfinished(left, folder), of)
            for side, configs, every, other, left, folder in sides
            if configs
        ]
    )
    matched_labels = {ca.key: names_a[ca.key] for ca, _ in matched}
    flags += [
        line
        for side, left, folder in (("A", unfinished[0], names[0]), ("B", unfinished[1], names[1]))
        if (line := short_of(side, left, folder, matched_labels, found.differ, of))
    ]
    status = exit_status(shown) + (EXIT_UNMATCHED if unmatched else 0)
    if timing(status) == 0 and any(beside_a_load(line, side) for line in suspect):
        status += EXIT_POSSIBLE  # a neighbour may have hidden the slowdown that runs beside it leave undecided
    if not fail_undetermined:
        status &= ~EXIT_UNDETERMINED
    return View("Comparison", above, columns(threshold), shown, notes=notes, flags=flags), status


def beside_a_load(line: Line, shared: str | None) -> bool:
    """Whether a line is UNDETERMINED where one sweep's runs, by their median, shared their host and the other's not.

    More runs beside that load would not decide it, and the load may hide a slowdown as well as make one.
    A line without a time to compare is no load's doing.
    """
    return shared is not None and unconfirmed(line) and math.isfinite(line.speedup.value)


def shared_host(hosts_differ: str, lines: list[Line], shared: str | None, others: bool = False) -> list[str]:
    """What their hosts' difference (`hosts_differ`) means for the flagged lines; [] where the hosts do not differ.

    One sweep's host was shared (`shared`: "A", "B", or None where either may have been).
    A load slows the side it is on.
    More runs beside the same load would measure it again: an UNDETERMINED slowdown is decided by runs alone.
    `others`: flagged lines of the same kinds that the quiet runs show (quiet_hold) are said apart.
    """
    flags = [line.flag for line in lines if line.flag]
    if not hosts_differ or not flags:
        return []
    which = f"{shared}'s sweep" if shared else "the sweep whose host was shared"
    again = f"run {which} again with its host to itself"
    said = []
    if any(beside_a_load(line, shared) for line in lines):
        said.append(
            f"{SHARED_HOST}: their hosts differ (above), and more runs beside that load would measure it again, so "
            f"the gate does not pass the lines flagged {UNDETERMINED_FLAG}, as a possible regression: {again}, then "
            "compare"
        )
    elif any(flag.startswith(UNDETERMINED_FLAG) for flag in flags):
        said.append(
            f"{SHARED_HOST}: their hosts differ (above), and more runs beside that load would measure it again: "
            f"{again}, then compare"
        )
    if suspect := explicable(flags, shared):
        which = "other lines" if others else "lines"
        said.append(
            f"{SHARED_HOST}: their hosts differ (above), so the {which} flagged {', '.join(suspect)} may show that "
            f"load, not the code: {again} before trusting them"
        )
    return said


def as_possible(line: Line, slowed: str | None, cause: str) -> Line:
    """The line, where `cause` could explain its change, flagged possible: 'POSSIBLE REGRESSION (shared host)'.

    A cause slows one side: `slowed` is "A", "B", or None where either.
    """
    if not line.flag or line.flag.startswith(UNDETERMINED_FLAG) or not explicable([line.flag], slowed):
        return line
    word = "POSSIBLE REGRESSION" if "REGRESSION" in line.flag else "possible improvement"
    return dataclasses.replace(line, flag=f"{word} ({', '.join(filter(None, [possible(line), cause.lower()]))})")


def meets(line: Line, machine: Speedup) -> bool:
    """Whether a flagged line's speed-up interval meets the machine's.

    A change many times the machine's is the code's.
    """
    return bool(line.flag) and line.speedup.low <= machine.high and machine.low <= line.speedup.high


def quiet_runs_show(
    matched: list[tuple[Configuration, Configuration]],
    names: dict[tuple, str],
    lines: list[Line],
    shared: str | None,
    threshold: float,
) -> dict[tuple[str, str], tuple[int, int]]:
    """The flagged changes a load could explain that the runs no neighbour or steal took show too.

    Those runs number two or more a side.
    Their interval lies wholly beyond the threshold, on the flagged side.
    Each change is keyed by configuration and phase, with its quiet runs' counts.
    """
    suspect = set(explicable([line.flag for line in lines if line.flag], shared))
    flagged_lines = {(line.configuration, line.phase): line for line in lines if line.flag.split(" (")[0] in suspect}
    shown = {}
    for ca, cb in matched:
        quiet = [Configuration(c.key, [run for run in c.runs if host_flags.quiet(run)]) for c in (ca, cb)]
        for (label, phase), line in flagged_lines.items():
            if label != names[ca.key] or min(len(c.runs) for c in quiet) < 2:
                continue
            ratio = speedup(quiet[1].sample((f"{phase}_ms",)), quiet[0].sample((f"{phase}_ms",)))
            beyond = ratio.high < slow_end(threshold) if line.speedup.value < 1 else ratio.low > 1 + threshold
            if ratio.replicated and math.isfinite(ratio.p) and beyond:
                shown[label, phase] = (len(quiet[0].runs), len(quiet[1].runs))
    return shown


def quiet_hold(shown: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
    """Where the quiet runs show flagged changes too.

    The load seen does not explain those.
    """
    if not shown:
        return []
    named = "; ".join(f"{label} {phase} (A {a}, B {b} runs)" for (label, phase), (a, b) in shown.items())
    return [
        f"{SHARED_HOST}: their hosts differ (above), but the runs that no neighbour or steal took show these "
        f"changes beyond the threshold too: {named}; the load seen does not explain them"
    ]


def same_known_code(a: list[RunRecord], b: list[RunRecord]) -> bool:
    """Whether every run of both sweeps recorded its code, and all recorded the same: old records say nothing."""
    codes = {repr(code_of(run)) if run.status.code else None for run in [*a, *b]}
    return len(codes) == 1 and None not in codes


def moved_together(
    matched: list[tuple[Configuration, Configuration]], lines: list[Line], names: dict[tuple, str]
) -> Speedup | None:
    """B's speed-up over A common to every configuration's step, where each moved with the others; else None.

    A machine, or a moment on it, moves every configuration alike: a sweep's spread between its processes, run
    minutes apart, holds none of it.
    It needs two or more configurations and a suite speed-up whose interval excludes 1.
    A step flagged a change moved its own way.
    A step not flagged moved with the others where its interval holds their suite speed-up, without it.
    Any other step is a control: it shows that the others' change is real.
    compare asks it only of sweeps of the same settings and code, where no change of theirs can have moved them.
    """
    samples = [(ca.sample(), cb.sample()) for ca, cb in matched]
    common = suite_speedup(samples)
    if len(matched) < 2 or common is None or common.low <= 1 <= common.high:
        return None
    steps = {line.configuration: line for line in lines if line.phase == "step"}

    def moved_with(index: int, line: Line) -> bool:
        if line.flag and not unconfirmed(line):
            return ("REGRESSION" in line.flag) == (common.value < 1)
        others = suite_speedup(samples[:index] + samples[index + 1 :])
        return others is not None and line.speedup.low <= others.value <= line.speedup.high

    moved = [moved_with(i, steps[names[ca.key]]) for i, (ca, _) in enumerate(matched) if names[ca.key] in steps]
    return common if moved and all(moved) else None


def machine_moved(lines: list[Line], machine: Speedup | None) -> list[str]:
    """Where the machine ran the fixed workload slower or faster in one sweep: the flagged lines that may show it.

    `machine` is B's speed-up on that workload.
    Those lines' intervals meet the machine's (`meets`).
    """
    return moved_flag(lines, machine, MACHINE_MOVED, "the machine ran slower in {side} (above)")


def moved_alike(lines: list[Line], common: Speedup | None) -> list[str]:
    """Where every configuration moved by one factor (`moved_together`): the flagged lines that may show it."""
    return moved_flag(
        lines,
        common,
        MOVED_TOGETHER,
        f"every configuration's step fits one move, slower in {{side}}, by the suite's {common}, with the same code "
        "and settings: as a machine, or a moment on it, moves them",
    )


def moved_flag(lines: list[Line], moved: Speedup | None, name: str, how: str) -> list[str]:
    """The flag of a move that slowed one sweep's every line (`how`, with {side} for that sweep), naming the lines
    flagged that may show it; [] where none does."""
    if moved is None:
        return []
    near = [line.flag for line in lines if meets(line, moved)]
    slower_in = "B" if moved.value < 1 else "A"
    suspect = explicable(near, slower_in)
    if slower_in == "B" and any(flag.startswith(UNDETERMINED_FLAG) for flag in near):
        suspect.append(UNDETERMINED_FLAG)  # B maybe slower: more runs on that machine would not decide it
    if not suspect:
        return []
    return [
        f"{name}: {how.format(side=slower_in)}, so the lines flagged {', '.join(suspect)} may show the machine, not "
        "the code: run the sweeps again one after the other, then compare"
    ]


def explicable(flags: list[str], slowed: str | None) -> list[str]:
    """The verdicts among `flags` that a cause which slowed one side (`slowed`: "A", "B", None for either) could
    explain: B's slowdowns where it slowed B, B's speed-ups where it slowed A. Each once, UNDETERMINED aside."""
    decided = dict.fromkeys(flag.split(" (")[0] for flag in flags if not flag.startswith(UNDETERMINED_FLAG))
    return [name for name in decided if slowed is None or ("REGRESSION" in name) == (slowed == "B")]


def undetermined_way(shared: bool) -> str:
    """What decides an UNDETERMINED slowdown: more runs, or runs with their hosts to themselves."""
    return f"runs with their hosts to themselves decide it: {SHARED_HOST}" if shared else "more runs decide it"


class Unfinished(NamedTuple):
    """The other sweep's runs that are not done, and its folder."""

    runs: list[RunRecord]
    folder: Path


def without_match(
    configs: list[Configuration],
    every: list[Configuration],
    other: list[RunRecord],
    differ: dict,
    side: str,
    unfinished: Unfinished,
    of: Identity = identity,
) -> str:
    """A line naming one side's configurations without a match in the other, and how to match them.

    Those the other sweep planned and did not finish are run by its resume.
    The overrides that would launch the others follow.
    """
    theirs = "B" if side == "A" else "A"
    said = (
        f"{len(configs)} of {side}'s {counted(len(every), 'configuration')} without a match in {theirs}: "
        f"{', '.join(labels(every)[c.key] for c in configs)}"
    )
    planned = states_by_key(unfinished.runs, differ, of)
    left = [c for c in configs if c.key in planned]
    if left:
        named = ", ".join(labels(every)[c.key] for c in left)
        states = {state for c in left for state in planned[c.key]}
        said += f"; {theirs} planned {named} and has no done run of them ({', '.join(sorted(states))}): " + (
            finishing(states, unfinished.folder)
        )
    rest = [c for c in configs if c.key not in planned]
    how = lacking([run for config in rest for run in config.runs], other, differ, of) if rest else []
    if not how:
        return said
    return said + f"; to match {'the others' if left else 'them'}, {launch(theirs, how)}"


def short_of(
    side: str, left: list[RunRecord], folder: Path, matched: dict[tuple, str], differ: dict, of: Identity = identity
) -> str:
    """A line naming one side's unfinished runs of compared configurations.

    It is '' where there are none.
    A run that failed in B may be what B's code does: its line starts FAILED IN B.
    Its configuration is compared on its done runs all the same.
    """
    short = {matched[key]: states for key, states in states_by_key(left, differ, of).items() if key in matched}
    if not short:
        return ""
    each = ", ".join(f"{label} ({', '.join(sorted(set(states)))})" for label, states in short.items())
    count = counted(sum(map(len, short.values())), "run")
    every = {state for states in short.values() for state in states}
    failed = f"{FAILED_IN_B}: " if side == "B" and FAILED in every else ""
    return f"{failed}{side} has {count} {NOT_DONE}: {each}; " + finishing(every, folder)


def states_by_key(runs: list[RunRecord], differ: dict, of: Identity = identity) -> dict[tuple, list[str]]:
    """Each configuration's unfinished runs' states."""
    found: dict[tuple, list[str]] = {}
    for run in runs:
        found.setdefault(matched_on(run, differ, of), []).append(run.state)
    return found


def finishing(states: set[str], folder: Path) -> str:
    """How to finish runs in these states.

    A resume leaves running runs to their jobs: status follows them.
    """
    if RUNNING in states:
        return f"`perfsweep status {folder}` follows them"
    return f"`perfsweep resume {folder}` runs them"


def nothing_matched(
    above: list[str], a: list[RunRecord], b: list[RunRecord], found: Matching, of: Identity = identity
) -> View:
    """The view where no configuration matched: what parts the sweeps, and how to match them."""
    apart = parted(a, b, found.differ, ("A", "B"), of)
    if apart:
        flags = [f"what parts them: {'; '.join(apart)}"]
    else:
        listed = [", ".join(labels(configs).values()) for configs in (found.only_a, found.only_b)]
        flags = [f"their settings take the same values in other combinations: A's {listed[0]}; B's {listed[1]}"]
    hows = [
        launch(side, how)
        for side, how in (("B", lacking(a, b, found.differ, of)), ("A", lacking(b, a, found.differ, of)))
        if how
    ]
    flags += [f"to match them, {'; or '.join(hows)}"] if hows else []
    empty = "no configuration of A matched one of B: nothing was compared"
    return View("Comparison", above, columns(math.nan), [], flags=flags, empty=empty)


def exit_status(lines: list[Line]) -> int:
    """What the flags say, as the module's table of exit statuses gives it.

    The step time's part is 1 for a REGRESSION, else 3 for a POSSIBLE REGRESSION or a configuration NOT COMPILED
    IN B, else 0.
    A loss flag adds EXIT_LOSS; an UNDETERMINED slowdown adds EXIT_UNDETERMINED.
    Configurations without a match (EXIT_UNMATCHED) are compare_runs' to add.
    """
    flags = [line.flag for line in lines]
    confirmed = any(f.startswith("REGRESSION") for f in flags)
    possible = any(f.startswith(("POSSIBLE", NOT_COMPILED_IN_B)) for f in flags)
    slowdown = EXIT_REGRESSION if confirmed else EXIT_POSSIBLE if possible else 0
    loss = EXIT_LOSS if any(f.startswith(LOSS_FLAGS) for f in flags) else 0
    return slowdown + loss + (EXIT_UNDETERMINED if any(f.startswith(UNDETERMINED_FLAG) for f in flags) else 0)


def timing(status: int) -> int:
    """The step time's confirmed or possible part of an exit status: 0, EXIT_REGRESSION or EXIT_POSSIBLE."""
    return status & ~(EXIT_LOSS | EXIT_UNMATCHED | EXIT_UNDETERMINED)
