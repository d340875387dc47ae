"""The seed-000-style table of a sweep: one row per configuration.

A row holds its runs' medians per phase, throughput, and its speed-up over its row group's baseline.
Beside a speed-up across runs, a word says what its interval says: slower, faster, same or undetermined.
The words, the level and the margin of `same` are repeats=auto's (analysis/statistics/rounds.py `rule_of`).

python -m perfsweep.commands table SWEEP_DIR [--csv]

With replicates (repeats=N), a configuration's figures are the median over its runs of each run's median.
Its speed-up's interval is then across runs (analysis/statistics/speedup.py).
With one run per configuration, the interval resamples that run's steps and says so (within-run).
"""

import statistics
from collections.abc import Callable
from pathlib import Path

import numpy as np

from perfsweep import user_command
from perfsweep.analysis import machines
from perfsweep.analysis.groups import (
    UNSET,
    Configuration,
    axis_order,
    baselines,
    code_name,
    compared_as_asked,
    comparisons,
    configurations,
    in_order,
    labels,
    ordered,
    over_baseline,
    phase_columns,
    varying,
    vs_labels,
)
from perfsweep.analysis.render import Column, View, figure
from perfsweep.analysis.statistics.drift import order_effect
from perfsweep.analysis.statistics.host_flags import beyond_cpus, seen_in, taken, too_short
from perfsweep.analysis.statistics.rounds import Rule, rule_of
from perfsweep.analysis.statistics.speedup import PARTS, WITHIN_RUN, Speedup, as_data, as_text, percent
from perfsweep.analysis.statistics.steps import NOISY, above_noisy, noise, phase_stats, trend
from perfsweep.conf.schema import AS_ON_A_CPU, PER_SAMPLE, SAME_WORK
from perfsweep.records import DONE, FAILED, FINAL, SWEEP, RunRecord, Summary, explained_in, load_sweep
from perfsweep.records.host import SHARED_ENERGY
from perfsweep.records.words import counted


def speedup_columns(configs: list[Configuration], rule: Rule) -> list[Column]:
    """A speed-up column per axis the sweep compares along, in the sweep's order of axes.

    Each cell is the configuration's speed-up over the one that differs from it only in that axis, at its baseline.
    - The interval is across runs with replicates, within-run without.
    - Its level is the rule's; across runs, the rule's word follows it.
    - A baseline shows 1.00x; a configuration with no baseline along the axis shows -.
    - A configuration flagged NOT COMPILED says so after each of its cells.
    As data, each is a ratio, its bounds, their level, its word and its basis (speedup.PARTS).
    A baseline's ratio alone is 1.
    """
    along = baselines(configs)
    versus = comparisons(configs)
    headers = vs_labels(versus, along)

    def over(config: Configuration, axis: str) -> Speedup | float | None:
        return over_baseline(config, along[axis].get(config.key), rule.level)

    return [
        Column(
            headers[axis],
            lambda c, axis=axis: as_text(over(c, axis), rule.word) + not_compiled(c, along[axis].get(c.key)),
            lambda c, axis=axis: as_data(over(c, axis), rule.level, rule.word),
            PARTS,
        )
        for axis in along
    ]


def not_compiled(config: Configuration, base: Configuration | None) -> str:
    """' NOT COMPILED' after a speed-up where its side or its baseline has compiled runs that ran eagerly.

    Their flag below the table says why (ran_eagerly); beside the cell, the figure cannot read as what compiling did.
    A cell without a baseline (-) compares nothing, and says nothing more.
    """
    sides = [config] if base is None else [config, base]
    eager = base is not None and any(ran_eagerly(run) for side in sides for run in side.runs)
    return " NOT COMPILED" if eager else ""


def compares(configs: list[Configuration]) -> bool:
    """The sweep makes a comparison: some configuration has a baseline along some axis but itself."""
    return bool(comparisons(configs))


