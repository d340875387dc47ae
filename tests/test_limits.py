"""Time limits and ends of jobs: a sweep of any length runs to its end, a run past its limit is recorded timed out
(and run again as configured), and a run its job never started is pending, never lost."""

import dataclasses
import datetime
import importlib
import os
import re
import signal
import time

import numpy as np
import pytest

from perfsweep import records
from perfsweep.bench.gitrepo import SLEEP
from perfsweep.launcher import run_job, sweepdir, warm
from perfsweep.launcher.run_job import RunJob, Runner, execute_run
from perfsweep.launcher.run_states import EXIT_NOT_DONE, render, run_states
from perfsweep.launcher.warm import fork_runs
from perfsweep.records import lifecycle, load_sweep
from perfsweep.sweeps.plan import build_plan
from perfsweep.train import instrumented as train_run
from perfsweep.train import user_targets
from perfsweep.train.flops import count_flops
from tests import golden, synthetic
from tests.helpers import (
    FAILS_AT_SEED_1,
    FAST,
    launch_here,
    offline_wandb,
    record_done,
    start_launcher,
    wait_for,
    wandb_records,
)

# Runs of a few steps take about 0.5 s on a 2-core machine, with their start, probes and records: well within limits
# of a few seconds, even on a loaded machine; a run of a Python loop of 10**6 steps never is.
# One process per configuration (repeats=1): these tests are about limits, not replication.
LOOP = ["workload=pairwise_sum_prod", "workload.size=60", "warmup_steps=1", "tracker.mode=disabled", "repeats=1"]
ENDLESS = 10**6
JOB = re.compile(r"\bjob \d+")
TIMES = {re.compile(r"\d{4}-\d\d-\d\dT[\d:.+]+"): "<time>", re.compile(r"\b\d+(\.\d+)? s\b"): "<seconds> s"}


@pytest.mark.slow
def test_a_local_sweep_many_times_longer_than_its_time_limit_runs_to_its_end(tmp_path, user_module):
    """The limit is each run's: the warm job that forks them has none that a sweep reaches (it had the limit itself,
    was requeued at it three times, then ended, leaving the runs it had not run `failed`)."""
    user_module("naps", SLEEP.format(ms=100))  # a run of 6 steps waits 0.6 s on any machine, at little CPU
    limit_min = 0.06  # 3.6 s a run: a run waits 0.6 s, and takes 0.5-2 s more on a loaded 2-core machine
    naps = ["workload._target_=naps.Step", "steps=5", "warmup_steps=1", "repeats=1", "seed=range(0,13)"]
    began = time.monotonic()
    result = launch_here(*naps, "tracker.mode=disabled", f"launcher.timeout_min={limit_min}", f"runs_dir={tmp_path}")
    took = time.monotonic() - began
    assert result.returncode == 0, result.stdout + result.stderr
    assert took > 2 * limit_min * 60, "the premise: the sweep (13 runs x 0.6 s of waits) outlasts its limit twice over"
    runs = load_sweep(tmp_path / "default")
    assert len(runs) == 13 and all(run.state == "done" for run in runs)
    assert len({run.status.job_id for run in runs}) == 1, "one warm job served the whole sweep"


@pytest.mark.slow
def test_a_run_past_its_limit_is_recorded_timed_out_run_again_as_configured_and_the_sweep_goes_on(tmp_path):
    result = launch_here(*LOOP, f"steps=3,{ENDLESS}", "launcher.timeout_min=0.05", "launcher.timeout_retries=1",
                         f"runs_dir={tmp_path}")  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    short, endless = sorted(load_sweep(tmp_path / "default"), key=lambda run: run.fields["steps"])
    assert short.state == "done"
    error = endless.status.error
    assert endless.state == "failed" and error.type == "RunTimeout", endless.status
    golden.says("a run past its limit", error.message)
    assert "pairwise_sum_prod_loop" in error.traceback, "where the run was when it was stopped"
    assert [attempt["error"] for attempt in endless.status.attempts] == ["RunTimeout"], "run again once"
    assert not (endless.path / records.STEPS).exists()
    assert f"FAILED {endless.name}: RunTimeout: {error.message}" in result.stdout, "the launch says why it failed"


