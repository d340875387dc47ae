"""The instrumented run: one RunSpec -> records on disk (and a W&B run).

`execute` is the function launch.py hands the launcher, which has submitit run it in a process per run.
"""

import contextlib
import dataclasses
import gc
import math
import shutil
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any, NamedTuple

import torch

from perfsweep import records
from perfsweep.conf.import_paths import modules_of, targets_of
from perfsweep.conf.schema import RunConf
from perfsweep.records import BudgetSpent, HostState, PairedSummary, Stopped, Summary, lifecycle
from perfsweep.sweeps.spec import RunSpec
from perfsweep.train import checks, gpu_state, host_state, user_targets
from perfsweep.train.build import configure_backends, resolve_device
from perfsweep.train.catalog import fastai_modules, workload_class
from perfsweep.train.compiled_graphs import compiled_graphs, watch_recompiles
from perfsweep.train.contract import ContractError
from perfsweep.train.env import clocks, environment, imported_elsewhere, neighbours, process_started_at, user_code
from perfsweep.train.flops import count_flops, peak_flops, peak_table_module
from perfsweep.train.known_issues import known_issue
from perfsweep.train.op_breakdown import explain_steps
from perfsweep.train.paired import (
    PairingError,
    block_order,
    block_sizes,
    changed,
    measure_blocks,
    process_switches,
    refuse_changed_switches,
)
from perfsweep.train.ranks.combine import Ranks
from perfsweep.train.ranks.start import RANK_LOGS, run_ranks, task_ranks
from perfsweep.train.reference import reference
from perfsweep.train.syncs import count_host_syncs
from perfsweep.train.timing import NoClock, synchronize
from perfsweep.train.tracker import track
from perfsweep.train.window import Window, make_workload, peak_memory_mib, run_window
from perfsweep.train.workloads import Workload


def summary_columns(phases: tuple[str, ...]) -> list[str]:
    return [f"{p}_ms" for p in (*phases, "step")] + [f"{p}_host_ms" for p in (*phases, "step")]


def summarize(
    work: Workload, window: Window, memory: tuple[float, str], device: torch.device, extra: dict[str, Any]
) -> Summary:
    """Medians per phase, throughput, memory and losses of the measured window, plus `extra`."""
    return summary_of(work.cfg, work.phases, window, memory, device, extra, work.summary)


def summary_of(
    cfg: RunConf,
    phases: tuple[str, ...],
    window: Window,
    memory: tuple[float, str],
    device: torch.device,
    extra: dict[str, Any],
    workload_summary,
) -> Summary:
    """The summary of a window of `phases` (the workload's own fields from `workload_summary(steps_per_s)`)."""
    losses = [row["loss"] for row in window.rows if "loss" in row]
    steps_per_s = len(window.rows) / window.seconds
    medians = {c: median(row[c] for row in window.rows) for c in summary_columns(phases)}
    flops, peak = extra.get("flops_per_step"), peak_flops(device, cfg.precision.name)
    return Summary(
        workload=cfg.workload.name,
        phases=tuple(phases),
        median_ms=medians,
        steps=len(window.rows),
        steps_per_s=steps_per_s,
        window_s=window.seconds,
        window_ended_at=window.ended_at,  # unix time: W&B starts after it (tests compare)
        timer=window.timer,
        peak_memory_mib=memory[0],
        peak_memory_kind=memory[1],
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        nonfinite_losses=sum(not math.isfinite(loss) for loss in losses) if losses else None,
        tflops_per_s=flops / (medians["step_ms"] / 1e3) / 1e12 if flops and medians["step_ms"] > 0 else None,
        peak_tflops=peak / 1e12 if peak else None,
        host=host_of(window, device),
        **extra,
        **workload_summary(steps_per_s),
    )


class WarmedUp(NamedTuple):
    """A workload built and warmed up: its warm-up window, the config it ran with, when its first step began."""

    work: Workload
    warmup: Window
    cfg: RunConf  # at a smaller batch than asked after an out-of-memory (model.batch_size_retry)
    first_step: float


