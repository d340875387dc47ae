"""Submits a plan's runs through submitit and, unless told not to wait, follows them to the end.

Local and debug jobs run on this host: perfsweep keeps `parallelism` of them going.
Slurm jobs are submitted at once as job arrays, split below MaxArraySize.
Slurm honours `parallelism` as the array's %N.
Either way, a run's state is read from its records.
The scheduler is asked only which jobs are still alive, once per poll for all jobs.
That catches a job that died without records.
"""

import collections
import contextlib
import dataclasses
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import submitit

from perfsweep import records, user_command
from perfsweep.conf.import_paths import modules_of
from perfsweep.conf.schema import commit_pins
from perfsweep.launcher import sweepdir, turns
from perfsweep.launcher.backends import Backend, JobShape, SchedulerUnavailable, backend_for, slurm
from perfsweep.launcher.packs import by_shape, chunks_by, packs_of
from perfsweep.launcher.progress import Progress
from perfsweep.launcher.run_job import (
    RunJob,
    Runner,
    again_after_timeout,
    every_run,
    leave_over_budget,
    lost,
    never_started,
)
from perfsweep.launcher.run_states import CANNOT_START, cannot_start, cannot_start_line, in_flight, run_states
from perfsweep.launcher.slots import NOWHERE, Place
from perfsweep.launcher.snapshot import snapshot
from perfsweep.launcher.turns import Turns
from perfsweep.records import DONE, FINAL, PENDING, RUNNING, Status, Summary
from perfsweep.records.code import SNAPSHOTS, ci_run, commit_of, is_working_copy, module_place, under_test
from perfsweep.records.lock import sweep_lock
from perfsweep.records.words import counted
from perfsweep.sweeps.pairing import groups
from perfsweep.sweeps.plan import Plan


@dataclasses.dataclass
class Outcome:
    """How a launch ended.

    - the final state of each run it followed;
    - runs skipped as done, or as still in flight from an earlier launch;
    - jobs submitted.
    """

    states: dict[str, str]
    skipped: list[str]
    busy: list[str]
    job_ids: list[str]
    followed: bool
    stuck: dict[str, str] = dataclasses.field(default_factory=dict)  # busy runs whose job cannot start: what to do

    @property
    def not_done(self) -> list[str]:
        """The runs it followed that did not end done: failed, or left pending (by the budget, an interrupt)."""
        return [name for name, state in self.states.items() if state != DONE]


class SubmissionFailed(RuntimeError):
    """The scheduler refused a submission part-way.

    Its message says what was submitted (and recorded) and what was not.
    """


def _last_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _detail(run_dir: Path, status: Status) -> str:
    record = records.read_record(run_dir / records.SUMMARY)
    if status.state == DONE and isinstance(record, dict):
        summary = Summary.from_json(record)
        rate = f"{summary.samples_per_s:.1f} samples/s" if summary.samples_per_s is not None else ""
        taken = summary.host.competed() if summary.host else []
        host = f"; host: {'; '.join(taken)}" if taken else ""  # a neighbour said as the launch goes, not only after
        return f"step {summary.median('step'):.3g} ms {rate}".rstrip() + host
    return status.error_line(200)


def _job_ended(run: RunJob, job: submitit.Job, status: Status) -> Status:
    """Record a job that ended without this run's final records.

    A run it started is failed as lost, with the log's last lines.
    A run it never started is pending, with why.
    If that cannot be recorded, the launcher still goes on, knowing it.

    Returns:
        The run's status, as recorded or as it would have been.
    """
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


def _arrays(jobs: list[tuple[submitit.Job, list[RunJob]]]) -> list[str]:
    """The arrays these jobs are tasks of (a Slurm job id is ARRAY_TASK), in order."""
    return slurm.arrays(job.job_id for job, _ in jobs)