def columns(configs: list[Configuration], rule: Rule) -> list[Column]:
    """The table's columns for these configurations (of done runs): what varies, then the figures any has."""
    runs = [r for c in configs for r in c.runs]
    axes, fields = varying(runs)
    summaries = [r.summary for r in runs]
    table_columns = [Column(a, lambda c, a=a: c.first.axis(a)) for a in axes]
    table_columns += [
        Column(f, lambda c, f=f: str(c.first.fields.get(f, UNSET)), lambda c, f=f: c.first.fields.get(f))
        for f in fields
    ]
    table_columns.append(number("runs", lambda c: len(c.runs), str))  # one run is one process: no verdict
    table_columns += [number(f"{p} ms", lambda c, p=p: c.median(p)) for p in phase_columns(runs)]
    # With CUDA events the phase columns are device time; the host's time to issue a step goes beside them
    # (well under the device's: the GPU sets the pace).
    if any(s.uses_events for s in summaries):
        table_columns.append(number("step host ms", lambda c: c.middle(lambda r: r.summary.host_median("step"))))
    trains = any(s.samples_per_s is not None for s in summaries)
    if trains:
        table_columns.append(number("samples/s", lambda c: c.middle(lambda r: r.summary.samples_per_s), _rate))
    kinds = {s.phase_memory_kind for s in summaries if s.phase_memory_mib}
    if kinds:  # explain=true: each phase's memory in the profiled window
        peaks = {kind.startswith("cuda_peak") for kind in kinds}
        header = "MiB by phase (peak on CUDA, net on a CPU)"
        if peaks == {True}:
            header = "peak MiB by phase"
        elif peaks == {False}:
            header = "MiB by phase (net on a CPU)"
        phases = tuple(dict.fromkeys(p for s in summaries if s.phase_memory_mib for p in s.phases))
        table_columns.append(Column(header, phase_memory_text, phase_memory, phases))
    if any(s.host_syncs_per_step is not None for s in summaries):
        table_columns.append(number("syncs/step", lambda c: c.first.summary.host_syncs_per_step, str))
    if any(s.ranks for s in summaries):  # runs across ranks: their ranks' spread and hidden communication
        table_columns += rank_columns()
    if any(s.flops_per_step for s in summaries):  # achieved TFLOP/s, and the fraction of the GPU's peak (MFU)
        table_columns.append(number("TFLOP/s", lambda c: c.middle(lambda r: r.summary.tflops_per_s)))
        table_columns.append(
            number("MFU", lambda c: c.middle(lambda r: r.summary.mfu), lambda mfu: f"{mfu:.1%}" if mfu else "unknown")
        )
    if trains:  # the device's energy per sample: NVML's on a GPU, RAPL's on a CPU, else unknown
        table_columns += energy_columns(summaries)
    if trains and any(r.fields.get("cost.per_hour") for r in runs):  # the machine's price, given at launch
        table_columns.append(number("$/1M samples", lambda c: c.middle(cost_per_million), _known))
    table_columns += speedup_columns(configs, rule)
    if trains:
        table_columns.append(
            Column("output type", lambda c: c.first.summary.output_type or "-", lambda c: c.first.summary.output_type)
        )
    table_columns.append(Column("flags", row_flags))  # its caveats travel with its figures: a CSV row's too
    return table_columns


def joules_per_sample(run: RunRecord) -> float | None:
    return run.summary.host.joules_per_sample(run.summary.samples_per_s) if run.summary.host else None


def cost_per_million(run: RunRecord) -> float | None:
    """What a million samples cost at the run's throughput and its machine's price an hour (cost.per_hour)."""
    price, rate = run.fields.get("cost.per_hour"), run.summary.samples_per_s
    return price / 3600 / rate * 1e6 if price and rate else None


def _known(value: float | None) -> str:
    return figure(value) if value else "unknown"


def energy_columns(summaries: list[Summary]) -> list[Column]:
    """J/sample, and samples/J beside it where any run's energy was read.

    A cell is "unknown" where the energy could not be read.
    It is "shared" where any run's RAPL energy held other processes'.
    """

    def column(header: str, value: Callable[[Configuration], float | None]) -> Column:
        def own(config: Configuration) -> float | None:
            return None if _shared_energy(config) else value(config)

        def text(config: Configuration) -> str:
            return "shared" if _shared_energy(config) else _known(value(config))

        return Column(header, text, own)

    per_sample = column("J/sample", lambda c: c.middle(joules_per_sample))
    if not any(s.host and s.host.energy_j is not None for s in summaries):
        return [per_sample]
    per_joule = column("samples/J", lambda c: c.middle(lambda r: 1 / j if (j := joules_per_sample(r)) else None))
    return [per_sample, per_joule]


def _shared_energy(config: Configuration) -> list[str]:
    """Each run's reason where its energy holds other processes' too (records/host.py)."""
    summaries = [r.summary for r in config.runs if r.summary.samples_per_s is not None and r.summary.host]
    return [s.host.energy_shared for s in summaries if s.host.energy_shared]


def energy_notes(configs: list[Configuration]) -> list[str]:
    """What a "shared" energy cell means, with each reason once."""
    reasons = list(dict.fromkeys(why for c in configs for why in _shared_energy(c)))
    if not reasons:
        return []
    return [
        f"shared (J/sample, samples/J): RAPL counts the CPU packages' energy, every process's; {'; '.join(reasons)}. "
        "A run's own energy needs every CPU of the machine in its affinity, and others' CPU time under "
        f"{SHARED_ENERGY:.0%} of its own"
    ]


