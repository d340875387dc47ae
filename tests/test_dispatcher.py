"""The dispatcher with fake jobs: what it submits, when, and what it records as they end.

A fake backend stands in for submitit's executors: its jobs are objects the test ends.
No process starts; the runs' records are real.
"""

import collections
import dataclasses
import io
from pathlib import Path

import pytest

from perfsweep import records
from perfsweep.conf.schema import LauncherConf
from perfsweep.launcher.backends import Backend, SchedulerUnavailable, backend_for
from perfsweep.launcher.jobs import RunPack
from perfsweep.launcher.packs import packs_of
from perfsweep.launcher.progress import Progress, UpToCap
from perfsweep.launcher.run_job import RunJob, Runner
from perfsweep.launcher.submit import Dispatcher
from perfsweep.records import lifecycle
from perfsweep.sweeps.plan import build_plan


@dataclasses.dataclass
class Paths:
    stdout: Path
    stderr: Path


class FakeJob:
    """A job the test ends: `finish` records its runs done; `end` leaves them as they are."""

    def __init__(self, job_id: str, pack: list[RunJob], log: Path):
        self.job_id, self.pack, self.paths, self.ended = job_id, pack, Paths(log, log), False
        log.write_text(f"job {job_id}'s last line\n")

    def finish(self) -> None:
        for run in self.pack:
            run.run_dir.mkdir(exist_ok=True)
            lifecycle.finish(run.run_dir)
        self.ended = True

    def done(self) -> bool:
        return self.ended

    def cancel(self, check: bool = False) -> None:
        self.ended = True


class FakeExecutor:
    def __init__(self, folder: Path):
        self.folder, self.python, self.jobs, self.submissions = folder, "", [], []

    def map_array(self, fn, packs):
        jobs = [
            FakeJob(str(len(self.jobs) + i), pack, self.folder / f"{len(self.jobs) + i}.log")
            for i, pack in enumerate(packs)
        ]
        self.jobs += jobs
        self.submissions.append(len(packs))
        return jobs


class FakeBackend(Backend):
    """Jobs that run when the test says so: `on_poll` is called at every poll, before the alive jobs are asked."""

    on_poll = staticmethod(lambda jobs: None)
    unavailable = 0  # how many polls the scheduler does not answer
    waits = ""  # the scheduler's word on why each job not ended waits

    def executor(self, folder, job_name):
        return FakeExecutor(folder)

    def alive(self, jobs):
        self.on_poll(jobs)
        if self.unavailable:
            self.unavailable -= 1
            raise SchedulerUnavailable("the fake scheduler did not answer")
        return {job.job_id: self.waits for job in jobs if not job.ended}


class FakeCluster(FakeBackend):
    on_this_host = False


@pytest.fixture
def runs(tmp_path) -> list[RunJob]:
    plan = build_plan(
        ["model=test_resnet", "repeats=1", "input_type=tensor,subclass", "memory_format=contiguous,channels_last"]
    )
    return [RunJob(spec, tmp_path / spec.name, spec.run_id, 1) for spec in plan.runs]


def dispatch(backend: Backend, runs: list[RunJob], folder: Path, per_job: int = 1) -> Dispatcher:
    folder.mkdir(exist_ok=True)
    executor = backend.executor(folder, "fake")
    pack = RunPack(Runner(lambda *args: None))
    dispatcher = Dispatcher(folder, backend, executor, pack, Progress(len(runs), io.StringIO()))
    queue = collections.deque(packs_of(runs, per_job))
    if not backend.on_this_host:
        dispatcher.start_all(queue, backend.max_array_size())
    dispatcher.run(queue, poll_s=0)
    return dispatcher


def test_on_this_host_no_more_jobs_go_at_once_than_parallelism_allows(runs, tmp_path):
    going = []

    def finish_the_first(jobs):
        going.append(sum(not job.ended for job in jobs))
        next(job for job in jobs if not job.ended).finish()

    backend = FakeBackend(LauncherConf(name="local", parallelism=2))
    backend.on_poll = finish_the_first
    dispatcher = dispatch(backend, runs, tmp_path)
    assert max(going) == 2 and dispatcher.executor.submissions == [1, 1, 1, 1]
    assert dispatcher.states == {run.spec.name: records.DONE for run in runs}
    assert set(records.read_json(tmp_path / records.JOBS)) == {run.spec.name for run in runs}


def test_a_cluster_gets_every_job_at_once_as_one_array(runs, tmp_path):
    backend = FakeCluster(LauncherConf(name="slurm"))
    backend.on_poll = lambda jobs: [job.finish() for job in jobs]
    dispatcher = dispatch(backend, runs, tmp_path, per_job=2)
    assert dispatcher.executor.submissions == [2], "two packs of two runs, in one array"
    assert set(dispatcher.states.values()) == {records.DONE}


