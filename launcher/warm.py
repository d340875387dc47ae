"""Runs forked from a warm job (launcher.isolation=fork).

The job pays Python's and torch's start-up once, and every run still gets a process of its own.

The job imports what runs need: warm_up of Runner.imports (torch, timm, W&B...).
It does so without touching a device, starting thread pools or opening a W&B run.
It then forks a child per run, `parallelism` at a time.
Each child is pinned to a free GPU of `gpus` through CUDA_VISIBLE_DEVICES.
The child sets it before it initialises CUDA.
With more than one at a time, each is also pinned to its share of the job's CPUs (launcher/slots.py).

A child has its own:

- CUDA context and allocator;
- cuDNN autotuning and compile caches;
- RNG (the run seeds it);
- threads, as many as its CPUs (it sets them itself).

Before each fork, the job checks that nothing it holds would leak into the child; it does not assume it.
fork_hazard looks for CUDA or its driver initialised.
A child can die by a signal or the OOM killer.
It is then recorded as a killed run is: LostRun, quoting its log.
The job goes on with the next run.
Each child writes its output to its own log, beside the job's.

The job has no time limit of its own that matters.
Each run has one (launcher.timeout_min), from its fork.
A run that reaches it stops itself and records RunTimeout.
A run stuck in a C call cannot stop itself.
The job kills it GRACE_S later and records it so.
The launch's budget stops a run too (launcher.budget_s).
A run stuck past it is killed BUDGET_GRACE_S later and left pending, as the budget's.
Either way the job goes on with the next run, so a sweep of any length runs to its end.
"""

import collections
import ctypes
import dataclasses
import importlib
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

import submitit

from perfsweep import records
from perfsweep.launcher import turns
from perfsweep.launcher.run_job import (
    BUDGET_GRACE_S,
    GRACE_S,
    SLURM_WARNING_S,
    TIMEOUT,
    RunJob,
    Runner,
    again_after_timeout,
    at_time_limit,
    every_run,
    execute_run,
    ignore_later_interrupts,
    leave_over_budget,
    leave_pending,
    lost,
    unrecordable,
)
from perfsweep.launcher.slots import Place, Slots
from perfsweep.records import lifecycle
from perfsweep.sweeps.spec import RunSpec

POLL_S = 0.1  # how often children are looked at where the kernel gives no pidfd to wait on (Linux < 5.3)


@dataclasses.dataclass
class Child:
    """A run's process, forked from this job.

    It holds where the process was put, its log, and when it is killed if still going.
    """

    run: RunJob
    place: Place
    log: Path | None
    deadline: float | None  # time.monotonic() past its limit or the launch's budget, and grace; None: neither
    pidfd: int | None  # readable once the process has ended
    by_budget: bool = False  # the deadline is the budget's
    killed: bool = False  # for going past its deadline


def warm_up(runner: Runner, specs: list[RunSpec]) -> None:
    """Import what the runs need (`runner.imports`), once, in the job that forks them.

    Nothing imported may touch a device, set threads or open a W&B run.
    A forked child must start as clean as a new interpreter.
    Some modules cannot be imported, such as the user's own that raises as it is imported.
    Those are left to the run, which reports them as a spawned one would.
    """
    # With this, torch.cuda.is_available() asks NVML, as torch.cuda.device_count() does.
    # The CUDA runtime's answer (cudaGetDeviceCount) would initialise the CUDA driver in this job.
    # No child forked after that could use CUDA.
    # Whatever this job imports may ask, and so may `runner.imports`.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    for name in runner.imports(specs):
        try:
            importlib.import_module(name)
        except Exception:
            pass


CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver_initialised() -> bool:
    """Whether this process has initialised the CUDA driver (cuInit).

    torch.cuda.is_initialized() does not tell.
    torch.cuda.is_available() initialises it without PYTORCH_NVML_BASED_CUDA_CHECK=1.
    Triton or NVML can initialise it too.
    The driver's cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED until then.
    A host without the driver has none.
    """
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int()
    return driver.cuDeviceGetCount(ctypes.byref(count)) != CUDA_ERROR_NOT_INITIALIZED


