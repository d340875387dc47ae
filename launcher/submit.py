"""Submits a plan's runs through submitit and, unless told not to wait, follows them to the end.

Local and debug jobs run on this host: perfsweep keeps `parallelism` of them going. Slurm jobs are
submitted at once as job arrays (split below MaxArraySize), Slurm honouring `parallelism` as the
array's %N. Either way a run's state is read from its records; the scheduler is asked (once per
poll for all jobs) only which jobs are still alive, to catch a job that died without records.
"""

import collections
import contextlib
import dataclasses
import itertools
import os
import shlex
import sys
import time
from pathlib import Path

import submitit

from perfsweep import records
from perfsweep.conf.schema import LauncherConf
from perfsweep.conf.targets import modules_of
from perfsweep.launcher import sweepdir
from perfsweep.launcher.executor import (
    BACKENDS,
    SchedulerUnavailable,
    cluster_max_array_size,
    isolation,
    make_executor,
    pinned_gpus,
    process_start,
    ranks_parameters,
)
from perfsweep.launcher.jobs import RunPack
from perfsweep.launcher.progress import Progress
from perfsweep.launcher.runs import NOWHERE, Place, RunJob, Runner, Slots, again_after_timeout, lost, never_started
from perfsweep.launcher.snapshot import snapshot
from perfsweep.launcher.status import in_flight
from perfsweep.records import DONE, FINAL, PENDING, RUNNING, Status, Summary
from perfsweep.records.lock import sweep_lock
from perfsweep.sweeps.plan import Plan

POLL_S = {True: 0.5, False: 5.0}  # on this host / through a scheduler (sparing its controller), unless configured


@dataclasses.dataclass
class Outcome:
    """How a launch ended: the final state of each run it followed, runs skipped as done or still in
    flight from an earlier launch, jobs submitted."""

    states: dict[str, str]
    skipped: list[str]
    busy: list[str]
    job_ids: list[str]
    followed: bool

    @property
    def failed(self) -> list[str]:
        return [name for name, state in self.states.items() if state != DONE]


def chunks_by(items: list, size: int, kind) -> list[tuple[int, list]]:
    """Chunks of up to `size` consecutive items of one kind (a job runs one Python, with one shape of tasks), each
    with its index."""
    chunks, start = [], 0
    for _, same in itertools.groupby(items, key=kind):
        group = list(same)
        chunks += [(start + i, group[i : i + size]) for i in range(0, len(group), size)]
        start += len(group)
    return chunks


def job_kind(run: RunJob) -> tuple[str | None, int | None, bool]:
    """What a job must be to run `run`: its environment's Python, and for a run whose ranks are its tasks, their
    number a node and whether they are on GPUs (a GPU each)."""
    return run.python, run.ranks_per_node, run.ranks_per_node is not None and run.spec.config.device != "cpu"


def by_kind(packs: list[list[RunJob]]) -> list[list[RunJob]]:
    """The packs with those of one kind together, in their order, the kinds in the order they first come: an
    array for each kind, not one each time an interleaved sweep changes kind."""
    kinds = {}
    for pack in packs:
        kinds.setdefault(job_kind(pack[0]), []).append(pack)
    return [pack for same in kinds.values() for pack in same]


def packs_of(runs: list[RunJob], size: int) -> list[list[RunJob]]:
    """Packs of up to `size` consecutive runs of one kind. A run whose ranks are its job's tasks has its job to
    itself: the tasks must enter each run's collectives together, and a run that failed on one of them before its
    first would leave the others waiting for it in the next run's."""
    packs = []
    for _, pack in chunks_by(runs, size, job_kind):
        packs += [[run] for run in pack] if pack[0].ranks_per_node else [pack]
    return packs


def max_array_size(configured: int | None) -> int:
    """The most tasks one array may hold: the config's, else the cluster's MaxArraySize (ids run 0..max-1)."""
    return configured or cluster_max_array_size()


class SubmissionFailed(RuntimeError):
    """The scheduler refused a submission part-way: what was submitted (and recorded) and what was not."""