def test_a_cluster_splits_its_arrays_at_launcher_max_array_size(runs, tmp_path):
    backend = FakeCluster(LauncherConf(name="slurm", max_array_size=1))
    backend.on_poll = lambda jobs: [job.finish() for job in jobs]
    dispatcher = dispatch(backend, runs, tmp_path, per_job=2)
    assert dispatcher.executor.submissions == [1, 1], "two packs of two runs, an array each"
    assert set(dispatcher.states.values()) == {records.DONE}


def test_a_job_that_ends_without_records_leaves_a_started_run_lost_and_the_rest_pending(runs, tmp_path):
    def end_after_one_start(jobs):
        lifecycle.start(jobs[0].pack[0].run_dir, job_id=jobs[0].job_id)
        jobs[0].ended = True

    backend = FakeCluster(LauncherConf(name="slurm"))
    backend.on_poll = end_after_one_start
    dispatcher = dispatch(backend, runs, tmp_path, per_job=4)
    first, *rest = runs
    assert dispatcher.states == {first.spec.name: records.FAILED, **{r.spec.name: records.PENDING for r in rest}}
    lost = records.read_status(first.run_dir)
    assert lost.error.type == "LostRun" and "job 0's last line" in lost.error.message
    assert {records.read_status(r.run_dir).interrupted["type"] for r in rest} == {"JobEnded"}


def test_a_job_its_scheduler_says_can_never_start_is_not_waited_for(runs, tmp_path):
    """Slurm queues a job that asks for more than its partition's nodes have (PartitionConfig) for ever."""
    backend = FakeCluster(LauncherConf(name="slurm"))
    backend.waits = "PartitionConfig"
    dispatcher = dispatch(backend, runs, tmp_path, per_job=2)
    assert dispatcher.states == {run.spec.name: records.PENDING for run in runs}
    said = dispatcher.progress.stream.getvalue()
    assert said.count("queued, cannot start: PartitionConfig (it asks for more CPUs") == 2, "a line a job"
    assert "`scancel 0`, then `" in said and "`scancel 1`, then `" in said, "each job's own command"
    assert not any(job.ended for job in dispatcher.executor.jobs), "left queued: its owner cancels it"
    assert said.endswith("4 runs in 0.0 s, never started, none done: no measured window to sum\n"), said


def test_no_run_is_called_lost_while_the_scheduler_does_not_answer(runs, tmp_path):
    polls = []

    def records_come_late(jobs):
        polls.append(len(polls))
        for job in jobs:
            job.ended = True  # gone from the queue at once, its records written two polls later
            if len(polls) == 3:
                job.finish()

    backend = FakeCluster(LauncherConf(name="slurm"))
    backend.on_poll, backend.unavailable = records_come_late, 2
    dispatcher = dispatch(backend, runs, tmp_path)
    assert set(dispatcher.states.values()) == {records.DONE} and len(polls) == 3


@pytest.mark.parametrize(
    ("launcher", "isolation", "at_once"),
    [
        ({"name": "slurm"}, "fork", 1),
        ({"name": "slurm", "isolation": "spawn"}, "spawn", 1),
        ({"name": "local", "parallelism": 2}, "fork", 2),
        ({"name": "local", "isolation": "spawn", "parallelism": 2}, "spawn", 1),
        ({"name": "debug"}, "spawn", 1),
    ],
)
def test_each_backend_packs_runs_as_its_config_says(launcher, isolation, at_once):
    """A job forks its runs from a warm process unless told to spawn; only a local warm job forks several at once."""
    pack = backend_for(LauncherConf(**launcher)).pack(Runner(lambda *args: None))
    assert (pack.isolation, pack.parallelism) == (isolation, at_once)


def test_a_runs_end_line_gives_the_time_of_its_own_parts_not_the_launcher_s_polls(tiny_plan):
    """The launcher sees a run start and end at its polls, 5 s apart on Slurm: the run's own parts are its time."""
    out = io.StringIO()
    progress, spec = Progress(1, out), tiny_plan().runs[0]
    progress.running(spec)
    progress.running_since[spec.name] -= 10  # seen running at a poll 10 s before it was seen ended
    progress.ended(spec, "done", "step 1 ms", {"startup_s": 0.08, "warmup_s": 0.01, "window_s": 0.7, "records_s": 0.05})
    assert f"[1/1] done   {spec.name}  step 1 ms  (0.8 s; start-up 0.08 s," in out.getvalue(), out.getvalue()


