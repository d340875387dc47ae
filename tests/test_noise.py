"""`perfsweep noise`: the spread it prints, the differences decided in each budget, the settings it detects, the
floor it keeps for a later launch, and what it refuses."""

import dataclasses
import json
import os
import re
import sys
import types

import numpy as np
import pytest
import torch

from perfsweep.commands.launching import floor_line, machine_here
from perfsweep.launcher import envs
from perfsweep.records import noise as floors
from perfsweep.sweeps.plan import build_plan
from perfsweep.train.host_settings import GOVERNOR_FIX, TURBO_FIX, cpu_settings, gpu_settings
from tests import golden, synthetic
from tests.helpers import TINY, launch_here

# A function benchmark: the floor is of any configuration, and its processes import no model and no torch._dynamo.
CONFIG = ["workload=pairwise_sum_prod", "workload.impl=broadcast", "workload.size=10", "steps=5", "warmup_steps=1"]


def section(out: str, first: str) -> list[str]:
    """The indented lines under the line that starts with `first`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first)) + 1
    found = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        found.append(line.strip())
    return found


@pytest.mark.slow
def test_noise_prints_its_spreads_budgets_and_settings_and_a_later_launch_names_the_floor(tmp_path, monkeypatch):
    from perfsweep.commands import noise

    seen = noise._seen  # the suite's other workers are this test's neighbours: what they took is read, not held
    monkeypatch.setattr(
        noise, "_seen", lambda runs: [dataclasses.replace(s, noisy=s.noisy and False) for s in seen(runs)]
    )
    events, build, launch = [], envs.for_plan, noise.launch_plan  # when each way's environments are built
    monkeypatch.setattr(envs, "for_plan", lambda *a, **k: events.append("built") or build(*a, **k))
    monkeypatch.setattr(noise, "launch_plan", lambda *a, **k: events.append("timed") or launch(*a, **k))
    done = launch_here("noise", "--processes", "3", *CONFIG, f"runs_dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    assert events[:3] == ["built", "built", "timed"], "a build is no launch's cost: it comes before either is timed"
    spread = section(done.stdout, "spread of log step time")
    assert spread[0].startswith("paired: between ") and ", within " in spread[0] and ", between sides " in spread[0]
    assert spread[1].startswith("apart: between ") and ", within " in spread[1]
    budgets = section(done.stdout, "smallest difference a sweep decides at 95%")
    assert [line.split(" of ")[0] for line in budgets] == ["in 1 min", "in 10 min", "in 1 h"]
    decided = r"(±[\d.]+%|none: its runs take longer|none: a launch takes \d+ s before its first run and after .*)"
    assert all(re.fullmatch(rf"in .* of this machine: paired {decided}, apart {decided}", line) for line in budgets)
    settings = section(done.stdout, "settings that add noise")
    names = [line.split(":")[0] for line in settings]
    assert names == ["CPU frequency governor", "turbo", "SMT siblings shared", "others' CPU during its runs",
                     "steal during its runs"]  # fmt: skip
    written = list((tmp_path / "noise").glob("*.json"))
    assert len(written) == 1
    floor = json.loads(written[0].read_text())
    for setting, line in zip(floor["settings"], settings, strict=True):
        assert (setting["noisy"] is None) == (": unknown (" in line)
        assert not setting["noisy"] or f"fix: {setting['fix']}" in line
    assert floor["processes"] == 3 and floor["paired"]["runs"] == 6 and floor["apart"]["runs"] == 3
    assert set(floor["paired"]["floors"]) == {"60", "600", "3600"}
    wall_s = float(re.search(r"apart \((\d+) s\)", done.stdout)[1])  # both ways' launches
    ways = (floor["paired"], floor["apart"])
    assert all(way["fixed_s"] > 0 for way in ways), "a launch plans and starts its job before its first run"
    charged = [way["fixed_s"] + way["runs"] * (way["run_cost_s"] + 5 * way["step_s"]) for way in ways]
    assert sum(charged) >= 0.8 * wall_s, "a launch's cost and its runs' hold the wall time, start-up included"
    later = launch_here(*TINY, "launcher=debug", "input_type=tensor", "memory_format=contiguous",
                        "tracker.mode=disabled", "launcher.budget_s=null", f"runs_dir={tmp_path}")  # fmt: skip
    assert later.returncode == 0, later.stderr
    said = later.stdout.splitlines()[0]
    measured = f"of the configuration that `perfsweep noise --processes 3 {' '.join(CONFIG)}` measured on "
    assert said.startswith("this machine decides about ±") and measured + floor["measured"][:10] in said, said
    apart = floors.NoiseFloor.from_json(floor).apart  # one configuration, no comparison: its runs are apart
    assert said.startswith(f"this machine decides about {floors.decided(apart, floors.SAID_BUDGET_S)} in 10 min "), said
    budgeted = build_plan([*TINY, "input_type=tensor", "memory_format=contiguous", f"runs_dir={tmp_path}"])
    within = f"this machine decides about {floors.decided(apart, 60)} in 1 min (the floor kept nearest this launch's "
    within += "budget, "
    assert floor_line(budgeted).startswith(within + "50 s) of the configuration"), "the default sweep's budget"
    blind = any(s["noisy"] is None and s["name"].endswith(" during its runs") for s in floor["settings"])
    assert said.endswith(", though what else ran on its host then is unknown") == blind, said
    assert ("; what else ran on its host is unknown: " in done.stdout) == blind, done.stdout
    # A neighbour's share, as a host record of a shared machine gives it (a real one is too short to tell here)
    taken = noise.Setting("others' CPU during its runs", "35% (median over its runs)", True, "stop them")
    monkeypatch.setattr(noise, "_seen", lambda runs: [taken])
    shared = launch_here("noise", "--processes", "2", *CONFIG, f"runs_dir={tmp_path}")
    assert shared.returncode == noise.EXIT_SHARED, shared.stderr
    assert "not written: others' CPU during its runs 35%; the floor kept is the one before" in shared.stdout
    assert json.loads(written[0].read_text()) == floor, "the floor of the machine alone is kept"


def fake_sysfs(root, governor: str, no_turbo: str):
    cpus = root / "sys/devices/system/cpu"
    for cpu in os.sched_getaffinity(0):
        (cpus / f"cpu{cpu}/cpufreq").mkdir(parents=True)
        (cpus / f"cpu{cpu}/cpufreq/scaling_governor").write_text(f"{governor}\n")
    (cpus / "intel_pstate").mkdir()
    (cpus / "intel_pstate/no_turbo").write_text(f"{no_turbo}\n")


def test_the_settings_name_a_powersave_governor_and_turbo_with_their_fixes_and_unknown_without_sysfs(tmp_path):
    fake_sysfs(tmp_path / "noisy", "powersave", "0")
    governor, turbo, smt = cpu_settings(tmp_path / "noisy")
    assert governor.noisy and "powersave" in governor.line and f"fix: {GOVERNOR_FIX}" in governor.line
    assert turbo.noisy and f"fix: {TURBO_FIX['intel_pstate/no_turbo']}" in turbo.line
    assert smt.noisy is None
    assert all(s.noisy is None and ": unknown (" in s.line for s in cpu_settings(tmp_path / "empty"))


def test_a_floor_of_another_configuration_never_takes_the_default_configurations_place(tmp_path):
    def floor(overrides: list[str], measured: str) -> floors.NoiseFloor:
        return floors.NoiseFloor("m", "CPU m", "2.14.1", measured, overrides, 4, "f", None, None, [])

    small = floor(["model=tiny_cnn", f"runs_dir={tmp_path}"], "2026-11-30T10:00:00")
    small.write(tmp_path)
    assert floors.read_floor(tmp_path, "m") == small, "the one floor there is"
    default = floor([], "2026-11-30T11:00:00")
    default.write(tmp_path)
    floor(["model=tiny_cnn"], "2026-11-30T12:00:00").write(tmp_path)  # measured again, later: its own file
    assert floors.read_floor(tmp_path, "m") == default
    assert len(list((tmp_path / floors.FOLDER).glob("m*.json"))) == 2, "runs_dir is no part of a configuration"


def test_a_floor_measured_again_says_the_one_it_replaces_and_a_slurm_launch_shows_none(tmp_path):
    """Two floors far apart say the machine's noise moved; a Slurm node is not the machine the floor is of."""
    from perfsweep.commands import noise

    def floor(apart: float, measured: str) -> floors.NoiseFloor:
        spread = floors.Spread(6, apart, 0.1, None, 0.1, 0.001, {"60": apart / 5, "600": None, "3600": None})
        return floors.NoiseFloor("m", "CPU m", "2.14.1", measured, [], 6, "f", None, spread, [])

    first, second = floor(0.27, "2026-12-02T08:02:35"), floor(0.055, "2026-12-02T08:10:00")
    assert noise._replaced(tmp_path, first) == "", "the first floor replaces none"
    first.write(tmp_path)
    said = "; it replaces the floor of 2026-12-02 08:02 (in 1 min: paired unknown -> unknown, apart ±5.4% -> ±1.1%)"
    assert noise._replaced(tmp_path, second) == said
    one = [*TINY, "input_type=tensor", "memory_format=contiguous", f"runs_dir={tmp_path}"]
    here = build_plan([*one, "launcher=local"])
    machine = floors.machine_kind(*machine_here(here), floors.torch_version())
    dataclasses.replace(second, machine=machine).write(tmp_path)
    assert floor_line(here).startswith("this machine decides about ±"), "a launch on this machine shows its floor"
    assert floor_line(build_plan([*one, "launcher=slurm"])) is None


