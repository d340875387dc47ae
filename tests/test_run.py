"""Real short runs on the CPU: records, per-step rows, output types, failures, and what W&B got."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from perfsweep import records
from perfsweep.sweeps.plan import build_plan
from perfsweep.train import reference
from perfsweep.train.step import TrainStep
from perfsweep.train.timing import NoClock
from perfsweep.train.window import make_workload
from tests.helpers import DEVICE, ROOT, TINY, input_types, output_type, run, wandb_records

PHASES = TrainStep.phases
PHASE_KEYS = [f"{p}_ms" for p in (*PHASES, "step")] + [f"{p}_host_ms" for p in (*PHASES, "step")]


# What torch's own code reads of TF32 (Inductor's autotuning and lightning-fabric's peaks: the legacy getters;
# Inductor's Triton convolutions: cuDNN's fp32_precision) and what a run records (the conv and matmul ones), read
# in a fresh process as a run's.
TF32_GETTERS = """
import json, sys, torch
from perfsweep.conf.schema import PrecisionConf
from perfsweep.train.precision import set_tf32
set_tf32(PrecisionConf(name=sys.argv[1], tf32=sys.argv[1] == "tf32"))
b = torch.backends
print(json.dumps([torch.get_float32_matmul_precision(), b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32,
                  b.cuda.matmul.fp32_precision, b.cudnn.fp32_precision, b.cudnn.conv.fp32_precision,
                  b.cudnn.rnn.fp32_precision]))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        ("tf32", ["high", True, True, "tf32", "tf32", "tf32", "tf32"]),
        ("fp32", ["highest", False, False, "ieee", "ieee", "ieee", "ieee"]),
    ],
)
def test_tf32_is_set_so_that_every_getter_of_either_api_agrees(precision, expected):
    """torch 2.9+ raises on a legacy getter whose flag disagrees with the fp32_precision API's: a run that set
    the new API alone left `get_float32_matmul_precision()` raising in tf32 (Inductor's max-autotune reads it)."""
    found = subprocess.run([sys.executable, "-c", TF32_GETTERS, precision], cwd=ROOT, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr[-2000:]
    assert json.loads(found.stdout.splitlines()[-1]) == expected


@pytest.fixture(scope="module", params=input_types())
def real_run(request, tmp_path_factory) -> tuple[Path, Any, str]:
    """One real run of each input type (the test model, channels_last, W&B off): its folder, summary and type."""
    runs_dir = tmp_path_factory.mktemp("runs")
    overrides = [f"input_type={request.param}", "memory_format=channels_last", "tracker.mode=disabled"]
    run_dir, summary = run(build_plan([*TINY, f"runs_dir={runs_dir}", *overrides]))
    return run_dir, summary, request.param


@pytest.mark.slow
def test_a_real_run_ends_done_with_the_config_it_ran(real_run):
    run_dir, _, input_type = real_run
    assert records.read_status(run_dir).state == "done"
    config = records.read_json(run_dir / records.CONFIG)
    assert config["axes"]["input_type"] == input_type
    assert config["config"]["model"]["name"] == "tiny_cnn"


def test_a_real_run_records_its_machine_and_backend_settings(real_run):
    env = records.read_json(real_run[0] / records.ENV)
    assert env["packages"]["torch"] and env["cpu"]
    assert env["device"].startswith(DEVICE)
    assert env["backend"]["cudnn_conv_fp32_precision"] == "ieee"
    assert env["backend"]["cudnn_benchmark"] is True


def test_a_real_run_records_every_step_with_each_phase(real_run):
    steps = records.read_steps(real_run[0] / records.STEPS).to_pylist()
    assert [r["step"] for r in steps] == [0, 1, 2, 3]
    assert [r["warmup"] for r in steps] == [True, False, False, False]
    assert all(r[k] > 0 for r in steps for k in PHASE_KEYS)


def test_a_real_runs_summary_is_what_it_wrote_and_the_median_of_its_measured_steps(real_run):
    run_dir, summary, input_type = real_run
    steps = records.read_steps(run_dir / records.STEPS).to_pylist()
    assert summary.to_json() == records.read_json(run_dir / records.SUMMARY)
    assert summary.steps == 3
    assert summary.median("step") == sorted(r["step_ms"] for r in steps[1:])[1]
    assert summary.samples_per_s > 0 and summary.peak_memory_mib > 0
    assert summary.output_type == output_type(input_type)


def test_a_real_run_records_its_timer_its_syncs_what_ran_beside_it_and_the_machine_s_speed(real_run):
    summary = real_run[1]
    assert summary.neighbours["end"]["loadavg"]
    workload = summary.reference["workload"]
    assert workload.startswith(f"matmul {reference.SIZE[DEVICE]}x") and summary.reference["ms"] > 0
    assert workload.endswith(f", fastest of {reference.TIMED}"), workload
    if DEVICE == "cpu":
        assert summary.timer == "perf_counter" and summary.host_syncs_per_step is None
        assert summary.neighbours["start"]["gpu_processes"] is None
    else:  # on a GPU (scripts/gpu-check tests): device time from events, and the timed loop makes no sync
        assert summary.timer == "cuda_event" and summary.host_syncs_per_step == 0


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["amp_fp16", "amp_bf16"])
def test_amp_runs(tiny_plan, precision):
    run_dir, summary = run(tiny_plan(f"precision={precision}", "input_type=tensor", "memory_format=contiguous"))
    losses = [r["loss"] for r in records.read_steps(run_dir / records.STEPS).to_pylist()]
    assert losses and all(math.isfinite(loss) and loss > 0 for loss in losses), "losses must be finite numbers"


