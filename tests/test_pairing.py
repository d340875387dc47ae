"""Paired runs (pairing=auto): the sides of a comparison measured in one process, in alternating blocks."""

import collections
import dataclasses
import re
import time

import numpy as np
import pytest
import submitit
import torch

from perfsweep import records
from perfsweep.analysis.groups import baselines, configurations, in_one_process, speedups
from perfsweep.analysis.statistics.speedup import IN_PROCESS
from perfsweep.conf.schema import LauncherConf
from perfsweep.launcher.backends import JobShape
from perfsweep.launcher.backends.local import START_MIN, LocalSpawn
from perfsweep.launcher.backends.slurm import Slurm
from perfsweep.launcher.run_job import RunJob, Runner, RunTimeout, execute_run
from perfsweep.records import lifecycle
from perfsweep.sweeps import pairing
from perfsweep.sweeps.pairing import groups
from perfsweep.sweeps.plan import PlanError
from perfsweep.train import instrumented as run_module
from perfsweep.train.instrumented import execute_sides
from perfsweep.train.paired import PairingError, block_order, block_sizes
from tests import synthetic
from tests.helpers import TINY, launch_here

SIDES = ["input_type=tensor,subclass", "memory_format=contiguous,channels_last"]


def test_the_blocks_run_in_rounds_of_every_side_in_a_balanced_order():
    for sides in (2, 3, 4):
        for seed in range(30):
            order = block_order(sides, 10, seed)
            rounds = [order[i : i + sides] for i in range(0, len(order), sides)]
            assert all(sorted(r) == list(range(sides)) for r in rounds) and len(rounds) == 10
            if sides == 2:  # A B, B A: each first in half the rounds, each following itself as often
                assert rounds[1::2] == [r[::-1] for r in rounds[::2]]
            else:  # never twice in a row: a middle side would never follow itself while the outer ones do
                assert all(a != b for a, b in zip(order, order[1:], strict=False))
    firsts = {tuple(block_order(3, 1, seed)) for seed in range(20)}
    assert len(firsts) > 1 and all(block_order(3, 4, s) == block_order(3, 4, s) for s in range(5))
    starts = [block_order(3, 1, seed)[0] for seed in range(300)]
    assert all(60 < starts.count(side) < 140 for side in range(3))
    assert block_order(1, 3, seed=0) == [0, 0, 0]


def test_a_sides_steps_are_split_into_blocks_none_empty():
    assert block_sizes(10, 4) == [3, 3, 2, 2]
    assert block_sizes(3, 10) == [1, 1, 1]
    assert block_sizes(30, 10) == [3] * 10


def test_each_round_of_the_sweeps_comparisons_is_one_process_of_their_sides(tiny_plan):
    """Both axes are compared (input_type against tensor, memory_format against contiguous): a round's four
    configurations are the sides of one process, so every comparison's ratio is a process's own."""
    plan = tiny_plan(*SIDES, "repeats=2", "pairing=auto")
    found = groups(list(plan.runs))
    assert len(found) == 2 and all(group.paired for group in found)
    for group in found:
        sides = sorted((spec.axes["input_type"], spec.axes["memory_format"]) for spec in group.runs)
        assert sides == sorted((t, f) for t in ("tensor", "subclass") for f in ("contiguous", "channels_last"))
        assert len({spec.config.replicate for spec in group.runs}) == 1


def test_a_precision_axis_pairs_its_sides_and_is_compared_with_fp32(tiny_plan):
    plan = tiny_plan("precision=fp32,amp_bf16", "input_type=tensor", "memory_format=contiguous", "repeats=2")
    assert {spec.config.baselines["precision"] for spec in plan.runs} == {"fp32"}
    found = groups(list(plan.runs))
    assert len(found) == 2 and all(group.paired for group in found)
    assert [sorted(spec.axes["precision"] for spec in group.runs) for group in found] == [["amp_bf16", "fp32"]] * 2


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ([*SIDES[:1], "pairing=process"], "pairing=process"),
        (["workload=square_chain", "workload.impl=eager,scripted", "pairing=auto"], "differ in impl"),
    ],
)
def test_sides_that_cannot_share_a_process_run_apart_and_say_why(tiny_plan, overrides, why):
    found = groups(list(tiny_plan(*overrides).runs))
    assert found and all(not group.paired and why in group.apart for group in found)