def test_a_run_in_the_jobs_own_process_is_stopped_at_its_limit_too(tmp_path):
    result = launch_here(*LOOP, f"steps={ENDLESS}", "launcher=debug", "launcher.timeout_min=0.02",
                         f"runs_dir={tmp_path}")  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    (run,) = load_sweep(tmp_path / "default")
    assert run.state == "failed" and run.status.error.type == "RunTimeout" and not run.status.attempts


# A step of the user's whose fallback catches every Exception, as one around an optional fast path would: steplib's
# wait (bench/gitrepo.py), made 3 s of short naps.
FALLS_BACK = SLEEP.format(ms=0).replace(
    "        time.sleep(MS / 1000)\n",
    "        ends = time.monotonic() + 3\n"
    "        while time.monotonic() < ends:\n"
    "            try:\n"
    "                time.sleep(0.01)\n"
    "            except Exception:\n"
    "                pass\n",
)


def test_a_time_limit_that_lands_in_the_users_except_exception_still_stops_the_run(tmp_path, user_module):
    """The stop is not an Exception: a step that catches every Exception cannot swallow it and run past its limit."""
    assert "except Exception" in FALLS_BACK, "the premise: the step catches every Exception"
    user_module("falls_back", FALLS_BACK)
    steps = ["workload._target_=falls_back.Step", "steps=1", "warmup_steps=1", "repeats=1", "tracker.mode=disabled"]
    result = launch_here(*steps, "launcher=debug", "launcher.timeout_min=0.01", f"runs_dir={tmp_path}")
    assert result.returncode == 1, result.stdout + result.stderr
    (run,) = load_sweep(tmp_path / "default")
    assert run.state == "failed" and run.status.error.type == "RunTimeout", run.status


def _deaf(spec, run_dir, tracker_id, launch):
    """A run that cannot be stopped by its own limit, as one stuck in a C call: its alarm goes unheard."""
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    run_dir.mkdir(parents=True, exist_ok=True)
    lifecycle.start(run_dir, pid=os.getpid())
    time.sleep(60)


def test_a_run_that_does_not_stop_at_its_limit_is_killed_by_its_job_which_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(warm, "GRACE_S", 0.5)
    plan = build_plan([*FAST, "seed=0,1", f"runs_dir={tmp_path}"])
    runs = [RunJob(spec, tmp_path / spec.name, "id", 1, limit_s=0.5) for spec in plan.runs]
    states = fork_runs(Runner(_deaf), runs[:1], 1, (), {}) | fork_runs(Runner(record_done), runs[1:], 1, (), {})
    assert states == {runs[0].spec.name: "failed", runs[1].spec.name: "done"}
    killed = records.read_status(runs[0].run_dir)
    assert killed.error.type == "RunTimeout"
    places = {tmp_path: "<tmp>", runs[0].spec.name: "<run>", f"process {killed.pid} ": "process <pid> "}
    golden.says("a run that does not stop at its limit", killed.error.message, places)


def test_a_run_that_does_not_stop_at_the_budget_is_killed_and_left_pending_as_the_budgets(tmp_path, monkeypatch):
    """Its time limit, a minute, is far off: the budget's end and a short grace decide when it is killed."""
    monkeypatch.setattr(warm, "BUDGET_GRACE_S", 0.5)
    plan = build_plan([*FAST, "seed=0,1", f"runs_dir={tmp_path}"])
    until = time.time() + 2  # the first run starts before it on a slow machine too
    runs = [RunJob(spec, tmp_path / spec.name, "id", 1, limit_s=60, until=until) for spec in plan.runs]
    states = fork_runs(Runner(_deaf), runs, 1, (), {})
    assert states == {run.spec.name: "pending" for run in runs}
    killed, unstarted = (records.read_status(run.run_dir) for run in runs)
    assert killed.over_budget and killed.started_at is not None and killed.pid is not None, killed
    assert killed.interrupted["reason"].endswith("had not stopped 0.5 s later (a call Python cannot interrupt): killed")
    assert unstarted.over_budget and unstarted.started_at is None, unstarted


@pytest.mark.slow
def test_a_run_past_its_limit_before_the_budget_runs_out_is_killed_as_timed_out(tmp_path, monkeypatch):
    """Its limit came first, though the budget's grace ends before the limit's: it is the limit's, failed (and run
    again as configured), not left pending to the budget."""
    monkeypatch.setattr(warm, "GRACE_S", 3)
    monkeypatch.setattr(warm, "BUDGET_GRACE_S", 0.5)
    (spec,) = build_plan([*FAST, f"runs_dir={tmp_path}"]).runs
    run = RunJob(spec, tmp_path / spec.name, "id", 1, limit_s=0.5, until=time.time() + 1.5)
    assert fork_runs(Runner(_deaf), [run], 1, (), {}) == {spec.name: "failed"}
    assert records.read_status(run.run_dir).error.type == "RunTimeout"


