"""Sweeps as submitit job arrays on a real one-node Slurm cluster (scripts/slurm-local), and the sbatch they make."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from submitit.slurm.slurm import _make_sbatch_string

from perfsweep import records
from perfsweep.bench.gitrepo import SLEEP
from perfsweep.conf.schema import LauncherConf
from perfsweep.launcher import run_job, run_states
from perfsweep.launcher.backends import backend_for
from perfsweep.launcher.backends import local as local_backend
from perfsweep.launcher.backends import slurm as slurm_backend
from perfsweep.launcher.backends.slurm import ranks_parameters, slurm_parameters
from perfsweep.launcher.packs import by_shape, packs_of
from perfsweep.launcher.run_job import SLURM_EARLY_S, SLURM_WARNING_S, RunJob
from perfsweep.launcher.run_states import (
    EXIT_IN_FLIGHT,
    EXIT_NOT_DONE,
    RunState,
    cannot_start,
    exit_status,
    render,
    stranded,
)
from perfsweep.records import load_sweep, read_steps
from perfsweep.sweeps.plan import build_plan
from tests import golden
from tests.helpers import FAST, ONE_OF_TWO_FAILS, TINY, assert_one_of_two_failed, launch_here

# Two array tasks at once (the local cluster has a CPU for each), and a waiting launcher that looks five times a
# second (every 5 s by default, sparing a real cluster's controller; the local one answers squeue in milliseconds).
POLL = "launcher.poll_s=0.2"
ON_SLURM = ["launcher=slurm", "launcher.parallelism=2", POLL, "tracker.mode=disabled"]
SLURM = [*TINY, *ON_SLURM, "memory_format=contiguous"]
# Where the model is not what a test is about: a function benchmark's job imports neither torch._dynamo nor a model,
# about a CPU-second less a job than the tiny CNN's. `workload.impl=loop,broadcast` is its comparison.
FUNCTION = [*FAST, *ON_SLURM, "input_type=tensor", "memory_format=contiguous"]
# NAP: a step of the user's own that sleeps 20 ms a step (bench/gitrepo.py). Its run lasts as long as a test needs on
# any machine, and costs no CPU. It counts no FLOPs, so its job imports no torch._dynamo. A cancel or requeue of its
# job kills it (submitit's job ignores Slurm's SIGTERM) 5 s later (slurmd's floor, whatever KillWait says): a run that
# is to be cut short lasts longer than that.
NAP = SLEEP.format(ms=20)
STUCK = "+launcher.sbatch_extra.cpus_per_task=8"  # more than the local cluster's node has, past the checks


@pytest.fixture
def on_slurm(slurm_cluster, monkeypatch) -> dict[str, str]:
    """Slurm's commands, and launches in this process, talk to the local cluster (its jobs are real processes)."""
    for key, value in slurm_cluster.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster


@pytest.fixture
def naps(on_slurm, user_module) -> list[str]:
    """A sweep of one run of NAP on the local cluster (`steps=N` to add)."""
    user_module("naps", NAP)
    return [
        "workload._target_=naps.Step",
        "warmup_steps=1",
        "repeats=1",
        "launcher=slurm",
        POLL,
        "tracker.mode=disabled",
    ]


def states(sweep: Path) -> dict[str, records.Status]:
    """Every planned run's status (pending until the run's own folder says otherwise)."""
    return {name: records.read_status(sweep / name) for name in records.planned_runs(sweep)}


def wait_until_started(sweep: Path, started, timeout_s: float = 300):
    """Until started() holds. A job may queue minutes behind other tests' jobs on the local cluster's two CPUs.
    A run that failed, or whose job ended, ends the wait at once (its job's log last); a wait that times out says
    what Slurm and the records said."""
    deadline = time.monotonic() + timeout_s
    asked = time.monotonic()
    while not (found := started()):
        now = states(sweep)
        failed = {name: status.error for name, status in now.items() if status.state == "failed"}
        assert not failed, f"the run failed before it started its steps: {failed}"
        ended = {name: status.interrupted for name, status in now.items() if status.interrupted}
        assert not ended, f"the run's job ended before it started its steps: {ended}"
        if time.monotonic() > asked + 2:  # Slurm's word, every 2 s: a job that died leaves no record of its own
            asked = time.monotonic()
            gone = {name: why for name, (state, why) in stranded(sweep).items() if "job ended" in why}
            said = "".join(log.read_text()[-2000:] for log in sorted((sweep / ".submitit").glob("*_log.err")))
            assert not gone, f"the run's job ended before it started its steps: {gone}; its log: {said}"
        if time.monotonic() > deadline:
            queue = slurm("squeue", "-h", "-r", "-o", "%i %T %r %M")
            raise AssertionError(f"no run started in {timeout_s} s; squeue: {queue}; status: {status_of(sweep)}")
        time.sleep(0.2)
    return found


def status_of(sweep: Path) -> str:
    return launch_here("status", str(sweep)).stdout


def wait_until_final(sweep: Path, timeout_s: float = 180) -> dict[str, records.Status]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = states(sweep)
        if found and all(s.state in ("done", "failed") for s in found.values()):
            return found
        time.sleep(0.1)
    raise AssertionError(f"runs not finished after {timeout_s} s: {status_of(sweep)}")


def test_sbatch_for_a_gpu_array():
    conf = LauncherConf(
        name="slurm",
        parallelism=2,
        timeout_min=30,
        gpus_per_node=1,
        partition="gpu",
        account="perf",
        qos="high",
        cpus_per_task=8,
        mem_gb=64,
        constraint="h100",
        exclusive=True,
        setup=["module load cuda/12.4"],
        sbatch_extra={"gres": "gpu:h100:1"},
        srun_args=["--cpu-bind=cores"],
    )
    text = _make_sbatch_string(
        command="python -m submitit.core._submit X",
        folder="/logs",
        map_count=16,
        **slurm_parameters(conf, "perfsweep-seed000"),
    )
    for line in [
        "#SBATCH --array=0-15%2",
        "#SBATCH --partition=gpu",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --account=perf",
        "#SBATCH --qos=high",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=64GB",
        "#SBATCH --constraint=h100",
        "#SBATCH --exclusive",
        "#SBATCH --gres=gpu:h100:1",
        "#SBATCH --time=30",
        "#SBATCH --job-name=perfsweep-seed000",
        "module load cuda/12.4",
    ]:
        assert line in text.splitlines(), f"{line!r} missing from:\n{text}"
    assert "srun --unbuffered" in text and "--cpu-bind=cores" in text


def test_unset_slurm_options_are_left_out():
    params = slurm_parameters(LauncherConf(name="slurm"), "job")
    assert set(params) == {"job_name", "time", "signal_delay_s", "array_parallelism"}