def test_a_run_the_budget_left_unstarted_gets_one_line_and_no_start(tiny_plan):
    out = io.StringIO()
    progress, spec = Progress(1, out), tiny_plan().runs[0]
    progress.ended(spec, records.PENDING, "the launch's budget ran out before it started")
    assert out.getvalue() == f"[1/1] pending {spec.name}  the launch's budget ran out before it started\n"


def test_runs_the_budget_left_unstarted_for_one_reason_get_one_line_after_the_first(tiny_plan):
    """A budget that runs out early in a sweep of thousands leaves them all pending: a line each says nothing more."""
    out = io.StringIO()
    specs = tiny_plan("seed=0,1,2,3,4").runs[:5]
    progress = Progress(len(specs), out)
    for spec in specs[:3]:
        progress.ended(spec, records.PENDING, "budget")
    progress.ended(specs[3], records.PENDING, "its job ended")
    progress.ended(specs[4], records.PENDING, "budget")
    progress.end_line()
    assert out.getvalue().splitlines() == [
        f"[1/5] pending {specs[0].name}  budget",
        "[3/5] pending 2 more runs, as the one above",
        f"[4/5] pending {specs[3].name}  its job ended",
        f"[5/5] pending {specs[4].name}  budget",
    ]


def test_the_end_line_counts_the_runs_done_where_a_budget_left_others_unstarted(tiny_plan):
    """6 runs done of 24 in a 50 s budget: "24 runs in 45 s" would read as four times the pace."""
    out = io.StringIO()
    specs = tiny_plan("seed=0,1,2").runs[:3]
    progress = Progress(len(specs), out)
    progress.ended(specs[0], records.DONE, "step 1 ms", {"startup_s": 0.1, "warmup_s": 0.1, "window_s": 0.5})
    progress.ended(specs[1], records.PENDING, "budget")
    progress.ended(specs[2], records.PENDING, "budget")
    end = progress.end_line()
    assert end.startswith("1 of 3 runs done in ") and " s (2 never started); measured windows 0.5 s (" in end, end
    progress.ended(specs[0], records.FAILED, "ValueError")
    assert " s (1 failed or stopped, 2 never started); " in progress.end_line()


def test_a_look_whose_first_run_never_started_counts_it_without_a_pace(tiny_plan):
    """repeats=auto's count gives the time left at the pace so far: before any run has run, there is none."""
    out = io.StringIO()
    progress, spec = UpToCap(out), tiny_plan().runs[0]
    progress.expect(3)
    progress.ended(spec, records.PENDING, "its job ended before the run started")
    assert out.getvalue() == f"[1/3 at most] pending {spec.name}  its job ended before the run started\n"


def test_a_run_its_job_stopped_between_two_polls_is_said_to_start_then_left_pending(runs, tmp_path):
    """It started and was stopped by the budget while no poll looked: its start line comes before its end line."""

    def stopped_unseen(jobs):
        for job in jobs:
            for run in job.pack:
                run.run_dir.mkdir(exist_ok=True)
                began = lifecycle.start(run.run_dir).started_at  # a run stopped keeps its start, as train's does
                lifecycle.stop(
                    run.run_dir, records.BUDGET, "the launch's budget ran out as it measured", started_at=began
                )
            job.ended = True

    backend = FakeBackend(LauncherConf(name="local", parallelism=4))
    backend.on_poll = stopped_unseen
    dispatcher = dispatch(backend, runs[:1], tmp_path)
    lines = dispatcher.progress.stream.getvalue().splitlines()
    assert [line.split()[1] for line in lines[:2]] == ["start", "pending"], lines


def test_a_followed_launch_names_each_array_it_submitted_once():
    """What scancel stops while the launch follows: the arrays, not each of their tasks."""
    said = io.StringIO()
    Progress(3, said).submitted(["12_0", "12_1", "13_0"])
    Progress(1, said).submitted([])
    assert said.getvalue() == "submitted as arrays 12, 13\n"


def test_a_poll_tells_the_display_how_many_runs_it_found_ended(runs, tmp_path, monkeypatch):
    """A process's sides end together: the pace of repeats=auto's count takes them all from the first line on."""
    seen = []
    monkeypatch.setattr(Progress, "polled", lambda self, ending: seen.append(ending))
    backend = FakeCluster(LauncherConf(name="slurm"))
    backend.on_poll = lambda jobs: [job.finish() for job in jobs]
    dispatch(backend, runs, tmp_path, per_job=2)
    assert max(seen) == len(runs) == 4, seen