def _track(seen: list):
    """W&B as a run calls it, noting whether the run's time limit still runs (it must not: the run has ended)."""

    def track(*args, **kwargs):
        seen.append(signal.getitimer(signal.ITIMER_REAL)[0])
        return []

    return track


@pytest.mark.parametrize("outcome", ["done", "failed"])
def test_the_limit_stops_once_the_run_has_recorded_how_it_ended(tmp_path, monkeypatch, outcome):
    """Recording a failure and W&B after the run are never cut short by its limit."""
    seen: list[float] = []
    monkeypatch.setattr(train_run, "track", _track(seen))
    steps = "steps=0" if outcome == "failed" else "steps=5"  # the run's own checks refuse 0 steps
    (spec,) = build_plan([*FAST, steps, f"runs_dir={tmp_path}"]).runs
    run = RunJob(spec, tmp_path / spec.name, "id", 1, limit_s=600)
    error = execute_run(Runner(train_run.execute), run, {})
    assert (error is None) == (outcome == "done") and records.read_status(run.run_dir).state == outcome
    assert seen == [0.0], "W&B ran with the limit stopped"


def _raises_at_once(spec, run_dir, tracker_id, launch):
    raise PermissionError(f"cannot make {run_dir}")


def test_a_run_that_fails_before_it_records_anything_is_recorded_failed(tmp_path):
    """Not left pending as if its job had never started it (the job's own process: spawn, debug)."""
    (spec,) = build_plan([*FAST, f"runs_dir={tmp_path}"]).runs
    run = RunJob(spec, tmp_path / spec.name, "id", 1)
    assert isinstance(execute_run(Runner(_raises_at_once), run, {}), PermissionError)
    status = records.read_status(run.run_dir)
    assert status.state == "failed" and status.error.type == "PermissionError" and "Traceback" in status.error.traceback


def _interrupted(specs):
    raise KeyboardInterrupt


def test_ctrl_c_while_the_job_imports_leaves_its_runs_pending_and_its_done_runs_done(tmp_path):
    plan = build_plan([*FAST, "seed=0,1", f"runs_dir={tmp_path}"])
    runs = [RunJob(spec, tmp_path / spec.name, "id", 1) for spec in plan.runs]
    record_done(runs[0].spec, runs[0].run_dir, "id", {})  # by an earlier start of the job
    with pytest.raises(KeyboardInterrupt):
        fork_runs(Runner(record_done, imports=_interrupted), runs, 1, (), {})
    done, interrupted = (records.read_status(run.run_dir) for run in runs)
    assert done.state == "done"
    assert interrupted.state == "pending" and interrupted.interrupted["type"] == "KeyboardInterrupt"


# A step that gets Slurm's SIGUSR2 (preemption, a time limit) in its first timed step, as a job passes it on.
PREEMPTED = (
    SLEEP.format(ms=0)
    .replace("        time.sleep(MS / 1000)\n", "        os.kill(os.getpid(), signal.SIGUSR2)\n        time.sleep(1)\n")
    .replace("import time\n", "import os\nimport signal\nimport time\n")
)


def test_a_run_its_job_stops_with_a_signal_records_what_stopped_it(tmp_path, user_module):
    """`status` says why it waits to run again, not only `interrupted (SystemExit)`."""
    user_module("preempted", PREEMPTED)
    (spec,) = build_plan(["workload._target_=preempted.Step", "repeats=1", f"runs_dir={tmp_path}"]).runs
    run = RunJob(spec, tmp_path / spec.name, "id", 1, limit_s=60)
    assert fork_runs(Runner(train_run.execute), [run], 1, (), {}) == {spec.name: "pending"}
    stopped = records.read_status(run.run_dir).interrupted
    assert stopped["type"] == "SystemExit", stopped
    assert stopped["reason"] == "the run was interrupted by SIGUSR2 (preemption, time limit)", stopped


