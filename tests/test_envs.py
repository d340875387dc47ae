"""Package versions as a sweep axis: each environment a sweep asks for is resolved and built with uv (real builds,
from the package index, of numpy releases: torch's are gigabytes), cached, and its runs run in it."""

import hashlib
import json
import multiprocessing
import os

import pytest

from perfsweep import records
from perfsweep.launcher import envs
from perfsweep.records import load_sweep
from perfsweep.sweeps.plan import build_plan
from perfsweep.sweeps.spec import run_fields
from tests import golden
from tests.helpers import FAST, UNSTABLE, launch_here

# Two numpy releases this Python installs, neither of them perfsweep's own (requirements.txt)
NUMPYS = ("2.2.6", "2.3.5")


def test_perfsweeps_own_environment_leaves_a_runs_identity_as_it_was():
    (run,) = build_plan(["workload=pairwise_sum_prod", "workload.impl=loop", "repeats=1"]).runs
    assert run.name == "pairwise_sum_prod-loop-eager-size=100-0786a15e", "old sweeps' runs are found again"
    for asked in ("torch=2.9.1", "+env.packages.numpy=2.2.6"):
        (other,) = build_plan(["workload=pairwise_sum_prod", "workload.impl=loop", "repeats=1", asked]).runs
        name, _, version = asked.lstrip("+").rpartition("=")
        assert other.axes[name.rpartition(".")[2]] == version and other.run_id != run.run_id
        plain = json.dumps(run_fields(other.config), sort_keys=True, default=str)
        assert other.run_id == hashlib.sha1(plain.encode()).hexdigest()[:12], "the id is the plain JSON's, as others"


def test_each_rounds_runs_of_one_environment_are_back_to_back():
    """A warm job starts per environment's block of runs: one block per environment in each round."""
    plan = build_plan(["model=test_resnet", "input_type=tensor,subclass", "torch=2.11.0,2.14.1", "repeats=3"])
    for replicate in range(3):
        order = [spec.config.torch for spec in plan.runs if spec.config.replicate == replicate]
        assert order == sorted(order) and set(order) == {"2.11.0", "2.14.1"}
    per_round = len(plan.runs) // 3
    assert [spec.config.replicate for spec in plan.runs] == [r for r in range(3) for _ in range(per_round)]


