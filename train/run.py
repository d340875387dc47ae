"""The instrumented run: one RunSpec -> records on disk (and a W&B run).

`execute` is the function launch.py hands the launcher, which has submitit run it in a process per run.
"""

import contextlib
import dataclasses
import gc
import math
import resource
import signal
import threading
import time
import traceback
from pathlib import Path
from statistics import median
from typing import Any

import torch

import records
from conf.schema import RunConf
from records import Summary
from sweeps.spec import RunSpec
from train import checks
from train.build import configure_backends, resolve_device
from train.env import clocks, environment, neighbours, process_started_at
from train.flops import count_flops, peak_flops, peak_table
from train.known_issues import known_issue
from train.syncs import count_host_syncs
from train.timing import NoClock, synchronize
from train.tracker import track
from train.window import Window, make_workload, run_window
from train.workloads import Workload


def summary_columns(phases: tuple[str, ...]) -> list[str]:
    return [f"{p}_ms" for p in (*phases, "step")] + [f"{p}_host_ms" for p in (*phases, "step")]


def peak_memory_mib(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10, "process_max_rss"


def summarize(work: Workload, window: Window, device: torch.device, extra: dict[str, Any]) -> Summary:
    """Medians per phase, throughput, memory and losses of the measured window, plus `extra`."""
    memory, memory_kind = peak_memory_mib(device)
    losses = [row["loss"] for row in window.rows if "loss" in row]
    steps_per_s = len(window.rows) / window.seconds
    medians = {c: median(row[c] for row in window.rows) for c in summary_columns(work.phases)}
    flops, peak = extra.get("flops_per_step"), peak_flops(device, work.cfg.precision.name)
    return Summary(
        workload=work.cfg.workload.name,
        phases=tuple(work.phases),
        median_ms=medians,
        steps=len(window.rows),
        steps_per_s=steps_per_s,
        window_s=window.seconds,
        window_ended_at=window.ended_at,  # unix time: W&B starts after it (tests compare)
        timer=window.timer,
        peak_memory_mib=memory,
        peak_memory_kind=memory_kind,
        loss_first=losses[0] if losses else None,
        loss_last=losses[-1] if losses else None,
        nonfinite_losses=sum(not math.isfinite(loss) for loss in losses) if losses else None,
        tflops_per_s=flops / (medians["step_ms"] / 1e3) / 1e12 if flops and medians["step_ms"] > 0 else None,
        peak_tflops=peak / 1e12 if peak else None,
        **extra,
        **work.summary(steps_per_s),
    )


def _interrupt_once(signum, frame) -> None:
    """Ctrl-C reaches a run twice (from the terminal, then forwarded by its job): the first one interrupts
    it; later ones are ignored, so they cannot cut short the recording of the first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupted_once():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _interrupt_once)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def fit(cfg: RunConf, device: torch.device) -> tuple[Workload, Window, RunConf, float]:
    """The workload built and warmed up: its warm-up window, the config it ran with, when its first step began.

    With model.batch_size_retry, an out-of-memory while building or warming up retries with a smaller batch,
    as timm's benchmark.py does (timm.utils.decay_batch_step: 64, 48, 32, 24, ... 1); the run records the
    batch it ran at (summary.batch_size) and the table flags it.
    """
    first_step = None
    while True:
        try:
            work = make_workload(cfg, device)
            first_step = first_step or time.time()
            return work, run_window(work, 0, cfg.warmup_steps, device), cfg, first_step
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


def warm_up(specs: list[RunSpec]) -> None:
    """Import what these runs need, once, in a job that forks them (launcher.isolation=fork): their model zoos,
    W&B's module and, for GPU runs, lightning-fabric's table of peaks (its import calls no CUDA). Nothing here
    touches a device, sets threads or opens a W&B run: a forked child must start as clean as a new interpreter."""
    import importlib
    import os

    # torch.cuda.is_available() asks NVML, as torch.cuda.device_count() does: the CUDA runtime's answer
    # (cudaGetDeviceCount) would initialise the CUDA driver in this job, and no child forked after it could use
    # CUDA. Whatever this job imports may ask.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

    import torch._dynamo  # noqa: F401  (every run counts its FLOPs, whose first count imports it: 2 s of a CPU)

    if any(s.config.device != "cpu" for s in specs):  # a GPU run's summary looks up the GPU's peak FLOP/s
        peak_table()

    needed = {s.config.model.source for s in specs if "model" in s.config.workload.reads}
    needed |= {"wandb"} if any(s.config.tracker.mode != "disabled" for s in specs) else set()
    for name in sorted(needed):
        try:
            importlib.import_module(name)
        except ImportError:  # the run reports it, as a spawned one would
            pass


CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver_initialised() -> bool:
    """Whether this process has initialised the CUDA driver (cuInit), which torch.cuda.is_initialized() does not
    tell: torch.cuda.is_available() does it without PYTORCH_NVML_BASED_CUDA_CHECK=1, so can Triton or NVML. The
    driver's cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED until then; a host without the driver has none."""
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int()
    return driver.cuDeviceGetCount(ctypes.byref(count)) != CUDA_ERROR_NOT_INITIALIZED


def fork_hazard() -> str | None:
    """What a child forked now would inherit that it must not: a CUDA context or an initialised CUDA driver (a
    forked child then fails at its first CUDA call with "CUDA error: initialization error")."""
    spawn = "a forked child could not use the GPU (launcher.isolation=spawn)"
    if torch.cuda.is_initialized():
        return f"CUDA is initialised in this process: {spawn}"
    if cuda_driver_initialised():
        return f"the CUDA driver is initialised in this process (cuInit: a CUDA call, Triton, NVML): {spawn}"
    return None


def outcome_known() -> None:
    """Stop the run's time limit, the interval timer its job set (SIGALRM, launcher.timeout_min): the limit is on
    what the run does, not on recording how it ended nor on W&B after it (tracker.timeout_s limits that)."""
    signal.setitimer(signal.ITIMER_REAL, 0)


# When this process last finished a run (None: it has run none): a later run's start-up counts from there.
_PROCESS: dict[str, float | None] = {"free_since": None}


def execute(spec: RunSpec, run_dir: Path, tracker_id: str, launch: dict[str, Any]) -> Summary:
    """Run `spec`, write its records to `run_dir`, and return its summary; failures are recorded, then raised.

    `launch` (how many jobs ran at once, the job id, host and log) goes into every status the run writes; its
    `forked_at` (unix time), where a job forked this process for the run, is where the run's start-up begins.
    A run starts over from scratch: an earlier start's step rows and summary are removed first.
    """
    with interrupted_once():
        try:
            return _execute(spec, run_dir, tracker_id, launch)
        finally:
            _PROCESS["free_since"] = time.time()


def _execute(spec: RunSpec, run_dir: Path, tracker_id: str, launch: dict[str, Any]) -> Summary:
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = spec.config
    launch = dict(launch)
    # When this process was ready for this run: its fork (by the forking job's clock), the previous run's end in
    # this process, or the process's start.
    ready_since = launch.pop("forked_at", None) or _PROCESS["free_since"] or process_started_at() or time.time()
    history = records.read_status(run_dir, move_aside=True).history()
    launch |= {"tracker_id": tracker_id, "attempts": history, "started_at": records.now()}
    records.write_status(run_dir, records.RUNNING, **launch)
    try:
        for stale in (records.STEPS, records.SUMMARY, records.PROFILE):
            (run_dir / stale).unlink(missing_ok=True)
        records.write_json(run_dir / records.CONFIG, spec.record())
        device = resolve_device(cfg.device)
        found = checks.problems(cfg)
        if found:
            raise ValueError("; ".join(found))
        backend = configure_backends(cfg)
        records.write_json(run_dir / records.ENV, {**environment(device), "backend": backend})
        before, clock_start = neighbours(device), clocks(device)
        work, warmup, cfg, first_step = fit(cfg, device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        window = run_window(work, cfg.warmup_steps, cfg.steps, device)
        counting = time.time()
        extra = {
            # Counted in one more step after the window, under CUDA's sync debug mode (None: a CPU has no device).
            "host_syncs_per_step": count_host_syncs(lambda: work.step(cfg.warmup_steps + cfg.steps, NoClock()), device),
            # Other processes on the run's GPU before and after measuring: such a run shared its device.
            "neighbours": {"start": before, "end": neighbours(device)},
            # The device's clock before and after: analysis flags runs whose clocks drifted from the sweep's.
            "clocks": {"start": clock_start, "end": clocks(device)},
            # One more step's FLOPs, counted (never timed) after the window.
            "flops_per_step": count_flops(lambda: work.step(cfg.warmup_steps + cfg.steps, NoClock())),
        }
        summarizing = time.time()
        counted_s = summarizing - counting
        summary = summarize(work, window, device, extra)
        summarized_s = time.time() - summarizing
        if cfg.profile:
            profile_steps(work, cfg.warmup_steps + cfg.steps + 1, device, run_dir / records.PROFILE)
        rows = [{**r, "warmup": True} for r in warmup.rows] + [{**r, "warmup": False} for r in window.rows]
        writing = time.time()
        records.write_steps(run_dir / records.STEPS, rows)
        records.write_json(run_dir / records.SUMMARY, summary.to_json())
        written_s = time.time() - writing
        outcome_known()
        finished = records.now()
        timing = {
            "startup_s": first_step - ready_since,
            "warmup_s": warmup.seconds,
            "window_s": window.seconds,
            "records_s": time.time() - (window.ended_at or time.time()),
            "counted_s": counted_s,
            "summarized_s": summarized_s,
            "written_s": written_s,
        }
        records.write_status(run_dir, records.DONE, finished_at=finished, timing=timing, **launch)
    except (KeyboardInterrupt, SystemExit) as error:
        # Cancelled, preempted or requeued: nothing is wrong with the run, and it will run again.
        outcome_known()
        interrupted = {"type": type(error).__name__, "at": records.now()}
        records.write_status(run_dir, records.PENDING, interrupted=interrupted, **launch)
        raise
    except Exception as error:
        outcome_known()
        failure = records.RunError(type(error).__name__, str(error), traceback.format_exc(), known_issue(cfg, error))
        finished = records.now()
        records.write_status(run_dir, records.FAILED, finished_at=finished, error=failure, **launch)
        failed = {"error": failure.type, "error_message": failure.message[:1000]}
        warnings = track(cfg.tracker, spec, run_dir, tracker_id, [], failed, failed=True)
        if warnings:
            records.write_status(
                run_dir, records.FAILED, finished_at=finished, error=failure, warnings=warnings, **launch
            )
        raise
    # The run is done, whatever W&B does now. It starts only now: its service process must not share the host
    # with the timed steps; and it gets tracker.timeout_s, past which it is left behind with a warning.
    tracking = time.time()
    warnings = track(cfg.tracker, spec, run_dir, tracker_id, rows, summary.to_json())
    if cfg.tracker.mode != "disabled":
        timing["wandb_s"] = time.time() - tracking
        records.write_status(run_dir, records.DONE, finished_at=finished, warnings=warnings, timing=timing, **launch)
    return summary
