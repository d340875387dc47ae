"""Why a configuration is slower: each decided difference, accounted for by operator (explain=true's records).

    perfsweep explain SWEEP_DIR

A sweep run with explain=true has an ops record per run (train/op_breakdown.py): after its measured window, each
operator's calls and self time per step, each phase's time outside operators and memory, the torch calls that went
through a tensor subclass's `__torch_function__`, and the calls that hand a value to the host.
For each configuration whose comparison with its baseline is decided (slower or faster, as the table says), the
view ranks the differences between the two sides' records:

- operators added, removed, or called more or fewer times per step, with their self time;
- each phase's time outside operators: Python between them, where a subclass's dispatch runs.

A side's figure is the median over its runs (processes) of each run's per-step figure.
A time difference is `runs apart` where one side's runs all lie above the other's.
With few runs that comes by chance in some unchanged rows.
The notes say how often.
Count differences are shown even where their runs overlap.
On a CPU each added operator costs little, and the count is the mechanism.
The account compares the measured step-time difference, the profiled step's, and the part the rows shown make up.
A side's profiled step is the sum of its rows' medians.
A comparison that is not decided is said to be so, and nothing is ranked: its differences would be noise.
"""

import dataclasses
import math
import statistics
from pathlib import Path

from perfsweep import records
from perfsweep.analysis import machines
from perfsweep.analysis.groups import Configuration, Versus, configurations, labels, speedups
from perfsweep.analysis.kernel_names import short_names
from perfsweep.analysis.render import Column, View, figure
from perfsweep.analysis.statistics.rounds import rule_of
from perfsweep.analysis.statistics.speedup import Speedup
from perfsweep.analysis.statistics.verdict import FASTER, SLOWER, THE_SAME
from perfsweep.records import DONE, Ops, OpsFailed, RunRecord, Unreadable

TOP = 10  # rows ranked by time, and as many more by count
OUTSIDE = "outside operators"  # a phase's time that no operator accounts for
APART = "runs apart"  # every run of one side above every run of the other


@dataclasses.dataclass
class Difference:
    """One operator's, or one phase's time outside operators, on each side: per step, one value per run."""

    name: str
    base_calls: list[float]
    calls: list[float]
    base_ms: list[float]
    ms: list[float]

    @property
    def kind(self) -> str:
        if self.name.startswith(OUTSIDE):
            return "Python between operators"
        if not any(self.base_calls):
            return "added"
        if not any(self.calls):
            return "removed"
        change = _median(self.calls) - _median(self.base_calls)
        return "more calls" if change > 0 else "fewer calls" if change < 0 else "same calls"

    @property
    def delta_ms(self) -> float:
        return _median(self.ms) - _median(self.base_ms)

    @property
    def delta_calls(self) -> float:
        return _median(self.calls) - _median(self.base_calls)

    @property
    def noise(self) -> str:
        if len(self.ms) < 2 or len(self.base_ms) < 2:
            return "one run"
        apart = min(self.ms) > max(self.base_ms) or max(self.ms) < min(self.base_ms)
        return APART if apart else "runs overlap"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def ops_of(run: RunRecord) -> Ops | None:
    """The run's ops record; None where it has none, it cannot be read, or its profiling failed."""
    record = records.read_ops(run.path)
    return record if isinstance(record, Ops) else None


def explained(runs: list[RunRecord]) -> bool:
    """Whether any run of the sweep has an ops record (explain=true)."""
    return any(run.path is not None and (run.path / records.OPS).is_file() for run in runs)


def differences(base: list[Ops], side: list[Ops]) -> list[Difference]:
    """Every operator either side ran, and each phase's time outside operators, as Differences."""
    key = "self_device_us" if side[0].device == "cuda" else "self_cpu_us"
    names = sorted({name for record in (*base, *side) for name in record.operators})

    def per_run(found: list[Ops], name: str, field: str) -> list[float]:
        scale = 1 if field == "calls" else 1e3  # us -> ms
        return [getattr(record.operators[name], field) / scale if name in record.operators else 0.0 for record in found]

    made = [
        Difference(*(name, *(per_run(found, name, "calls") for found in (base, side))),
                   *(per_run(found, name, key) for found in (base, side)))
        for name in names
    ]  # fmt: skip
    if side[0].device == "cuda":  # a host time beside device times; and backward runs on autograd's own thread
        return made
    for phase in side[0].phases:
        outside = [
            [r.phases[phase].outside_operators_us / 1e3 if phase in r.phases else 0.0 for r in s] for s in (base, side)
        ]
        made.append(Difference(f"{OUTSIDE} ({phase})", [0.0] * len(base), [0.0] * len(side), *outside))
    return made