def fork_hazard() -> str | None:
    """What a child forked now would inherit that it must not: a CUDA context or an initialised CUDA driver.

    A forked child then fails at its first CUDA call with "CUDA error: initialization error".

    Returns:
        Why a child must not be forked, or None.
    """
    spawn = "a forked child could not use the GPU (launcher.isolation=spawn)"
    torch = sys.modules.get("torch")  # a job that never imported torch has no CUDA context of torch's
    if torch is not None and torch.cuda.is_initialized():
        return f"CUDA is initialised in this process: {spawn}"
    if cuda_driver_initialised():
        return f"the CUDA driver is initialised in this process (cuInit: a CUDA call, Triton, NVML): {spawn}"
    return None


def fork_runs(
    runner: Runner, runs: list[RunJob], parallelism: int, gpus: tuple[int, ...], info: dict[str, Any]
) -> dict[str, str]:
    """Run every run in a child of this process.

    A run that reached its time limit and has retries left goes back to the end of the queue.

    Returns:
        Each run's final state, by name; pending where it was interrupted.
    """
    slots = Slots(parallelism, gpus, share_cpus=True)
    queue = collections.deque(runs)
    children: dict[int, Child] = {}
    states: dict[str, str] = {}
    started, took_s = {}, []  # each process's start (monotonic) by pid; the seconds each ended one took
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGUSR2)}
    signal.signal(signal.SIGINT, ignore_later_interrupts)
    _pass_preemption_on(children)
    try:
        # after the handlers: Ctrl-C here leaves runs pending
        warm_up(runner, [run.spec for run in every_run(runs)])
        signal.signal(signal.SIGINT, ignore_later_interrupts)  # again: an import may have put in its own
        if runs and runs[0].turn is not None:
            turns.warm(runs[0].turn).touch()
        while queue or children:
            while queue and slots.open(len(children)):
                run = _take(queue, wait=not children)
                if run is None:  # none has its turn yet; a run going on ends first
                    break
                if all(records.read_status(side.run_dir).state == records.DONE for side in run.every):  # earlier
                    states |= {side.spec.name: records.DONE for side in run.every}
                    pass_turn(run, queue)
                    continue
                if leave_over_budget([run], took_s):
                    states |= {side.spec.name: records.PENDING for side in run.every}
                    pass_turn(run, queue)
                    continue
                hazard = fork_hazard()
                if hazard:
                    raise RuntimeError(f"cannot fork run {run.spec.name} from this job: {hazard}")
                place = slots.take()
                log = _log_of(run, info)
                forked_at = time.time()  # the run's start-up counts from here, on the clock its first step reads
                pid = os.fork()
                if pid == 0:
                    _child(runner, run, place, log, {**info, "ready_since": forked_at})  # never returns
                started[pid] = time.monotonic()
                deadline, by_budget = _kill_deadline(run)
                children[pid] = Child(run, place, log, deadline, _pidfd(pid), by_budget)
            if not children:  # the rest were done by an earlier start of this job (a requeue)
                continue
            pid, wait_status = _reap(children)
            child = children.pop(pid)
            took_s.append(time.monotonic() - started.pop(pid))
            _close(child)
            slots.release(child.place)
            ended = {side.spec.name: _ended(child, side, pid, wait_status) for side in child.run.every}
            if ended[child.run.spec.name] == records.FAILED and again_after_timeout(child.run):
                queue.append(child.run)
                continue
            states |= ended
            pass_turn(child.run, queue)
    except KeyboardInterrupt as stop:  # Ctrl-C, or the launcher cancelling this job: children stop as runs do
        _stop(children)
        # not started: pending, not lost (the job was stopped)
        leave_pending(every_run(list(queue)), type(stop).__name__)
        raise
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        for child in children.values():
            _close(child)
    return states


