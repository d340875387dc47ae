"""launcher.isolation: runs forked from a warm job (fork) against a new interpreter per run (spawn)."""

import os
import signal
import subprocess
import sys

import pytest
import torch

from perfsweep import records
from perfsweep.launcher.runs import RunJob, Runner
from perfsweep.launcher.slots import cpu_shares
from perfsweep.launcher.warm import fork_hazard, fork_runs
from perfsweep.records import lifecycle, load_sweep
from perfsweep.sweeps.plan import build_plan
from tests.helpers import FAST, ROOT, launch_here, record_done

ISOLATED = ["config.json", "env.json", "status.json", "steps.parquet", "summary.json"]


def _launch(runs_dir, *args: str) -> list[records.RunRecord]:
    result = launch_here(*FAST, "tracker.mode=disabled", f"runs_dir={runs_dir}", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return load_sweep(runs_dir / "default")


@pytest.mark.slow
def test_fork_and_spawn_runs_leave_the_same_records(tmp_path):
    forked, spawned = (_launch(tmp_path / mode, f"launcher.isolation={mode}")[0] for mode in ("fork", "spawn"))
    for run in (forked, spawned):
        assert sorted(p.name for p in run.path.iterdir()) == ISOLATED
        t = run.status.timing
        assert set(t) == {"startup_s", "warmup_s", "window_s", "records_s", "counted_s", "summarized_s", "written_s"}
        assert t["counted_s"] + t["summarized_s"] + t["written_s"] <= t["records_s"], "parts of the time after"
    assert forked.run_id == spawned.run_id, "isolation is how a run is launched, not what it measures"
    schemas = [records.read_steps(run.path / records.STEPS).schema for run in (forked, spawned)]
    assert schemas[0] == schemas[1]
    assert set(forked.summary.to_json()) == set(spawned.summary.to_json())
    assert set(forked.env) == set(spawned.env)


@pytest.mark.slow
def test_local_jobs_at_once_each_run_on_a_share_of_the_cpus(tmp_path):
    """launcher.isolation=spawn: each job is a new interpreter, placed by the launcher (the warm job's forks are
    placed by the job: tests/test_launch.py's local sweep)."""
    runs = _launch(tmp_path, "seed=0,1", "launcher.isolation=spawn", "launcher.parallelism=2")
    jobs = records.submitted_jobs(tmp_path / "default")
    assert sorted(tuple(job["cpus"]) for job in jobs.values()) == sorted(cpu_shares(2)), "a share each"
    for run in runs:
        assert run.env["cpus"] == jobs[run.name]["cpus"] and run.env["torch_threads"] == len(run.env["cpus"])


@pytest.mark.slow
def test_replicates_forked_from_one_job_each_get_a_process_and_a_seed(tmp_path):
    runs = _launch(tmp_path, "repeats=3", "launcher.runs_per_job=3", "launcher.isolation=fork")
    jobs = records.submitted_jobs(tmp_path / "default")
    assert len({job["job_id"] for job in jobs.values()}) == 1, "one warm job served the sweep"
    assert sorted(r.fields["seed"] for r in runs) == [0, 1, 2]
    pids = {r.status.pid for r in runs}
    assert len(pids) == 3 and int(next(iter(jobs.values()))["job_id"]) not in pids, "a process each, not the job's"


def test_a_job_refuses_to_fork_when_its_process_holds_cuda(tmp_path, monkeypatch):
    """torch's flag stands in for an initialised CUDA context (on a GPU machine, this worker's earlier tests may
    have made a real one)."""
    if not torch.cuda.is_available():
        assert fork_hazard() is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert "CUDA is initialised" in fork_hazard()
    (spec,) = build_plan([*FAST, f"runs_dir={tmp_path}"]).runs
    run = RunJob(spec, tmp_path / spec.name, "id", 1)
    with pytest.raises(RuntimeError, match=f"cannot fork run {spec.name} from this job: CUDA is initialised"):
        fork_runs(Runner(_never), [run], 1, (), {})
    assert not (tmp_path / spec.name).exists(), "nothing was forked"


def _never(*args):
    raise AssertionError("no run may start")


@pytest.mark.gpu
@pytest.mark.parametrize("nvml_check", ["1", "0"])
def test_a_job_that_asked_for_cuda_forks_runs_that_use_it_or_refuses(tmp_path, nvml_check):
    """In a fresh job process that asked torch.cuda.is_available(): by NVML, the job forks runs that use the GPU;
    by the CUDA runtime (cuInit), every child would fail CUDA's initialisation, so the job refuses to fork."""
    code = "import sys, torch; from tests.helpers import fork_two; torch.cuda.is_available(); "
    code += "print(sorted(fork_two(sys.argv[1])))"
    env = {**os.environ, "PYTORCH_NVML_BASED_CUDA_CHECK": nvml_check}
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    if nvml_check == "1":
        assert result.returncode == 0 and result.stdout.strip().endswith("['done']"), result.stdout + result.stderr
    else:
        assert result.returncode != 0 and "the CUDA driver is initialised in this process" in result.stderr


def _killed_first(spec, run_dir, tracker_id, launch):
    """The first run's process dies as the OOM killer would end it; the others finish."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lifecycle.start(run_dir, pid=os.getpid())
    if spec.config.seed == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    lifecycle.finish(run_dir, pid=os.getpid())


def test_a_killed_child_is_recorded_lost_and_the_next_run_still_runs(tmp_path):
    plan = build_plan([*FAST, "seed=0,1", f"runs_dir={tmp_path}"])
    runs = [RunJob(spec, tmp_path / spec.name, "id", 1) for spec in plan.runs]
    states = fork_runs(Runner(_killed_first), runs, 1, (), {})
    killed, other = (records.read_status(run.run_dir) for run in runs)
    assert states == {runs[0].spec.name: "failed", runs[1].spec.name: "done"}
    assert killed.error.type == "LostRun" and "killed by SIGKILL" in killed.error.message
    assert other.state == "done" and other.pid != killed.pid


def test_a_requeued_job_whose_runs_are_done_skips_them_and_runs_the_rest(tmp_path):
    """A job requeued after its runs finished (Slurm's requeue waits KillWait before it kills) starts again:
    it must skip the done runs, not wait for children it never forked."""
    plan = build_plan([*FAST, "seed=0,1,2", f"runs_dir={tmp_path}"])
    runs = [RunJob(spec, tmp_path / spec.name, "id", 1) for spec in plan.runs]
    for run in runs[:2]:
        record_done(run.spec, run.run_dir, "id", {})
    earlier = [records.read_status(run.run_dir).pid for run in runs[:2]]
    assert fork_runs(Runner(record_done), runs, 1, (), {}) == {run.spec.name: "done" for run in runs}
    assert [records.read_status(run.run_dir).pid for run in runs[:2]] == earlier, "done runs did not run again"
    assert records.read_status(runs[2].run_dir).pid != os.getpid(), "the last ran in a child"
    assert fork_runs(Runner(_never), runs, 2, (), {}) == {run.spec.name: "done" for run in runs}