def largest(base_runs: list[RunRecord], side_runs: list[RunRecord], top: int = 3) -> list[str]:
    """The `top` operator differences by time from the base runs to the side's, a line each.

    [] where either side has no ops record (a sweep run without explain=true).
    """
    base, side = ([ops for run in runs if (ops := ops_of(run))] for runs in (base_runs, side_runs))
    if not base or not side:
        return []
    made = [d for d in sorted(differences(base, side), key=lambda d: -abs(d.delta_ms))[:top] if d.delta_ms]
    short = short_names([d.name for d in made])
    return [f"{short[d.name]}: {d.delta_ms:+.3g} ms a step ({d.kind}, calls {_calls(d)}, {d.noise})" for d in made]


def ranked(made: list[Difference]) -> list[Difference]:
    """The TOP differences by time, then up to TOP more whose call counts differ (the mechanism)."""
    by_time = sorted(made, key=lambda d: -abs(d.delta_ms))
    shown = [d for d in by_time[:TOP] if d.delta_ms or d.delta_calls]
    counted = sorted((d for d in made if d.delta_calls and d not in shown), key=lambda d: -abs(d.delta_calls))
    return shown + counted[:TOP]


def _per_step(found: list[Ops], field: str) -> str:
    """A per-step count of the records, by name: `name N` each, or `none`; or why the records have none."""
    if any(getattr(record, field) is None for record in found):
        return "not counted under torch.compile"
    totals: dict[str, list[float]] = {}
    for record in found:
        for name, count in getattr(record, field).items():
            totals.setdefault(name, []).append(count)
    shown = [f"{name} {_median(counts + [0] * (len(found) - len(counts))):g}" for name, counts in totals.items()]
    return ", ".join(shown) or "none"


def _phases(found: list[Ops], field: str) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for record in found:
        for phase, figures in record.phases.items():
            if (value := getattr(figures, field)) is not None:
                values.setdefault(phase, []).append(value)
    return {phase: _median(v) for phase, v in values.items()}


def _split(made: list[Difference], side: bool) -> str:
    """A side's profiled step: its host time, and the share of it outside operators (Python, dispatch).

    It sums each row's median, as the profiled difference does.
    """
    times = {d.name: _median(d.ms if side else d.base_ms) for d in made}
    total = sum(times.values())
    share = sum(t for name, t in times.items() if name.startswith(OUTSIDE)) / total if total else 0.0
    return f"{figure(total)} ms ({share:.0%} outside operators)"


def chance_apart(runs: int, base_runs: int) -> float:
    """The chance that one side's runs all lie above the other's, where neither differs.

    Each of the C(n + m, n) orders of the runs is then equally likely.
    Two of them lie apart.
    """
    return 2 / math.comb(runs + base_runs, runs)


def memory_line(base: list[Ops], side: list[Ops], order: tuple[str, ...]) -> str | None:
    """Each phase's memory on each side: peak allocated on CUDA, the profiler's net allocation on a CPU."""
    for field, what in (("peak_allocated_mib", "peak allocated"), ("net_allocated_mib", "allocated net (profiler)")):
        ours, theirs = _phases(side, field), _phases(base, field)
        if ours:
            phases = sorted(ours, key=lambda p: order.index(p) if p in order else len(order))
            shown = ", ".join(f"{p} {figure(theirs.get(p))} -> {figure(ours[p])}" for p in phases)
            return f"memory by phase, MiB {what}, baseline -> this: {shown}"
    return None


def _dynamo(found: list[Ops]) -> str:
    counts = [r.dynamo for r in found if r.dynamo]
    if not counts:
        return "nothing compiled"
    return f"{counts[0].graph_breaks} graph breaks, {counts[0].unique_graphs} graphs"


SHOWN = 0.4  # the share of the measured difference below which the profiled steps do not show it
INFLATED = 2.0  # the multiple of the measured difference above which the profiler's own cost makes the difference