def unknown_notes(configs: list[Configuration]) -> list[str]:
    """Why a cell of MFU or J/sample reads unknown, for each column that has one."""
    runs = [r for c in configs for r in c.runs]
    why = []
    if any(r.summary.flops_per_step for r in runs) and any(c.middle(lambda r: r.summary.mfu) is None for c in configs):
        why.append("MFU, where the device's peak FLOP/s or the step's FLOPs are not known (a CPU has no peak)")
    blank = [c for c in configs if not _shared_energy(c) and c.middle(joules_per_sample) is None]
    if any(r.summary.samples_per_s is not None for r in runs) and blank:
        if all(r.summary.host is None for c in blank for r in c.runs):
            why.append("J/sample, where its runs recorded no host state (an older perfsweep)")
        else:
            why.append(
                "J/sample, where no energy counter was read: NVML's on a GPU; on a CPU, RAPL's in "
                "/sys/class/powercap, which the machine lacked or kept from the run's user"
            )
    return [f"unknown: {'; '.join(why)}"] if why else []


def number(header: str, value: Callable[[Configuration], float | None], shown=figure) -> Column:
    """A column of a figure: as data the number, None where unknown; as text, as `shown` writes it."""
    return Column(header, lambda c: shown(value(c)), value)


def phase_memory(config: Configuration) -> dict[str, float]:
    """Each phase's memory (MiB), the median over the configuration's runs (explain=true), in its phases' order."""
    by_phase: dict[str, list[float]] = {}
    for run in config.runs:
        for phase, mib in (run.summary.phase_memory_mib or {}).items():
            by_phase.setdefault(phase, []).append(mib)
    return {p: statistics.median(by_phase[p]) for p in config.first.summary.phases if p in by_phase}


def phase_memory_text(config: Configuration) -> str:
    return " ".join(f"{phase} {figure(mib)}" for phase, mib in phase_memory(config).items()) or "-"


def rank_columns() -> list[Column]:
    """The columns of a run across ranks, each the geometric mean over a configuration's runs.

    - threads a rank: torch's CPU threads in a rank, fewest to most;
    - straggler: the slowest rank's median step over the median rank's, and its rank;
    - exposed communication: what backward did not hide, in ms and as a share of the step;
    - bus bandwidth: the least the gradients' reduction took.

    '-' stands for:

    - a run in one process;
    - what a run did not measure (FSDP's straggler, one rank's; either without dist.exposed_comm);
    - no exposed communication;
    - one rank's bandwidth: it reduces with no one.
    """

    def of(name: str):
        return lambda c: c.middle(lambda r: getattr(r.summary.ranks, name) if r.summary.ranks else None)

    return [
        Column("threads a rank", lambda c: _span(rank_threads(c)), rank_threads, ("fewest", "most")),
        Column(
            "straggler",
            lambda c: _straggler(of("straggler_index")(c), c),
            lambda c: {"": of("straggler_index")(c), "rank": _straggler_ranks(c)},
            ("", "rank"),
        ),
        number("exposed comm ms", of("exposed_comm_ms")),
        number("exposed comm", of("exposed_comm_share"), lambda share: "-" if share is None else f"{share:.0%}"),
        number("bus GB/s at least", of("bus_gbps_min")),
    ]


def rank_threads(config: Configuration) -> dict[str, int]:
    """The fewest and the most CPU threads a rank had in the runs.

    Empty where a run's are unknown.
    """
    threads = [r.summary.ranks.threads if r.summary.ranks else None for r in config.runs]
    if not threads or None in threads:
        return {}
    every = [count for counts in threads for count in counts]
    return {"fewest": min(every), "most": max(every)}


def _straggler_ranks(config: Configuration) -> str | None:
    """The straggler's rank in the runs, with '/' between those of different runs.

    None where unknown.
    """
    ranks = {r.summary.ranks.straggler_rank for r in config.runs if r.summary.ranks}
    return None if not ranks or None in ranks else "/".join(map(str, sorted(ranks)))


def _straggler(index: float | None, config: Configuration) -> str:
    ranks = _straggler_ranks(config)
    return figure(index) if index is None or ranks is None else f"{figure(index)} rank {ranks}"


def _span(bounds: dict[str, int]) -> str:
    if not bounds:
        return "-"
    return str(bounds["fewest"]) if bounds["fewest"] == bounds["most"] else f"{bounds['fewest']}-{bounds['most']}"


def _rate(value: float | None) -> str:
    return f"{value:.1f}" if value else "-"


def noisy(run: RunRecord) -> list[str]:
    """Why a done run's step times are too spread to trust (analysis/statistics/steps.py), if they are."""
    steps = run.step_ms()
    return noise(steps, phase_stats(steps, interval=False), seen_in(run.summary))


OWN_KWARGS = ("model.kwargs.", "workload.kwargs.")  # the arguments of a model or step of the user's own
# The groups whose option an axis names by its name alone: a field of one set apart changes what ran under that name.
OPTION_GROUPS = ("memory_format", "precision", "input_type", "compile", "loss", "optim")