def warmed_up(cfg: RunConf, device: torch.device) -> WarmedUp:
    """The workload built and warmed up.

    With model.batch_size_retry, an out-of-memory while building or warming up retries with a smaller batch,
    as timm's benchmark.py does (timm.utils.decay_batch_step: 64, 48, 32, 24, ... 1); the run records the
    batch it ran at (summary.batch_size) and the table flags it.
    """
    first_step = None
    while True:
        try:
            work = make_workload(cfg, device)
            first_step = first_step or time.time()
            warmup = run_window(work, 0, cfg.warmup_steps, device)
            return WarmedUp(work=work, warmup=warmup, cfg=cfg, first_step=first_step)
        except torch.OutOfMemoryError:
            if not cfg.model.batch_size_retry or cfg.model.batch_size <= 1:
                raise
        from timm.utils import decay_batch_step

        work = None  # the failed attempt's memory goes before the next is built
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        smaller = dataclasses.replace(cfg.model, batch_size=decay_batch_step(cfg.model.batch_size))
        cfg = dataclasses.replace(cfg, model=smaller)


def profile_steps(work: Workload, first: int, device: torch.device, path: Path, steps: int = 3) -> None:
    """A torch.profiler trace of `steps` steps after one warm-up step, all after the measured window."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=schedule) as profiler:
        for index in range(first, first + 1 + steps):
            work.step(index, NoClock())
            profiler.step()
    synchronize(device)
    profiler.export_chrome_trace(str(path))


def host_of(window: Window, device: torch.device) -> HostState | None:
    """The host over the window's blocks, with the GPU's settings that add noise where it ran on one."""
    if not window.host:
        return None
    host, gpu = HostState.of(window.host), gpu_state.here(device)
    if device.type != "cpu" and gpu is None:  # the CPU packages' energy is not the device's
        host = dataclasses.replace(host, energy_j=None, energy_source=None)
    settings = [dataclasses.asdict(setting) for setting in gpu.settings()] if gpu else []
    return dataclasses.replace(host, gpu_settings=settings)


def energy_of(summary: Summary) -> dict[str, float]:
    """The run's J/sample and samples/J for W&B, where its device's energy was read."""
    joules = summary.host.joules_per_sample(summary.samples_per_s) if summary.host else None
    return {"joules_per_sample": joules, "samples_per_joule": 1 / joules} if joules else {}


def lazy_imports(specs: list[RunSpec]) -> list[str]:
    """The modules these runs import only once they run: a job that forks them imports them first, once.

    They are the modules of the user's code the runs name, their model zoos, pyarrow, and W&B's modules.
    They include the fastai modules that every run imports.
    They include torch._dynamo where a run imports it (`imports_dynamo`), and lightning-fabric's table of peaks
    where a run is on a GPU.
    None of them touches a device when imported (a fork checks that of the user's).
    """
    # pyarrow writes every run's steps (records.write_steps imports it only then, so that status and tables start fast)
    needed = {"pyarrow.parquet", "perfsweep.records.columns"}
    # torch.utils.flop_counter (70 ms) is imported wherever torch._dynamo is: a run that counts no FLOPs loses little
    needed |= {"torch._dynamo", "torch.utils.flop_counter"} if any(imports_dynamo(s.config) for s in specs) else set()
    needed |= {
        s.config.model.source for s in specs if "model" in s.config.workload.reads and not s.config.model._target_
    }
    # fastai takes 1-1.5 s of a CPU to import, and patches torch as it is imported (sweeps/pairing.py).
    # So a job imports first only the fastai modules that each of its runs would import anyway.
    needed |= set.intersection(*(set(fastai_modules(s.config)) for s in specs)) if specs else set()
    paths = {tuple(path.split(".")) for s in specs for path in targets_of(s.config).values()}
    needed |= {".".join(parts[:end]) for parts in paths for end in range(1, len(parts))}  # a path's module is one
    # W&B's summary looks for a pandas DataFrame by importing pandas, where it is installed: 0.3 s a run.
    # wandb.init imports its launch inputs' module (0.45 s of a CPU in a process with torch) in each process.
    # The W&B run's config reads the run's records, which pydantic's TypeAdapter checks.
    tracked = any(s.config.tracker.mode != "disabled" for s in specs)
    needed |= {"wandb", "pandas", "wandb.sdk.launch.inputs.internal", "pydantic.type_adapter"} if tracked else set()
    if any(resolve_device(device).type == "cuda" for device in {s.config.device for s in specs}):
        needed |= set(peak_table_module())
    return sorted(needed)


def imports_dynamo(cfg: RunConf) -> bool:
    """Whether a run imports torch._dynamo: 1.7 s of a CPU on a 2-core AMD EPYC VM.

    A run imports it where it compiles or counts its FLOPs (the counter imports it).
    A model workload does both: it counts its FLOPs, and its optimizer imports it when built.
    A function benchmark with a backward phase is taken to (nested's jagged NestedTensor imports it).
    So is a step of the user's own that counts its FLOPs, or that cannot be imported.
    So is one with a backward phase: it trains, and a torch.optim optimizer imports it.
    """
    if cfg.compile.enabled:
        return True
    try:
        work = workload_class(cfg.workload)
    except Exception:  # the user's step: its run reports the error
        return True
    return work.counts_flops or "backward" in work.phases


def outcome_known() -> None:
    """Stop the run's time limit, the interval timer its job set (SIGALRM, launcher.timeout_min): the limit is on
    what the run does, not on recording how it ended nor on W&B after it (tracker.timeout_s limits that)."""
    signal.setitimer(signal.ITIMER_REAL, 0)


class Stopwatch:
    """Seconds spent in each named part of a run's bookkeeping, for its status."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, part: str):
        started = time.time()
        try:
            yield
        finally:
            self.seconds[part] = time.time() - started


@dataclasses.dataclass
class Measured:
    """What a run measured: its workload, warm-up and measured windows, the config it ran with (a smaller batch
    after an out-of-memory), when its first step began, and the device's neighbours and clock before it."""

    work: Workload
    warmup: Window
    window: Window
    cfg: RunConf
    first_step: float
    neighbours: dict[str, Any]
    clock_start: dict[str, Any]
    records_from: float | None = None  # when its records began, where not at its window's end (a paired side)

    @property
    def after(self) -> int:
        """The index of the first step after the measured window."""
        return self.cfg.warmup_steps + self.cfg.steps

    def seconds(self) -> dict[str, float]:
        """The warm-up's and the window's seconds, and those since its records began."""
        since = time.time() - (self.records_from or self.window.ended_at or time.time())
        return {"warmup_s": self.warmup.seconds, "window_s": self.window.seconds, "records_s": since}


def execute(spec: RunSpec, run_dir: Path, tracker_id: str, launch: dict[str, Any]) -> Summary:
    """Run `spec`, write its records to `run_dir`, and return its summary; failures are recorded, then raised.

    `launch` (how many jobs ran at once, the job id, host and log) goes into every status the run writes; its
    `ready_since` (unix time: the run's fork, or the end of the run before it in this process) is where the run's
    start-up begins, else this process's start. A run starts over from scratch: an earlier start's step rows and
    summary are removed first.
    """
    (summary,) = execute_sides([(spec, run_dir, tracker_id)], launch)
    return summary


class Side(NamedTuple):
    """A run as a process measures it: its spec, its run folder and its W&B id."""

    spec: RunSpec
    run_dir: Path
    tracker_id: str


class Measurement(NamedTuple):
    """What a run measured, as its records hold it."""

    summary: Summary
    rows: list[dict[str, Any]]  # its steps, as W&B gets them
    seconds: dict[str, float]  # where its time went: its first step's time (unix), then seconds


def execute_sides(sides: list[tuple[RunSpec, Path, str]], launch: dict[str, Any]) -> list[Summary | None]:
    """Run the sides of a comparison in this one process (train/paired.py), each recorded as a run of its own.

    Each side is a spec, its run folder and its W&B id.
    One side is a run as `execute` runs it.
    A side that cannot build or warm up fails alone, with its own error, at once; the others are measured.
    A failure while the sides measure fails them all.
    Failures are recorded, then raised where no side is done.

    Returns:
        Each side's summary, None for a side that failed.
    """
    sides = [Side(*side) for side in sides]
    ready_since = launch.get("ready_since") or process_started_at() or time.time()
    host_from = host_state.here().read()  # what a budget that stops the process says of the host
    launches = [record_started(side.run_dir, side.tracker_id, launch) for side in sides]
    alone: dict[int, tuple[records.RunError, str] | None] = {}  # the sides that failed alone: failure, when

    def fail_alone(index: int, error: Exception) -> None:
        alone[index] = None  # first: a stop while it is recorded must not record it again
        alone[index] = record_failed(sides[index].spec, sides[index].run_dir, launches[index], error)
        print(f"perfsweep: run {sides[index].spec.name} failed: {type(error).__name__}: {error}", file=sys.stderr)

    stopwatch = Stopwatch()
    try:
        device = prepare_sides(sides, as_tasks=bool(launch.get("tasks")))
        if len(sides) > 1:
            outcomes = paired_process(sides, device, fail_alone)
        elif sides[0].spec.config.dist.name == "none":
            outcomes = [one_process(sides[0].spec, sides[0].run_dir, device, stopwatch)]
        else:
            outcomes = [across_ranks(sides[0].spec, sides[0].run_dir, device, launches[0])]
        outcome_known()
        ends = {}  # each done side's end and where its time went
        for index, (side, mine, outcome) in enumerate(zip(sides, launches, outcomes, strict=True)):
            if outcome is not None:
                timing = timing_of(outcome.seconds, ready_since, stopwatch.seconds)
                ends[index] = (record_done(side.run_dir, mine, timing), timing)
    except (KeyboardInterrupt, SystemExit, BudgetSpent) as error:  # cancelled, preempted, requeued, out of budget
        why = stopped_by_budget(error, host_from) if isinstance(error, BudgetSpent) else None
        for index, (side, mine) in enumerate(zip(sides, launches, strict=True)):
            if index not in alone:
                record_interrupted(side.run_dir, mine, error, why)
        raise
    except (Exception, Stopped) as error:  # its own error, or its time limit (RunTimeout)
        outcome_known()
        for index, (side, mine) in enumerate(zip(sides, launches, strict=True)):
            if index not in alone:
                alone[index] = record_failed(side.spec, side.run_dir, mine, error)
        track_failures(sides, launches, alone)
        raise
    track_failures(sides, launches, alone)  # W&B after the blocks: no W&B process beside a timed step
    for index, (side, mine, outcome) in enumerate(zip(sides, launches, outcomes, strict=True)):
        if outcome is not None:
            record_in_tracker(*side, mine, outcome.rows, outcome.summary, *ends[index])
    if not ends:
        raise PairingError(f"each of the {len(sides)} sides of this process failed, each with its own error")
    return [outcome.summary if outcome is not None else None for outcome in outcomes]


def timing_of(seconds: dict[str, float], ready_since: float, bookkeeping: dict[str, float]) -> dict[str, float]:
    """Where a run's time went: its start-up from when it was ready (its own `ready_at` where it has one)."""
    seconds = dict(seconds)
    ready = seconds.pop("ready_at", None) or ready_since
    return {"startup_s": seconds.pop("first_step") - ready, **seconds, **bookkeeping}


def prepare_sides(sides: list[Side], as_tasks: bool = False) -> torch.device:
    """Prepare each side's run; the device they share. `as_tasks`: a run's ranks are its Slurm job's tasks.

    Raises:
        PairingError: where the sides ask for different process-wide switches.
    """
    devices, switches = [], []
    for side in sides:
        devices.append(prepare(side.spec, side.run_dir, as_tasks))
        switches.append(process_switches())
    differs = [f"{side.spec.name}: {changed(switches[0], mine)}" for side, mine in zip(sides, switches, strict=True)]
    differs = [line for line, mine in zip(differs, switches, strict=True) if mine != switches[0]]
    if differs:
        raise PairingError(f"the sides set different process-wide switches ({'; '.join(differs)})")
    if (compiled := sum(side.spec.config.compile.enabled for side in sides)) > 1:
        watch_recompiles(compiled)
    return devices[0]


def paired_process(
    sides: list[Side], device: torch.device, fail_alone: Callable[[int, Exception], None]
) -> list[Measurement | None]:
    """Measure the sides in alternating blocks (train/paired.py); write each one's records, as one_process does.

    Each side's own bookkeeping (counts, summary, profile, records) is in its own seconds.
    A side's start-up is its own build, from the end of the warm-up before it.
    A side that cannot build or warm up goes to `fail_alone` at once, and its memory is freed.
    The others are measured without it; its outcome is None.
    Peak memory is read once, after the blocks: every side's, and no side's bookkeeping.
    """
    cfg = sides[0].spec.config
    before = neighbours(device)
    switches, warm, ready = process_switches(), [], [None]
    for index, side in enumerate(sides):
        try:
            warm.append(warmed_up(side.spec.config, device))
        except Exception as error:  # its own failure (a compile error, a dispatch error), not the others'
            fail_alone(index, error)
            error.__traceback__ = None  # its frames hold its model
            warm.append(None)
            freed(device)
        refuse_changed_switches(switches, side.spec.name)
        ready.append(time.time())  # the next side's start-up begins after this side's warm-up
    live = [index for index, built in enumerate(warm) if built is not None]
    results: list[Measurement | None] = [None] * len(sides)
    if not live:
        return results
    names = [sides[index].spec.name for index in live]
    smaller = [sides[index].spec.name for index in live if warm[index].cfg != sides[index].spec.config]
    if smaller:  # after an out-of-memory beside the other sides: at another batch, the sides would not compare
        raise PairingError(
            f"{', '.join(smaller)} ran out of memory beside the other sides of its process: pairing=process runs "
            "each side alone"
        )
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    clock_start = clocks(device)  # after the warm-ups, which bring an idle GPU's clock up
    sizes = block_sizes(cfg.steps, cfg.blocks)
    order = block_order(len(live), len(sizes), cfg.seed)
    windows = measure_blocks([warm[index].work for index in live], names, order, sizes, cfg.warmup_steps, device)
    peak, kind = peak_memory_mib(device)
    timed = reference(device)  # the machine's speed, once for the process its sides shared
    process = uuid.uuid4().hex
    for place in bookkeeping_order(len(live), cfg.replicate):
        index, window = live[place], windows[place]
        measured = Measured(
            **warm[index]._asdict(), window=window, neighbours=before, clock_start=clock_start, records_from=time.time()
        )
        paired = PairedSummary(sides=names, side=place, blocks=order, block_steps=sizes, process=process)
        own, memory = Stopwatch(), (peak, f"{kind}_all_sides")
        extra = {"paired": paired, "reference": timed}
        outcome = record_measured(measured, sides[index].run_dir, device, own, extra, memory)
        results[index] = outcome._replace(seconds={**outcome.seconds, **own.seconds, "ready_at": ready[index]})
    return results


def bookkeeping_order(sides: int, replicate: int) -> list[int]:
    """The order in which a process's sides are counted, profiled and written: it turns with the round.

    The first side's counts and profile come straight after the window, and its profile after the first counts.
    Each side goes first in as many rounds as the others, so that neither one's profile always pays for that.
    """
    first = replicate % sides
    return [*range(first, sides), *range(first)]


def freed(device: torch.device) -> None:
    """Give back what a failed side held, before the other sides are timed."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def one_process(spec: RunSpec, run_dir: Path, device: torch.device, stopwatch: Stopwatch) -> Measurement:
    """Measure the run in this process and write its records: its summary, its step rows, and where its time
    went (its first step's time, then seconds)."""
    return record_measured(measure(spec.config, device), run_dir, device, stopwatch)


def record_measured(
    measured: Measured,
    run_dir: Path,
    device: torch.device,
    stopwatch: Stopwatch,
    extra: dict[str, Any] | None = None,
    memory: tuple[float, str] | None = None,
) -> Measurement:
    """Count, summarise, profile and write what a run measured.

    `memory` is its peak memory and kind where read before (a paired process's), else read now.
    """
    memory = memory or peak_memory_mib(device)
    with stopwatch("counted_s"):
        extra = {**probe(measured, device, (extra or {}).get("reference")), **(extra or {})}
    if measured.cfg.explain:  # its profiled window leaves the trace profile=true would
        with stopwatch("explained_s"):
            ops = record_ops(measured, device, run_dir)
            extra |= phase_memory(ops, paired="paired" in extra)
    with stopwatch("summarized_s"):
        summary = summarize(measured.work, measured.window, memory, device, extra)
    if measured.cfg.profile and not measured.cfg.explain:
        with stopwatch("profiled_s"):
            profile_steps(measured.work, measured.after + 1, device, run_dir / records.PROFILE)
    with stopwatch("written_s"):
        rows = write(run_dir, measured.warmup.rows, measured.window.rows, summary)
    return Measurement(summary=summary, rows=rows, seconds={"first_step": measured.first_step, **measured.seconds()})


def record_ops(measured: Measured, device: torch.device, run_dir: Path) -> records.Ops | records.OpsFailed:
    """Write the run's ops record (train/op_breakdown.py) and return it.

    Where profiling fails, the record holds its error, and the run goes on.
    """
    try:
        ops = explain_steps(measured.work, measured.after + 1, device, run_dir / records.PROFILE)
    except Exception as error:  # the explanation is beside the measurement: it must never fail the run
        ops = records.OpsFailed(f"{type(error).__name__}: {error}")
    records.write_json(run_dir / records.OPS, ops.to_json())
    return ops


def phase_memory(ops: records.Ops | records.OpsFailed, paired: bool) -> dict[str, Any]:
    """The summary's memory by phase, from the ops record: CUDA's peaks, else the profiler's net allocations.

    A paired process's peaks hold every side's memory (kind ..._all_sides), as its peak_memory_mib does.
    """
    phases = ops.phases if isinstance(ops, records.Ops) else {}
    for field, kind in (("peak_allocated_mib", "cuda_peak_allocated"), ("net_allocated_mib", "profiler_net_allocated")):
        found = {phase: getattr(f, field) for phase, f in phases.items() if getattr(f, field) is not None}
        if found:
            shared = "_all_sides" if paired and field == "peak_allocated_mib" else ""
            return {"phase_memory_mib": found, "phase_memory_kind": kind + shared}
    return {}


def across_ranks(spec: RunSpec, run_dir: Path, device: torch.device, launch: dict[str, Any]) -> Measurement:
    """Measure the run on its ranks and write its records, every rank's steps among them (train/ranks/).

    Its ranks are its job's tasks on Slurm, else processes it starts.
    The rows W&B gets hold every rank's beside the run's.
    """
    results = task_ranks(spec, launch) if launch.get("tasks") else run_ranks(spec, run_dir)
    ranks = Ranks(tuple(results), spec.config.dist.name)
    mine = ranks.run_rank
    phases = workload_class(spec.config.workload).phases
    extra, window = {"ranks": ranks.summary()}, ranks.window()
    summary = summary_of(spec.config, phases, window, mine.memory, device, extra, ranks.workload_summary)
    records.write_steps(run_dir / records.RANKS, ranks.every_step())
    rows = ranks.series(write(run_dir, mine.warmup.rows, mine.window_steps(), summary))
    first_step = min(result.first_step for result in ranks.results)
    seconds = {"first_step": first_step, "warmup_s": mine.warmup.seconds, "window_s": mine.window.seconds}
    return Measurement(summary=summary, rows=rows, seconds=seconds)


def record_started(run_dir: Path, tracker_id: str, launch: dict[str, Any]) -> dict[str, Any]:
    """Record the run running; what every later status of it repeats (how it was launched, its earlier attempts)."""
    launch = {k: v for k, v in launch.items() if k != "ready_since"}
    status = lifecycle.start(run_dir, tracker_id=tracker_id, **launch)
    return launch | {"tracker_id": tracker_id, "attempts": status.attempts, "started_at": status.started_at}


def prepare(spec: RunSpec, run_dir: Path, as_tasks: bool = False) -> torch.device:
    """Clear an earlier start's records, record the config, check it, set up the backends and record the
    environment: the device the run measures on. `as_tasks`: its ranks are its Slurm job's tasks."""
    for stale in (records.STEPS, records.SUMMARY, records.PROFILE, records.OPS, records.RANKS):
        (run_dir / stale).unlink(missing_ok=True)
    shutil.rmtree(run_dir / RANK_LOGS, ignore_errors=True)
    records.write_json(run_dir / records.CONFIG, spec.record())
    device = resolve_device(spec.config.device)
    wrong = checks.problems(spec.config, ranks_here=not as_tasks)
    if elsewhere := imported_elsewhere(spec.config.env.packages):
        wrong.append(elsewhere)
    if wrong:
        raise ValueError("; ".join(wrong))
    backend = configure_backends(spec.config)
    code = {"user_code": user_code(spec.config)} if modules_of(spec.config) else {}
    records.write_json(run_dir / records.ENV, {**environment(device), "backend": backend, **code})
    return device


def measure(cfg: RunConf, device: torch.device) -> Measured:
    """Build and warm up the workload, then time its measured window."""
    before = neighbours(device)
    built = warmed_up(cfg, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    clock_start = clocks(device)  # after the warm-up, which brings an idle GPU's clock up
    window = run_window(built.work, built.cfg.warmup_steps, built.cfg.steps, device)
    return Measured(**built._asdict(), window=window, neighbours=before, clock_start=clock_start)


def probe(measured: Measured, device: torch.device, timed: records.Reference | None = None) -> dict[str, Any]:
    """What is counted after the window, never timed: the summary's extra fields.

    `timed` is the machine's speed where the process read it already.
    """
    work, after = measured.work, measured.after
    return {
        # Counted in one more step, under CUDA's sync debug mode (None: a CPU has no device).
        "host_syncs_per_step": count_host_syncs(lambda: work.step(after, NoClock()), device),
        # Other processes on the run's GPU before and after measuring: such a run shared its device.
        "neighbours": {"start": measured.neighbours, "end": neighbours(device)},
        # The device's clock as the window began and after it: analysis flags runs whose clocks drifted from the
        # sweep's.
        "clocks": {"start": measured.clock_start, "end": clocks(device)},
        # One more step's FLOPs, counted where the counter counts the workload's work.
        "flops_per_step": count_flops(lambda: work.step(after, NoClock())) if work.counts_flops else None,
        # The machine's speed on a fixed workload: compare and history tell a slower machine from slower code.
        "reference": timed or reference(device),
        # What a compiled model ran as, in one more step: compiled graphs, or eager ops where Dynamo gave up.
        "compiled": compiled_graphs(lambda: work.step(after, NoClock()), work.cfg.compile),
    }


def write(run_dir: Path, warmup: list[dict], measured: list[dict], summary: Summary) -> list[dict[str, Any]]:
    """Write the step rows (warm-up ones marked) and the summary; the rows."""
    rows = [{**r, "warmup": True} for r in warmup] + [{**r, "warmup": False} for r in measured]
    records.write_steps(run_dir / records.STEPS, rows)
    records.write_json(run_dir / records.SUMMARY, summary.to_json())
    return rows


def record_done(run_dir: Path, launch: dict[str, Any], timing: dict[str, float]) -> str:
    """Record the run done, with where its time went; when it finished."""
    return lifecycle.finish(run_dir, timing=timing, **launch).finished_at


def record_interrupted(run_dir: Path, launch: dict[str, Any], error: BaseException, why: str | None = None) -> None:
    """Record the run pending again, for `why` where given, else for what its stop said of itself: cancelled,
    preempted, requeued or stopped by the launch's budget, it will run again."""
    outcome_known()
    kind = records.BUDGET if isinstance(error, BudgetSpent) else type(error).__name__
    lifecycle.stop(run_dir, kind, why or said_of_itself(error), **launch)


def said_of_itself(error: BaseException) -> str | None:
    """A SystemExit's message, perfsweep's prefix off (a signal: preemption, a time limit); None for a bare stop."""
    said = error.code if isinstance(error, SystemExit) else None
    return said.removeprefix("perfsweep: ") if isinstance(said, str) else None


def stopped_by_budget(error: BudgetSpent, since: host_state.Reading) -> str:
    """Why the budget stopped the process, with what the host showed since `since`: what other processes and steal
    took of its CPUs, where the machine tells."""
    reader = host_state.here()
    host = HostState.of([reader.block(since, reader.read())])
    shares = {"others' CPU": host.others_share, "steal": host.steal_share}
    told = ", ".join(f"{label} {share:.0%}" for label, share in shares.items() if share is not None)
    return f"{error}; the host over it: {told}" if told else str(error)


def record_failed(
    spec: RunSpec, run_dir: Path, launch: dict[str, Any], error: BaseException
) -> tuple[records.RunError, str]:
    """Record the run failed, with its error (and a known torch issue it matches); its failure and when it was
    recorded, for W&B (`track_failures`). An error of the user's own code is recorded as theirs: its traceback
    from their first frame on, and where in it it was raised. A broken contract (train/contract.py) is recorded as
    its line, then the places in the user's code it names. A side that fails alone leaves the process's time limit
    running: the other sides still measure."""
    cfg = spec.config
    paths = list(targets_of(cfg).values())
    code = user_targets.roots(paths) if paths else ()
    theirs = user_targets.user_error(error, code) if code else None
    known = known_issue(cfg, error)
    if isinstance(error, ContractError):  # one line in the user's terms, then the places it names
        failure = records.RunError(type(error).__name__, str(error), error.traceback(code), known)
    elif theirs is not None:
        said = f"{theirs} (raised in {user_targets.where(theirs, code)})"
        failure = records.RunError(type(theirs).__name__, said, user_targets.user_traceback(theirs, code), known)
    else:
        cause = user_targets.unwrapped(error)
        failure = records.RunError(type(cause).__name__, str(cause), "".join(traceback.format_exception(error)), known)
    return failure, lifecycle.fail(run_dir, failure, **launch).finished_at


def track_failures(sides: list[Side], launches: list[dict[str, Any]], failed: dict) -> None:
    """Tell W&B of each failed side (`failed`: by side, its failure and when it was recorded, or None where a stop
    came as it was recorded); W&B's warnings go into its status."""
    for index, recorded in failed.items():
        if recorded is None:
            continue
        (spec, run_dir, tracker_id), (failure, finished) = sides[index], recorded
        message = {"error": failure.type, "error_message": failure.message[:1000]}
        warnings = track(spec.config.tracker, spec, run_dir, tracker_id, [], message, failed=True)
        if warnings:
            lifecycle.fail(run_dir, failure, finished_at=finished, warnings=warnings, **launches[index])


def record_in_tracker(
    spec: RunSpec,
    run_dir: Path,
    tracker_id: str,
    launch: dict[str, Any],
    rows: list[dict[str, Any]],
    summary: Summary,
    finished: str,
    timing: dict[str, float],
) -> None:
    """Stream the done run to W&B. It starts only now: its service process must not share the host with the timed
    steps; and it gets tracker.timeout_s, past which it is left behind with a warning."""
    tracking = time.time()
    warnings = track(spec.config.tracker, spec, run_dir, tracker_id, rows, summary.to_json() | energy_of(summary))
    if spec.config.tracker.mode != "disabled":
        timing = {**timing, "wandb_s": time.time() - tracking}
        lifecycle.finish(run_dir, finished_at=finished, warnings=warnings, timing=timing, **launch)