@pytest.mark.slurm
def test_array_sweep_end_to_end(on_slurm, tmp_path):
    runs = tmp_path / "runs"
    result = launch_here(
        *SLURM,
        "input_type=tensor,subclass,tensorbase",
        "launcher.wait=true",
        "pairing=process",
        f"runs_dir={runs}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sweep = runs / "default"
    found = states(sweep)
    assert {s.state for s in found.values()} == {"done"} and len(found) == 3
    arrays = {s.job_id.split("_")[0] for s in found.values()}
    assert len(arrays) == 1, "one sbatch for the whole sweep"
    assert sorted(s.job_id.split("_")[1] for s in found.values()) == ["0", "1", "2"]
    script_array = arrays.pop()
    script = (sweep / ".submitit" / f"{script_array}_submission.sh").read_text()
    assert "#SBATCH --array=0-2%2" in script
    assert f"submitted as array {script_array}" in result.stdout, "what scancel stops, while the launch follows"
    assert "| subclass " in result.stdout and "1.00x" in result.stdout
    assert all(Path(s.log).exists() for s in found.values())


@pytest.mark.slurm
def test_submit_returns_then_status_follows(on_slurm, tmp_path):
    sweep = tmp_path / "runs" / "default"
    result = launch_here(*SLURM, "input_type=tensor,subclass", f"runs_dir={tmp_path / 'runs'}")
    assert result.returncode == 0, result.stderr
    assert re.search(r"submitted 2 runs as jobs? \d", result.stdout) and f"perfsweep status {sweep}" in result.stdout
    assert "[1/2]" not in result.stdout, "the launcher returned without following the runs"
    jobs = records.read_json(sweep / records.JOBS)
    again = launch_here(*SLURM, "input_type=tensor,subclass", f"runs_dir={tmp_path / 'runs'}")
    assert again.returncode == 0 and "nothing submitted" in again.stdout
    assert "still queued or running from an earlier launch" in again.stdout or "already done" in again.stdout
    assert records.read_json(sweep / records.JOBS) == jobs, "no run is submitted twice"
    wait_until_final(sweep)
    status = launch_here("status", str(sweep))
    assert "2 runs, 2 done" in status.stdout
    assert len({s.job_id for s in states(sweep).values()}) == 1, "the two sides shared one job's process"


@pytest.mark.slurm
def test_a_waiting_launch_that_finds_an_earlier_launch_s_run_in_flight_does_not_pass_it(on_slurm, tmp_path):
    """The earlier launch's job is held: a launch with launcher.wait=true submits nothing and follows nothing, so it
    has no done run to show and exits 1, saying who follows the run."""
    runs, held = tmp_path / "runs", "+launcher.sbatch_extra.hold=true"
    first = launch_here(*FUNCTION, "workload.impl=loop", held, f"runs_dir={runs}")
    assert first.returncode == 0, first.stdout + first.stderr
    (job,) = re.findall(r"submitted 1 run as job (\d+)", first.stdout)
    try:
        again = launch_here(*FUNCTION, "workload.impl=loop", "launcher.wait=true", f"runs_dir={runs}")
        said = "1 run of an earlier launch not done: this launch did not follow it; `perfsweep status "
        assert again.returncode == 1 and said in again.stderr, again.stdout + again.stderr
        status = launch_here("status", str(runs / "default"))
        assert status.returncode == 1 and "held; `scontrol release" in status.stdout, "a person, not a wait, ends it"
    finally:
        slurm("scancel", job)


@pytest.mark.slurm
def test_an_option_sbatch_refused_is_dropped_on_resume(on_slurm, tmp_path):
    """A misspelled extra option: sbatch refuses it, after the sweep's folder is made. Resume drops it, named with a
    tilde, and submits; a name the launch did not add is refused, naming those it did."""
    runs = tmp_path / "runs"
    first = launch_here(*FUNCTION, "workload.impl=loop", "+launcher.sbatch_extra.tiem=5", f"runs_dir={runs}")
    assert first.returncode == 1 and "(~launcher.sbatch_extra.KEY drops an option)" in first.stderr, first.stderr
    sweep = runs / "default"
    wrong = launch_here("resume", str(sweep), "~launcher.sbatch_extra.time")
    said = "~launcher.sbatch_extra.time: the launch added no such option; its launcher.sbatch_extra: {'tiem': 5}"
    assert wrong.returncode == 2 and said in wrong.stderr, wrong.stderr
    resumed = launch_here("resume", str(sweep), "~launcher.sbatch_extra.tiem", "launcher.wait=true")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert {s.state for s in states(sweep).values()} == {"done"}


@pytest.mark.slurm
def test_packed_runs_share_a_job_and_keep_their_records(on_slurm, tmp_path):
    runs = tmp_path / "runs"
    result = launch_here(
        *FUNCTION,
        "workload.impl=loop,broadcast",
        "seed=0,1",
        "launcher.runs_per_job=2",
        "launcher.wait=true",
        "pairing=process",
        f"runs_dir={runs}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = states(runs / "default")
    assert len(found) == 4 and {s.state for s in found.values()} == {"done"}
    jobs = sorted(s.job_id for s in found.values())
    assert len(set(jobs)) == 2 and jobs[0] == jobs[1] and jobs[2] == jobs[3]
    assert all((runs / "default" / name / records.STEPS).exists() for name in found)


@pytest.mark.slurm
def test_an_invalid_grid_submits_nothing(on_slurm, tmp_path):
    name = f"invalid-{tmp_path.name}"
    result = launch_here(*SLURM, "input_type=tensor,nope", f"runs_dir={tmp_path / 'runs'}", f"sweep_name={name}")
    assert result.returncode == 2 and "input_type/nope" in result.stderr
    assert not (tmp_path / "runs").exists()
    assert f"perfsweep-{name}" not in slurm("squeue", "-h", "-o", "%j")


@pytest.mark.slurm
def test_a_failing_run_fails_alone(on_slurm, tmp_path):
    result = launch_here(*SLURM, *ONE_OF_TWO_FAILS, "launcher.wait=true", f"runs_dir={tmp_path / 'runs'}")
    assert_one_of_two_failed(result, tmp_path / "runs" / "default")


@pytest.mark.slurm
def test_a_cancelled_job_is_lost_and_resume_completes_it(naps, tmp_path):
    """(500 naps: the run lasts 10 s; the cancel, as soon as it is seen running, kills it 5 s later.)"""
    runs = tmp_path / "runs"
    sweep = runs / "default"
    result = launch_here(*naps, "steps=500", f"runs_dir={runs}")
    assert result.returncode == 0, result.stderr
    wait_until_started(sweep, lambda: any(s.state == "running" for s in states(sweep).values()))
    job_ids = sorted({job["job_id"].split("_")[0] for job in records.read_json(sweep / records.JOBS).values()})
    slurm("scancel", *job_ids)
    deadline = time.monotonic() + 60
    while "1 lost" not in (status := launch_here("status", str(sweep)).stdout):
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert f"resume {sweep}" in status
    (lost,) = [line for line in status.splitlines() if line.startswith("lost")]
    assert re.search(r"  its job ended: CANCELLED AT \S+$", lost), "Slurm's word for what ended the job"

    refused = launch_here("resume", str(sweep), "steps=3")
    assert refused.returncode == 2 and "not: steps=3" in refused.stderr, "what a run measures cannot change"
    resumed = launch_here("resume", str(sweep), "launcher.wait=true")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1 run, 1 done" in launch_here("status", str(sweep)).stdout
    (earlier,) = records.read_status(next(sweep.glob("*/status.json")).parent).attempts
    assert earlier["error"] == "LostRun" and "CANCELLED AT" in earlier["message"], "the cancelled attempt, as it ended"
    steps = [records.read_steps(p.parent / records.STEPS).num_rows for p in sweep.glob("*/status.json")]
    assert steps == [501], steps
    again = launch_here("resume", str(sweep))
    assert again.returncode == 0 and "every run is done" in again.stdout


@pytest.mark.slurm
def test_a_resume_while_an_array_runs_waits_for_it_so_that_no_two_runs_measure_at_once(naps, tmp_path):
    """launcher.parallelism=1. The array's %1 holds its own tasks alone. A run of 300 naps lasts 6 s or more."""
    runs = tmp_path / "runs"
    sweep = runs / "default"
    assert launch_here(*naps, "steps=300", "seed=0,1", f"runs_dir={runs}").returncode == 0
    wait_until_started(sweep, lambda: any(s.state == "running" for s in states(sweep).values()))
    (waiting,) = [
        job["job_id"]
        for name, job in records.read_json(sweep / records.JOBS).items()
        if name not in {n for n, s in states(sweep).items() if s.state == "running"}
    ]
    slurm("scancel", waiting)  # the second task, held by %1: its run is pending and no job holds it
    while waiting in slurm("squeue", "-h", "-r", "-o", "%i").split():
        time.sleep(0.2)
    resumed = launch_here("resume", str(sweep))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    first_array = waiting.split("_")[0]
    (new,) = {job["job_id"].split("_")[0] for job in records.read_json(sweep / records.JOBS).values()} - {first_array}
    assert f"Dependency=afterany:{first_array}" in slurm("scontrol", "show", "job", new).replace("(unfulfilled)", "")
    status = launch_here("status", str(sweep))
    waits = "queued: Dependency (after the sweep's earlier arrays, so that no more run at once"
    assert waits in status.stdout, status.stdout
    first, second = sorted(wait_until_final(sweep).values(), key=lambda status: status.started_at)
    assert second.started_at >= first.finished_at, "the resumed run started only once the first had ended"


@pytest.mark.slurm
@pytest.mark.parametrize("wait", [False, True])
def test_a_job_its_partition_cannot_hold_is_not_waited_for_and_status_says_how_to_refit_it(on_slurm, tmp_path, wait):
    """8 CPUs a task on the local cluster's 2-CPU node: Slurm queues it for ever (PartitionConfig).
    launcher.cpus_per_task=8 is refused before submitting; an sbatch_extra option passes through unchecked.
    A launch that follows its jobs stops following it."""
    sweep = tmp_path / "runs" / "default"
    result = launch_here(*FUNCTION, STUCK, f"launcher.wait={wait}", f"runs_dir={sweep.parent}")
    (job,) = {job["job_id"] for job in records.read_json(sweep / records.JOBS).values()}
    (name,) = records.planned_runs(sweep)
    flag = f"PENDING {name}: queued, cannot start: PartitionConfig (it asks for more CPUs"
    if wait:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "queued, cannot start: PartitionConfig (it asks for more CPUs" in result.stdout, result.stdout
        assert f"`scancel {job.split('_')[0]}`, then `" in result.stdout
        assert flag in result.stdout, "the table below says it too"
    else:
        assert result.returncode == 0, result.stderr
    try:
        deadline = time.monotonic() + 30
        while "PartitionConfig" not in slurm("squeue", "-h", "-o", "%r", "-j", job):
            assert time.monotonic() < deadline, slurm("squeue", "-h", "-o", "%i %r")
            time.sleep(0.2)
        status = launch_here("status", str(sweep))
        assert status.returncode == EXIT_NOT_DONE, "a script waiting on 4 would wait for ever"
        assert "queued, cannot start: PartitionConfig (it asks for more CPUs" in status.stdout, status.stdout
        array = job.split("_")[0]
        assert f"`scancel {array}`, then `" in status.stdout and f" resume {sweep} launcher.KEY=VALUE`" in status.stdout
        assert flag in launch_here("table", str(sweep)).stdout
        said = "1 run not submitted again: its job is queued, cannot start: PartitionConfig"
        for again in ("true", "false"):  # no scancel: the job is left to its owner
            resumed = launch_here("resume", str(sweep), f"launcher.wait={again}")
            assert resumed.returncode == EXIT_NOT_DONE, "a gate after the resume would pass a run that never runs"
            assert said in resumed.stdout and "still queued or running" not in resumed.stdout, resumed.stdout
            assert f"`scancel {job.split('_')[0]}`, then" in resumed.stdout, "the array's id: one scancel for its tasks"
            assert (flag in resumed.stdout) == (again == "true"), "the table of a resume that follows says it too"
    finally:
        slurm("scancel", job)


@pytest.mark.slurm
def test_repeats_auto_stops_at_a_look_whose_jobs_cannot_start_and_says_nothing_ran(on_slurm, tmp_path):
    """A later look would queue another array that can never start."""
    args = ["workload=pairwise_sum_prod", "workload.impl=loop,broadcast", "workload.size=10", "steps=5"]
    args += ["launcher=slurm", "launcher.wait=true", POLL, STUCK, "repeats=auto"]
    result = launch_here(*args, "auto.max_runs=6", "tracker.mode=disabled", f"runs_dir={tmp_path}")
    arrays = sorted(
        {job["job_id"].split("_")[0] for job in records.read_json(tmp_path / "default" / records.JOBS).values()}
    )
    slurm("scancel", *arrays)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert len(arrays) == 1, f"one look's array: {arrays}"
    (name, *_) = records.planned_runs(tmp_path / "default")
    assert f"PENDING {name}: queued, cannot start: PartitionConfig" in result.stdout, "in the table too"
    said = "repeats=auto stopped at its first look (3 runs a configuration): no run is done, so nothing could be"
    assert said in result.stdout, result.stdout[-1000:]


@pytest.mark.slurm
def test_repeats_auto_stops_after_a_look_where_some_jobs_cannot_start_and_says_why(on_slurm, tmp_path):
    """2 ranks a run of 2 CPUs each on the local cluster's 2-CPU node: those runs' array can never start, while the
    1-rank runs finish. Their comparison stays undecided, and a later look would queue another array of them.
    The CPUs go through sbatch_extra, past the checks, which refuse launcher.cpus_per_task=2 for such ranks."""
    args = [*TINY, "steps=10", "input_type=tensor,subclass", "memory_format=contiguous", "dist=ddp"]
    args += ["dist.world_size=1,2", "dist.backend=gloo", "launcher=slurm", "launcher.wait=true", POLL, "repeats=auto"]
    args += ["+launcher.sbatch_extra.cpus_per_task=2"]
    result = launch_here(*args, "auto.max_runs=6", "tracker.mode=disabled", f"runs_dir={tmp_path}")
    jobs = records.read_json(tmp_path / "default" / records.JOBS)
    arrays = sorted({job["job_id"].split("_")[0] for job in jobs.values()})
    slurm("scancel", *arrays)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    wide = {job["job_id"].split("_")[0] for name, job in jobs.items() if "world_size=2" in name}
    assert len(wide) == 1, f"one look's array of the runs that cannot start: {wide}"
    said = "repeats=auto stopped after 3 rounds: 6 runs done in"
    assert said in result.stdout, result.stdout[-3000:]
    why = "6 of its runs are queued in jobs that cannot start (PartitionConfig), and a later look would queue"
    assert why in result.stdout, result.stdout[-3000:]


def time_left_s(job_id: str) -> float:
    """What Slurm leaves the job of its time (squeue's %L: M:SS, or H:MM:SS); 0 once it has left the queue."""
    left = slurm("squeue", "-h", "-o", "%L", "-j", job_id).strip()
    return sum(int(part) * 60**power for power, part in enumerate(reversed(left.split(":")))) if left else 0.0


def slurm(*args: str) -> str:
    """A Slurm command's output (the environment points it at the local cluster: on_slurm)."""
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


@pytest.mark.slurm
@pytest.mark.parametrize("how", ["requeue", "preempt", "preempt-short"])
def test_a_requeued_run_finishes_with_one_set_of_records(naps, tmp_path, how):
    """A job of 5 minutes, preempted: submitit calls any warning to so short a job a timeout, and it is requeued."""
    sweep = tmp_path / "runs" / "default"
    # the requeue kills the run 5 s after it (8 s of naps); SIGUSR2 stops it at once (3 s of naps)
    steps = {"requeue": 400, "preempt": 150, "preempt-short": 150}[how]
    limit = ["launcher.timeout_min=5"] if how == "preempt-short" else []
    result = launch_here(*naps, f"steps={steps}", *limit, "tracker.mode=offline", f"runs_dir={sweep.parent}")
    assert result.returncode == 0, result.stderr
    wait_until_started(sweep, lambda: any(sweep.glob("*/env.json")))  # past start-up, into the steps
    (run_dir,) = [p.parent for p in sweep.glob("*/status.json")]
    job_id = records.read_status(run_dir).job_id
    if how == "requeue":  # what an admin or a node failure does: the job is killed and queued again
        slurm("scontrol", "requeue", job_id)
    else:  # what preemption does: SIGUSR2, upon which submitit checkpoints the pack and requeues it
        slurm("scancel", "--signal=USR2", job_id)
    deadline = time.monotonic() + 60
    while "BeginTime" not in slurm("squeue", "-h", "-o", "%r", "-j", job_id):
        assert time.monotonic() < deadline, "the job was not requeued"
        time.sleep(0.2)
    # Skip most of Slurm's requeue delay, not all of it: slurmd revokes the job's credential to the second, and a
    # restart in the same second is killed as "Job credential revoked".
    slurm("scontrol", "update", f"jobid={job_id}", "StartTime=now+2")
    status = wait_until_final(sweep)[run_dir.name]
    deadline = time.monotonic() + 60
    while "wandb_s" not in (status.timing or {}):  # done is recorded first; W&B runs after, then is timed
        assert time.monotonic() < deadline, "W&B did not finish"
        time.sleep(0.2)
        status = records.read_status(run_dir)
    assert status.state == "done" and status.job_id == job_id
    assert [a["job_id"] for a in status.attempts] == [job_id]
    assert records.read_steps(run_dir / records.STEPS).num_rows == steps + 1
    assert len(list((run_dir / "wandb").glob("offline-run-*"))) == 1, "one W&B run, not a fork per start"


@pytest.mark.slurm
def test_a_job_warned_of_its_time_limit_fails_its_run_naming_the_limit_and_is_not_requeued(naps, tmp_path):
    """A requeued run starts over: one that needs longer than its job's time would reach the limit again and again."""
    sweep = tmp_path / "runs" / "default"
    # 3 minutes, the least allowed; 3000 naps (60 s) outlast the earliest warning, 30 s into the job
    result = launch_here(*naps, "steps=3000", "launcher.timeout_min=3", f"runs_dir={sweep.parent}")
    assert result.returncode == 0, result.stderr
    wait_until_started(sweep, lambda: any(sweep.glob("*/env.json")))  # past start-up, into the steps
    (run_dir,) = [p.parent for p in sweep.glob("*/status.json")]
    job_id = records.read_status(run_dir).job_id
    while time_left_s(job_id) > SLURM_WARNING_S + SLURM_EARLY_S:  # as early as Slurm may warn it
        time.sleep(0.5)
    slurm("scancel", "--signal=USR2", job_id)  # Slurm's warning, sent now (unless Slurm sent its own already)
    status = wait_until_final(sweep, timeout_s=60)[run_dir.name]
    assert status.state == "failed" and status.error.type == "RunTimeout", status
    assert "Slurm's warning 90 s before its time limit (launcher.timeout_min=3)" in status.error.message
    deadline = time.monotonic() + 60
    while queued := slurm("squeue", "-h", "-o", "%r", "-j", job_id).strip():  # the job ends, not queued again
        assert "BeginTime" not in queued and time.monotonic() < deadline, queued
        time.sleep(0.2)
    assert records.read_status(run_dir).state == "failed"


@pytest.mark.slurm
def test_a_partition_the_cluster_lacks_is_refused_before_anything_is_submitted(on_slurm, tmp_path):
    """sbatch would refuse it only once the sweep's folder is made; `--partition` takes a list."""
    result = launch_here(*FUNCTION, "launcher.partition='cpu, gpu'", f"runs_dir={tmp_path}")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "launcher.partition=cpu, gpu: this cluster has no partition ' gpu' (sinfo -a lists: cpu)" in result.stderr
    assert not (tmp_path / "default").exists()
    empty = launch_here(*FUNCTION, "launcher.partition=''", f"runs_dir={tmp_path}")
    said = "launcher.partition='' names no partition: give one (sinfo -a lists: cpu), or leave it unset (null)"
    assert empty.returncode == 2 and said in empty.stderr and not (tmp_path / "default").exists(), empty.stderr
    assert not any("partition" in problem for problem in launcher_problems(LauncherConf(name="slurm", partition="cpu")))


@pytest.mark.slurm
def test_gpus_no_node_has_and_an_array_past_the_cluster_s_limit_are_refused_before_anything_is_written(
    on_slurm, tmp_path
):
    """The local cluster's node has no GPU, and its MaxArraySize is 1001: sbatch would refuse either."""
    for setting, said in (
        ("launcher.gpus_per_node=8", "a job asks a node for 8 GPUs, and partition cpu's nodes have 0 at most"),
        ("launcher.max_array_size=5000", "the cluster's arrays hold 1000 tasks at most (MaxArraySize"),
    ):
        result = launch_here(*FUNCTION, setting, f"runs_dir={tmp_path}")
        assert result.returncode == 2 and said in result.stderr, result.stdout + result.stderr
        assert not (tmp_path / "default").exists()
    assert not launcher_problems(LauncherConf(name="slurm", max_array_size=1000, gpus_per_node=0))


@pytest.mark.slurm
def test_a_job_larger_than_any_node_of_its_partition_is_refused_before_anything_is_submitted(on_slurm, tmp_path):
    """The local cluster's node has 2 CPUs: a job of 4 a task, or of 2 ranks of 2 each, would queue for ever."""
    result = launch_here(*FUNCTION, "launcher.cpus_per_task=4", f"runs_dir={tmp_path}")
    assert result.returncode == 2 and not (tmp_path / "default").exists(), result.stdout + result.stderr
    said = "launcher.cpus_per_task=4: a job asks a node for 4 CPUs (1 task), and partition cpu's nodes have 2 at most"
    assert said in result.stderr and "give 2 or fewer" in result.stderr, result.stderr
    ranks = launch_here(*TWO_TASKS, "launcher.cpus_per_task=2", f"runs_dir={tmp_path}")
    assert "4 CPUs (2 a task x 2 tasks, a run's ranks a node)" in ranks.stderr and "give 1 or fewer" in ranks.stderr
    three = launch_here(*TWO_TASKS, "dist.world_size=3", f"runs_dir={tmp_path}")
    said = "dist.world_size over launcher.nodes: 3 ranks a node, a task and a CPU each at least, and partition cpu's"
    assert said in three.stderr and "give 2 ranks a node or fewer; it has 1 node" in three.stderr, three.stderr
    memory = launcher_problems(LauncherConf(name="slurm", max_array_size=8, mem_gb=10**6))
    assert any(p.startswith("launcher.mem_gb=1000000: a job asks a node for 1024000000 MB") for p in memory), memory
    assert not launcher_problems(LauncherConf(name="slurm", max_array_size=8, cpus_per_task=2))
    named = launcher_problems(LauncherConf(name="slurm", max_array_size=8, partition="cpu", cpus_per_task=4))
    assert any(p.startswith("launcher.cpus_per_task=4: a job asks a node for 4 CPUs") for p in named), "named, too"


def test_a_slurm_time_limit_that_leaves_a_run_no_time_before_slurm_s_warning_is_refused():
    """Slurm may warn a job up to 60 s before the 90 s asked: a 2-minute job may be warned as it starts."""
    alone = build_plan([*TINY, "repeats=1", "pairing=process"])  # a process a run: a job of one side
    problems = launcher_problems(LauncherConf(name="slurm", max_array_size=8, timeout_min=2), alone)
    assert any(p.startswith("launcher.timeout_min=2: a Slurm job's time is whole minutes (--time=2)") for p in problems)
    assert "3-minute job leaves its run 30 s at least): timeout_min=3 or more" in "".join(problems)
    assert not launcher_problems(LauncherConf(name="slurm", max_array_size=8, timeout_min=3), alone)
    paired = build_plan([*TINY, "input_type=tensor,subclass", "memory_format=contiguous", "repeats=1", "pairing=auto"])
    for minutes, said in ((1, "--time=2: timeout_min x 2 sides, its shortest job's"), (1.5, None)):
        problems = launcher_problems(LauncherConf(name="slurm", max_array_size=8, timeout_min=minutes), paired)
        found = [p for p in problems if p.startswith(f"launcher.timeout_min={minutes:g}")]
        assert (said in found[0] and "timeout_min=1.5 or more" in found[0]) if said else not found, problems


def launcher_problems(conf: LauncherConf, plan=None) -> list[str]:
    """What the settings' own check and their backend's find (for a plan of one tiny run by default)."""
    plan = plan or build_plan([*TINY, "repeats=1"])
    return conf.problems() + backend_for(conf).problems(plan)


def ranks_problems(plan) -> list[str]:
    return launcher_problems(plan.settings.launcher, plan)


def test_a_newline_in_a_slurm_option_is_refused_before_anything_is_submitted(monkeypatch):
    conf = LauncherConf(
        name="slurm",
        max_array_size=8,  # not read from the cluster's scontrol
        partition="gpu\nrm -rf ~",
        setup=["module load cuda", "echo\tok"],
        sbatch_extra={"gres": "gpu:1\n#SBATCH --time=9999"},
    )
    golden.says("slurm: control characters in its options", "\n".join(launcher_problems(conf)))
    monkeypatch.setattr(slurm_backend, "partition_problems", lambda partition: [])  # whatever this host's sinfo lists
    assert launcher_problems(LauncherConf(name="slurm", partition="cpu")) == launcher_problems(
        LauncherConf(name="slurm")
    )


def _said(text: str, word: str = "perfsweep") -> str:
    """The lines of `text` that hold `word` (the rest differs from one launch to the next)."""
    return "\n".join(line for line in text.splitlines() if word in line)


def _wrap(folder: Path, command: str, fails: str) -> None:
    """`command` first on PATH: fails (as Slurm does when a limit is hit or the controller times out) when the
    shell test `fails` holds for $n, this call's number; else the real one runs."""
    real = shutil.which(command)
    script = folder / command
    calls = folder / f"{command}.calls"
    script.write_text(
        f"#!/bin/bash\nn=$(( $(cat {calls} 2>/dev/null || echo 0) + 1 )); echo $n > {calls}\n"
        f'if {fails}; then echo "{command}: error: simulated failure $n" >&2; exit 1; fi\nexec {real} "$@"\n'
    )
    script.chmod(0o755)


def test_jobs_sent_to_another_cluster_are_asked_of_that_cluster(tmp_path, monkeypatch):
    """A stand-in squeue that notes its arguments: a second cluster cannot exist here. Asked without --clusters, a
    cluster's squeue calls another's jobs invalid ids, and they would count as ended."""
    (tmp_path / "squeue").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/asked\necho "7_0 PENDING Resources"\n')
    (tmp_path / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    conf = LauncherConf(name="slurm", max_array_size=8, sbatch_extra={"clusters": "gpu2"})
    entry = backend_for(conf).job_entry(tmp_path, None)
    assert entry == {"clusters": "gpu2"}, "jobs.json keeps where the job went"
    assert slurm_backend.squeue_ids({"7_0": entry, "9_0": {}}) == {"7_0": "Resources"}
    asked = (tmp_path / "asked").read_text().splitlines()
    assert sorted(line.split("-h")[0].strip() for line in asked) == ["", "--clusters gpu2"], asked
    problems = launcher_problems(LauncherConf(name="slurm", max_array_size=8, sbatch_extra={"M": "gpu2"}))
    assert any(p.startswith("launcher.sbatch_extra.M: the script passes it as --M=...") for p in problems), problems


def test_a_job_that_cannot_start_on_another_cluster_is_cancelled_there(tmp_path, monkeypatch):
    """The same stand-in squeue: another cluster queues the job for ever (PartitionConfig). A plain scancel would
    ask this host's cluster, which has no such job."""
    (tmp_path / "squeue").write_text('#!/bin/sh\necho "7_0 PENDING PartitionConfig"\n')
    (tmp_path / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    sweep = tmp_path / "sweep"
    (sweep / "r").mkdir(parents=True)
    records.write_json(sweep / records.SWEEP, {"uid": "u", "runs": {"r": "id"}, "launches": []})
    records.write_json(
        sweep / records.JOBS, {"r": {"job_id": "7_0", "launcher": "slurm", "log": "-", "clusters": "gpu2"}}
    )
    ((state, why),) = stranded(sweep).values()
    assert state == "pending" and "queued, cannot start: PartitionConfig" in why, why
    assert "`scancel --clusters gpu2 7`, then `" in why, why
    assert "r  job 7_0 (cluster gpu2)" in render(sweep)[0], "status names where the job is"
    (tmp_path / "squeue").write_text('#!/bin/sh\necho "7_0 PENDING JobHeldUser"\n')
    assert "held; `scontrol --clusters gpu2 release 7_0` lets it run" in render(sweep)[0]
    problems = launcher_problems(LauncherConf(name="slurm", max_array_size=8, sbatch_extra={"clusters": "gpu2,gpu3"}))
    assert any(p.startswith("launcher.sbatch_extra.clusters='gpu2,gpu3' names several clusters") for p in problems)


def test_a_job_no_single_node_can_hold_is_refused_and_one_some_node_holds_is_not(tmp_path, monkeypatch):
    """A stand-in sinfo of a partition of mixed nodes (the local cluster has one node): 64 CPUs with 1 GB, and 8
    CPUs with 250 GB. 32 CPUs fit one, 100 GB the other: no node holds both."""
    (tmp_path / "sinfo").write_text('#!/bin/sh\necho "big* 64 1000"\necho "big* 8 256000"\n')
    (tmp_path / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    (said,) = slurm_backend.node_problems(LauncherConf(name="slurm", cpus_per_task=32, mem_gb=100), 1)
    assert said.startswith("launcher.cpus_per_task=32 with launcher.mem_gb=100: a job asks a node for 32 CPUs")
    assert "no one of partition big's nodes has both (sinfo: 8 CPUs with 256000 MB, 64 CPUs with 1000 MB)" in said
    assert not slurm_backend.node_problems(LauncherConf(name="slurm", cpus_per_task=8, mem_gb=100), 1)
    assert not slurm_backend.node_problems(LauncherConf(name="slurm", nodes=2), 1, nodes=2), "2 nodes of big"
    (said,) = slurm_backend.node_problems(LauncherConf(name="slurm", nodes=3), 1, nodes=3)
    assert said.startswith("launcher.nodes=3: a job asks for 3 nodes, and partition big has 2 (sinfo)"), said
    (said,) = slurm_backend.node_problems(LauncherConf(name="slurm", cpus_per_task=16), 8)
    assert said.endswith("64 at most (sinfo): Slurm would queue it for ever; give 8 or fewer"), said
    elsewhere = LauncherConf(name="slurm", cpus_per_task=128, sbatch_extra={"partition": "huge"})
    assert not slurm_backend.node_problems(elsewhere, 1), "a partition given past launcher.partition is sbatch's"
    gres = 'echo "gpu* 64 1000 gpu:a100:4(S:0-1),gpu:h100:2"\necho "gpu* 8 1000 (null)"\n'
    (tmp_path / "sinfo").write_text(f"#!/bin/sh\n{gres}")
    (said,) = slurm_backend.node_problems(LauncherConf(name="slurm", gpus_per_node=8), 1)
    assert "a job asks a node for 8 GPUs, and partition gpu's nodes have 6 at most (sinfo's gres)" in said, said
    assert not slurm_backend.node_problems(LauncherConf(name="slurm", gpus_per_node=6), 1)
    assert not slurm_backend.node_problems(LauncherConf(name="slurm", nodes=2), 1, nodes=2)
    (said,) = slurm_backend.node_problems(LauncherConf(name="slurm", nodes=2, gpus_per_node=4), 1, nodes=2)
    assert said.startswith("launcher.nodes=2: a job asks for 2 nodes, each of 1 CPUs, 0 MB and 4 GPUs, and partition "
                           "gpu has 1 such (sinfo)"), said  # fmt: skip


def test_a_squeue_that_hangs_counts_as_a_failed_try(tmp_path, monkeypatch):
    """A stand-in squeue that never answers (a hung controller or mount, which a test cluster cannot make)."""
    (tmp_path / "squeue").write_text("#!/bin/sh\nexec sleep 30\n")
    (tmp_path / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(slurm_backend, "ASK_S", 0.2)
    monkeypatch.setattr(slurm_backend, "SQUEUE_RETRY_S", (0.0,))
    began = time.monotonic()
    with pytest.raises(slurm_backend.SchedulerUnavailable, match=r"squeue failed 2 times \(exit 124: squeue did not"):
        slurm_backend.squeue_ids({"4242": {}})
    assert time.monotonic() - began < 10, "each try stopped at its limit"


@pytest.mark.slurm
def test_a_refused_sbatch_and_a_silent_squeue_lose_no_job_and_run_nothing_twice(on_slurm, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _wrap(bin_dir, "sbatch", "[ $n -eq 2 ]")  # the second array is refused (a per-user submit limit)
    _wrap(bin_dir, "squeue", f"[ $n -le $(cat {bin_dir}/squeue.failing 2>/dev/null || echo 0) ]")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(slurm_backend, "SQUEUE_RETRY_S", (0.2, 0.4))
    runs = tmp_path / "runs"
    sweep = runs / "default"
    args = [*FUNCTION, "workload.impl=loop,broadcast", "seed=0,1", "launcher.max_array_size=2", "pairing=process"]
    args += [f"runs_dir={runs}"]
    first = launch_here(*args, "launcher.wait=true")
    assert first.returncode == 1, first.stderr
    submitted = records.submitted_jobs(sweep)
    assert len(submitted) == 2, "the first array's jobs are recorded"
    (array,) = {entry["job_id"].split("_")[0] for entry in submitted.values()}
    jobs = {re.compile(rf"\b{array}\b"): "<array>", re.compile(r"failure \d+"): "failure <n>", tmp_path: "<tmp>"}
    golden.says("slurm: sbatch refuses the second array", _said(first.stderr), jobs)

    (bin_dir / "squeue.failing").write_text("1000")  # the controller stops answering
    shown = launch_here("status", str(sweep)).stdout
    golden.says("slurm: status while squeue fails", _said(shown, "squeue"), jobs)
    rows = {line.split()[1]: line.split()[0] for line in shown.splitlines()[1:] if line.split()[1:2]}
    assert {rows[name] for name in submitted} <= {"unknown", "done"}, shown

    calls = int((bin_dir / "squeue.calls").read_text())
    (bin_dir / "squeue.failing").write_text(str(calls + 2))  # it answers again after two more failures
    again = launch_here("resume", str(sweep), "launcher.wait=true")
    assert again.returncode == 0, again.stdout + again.stderr
    assert int((bin_dir / "sbatch.calls").read_text()) == 3, "resume submitted only what was not submitted"
    final = states(sweep)
    assert {s.state for s in final.values()} == {"done"} and len(final) == 4
    assert all(s.attempts == () for s in final.values()), "every run ran once"
    assert {final[name].job_id for name in submitted} == {entry["job_id"] for entry in submitted.values()}


@pytest.mark.slurm
def test_a_first_sbatch_refused_says_no_job_was_submitted_and_how_to_go_on(on_slurm, tmp_path, monkeypatch):
    _wrap(tmp_path, "sbatch", "true")  # a partition that does not exist, a controller down
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    sweep = tmp_path / "runs" / "default"
    refused = launch_here(*FUNCTION, f"runs_dir={sweep.parent}")
    assert refused.returncode == 1 and not records.submitted_jobs(sweep)
    said = "sbatch: error: simulated failure 1\nno job was submitted; 1 run was not submitted (pending). "
    assert said in refused.stderr, refused.stderr


def _only_on_path(folder: Path, monkeypatch, *commands: str) -> None:
    """PATH holding stand-ins for these commands alone: never run, only found (what the checks look for)."""
    for command in commands:
        (folder / command).write_text("#!/bin/sh\nexit 1\n")
        (folder / command).chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))


def test_no_scontrol_to_read_max_array_size_is_a_problem_before_anything_is_submitted(tmp_path, monkeypatch):
    _only_on_path(tmp_path, monkeypatch, "sbatch", "squeue", "srun")
    (problem,) = launcher_problems(LauncherConf(name="slurm"))
    golden.says("slurm: no scontrol to read its array size limit", problem, {tmp_path: "<tmp>"})
    assert launcher_problems(LauncherConf(name="slurm", max_array_size=100)) == []


def test_slurm_commands_that_reach_no_controller_are_refused_as_such_not_as_an_array_size_to_set(tmp_path, monkeypatch):
    """A login node without Slurm's configuration: a launcher.max_array_size given would not make sbatch work."""
    _only_on_path(tmp_path, monkeypatch, "sbatch", "squeue", "srun")
    fatal = "scontrol: fatal: Could not establish a configuration source"
    (tmp_path / "scontrol").write_text(f"#!/bin/sh\necho '{fatal}' >&2\nexit 1\n")
    (tmp_path / "scontrol").chmod(0o755)
    (problem,) = launcher_problems(LauncherConf(name="slurm"))
    assert problem.startswith("launcher=slurm: Slurm's commands reach no controller here") and fatal in problem
    assert "max_array_size" not in problem and "SLURM_CONF" in problem and "launcher=local" in problem


def test_slurm_without_srun_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    _only_on_path(tmp_path, monkeypatch, "sbatch", "squeue")
    runs = tmp_path / "runs"
    result = launch_here(*FAST, "launcher=slurm", "launcher.max_array_size=8", f"runs_dir={runs}")
    assert result.returncode == 2, result.stdout + result.stderr
    golden.says("slurm: no srun", result.stderr, {tmp_path: "<tmp>"})
    assert not runs.exists()


@pytest.mark.slurm
@pytest.mark.slow
def test_an_8_run_sweep_split_into_two_slurm_arrays_leaves_8_complete_records(on_slurm, tmp_path):
    """The local cluster's two CPUs run two tasks at a time: this checks a large sweep's records, split below the
    array size limit (runs ending at once are test_faults.py's 32 local runs)."""
    runs = tmp_path / "runs"
    args = ["workload=pairwise_sum_prod", "workload.impl=broadcast", "workload.size=10", "steps=5", "warmup_steps=1"]
    args += ["seed=range(0,8)", "launcher=slurm", "launcher.parallelism=8", "launcher.max_array_size=2"]
    args += ["launcher.runs_per_job=2"]  # 2 runs a task: an array of 2 tasks holds 4 runs
    args += ["launcher.wait=true", POLL, "repeats=1"]
    result = launch_here(*args, "tracker.mode=disabled", f"runs_dir={runs}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    loaded = load_sweep(runs / "default")
    assert len(loaded) == 8 and all(r.state == "done" for r in loaded)
    arrays = {r.status.job_id.split("_")[0] for r in loaded}
    assert len(arrays) == 2, "two arrays of 4, below the limit"
    assert sorted(len([r for r in loaded if r.status.job_id.startswith(f"{a}_")]) for a in arrays) == [4, 4]


@pytest.mark.slurm
def test_a_launch_s_arrays_run_no_more_tasks_at_once_than_its_parallelism(naps, tmp_path):
    """Two arrays of one task, one run at a time: the second waits for the first, as %N bounds one array alone."""
    runs = tmp_path / "runs"
    args = [*naps, "seed=0,1", "steps=100", "launcher.max_array_size=1", "launcher.wait=true"]
    result = launch_here(*args, f"runs_dir={runs}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    first, second = sorted(load_sweep(runs / "default"), key=lambda r: r.status.started_at)
    assert first.status.job_id.split("_")[0] != second.status.job_id.split("_")[0], "two arrays"
    assert second.status.started_at >= first.status.finished_at, "the second array waited for the first"


@pytest.mark.slurm
def test_a_launch_beside_another_grid_in_flight_counts_its_own_runs(naps, tmp_path):
    """The folder's first grid is queued or running: the second launch's runs are its own count, not the first's."""
    try:
        first = launch_here(*naps, "seed=0,1", "steps=100", f"runs_dir={tmp_path}")
        assert first.returncode == 0, first.stderr
        second = launch_here(*naps, "seed=2", "steps=100", f"runs_dir={tmp_path}")
        assert second.returncode == 0, second.stderr
        said = second.stdout
        assert "submitted 1 run as job" in said and "still queued or running" not in said, said
    finally:
        jobs = json.loads((tmp_path / "default" / "jobs.json").read_text())
        slurm("scancel", *{job["job_id"].split("_")[0] for job in jobs.values()})


@pytest.mark.slurm
def test_repeats_auto_on_slurm_submits_an_array_per_look_and_follows_each(on_slurm, tmp_path):
    args = ["workload=pairwise_sum_prod", "workload.impl=loop,broadcast", "workload.size=10", "steps=5"]
    args += ["launcher=slurm", "launcher.wait=true", POLL, "launcher.parallelism=2"]
    args += ["launcher.runs_per_job=3"]  # the look's 6 runs in 2 tasks
    result = launch_here(*args, "repeats=auto", "auto.max_runs=3", "tracker.mode=disabled", f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "repeats=auto stopped after 3 rounds: 6 runs done in" in result.stdout
    jobs = {s.job_id.split("_")[0] for s in states(tmp_path / "default").values()}
    assert len(jobs) == 1  # one look: one array


@pytest.mark.slurm
@pytest.mark.network
def test_an_environment_axis_runs_each_array_with_its_environments_python(on_slurm, tmp_path):
    """Each environment's runs go to an array of their own, whose jobs start that environment's Python."""
    numpys = ("2.2.6", "2.3.5")
    args = [*FAST, f"+env.packages.numpy={','.join(numpys)}", "launcher=slurm", "launcher.wait=true"]
    args += [POLL, "launcher.max_array_size=8", "tracker.mode=disabled", f"env.dir={tmp_path / 'envs'}"]
    result = launch_here(*args, f"runs_dir={tmp_path / 'runs'}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = load_sweep(tmp_path / "runs" / "default")
    assert sorted(run.env["packages"]["numpy"] for run in runs) == sorted(numpys)
    assert all(run.env["packages"]["numpy"] == run.axes["numpy"] for run in runs)
    assert len({run.status.job_id.split("_")[0] for run in runs}) == 2, "an array per environment"


# Two ranks of a small model on the local cluster's two CPUs: a job of two tasks, one a rank.
TWO_TASKS = [*SLURM, "input_type=tensor", "dist=ddp", "dist.world_size=2", "steps=10", "warmup_steps=2"]


@pytest.mark.slurm
def test_a_ddp_run_s_ranks_are_the_tasks_of_its_job(on_slurm, tmp_path):
    result = launch_here(*TWO_TASKS, "launcher.wait=true", f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    runs = load_sweep(tmp_path / "default")
    assert len(runs) == 1 and {run.state for run in runs} == {"done"}
    for run in runs:
        assert run.status.tasks == 2 and run.summary.ranks.world_size == 2
        # (how much is exposed is test_dist.py's: here, under the suite's load, noise can hide a few ms of it)
        assert run.summary.ranks.exposed_comm_ms is not None and run.summary.ranks.straggler_index >= 1
        ranks = read_steps(run.path / records.RANKS).to_pylist()
        assert {(row["rank"], row["grad_sync"]) for row in ranks} == {(0, True), (0, False), (1, True), (1, False)}
        script = next((tmp_path / "default" / ".submitit").glob(f"{run.status.job_id.split('_')[0]}_submission.sh"))
        assert "#SBATCH --ntasks-per-node=2" in script.read_text() and "#SBATCH --nodes=1" in script.read_text()
    assert "| exposed comm ms |" in result.stdout


def task_process(job_id: str, task: int) -> int | None:
    """The pid of task `task` of Slurm job `job_id` (array element ids are their own job's), if it runs."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job_id}".encode() in environ and f"SLURM_PROCID={task}".encode() in environ:
            return int(pid)
    return None


def sleeping_in_its_steps(pid: int) -> bool:
    """Whether a rank's process sleeps its straggler drill's delay (dist.delay_ms), which only its steps do: its
    main thread in a nanosleep with sockets open to its peers (the store's and the process group's). Before it
    has joined them a rank may also sleep, between tries to connect to the store, with none or one open."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
        sockets = sum(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:") for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False
    return "nanosleep" in wchan and sockets >= 2


@pytest.mark.slurm
def test_a_killed_task_fails_its_run_at_once_and_ends_its_job(on_slurm, tmp_path):
    """Rank 1 sleeps 500 ms a step (20 s of steps), and is killed inside them."""
    delayed = ["dist.delay_rank=1", "dist.delay_ms=500", "steps=20"]
    assert launch_here(*TWO_TASKS, *delayed, f"runs_dir={tmp_path}").returncode == 0
    sweep = tmp_path / "default"
    (name,) = records.planned_runs(sweep)

    def running() -> records.Status | None:
        status = records.read_status(sweep / name)
        return status if status.state == "running" and status.job_id else None

    status = wait_until_started(sweep, running)
    deadline = time.monotonic() + 60
    job_id = slurm("squeue", "-h", "-o", "%A", "-j", status.job_id.split("_")[0]).split()[0]
    while (pid := task_process(job_id, 1)) is None:
        assert time.monotonic() < deadline, "rank 1's task did not start"
        time.sleep(0.2)
    # killed inside its steps, not before it joined its peers (rank 0 would then wait dist.timeout_s for it)
    while not sleeping_in_its_steps(pid):
        assert time.monotonic() < deadline, "rank 1's task did not reach its steps"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    ended = wait_until_final(sweep, timeout_s=60)[name]
    assert time.monotonic() - killed < 30, "well before dist.timeout_s (120)"
    assert ended.state == "failed" and ended.error.type == "RankFailed"
    said = r"rank 0 of 2 failed \(\w+\): .*; its output: .*\.log; each other rank's is its task's log, .*_<rank>_log"
    assert re.match(said, ended.error.message)
    while subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() - killed < 30, "the job ended with its run"
        time.sleep(0.2)


def test_a_run_across_ranks_has_a_job_to_itself_with_a_task_per_rank(tmp_path):
    plan = build_plan([*TINY, "dist=none,ddp", "dist.world_size=2", "steps=10", "input_type=tensor,subclass"])
    by_dist = {}
    for spec in plan.runs:
        ranks = spec.config.dist.world_size if spec.config.dist.name != "none" else None
        by_dist.setdefault(ranks, []).append(RunJob(spec, tmp_path / spec.name, "id", 1, ranks_per_node=ranks))
    packs = packs_of([*by_dist[None], *by_dist[2]], size=4)
    assert len(by_dist[None]) == len(by_dist[2]) == 4
    assert [len(pack) for pack in packs] == [4, 1, 1, 1, 1], "one-process runs share jobs; one across ranks has one"
    interleaved = [pack for pair in zip(by_dist[None], by_dist[2], strict=True) for pack in ([pair[0]], [pair[1]])]
    assert [pack[0].ranks_per_node for pack in by_shape(interleaved)] == [None] * 4 + [2] * 4, "an array a kind"
    conf = LauncherConf(name="slurm", nodes=2, gpus_per_node=8, srun_args=["--cpu-bind=cores"])
    shaped = _make_sbatch_string(
        command="python -m submitit.core._submit X",
        folder="/logs",
        map_count=2,
        **(slurm_parameters(conf, "perfsweep-dist") | ranks_parameters(conf, 4, on_gpus=True)),
    )
    for line in ["#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --gpus-per-node=4"]:
        assert line in shaped
    assert "srun --unbuffered" in shaped and "--cpu-bind=cores" in shaped
    single = slurm_parameters(conf, "perfsweep") | ranks_parameters(conf, None, on_gpus=True)
    assert (single["nodes"], single["ntasks_per_node"], single["gpus_per_node"]) == (1, 1, 8)


def test_more_nodes_than_one_are_for_runs_across_ranks_on_slurm(tmp_path):
    for launcher, dist, says in [
        ("launcher=local", "dist=ddp", "launcher.nodes=2 with launcher=local: must be 1 (launcher=slurm: 1 or more)"),
        ("launcher=slurm", "dist=none", "launcher.nodes=2 is for runs across ranks (dist=ddp or dist=fsdp"),
    ]:
        nodes = [*TINY, launcher, dist, "launcher.nodes=2", "launcher.max_array_size=8", f"runs_dir={tmp_path}"]
        problems = ranks_problems(build_plan(nodes))
        assert len(problems) == 1 and problems[0].startswith(says)


@pytest.mark.slurm
def test_a_job_of_more_nodes_than_its_partition_has_is_refused_before_it_is_submitted(on_slurm, tmp_path):
    """The local cluster has one node: a job of 2 would queue for ever (PartitionNodeLimit)."""
    nodes = [*TINY, "launcher=slurm", "dist=ddp", "launcher.nodes=2", f"runs_dir={tmp_path}"]
    (said,) = ranks_problems(build_plan(nodes))
    assert said.startswith("launcher.nodes=2: a job asks for 2 nodes, and partition cpu has 1 (sinfo)"), said


def test_one_process_runs_on_other_devices_still_share_jobs(tmp_path):
    plan = build_plan([*TINY, "device=cpu,cuda", "input_type=tensor,subclass", "launcher=slurm"])
    runs = [RunJob(spec, tmp_path / spec.name, "id", 1) for spec in plan.runs]
    assert len({run.spec.config.device for run in runs}) == 2
    assert [len(pack) for pack in packs_of(runs, size=len(runs))] == [len(runs)], "the device shapes no job"


def test_local_gpu_ranks_need_their_gpus_and_runs_at_once_would_share_them(tmp_path, monkeypatch):
    """(A host with GPUs, faked: this one has none. Only the count is asked.)"""
    monkeypatch.setattr(local_backend, "local_gpus", lambda: 1)
    ranks = [*TINY, "dist=ddp", "dist.world_size=2", "steps=10", "device=cuda", f"runs_dir={tmp_path}"]
    (one_gpu,) = ranks_problems(build_plan(ranks))
    assert one_gpu.startswith("dist.world_size=2 on GPUs: a rank needs a GPU of its own, and launcher=local gives")
    assert "launcher.gpus_per_node=2 gives a run this host's first 2" in one_gpu
    assert ranks_problems(build_plan([*ranks, "launcher.gpus_per_node=2"])) == []
    (shared,) = ranks_problems(build_plan([*ranks, "launcher.gpus_per_node=2", "launcher.parallelism=2"]))
    assert shared.startswith("launcher.parallelism=2 with dist.world_size=2 on GPUs: each run is given this host's")


def test_status_waits_for_a_queued_job_unless_all_it_waits_for_cannot_start():
    """A script waiting on exit 4 must end: a job its partition cannot hold is not waited for, a running one is."""
    stuck = RunState(
        "a", records.Status(), "pending", "7_0", None, "slurm", job_alive=True, job_waits="PartitionConfig"
    )
    queued = dataclasses.replace(stuck, run="b", job_id="7_1", job_waits="Resources")
    assert cannot_start([stuck, queued]) == {"a"}
    assert exit_status([stuck]) == EXIT_NOT_DONE
    assert exit_status([stuck, queued]) == EXIT_IN_FLIGHT
    just = dataclasses.replace(queued, job_waits="None")  # squeue's reason before the scheduler has looked
    assert run_states._waits(just) == "None (just queued: Slurm's scheduler has not looked at it yet)"


def test_a_time_limit_warning_is_told_from_a_preemption_when_squeue_answers_only_the_second_time(monkeypatch):
    """A busy controller can fail one squeue: read as a preemption, the run would be requeued and start over."""
    answers = iter([None, 100.0])
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setattr(run_job, "slurm_time_left_s", lambda: next(answers))
    monkeypatch.setattr(run_job.time, "sleep", lambda s: None)
    assert run_job.at_time_limit()