def set_apart(runs: list[RunRecord]) -> list[str]:
    """The fields of an option that every run's command set, each to one value (`compile.mode` with compile=default).

    The axis's value names the option; `compile=default` alone would not say that it compiled in max-autotune.
    A compiler setting of a sweep that compiled nothing is left out: no run read it.
    """
    typed = [{w.split("=", 1)[0].lstrip("+~") for w in r.repro.words if "=" in w} for r in runs if r.repro]
    common = set.intersection(*typed) if typed and len(typed) == len(runs) else set()
    compiled = any(r.fields.get("compile.enabled", True) for r in runs)  # an eager sweep read no compiler setting
    return sorted(
        key
        for key in common
        if key.split(".")[0] in OPTION_GROUPS
        and "." in key
        and len({repr(r.fields.get(key)) for r in runs}) == 1
        and (compiled or not key.startswith("compile."))
    )


def context(runs: list[RunRecord], configs: list[Configuration], rule: Rule) -> str:
    """What every row shares: what ran (`ran`), and what its figures rest on."""
    return " | ".join(part for part in (ran(runs, configs), _resting_on(configs, rule)) if part)


def ran(runs: list[RunRecord], configs: list[Configuration]) -> str:
    """What ran: the constant axes, batch and size, the device and the software, the timer, and how many at once.

    The constant arguments of the user's own model or step are among them.
    width=32 and width=64 are two models.
    So are the fields of an option that the command set apart (set_apart).
    """
    shown = [r for c in configs for r in c.runs]  # the rows' runs: a failed run's axes are in its FAILED line
    axes, columned = varying(shown)
    fixed = " ".join(
        [f"{a}={shown[0].axis(a)}" for a in axis_order(shown) if a in shown[0].axes and a not in (*axes, "replicate")]
        + [
            f"{k}={v}"
            for k, v in sorted(shown[0].fields.items())
            if k.startswith(OWN_KWARGS) and len({repr(r.fields.get(k)) for r in shown}) == 1
        ]
        + [f"{k}={shown[0].fields.get(k)}" for k in set_apart(shown)]
    )
    env_run = machines.usual(runs) or runs[0]
    on_gpu = bool((env_run.env or {}).get("gpu"))
    timer = next((r.summary.timer for r in runs if r.summary), "?")
    at_once = sorted({r.status.parallelism for r in runs})
    # where torch is an axis it is in the rows; a single asked-for version is among the fixed axes
    torch = "" if "torch" in axis_order(runs) else f" | torch {env_run.torch_version}"
    # a model's steps: the batch and input size they ran at, where no column shows them
    # where every run set its threads, a column or the fixed settings show them
    asked = all("threads" in r.asked for c in configs for r in c.runs)
    threads = f"{env_run.threads} thread{'' if str(env_run.threads) == '1' else 's'}"
    device = env_run.device if on_gpu or asked else f"{env_run.device} ({threads})"
    models = [r.fields for c in configs for r in c.runs if r.reads_model]
    inputs = any(f.get("model.inputs") for f in models)  # the user's batch factory: it gives the input size
    size = ("model.inputs", "inputs from {}") if inputs else ("model.image_size", "{} px")
    sized = [
        text.format(models[0][key])
        for key, text in (("model.batch_size", "batch {}"), size)
        if models and key in models[0] and key not in columned and key not in axes
    ]
    parts = [
        fixed or (code_name(shown[0]) if len(configs) == 1 else ""),  # a sweep without axes: what it times
        ", ".join(sized),
        f"{device}{torch}",
        f"timer {timer}",
        "runs one at a time" if at_once == [1] else f"{'/'.join(map(str, at_once))} runs at a time",
        measured(shown),
    ]
    return " | ".join(part for part in parts if part)


def measured(runs: list[RunRecord]) -> str:
    """'20 steps after 3 warm-up, on 2026-11-30': how long each run measured, where all measured alike, and when.

    Where they did not, a column shows it.
    The days are those the runs started on, in UTC.
    """
    # (a damaged record may hold anything there: only counts that every run shares are said)
    counts = [{repr(r.fields.get(key)): r.fields.get(key) for r in runs} for key in ("steps", "warmup_steps")]
    steps, warmup = (next(iter(values.values())) if len(values) == 1 else None for values in counts)
    said = all(isinstance(count, int) and not isinstance(count, bool) for count in (steps, warmup))
    length = f"{steps} steps after {warmup} warm-up" if said else ""
    days = sorted({r.status.started_at[:10] for r in runs if r.status.started_at})
    when = f"on {days[0]}" + (f" to {days[-1]}" if len(days) > 1 else "") if days else ""
    return ", ".join(part for part in (length, when) if part)