@pytest.mark.slow
def test_the_model_learns(tiny_plan):
    _, summary = run(
        tiny_plan("input_type=tensor", "memory_format=contiguous", "steps=12", "data_batches=1", "optim.lr=0.05")
    )
    assert summary.loss_last < summary.loss_first


@pytest.mark.slow
def test_wandb_offline_run_holds_every_step(tiny_plan):
    run_dir, _ = run(tiny_plan("input_type=subclass", "memory_format=contiguous", "tracker.mode=offline"))
    logged = wandb_records(run_dir)
    history = [r["history"]["item"] for r in logged if r["type"] == "history"]
    assert [h["step"] for h in history] == [0, 1, 2, 3]
    assert [h["warmup"] for h in history] == [True, False, False, False]
    assert all(h[k] > 0 for h in history[1:] for k in PHASE_KEYS)
    # the warm-up step's figures apart, so that a chart of a phase shows the measured steps alone
    assert all(history[0][f"warmup/{k}"] > 0 and k not in history[0] for k in PHASE_KEYS)
    (run_record,) = [r["run"] for r in logged if r["type"] == "run"]
    config = json.dumps(run_record["config"])
    assert "input_type.name" in config and "subclass" in config
    assert records.read_status(run_dir).warnings == ()


def test_wandb_disabled_writes_no_wandb_files(tiny_plan):
    run_dir, _ = run(tiny_plan("input_type=tensor", "memory_format=contiguous", "tracker.mode=disabled"))
    assert not (run_dir / "wandb").exists()
    assert records.read_status(run_dir).state == "done"


@pytest.mark.slow
def test_a_failing_run_records_the_error_and_raises(tiny_plan):
    with pytest.raises(ValueError, match="is not a perfsweep model"):
        run(
            tiny_plan("model.name=no_such_net", "input_type=tensor", "memory_format=contiguous", "tracker.mode=offline")
        )
    (run_dir,) = [p.parent for p in tiny_plan("input_type=tensor").sweep_dir.glob("*/status.json")]
    status = records.read_status(run_dir)
    assert status.state == "failed"
    assert status.error.type == "ValueError"
    assert "no_such_net" in status.error.message and "Traceback" in status.error.traceback
    assert not (run_dir / records.STEPS).exists()
    logged = wandb_records(run_dir)
    assert [r["exit"]["exit_code"] for r in logged if r["type"] == "exit"] == [1]
    updates = [r["summary"]["update"] for r in logged if r["type"] == "summary"]
    assert any(
        u.get("error") == "ValueError" and u.get("state") == "failed" and "no_such_net" in u["error_message"]
        for u in updates
    )
    assert not [r for r in logged if r["type"] == "history"]


@pytest.mark.slow
def test_compiled_run(tiny_plan):
    run_dir, summary = run(
        # aot_eager: the compile path without inductor's C++ build, which takes most of a minute on a CPU
        tiny_plan(
            "compile=default",
            "compile.backend=aot_eager",
            "warmup_steps=2",
            "input_type=tensor",
            "memory_format=contiguous",
        )
    )
    assert records.read_status(run_dir).state == "done" and summary.steps == 3


@pytest.mark.gpu
def test_cuda_run_uses_events_and_records_the_gpu(tiny_plan):
    run_dir, summary = run(
        tiny_plan("device=cuda", "precision=amp_fp16", "input_type=subclass", "memory_format=channels_last")
    )
    env = records.read_json(run_dir / records.ENV)
    assert env["gpu"]["name"] and env["cuda"]
    assert summary.timer == "cuda_event" and summary.host_syncs_per_step >= 1
    assert summary.peak_memory_kind == "cuda_max_allocated"
    assert summary.flops_per_step > 0 and (summary.mfu is None or 0 < summary.mfu < 1)
    if shutil.which("nvidia-smi"):  # the driver's tools, and its NVML library with them
        assert isinstance(summary.neighbours["start"]["gpu_processes"], list)
        assert {summary.clocks[when]["source"] for when in ("start", "end")} == {"gpu_sm_clock"}
        assert summary.clocks["start"]["mhz"] > 0


@pytest.mark.parametrize("input_type", input_types())
def test_an_inference_step_records_no_grad_in_eval_mode_and_the_subclass_still_spreads(tiny_plan, input_type):
    (spec,) = tiny_plan("workload=infer_step", f"input_type={input_type}", "memory_format=channels_last").runs
    work = make_workload(spec.config, torch.device(DEVICE))
    for index in range(2):
        assert work.step(index, NoClock()) is None, "no loss: nothing to read back"
    model = work.trainer.model
    assert not model.training and all(p.grad is None for p in model.parameters())
    assert work.summary(1.0)["output_type"] == output_type(input_type)


def test_an_inference_run_times_data_and_forward_alone(tiny_plan):
    plan = tiny_plan("workload=infer_step", "input_type=subclass", "memory_format=contiguous")
    run_dir, summary = run(plan)
    assert summary.phases == ("data", "forward") and summary.loss_last is None and summary.samples_per_s > 0
    columns = set(records.read_steps(run_dir / records.STEPS).column_names)
    assert {"data_ms", "forward_ms", "step_ms"} <= columns and "backward_ms" not in columns and "loss" not in columns
    assert set(records.read_json(run_dir / records.CONFIG)["axes"]) == {
        "model", "memory_format", "precision", "input_type", "compile"
    }  # fmt: skip
