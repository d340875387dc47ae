"""The bench scripts run (smoke sizes, no figures asserted: figures are for people, not for pass/fail)."""

import contextlib
import io
import re
import runpy
import signal
import sys

import numpy as np
import pytest
import torch

from perfsweep.bench import pairing, suite, syncs
from perfsweep.train.ranks.start import HANDLED
from tests import synthetic
from tests.helpers import ROOT


def bench(script: str, *args: str) -> str:
    """What `python -m perfsweep.bench.<script> ARGS` prints.

    It runs in this process: the scripts start no process of their own that matters here.
    """
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setattr(sys, "argv", [f"bench/{script}", *args])
        runpy.run_module(f"bench.{script.removesuffix('.py')}", run_name="__main__")
    return out.getvalue()


@pytest.mark.slow
def test_plan_scale_bench_prints_its_stages_and_hydras_own_composition_on_request():
    out = bench("plan_scale.py", "--runs", "100", "--repeats", "1", "--hydra", "3")
    assert out.startswith("100 runs, median of 1")
    stages = ("plan", "validate", "write", "total", "status", "status command", "hydra")
    assert [line.split("  ")[0] for line in out.splitlines()[1:]] == list(stages)
    assert "(3 runs, each composed by Hydra in full, once)" in out


@pytest.mark.slow
def test_overhead_bench_prints_both_loops_and_their_ratio():
    out = bench("overhead.py", "--rounds", "2", "steps=3", "warmup_steps=1", "device=cpu", "repeats=1")
    lines = out.strip().splitlines()
    assert "2 rounds of 3 steps, in turn A B, B A" in lines[0]
    assert lines[1].startswith("bare") and lines[2].startswith("perfsweep")
    assert lines[3].startswith("perfsweep/bare throughput") and len(lines) == 4


@pytest.mark.slow
def test_overhead_bench_adds_the_synced_loop_when_asked():
    out = bench("overhead.py", "--rounds", "2", "--synced", "steps=3", "warmup_steps=1", "device=cpu", "repeats=1")
    lines = out.strip().splitlines()
    assert "in turn A B C, B C A, C A B" in lines[0] and lines[3].startswith("synced ")
    assert [line.split(" ")[0] for line in lines[4:]] == ["perfsweep/bare", "synced/bare"]


@pytest.mark.slow
def test_sync_bench_checks_each_run_on_cuda_or_for_host_reads():
    out = bench(
        "syncs.py",
        "model=tiny_cnn",
        "model.image_size=32",
        "model.batch_size=4",
        "input_type=tensor,subclass",
        "precision=amp_bf16",
        "repeats=1",
    )
    header, *runs = out.strip().splitlines()
    assert header.startswith("CUDA: syncs per step" if torch.cuda.is_available() else "no CUDA GPU: host reads")
    assert len(runs) == 2 and all(run.startswith("tiny_cnn-") for run in runs)
    assert all(run.endswith("no sync" if torch.cuda.is_available() else "no host read") for run in runs)


def test_analysis_scale_bench_prints_its_stages():
    out = bench("analysis_scale.py", "--runs", "6", "--steps", "20", "--repeats", "1")
    assert out.startswith("6 runs x 20 steps, median of 1")
    assert all(f"\n{stage}" in out for stage in ("load", "summarise", "table", "total"))


@pytest.mark.slow
def test_sync_bench_counts_a_ddp_step_on_each_rank_beside_one_process():
    """Its ranks are new interpreters, which find its functions in perfsweep.bench.syncs: it runs under that name
    here, not as __main__. The elastic agent takes this process's signal handlers; they are given back after."""
    overrides = ["model=tiny_cnn", "model.image_size=32", "model.batch_size=4", "input_type=tensor", "device=cpu"]
    overrides += ["precision=fp32", "dist=ddp", "dist.world_size=2", "steps=2", "dist.sync_block=2", "warmup_steps=2"]
    handlers = {number: signal.getsignal(number) for number in HANDLED}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            syncs.main(overrides)
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    (run,) = out.getvalue().strip().splitlines()[1:]
    assert re.search(r" one process: .* \| rank 0: .* \| rank 1: .* \| ddp adds -?[\d.]+ per step$", run)
    assert run.endswith("one process: no host read | rank 0: no host read | rank 1: no host read | ddp adds 0 per step")


def documented() -> list[str]:
    """Every bench command that docs/development.md shows, and each bench's bare command (its defaults)."""
    page = (ROOT / "docs" / "development.md").read_text().splitlines()
    shown = [line.split("#")[0].strip() for line in page if line.startswith("python -m perfsweep.bench.")]
    return shown + sorted({" ".join(command.split()[:3]) for command in shown})


def test_the_development_guide_shows_every_bench():
    shown = {command.split()[2].removeprefix("perfsweep.bench.") for command in documented()}
    assert shown == {p.stem for p in (ROOT / "bench").glob("*.py")} - {"__init__", "command", "gitrepo"}