def _last_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _detail(run_dir: Path, status: Status) -> str:
    record = records.read_record(run_dir / records.SUMMARY)
    if status.state == DONE and isinstance(record, dict):
        summary = Summary.from_json(record)
        rate = f"{summary.samples_per_s:.1f} samples/s" if summary.samples_per_s is not None else ""
        return f"step {summary.median('step'):.3g} ms {rate}".rstrip()
    return status.error_line(200)


def _job_ended(run: RunJob, job: submitit.Job, status: Status) -> Status:
    """A job that ended without this run's final records: a run it started is failed as lost, with the log's
    last lines; a run it never started is pending, with why. (If that cannot be recorded, the launcher still
    goes on, knowing it.)"""
    what, log = f"job {job.job_id}", job.paths.stderr
    try:
        if status.state == PENDING:
            return never_started(run, what, log)
        return lost(run.run_dir, what, log, job_id=job.job_id)
    except records.RecordWriteError as error:
        warn(f"run {run.spec.name} ended with {what}, but that cannot be recorded: {error}")
        if status.state == PENDING:
            ended = {"type": "JobEnded", "at": records.now(), "reason": f"{what} ended"}
            return dataclasses.replace(status, interrupted=ended)
        return dataclasses.replace(status, state=records.FAILED, error=records.RunError("LostRun", f"{what} ended"))


def warn(message: str) -> None:
    print(f"perfsweep: warning: {message}", file=sys.stderr)


