"""FLOPs counted per step against a hand count, and utilization only where the device's peak is known; the runs
that count none, and the import of torch._dynamo that only counting or training runs need."""

import warnings

import pytest
import torch

from perfsweep import records
from perfsweep.analysis.render import text
from perfsweep.analysis.views import published, published_models
from perfsweep.analysis.views.table import view
from perfsweep.bench.gitrepo import SLEEP
from perfsweep.sweeps.plan import build_plan
from perfsweep.train import user_targets
from perfsweep.train.fastai_loop import MODULES as FASTAI_MODULES
from perfsweep.train.flops import count_flops, peak_flops
from perfsweep.train.instrumented import lazy_imports
from perfsweep.train.own_models import TinyCNN
from tests.helpers import TINY, run


def test_a_linear_layer_counts_what_a_hand_count_gives():
    layer, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    assert count_flops(lambda: layer(x)) == 2 * 2 * 4 * 3  # 2 FLOPs (multiply, add) per MAC
    # backward: the weight's gradient, as many FLOPs as the forward (x needs none); with x's too, twice
    assert count_flops(lambda: layer(x).sum().backward()) == 2 * (2 * 2 * 4 * 3)
    x.requires_grad_()
    assert count_flops(lambda: layer(x).sum().backward()) == 3 * (2 * 2 * 4 * 3)