class Dispatcher:
    """Submits packs and reports each run's end.

    It submits them all at once, or as `slots` allow on this host.
    """

    def __init__(
        self,
        sweep_dir: Path,
        backend: Backend,
        executor: submitit.Executor,
        pack,
        progress: Progress,
        after: tuple[str, ...] = (),
    ):
        self.sweep_dir, self.backend, self.executor = sweep_dir, backend, executor
        self.after = list(after)  # an earlier launch's arrays still in flight: each array of this one waits for them
        self.arrays: list[tuple[str, int]] = []  # this launch's arrays not yet waited for, each with its tasks at once
        self.pack, self.progress = pack, progress
        self.active: dict[str, tuple[submitit.Job, list[RunJob]]] = {}
        self.states: dict[str, str] = {}
        self.slots, self.place_of = backend.slots(), {}  # room for another job on this host; where each job was put
        self.turns: Turns | None = None  # where warm jobs' runs take turns (launcher/turns.py)
        self.left: set[str] = set()  # the runs of the jobs no longer followed: ended, or cannot start
        self.began: dict[str, float] = {}  # each job's submission (monotonic), by id
        self.took_s: list[float] = []  # the seconds each ended job took, its queue included

    def submit(self, packs: list[list[RunJob]], chunk: int, place: Place = NOWHERE) -> list[str]:
        """Submit packs, `chunk` to an array.

        Each array's jobs are recorded the moment it is queued.
        A pack given a `place` sees its GPU alone (CUDA_VISIBLE_DEVICES) and runs on its CPUs.

        Returns:
            The job ids.

        Raises:
            SubmissionFailed: if the scheduler refuses one.
        """
        self.backend.place(self.executor, place)
        placed = self.pack.on_cpus(place.cpus)
        submitted: list[str] = []
        for start, part in chunks_by(packs, chunk, lambda pack: JobShape.of(pack[0])):
            shape = JobShape.of(part[0][0])  # an array's jobs start one Python and have one shape of tasks
            self.executor.python = shlex.quote(shape.python or sys.executable)
            self.backend.shape(self.executor, shape)
            self.backend.queue_after(self.executor, self._waits_for(len(part)))
            try:
                jobs = list(zip(self.executor.map_array(placed, part), part, strict=True))
            except Exception as error:  # sbatch refused: a submit limit, MaxJobCount, a controller down
                left = sum(len(every_run(pack)) for pack in packs[start:])
                arrays = sorted(slurm.arrays(submitted))
                done = "no job was submitted"
                if submitted:
                    done = f"job(s) {', '.join(arrays)} were submitted and recorded"
                raise SubmissionFailed(
                    f"submitting the sweep's runs failed: {_last_line(error)}\n{done}; {counted(left, 'run')} "
                    f"{'was' if left == 1 else 'were'} not submitted (pending). "
                    f"`{user_command()} status {self.sweep_dir}` follows what was; "
                    f"`{user_command()} resume {self.sweep_dir}` submits the rest, and where sbatch refused a setting, "
                    f"`{user_command()} resume {self.sweep_dir} launcher.KEY=VALUE` submits it with that setting "
                    "changed (~launcher.sbatch_extra.KEY drops an option)."
                ) from error
            self._track(jobs, place)
            submitted += [job.job_id for job, _ in jobs]
            self.arrays += [(array, min(len(part), self.backend.at_once())) for array in _arrays(jobs)]
        return submitted

    def _waits_for(self, tasks: int) -> list[str]:
        """The arrays the next array, of `tasks` tasks, waits for to end.

        Those are an earlier launch's still in flight, and this launch's oldest.
        %N bounds one array's tasks alone, so it waits for as many as keep the launch to `parallelism` tasks at once.
        """
        bound = self.backend.at_once()
        waits = list(self.after)
        while self.arrays and sum(n for _, n in self.arrays) + min(tasks, bound) > bound:
            waits.append(self.arrays.pop(0)[0])
        return waits

    def _track(self, jobs: list[tuple[submitit.Job, list[RunJob]]], place: Place) -> None:
        """Follow the jobs, and record which job each run went to.

        The record is jobs.json: what status and resume know.
        """
        for job, pack in jobs:
            self.active[job.job_id] = (job, pack)
            self.place_of[job.job_id] = place
            self.began[job.job_id] = time.monotonic()
        queued = {
            "submitted_at": records.now(),
            "launcher": self.backend.conf.name,
            **({"gpu": place.gpu} if place.gpu is not None else {}),
            **({"cpus": list(place.cpus)} if place.cpus is not None else {}),
        }
        entries = {}
        for job, pack in jobs:
            entry = {
                "job_id": job.job_id,
                "log": str(job.paths.stdout),
                **queued,
                **self.backend.job_entry(self.sweep_dir, job),
            }
            entries |= {run.spec.name: entry for run in every_run(pack)}
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
            alive = {job.job_id: "" for job in jobs}
        self._leave_stuck(alive)
        found = {
            run.spec.name: records.read_status(run.run_dir)
            for _, pack in self.active.values()
            for run in every_run(pack)
            if run.spec.name not in self.states
        }
        self.progress.polled(sum(status.state in FINAL for status in found.values()))
        for job_id, (job, pack) in list(self.active.items()):
            for run in every_run(pack):
                if run.spec.name in self.states:
                    continue
                status = found[run.spec.name]
                if job_id not in alive and status.state not in FINAL and not status.interrupted:
                    status = _job_ended(run, job, status)
                if status.state == PENDING and status.interrupted and job_id not in alive:  # its job left it
                    self.states[run.spec.name] = PENDING
                    if status.started_at:  # it ran, between two polls: its start is said too
                        self.progress.running(run.spec)
                    self.progress.ended(run.spec, PENDING, status.interrupted.get("reason", ""))
                    continue
                if status.state == RUNNING or (job_id in alive and again_after_timeout(run, status)):
                    self.progress.running(run.spec)
                elif status.state in FINAL:
                    self.states[run.spec.name] = status.state
                    self.progress.ended(run.spec, status.state, _detail(run.run_dir, status), status.timing)
            if job_id not in alive:
                self._forget(job_id, pack)
        if self.turns is not None:
            self.turns.give(self.left, [pack[0].turn for _, pack in self.active.values()])

    def _leave_stuck(self, alive: dict[str, str]) -> None:
        """Stop following each job that its scheduler says can never start (CANNOT_START).

        Its runs are pending, with why and how to run them.
        The job stays queued for its owner to cancel.
        """
        for job_id, (job, pack) in list(self.active.items()):
            if (reason := alive.get(job_id)) not in CANNOT_START:
                continue
            clusters = self.backend.job_entry(self.sweep_dir, job).get("clusters")
            why = cannot_start_line(reason, job_id, self.sweep_dir, clusters)
            for run in every_run(pack):
                if run.spec.name not in self.states:
                    self.states[run.spec.name] = PENDING
                    self.progress.ended(run.spec, PENDING, why)
            self._forget(job_id, pack)

    def _forget(self, job_id: str, pack: list[RunJob]) -> None:
        """Follow the job no more: it ended, or cannot start."""
        del self.active[job_id]
        self.took_s.append(time.monotonic() - self.began.pop(job_id))
        self.slots.release(self.place_of.pop(job_id, NOWHERE))
        self.left |= {run.spec.name for run in every_run(pack)}

    def start_all(self, queue: collections.deque, max_array_size: int) -> list[str]:
        """Submit every pack of `queue` at once, as arrays.

        Returns:
            The job ids.
        """
        packs, _ = list(queue), queue.clear()
        return self.submit(by_shape(packs), max_array_size) if packs else []

    def run(self, queue: collections.deque, poll_s: float) -> None:
        """Until every pack has ended: keep packs going as the slots allow, poll, report."""
        while queue or self.active:
            while queue and self.slots.open(len(self.active)):
                pack = queue.popleft()
                if leave_over_budget(pack, self.took_s, "job"):
                    for run in every_run(pack):
                        self.states[run.spec.name] = PENDING
                        self.progress.ended(run.spec, PENDING, records.read_status(run.run_dir).interrupted["reason"])
                else:
                    self.submit([pack], chunk=1, place=self.slots.take())
            self.poll()
            self.progress.tick()
            if self.active:
                time.sleep(poll_s)
        if self.progress.finished:  # a launch that found everything done has no windows to sum
            print(self.progress.end_line(), file=self.progress.stream, flush=True)

    def cancel(self, grace_s: float = 15.0) -> None:
        """Stop this host's jobs, then wait a little for them to go.

        Their runs' records are then final when the launcher returns.
        """
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