def test_a_share_seen_during_noises_runs_says_how_many_runs_told_it():
    """One of six runs had windows long enough for /proc/stat; a neighbour took 40% of its CPUs."""
    from perfsweep.commands import noise

    runs = synthetic.sweep({("tensor", "contiguous"): 50.0}, 6, synthetic.Noise(), np.random.default_rng(0))
    runs = synthetic.beside(runs[:1], 0.8) + synthetic.beside(runs[1:], 0.0, block_s=0.01)
    others = next(s for s in noise._seen(runs) if s.name.startswith("others' CPU"))
    assert others.state.startswith("40% (median over the 1 of its 6 runs whose windows told;"), others.state


def test_a_neighbour_that_took_some_of_noises_runs_fails_its_check_though_the_median_run_had_none():
    """Two of six runs had a neighbour that took 40% of their CPUs.

    Their spread is in the floor.
    """
    from perfsweep.commands import noise

    runs = synthetic.sweep({("tensor", "contiguous"): 50.0}, 6, synthetic.Noise(), np.random.default_rng(0))
    runs = synthetic.beside(runs[:2], 0.8) + synthetic.beside(runs[2:], 0.0)
    others = next(s for s in noise._seen(runs) if s.name.startswith("others' CPU"))
    said = "above 10% in 2 of its 6 runs (up to 40%); median 0% (over its runs;"
    assert others.noisy and others.state.startswith(said), others
    quiet = next(s for s in noise._seen(runs[2:]) if s.name.startswith("others' CPU"))
    assert not quiet.noisy and quiet.state.startswith("0% (median over its runs"), quiet