def measured_ms(config: Configuration, base: Configuration, speedup: Speedup | None) -> tuple[float, str]:
    """The step time the configuration adds to its baseline's, as the table's speed-up has it (ms a step), and how.

    Where the sides shared processes, the speed-up is the processes' paired ratio, not the ratio of their medians.
    So the difference of the table's step times may differ from it.
    """
    base_ms = base.median("step") or 0.0
    if speedup is not None and math.isfinite(speedup.value) and speedup.value > 0:
        how = f"the baseline's {figure(base_ms)} ms divided by the table's speed-up, {speedup}"
        return base_ms / speedup.value - base_ms, how
    return (config.median("step") or 0.0) - base_ms, "the table's step times"


def account(
    config: Configuration,
    base: Configuration,
    made: list[Difference],
    shown: list[Difference],
    sides,
    speedup: Speedup | None = None,
) -> list[str]:
    """The lines above a comparison's rows: what the rows account for, and what else the records count."""
    base_ops, side_ops = sides
    measured, how = measured_ms(config, base, speedup)
    profiled, rows = sum(d.delta_ms for d in made), sum(d.delta_ms for d in shown)
    apart = sum(d.delta_ms for d in shown if d.noise == APART)
    cuda = side_ops[0].device == "cuda"
    why = (
        "a difference on the host (Python, kernel launches) does not show in the device's time, and too few profiled "
        "steps can hide one"
        if cuda
        else "the profiler's own cost, or too few profiled steps, can hide it"
    )
    lines = [
        f"the profiled steps do not show the measured difference: {measured:+.3g} ms/step measured, {profiled:+.3g} "
        f"in the profiled steps ({'device' if cuda else 'host'} time); the rows account for the profile, not for the "
        f"table's difference: {why}"
    ] * (measured * profiled <= 0 or abs(profiled) < SHOWN * abs(measured))
    lines += [
        f"the profiled steps show {profiled / measured:.2g} times the measured difference ({profiled:+.3g} ms/step "
        f"profiled, {measured:+.3g} measured): the profiler's own cost for each operator call inflates code that "
        "makes many small calls (a Python loop), so the rows' sizes are the profile's and their order is a guide"
    ] * (measured * profiled > 0 and abs(profiled) > INFLATED * abs(measured))
    lines += [
        f"step time: {measured:+.3g} ms/step measured ({how}); {profiled:+.3g} ms/step in the profiled steps "
        f"({'kernels and copies, device time' if cuda else 'host time'}"
        + (f", {profiled / measured:.0%} of the measured" if measured else "")
        + f"); the rows below account for {rows:+.3g} "
        f"ms/step of it ({apart:+.3g} in rows whose runs lie apart), {profiled - rows:+.3g} ms/step left unexplained "
        "by them",
        f"torch calls through a subclass's __torch_function__, per step: {_per_step(side_ops, 'subclass_calls')} "
        f"(baseline: {_per_step(base_ops, 'subclass_calls')})",
        f"calls that hand a value to the host (a host-device sync each on a GPU), per step: "
        f"{_per_step(side_ops, 'host_reads')} (baseline: {_per_step(base_ops, 'host_reads')})",
    ]
    if not cuda:
        lines.append(
            "the profiled step's host time (each row's median, summed), baseline -> this: "
            + " -> ".join(_split(made, side) for side in (False, True))
        )
    if memory := memory_line(base_ops, side_ops, config.first.summary.phases):
        lines.append(memory)
    if any(r.dynamo for r in (*base_ops, *side_ops)):
        lines.append(
            f"torch.compile (Dynamo's counters; a paired process's are every side's together): {_dynamo(side_ops)} "
            f"(baseline: {_dynamo(base_ops)})"
        )
    return lines


def _calls(d: Difference) -> str:
    return f"{_median(d.base_calls):g} -> {_median(d.calls):g}"


def columns(cuda: bool, shown: list[Difference]) -> list[Column]:
    """The rows' columns; the time is the device's on CUDA (kernels, copies), the host's on a CPU.

    A CUDA kernel is named by its short name (analysis/kernel_names.py)."""
    time = "self device ms/step" if cuda else "self ms/step"
    short = short_names([d.name for d in shown])
    return [
        Column("difference", lambda d: short[d.name]),
        Column("kind", lambda d: d.kind),
        Column("calls/step (baseline -> this)", lambda d: "-" if d.name.startswith(OUTSIDE) else _calls(d)),
        Column(f"{time} (baseline -> this)", lambda d: f"{figure(_median(d.base_ms))} -> {figure(_median(d.ms))}"),
        Column("change ms/step", lambda d: f"{d.delta_ms:+.3g}"),
        Column("runs", lambda d: d.noise),
    ]