@pytest.mark.parametrize("command", documented())
def test_each_documented_bench_command_checks_its_arguments_and_measures_nothing_in_a_dry_run(command):
    """The documented commands measure for minutes: their dry run checks them as a launch would, at once."""
    module, *args = command.split()[2:]
    out = bench(module.removeprefix("perfsweep.bench.") + ".py", *args, "--dry-run")
    assert len(out.splitlines()) == 1 and out.startswith("dry run: ")


# Two files of tests of known cost, under an empty pytest.ini: pytest's own process, not the suite's workers
# The second forks a child that pytest waits for, and one it never reaps, as Slurm's jobs are not its children: the
# test waits for that one to end (WNOWAIT: no reaping), then leaves it to the init process.
UNREAPED = """
    pid = os.fork()
    if pid == 0:
        end = time.process_time() + 0.2
        while time.process_time() < end:
            pass
        os._exit(0)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
"""
TIMED = {
    "test_waits.py": "import time\n\ndef test_waits():\n    time.sleep(2.0)\n\ndef test_quick():\n    pass\n",
    "test_works.py": "import os, time\n\ndef test_forks_a_child():\n    os.system('true')\n" + UNREAPED,
}


@pytest.mark.slow
def test_the_suite_bench_lists_the_slowest_tests_with_their_wall_and_cpu_seconds(tmp_path):
    for name, text in {**TIMED, "pytest.ini": "[pytest]\n"}.items():
        (tmp_path / name).write_text(text)
    found = ["-q", "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path)]
    out = bench("suite.py", "--top", "2", "--", *found, str(tmp_path))
    summary = next(line for line in out.splitlines() if line.startswith("suite: "))
    assert re.search(r"wall for 3 tests", summary), out
    slowest = [line.split() for line in out.splitlines() if "::" in line]
    assert [row[3].split("::")[1] for row in slowest][0] == "test_waits" and len(slowest) == 2
    assert all(float(wall) >= 0 and float(cpu) >= 0 and float(children) >= 0 for wall, cpu, children, _ in slowest)
    files = out.split("slowest test files, summed (s):\n", 1)[1].splitlines()[1:3]
    assert [line.split()[2] for line in files] == ["test_waits.py", "test_works.py"], out
    worker, machine = out.split("when its last test ended (s after the first began):\n", 1)[1].splitlines()
    assert worker.split()[3] == "main", "pytest's own process, no xdist worker"
    # the unreaped child's 0.2 CPU-seconds ran outside pytest's tree; the machine's other processes only add to it
    outside = re.fullmatch(r"machine: the \d+ CPUs it may use were busy .* outside them ([\d.]+) s \(.*\)", machine)
    assert outside and float(outside[1]) >= 0.15, machine


def test_the_suite_bench_says_what_ran_outside_pytests_processes():
    row = {"test": "t.py::a", "wall_s": 1.0, "cpu_s": 0.5, "children_cpu_s": 0.2, "worker": "gw0", "began": 0.0}
    machine = suite.report([row], 10.0, 1, suite.Machine(cpus=2, busy_s=15.0, pytest_cpu_s=11.0))[-1]
    assert machine == (
        "machine: the 2 CPUs it may use were busy 15.0 s of 20.0 (75%); pytest and the processes it waited for used "
        "11.0 s; outside them 4.0 s (Slurm's jobs, W&B's services, anything else on those CPUs)"
    )
    unread = suite.report([row], 10.0, 1, suite.Machine(cpus=2, busy_s=None, pytest_cpu_s=11.0))
    assert not unread[-1].startswith("machine:"), "no /proc/stat: nothing said"


@pytest.mark.parametrize("module", ["overhead", "syncs", "calibration"])
def test_a_bench_refuses_a_bad_override_as_a_launch_does(module):
    with pytest.raises(SystemExit) as refused:
        bench(f"{module}.py", "--dry-run", "precision=fp13")
    assert "fp13" in str(refused.value.code)


@pytest.mark.parametrize(("bias", "agree"), [(1.0, "agree"), (2.0, "DIFFER")])
def test_the_pairing_bench_sets_each_comparison_paired_beside_apart_and_sees_a_bias(bias, agree):
    """On synthetic sweeps of known truth: subclass 10% slower apart, and `bias` times that slowdown paired."""
    rng = np.random.default_rng(7)
    noise = synthetic.Noise(run_sd=0.02, step_sd=0.02, rho=0.1, bimodal=0.0, steps=20)
    levels = {"apart": synthetic.grid({"subclass": 1.1}), "paired": synthetic.grid({"subclass": 1.1**bias})}
    runs = {mode: synthetic.sweep(levels[mode], 6, noise, rng, paired=mode == "paired") for mode in levels}
    rows = {row[0]: row for row in pairing.compared(runs)}
    assert set(rows) == {"subclass vs tensor", "tensorbase vs tensor"}
    assert rows["subclass vs tensor"][3].endswith(agree) and rows["tensorbase vs tensor"][3].endswith("agree")
    assert {row[0] for row in pairing.sides(runs)} == {"subclass", "tensor", "tensorbase"}