@pytest.mark.parametrize("cpus", [2, 8])
def test_the_fix_for_a_neighbour_gives_the_runs_cpus_of_their_own_only_where_the_host_has_more(monkeypatch, cpus):
    """Runs of 2 threads: on 2 CPUs, pinning would measure another thread count; on 8, it names CPUs this process
    may use."""
    from perfsweep.commands import noise

    runs = synthetic.sweep({("tensor", "contiguous"): 50.0}, 2, synthetic.Noise(), np.random.default_rng(0))
    runs = [dataclasses.replace(run, env=run.env | {"torch_threads": 2}) for run in synthetic.beside(runs, 0.8)]
    monkeypatch.setattr(noise.os, "sched_getaffinity", lambda pid: set(range(4, 4 + cpus)))  # a cpuset: 4 on
    others = next(s for s in noise._seen(runs) if s.name.startswith("others' CPU"))
    if cpus == 2:
        assert others.fix.endswith(": the 2 CPUs here leave none beyond the runs' 2 threads to give them"), others
    else:
        said = "`taskset -c 4,5` before the command, and each other process the rest (`taskset -acp 6,7,8,9,10,11 PID`)"
        assert others.fix.endswith(said), others


def test_noise_refuses_too_few_processes_and_an_unknown_flag_before_running(tmp_path):
    for name, args in [
        ("processes 0", ["--processes", "0"]),
        ("unknown flag", ["--bogus"]),
        ("a launch's budget", ["launcher.budget_s=50"]),
        ("what it sets itself", ["repeats=3", "pairing=process"]),
        ("a key typed twice", ["model=tiny_cnn", "model=tiny_cnnn"]),
    ]:
        refused = launch_here("noise", *args, *CONFIG, f"runs_dir={tmp_path}")
        assert refused.returncode == 2
        golden.says(f"noise refused: {name}", refused.stderr)
    assert not (tmp_path / "noise").exists()


