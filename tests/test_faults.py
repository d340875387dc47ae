"""Faults injected on purpose: bad input, killed and interrupted runs, a run that raises, 32 runs ending at
once, a cut record file, W&B failing. Each checks what the user sees and that nothing finished is lost."""

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import torch

from perfsweep import records
from perfsweep.analysis.render import text
from perfsweep.analysis.views.compare import compare
from perfsweep.analysis.views.table import view
from perfsweep.launcher import sweepdir
from perfsweep.launcher.jobs import RunPack
from perfsweep.launcher.run_job import RunJob, Runner
from perfsweep.launcher.run_states import EXIT_IN_FLIGHT, EXIT_NOT_DONE, run_states
from perfsweep.records import lifecycle, load_sweep
from perfsweep.records.lock import LOCK, SweepLocked, launching, process_start, sweep_lock
from perfsweep.sweeps.plan import build_plan
from perfsweep.train.build import DEFAULT_THREADS, allotted_cpus
from perfsweep.train.env import command_output
from perfsweep.train.functions.base import FunctionBench
from perfsweep.train.tracker import Tracker
from perfsweep.train.workloads import WORKLOADS
from tests import golden
from tests.helpers import FAST, launch_here, run, start_launcher, wait_for

JOB_LOG, JOB_IDS = re.compile(r"\b\d+_(?=\S+\.log)"), re.compile(r"\(\d+(, \d+)*\)")  # a local job's id is a pid


def test_bad_input_is_reported_together_with_where_it_was_set_and_nothing_runs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = launch_here(
        "model.name=resnet9000",
        "input_type=foo,tensor",
        "steps=x,10",
        "workload=train_step,sampler",
        f"runs_dir={blocker / 'runs'}",
    )
    assert result.returncode == 2, result.stderr
    golden.says("launch: four bad values, each with where it was set", result.stderr, {tmp_path: "<tmp>"})
    assert blocker.read_text() == "" and not list(tmp_path.glob("**/status.json"))
    # memory_format comes from the sweep file; the workload that makes it wrong from the command line
    other = launch_here("sweep=subclass_gpu", "workload=sampler", f"runs_dir={tmp_path / 'runs'}")
    assert other.returncode == 2 and not (tmp_path / "runs").exists()
    golden.says("launch: a sweep file's value that the command line makes wrong", other.stderr)


def _lines(text: str, start: str) -> str:
    """The lines of `text` that start with `start` (the rest of it differs from one launch to the next)."""
    return "\n".join(line for line in text.splitlines() if line.startswith(start))


def _running(sweep: Path):
    for path in glob.glob(str(sweep / "*" / "status.json")):
        try:
            status = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if status["state"] == "running":
            return Path(path).parent, status
    return None


def _in_its_steps(sweep: Path):
    """A running run that has recorded its environment: past its start-up, in its steps."""
    found = _running(sweep)
    return found if found and (found[0] / records.ENV).is_file() else None


@pytest.mark.slow
def test_a_run_killed_mid_way_is_failed_as_lost_and_resume_completes_it(tmp_path, sleeping_steps):
    """A Slurm job that ends before its run does is test_slurm.py's cancelled job."""
    sweep = tmp_path / "runs" / "default"
    launcher = start_launcher(tmp_path / "runs", "seed=0", "launcher=local", "launcher.wait=true", "launcher.poll_s=1")
    run_dir, status = wait_for(lambda: _in_its_steps(sweep), "a run in its steps")
    os.kill(status["pid"], signal.SIGKILL)
    out, err = launcher.communicate(timeout=300)
    assert launcher.returncode == 1, out + err
    lost = records.read_status(run_dir)
    assert lost.state == "failed" and lost.error.type == "LostRun"
    # the run's process was forked from the job, which saw the signal that killed it
    killed = {tmp_path: "<tmp>", run_dir.name: "<run>", f"process {status['pid']} ": "process <pid> "}
    golden.says("a run killed mid-way", lost.error.message, {**killed, JOB_LOG: "<job>_"})
    assert not (run_dir / records.STEPS).exists(), "a killed run leaves no partial steps to mistake for a result"
    assert f"FAILED {run_dir.name}: LostRun: {lost.error.message}" in out, "the launch says why the run failed"
    resumed = launch_here("resume", str(sweep), "launcher.name=debug")  # the run again, in this process
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = records.read_status(run_dir)
    assert again.state == "done" and [a["error"] for a in again.attempts][-1] == "LostRun"
    assert all(r.state == "done" for r in load_sweep(sweep))