def _kill_deadline(run: RunJob) -> tuple[float | None, bool]:
    """When the job kills a child that has not stopped (time.monotonic()), and whether that is for the budget.

    A run stops itself at its time limit or when the launch's budget runs out, whichever comes first
    (run_job.time_limit).
    One stuck in a C call cannot.
    It is killed GRACE_S past its limit, or BUDGET_GRACE_S past the budget where that came first.
    """
    limit_s = run.limit_s * len(run.every) if run.limit_s is not None else None  # a run's for each side
    left = run.until - time.time() if run.until is not None else None
    if left is not None and (limit_s is None or left < limit_s):  # as time_limit decides which stops the run
        return time.monotonic() + left + BUDGET_GRACE_S, True
    return (time.monotonic() + limit_s + GRACE_S if limit_s is not None else None), False


def _take(queue: collections.deque, wait: bool) -> RunJob | None:
    """The next run to fork: the queue's first, or where runs take turns, the first whose turn has come.

    Args:
        wait: wait for a turn; else None where no run has one.
    """
    if queue[0].turn is None:
        return queue.popleft()
    waiting = [run.turn for run in queue]
    turn = turns.next_turn(waiting) if wait else turns.given(waiting)
    if turn is None:
        return None
    index = waiting.index(turn)
    run = queue[index]
    del queue[index]
    return run


def pass_turn(run: RunJob, queue: collections.deque) -> None:
    """Give the run after `run` its turn, where runs take turns, `run`'s process has ended and this job has runs left.

    After the job's last run, the launcher gives the turn once the job has ended.
    """
    if queue and run.turn is not None and run.turn.then is not None:
        run.turn.then.touch()


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # an older kernel or Python: children are polled instead
        return None


def _close(child: Child) -> None:
    if child.pidfd is not None:
        os.close(child.pidfd)
        child.pidfd = None


def _reap(children: dict[int, Child]) -> tuple[int, int]:
    """Wait until one of the children ends.

    A child past its deadline is killed first, unless its run has recorded how it ended.
    Such a run is then in W&B, which has its own limit, tracker.timeout_s.

    Returns:
        The child's pid and wait status.
    """
    while True:
        for pid in children:
            ended, wait_status = os.waitpid(pid, os.WNOHANG)
            if ended:
                return ended, wait_status
        now = time.monotonic()
        for pid, child in children.items():
            if child.deadline is None or now < child.deadline or child.killed:
                continue
            if all(records.read_status(side.run_dir).state in records.FINAL for side in child.run.every):
                child.deadline = None
            else:
                child.killed = True
                _signal(pid, signal.SIGKILL)
        waits = [c.deadline - now for c in children.values() if c.deadline is not None and not c.killed]
        timeout = max(min(waits), 0.0) if waits else None
        if any(child.pidfd is None for child in children.values()):
            time.sleep(POLL_S if timeout is None else min(timeout, POLL_S))
            continue
        ended = select.poll()
        for child in children.values():
            ended.register(child.pidfd, select.POLLIN)
        ended.poll(None if timeout is None else timeout * 1000)


def _log_of(run: RunJob, info: dict[str, Any]) -> Path | None:
    """A child's own log, beside its job's.

    Its output would otherwise interleave with its siblings'.
    """
    return Path(info["log"]).with_name(f"{info['job_id']}_{run.spec.name}.log") if info.get("log") else None