# NVML as the GPU settings call it: a GPU at its default clocks, persistence off, another process on it.
FAKE_NVML = types.SimpleNamespace(
    NVML_CLOCK_SM=1,
    NVML_FEATURE_ENABLED=1,
    nvmlInit=lambda: None,
    nvmlDeviceGetHandleByIndex=lambda index: index,
    nvmlDeviceGetApplicationsClock=lambda handle, clock: 1500,
    nvmlDeviceGetDefaultApplicationsClock=lambda handle, clock: 1500,
    nvmlDeviceGetMaxClockInfo=lambda handle, clock: 1980,
    nvmlDeviceGetPersistenceMode=lambda handle: 0,
    nvmlDeviceGetComputeRunningProcesses=lambda handle: [types.SimpleNamespace(pid=4242)],
    nvmlDeviceGetGraphicsRunningProcesses=lambda handle: [],
)


def test_the_gpu_settings_name_unlocked_clocks_persistence_off_and_another_process_with_their_fixes(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "pynvml", FAKE_NVML)
    clocks, persistence, others = gpu_settings()
    assert clocks.noisy and "fix: sudo nvidia-smi -lgc 1980,1980" in clocks.line
    assert persistence.noisy and "fix: sudo nvidia-smi -pm 1" in persistence.line
    assert others.noisy and "4242" in others.line


def test_a_budget_the_launch_alone_outlasts_says_so():
    """A launch of 70 s before its first run: a minute decides nothing, and not for its runs' sake."""
    slow = floors.Spread(runs=3, between=0.01, within=0.01, between_sides=None, run_cost_s=0.5, step_s=0.01,
                         floors={"60": None, "600": 0.02}, fixed_s=70.0)  # fmt: skip
    assert floors.decided(slow, 60) == "none: a launch takes 70 s before its first run and after its last"
    assert floors.decided(dataclasses.replace(slow, fixed_s=5.0), 60) == "none: its runs take longer"


def test_a_launch_s_floor_is_the_longest_kept_within_its_budget():
    """A floor of a longer time than the launch has would promise a finer difference than it can decide."""
    spread = types.SimpleNamespace(floors={"60": 0.02, "600": 0.006, "3600": 0.002})
    assert [floors.budget_within(spread, s) for s in (50, 599, 700, 7200)] == [60, 60, 600, 3600]
    assert floors.BUDGETS[floors.budget_within(spread, 7200)] == "1 h"