# The sleeping step, held in a job's import for up to a minute (it says so in the file `held` names): the job
# cannot start a run before a Ctrl-C. (The job imports the launch's snapshot of the step, not the file written.)
HELD = """import os, pathlib, time
if os.environ.get("SUBMITIT_LOCAL_JOB_ID"):
    pathlib.Path({held!r}).touch()
    time.sleep(60)
"""


@pytest.mark.slow
def test_ctrl_c_before_any_run_started_leaves_the_sweep_pending_not_lost(tmp_path, sleeping_steps):
    """Ctrl-C while the warm job imports the step (held there): no run has started, and `status` says so (whether
    the job's own handler or the launcher's rule for runs never started recorded them)."""
    sweep = tmp_path / "runs" / "default"
    step = tmp_path / "slow" / "slow_steps.py"
    held = tmp_path / "held"
    step.write_text(HELD.format(held=str(held)) + step.read_text())
    launcher = start_launcher(tmp_path / "runs")
    wait_for(held.exists, "the job to import the step")
    os.killpg(launcher.pid, signal.SIGINT)
    out, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 130, out + err
    assert launch_here("status", str(sweep)).returncode == EXIT_NOT_DONE, "no job runs them: a script need not wait"
    assert [row.state for row in run_states(sweep)] == ["pending", "pending"]
    assert not list(sweep.glob("*/steps.parquet"))


def ended_job(tmp_path):
    """A sweep of two runs whose job has ended: one started (its records say running), one never started."""
    plan = build_plan([*FAST, "seed=0,1", f"runs_dir={tmp_path}"])
    sweepdir.open_sweep(plan, [])
    sweepdir.mark_pending(plan, list(plan.runs))
    no_such_pid = int(open("/proc/sys/kernel/pid_max").read()) + 1  # a job whose process has ended, for certain
    job = {"job_id": str(no_such_pid), "log": str(tmp_path / "job.log"), "launcher": "local"}
    records.record_jobs(plan.sweep_dir, {spec.name: job for spec in plan.runs})
    started, never = plan.runs
    (plan.sweep_dir / started.name).mkdir()
    lifecycle.start(plan.sweep_dir / started.name, started_at=records.now(), job_id=job["job_id"])
    return plan, started, never


def test_a_run_whose_job_ended_before_it_started_is_pending_with_why(tmp_path):
    plan, started, never = ended_job(tmp_path)
    states = {row.run: row.state for row in run_states(plan.sweep_dir)}
    assert states == {started.name: "lost", never.name: "pending"}
    places = {tmp_path: "<tmp>", started.name: "<started run>", never.name: "<run never started>", JOB: "job <job>"}
    shown, status = render(plan.sweep_dir)
    golden.says("status: a run lost and a run its job never started", shown, {**places, **TIMES})
    assert status == EXIT_NOT_DONE


@pytest.mark.parametrize("view", ["table", "report"])
def test_the_table_and_report_call_a_run_whose_job_ended_lost_not_running(tmp_path, view):
    """Their runs' records say running and pending; the job that held them is gone, as `status` finds.
    A run that recorded its interruption (Ctrl-C) is flagged with it."""
    plan, started, never = ended_job(tmp_path)
    out = tmp_path / "out"

    def shown() -> str:
        said = launch_here(view, str(plan.sweep_dir), *(["--out", str(out)] if view == "report" else []))
        return said.stdout if view == "table" else (out / "report.html").read_text()

    text = shown()
    assert f"RUNNING {started.name}" not in text
    again = f"; `perfsweep resume {plan.sweep_dir}` runs it again"
    assert f"LOST {started.name}: its job ended before the run recorded its end{again}" in text, text
    assert f"PENDING {never.name}: its job ended before the run started{again}" in text, text
    lifecycle.stop(plan.sweep_dir / started.name, "KeyboardInterrupt", started_at=records.now())  # as a run records
    said = re.escape(f"PENDING {started.name}: interrupted (KeyboardInterrupt at ") + r"[^)]+\)" + re.escape(again)
    assert re.search(said, shown()), "what its records say of it, not that its job ended before it started"
    lifecycle.leave_pending(plan.sweep_dir / never.name, "KeyboardInterrupt")  # its job stopped before it
    assert f"PENDING {never.name}: not started: its job was interrupted (KeyboardInterrupt at " in shown()


