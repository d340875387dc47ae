"""Runs forked from a warm job (launcher.isolation=fork): the job pays Python's and torch's start-up once, and
every run still gets a process of its own.

The job imports what runs need (Runner.warm: torch, torchvision, timm, the workloads) without touching a
device, starting thread pools or opening a W&B run, then forks a child per run: `parallelism` at a time,
each pinned to a free GPU of `gpus` through CUDA_VISIBLE_DEVICES (set in the child, before it initialises
CUDA). A child has its own CUDA context, allocator, cuDNN autotuning, compile caches and RNG (the run seeds
it); it sets its own threads. Before each fork the job checks, rather than assumes, that nothing it holds
would leak into the child (Runner.fork_hazard: CUDA initialised). A child that dies (a signal, the OOM
killer) is recorded as a killed run is (LostRun, quoting its log), and the job goes on with the next run.
Each child writes its output to its own log, beside the job's.
"""

import collections
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import records
from launcher.runs import RunJob, Runner, leave_pending, lost, run_one


def fork_runs(
    runner: Runner, runs: list[RunJob], parallelism: int, gpus: tuple[int, ...], info: dict[str, Any]
) -> dict[str, str]:
    """Run every run in a child of this process; each run's final state (pending where it was interrupted)."""
    runner.warm([run.spec for run in runs])
    free = list(gpus)
    limit = min(parallelism, len(gpus)) if gpus else parallelism
    queue = collections.deque(runs)
    children: dict[int, tuple[RunJob, int | None, Path | None]] = {}
    states: dict[str, str] = {}
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGUSR2)}
    signal.signal(signal.SIGINT, _interrupt_once())
    _pass_preemption_on(children)
    try:
        while queue or children:
            while queue and len(children) < limit:
                run = queue.popleft()
                if records.read_status(run.run_dir).state == records.DONE:  # by an earlier start of this job
                    states[run.spec.name] = records.DONE
                    continue
                hazard = runner.fork_hazard()
                if hazard:
                    raise RuntimeError(f"cannot fork run {run.spec.name} from this job: {hazard}")
                gpu = free.pop(0) if gpus else None
                log = _log_of(run, info)
                pid = os.fork()
                if pid == 0:
                    _child(runner, run, gpu, log, info)  # never returns
                children[pid] = (run, gpu, log)
            if not children:  # the rest were done by an earlier start of this job (a requeue)
                continue
            pid, wait_status = os.wait()
            run, gpu, log = children.pop(pid)
            if gpu is not None:
                free.append(gpu)
            states[run.spec.name] = _ended(run, pid, wait_status, log)
    except KeyboardInterrupt as stop:  # Ctrl-C, or the launcher cancelling this job: children stop as runs do
        _stop(children)
        leave_pending(list(queue), type(stop).__name__)  # not started: pending, not lost (the job was stopped)
        raise
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return states


def _log_of(run: RunJob, info: dict[str, Any]) -> Path | None:
    """A child's own log, beside its job's (its output would otherwise interleave with its siblings')."""
    return Path(info["log"]).with_name(f"{info['job_id']}_{run.spec.name}.log") if info.get("log") else None


def _interrupt_once():
    """Ctrl-C reaches the job twice (from the terminal, then from the launcher cancelling it): the first one
    stops it; later ones must not cut short its stopping of the children."""
    stopping = []

    def handler(signum, frame) -> None:
        if stopping:
            return
        stopping.append(True)
        raise KeyboardInterrupt

    return handler


def _pass_preemption_on(children: dict[int, Any]) -> None:
    """Slurm's warning of a preemption or time limit (SIGUSR2) reaches the job: its running children are
    interrupted first (each records its run pending, to start over), then the job's own handler (submitit's:
    checkpoint, requeue) acts; outside a submitit job, the job ends."""
    job_handler = signal.getsignal(signal.SIGUSR2)

    def preempted(signum, frame) -> None:
        _stop(children, signal.SIGUSR2)
        if callable(job_handler):
            job_handler(signum, frame)
        raise SystemExit(f"perfsweep: interrupted by signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGUSR2, preempted)


def _stop_the_run(signum, frame) -> None:
    """A child's SIGUSR2 (from Slurm, or passed on by its job): the run records itself pending, once."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    raise SystemExit(f"perfsweep: the run was interrupted by {signal.Signals(signum).name} (preemption, time limit)")


def _child(runner: Runner, run: RunJob, gpu: int | None, log: Path | None, info: dict[str, Any]) -> None:
    code = 1
    try:
        if log is not None:
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
                os.dup2(out, stream.fileno())
            os.close(out)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the run installs its own
        signal.signal(signal.SIGUSR2, _stop_the_run)  # the job requeues itself; the run stops to start over
        if gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
        mine = {**info, "pid": os.getpid(), "log": str(log) if log else info.get("log")}
        code = 0 if run_one(runner.execute, run, mine) is None else 1
    except SystemExit as stop:  # its records cannot be written: the reason, as its log's last line
        print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:  # the run recorded itself pending
        code = 130
    except BaseException as error:  # noqa: BLE001 - whatever happens, the child must not return into the job
        print(f"perfsweep: run {run.spec.name}: {type(error).__name__}: {error}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _ended(run: RunJob, pid: int, wait_status: int, log: Path | None) -> str:
    """The run's final state once its process has ended; recorded as lost if the run could not record one."""
    status = records.read_status(run.run_dir)
    if status.state in records.FINAL or (status.state == records.PENDING and status.interrupted):
        return status.state
    if os.WIFSIGNALED(wait_status):
        how = f"killed by {signal.Signals(os.WTERMSIG(wait_status)).name}"
    else:
        how = f"exit status {os.waitstatus_to_exitcode(wait_status)}"
    found = lost(run.run_dir, f"the run's process {pid} ({how})", log)
    try:
        records.save_status(run.run_dir, found)
    except records.RecordWriteError as error:
        raise SystemExit(f"perfsweep: run {run.spec.name}: its records cannot be written: {error}") from error
    return records.FAILED


def _stop(children: dict[int, Any], signum: int = signal.SIGINT, grace_s: float = 15.0) -> None:
    """Interrupt the children (each records its run pending) and wait for them; kill what is left after grace_s."""
    for pid in children:
        _signal(pid, signum)
    deadline = time.monotonic() + grace_s
    while children and time.monotonic() < deadline:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            children.pop(pid, None)
        else:
            time.sleep(0.05)
    for pid in children:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