def launch(
    plan: Plan,
    argv: list[str],
    runner: Runner,
    pythons: dict[str, str] | None = None,
    progress: Progress | None = None,
    began: float | None = None,
    pinned: dict | None = None,
) -> Outcome:
    """Submit every run of `plan` that is not done yet, and follow them to the end if the launcher waits.

    `runner` runs each in its job.
    The job uses the Python that `pythons` names for its run: its environment's.
    `progress` counts the runs; by default, this launch's alone.
    `began` is when the launch began (unix time), from which its budget counts; by default, now.
    `pinned` keeps the code of one command's launches (repeats=auto's looks, a bisect's points).
    A launch of the same modules then runs the snapshot and commit the first one took, in its sweep folder.
    So an edit while the command runs changes none of its later runs.
    The sweep folder is locked meanwhile.
    A second launcher is refused (records.SweepLocked) before it changes anything.
    """
    sweepdir.make_folder(plan.sweep_dir)
    with sweep_lock(plan.sweep_dir, argv) if plan.settings.launcher.lock else contextlib.nullcontext():
        began = time.time() if began is None else began
        return _launch(plan, argv, runner, pythons or {}, progress, began, {} if pinned is None else pinned)


def record_lost(states: list, todo: set[str], sweep_dir: Path) -> None:
    """Record as lost each run about to be submitted again whose job ended while it ran.

    Its status then keeps that attempt's end, the job's log and Slurm's word for it, as the run's earlier attempt.
    """
    for row in states:
        if row.state == records.LOST and row.run in todo:
            lost(sweep_dir / row.run, f"job {row.job_id}", row.log, job_id=row.job_id)