@pytest.mark.slow
def test_the_job_of_runs_never_started_ends_and_the_launch_leaves_them_pending(tmp_path, monkeypatch):
    """A job that dies before its first run (here: it cannot import the code it runs) leaves every run pending,
    with its log's last line; resume runs them."""
    broken = tmp_path / "code"
    broken.mkdir()
    (broken / "sitecustomize.py").write_text("import os\nif os.environ.get('SUBMITIT_LOCAL_JOB_ID'): os._exit(3)\n")
    monkeypatch.setenv("PYTHONPATH", f"{broken}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")  # the job's
    result = launch_here(*FAST, "seed=0,1", "tracker.mode=disabled", f"runs_dir={tmp_path}")
    assert result.returncode == 1, result.stdout + result.stderr
    statuses = [
        records.read_status(path) for path in (tmp_path / "default").iterdir() if path.is_dir() and path.name[0] != "."
    ]
    assert len(statuses) == 2 and all(s.state == "pending" for s in statuses), statuses
    assert all(s.interrupted["type"] == "JobEnded" and "ended before the run started" in s.interrupted["reason"]
               for s in statuses)  # fmt: skip
    assert "lost" not in launch_here("status", str(tmp_path / "default")).stdout


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["fork", "spawn"])  # a warm job's processes; a job a process
def test_a_budget_stops_the_process_it_runs_out_in_and_starts_no_other(tmp_path, isolation):
    """Runs that would never end, and a budget of 3 s: the launch ends near it, its runs pending as the budget's.
    Nothing is decided: exit 1, and the way on is without a budget. Its time limit, a minute, would fail a run that
    the budget did not stop."""
    args = [*LOOP, f"steps={ENDLESS}", "workload.impl=loop,broadcast", "repeats=2", "launcher.budget_s=3"]
    args += ["launcher.timeout_min=1", f"launcher.isolation={isolation}", f"runs_dir={tmp_path}"]
    result = launch_here(*args)
    assert result.returncode == 1, result.stdout + result.stderr
    runs = load_sweep(tmp_path / "default")
    assert len(runs) == 4 and all(run.status.over_budget for run in runs), [run.status for run in runs]
    line = result.stdout.splitlines()[-1]
    assert line.startswith("perfsweep: launcher.budget_s=3: of 4 runs, "), line
    assert "; no run is done: nothing is decided of loop, broadcast." in line
    assert line.endswith(f"resume {tmp_path / 'default'} launcher.budget_s=null` runs them without a budget; with "
                         "this one, they may go undone again"), line  # fmt: skip


@pytest.mark.slow
def test_a_budget_that_runs_out_as_a_process_measures_stops_it_and_says_so(tmp_path, user_module):
    """In the launch's own process (launcher=debug): the first process, whose steps wait a minute in all, is stopped
    where the budget ran out, its run pending, and the second is not started. The budget leaves a slow machine's
    planning seconds to spare; a wait spends no CPU."""
    user_module("naps", SLEEP.format(ms=600))
    args = ["workload._target_=naps.Step", "steps=100", "warmup_steps=1", "repeats=1", "seed=0,1"]
    args += ["tracker.mode=disabled", "launcher=debug", "launcher.budget_s=6", "launcher.timeout_min=1"]
    result = launch_here(*args, f"runs_dir={tmp_path}")
    assert result.returncode == 1, "no run done: nothing decided\n" + result.stdout + result.stderr
    runs = sorted(load_sweep(tmp_path / "default"), key=lambda run: run.fields["seed"])
    assert all(run.status.over_budget for run in runs) and not any(run.status.attempts for run in runs)
    assert [run.status.started_at is not None for run in runs] == [True, False]
    stopped = runs[0].status.interrupted["reason"]
    assert re.fullmatch(r"launcher\.budget_s: the launch's budget ran out \d\.\d s into this run's process, before "
                        r"its steps were done; the host over it: others' CPU \d+%, steal \d+%", stopped)  # fmt: skip
    assert "STOPPED 1 run: the launch's budget (launcher.budget_s) ran out as they measured" in result.stdout
    assert "NOT STARTED 1 run: the launch's budget (launcher.budget_s) ran out before them" in result.stdout
    line = result.stdout.splitlines()[-1]
    said = stopped.removeprefix("launcher.budget_s: ")
    head = f"perfsweep: launcher.budget_s=6: of 2 runs, 1 stopped ({said}) and 1 not started (the launch's budget "
    assert line.startswith(head + "ran out before this run's process started); no run is done"), line