def _alive(pid: int) -> bool:
    """Whether a process is there and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _ctrl_c(launcher: subprocess.Popen) -> None:
    os.killpg(launcher.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the whole foreground group


def _kill(launcher: subprocess.Popen) -> None:
    os.kill(launcher.pid, signal.SIGTERM)  # `kill PID`: the launcher alone, not its jobs


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stop", "status", "said", "background"),
    [(_ctrl_c, 130, "Ctrl-C", False), (_kill, 143, "SIGTERM", False), (_kill, 143, "SIGTERM", True)],
    ids=["ctrl-c", "sigterm", "sigterm-background"],
)
def test_ctrl_c_or_sigterm_leaves_the_sweep_pending_and_resumable(
    tmp_path, sleeping_steps, stop, status, said, background
):
    """The jobs of a launcher sent SIGTERM alone are stopped by it: none runs on, unwatched.
    So are those of a launcher a script started in the background, which ignores SIGINT."""
    sweep = tmp_path / "runs" / "default"
    launcher = start_launcher(tmp_path / "runs", background=background)
    run_dir, running = wait_for(lambda: _in_its_steps(sweep), "a run in its steps")
    stop(launcher)
    out, err = launcher.communicate(timeout=120)
    assert launcher.returncode == status, err
    golden.says(f"{said} during a local sweep", err, {tmp_path: "<tmp>"})
    assert not _alive(running["pid"]), "the run's process ended with its launcher"
    stopped = records.read_status(run_dir)
    assert stopped.state == "pending", err
    assert stopped.interrupted["type"] in ("KeyboardInterrupt", "SystemExit")
    assert [row.state for row in run_states(sweep)] == ["pending", "pending"]
    resumed = launch_here("resume", str(sweep), "launcher.name=debug")  # both runs, in this process
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [r.state for r in load_sweep(sweep)] == ["done", "done"]


class RaisesOutOfMemory(FunctionBench):
    """Stands in for a GPU that runs out of memory mid-step (there is no GPU here): its second call raises."""

    impls = ("default",)

    def inputs(self, conf, device):
        return (torch.zeros(1),)

    def function(self, impl):
        calls = []

        def call(x):
            calls.append(x)
            if len(calls) == 2:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
            return x

        return call


@pytest.mark.slow
def test_a_run_that_raises_in_a_step_is_failed_with_the_error_and_traceback(tiny_plan, monkeypatch):
    monkeypatch.setitem(WORKLOADS, "raises_oom", RaisesOutOfMemory)
    with pytest.raises(torch.OutOfMemoryError):
        run(
            tiny_plan(
                "workload=sampler", "memory_format=contiguous", "workload.name=raises_oom", "workload.impl=default"
            )
        )
    (run_dir,) = [p.parent for p in tiny_plan().sweep_dir.glob("*/status.json")]
    status = records.read_status(run_dir)
    assert status.state == "failed" and status.error.type == "OutOfMemoryError"
    assert "Tried to allocate 2.00 GiB" in status.error.message and "in step" in status.error.traceback


@pytest.mark.slow
def test_32_runs_ending_together_leave_32_complete_records(tmp_path):
    runs = tmp_path / "runs"
    result = launch_here(
        *FAST, "seed=range(0,32)", "launcher.parallelism=32", "tracker.mode=disabled", f"runs_dir={runs}"
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    loaded = load_sweep(runs / "default")
    assert len(loaded) == 32 and all(r.state == "done" and r.summary.steps == 5 for r in loaded)
    assert len(records.planned_runs(runs / "default")) == 32
    assert len(records.read_json(runs / "default" / records.JOBS)) == 32


def test_a_cut_parquet_file_is_skipped_with_a_warning_naming_the_run(tmp_path):
    runs = tmp_path / "runs"
    result = launch_here(*FAST, "seed=0,1,2", "launcher=debug", "tracker.mode=disabled", f"runs_dir={runs}")
    assert result.returncode == 0, result.stderr
    sweep = runs / "default"
    victim = sorted(p.parent for p in sweep.glob("*/steps.parquet"))[1]
    data = (victim / records.STEPS).read_bytes()
    (victim / records.STEPS).write_bytes(data[: len(data) // 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shown = text(view(sweep))
    assert [str(w.message) for w in caught if victim.name in str(w.message)], "the warning names the run"
    assert "2 runs, 2 done" in shown
    table = launch_here("table", str(sweep))
    assert table.returncode == 0 and "2 runs, 2 done" in table.stdout, "the command goes on without the run"


def test_wandb_failing_leaves_complete_records_and_a_warning(tiny_plan):
    plan = tiny_plan("input_type=tensor", "memory_format=contiguous", "tracker.mode=offline")
    (spec,) = plan.runs
    run_dir = plan.sweep_dir / spec.name
    run_dir.mkdir(parents=True)
    (run_dir / "wandb").write_text("not a folder: W&B cannot write here")
    run_dir_, summary = run(plan)
    status = records.read_status(run_dir)
    assert status.state == "done" and summary.steps == 3
    assert len(records.read_steps(run_dir / records.STEPS)) == 4
    assert len(status.warnings) == 1 and status.warnings[0].startswith("wandb init failed")


@pytest.mark.slow
def test_a_second_launch_of_a_sweep_being_launched_is_refused_and_changes_nothing(tmp_path, sleeping_steps):
    runs = tmp_path / "runs"
    sweep = runs / "default"
    first = start_launcher(runs, "seed=0", "launcher=debug")  # one run of a few seconds, in the launcher's process
    try:
        wait_for(lambda: _running(sweep), "the first launch's run")
        manifest = (sweep / records.SWEEP).read_text()
        second = launch_here(*sleeping_steps, "seed=0", f"runs_dir={runs}")
        assert second.returncode == 2, second.stderr
        lock = json.loads((sweep / LOCK).read_text())
        assert lock["pid"] == first.pid, "the lock names the launch that holds it"
        golden.says(
            "a second launch of a sweep being launched", second.stderr, {tmp_path: "<tmp>", lock["since"]: "<since>"}
        )
        assert (sweep / records.SWEEP).read_text() == manifest, "the refused launch wrote nothing"
        status = launch_here("status", str(sweep))
        assert status.returncode == EXIT_IN_FLIGHT, (
            f"reading a sweep needs no lock; its run is running\n{status.stdout}"
        )
        assert "1 running" in status.stdout, "the launcher runs it in its own process: not lost"
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, out + err
    finally:
        first.kill()
    (run,) = load_sweep(sweep)
    assert run.state == "done" and run.status.attempts == (), "run once, never started over"


@pytest.mark.slow
def test_a_killed_launchers_lock_is_free(tmp_path, sleeping_steps):
    runs = tmp_path / "runs"
    sweep = runs / "default"
    first = start_launcher(runs, "seed=0")
    wait_for(lambda: (sweep / LOCK).is_file() and str(first.pid) in (sweep / LOCK).read_text(), "the lock")
    os.killpg(first.pid, signal.SIGKILL)  # the launcher and its job, as a crashed node would
    first.wait(timeout=60)
    # The kernel releases it once every process that shares it is gone: on a loaded machine, once a moment after
    # the launcher (one CI run in many; what held it was not seen)
    wait_for(lambda: _lockable(sweep), "the lock released", timeout=30)
    with sweep_lock(sweep, ["resume"]):
        assert json.loads((sweep / LOCK).read_text())["argv"] == ["resume"]


def test_the_lock_names_its_launcher_while_it_holds_it_and_no_one_once_the_launch_ends(tmp_path):
    """A launch in a notebook ends and its process lives on: its debug jobs have ended with the launch."""
    assert launching(tmp_path) is None
    with sweep_lock(tmp_path, ["launch"]):
        first = launching(tmp_path)
        assert first is not None
    assert launching(tmp_path) is None
    with sweep_lock(tmp_path, ["resume"]):
        assert launching(tmp_path) not in (None, first), "the process's next launch is another"
    crashed = {"pid": os.getpid(), "host": socket.gethostname(), "launch": "x", "started": "1"}
    (tmp_path / LOCK).write_text(json.dumps(crashed))
    assert launching(tmp_path) is None, "a crashed launcher's pid, given to another process since"


def _lockable(sweep: Path) -> bool:
    try:
        with sweep_lock(sweep, ["resume"]):
            return True
    except SweepLocked:
        return False


def test_a_loss_that_goes_nan_is_flagged_by_the_table_and_by_compare(tiny_plan):
    args = ["input_type=tensor", "memory_format=contiguous", "tracker.mode=disabled"]
    good, bad = tiny_plan(*args, "sweep_name=good"), tiny_plan(*args, "optim.lr=1e30", "sweep_name=bad")
    run(good)
    bad_dir, summary = run(bad)  # an exploding optimizer: the steps run on, the loss is NaN or infinite
    assert summary.nonfinite_losses and records.read_status(bad_dir).state == "done"
    written = (bad_dir / records.SUMMARY).read_text()
    assert "NaN" not in written and "Infinity" not in written, "summaries are strict JSON (null)"
    table = _lines(text(view(bad.sweep_dir)), "NON-FINITE LOSS")
    shown, regressed = compare(good.sweep_dir, bad.sweep_dir, threshold=0.05, loss_tolerance=0.05)
    assert regressed
    flags = "\n".join([table, *(line.flag for line in shown.items if line.flag.startswith("NON-FINITE"))])
    golden.says("a loss that goes NaN: the table's flag, then compare's", flags, {bad_dir.name: "<run>"})


@pytest.mark.slow
def test_a_run_is_done_before_wandb_and_a_stalled_wandb_is_left_behind(tiny_plan, monkeypatch):
    """A fake W&B finish that stalls (there is no network to stall here) against tracker.timeout_s=1."""
    finish = Tracker.finish

    def stalled(self, *args, **kwargs):
        time.sleep(4)
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(Tracker, "finish", stalled)
    run_dir, summary = run(
        tiny_plan("input_type=tensor", "memory_format=contiguous", "tracker.mode=offline", "tracker.timeout_s=1")
    )
    status = records.read_status(run_dir)
    assert status.state == "done" and summary.steps == 3 and (run_dir / records.STEPS).exists()
    (warning,) = status.warnings
    golden.says("a stalled wandb left behind", warning, {run_dir.parent: "<sweep>"})


@pytest.mark.slow
def test_runs_sharing_a_process_do_not_inherit_each_others_threads(tiny_plan):
    run(tiny_plan("input_type=tensor", "memory_format=contiguous", "threads=1"))
    second_dir, _ = run(tiny_plan("input_type=subclass", "memory_format=contiguous"))
    assert records.read_json(second_dir / records.ENV)["torch_threads"] == (allotted_cpus() or DEFAULT_THREADS)


def test_command_output_that_is_not_utf8_is_read_with_replacement():
    assert command_output("printf", "GPU \\377 ok") == "GPU \ufffd ok"


def test_a_failed_attempt_keeps_its_message_and_traceback_when_the_run_starts_again(tmp_path):
    failure = records.RunError("LostRun", "job 7 ended before the run finished", "log line 1\nlog line 2")
    lifecycle.fail(tmp_path, started_at="2026-01-01T00:00:00+00:00", job_id="7", error=failure)
    (attempt,) = records.read_status(tmp_path).history()
    assert attempt["error"] == "LostRun" and attempt["message"] == failure.message
    assert attempt["traceback"] == failure.traceback and attempt["job_id"] == "7"


def test_a_write_that_fails_leaves_the_old_record_and_no_temporary_file(tmp_path, monkeypatch):
    lifecycle.start(tmp_path)
    before = (tmp_path / records.STATUS).read_text()

    def full(*args):  # stands in for a full disk at the rename
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="No space left"):
        lifecycle.finish(tmp_path)
    assert (tmp_path / records.STATUS).read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [records.STATUS]


SWEEP_LEVEL = [records.SWEEP, records.RUNS, records.JOBS]
RUN_LEVEL = [records.STATUS, records.CONFIG, records.ENV, records.SUMMARY, records.STEPS]
TWO_RUNS = [*FAST, "seed=0,1", "launcher=debug", "tracker.mode=disabled"]


@pytest.fixture(scope="module")
def two_done(tmp_path_factory) -> Path:
    """A sweep of two done runs (TWO_RUNS). Read only: each test damages a copy of it."""
    runs = tmp_path_factory.mktemp("two") / "runs"
    assert launch_here(*TWO_RUNS, f"runs_dir={runs}").returncode == 0
    return runs / "default"


def test_status_names_runs_that_no_submission_reached_and_how_to_submit_them(tmp_path):
    """A launch marked its runs pending, then its submission failed: no job holds them, and no launch the folder."""
    plan = build_plan([*TWO_RUNS, f"runs_dir={tmp_path}"])
    sweepdir.open_sweep(plan, ["perfsweep"])
    sweepdir.mark_pending(plan, list(plan.runs))
    shown = launch_here("status", str(plan.sweep_dir))
    assert shown.returncode == EXIT_NOT_DONE, shown.stdout
    pending = [line for line in shown.stdout.splitlines() if line.startswith("pending")]
    assert len(pending) == 2 and all(
        line.endswith("never submitted: no job holds it, and no launch holds the folder") for line in pending
    )
    assert shown.stdout.splitlines()[-1] == f"re-run what is not done: perfsweep resume {plan.sweep_dir}"


def test_status_says_that_a_run_failed_on_a_known_issue_fails_on_it_again(two_done, tmp_path):
    sweep = Path(shutil.copytree(two_done, tmp_path / "default"))
    first, second = sorted(p.parent for p in sweep.glob(f"*/{records.STATUS}"))
    issue = "https://github.com/pytorch/pytorch/issues/1"
    lifecycle.fail(first, records.RunError("TypeError", "Multiple dispatch failed", known=issue))
    shown = launch_here("status", str(sweep))
    assert shown.returncode == EXIT_NOT_DONE, "a script learns that a run failed without reading the text"
    said = shown.stdout.splitlines()[-1]
    meets = f"not done: 1 failed run on a known issue ({issue}), which a resume meets again"
    assert said == f"{meets}; change the settings that meet it", said
    lifecycle.fail(second, records.RunError("OSError", "the disk is full"))
    said = launch_here("status", str(sweep)).stdout.splitlines()[-1]
    again = f"(1 failed run on a known issue fails again: {issue})"
    assert said == f"re-run what is not done: perfsweep resume {sweep} {again}", said


@pytest.mark.slow
@pytest.mark.parametrize("name", SWEEP_LEVEL + RUN_LEVEL)
def test_a_record_emptied_or_cut_stops_no_command_is_moved_aside_and_resume_finishes(name, two_done, tmp_path):
    runs = tmp_path / "runs"
    sweep = Path(shutil.copytree(two_done, runs / "default"))
    first = [*TWO_RUNS, f"runs_dir={runs}"]
    victim_run = sorted(p.parent for p in sweep.glob(f"*/{records.STATUS}"))[0]
    victim = (sweep if name in SWEEP_LEVEL else victim_run) / name
    for damage in ("empty", "cut"):
        data = victim.read_bytes()
        victim.write_bytes(b"" if damage == "empty" else data[: len(data) * 2 // 3])
        status = launch_here("status", str(sweep))
        assert status.returncode == (EXIT_NOT_DONE if name == records.STATUS else 0), status.stderr
        read_by_status = (records.STATUS, records.SWEEP, records.JOBS)
        assert f"{victim} is unreadable" in status.stdout or name not in read_by_status
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for command in ("table", "report"):
                shown = launch_here(command, str(sweep))
                assert shown.returncode == 0, f"{command} after {name} {damage}: {shown.stderr}"
        if name in RUN_LEVEL:
            assert any(victim_run.name in str(w.message) and name in str(w.message) for w in caught)
        again = launch_here(*first)
        assert again.returncode == 0, again.stderr
        assert f"{victim} is unreadable" in again.stderr and "moved aside to" in again.stderr
        assert launch_here("resume", str(sweep), "launcher.name=debug").returncode == 0
        assert len(list(victim.parent.glob(f"{name}.corrupt-*"))) == (1 if damage == "empty" else 2)
        loaded = load_sweep(sweep)
        assert [r.state for r in loaded] == ["done", "done"], f"{name} {damage}: resume finished the sweep"


# Stands in for a disk that fills up as a run ends: every rename into place fails from the run's steps on.
# Loaded by the launcher's job process through PYTHONPATH (sitecustomize), so the fault is in a real process.
FULL_DISK = """
import errno, os
_replace, _full = os.replace, []
def _replace_on_a_full_disk(src, dst, *args, **kwargs):
    if os.path.basename(str(dst)) == "steps.parquet":
        _full.append(True)
    if _full:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _replace(src, dst, *args, **kwargs)
