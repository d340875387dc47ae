"""timm parity: a sweep's runs exported in the columns of timm's benchmark result files."""

import pytest
import torch

from perfsweep import records
from perfsweep.analysis.render import text
from perfsweep.analysis.views.table import view
from perfsweep.records import load_sweep
from perfsweep.sweeps.plan import PlanError, build_plan
from perfsweep.train import checks
from perfsweep.train.step import TrainStep
from tests.helpers import TINY, launch_here, run

# The header lines of timm's own files (huggingface/pytorch-image-models, results/):
# benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv and benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv
TIMM_INFER = (
    "model,infer_img_size,infer_samples_per_sec,infer_step_time,infer_batch_size,param_count,infer_gmacs,infer_macts"
)
TIMM_TRAIN = "model,train_samples_per_sec,train_step_time,train_batch_size,train_img_size,param_count"


@pytest.mark.parametrize(("workload", "header"), [("infer_step", TIMM_INFER), ("train_step", TIMM_TRAIN)])
def test_the_timm_csv_has_timms_header_and_the_runs_figures(tiny_plan, workload, header):
    plan = tiny_plan(f"workload={workload}", "input_type=tensor", "memory_format=contiguous")
    _, summary = run(plan)
    shown = launch_here("table", str(plan.sweep_dir), "--csv", "timm")
    assert shown.returncode == 0, shown.stderr
    first, row = shown.stdout.splitlines()
    assert first == header
    cells = dict(zip(header.split(","), row.split(","), strict=True))
    kind = workload.split("_")[0]
    model = plan.runs[0].config.model
    assert cells["model"] == model.name and cells[f"{kind}_batch_size"] == str(model.batch_size)
    assert cells[f"{kind}_img_size"] == str(model.image_size)
    assert float(cells[f"{kind}_samples_per_sec"]) == pytest.approx(summary.samples_per_s, abs=0.01)
    assert float(cells[f"{kind}_step_time"]) == pytest.approx(summary.median("step"), abs=0.001)
    assert float(cells["param_count"]) == pytest.approx(summary.params / 1e6, rel=0.01)
    if kind == "infer":
        assert float(cells["infer_gmacs"]) == pytest.approx(summary.flops_per_step / 2e9 / model.batch_size, rel=0.05)


@pytest.mark.slow
def test_runs_that_differ_in_more_than_the_model_name_their_settings_after_timms_columns(tmp_path):
    runs = tmp_path / "runs"
    grid = ["workload=infer_step", "input_type=tensor", "memory_format=contiguous,channels_last", "seed=0,1"]
    args = ["model=test_resnet", *TINY[1:], *grid, "launcher=debug", "tracker.mode=disabled", f"runs_dir={runs}"]
    assert launch_here(*args).returncode == 0
    shown = launch_here("table", str(runs / "default"), "--csv", "timm")
    assert shown.returncode == 0, shown.stderr
    header, *rows = shown.stdout.splitlines()
    assert header == TIMM_INFER + ",memory_format,seed", "timm's columns first, as its files have them"
    assert sorted(row.split(",")[0] + "," + ",".join(row.split(",")[-2:]) for row in rows) == [
        "test_resnet,channels_last,0", "test_resnet,channels_last,1", "test_resnet,contiguous,0",
        "test_resnet,contiguous,1",
    ]  # fmt: skip


def test_the_timm_csv_refuses_a_sweep_of_function_benchmarks(tmp_path):
    runs = tmp_path / "runs"
    args = [
        "workload=square_chain",
        "steps=2",
        "warmup_steps=1",
        "launcher=debug",
        "tracker.mode=disabled",
        "repeats=1",
    ]
    assert launch_here(*args, f"runs_dir={runs}").returncode == 0
    shown = launch_here("table", str(runs / "default"), "--csv", "timm")
    assert shown.returncode == 2 and "one model workload (one of: infer_step, train_step)" in shown.stderr