@pytest.mark.slow
def test_a_budget_counts_from_the_start_of_the_launch_its_planning_included(tmp_path):
    """A launch that began a minute before its runs (its planning and builds, say) has spent a 50 s budget: it starts
    nothing."""
    from perfsweep.commands.launching import _runner
    from perfsweep.launcher.submit import launch as submit

    args = [*FAST, "workload.impl=loop,broadcast", "repeats=3", "launcher.budget_s=50", "tracker.mode=disabled"]
    plan = build_plan([*args, f"runs_dir={tmp_path}"])
    submit(plan, [], _runner(), began=time.time() - 60)
    runs = load_sweep(tmp_path / "default")
    assert len(runs) == 6 and all(run.status.over_budget and run.status.started_at is None for run in runs)
    assert runs[0].status.interrupted["reason"] == (
        "launcher.budget_s: the launch's budget ran out before this run's process started"
    )


def test_a_budget_s_runs_beside_done_ones_are_no_failure_and_a_configuration_with_none_done_is(tmp_path, capsys):
    """Two configurations of three runs each, done, then left to the budget as a launch leaves them, in the plan's
    order. While each configuration has a done run, the sweep decides with them (exit 0), a resume's plan of the rest
    too, and the same command runs the rest, or part of them where more are left than the budget ran. A configuration
    left one done run decides no comparison, and says so.
    A configuration without one is not measured at all: exit 1, naming it, and the way on is without a budget, for
    the same one may leave it undone again."""
    from perfsweep.commands.launching import _ended, _runner
    from perfsweep.launcher.submit import Outcome
    from perfsweep.launcher.submit import launch as submit

    plan = build_plan([*FAST, "workload.impl=loop,broadcast", "repeats=3", "tracker.mode=disabled",
                       "launcher=debug", "launcher.budget_s=50", f"runs_dir={tmp_path}"])  # fmt: skip
    assert [spec.axes["impl"] for spec in plan.runs] == ["loop", "broadcast"] * 3
    submit(plan, [], _runner())
    resume = f"perfsweep resume {plan.sweep_dir}"
    rest = f". `{resume}` (or the same command) runs the rest"
    on = "the sweep's done runs decide" + rest
    without = f". `{resume} launcher.budget_s=null` runs them without a budget; with this one, they may go undone again"
    more = (f". 4 runs left, where this launch's budget ran 2 to done: `{resume}` (or the same command) runs about as "
            f"many more; `{resume} launcher.budget_s=null` runs them all")  # fmt: skip
    one = "each configuration has one done run: its intervals are within-run, and no comparison is decided" + more
    none = f". This launch's budget ran none to done: `{resume} launcher.budget_s=null` runs the rest"
    some = "1 of 2 configurations with a done run has only one: no comparison with them is decided" + rest
    resumed = dataclasses.replace(plan, runs=plan.runs[:2])  # a resume plans what is not done, and shows every run
    every = [spec.name for spec in plan.runs]
    earlier = [spec.name for spec in plan.runs[4:]]  # done by an earlier launch of the same command: skipped
    for left, planned, shown, status, said, skipped in (
        (2, plan, (), 0, on, []),
        (2, resumed, every, 0, on.replace(rest, none), []),
        (3, plan, (), 0, some, []),
        (4, plan, (), 0, one, []),
        (4, plan, (), 0, one.replace(more, none), earlier),
        (5, plan, (), 1, "1 configuration without a done run: nothing is decided of loop" + without, []),
        (5, dataclasses.replace(plan, runs=plan.runs[:5]), every, 1,
         "1 configuration without a done run: nothing is decided of loop" + without, []),
        (6, plan, (), 1, "no run is done: nothing is decided of loop, broadcast" + without, []),
    ):  # fmt: skip
        for spec in plan.runs[:left]:
            lifecycle.stop(plan.sweep_dir / spec.name, records.BUDGET, run_job.SPENT)
        states = {spec.name: records.read_status(plan.sweep_dir / spec.name).state for spec in planned.runs}
        capsys.readouterr()
        assert _ended(planned, Outcome(states, skipped, [], [], followed=True), show=True, shown=shown) == status
        out = capsys.readouterr().out
        assert out.splitlines()[-1].endswith(said), out[-3000:]