os.replace = _replace_on_a_full_disk
"""


@pytest.mark.slow
def test_a_run_that_cannot_write_its_records_exits_non_zero_and_says_why(tmp_path, monkeypatch):
    fault = tmp_path / "fault"
    fault.mkdir()
    (fault / "sitecustomize.py").write_text(FULL_DISK)
    runs = tmp_path / "runs"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fault), os.environ.get("PYTHONPATH", "")]))  # the job's
    result = launch_here(*FAST, "tracker.mode=disabled", f"runs_dir={runs}")
    assert result.returncode == 1, result.stdout + result.stderr
    (status,) = [records.read_status(p.parent) for p in (runs / "default").glob("*/status.json")]
    assert status.state == "failed" and status.error.type == "LostRun"
    reason = "its records cannot be written: [Errno 28] cannot write "
    assert reason in status.error.message and "No space left on device" in status.error.message, status.error
    log = Path(status.error.message.rsplit("log: ", 1)[1]).read_text().strip().splitlines()
    assert reason in log[-1], "the reason is the job log's last line"
    assert not list(runs.glob("**/.*.tmp")), "no temporary file left behind"


@pytest.mark.slow
def test_a_launcher_that_cannot_write_its_own_files_goes_on_and_says_so(tmp_path, monkeypatch):
    replace = os.replace

    def full_for_jobs_json(src, dst, *args, **kwargs):  # in this process only: the local jobs write as usual
        if Path(dst).name == records.JOBS:
            raise OSError(28, "No space left on device")
        return replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", full_for_jobs_json)
    runs = tmp_path / "runs"
    result = launch_here(*FAST, "seed=0,1", "launcher.parallelism=2", "tracker.mode=disabled", f"runs_dir={runs}")
    assert result.returncode == 0, result.stderr
    golden.says(
        "a launcher whose jobs.json cannot be written",
        _lines(result.stderr, "perfsweep:"),
        {tmp_path: "<tmp>", JOB_IDS: "(<jobs>)"},
    )
    assert [r.state for r in load_sweep(runs / "default")] == ["done", "done"], "the runs were followed to the end"


def test_a_cuda_error_stops_its_pack_and_leaves_the_rest_pending(tmp_path, capsys):
    """A CUDA error cannot be raised without a GPU: the first run raises the error torch raises for one."""
    plan = build_plan([*FAST, "seed=0,1,2", f"runs_dir={tmp_path}"])
    ran = []

    def execute(spec, run_dir, tracker_id, launch):
        ran.append(spec.name)
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    packed = [RunJob(spec, tmp_path / spec.name, "id", 1) for spec in plan.runs]
    with pytest.raises(SystemExit, match="hit a CUDA error") as stopped:
        RunPack(Runner(execute))(packed)
    assert stopped.value.code != 0
    assert ran == [plan.runs[0].name], "no later run started in the broken process"
    for later in packed[1:]:
        status = records.read_status(later.run_dir)
        assert status.state == "pending" and plan.runs[0].name in status.interrupted["reason"]
    said = f"{capsys.readouterr().err}\n{stopped.value.code}"
    golden.says("a CUDA error in a pack", said, {plan.runs[0].name: "<run>", tmp_path: "<tmp>"})


def test_a_pid_given_to_another_process_is_not_a_live_job(tmp_path):
    """A local job's id is its pid; this test's own process stands in for the process that got it later."""
    records.write_json(tmp_path / records.SWEEP, {"uid": "u", "runs": {"r": "id"}, "launches": []})
    (tmp_path / "r").mkdir()
    lifecycle.start(tmp_path / "r")
    me = {"job_id": str(os.getpid()), "launcher": "local", "log": "-"}
    for started, state in ((process_start(os.getpid()), "running"), ("1", "lost")):
        records.write_json(tmp_path / records.JOBS, {"r": {**me, "process_start": started}})
        (row,) = run_states(tmp_path)
        assert row.state == state


def test_a_local_job_of_another_host_is_unknown_here_while_a_launch_there_holds_the_sweep(tmp_path):
    """A sweep folder shared between hosts: only the host that ran a local job can see its process.
    Its launch holds the sweep while its jobs run, and empties the lock file as it ends."""
    records.write_json(tmp_path / records.SWEEP, {"uid": "u", "runs": {"r": "id"}, "launches": []})
    (tmp_path / "r").mkdir()
    lifecycle.start(tmp_path / "r")
    no_such_pid = str(int(Path("/proc/sys/kernel/pid_max").read_text()) + 1)
    job = {"job_id": no_such_pid, "launcher": "local", "log": "-", "host": "another-host"}
    records.write_json(tmp_path / records.JOBS, {"r": job})
    (tmp_path / ".lock").write_text(json.dumps({"pid": 1, "host": "another-host", "since": "then", "argv": []}))
    notes = []
    (row,) = run_states(tmp_path, notes)
    assert row.state == "unknown", row
    (note,) = notes
    assert note.startswith("local: the local jobs ran on another-host, whose launch holds the sweep: their processes "
                           "are seen there; where that launch is gone (a crash keeps its record), `")  # fmt: skip
    assert f" resume {tmp_path}` takes the lock and runs them again" in note
    (tmp_path / ".lock").write_text("")  # that launch has ended, and its jobs with it
    (row,) = run_states(tmp_path)
    assert row.state == "lost", "resume runs it again"
    (tmp_path / ".lock").unlink()  # launcher.lock=false: no record of that launch, so its jobs count as ended
    (row,) = run_states(tmp_path)
    assert row.state == "lost", "unknown would leave it to a job that no one can see: resume runs it again"


def test_a_slurm_sweep_read_off_the_cluster_has_its_unfinished_runs_unknown(tmp_path, monkeypatch):
    """A sweep folder copied to a laptop: no squeue there to ask."""
    records.write_json(tmp_path / records.SWEEP, {"uid": "u", "runs": {"r": "id"}, "launches": []})
    (tmp_path / "r").mkdir()
    lifecycle.start(tmp_path / "r")
    records.write_json(tmp_path / records.JOBS, {"r": {"job_id": "7_0", "launcher": "slurm", "log": "-"}})
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm-here"))
    notes = []
    (row,) = run_states(tmp_path, notes)
    assert row.state == "unknown", row
    assert notes[0].startswith("slurm: squeue is not on PATH here: only a host of the cluster can ask it"), notes


def test_resume_names_runs_jsonl_when_runs_that_never_started_cannot_be_rebuilt(two_done, tmp_path):
    sweep = Path(shutil.copytree(two_done, tmp_path / "runs" / "default"))
    never_started = sorted(p.parent for p in sweep.glob(f"*/{records.STATUS}"))[0]
    shutil.rmtree(never_started)
    (sweep / records.RUNS).write_text("")
    result = launch_here("resume", str(sweep))
    assert result.returncode == 2
    golden.says("resume without runs.jsonl", result.stderr, {tmp_path: "<tmp>", never_started.name: "<run>"})


def test_a_resume_shows_the_whole_sweep_not_only_the_runs_it_ran(two_done, tmp_path):
    """It plans only what is not done; its table and verdicts rest on the sweep's every run, as `table` does."""
    sweep = Path(shutil.copytree(two_done, tmp_path / "runs" / "default"))
    lifecycle.stop(sorted(p.parent for p in sweep.glob(f"*/{records.STATUS}"))[0], records.BUDGET, "a budget ran out")
    resumed = launch_here("resume", str(sweep))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "[1/1] done" in resumed.stdout and f"{sweep}: 2 runs, 2 done, 0 failed" in resumed.stdout