def _pass_preemption_on(children: dict[int, Any]) -> None:
    """Pass Slurm's warning of a preemption or time limit (SIGUSR2) on to the running children.

    The warning reaches the job.
    The job interrupts its running children first.
    Each records its run pending, to start over.
    At its time limit, without launcher.timeout_retries, the job then fails them and ends: a run requeued starts
    over, and would reach the limit again.
    Else the job's own handler acts: submitit's checkpoints and requeues.
    Outside a submitit job, the job ends.
    """
    job_handler = signal.getsignal(signal.SIGUSR2)

    def preempted(signum, frame) -> None:
        stopped = [side for child in children.values() for side in child.run.every]
        _stop(children, signal.SIGUSR2)
        if stopped and not stopped[0].spec.config.launcher.timeout_retries and at_time_limit():
            out_of_time(stopped, "launcher.timeout_retries=0")
            raise SystemExit("perfsweep: the job reached its time limit; its runs are not requeued")
        if callable(job_handler):
            try:
                job_handler(signum, frame)
            except submitit.core.utils.UncompletedJobError as ended:  # not requeued: its time limit, once too often
                out_of_time(stopped, str(ended))
                raise
        raise SystemExit(f"perfsweep: interrupted by signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGUSR2, preempted)


def out_of_time(runs: list[RunJob], why: str) -> None:
    """Record the runs a job stopped at Slurm's warning of its time limit as failed: their job is not requeued.

    A run starts over when requeued, so one that needs longer than its job's time would never end.
    """
    for run in runs:
        status = records.read_status(run.run_dir)
        if status.state != records.PENDING:
            continue
        minutes = run.spec.config.launcher.timeout_min
        message = (
            f"its Slurm job reached Slurm's warning {SLURM_WARNING_S} s before its time limit "
            f"(launcher.timeout_min={minutes:g}) before the run was done, and is not requeued ({why}); raise "
            "launcher.timeout_min"
        )
        lifecycle.fail(run.run_dir, records.RunError(TIMEOUT, message, ""), attempts=status.history())


def _stop_the_run(signum, frame) -> None:
    """A child's SIGUSR2, from Slurm or passed on by its job: the run records itself pending, once."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    raise SystemExit(f"perfsweep: the run was interrupted by {signal.Signals(signum).name} (preemption, time limit)")


def _child(runner: Runner, run: RunJob, place: Place, log: Path | None, info: dict[str, Any]) -> None:
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
        place.enter()
        mine = {**info, "pid": os.getpid(), "log": str(log) if log else info.get("log")}
        code = 0 if execute_run(runner, run, mine) is None else 1
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


def _ended(child: Child, run: RunJob, pid: int, wait_status: int) -> str:
    """The final state of `run`, the child's run or a side beside it, once the child's process has ended.

    If the run could not record one, it is recorded as lost.
    Where it was killed past its time limit, it is recorded as timed out.
    """
    status = records.read_status(run.run_dir)
    if status.state in records.FINAL or (status.state == records.PENDING and status.interrupted):
        return status.state
    if child.killed and child.by_budget:
        why = (
            f"launcher.budget_s: the launch's budget ran out and this run's process had not stopped "
            f"{BUDGET_GRACE_S:g} s later (a call Python cannot interrupt): killed"
        )
        try:
            return lifecycle.stop_unless_recorded(run.run_dir, records.BUDGET, why).state
        except records.RecordWriteError as error:
            raise unrecordable(run, error) from error
    kind = TIMEOUT if child.killed else "LostRun"
    if child.killed:
        limit = f"launcher.timeout_min={child.run.limit_s / 60:g}"
        how = f"killed {GRACE_S:g} s past its time limit, {limit}: it had not stopped"
    elif os.WIFSIGNALED(wait_status):
        how = f"killed by {signal.Signals(os.WTERMSIG(wait_status)).name}"
    else:
        how = f"exit status {os.waitstatus_to_exitcode(wait_status)}"
    try:
        lost(run.run_dir, f"the run's process {pid}", child.log, kind=kind, how=how)
    except records.RecordWriteError as error:
        raise unrecordable(run, error) from error
    return records.FAILED


def _stop(children: dict[int, Any], signum: int = signal.SIGINT, grace_s: float = 15.0) -> None:
    """Interrupt the children and wait for them; kill what is left after grace_s.

    Each child records its run pending.
    """
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