def _resting_on(configs: list[Configuration], rule: Rule) -> str:
    """How the figures were made: from each run's steps, and across runs where there are replicates."""
    windows = "samples/s over the whole window (stalls included)"
    if any(r.summary.ranks for c in configs for r in c.runs):
        windows = "samples/s over the whole window (stalls included; across ranks: all ranks', over synced steps)"
    replicated = sum(len(c.runs) > 1 for c in configs)
    times = (
        "times: each run's median step, and over a configuration's runs their geometric mean"
        if replicated
        else "times: medians over measured steps"
    )
    if not compares(configs):
        return f"{times}; {windows}"
    within = (
        f"{WITHIN_RUN} interval: it resamples each run's steps and leaves the difference between processes "
        "out, so no verdict rests on it"
    )
    paired = any(r.summary.paired for c in configs for r in c.runs)
    level = percent(rule.level)
    if replicated == len(configs) and paired:
        vs = f"{level} CI across processes, each one ratio of the sides it measured (pairing=auto); else across runs"
    elif replicated == len(configs):
        vs = f"{level} CI across runs, each run one process"
    elif replicated:
        vs = f"{level} CI across runs where a configuration has two or more; marked {WITHIN_RUN}: a {within}"
    else:
        vs = f"{level} {within}; repeats=N for one that does"
    spent = f"; {rule.spent()}" if rule.looks else ""
    ranks = any(r.summary.ranks for c in configs for r in c.runs)
    scaling = (
        "; over fewer ranks, a step's speed-up is the scaling efficiency: each rank steps its own batch, so samples/s "
        "grow with the ranks times it"
        if ranks
        else ""
    )
    return (
        f"{times}; {windows}; vs: speed-up over the configuration that differs only in that column's axis, at its "
        f"baseline [{vs}{spent}]{scaling}"
    )


def words(configs: list[Configuration], rule: Rule) -> list[str]:
    """The note that says what the words beside the speed-ups mean; none where no speed-up is across runs."""
    if not any(len(v.config.runs) > 1 and len(v.base.runs) > 1 for v in comparisons(configs)):
        return []
    return [
        f"vs words: slower or faster where the {percent(rule.level)} interval excludes 1.00x; same where it lies "
        f"within -+{percent(rule.margin)} of 1.00x (auto.half_width, by which repeats=auto decides); else "
        "undetermined: more runs narrow it"
    ]


def compiled_as_another(configs: list[Configuration]) -> list[str]:
    """A note for each compile mode its rows ran on a CPU.

    There it compiles as another mode does.

    Its row then measures that other mode's code, under its own name.
    """
    modes = {
        str(run.fields.get("compile.name")): mode
        for config in configs
        for run in config.runs
        if run.fields.get("compile.enabled")
        and (mode := run.fields.get("compile.mode")) in AS_ON_A_CPU
        and not (run.env or {}).get("gpu")
    }
    return [
        f"compile={name} ran on a CPU: Inductor records no CUDA graphs on one, so mode {mode} compiled as "
        f"{AS_ON_A_CPU[mode]} does. Its row measures mode {AS_ON_A_CPU[mode]}'s code"
        for name, mode in modes.items()
    ]


def explained(sweep_dir: Path) -> list[str]:
    """A note where `perfsweep explain` launched the sweep again: its operators are in that sweep."""
    again = explained_in(sweep_dir)
    if not (again / SWEEP).is_file():
        return []
    return [
        f"explain: {again} ran this sweep again with explain=true; `{user_command()} explain {sweep_dir}` gives each "
        "difference by operator. Its verdicts are of its own runs and may differ from these"
    ]


def same_work(configs: list[Configuration], sweep_dir: Path) -> list[str]:
    """A note for each setting of the same work that the rows vary.

    Threads and a batch are such settings.
    The note gives the command that compares it.

    A batch compared as an axis says its speed-ups are per sample.
    World sizes compared along nothing get the command that gives their scaling.
    """
    runs = [r for c in configs for r in c.runs]
    settings = [key for key in (*SAME_WORK, *PER_SAMPLE) if key in varying(runs)[1]] if runs else []
    notes = [
        f"{key} varies and is no axis: `{user_command()} table {sweep_dir} --vs {key}={values[0]}` sets its values "
        f"side by side{' per sample' if key in PER_SAMPLE else ''}"
        for key in settings
        for values in [sorted({str(r.fields.get(key)) for r in runs}, key=in_order)]
    ]
    ranks = sorted({r.axis("world_size") for r in runs} - {"-"}, key=in_order)
    if len(ranks) > 1 and "world_size" not in {versus.axis for versus in comparisons(configs)}:
        notes.append(
            f"world_size varies and is compared along nothing: `{user_command()} table {sweep_dir} --vs "
            f"world_size={ranks[0]}` gives the scaling over {ranks[0]} rank{'s' * (ranks[0] != '1')}"
        )
    compared = [key for key in PER_SAMPLE if runs and key in runs[0].axes]
    return notes + [
        f"vs {key}: the speed-up in time per sample, as samples/s sets them: a step of another batch does other work"
        for key in compared
    ]