@pytest.mark.parametrize(
    ("overrides", "axis", "wide", "why"),
    [
        (["input_type=tensor,subclass,fastai_tensorbase"], "input_type", "fastai_tensorbase", "patches torch"),
        (["input_type=tensor,subclass,tensorimage"], "input_type", "tensorimage", "patches torch"),
        (["input_type=tensor", "precision=fp32,amp_bf16,tf32", "workload.baseline.axis=precision",
          "workload.baseline.value=fp32"], "precision", "tf32", "TF32 switches"),
    ],
)  # fmt: skip
def test_a_side_that_sets_process_wide_state_runs_alone_and_the_others_still_pair(
    tiny_plan, overrides, axis, wide, why
):
    plan = tiny_plan(*overrides, "memory_format=contiguous", "pairing=auto")
    paired, alone = groups(list(plan.runs))
    assert paired.paired and wide not in {spec.axes[axis] for spec in paired.runs} and len(paired.runs) == 2
    assert [spec.axes[axis] for spec in alone.runs] == [wide]
    assert why in alone.apart and not alone.paired


def test_sides_that_set_the_same_process_wide_state_share_a_process(tiny_plan):
    plan = tiny_plan("input_type=fastai_tensorbase,tensorimage", "memory_format=contiguous", "pairing=auto",
                     "workload.baseline.value=fastai_tensorbase")  # fmt: skip
    (group,) = groups(list(plan.runs))
    assert group.paired and len(group.runs) == 2


@pytest.mark.slow
def test_a_paired_process_records_each_side_as_a_run_with_its_blocks(tiny_plan, tmp_path):
    plan = tiny_plan(
        "input_type=tensor,subclass,tensorbase",
        "memory_format=contiguous",
        "steps=4",
        "blocks=2",
        "pairing=auto",
        "tracker.mode=disabled",
    )
    (group,) = groups(list(plan.runs))
    sides = [(spec, tmp_path / spec.name, f"id{index}") for index, spec in enumerate(group.runs)]
    began = time.time()
    summaries = execute_sides(sides, {"ready_since": began})
    wall = time.time() - began
    names = [spec.name for spec in group.runs]
    for index, ((_, run_dir, _), summary) in enumerate(zip(sides, summaries, strict=True)):
        assert records.read_status(run_dir).state == records.DONE
        assert summary.paired.sides == names and summary.paired.side == index
        assert summary.peak_memory_kind == "process_max_rss_all_sides"  # the process's, not this side's own
        rows = records.read_steps(run_dir / records.STEPS).to_pylist()
        steps = [row["step"] for row in rows if not row["warmup"]]
        assert steps == [1, 2, 3, 4]  # after its one warm-up step, in order, across its blocks
    counted = {records.read_status(run_dir).timing["counted_s"] for _, run_dir, _ in sides}
    assert len(counted) == len(sides)  # each side's own bookkeeping, not the last side's
    timings = [records.read_status(run_dir).timing for _, run_dir, _ in sides]
    parts = ("startup_s", "warmup_s", "window_s", "records_s")
    # each second of the process is one side's: no side's start-up or records hold another side's time
    assert sum(t[part] for t in timings for part in parts) <= wall
    order = summaries[0].paired.blocks
    assert collections.Counter(order) == {0: 2, 1: 2, 2: 2} and order[2] != order[3]
    assert len({summary.reference["ms"] for summary in summaries}) == 1, "the machine's speed, timed once a process"