class Dispatcher:
    """Submits packs (all at once, or as `slots` allow on this host) and reports each run's end."""

    def __init__(
        self,
        sweep_dir: Path,
        executor: submitit.Executor,
        conf: LauncherConf,
        pack: RunPack,
        progress: Progress,
        slots: Slots,
    ):
        self.sweep_dir, self.executor, self.conf, self.backend_name = sweep_dir, executor, conf, conf.name
        self.backend, self.pack, self.progress = BACKENDS[conf.name], pack, progress
        self.active: dict[str, tuple[submitit.Job, list[RunJob]]] = {}
        self.states: dict[str, str] = {}
        self.slots, self.place_of = slots, {}  # room for another job on this host; where each job was put

    def submit(self, packs: list[list[RunJob]], chunk: int, place: Place = NOWHERE) -> list[str]:
        """Submit packs, `chunk` to an array, each array's jobs recorded the moment it is queued; a pack given a
        `place` sees its GPU alone (CUDA_VISIBLE_DEVICES) and runs on its CPUs. SubmissionFailed if the scheduler
        refuses one."""
        if place.gpu is not None:
            self.executor.update_parameters(visible_gpus=(place.gpu,), gpus_per_node=1)
        placed = self.pack.on_cpus(place.cpus)
        submitted: list[str] = []
        for start, part in chunks_by(packs, chunk, lambda pack: job_kind(pack[0])):
            # an array's jobs start one Python, that of its runs' environment, and have one shape of tasks
            python, ranks_per_node, on_gpus = job_kind(part[0][0])
            self.executor.python = shlex.quote(python or sys.executable)
            if not self.backend.on_this_host:
                self.executor.update_parameters(**ranks_parameters(self.conf, ranks_per_node, on_gpus))
            try:
                jobs = list(zip(self.executor.map_array(placed, part), part, strict=True))
            except Exception as error:  # sbatch refused: a submit limit, MaxJobCount, a controller down
                left = sum(len(pack) for pack in packs[start:])
                arrays = sorted({job_id.split("_")[0] for job_id in submitted})
                done = f"job(s) {', '.join(arrays)} were submitted and recorded" if submitted else "nothing was"
                raise SubmissionFailed(
                    f"submitting the sweep's runs failed: {_last_line(error)}\n{done}; {left} runs were not "
                    f"submitted (pending). `python launch.py status {self.sweep_dir}` follows what was; "
                    f"`python launch.py resume {self.sweep_dir}` submits the rest."
                ) from error
            self._track(jobs, place)
            submitted += [job.job_id for job, _ in jobs]
        return submitted

    def _track(self, jobs: list[tuple[submitit.Job, list[RunJob]]], place: Place) -> None:
        """Follow the jobs, and record which job each run went to (in jobs.json: what status and resume know)."""
        for job, pack in jobs:
            self.active[job.job_id] = (job, pack)
            self.place_of[job.job_id] = place
        queued = {
            "submitted_at": records.now(),
            "launcher": self.backend_name,
            **({"gpu": place.gpu} if place.gpu is not None else {}),
            **({"cpus": list(place.cpus)} if place.cpus is not None else {}),
        }
        entries = {}
        for job, pack in jobs:
            # a local job's id is its pid: its start tells it from a later process given the same pid
            start = process_start(int(job.job_id)) if self.backend_name == "local" else None
            entry = {"job_id": job.job_id, "log": str(job.paths.stdout), **queued}
            entries |= {run.spec.name: {**entry, **({"process_start": start} if start else {})} for run in pack}
        try:
            records.record_jobs(self.sweep_dir, entries)
        except records.RecordWriteError as error:
            ids = ", ".join(job.job_id for job, _ in jobs)
            warn(
                f"the submitted jobs ({ids}) cannot be recorded in {records.JOBS} ({error}): this launch follows "
                "them; `status` and `resume` know them only once their runs start"
            )

    def poll(self) -> None:
        jobs = [job for job, _ in self.active.values()]
        try:
            alive = self.backend.alive(jobs)  # asked before reading records
        except SchedulerUnavailable as error:  # unknown is not dead: no job is called lost on it
            warn(f"{error}; asking again at the next poll")
            alive = {job.job_id for job in jobs}
        for job_id, (job, pack) in list(self.active.items()):
            for run in pack:
                if run.spec.name in self.states:
                    continue
                status = records.read_status(run.run_dir)
                if job_id not in alive and status.state not in FINAL and not status.interrupted:
                    status = _job_ended(run, job, status)
                if status.state == PENDING and status.interrupted and job_id not in alive:  # its job left it
                    self.states[run.spec.name] = PENDING
                    self.progress.ended(run.spec, PENDING, status.interrupted.get("reason", ""))
                    continue
                if status.state == RUNNING or (job_id in alive and again_after_timeout(run, status)):
                    self.progress.running(run.spec)
                elif status.state in FINAL:
                    self.states[run.spec.name] = status.state
                    self.progress.ended(run.spec, status.state, _detail(run.run_dir, status), status.timing)
            if job_id not in alive:
                del self.active[job_id]
                self.slots.release(self.place_of.pop(job_id, NOWHERE))

    def run(self, queue: collections.deque, poll_s: float) -> None:
        """Until every pack has ended: keep packs going as the slots allow (this host only), poll, report."""
        while queue or self.active:
            while self.backend.on_this_host and queue and self.slots.open(len(self.active)):
                self.submit([queue.popleft()], chunk=1, place=self.slots.take())
            self.poll()
            self.progress.tick()
            if self.active:
                time.sleep(poll_s)
        if self.progress.finished:  # a launch that found everything done has no windows to sum
            print(self.progress.end_line(), file=self.progress.stream, flush=True)

    def cancel(self, grace_s: float = 15.0) -> None:
        """Stop this host's jobs, then wait (a little) for them to go, so their runs' records are final
        when the launcher returns."""
        jobs = [job for job, _ in self.active.values()]
        for job in jobs:
            job.cancel(check=False)
        deadline = time.monotonic() + grace_s
        while self.backend.alive(jobs) and time.monotonic() < deadline:
            time.sleep(0.1)