def test_a_launch_hands_its_launcher_the_time_it_began_before_planning(tmp_path, monkeypatch):
    """The time the test above sets: launch_plan's start, before the plan is made."""
    from perfsweep.commands.launching import launch_plan
    from perfsweep.launcher import submit

    seen = {}

    def stand_in(plan, argv, runner, pythons, progress, began, pinned):  # a stand-in launcher: it runs nothing
        seen["began"] = began
        raise submit.SubmissionFailed("a stand-in launcher submits nothing")

    def planned():
        time.sleep(0.5)
        return build_plan([*FAST, "tracker.mode=disabled", f"runs_dir={tmp_path}"])

    monkeypatch.setattr(submit, "launch", stand_in)
    before = time.time()
    assert launch_plan(planned, []) == 1
    assert before <= seen["began"] < before + 0.5


def test_a_budget_cuts_any_round_once_a_process_cost_is_known(tmp_path):
    """A job that has run no process knows no cost: it starts one while the budget lasts. Once it knows one, no
    process starts that would end past the budget, whatever its round; none starts once it ran out."""
    args = [*FAST, "workload.impl=loop,broadcast", "repeats=3", "order=grouped", "pairing=process"]
    plan = build_plan([*args, f"runs_dir={tmp_path}"])
    for_10_s = [RunJob(spec=s, run_dir=tmp_path / s.name, tracker_id="x", parallelism=1, until=time.time() + 10)
                for s in plan.runs]  # fmt: skip
    assert not any(warm.leave_over_budget([job], took_s) for job in for_10_s for took_s in ([], [1.0]))
    assert not any((job.run_dir / records.STATUS).exists() for job in for_10_s), "a run that starts is left as it was"
    assert all(warm.leave_over_budget([job], [20.0]) for job in for_10_s)
    status = records.read_status(for_10_s[0].run_dir)
    assert status.over_budget and "a process takes about 20.0 s here" in status.interrupted["reason"]
    spent = dataclasses.replace(for_10_s[0], until=time.time() - 1, run_dir=tmp_path / "spent")
    assert warm.leave_over_budget([spent], [])
    assert records.read_status(spent.run_dir).interrupted["reason"] == run_job.SPENT


def _one_side_fails_then_the_budget_runs_out(sides, launch):
    sides[1][1].mkdir(parents=True)
    lifecycle.fail(sides[1][1], records.RunError("ValueError", "its own failure"))
    raise records.BudgetSpent("launcher.budget_s: the launch's budget ran out 9.0 s into this run's process")


def test_a_side_that_failed_alone_keeps_its_failure_when_the_budget_stops_its_process(tmp_path):
    first, second = build_plan([*FAST, "seed=0,1", f"runs_dir={tmp_path}"]).runs
    run = RunJob(first, tmp_path / first.name, "a", 1, sides=(RunJob(second, tmp_path / second.name, "b", 1),))
    error = execute_run(Runner(record_done, execute_sides=_one_side_fails_then_the_budget_runs_out), run, {})
    assert isinstance(error, records.BudgetSpent)
    assert records.read_status(run.run_dir).over_budget
    assert records.read_status(run.sides[0].run_dir).state == "failed"


@pytest.mark.slow
def test_a_side_that_fails_alone_leaves_the_others_time_limit_running(tmp_path, user_module):
    """Recording one side's failure must not stop the process's time limit: the other sides still measure."""
    user_module("fails_alone", FAILS_AT_SEED_1)
    steps = ["workload._target_=fails_alone.Step", "steps=200", "warmup_steps=1", "seed=0,1", "repeats=1"]
    plan = build_plan([*steps, "tracker.mode=disabled", f"runs_dir={tmp_path}"])
    fails, measures = sorted(plan.runs, key=lambda spec: -spec.config.seed)  # the one that fails is built first
    side = RunJob(measures, tmp_path / measures.name, "b", 1)
    # 2 s for each side: the failure comes well within it, and 200 steps of 50 ms well past it
    run = RunJob(fails, tmp_path / fails.name, "a", 1, limit_s=2, sides=(side,))
    error = execute_run(Runner(record_done, execute_sides=train_run.execute_sides), run, {})
    assert isinstance(error, run_job.RunTimeout), error
    by_seed = {side.spec.config.seed: records.read_status(side.run_dir) for side in run.every}
    assert by_seed[1].state == "failed" and by_seed[1].error.message.startswith("this side cannot be built"), by_seed[1]
    assert by_seed[0].state == "failed" and by_seed[0].error.type == "RunTimeout", by_seed[0]


