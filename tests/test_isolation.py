"""launcher.isolation: runs forked from a warm job (fork) against a new interpreter per run (spawn)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from perfsweep import records
from perfsweep.launcher.run_job import RunJob, Runner
from perfsweep.launcher.slots import cpu_shares
from perfsweep.launcher.warm import fork_hazard, fork_runs
from perfsweep.records import lifecycle, load_sweep
from perfsweep.sweeps.plan import build_plan
from perfsweep.train import fastai_parts
from tests.helpers import FAST, ROOT, launch_here, offline_wandb, record_done

ISOLATED = ["config.json", "env.json", "status.json", "steps.parquet", "summary.json"]


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> dict[str, Path]:
    """One sweep of two replicates, two at a time, launched each way: forked from one warm job (both replicates in
    it), and a new interpreter per job. Read only."""
    sweeps = {}
    for mode, per_job in (("fork", 2), ("spawn", 1)):
        runs_dir = tmp_path_factory.mktemp(mode)
        args = ["repeats=2", "launcher.parallelism=2", f"launcher.runs_per_job={per_job}", f"launcher.isolation={mode}"]
        result = launch_here(*FAST, "tracker.mode=disabled", f"runs_dir={runs_dir}", *args)
        assert result.returncode == 0, result.stdout + result.stderr
        sweeps[mode] = runs_dir / "default"
    return sweeps


@pytest.mark.slow
def test_fork_and_spawn_runs_leave_the_same_records(launched):
    forked, spawned = ({run.run_id: run for run in load_sweep(launched[mode])} for mode in ("fork", "spawn"))
    assert sorted(forked) == sorted(spawned) and len(forked) == 2, "isolation is how a run is launched, not what it is"
    for run in (*forked.values(), *spawned.values()):
        assert sorted(p.name for p in run.path.iterdir()) == ISOLATED
        t = run.status.timing
        assert set(t) == {"startup_s", "warmup_s", "window_s", "records_s", "counted_s", "summarized_s", "written_s"}
        assert t["counted_s"] + t["summarized_s"] + t["written_s"] <= t["records_s"], "parts of the time after"
    for run_id, run in forked.items():
        other = spawned[run_id]
        assert (
            records.read_steps(run.path / records.STEPS).schema == records.read_steps(other.path / records.STEPS).schema
        )
        assert set(run.summary.to_json()) == set(other.summary.to_json())
        assert set(run.env) == set(other.env)


@pytest.mark.slow
def test_local_jobs_at_once_each_run_on_a_share_of_the_cpus(launched):
    """launcher.isolation=spawn: each job is a new interpreter, placed by the launcher (the warm job's forks are
    placed by the job: tests/test_launch.py's local sweep)."""
    jobs = records.submitted_jobs(launched["spawn"])
    assert len({job["job_id"] for job in jobs.values()}) == 2, "a job per run"
    assert sorted(tuple(job["cpus"]) for job in jobs.values()) == sorted(cpu_shares(2)), "a share each"
    for run in load_sweep(launched["spawn"]):
        assert run.env["cpus"] == jobs[run.name]["cpus"] and run.env["torch_threads"] == len(run.env["cpus"])


@pytest.mark.slow
def test_replicates_forked_from_one_job_each_get_a_process_and_a_seed(launched):
    runs = load_sweep(launched["fork"])
    jobs = records.submitted_jobs(launched["fork"])
    assert len({job["job_id"] for job in jobs.values()}) == 1, "one warm job served the sweep"
    assert sorted(r.fields["seed"] for r in runs) == [0, 1]
    pids = {r.status.pid for r in runs}
    assert len(pids) == 2 and int(next(iter(jobs.values()))["job_id"]) not in pids, "a process each, not the job's"


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


# In a new interpreter: a job's imports (lazy_imports), then a run as its forked child would execute it, per
# configuration in turn; prints the modules each run imported anew.
IMPORTED_BY_A_RUN = """
import importlib, sys
from pathlib import Path
from perfsweep.sweeps.plan import build_plan
from perfsweep.train.instrumented import execute, lazy_imports

small = ["model=tiny_cnn", "input_type=tensor", "memory_format=contiguous", "steps=2", "warmup_steps=1", "repeats=1"]
for index, config in enumerate(sys.argv[2:]):
    plan = build_plan([*small, "tracker.mode=disabled", *config.split(), f"runs_dir={sys.argv[1]}/{index}"])
    (spec,) = plan.runs
    for module in lazy_imports(plan.runs):
        importlib.import_module(module)
    before = set(sys.modules)
    execute(spec, plan.sweep_dir / spec.name, tracker_id="t", launch={"parallelism": 1})
    print(config, "|", " ".join(sorted(set(sys.modules) - before)))
"""


@pytest.mark.slow
@pytest.mark.skipif(not fastai_parts.installed(), reason="fastai's parts need fastai (CI installs it)")
def test_a_run_forked_from_a_warm_job_imports_nothing_its_job_did_not(tmp_path, monkeypatch):
    """What a run imports as it runs, a forked one imports in each process: a job imports it once, before forking.
    fastai's parts first, then fastai's loop, which imports more of fastai; then W&B's run, offline."""
    configs = ["input_type=tensorimage", "workload=fastai_step", "tracker.mode=offline"]
    offline_wandb(monkeypatch, tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED_BY_A_RUN, str(tmp_path), *configs], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = dict(line.split(" | ") for line in done.stdout.splitlines() if " | " in line)
    assert imported == {config: "" for config in configs}, imported