def test_a_model_set_expands_to_a_run_per_timm_model_and_a_pattern_matching_none_names_the_nearest():
    import timm

    models = "model.name=timm:resnet1*,convnext_atto.d2_in1k"
    plan = build_plan([models, "input_type=tensor", "memory_format=contiguous", "repeats=1"])
    names = [spec.config.model.name for spec in plan.runs]
    assert sorted(names) == sorted([*timm.list_models("resnet1*"), "convnext_atto"]), "the pretrained tag is ignored"
    assert {spec.config.model.source for spec in plan.runs} == {"timm"}
    assert len({spec.name for spec in plan.runs}) == len(names), "a run (and a folder) per model"
    with pytest.raises(PlanError, match="'resnt5\\*' matches no timm model; nearest names: .*resnet5"):
        build_plan(["model.name=timm:resnt5*"])


def test_default_image_sizes_come_from_each_models_own_config():
    from timm.models import get_pretrained_cfg_value

    plan = build_plan(
        ["model.name=timm:resnet10t,test_resnet", "model.image_size=default", "input_type=tensor"]
        + ["memory_format=contiguous"]
    )
    sizes = {spec.config.model.name: spec.config.model.image_size for spec in plan.runs}
    assert sizes == {n: get_pretrained_cfg_value(n, "input_size")[-1] for n in ("resnet10t", "test_resnet")}
    assert sizes["resnet10t"] == 176, "as timm's published tables give it"
    (spec,) = build_plan(
        ["model=resnet18", "model.image_size=default", "input_type=tensor", "memory_format=contiguous", "repeats=1"]
    ).runs
    assert spec.config.model.image_size == 224 and spec.record()["config"]["model"]["image_size"] == 224
    (zero,) = build_plan(
        ["model=resnet18", "model.image_size=0", "input_type=tensor", "memory_format=contiguous", "repeats=1"]
    ).runs
    assert "model.image_size=0 must be positive" in checks.problems(zero.config), "0 is no stand-in for default"
    with pytest.raises(PlanError, match="'mobilenetv3_smal_100' is not a timm model; nearest names: mobilenetv3_small"):
        build_plan(["sweep=timm_infer_cpu", "model.name=resnet18,mobilenetv3_smal_100"])  # a typo, not a size


@pytest.mark.slow
def test_a_model_built_for_one_input_size_runs_at_the_size_asked(tmp_path):
    """timm's ViTs take the size they were built for (224 for deit_tiny_patch16_224)."""
    runs = tmp_path / "runs"
    args = ["model.source=timm", "model.name=deit_tiny_patch16_224,test_resnet", "model.image_size=64", *TINY[1:]]
    args.append("tracker.mode=disabled")
    result = launch_here(*args, "input_type=tensor", "memory_format=contiguous", "launcher=debug", f"runs_dir={runs}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert {r.fields["model.name"]: r.state for r in load_sweep(runs / "default")} == {
        "deit_tiny_patch16_224": "done", "test_resnet": "done"
    }  # fmt: skip


@pytest.mark.slow
def test_an_out_of_memory_retries_with_a_smaller_batch_and_records_it(tiny_plan, monkeypatch):
    """No GPU to fill here: the step raises torch's out-of-memory error above a batch of 2, as a full GPU would."""
    step = TrainStep.step

    def full_above_two(self, index, clock):
        if self.cfg.model.batch_size > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
        return step(self, index, clock)

    monkeypatch.setattr(TrainStep, "step", full_above_two)
    args = ["input_type=tensor", "memory_format=contiguous", "tracker.mode=disabled", "model.batch_size=8"]
    failed = tiny_plan(*args, "sweep_name=asked")
    with pytest.raises(torch.OutOfMemoryError):
        run(failed)  # off by default: it changes what is measured
    plan = tiny_plan(*args, "model.batch_size_retry=true")
    run_dir, summary = run(plan)
    assert summary.batch_size == 2, "8 -> 6 -> 4 -> 3 -> 2, timm's decay_batch_step"
    assert records.read_json(run_dir / records.CONFIG)["config"]["model"]["batch_size"] == 8, "what was asked"
    assert f"BATCH REDUCED {run_dir.name}: ran at batch 2, not 8" in text(view(plan.sweep_dir))
    shown = launch_here("table", str(plan.sweep_dir), "--csv", "timm")
    assert shown.stdout.splitlines()[1].split(",")[3] == "2", "timm's train_batch_size: the batch it ran at"