def test_a_compiled_model_counts_as_its_eager_self_without_a_warning():
    model, x = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)), torch.randn(2, 4)
    compiled = torch.compile(model, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # what a run would print to its log
        assert count_flops(lambda: compiled(x)) == count_flops(lambda: model(x)) == 2 * 2 * (4 * 3 + 3 * 2)


def test_a_convolution_counts_what_a_hand_count_gives():
    conv, x = torch.nn.Conv2d(3, 8, 3, padding=1), torch.randn(1, 3, 8, 8)
    assert count_flops(lambda: conv(x)) == 2 * (8 * 8 * 8) * (3 * 3 * 3)  # 2 x outputs x MACs per output


def test_perfsweeps_tiny_cnn_counts_what_a_hand_count_gives():
    model, x = TinyCNN(num_classes=10), torch.randn(2, 3, 32, 32)
    per_image = 16 * 16 * 8 * 3 * 3 * 3 + 8 * 8 * 16 * 8 * 3 * 3 + 16 * 10  # MACs: two convolutions, the classifier
    assert count_flops(lambda: model(x)) == 2 * 2 * per_image  # 2 images, 2 FLOPs (multiply, add) per MAC


def test_a_function_benchmark_counts_no_flops_and_its_job_imports_no_dynamo(tiny_plan):
    """Its ops are elementwise: the counter would say 0 after importing torch._dynamo and a slow step under it."""
    plan = tiny_plan("workload=pairwise_sum_prod", "workload.size=10")
    run_dir, summary = run(plan)
    assert summary.flops_per_step is None and summary.tflops_per_s is None
    assert records.read_json(run_dir / records.SUMMARY)["flops_per_step"] is None
    assert "torch._dynamo" not in lazy_imports(plan.runs)
    compiled = build_plan(["workload=pairwise_sum_prod", "workload.impl=broadcast", "compile=default", "repeats=1"])
    assert "torch._dynamo" in lazy_imports(compiled.runs), "a compiled run imports it"
    nested = build_plan(["workload=nested", "workload.impl=python", "repeats=1"])
    assert "torch._dynamo" in lazy_imports(nested.runs), "its jagged NestedTensor imports it"


WAITS = SLEEP.format(ms=1)  # a step of the user's own that says it counts no FLOPs (bench/gitrepo.py)


def test_a_step_of_the_users_that_says_it_counts_no_flops_is_not_counted_and_its_job_imports_no_dynamo(
    tiny_plan, user_module
):
    """A wait has no FLOPs to count: its step says so, and its runs skip the counter and its import of Dynamo."""
    user_module("waits", WAITS)
    plan = tiny_plan("workload._target_=waits.Step")
    assert "torch._dynamo" not in lazy_imports(plan.runs)
    run_dir, summary = run(plan)
    assert summary.flops_per_step is None and records.read_json(run_dir / records.SUMMARY)["flops_per_step"] is None
    user_module("counted", WAITS.replace("counts_flops = False", "counts_flops = True"))
    assert "torch._dynamo" in lazy_imports(tiny_plan("workload._target_=counted.Step").runs), "counted, as by default"


def test_a_counts_flops_that_is_not_true_or_false_is_refused_naming_it(tiny_plan, user_module):
    user_module("unsure", WAITS.replace("counts_flops = False", 'counts_flops = "False"'))
    (spec,) = tiny_plan("workload._target_=unsure.Step").runs
    said = "its counts_flops is 'False', not True or False"
    assert any(said in problem for problem in user_targets.problems(spec.config)), user_targets.problems(spec.config)


def test_a_tiny_cnn_run_imports_dynamo_for_its_count_and_no_model_zoo(tiny_plan):
    imports = lazy_imports(tiny_plan().runs)
    assert "torch._dynamo" in imports and not {"timm", "torchvision"} & set(imports)


def test_a_model_of_the_user_s_own_is_imported_ahead_and_no_model_zoo_with_it(tiny_plan, imagelib):
    """model.source keeps its default, torchvision, beside a model of the user's own: it builds nothing."""
    imports = set(lazy_imports(tiny_plan("model=imagelib.models.SmallCNN").runs))
    assert "imagelib.models" in imports and not {"timm", "torchvision"} & imports


def test_a_job_imports_pandas_ahead_of_its_runs_only_for_w_and_bs_summary(tiny_plan):
    """Step files are written and read without pandas (records/columns.py); W&B's summary imports it."""
    assert "pandas" not in lazy_imports(tiny_plan().runs)
    assert {"wandb", "pandas"} <= set(lazy_imports(tiny_plan("tracker.mode=offline").runs))


def test_a_job_imports_ahead_of_its_runs_the_fastai_modules_each_of_them_imports():
    """Each part of fastai's a run reads imports its module; fastai's loop imports more of fastai.
    fastai patches torch as it is imported: a job imports only what each of its runs would, and nothing for a step of
    the user's own, which may or may not import fastai."""
    parts = ("fastai.torch_core", "fastai.losses", "fastai.optimizer")
    expected = {
        "loss=fastai": {"fastai.losses"},
        "optim=fastai": {"fastai.optimizer"},
        "input_type=tensorimage": {"fastai.torch_core"},
        "input_type=fastai_tensorbase loss=fastai optim=fastai": set(parts),
        "workload=fastai_step": set(FASTAI_MODULES),
        "input_type=tensorimage workload=train_step,fastai_step": {"fastai.torch_core"},
        "input_type=tensorimage,tensor": set(),
        "input_type=tensorimage loss=fastai optim=fastai workload=pairwise_sum_prod": set(),
        "input_type=tensorimage loss=fastai optim=fastai workload._target_=imagelib.steps.ClippedStep": set(),
        "": set(),
    }
    imports = {
        config: set(lazy_imports(build_plan([*TINY, "input_type=tensor", *config.split()]).runs)) & set(FASTAI_MODULES)
        for config in expected
    }
    assert imports == expected


@pytest.mark.parametrize("name", ["resnet18", "convnext_atto"])
def test_a_timm_models_flops_are_timms_published_gmacs(name):
    """timm's CPU table (sweeps/published/timm_infer_cpu.yaml) gives each model's GMACs at its default size."""
    import timm  # here: the other tests of this file, and collecting it, need no model zoo

    table = published.published_for("timm_infer_cpu")["models"]["tables"]["nchw"]
    (row,) = [r for r in published_models.read_table(table) if r["model"] == name]
    model = timm.create_model(name).eval()
    x = torch.zeros(1, 3, int(row["infer_img_size"]), int(row["infer_img_size"]))
    with torch.inference_mode():
        gmacs = count_flops(lambda: model(x)) / 2 / 1e9
    assert gmacs == pytest.approx(float(row["infer_gmacs"]), rel=0.02)  # theirs also counts norms and activations


@pytest.mark.parametrize(
    ("name", "precision", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", "amp_bf16", 989.4),  # lightning-fabric's table
        ("NVIDIA H100 80GB HBM3", "tf32", 494.7),
        ("NVIDIA A100-SXM4-80GB", "amp_fp16", 312),
        ("NVIDIA H200", "amp_bf16", 989.5),  # the H100's chip: its peak, not twice it, nor unknown
        ("NVIDIA H200", "fp16", 989.5),
        ("NVIDIA H200", "tf32", 494.5),
        ("NVIDIA H200", "fp32", 67),
        ("NVIDIA H200 NVL", "amp_fp16", 835.5),
        ("NVIDIA H100 NVL", "amp_bf16", 835.5),
    ],
)
def test_a_gpus_peak_is_its_dense_datasheet_figure(monkeypatch, name, precision, tflops):
    """There is no GPU here: torch.cuda gives the name such a GPU reports (a stand-in for the GPU, no more)."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    assert peak_flops(torch.device("cuda"), precision) == pytest.approx(tflops * 1e12)


@pytest.mark.slow
def test_flops_are_recorded_and_utilization_is_unknown_without_a_known_peak(tiny_plan):
    assert peak_flops(torch.device("cpu"), "fp32") is None, "no CPU has a peak in the table"
    plan = tiny_plan("input_type=tensor", "memory_format=contiguous")
    run_dir, summary = run(plan)
    assert summary.flops_per_step > 0 and summary.tflops_per_s > 0 and summary.params > 0
    assert summary.peak_tflops is None and summary.mfu is None
    assert records.read_json(run_dir / records.SUMMARY)["flops_per_step"] == summary.flops_per_step
    shown = text(view(plan.sweep_dir))
    header = next(line for line in shown.splitlines() if line.startswith("| "))
    cells = [cell.strip() for cell in header.strip("|").split("|")]
    assert cells[cells.index("TFLOP/s") + 1] == "MFU" and "| unknown " in shown  # columns as wide as their values
    assert (
        records.Summary(phases=("step",), median_ms={"step_ms": 4.0}, tflops_per_s=100.0, peak_tflops=400.0).mfu == 0.25
    )