@contextlib.contextmanager
def in_snapshot(code: Path):
    """Jobs started meanwhile start in the launch's snapshot of the code and import perfsweep from it."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), before]))
    try:
        with contextlib.chdir(code):
            yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def launch(plan: Plan, argv: list[str], runner: Runner, pythons: dict[str, str] | None = None) -> Outcome:
    """Submit every run of `plan` that is not done yet, each to be run by `runner` in its job (with the Python
    `pythons` names for its run: its environment's); follow them to the end if the launcher waits. The sweep
    folder is locked meanwhile: a second launcher is refused (records.SweepLocked) before it changes anything."""
    sweepdir.make_folder(plan.sweep_dir)
    with sweep_lock(plan.sweep_dir, argv) if plan.settings.launcher.lock else contextlib.nullcontext():
        return _launch(plan, argv, runner, pythons or {})


def measured_elsewhere(sweep_dir: Path, done: list[str], code: dict[str, str]) -> None:
    """Warn where runs done before (and not run again) measured other code than this launch's: a module that both
    their launch's snapshot and this one's hold, with other content (`code`: module -> content hash)."""
    edited: dict[str, set[str]] = {}
    for name in done:
        recorded = records.read_status(sweep_dir / name).code or {}
        for module in sorted(recorded.keys() & code.keys()):
            if recorded[module] != code[module]:
                edited.setdefault(name, set()).add(module)
    if edited:
        modules = ", ".join(sorted(set().union(*edited.values())))
        warn(
            f"{len(edited)} of the runs already done measured other code than this launch's (what differs since: "
            f"{modules}); they are not run again. To measure the code as it is now, launch again into another folder "
            f"(sweep_name=NAME) and compare the two: perfsweep compare {sweep_dir} {sweep_dir.parent / 'NAME'}"
        )


def _launch(plan: Plan, argv: list[str], runner: Runner, pythons: dict[str, str]) -> Outcome:
    conf = plan.settings.launcher
    backend = BACKENDS[conf.name]
    sweep_dir = plan.sweep_dir.resolve()
    repaired = records.repair(sweep_dir)
    manifest = sweepdir.open_sweep(plan, argv)
    busy = in_flight(sweep_dir)
    todo = [s for s in plan.runs if s.name not in busy and not records.is_done(sweep_dir / s.name, repaired)]
    for line in repaired:
        print(f"perfsweep: {line}", file=sys.stderr)
    skipped = sorted({spec.name for spec in plan.runs} - {spec.name for spec in todo} - busy)
    # On this host each run has its time limit; on Slurm the cluster limits each job
    limit_s, retries = (conf.timeout_min * 60, conf.timeout_retries) if backend.on_this_host else (None, 0)
    at_once = 1 if conf.name == "debug" else conf.parallelism  # launcher=debug runs one at a time, in its process
    code = snapshot(sweep_dir / ".code", {top for spec in plan.runs for top in modules_of(spec.config)})
    measured_elsewhere(sweep_dir, skipped, code.modules)
    for name in code.shadowing:
        warn(f"the launch's folder has {name} (copied for the runs), which runs import in place of Python's own {name}")
    runs = [
        # the run's folder is absolute: jobs start in the code snapshot, not where the launch was started
        RunJob(
            spec,
            sweep_dir / spec.name,
            sweepdir.tracker_id(manifest, spec),
            at_once,
            limit_s,
            retries,
            pythons.get(spec.name),
            spec.config.dist.world_size if spec.config.dist.name != "none" and not backend.on_this_host else None,
            code.modules,
        )
        for spec in todo
    ]
    sweepdir.mark_pending(plan, todo)
    executor = make_executor(conf, sweep_dir / ".submitit", job_name=f"perfsweep-{sweep_dir.name}")
    gpus = pinned_gpus(conf) if conf.name == "local" else []
    mode = isolation(conf)
    warm = conf.name == "local" and mode == "fork"  # one warm job forks every run, each pinned to a free GPU
    pack = RunPack(runner, mode, conf.parallelism if warm else 1, tuple(gpus) if warm else ())
    # a warm job forks its runs in parallel; local jobs at once share this host's CPUs
    slots = Slots(1 if warm else conf.parallelism, [] if warm else gpus, share_cpus=conf.name == "local")
    dispatcher = Dispatcher(sweep_dir, executor, conf, pack, Progress(len(runs)), slots)
    # a warm job per environment's block of runs (one in all without an environment axis)
    queue = collections.deque(packs_of(runs, len(runs) if warm else conf.runs_per_job))
    wait = conf.wait if conf.wait is not None else backend.on_this_host
    with in_snapshot(code.folder):
        job_ids = (
            []
            if backend.on_this_host or not queue
            else dispatcher.submit(by_kind(list(queue)), max_array_size(conf.max_array_size))
        )
        if not backend.on_this_host:
            queue.clear()
        if wait:
            try:
                dispatcher.run(queue, conf.poll_s or POLL_S[backend.on_this_host])
            finally:
                if backend.on_this_host:  # a scheduler's jobs outlive the launcher that watches them
                    dispatcher.cancel()
    return Outcome(dispatcher.states, skipped, sorted(busy), job_ids, followed=wait)