# Noisy runs above which the table says them in one line; `runs` gives each one's reasons.
NOISY_LINES = 3


def unmeasured(configs: list[Configuration]) -> list[str]:
    """The configurations (of every run, done or not) without a done run, each by what tells it apart in the sweep.

    The table has no row for them, and its columns show only what varies among the rows.
    """
    names = labels(configs)
    return [names[c.key] for c in configs if not any(r.state == DONE and r.summary for r in c.runs)]


def _unnamed(label: str, name: str) -> str:
    """What of a configuration's label its run's name lacks (a swept batch size), in brackets; "" where none."""
    missing = [part for part in label.split() if part not in name]
    return f" ({' '.join(missing)})" if missing else ""


def flags(
    runs: list[RunRecord], sweep_dir: Path | str, stranded: dict[str, tuple[str, str]] | None = None
) -> list[str]:
    """The runs that failed or have not finished, and the done ones whose figures are suspect.

    `stranded` names the unfinished runs that no job will finish, each with its state and what to do (their
    scheduler's word).
    """
    stranded = stranded or {}
    done = [r for r in runs if r.state == DONE]
    every = configurations(runs) if runs else []
    names = labels(every) if len(every) > 1 else {}  # a lone configuration's name says nothing more
    of = {r.name: _unnamed(names[c.key], r.name) for c in every if names for r in c.runs}
    flag_lines = [f"FAILED {r.name}{of.get(r.name, '')}: {r.error_line()}" for r in runs if r.state == FAILED]
    flag_lines += [
        f"NO FIGURES {name}: none of its runs is done, so the table has no row for it"
        for name in (unmeasured(every) if done else [])
    ]
    flag_lines += [
        unfinished(r, stranded.get(r.name)) for r in runs if r.state not in FINAL and not r.status.over_budget
    ]
    budget = [r.status for r in runs if r.status.over_budget]
    if stopped := sum(status.started_at is not None for status in budget):
        flag_lines.append(
            f"STOPPED {counted(stopped, 'run')}: the launch's budget (launcher.budget_s) ran out as they measured"
        )
    if unstarted := len(budget) - stopped:
        flag_lines.append(
            f"NOT STARTED {counted(unstarted, 'run')}: the launch's budget (launcher.budget_s) ran out before them"
        )
    spread = {r.name: noisy(r) for r in done}
    flag_lines += noisy_flags(done, spread, sweep_dir)
    grouped = configurations(done) if done else []
    flag_lines += disagreeing(grouped, sweep_dir)
    flag_lines += [f"NOT STEADY {r.name}: {why}" for r in done if not spread[r.name] and (why := not_steady(r))]
    flag_lines += order_effect(grouped) if grouped else []
    flag_lines += [f"NON-FINITE LOSS {r.name}: {why}" for r in done if (why := nonfinite(r))]
    flag_lines += [f"BATCH REDUCED {r.name}: {why}" for r in done if (why := batch_reduced(r))]
    flag_lines += [f"NOT COMPILED {r.name}: {eager}" for r in done if (eager := ran_eagerly(r))]
    flag_lines += [f"STALLED {r.name}: {why}" for r in done if (why := stalled(r))]
    flag_lines += machines.elsewhere(runs)
    flag_lines += [f"SHARED GPU {r.name}: {why}" for r in done if (why := shared_gpu(r))]
    return flag_lines


def not_steady(run: RunRecord) -> str:
    """How a done run's steps drifted or changed level (steps.trend); '' where they did not."""
    return trend(run.step_ms(), host=seen_in(run.summary))


def nonfinite(run: RunRecord) -> str:
    """How many of a done run's losses were NaN or infinite; '' where none."""
    lost = run.summary.nonfinite_losses if run.summary else 0
    if not lost:
        return ""
    return f"{lost} of {run.summary.steps} measured steps' losses are NaN or infinite: the run did not train"


def batch_reduced(run: RunRecord) -> str:
    """The batch a done run fell back to after running out of memory; '' where it ran the batch asked."""
    ran = run.summary.batch_size if run.summary else None
    asked = run.fields.get("model.batch_size")
    if not ran or asked in (None, ran):
        return ""
    return f"ran at batch {ran}, not {asked} (out of memory; model.batch_size_retry)"


def shared_gpu(run: RunRecord) -> str:
    """The other processes on a run's GPU; '' where none was seen."""
    shared = run.summary.gpu_neighbours() if run.summary else []
    return f"other processes on its GPU: {', '.join(shared)}" if shared else ""