def measured_elsewhere(sweep_dir: Path, done: list[str], code: dict[str, str]) -> None:
    """Warn where runs done before, and not run again, measured other code than this launch's.

    Other code is a module that both their launch's snapshot and this one's hold, with other content.
    `code` maps each module to its content hash.
    """
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
            f"(sweep_name=NAME) and compare the two: {user_command()} compare {sweep_dir} {sweep_dir.parent / 'NAME'}"
        )


def taking_turns(sweep_dir: Path, runs: list[RunJob]) -> tuple[list[list[RunJob]], Turns]:
    """A warm job's pack for each shape of `runs`, whose runs take turns in their order (launcher/turns.py)."""
    order = [run.spec.name for run in runs]
    runs = [dataclasses.replace(run, turn=turn) for run, turn in zip(runs, turns.fresh(sweep_dir, order), strict=True)]
    shapes: dict[JobShape, list[RunJob]] = {}
    for run in runs:
        shapes.setdefault(JobShape.of(run), []).append(run)
    packs = list(shapes.values())
    return packs, Turns(order, [run.turn for run in runs])


def in_processes(jobs: dict[str, RunJob], todo: list) -> list[RunJob]:
    """The runs as their processes run them, in plan order.

    The sides of a paired comparison (sweeps/pairing.py) are one process: its first run, the others its `sides`.
    """
    first_of, beside = {}, set()
    for group in groups(todo):
        if group.paired:
            lead, *others = (jobs[spec.name] for spec in group.runs)
            first_of[lead.spec.name] = dataclasses.replace(lead, sides=tuple(others))
            beside |= {side.spec.name for side in others}
    return [first_of.get(spec.name, jobs[spec.name]) for spec in todo if spec.name not in beside]


def at_commit(env) -> dict[str, Any] | None:
    """The origin of a run whose environment installs a commit of env.repo: that commit is its code under test."""
    pins = commit_pins(env.packages)
    if not env.repo or not pins:
        return None
    repo = Path(env.repo).expanduser().resolve()
    found = commit_of(repo, next(iter(pins.values()))) or {"commit": next(iter(pins.values()))}
    tested = {"repository": str(repo), **found, "dirty": False, "chosen_by": "environment"}
    return {"code_under_test": tested, "ci": ci_run(dict(os.environ))}


def launch_origin(named: str | None, modules: set[str]) -> dict[str, Any]:
    """The launch's code under test (its repository's commit) and the CI run it is part of, for each run's status."""
    places = [place for top in sorted(modules) if (place := module_place(top)) and is_working_copy(place)]
    return {"code_under_test": under_test(named, places, Path.cwd()), "ci": ci_run(dict(os.environ))}