def failures(runs: list[RunRecord]) -> list[str]:
    """Each run whose profiled window failed, with the error its ops record holds, or whose record is unreadable."""
    found = []
    for run in runs:
        record = records.read_ops(run.path)
        if isinstance(record, OpsFailed):
            found.append(f"{run.name}: its profiled window failed: {record.error}")
        elif isinstance(record, Unreadable):
            found.append(f"{run.name}: an unreadable ops record: {record}")
    return found


def _failed(config: Configuration) -> str:
    """Why the configuration's runs have no ops record: their profiler's error, an unreadable record, or no
    explain=true."""
    failed = failures(config.runs)
    return failed[0].split(": ", 1)[1] if failed else "no ops record (explain=true)"


def comparison_view(
    config: Configuration, base: Configuration, word: str, names: dict, speedup: Speedup | None = None
) -> View:
    title = f"Explain: {names[config.key]} vs {names[base.key]}"
    if word not in (SLOWER, FASTER):
        said = f"{title}: no decided difference ({word or 'one run a side'}): nothing explained"
        if word != THE_SAME:  # the same is decided: no difference to explain
            runs = f"{len(config.runs)} and {len(base.runs)}"
            said += f"; more runs a side may decide it: launch its sweep with explain=true repeats=auto ({runs} runs)"
        return View(title, [said], columns(False, []), [])
    sides = tuple([ops for run in c.runs if run.state == DONE and (ops := ops_of(run))] for c in (base, config))
    if not all(sides):
        missing = config if not sides[1] else base
        said = f"{title}: {word}, but {names[missing.key]} has {_failed(missing)}: nothing explained"
        return View(title, [said], columns(False, []), [])
    cuda = sides[1][0].device == "cuda"
    made = differences(*sides)
    shown = ranked(made)
    runs = [*config.runs, *base.runs]
    machine = machines.named(runs, machines.chosen(runs))
    on = f", on {machine}" if machine else ""
    above = [f"{title}: {word}, by operator (medians over each side's {len(sides[1])} and {len(sides[0])} runs{on})"]
    above += account(config, base, made, shown, sides, speedup)
    runs = (len(sides[1]), len(sides[0]))
    chance = chance_apart(*runs)
    apart = (
        f"runs: apart where every run of one side lies above every run of the other, which {runs[0]} and {runs[1]} "
        f"runs do by chance in {chance:.0%} of rows that did not change (about {chance * len(shown):.1f} of these "
        f"{len(shown)}, more among the rows picked as the largest): a row apart is a lead, not a finding. "
        if min(runs) >= 2
        else "runs: one run on a side, so no row is told apart from noise. "
    )
    notes = [
        "self ms/step: an operator's self time per step (on a GPU, each kernel's and copy's device time); Python "
        f"between operators: a phase's time that no operator accounts for (on a CPU). {apart}Rows: the {TOP} largest "
        f"time changes, then the {TOP} largest count changes. Traces: each run's {records.PROFILE}, for Perfetto, "
        "with each kernel's whole name"
    ]
    return View(title, above, columns(cuda, shown), shown, notes)


def decided(sweep_dir: Path, runs: list[RunRecord]) -> tuple[dict, list[tuple[Versus, Speedup, str]]]:
    """The done runs' configurations' names, and each comparison with its baseline: its speed-up and word."""
    done = [r for r in runs if r.state == DONE and r.summary]
    rule = rule_of(sweep_dir, done)
    names = labels(configurations(done))
    return names, [(v, speedup, rule.word(speedup)) for v, speedup in speedups(done, rule.level)]


def views(sweep_dir: Path, runs: list[RunRecord]) -> list[View]:
    """A view per comparison with its baseline, for a sweep run with explain=true; none otherwise."""
    if not explained(runs):
        return []
    names, found = decided(sweep_dir, runs)
    return [comparison_view(v.config, v.base, word, names, speedup) for v, speedup, word in found]


def table(shown: list[View]) -> tuple[list[str], list[list[str]]]:
    """The explained comparisons' rows in one table, each row led by its comparison (W&B's `explain` table).

    Each row ends with its comparison's account: what the rows account for, and where the profile does not show
    the measured difference.
    """
    ranked_views = [view for view in shown if view.rows]
    if not ranked_views:
        return [], []
    header = ["comparison", *ranked_views[0].header, "account"]
    return header, [
        [view.title.removeprefix("Explain: "), *row, "; ".join(view.above[1:])]
        for view in ranked_views
        for row in view.rows
    ]