def row_flags(config: Configuration) -> str:
    """The flags of a configuration's runs, beside its figures: 'NOISY 2/4; RUNS DISAGREE 2.77x'; '' where none.

    A run flag counts the runs it flags, of the configuration's.
    The sweep's own flags (ORDER EFFECT, FAILED...) stay below the table.
    """
    noisy_runs = {r.name for r in config.runs if noisy(r)}
    checks = {
        "NOISY": lambda r: r.name in noisy_runs,
        "NOT STEADY": lambda r: r.name not in noisy_runs and not_steady(r),
        "NON-FINITE LOSS": nonfinite,
        "BATCH REDUCED": batch_reduced,
        "NOT COMPILED": ran_eagerly,
        "STALLED": stalled,
        "SHARED GPU": shared_gpu,
    }
    medians = disagree(config.runs)
    said = [f"RUNS DISAGREE {max(medians) / min(medians):.3g}x"] if medians else []
    for kind, check in checks.items():
        if hit := sum(bool(check(r)) for r in config.runs):
            said.append(f"{kind} {hit}/{len(config.runs)}")
    return "; ".join(said)


# A run whose steps' mean is this many times their median stalled in some of them.
# Idle runs give 0.9-1.2 on a 2-core VM; a neighbour's stalls gave up to 9.
STALL = 4 / 3
# A stalled run whose median step is this many times its fastest quarter's: half its steps or more stalled.
MEDIAN_STALLED = 2.0


def stalled(run: RunRecord) -> str:
    """Why some of the run's steps took far longer than its median; "" where none did.

    Its window's samples/s counts such a stall, and its median step leaves it out.
    So its row's samples/s and step ms may rank configurations apart.
    Where half its steps or more stalled, its median is a stalled step.
    Its step ms then counts the stall too.
    """
    steps = run.step_ms() if run.summary else []
    if len(steps) == 0:
        return ""
    mean, median = float(np.mean(steps)), float(np.median(steps))
    if mean < STALL * median:
        return ""
    host = seen_in(run.summary)
    fast = float(np.percentile(steps, 25))
    if median >= MEDIAN_STALLED * fast:
        counted = (
            f"Its median step is {median / fast:.2g}x its fastest quarter's ({fast:.3g} ms), so its step ms "
            "counts the stall too: a run again, with its host to itself, measures it"
        )
    elif run.summary.samples_per_s is not None:
        counted = "Its row's samples/s counts that stall and its step ms does not: they may rank rows apart"
    else:  # a step without samples (a function of no model's batch): its step ms alone, which leaves the stall out
        counted = ""
    return (
        f"its steps took {mean:.3g} ms on average against a median of {median:.3g} ms: the longest took "
        f"{_longest(max(steps))} ms" + (f"; host: {host}" if host else "") + (f". {counted}" if counted else "")
    )


def _longest(ms: float) -> str:
    """A step's time as a stall is read: whole ms from 100 ms, else three significant digits (0.0279)."""
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def _limit_hit(reason: str) -> bool:
    """Whether a graph break is Dynamo's recompile limit (cache_size_limit before torch 2.6)."""
    return "recompile_limit" in reason or "cache_size_limit" in reason


def ran_eagerly(run: RunRecord) -> str:
    """Why a compiled run's figures are eager ones; '' where they are not.

    No compiled graph with an op ran in its step after the window.
    """
    compiled = (run.summary.compiled if run.summary else None) or {}
    if compiled.get("graphs_run") != 0:
        return ""
    # a recompile limit that was hit first: past it, each further variant runs eagerly
    breaks = sorted((compiled.get("graph_breaks") or {}).items(), key=lambda item: (not _limit_hit(item[0]), -item[1]))
    said = "; ".join(f"{reason} ({count})" for reason, count in breaks[:2]) or "none counted"
    fix = "compile.fullgraph=true makes the first break an error that names its line"
    if breaks and _limit_hit(breaks[0][0]):
        fix = (
            "give each compiled configuration a process of its own (pairing=process)"
            if run.summary.paired
            else "its code compiles a variant for each new shape or guarded value: torch._dynamo.mark_dynamic on "
            "the input that varies, or a larger torch._dynamo.config.recompile_limit, keeps it compiled"
        )
    return (
        f"torch.compile ran none of its ops in a compiled graph: its times are eager ones. Dynamo's graph breaks in "
        f"its process: {said}. {fix}"
    )


def unfinished(run: RunRecord, stranded: tuple[str, str] | None) -> str:
    """A run not finished, as its records say; as its scheduler says, with what to do, where no job will finish it."""
    if not stranded:
        return f"{run.state.upper()} {run.name}"
    state, why = stranded
    return f"{state.upper()} {run.name}: {why}"


# A configuration whose runs' step medians span this factor has a row that one run moves.
# Runs on one idle machine differ by a few percent; one beside a neighbour took 33 times its others' time.
DISAGREE = 1.5


def disagree(runs: list[RunRecord], metric: str = "step") -> tuple[float, ...]:
    """The runs' medians of `metric`, where they span DISAGREE or more; else ()."""
    medians = [m for r in runs if r.summary and (m := r.summary.median(metric))]
    return tuple(medians) if len(medians) >= 2 and max(medians) >= DISAGREE * min(medians) else ()