@pytest.mark.slow
def test_a_paired_launch_runs_a_process_per_round_and_its_ratios_are_per_process(paired_sweep):
    """Three input types by two memory formats, two rounds: each round's six configurations in one process."""
    loaded = records.load_sweep(paired_sweep)
    by_process = collections.defaultdict(set)
    for run in loaded:
        by_process[run.status.pid].add(run.name)
    assert len(loaded) == 12 and sorted(map(len, by_process.values())) == [6, 6]
    rounds = [{run.fields["seed"] for run in loaded if run.name in names} for names in by_process.values()]
    assert all(len(seeds) == 1 for seeds in rounds), "a process holds one round"
    found = speedups(loaded)
    assert len(found) == 7, "each subclass against tensor, each channels_last against contiguous"
    assert all(speedup.basis == IN_PROCESS and speedup.runs == (2, 2) for _, speedup in found)


@pytest.mark.slow
def test_a_precision_sweep_prints_each_precisions_speed_up_over_fp32_with_its_word(tmp_path):
    args = [*TINY, "precision=fp32,amp_bf16", "input_type=tensor", "memory_format=contiguous", "repeats=2"]
    done = launch_here(*args, "tracker.mode=disabled", f"runs_dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    assert "pairing: 4 runs as 2 processes of a comparison's sides" in done.stdout
    header, _, *rows = first_table(done.stdout)
    vs = header.index("vs fp32")
    cells = {row[0]: row[vs] for row in rows if row[0] in ("fp32", "amp_bf16")}
    assert cells["fp32"] == "1.00x"
    assert re.fullmatch(r"\S+x \[\S+, \S+\] (slower|faster|same|undetermined)", cells["amp_bf16"]), cells
    assert "precision.autocast_dtype" not in header


def first_table(text: str) -> list[list[str]]:
    """The cells of the first Markdown table in `text`, a list per line."""
    found = []
    for line in text.splitlines():
        if line.startswith("|"):
            found.append([cell.strip() for cell in line.split("|")[1:-1]])
        elif found:
            break
    return found


FLIPPING = '''
import torch


class Flipping(torch.Tensor):
    """An input type that sets a process-wide switch in every operation it takes part in."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        torch.backends.cudnn.deterministic = True
        return super().__torch_function__(func, types, args, kwargs or {})
'''


def test_a_side_that_changes_process_wide_state_fails_every_side_naming_it(tiny_plan, tmp_path, monkeypatch):
    (tmp_path / "flipping.py").write_text(FLIPPING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    plan = tiny_plan("input_type=tensor", "memory_format=contiguous", "pairing=auto")
    tensor = plan.runs[0]
    flipping = dataclasses.replace(
        tensor,
        config=dataclasses.replace(
            tensor.config,
            input_type=dataclasses.replace(tensor.config.input_type, name="flip", _target_="flipping.Flipping"),
        ),
    )
    sides = [(spec, tmp_path / spec.name, spec.name) for spec in (tensor, flipping)]
    with pytest.raises(PairingError, match=f"side {flipping.name} changed process-wide state"):
        execute_sides(sides, {})
    for _, run_dir, _ in sides:
        status = records.read_status(run_dir)
        assert status.state == records.FAILED and "cudnn_deterministic from False to True" in status.error.message


def test_a_side_that_cannot_warm_up_fails_alone_and_the_others_are_measured(tiny_plan, tmp_path, monkeypatch):
    (tmp_path / "refusing.py").write_text("def refuse(batch):\n    raise ValueError('this batch is not mine')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = tiny_plan("input_type=tensor,subclass", "memory_format=contiguous", "pairing=auto")
    tensor, subclass = plan.runs
    refusing = dataclasses.replace(
        tensor,
        config=dataclasses.replace(
            tensor.config,
            input_type=dataclasses.replace(tensor.config.input_type, name="refuse", _target_="refusing.refuse"),
        ),
    )
    sides = [(spec, tmp_path / spec.name, spec.name) for spec in (tensor, refusing, subclass)]
    summaries = execute_sides(sides, {})
    assert (
        summaries[1] is None
        and [s.paired.sides for s in (summaries[0], summaries[2])] == [[tensor.name, subclass.name]] * 2
    )
    states = [records.read_status(run_dir) for _, run_dir, _ in sides]
    assert [status.state for status in states] == [records.DONE, records.FAILED, records.DONE]
    assert "this batch is not mine" in states[1].error.message and "refuse" in states[1].error.traceback


def test_a_paired_sides_blocks_are_one_or_more(tiny_plan):
    with pytest.raises(PlanError, match="blocks=0 must be 1 or more"):
        tiny_plan("blocks=0")


def test_a_function_benchmarks_comparison_holds_the_impls_of_one_size(tiny_plan):
    plan = tiny_plan("workload=square_chain", "workload.impl=eager,scripted", "workload.size=8,16", "pairing=auto")
    found = groups(list(plan.runs))
    assert sorted(len(group.runs) for group in found) == [2, 2]
    assert all(len({spec.config.workload.size for spec in group.runs}) == 1 for group in found)


def test_a_job_of_paired_runs_has_each_sides_time_limit(tmp_path):
    conf = LauncherConf(name="slurm", timeout_min=10)
    slurm = submitit.SlurmExecutor(folder=tmp_path)
    Slurm(conf).shape(slurm, JobShape(None, None, False, sides=3))
    assert slurm.parameters["time"] == 30
    local = LocalSpawn(dataclasses.replace(conf, name="local"))
    executor = local.executor(tmp_path, "job")
    alone = executor.parameters["timeout_min"]
    local.shape(executor, JobShape(None, None, False, sides=3))
    assert executor.parameters["timeout_min"] - START_MIN == pytest.approx(3 * (alone - START_MIN))


def test_in_process_refuses_sides_that_cannot_share_one_naming_the_axis(tiny_plan):
    with pytest.raises(PlanError, match=r"pairing=in_process: 2 runs .*differ in impl"):
        tiny_plan("workload=square_chain", "workload.impl=eager,scripted", "workload.size=64", "pairing=in_process")
    with pytest.raises(PlanError, match=r"pairing=in_process: 1 run .*fastai") as refused:
        tiny_plan("input_type=tensor,fastai_tensorbase", "memory_format=contiguous", "pairing=in_process", "repeats=1")
    assert "1 run cannot share a process with their comparison's other sides: no other side" in str(refused.value)
    (group,) = groups(list(tiny_plan(*SIDES[:1], "pairing=in_process").runs))
    assert group.paired and len(group.runs) == 4, "two input types by the default sweep's two memory formats"


def test_a_compile_mode_that_records_cuda_graphs_runs_alone_on_a_gpu(tiny_plan):
    overrides = ["input_type=tensor", "memory_format=contiguous", "compile=eager,reduce_overhead,default"]
    overrides += ["workload.baseline.axis=compile", "workload.baseline.value=eager", "pairing=auto"]
    paired, alone = groups(list(tiny_plan(*overrides, "device=cuda").runs))
    assert [s.axes["compile"] for s in paired.runs] == ["eager", "default"] and "CUDA graphs" in alone.apart
    (everything,) = groups(list(tiny_plan(*overrides, "device=cpu").runs))  # a CPU records no CUDA graph
    assert everything.paired and len(everything.runs) == 3


def test_a_cuda_graph_mode_on_a_cpu_says_what_it_compiles_as(tiny_plan):
    overrides = ["input_type=tensor", "memory_format=contiguous", "compile=eager,reduce_overhead", "repeats=1"]
    said = (
        "compile=reduce_overhead runs on a CPU here: Inductor records no CUDA graphs on one, so mode reduce-overhead "
        "compiles as default does"
    )
    assert said in tiny_plan(*overrides, "device=cpu").notices
    assert not any("CUDA graphs" in notice for notice in tiny_plan(*overrides, "device=cuda").notices)


@pytest.mark.parametrize("device_file", ["/dev/nvidia0", "/dev/kfd", "/dev/dxg"])
def test_a_host_s_gpu_is_seen_by_its_device_file(monkeypatch, device_file):
    """NVIDIA's, AMD's compute interface, and WSL 2's, which gives CUDA without /dev/nvidia0."""
    monkeypatch.setattr(pairing.Path, "exists", lambda path: str(path) == device_file)
    pairing.host_has_gpu.cache_clear()
    try:
        assert pairing.host_has_gpu()
        monkeypatch.setattr(pairing.Path, "exists", lambda path: False)
        pairing.host_has_gpu.cache_clear()
        assert not pairing.host_has_gpu(), "no device file: no GPU"
    finally:
        pairing.host_has_gpu.cache_clear()


@pytest.mark.parametrize("gpu", [False, True])
def test_device_auto_records_cuda_graphs_only_where_the_launch_s_host_has_a_gpu(tiny_plan, monkeypatch, gpu):
    monkeypatch.setattr(pairing, "host_has_gpu", lambda: gpu)
    overrides = ["input_type=tensor", "memory_format=contiguous", "compile=eager,max_autotune", "device=auto"]
    overrides += ["workload.baseline.axis=compile", "workload.baseline.value=eager", "pairing=auto"]
    found = groups(list(tiny_plan(*overrides, "launcher=local").runs))
    assert len(found) == (2 if gpu else 1), "max-autotune records CUDA graphs on a GPU alone"
    assert len(groups(list(tiny_plan(*overrides, "launcher=slurm", "launcher.max_array_size=8").runs))) == 2, (
        "a Slurm job's node may have a GPU"
    )


def test_a_time_limit_in_a_sides_warm_up_stops_the_whole_process(tiny_plan, tmp_path, monkeypatch):
    plan = tiny_plan("input_type=tensor,subclass", "memory_format=contiguous", "pairing=auto")
    sides = [(spec, tmp_path / spec.name, spec.name) for spec in plan.runs]

    warm_up = run_module.warmed_up
    calls = []

    def limit_reached(*args):  # in the second side's warm-up, after the first side's
        calls.append(args)
        if len(calls) == 2:
            raise RunTimeout("the run reached its time limit")
        return warm_up(*args)

    monkeypatch.setattr(run_module, "warmed_up", limit_reached)
    with pytest.raises(RunTimeout):
        execute_sides(sides, {})
    assert {records.read_status(run_dir).error.type for _, run_dir, _ in sides} == {"RunTimeout"}


def test_sides_of_two_processes_are_not_read_as_one_process():
    noise = synthetic.Noise(run_sd=0.05, side_sd=0.005, step_sd=0.03, rho=0.0, bimodal=0.0, steps=10)
    runs = synthetic.sweep(synthetic.grid(), 4, noise, np.random.default_rng(1), paired=True)
    configs = configurations(runs)
    (subclass,) = (
        c for c in configs if c.first.axes["input_type"] == "subclass" and c.first.axes["memory_format"] == "contiguous"
    )
    base = baselines(configs)["input_type"][subclass.key]
    assert in_one_process(subclass, base)
    again = subclass.runs[0]  # measured again, alone, after its process: the other side still names it
    paired = dataclasses.replace(again.summary.paired, process="another")
    subclass.runs[0] = dataclasses.replace(again, summary=dataclasses.replace(again.summary, paired=paired))
    assert not in_one_process(subclass, base)


def test_a_requeued_process_measures_only_the_sides_not_yet_done(tiny_plan, tmp_path):
    plan = tiny_plan("input_type=tensor,subclass,tensorbase", "memory_format=contiguous", "pairing=auto")
    lead, *others = [RunJob(spec, tmp_path / spec.name, spec.name, 1) for spec in plan.runs]
    run = dataclasses.replace(lead, sides=tuple(others))
    for side in run.every:
        side.run_dir.mkdir()
    lifecycle.start(others[0].run_dir)
    lifecycle.finish(others[0].run_dir)  # done by the process before the requeue
    measured = []
    runner = Runner(execute=None, execute_sides=lambda sides, launch: measured.append([s[0].name for s in sides]))
    assert execute_run(runner, run, {}) is None
    assert measured == [[lead.spec.name, others[1].spec.name]]