@pytest.mark.network
def test_a_published_sweep_over_two_environments_is_compared_within_each(tmp_path, env_dir):
    """Each run imports the numpy it asked for; the table has numpy as a column, and each published comparison
    is made within one environment, a row per environment, not across them."""
    sweep = ["sweep=subclass_slowdown", "scale=smoke", "memory_format=contiguous", "input_type=tensor,subclass"]
    args = [*sweep, f"+env.packages.numpy={','.join(NUMPYS)}", "repeats=1", "tracker.mode=disabled"]
    result = launch_here(*args, f"env.dir={env_dir}", f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    runs = load_sweep(tmp_path / "subclass_slowdown")
    assert sorted(run.axes["numpy"] for run in runs) == sorted([*NUMPYS, *NUMPYS])
    for run in runs:
        asked = run.axes["numpy"]
        assert run.env["packages"]["numpy"] == asked, "the run imported the numpy it asked for"
        assert run.env["environment"]["requested"] == {"numpy": asked}
        assert run.env["environment"]["resolved"] == [f"numpy=={asked}"]
        assert run.env["environment"]["path"].startswith(str(env_dir))
    header = next(line for line in result.stdout.splitlines() if line.startswith("| input_type"))
    assert "| numpy " in header, "numpy is the table's axis"
    rows = [line for line in result.stdout.splitlines() if line.startswith("| contiguous, subclass vs Tensor")]
    assert [row.split("|")[1].strip() for row in rows] == [
        f"contiguous, subclass vs Tensor, numpy={version}" for version in NUMPYS
    ]


@pytest.mark.network
def test_an_environment_is_built_once_and_found_again(env_dir):
    request = envs.request_of("current", {"numpy": NUMPYS[0]})
    said = []
    first = envs.ensure(request, env_dir, said.append)
    again = envs.ensure(request, env_dir, said.append)
    assert again.path == first.path and again.build_s is None and said[-1].endswith("(built before)")
    assert (first.path / envs.RECORD).is_file() and not list(env_dir.glob(".building-*"))


@pytest.mark.network
def test_each_installation_of_perfsweep_has_environments_of_its_own(env_dir, tmp_path, monkeypatch):
    """An environment reaches perfsweep's own packages (submitit, Hydra...) where the installation that built it
    has them: another installation (one elsewhere, made up here) gets its own, so that removing or remaking one
    leaves no other's environments without them."""
    request = envs.request_of("current", {"numpy": NUMPYS[0]})
    mine = envs.ensure(request, env_dir, lambda line: None)
    elsewhere = str(tmp_path / "another-venv" / "site-packages")
    monkeypatch.setattr(envs.site, "getsitepackages", lambda: [elsewhere])
    theirs = envs.ensure(request, env_dir, lambda line: None)
    assert theirs.path != mine.path and theirs.build_s is not None, "built for that installation"
    reaches = {
        env: next(env.path.glob("lib/python*/site-packages/perfsweep_base.pth")).read_text() for env in (mine, theirs)
    }
    assert reaches[theirs] == elsewhere + "\n" and elsewhere not in reaches[mine]
    monkeypatch.undo()
    assert envs.ensure(request, env_dir, lambda line: None).path == mine.path, "this installation's, found again"


def test_launches_that_build_one_environment_at_once_share_one_build(tmp_path, monkeypatch):
    """Two processes ask one cache for an environment it lacks, at once: one builds it, the other waits and uses it.

    Each resolves to no package at all, so the build is a bare virtualenv: no index is asked.
    """
    fork = multiprocessing.get_context("fork")
    both_looked = fork.Barrier(2)  # each has found the cache without it before either builds

    def resolve(request, wheels=None):
        both_looked.wait(timeout=60)
        return ()

    def build(request, resolved, path):
        (tmp_path / f"built-by-{os.getpid()}").touch()
        real_build(request, resolved, path)

    real_build = envs._build
    monkeypatch.setattr(envs, "resolve", resolve)
    monkeypatch.setattr(envs, "_build", build)
    cache, request = tmp_path / "envs", envs.request_of("current", {"numpy": NUMPYS[0]})

    def say(line):
        with (tmp_path / f"said-by-{os.getpid()}").open("a") as said:
            said.write(line + "\n")

    launches = [fork.Process(target=envs.ensure, args=(request, cache, say)) for _ in range(2)]
    for launch in launches:
        launch.start()
    for launch in launches:
        launch.join(timeout=120)
    assert [launch.exitcode for launch in launches] == [0, 0]
    assert len(list(tmp_path.glob("built-by-*"))) == 1, "built once"
    assert len(list(cache.glob(f"*/{envs.RECORD}"))) == 1 and not list(cache.glob(".building-*"))
    assert envs.find(request, cache) is not None
    said = sorted(path.read_text() for path in tmp_path.glob("said-by-*"))  # "built by" before "built in"
    assert len(said) == 2 and "built by another launch" in said[0] and "built in" in said[1], said


@pytest.mark.network
def test_a_release_that_does_not_exist_is_refused_before_anything_is_written(tmp_path, env_dir):
    result = launch_here(*FAST, "+env.packages.numpy=9.9.9", f"env.dir={env_dir}", f"runs_dir={tmp_path}")
    assert result.returncode == 2 and not any(tmp_path.iterdir())
    golden.says("an environment with a release that does not exist", result.stderr, {tmp_path: "<runs>", **UNSTABLE})


def test_an_environment_axis_in_the_launchers_own_process_is_refused(tmp_path, env_dir):
    args = [*FAST, f"+env.packages.numpy={NUMPYS[0]}", "launcher=debug", f"env.dir={env_dir}"]
    result = launch_here(*args, f"runs_dir={tmp_path}")
    assert result.returncode == 2 and not any(tmp_path.iterdir())
    golden.says("an environment axis under launcher=debug", result.stderr, {tmp_path: "<runs>"})


def test_a_runs_torch_is_configuration_not_machine_when_it_asked_for_it(tmp_path):
    args = [*FAST, "tracker.mode=disabled", "launcher=debug", f"runs_dir={tmp_path}"]
    assert launch_here(*args).returncode == 0
    (run,) = load_sweep(tmp_path / "default")
    assert "torch" in run.machine
    config = records.read_json(run.path / records.CONFIG)
    config["config"]["torch"] = "2.9.1"  # as a run of the torch axis records it
    config["axes"]["torch"], config["axis_order"] = "2.9.1", [*config["axis_order"], "torch"]
    records.write_json(run.path / records.CONFIG, config)
    (asked,) = load_sweep(tmp_path / "default")
    assert "torch" in asked.asked and asked.machine["CPU"] == run.machine["CPU"] and not run.asked
    header = launch_here("table", str(tmp_path / "default")).stdout.splitlines()[1]
    assert "| torch " not in header and "torch=2.9.1" in header, "the version is the axis', not the machine's"


@pytest.mark.network
def test_envs_lists_the_cached_environments_and_prunes_them(tmp_path):
    cache = tmp_path / "envs"
    built = envs.ensure(envs.request_of("current", {"numpy": NUMPYS[1]}), cache, lambda line: None)
    (cache / f".building-{built.path.name}-1").mkdir()  # a build cut short: never listed, never used
    listed = launch_here("envs", "--dir", str(cache))
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith(f"{built.path.name}  numpy=={NUMPYS[1]}  ")
    kept = launch_here("envs", "--dir", str(cache), "--prune", "--unused-days", "1")
    assert kept.returncode == 0 and built.path.is_dir(), "used today: kept"
    assert launch_here("envs", "--dir", str(cache), "--prune").returncode == 0
    assert not built.path.exists() and envs.find(built.request, cache) is None