@pytest.mark.slow
def test_a_side_that_fails_alone_goes_to_w_and_b_after_the_others_timed_steps(tmp_path, user_module, monkeypatch):
    """W&B's process must not share the host with a timed step: a side that failed alone is told of afterwards."""
    user_module("fails_alone", FAILS_AT_SEED_1)
    offline_wandb(monkeypatch, tmp_path)
    steps = ["workload._target_=fails_alone.Step", "steps=10", "warmup_steps=1", "seed=0,1", "repeats=1"]
    fails, measures = sorted(build_plan([*steps, f"runs_dir={tmp_path}"]).runs, key=lambda spec: -spec.config.seed)
    run = RunJob(fails, tmp_path / fails.name, "a", 1, sides=(RunJob(measures, tmp_path / measures.name, "b", 1),))
    assert execute_run(Runner(record_done, execute_sides=train_run.execute_sides), run, {}) is None
    measured = records.load_run(run.sides[0].run_dir)
    assert measured.state == "done" and records.read_status(run.run_dir).state == "failed"
    (page,) = [r["run"] for r in wandb_records(run.run_dir) if r["type"] == "run"]
    started = datetime.datetime.fromisoformat(page["start_time"].replace("Z", "+00:00")).timestamp()
    assert started >= measured.summary.window_ended_at


def test_a_stop_in_a_step_s_flop_count_or_an_import_stops_the_run_not_fails_it(user_module):
    """The budget's stop lands anywhere in a step: what turns a step's errors into the user's, or counts beside the
    measurement, passes it on."""

    def stopped(*args):
        raise records.BudgetSpent("launcher.budget_s: the launch's budget ran out")

    with pytest.raises(records.BudgetSpent):
        count_flops(stopped)
    user_module("stops_on_import", "from perfsweep.records import BudgetSpent\nraise BudgetSpent('ran out')\n")
    importlib.invalidate_caches()  # its folder is new to this process's import system
    with pytest.raises(records.BudgetSpent):
        user_targets.locate("workload._target_", "stops_on_import.Step")


def test_a_budget_on_slurm_is_said_to_bound_nothing():
    """Slurm queues a sweep's jobs at once, and its queue decides when they run: the planner says so."""
    notices = build_plan([*FAST, "launcher=slurm", "launcher.budget_s=50"]).notices
    assert "launcher.budget_s=50 bounds no Slurm launch: its jobs are queued at once" in notices
    assert not any("budget" in notice for notice in build_plan([*FAST, "launcher.budget_s=50"]).notices)


def test_a_configuration_whose_runs_failed_on_their_own_is_not_the_budgets():
    """The budget's last line names what it left unmeasured; a failure is named as one, with its error."""
    from perfsweep.commands.launching import without_done_runs

    runs = synthetic.sweep({("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 55.0}, 1, synthetic.Noise(),
                           np.random.default_rng(0))  # fmt: skip
    failed = records.Status(records.FAILED, error=records.RunError("ValueError", "bad batch", ""))
    left = records.Status(records.PENDING, interrupted={"type": records.BUDGET, "at": "now"})
    runs = [dataclasses.replace(r, status=failed if r.axes["input_type"] == "tensor" else left) for r in runs]
    assert without_done_runs(runs) == ["subclass"]


def test_a_resume_says_its_budget_is_the_one_the_sweep_was_launched_with(tmp_path, capsys):
    """Its plan is rebuilt from the records: no sweep file or default set the budget it runs under."""
    from perfsweep.commands.launching import _announce, _runner
    from perfsweep.launcher.submit import launch as submit
    from perfsweep.launcher.sweepdir import recorded_plan

    overrides = [*FAST, "tracker.mode=disabled", "launcher=debug", "launcher.budget_s=50", f"runs_dir={tmp_path}"]
    plan = build_plan(overrides)
    submit(plan, [], _runner())
    assert plan.origin("launcher.budget_s") == "the command line"
    for spec in plan.runs:
        lifecycle.stop(plan.sweep_dir / spec.name, records.BUDGET, run_job.SPENT)
    _announce(recorded_plan(plan.sweep_dir))
    said = "budget: launcher.budget_s=50 (as the sweep was launched): no run starts that would end after 50 s"
    assert said in capsys.readouterr().out
    _announce(recorded_plan(plan.sweep_dir, ["launcher.budget_s=40"]))
    assert "budget: launcher.budget_s=40 (the command line)" in capsys.readouterr().out