def _launch(
    plan: Plan,
    argv: list[str],
    runner: Runner,
    pythons: dict[str, str],
    progress: Progress | None,
    began: float,
    pinned: dict,
) -> Outcome:
    conf = plan.settings.launcher
    backend = backend_for(conf)
    sweep_dir = plan.sweep_dir.resolve()
    repaired = records.repair(sweep_dir)
    manifest = sweepdir.open_sweep(plan, argv)
    states = run_states(sweep_dir)
    busy = in_flight(states)
    todo = [s for s in plan.runs if s.name not in busy and not records.is_done(sweep_dir / s.name, repaired)]
    record_lost(states, {spec.name for spec in todo}, sweep_dir)
    for line in repaired:
        print(f"perfsweep: {line}", file=sys.stderr)
    skipped = sorted({spec.name for spec in plan.runs} - {spec.name for spec in todo} - busy)
    modules = {top for spec in plan.runs for top in modules_of(spec.config)}
    installed = {Path(s.config.env.repo).expanduser().resolve() for s in plan.runs if at_commit(s.config.env)}
    key = (frozenset(modules), frozenset(installed))
    if key not in pinned:
        pinned[key] = (
            snapshot(sweep_dir / SNAPSHOTS, modules, installed=installed),
            launch_origin(plan.settings.code, modules),
        )
    code, origin = pinned[key]
    measured_elsewhere(sweep_dir, skipped, code.modules)
    for name in code.shadowing:
        warn(f"the launch's folder has {name} (copied for the runs), which runs import in place of Python's own {name}")
    limit_s, retries = backend.run_limit()
    # Slurm's queue decides when its jobs run: a budget bounds the launches of this host alone
    until = began + conf.budget_s if conf.budget_s is not None and backend.on_this_host else None
    jobs = {
        # the run's folder is absolute: jobs start in the code snapshot, not where the launch was started
        spec.name: RunJob(
            spec=spec,
            run_dir=sweep_dir / spec.name,
            tracker_id=sweepdir.tracker_id(manifest, spec),
            parallelism=backend.at_once(),
            limit_s=limit_s,
            timeout_retries=retries,
            python=pythons.get(spec.name),
            ranks_per_node=backend.ranks_per_node(spec.config),
            code=code.modules,
            origin=at_commit(spec.config.env) or origin,
            until=until,
        )
        for spec in todo
    }
    runs = in_processes(jobs, todo)
    sweepdir.mark_pending(plan, todo)
    executor = backend.executor(sweep_dir / ".submitit", job_name=f"perfsweep-{sweep_dir.name}")
    stuck = cannot_start(states)  # an array waiting on such a job would wait for ever
    earlier = sorted(
        slurm.arrays(
            row.job_id
            for row in states
            if row.run in busy - stuck and row.job_id and row.launcher == conf.name and row.job_alive
        )
    )
    dispatcher = Dispatcher(
        sweep_dir, backend, executor, backend.pack(runner), progress or Progress(len(todo)), after=earlier
    )
    queue = collections.deque(packs_of(runs, backend.runs_per_job(len(runs))))
    if backend.takes_turns(list(queue)):
        packs, dispatcher.turns = taking_turns(sweep_dir, runs)
        queue = collections.deque(packs)
    with in_snapshot(code.folder):
        at_once = not backend.on_this_host or dispatcher.turns is not None  # else as this host's slots allow
        job_ids = dispatcher.start_all(queue, backend.max_array_size()) if at_once else []
        if backend.waits():
            if not backend.on_this_host:  # a scheduler's: what its scancel stops while the launch follows
                dispatcher.progress.submitted(job_ids)
            try:
                dispatcher.run(queue, conf.poll_s or backend.poll_s)
            finally:
                if backend.on_this_host:  # a scheduler's jobs outlive the launcher that watches them
                    dispatcher.cancel()
    mine = busy & {spec.name for spec in plan.runs}  # the folder's other runs in flight are not this launch's to tell
    stuck_lines = {  # refit names the array: one line, and one scancel, for all of its tasks
        row.run: cannot_start_line(row.job_waits, row.job_id, sweep_dir, row.clusters)
        for row in states
        if row.run in stuck & mine
    }
    return Outcome(dispatcher.states, skipped, sorted(mine), job_ids, followed=backend.waits(), stuck=stuck_lines)