def disagreeing(configs: list[Configuration], sweep_dir: Path | str) -> list[str]:
    """A RUNS DISAGREE line per configuration whose runs' step medians span DISAGREE or more."""
    return [
        f"RUNS DISAGREE {labels(configs)[config.key]}: its {len(medians)} runs' step medians span "
        f"{figure(min(medians))}-{figure(max(medians))} ms ({max(medians) / min(medians):.3g}x); its row's "
        f"step ms is their geometric mean, which one run moves: `{user_command()} runs {sweep_dir}` shows "
        "each run, and what its host showed"
        for config in configs
        if (medians := disagree(config.runs))
    ]


def noisy_flags(done: list[RunRecord], spread: dict[str, list[str]], sweep_dir: Path | str) -> list[str]:
    """One NOISY line per noisy run, or one line for them all where they are more than NOISY_LINES.

    That line gives their robust CVs' range, and what their hosts showed.
    Others' CPU and steal are medians over their windows; throttling, clocks and the GPU count their runs.
    """
    flagged = [r for r in done if spread[r.name]]
    if len(flagged) <= NOISY_LINES:
        return [f"NOISY {r.name}: {reason}" for r in flagged for reason in spread[r.name]]
    cvs = [phase_stats(r.step_ms(), interval=False).robust_cv for r in flagged]
    hosts = [r.summary.host for r in flagged if r.summary and r.summary.host]
    host = taken(flagged) or too_short(hosts)
    shown = ([host] if host else []) + beyond_cpus(hosts)
    said = f"; host: {'; '.join(shown)}" if shown else ""
    return [
        f"NOISY {len(flagged)} of {len(done)} runs: robust CV {above_noisy(min(cvs))}-{max(cvs):.1%} > "
        f"{NOISY:.0%}{said}; each run's reasons: `{user_command()} runs {sweep_dir}`"
    ]


def table_view(sweep_dir: Path, runs: list[RunRecord], stranded: dict[str, tuple[str, str]] | None = None) -> View:
    """The table of these runs, and its flags (`stranded`: flags)."""
    done = [r for r in runs if r.state == DONE and r.summary]
    failed = sum(r.state == FAILED for r in runs)
    pending = sum(r.state not in FINAL for r in runs)
    states = f"{len(runs) - failed - pending} done, {failed} failed, {pending} not finished"
    counts = f"{sweep_dir}: {counted(len(runs), 'run')}, {states}"
    configs = configurations(done) if done else []
    rule = rule_of(sweep_dir, runs)
    return View(
        title=f"{Path(sweep_dir).name}: time per phase of a step, by configuration",  # a LaTeX caption, a JSON title
        above=[counts, *([context(runs, configs, rule)] if done else [])],
        columns=columns(configs, rule) if done else [],
        items=ordered(configs) if configs else [],
        notes=words(configs, rule)
        + energy_notes(configs)
        + unknown_notes(configs)
        + compiled_as_another(configs)
        + same_work(configs, sweep_dir)
        + explained(Path(sweep_dir)),
        flags=flags(runs, sweep_dir, stranded),
        empty="",
        shared={"ran": ran(runs, configs)} if done else {},  # a row of its CSV names its machine, torch and settings
    )


def view(
    sweep_dir: Path,
    names: list[str] | None = None,
    vs: str | None = None,
    stranded: dict[str, tuple[str, str]] | None = None,
) -> View:
    """The table of the sweep's runs (or the named ones), compared along `vs` (groups.compared_along)."""
    return table_view(sweep_dir, compared_as_asked(load_sweep(sweep_dir, names), vs), stranded)


def repro_view(sweep_dir: Path, runs: list[RunRecord], redacted: bool = False) -> View:
    """Each configuration's command that measures it again, alone, and the commit its code must be at.

    `redacted`: as it may leave the machine (records/redact.py).
    """
    configs = ordered(configurations([r for r in runs if r.state == DONE and r.summary]))
    names = labels(configs)
    found = {c.key: c.repro for c in configs}
    shown = {key: (repro.redacted() if redacted else repro) for key, repro in found.items() if repro}
    return View(
        title="Commands that measure each configuration again",
        above=[
            f"run one {'where its code imports' if any(r.users for r in shown.values()) else 'from any folder'}: it "
            "plans that configuration alone (repeats=1), in a sweep folder of its own"
        ],
        columns=[
            Column("configuration", lambda c: names[c.key]),
            Column("command", lambda c: shown[c.key].command if c.key in shown else "-"),
            Column("code", lambda c: shown[c.key].caveat() if c.key in shown else "planned before runs kept one"),
        ],
        items=configs,
        empty=f"{sweep_dir}: no done runs",
    )
