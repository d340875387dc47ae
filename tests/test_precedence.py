"""What a user sets is not dropped, and axes that do not apply are not run.

The command line comes first, then an option file of the user's, then a sweep file's params, then perfsweep's own
options and defaults. Without sweep=, a model or step of the user's own runs without the default sweep's axes. A run
is swept only along the fields its step reads. channels_last is refused on inputs that hold no image."""

import shlex

import pytest

from perfsweep import records
from perfsweep.launcher.validate import validate
from perfsweep.sweeps.plan import build_plan
from perfsweep.train.checks import problems as run_problems
from tests import golden
from tests.helpers import ROOT, SMALL, launch_here


@pytest.fixture
def config_dir(tmp_path):
    """A config dir of the user's with a model yaml: a model of their own, at batch 8, its constructor's width 8."""
    folder = tmp_path / "perf"
    (folder / "model").mkdir(parents=True)
    mine = "_target_: imagelib.models.SmallCNN\nname: mine\nbatch_size: 8\nwidth: 8\n"  # width: SmallCNN's argument
    (folder / "model" / "mine.yaml").write_text(mine)
    return folder


def searched(folder) -> str:
    """The override that --config-dir FOLDER gives."""
    return f"hydra.searchpath=[file://{folder}]"


def sizes(plan) -> set[tuple[int, int]]:
    return {(spec.config.model.batch_size, spec.config.model.image_size) for spec in plan.runs}


def configurations(plan, *axes: str) -> set[tuple[str, ...]]:
    return {tuple(spec.axes[axis] for axis in axes) for spec in plan.runs}


def test_a_model_yaml_of_yours_comes_before_the_sweeps_params_and_the_command_line_before_both(config_dir):
    plan = build_plan([searched(config_dir), "model=mine"])
    assert sizes(plan) == {(8, 32)}, "its batch_size, and the default sweep's 32 px, which it does not set"
    typed = build_plan([searched(config_dir), "model=mine", "model.batch_size=4"])
    assert sizes(typed) == {(4, 32)}
    assert typed.origins["model.batch_size"] == "the command line"
    assert plan.origins["model.batch_size"] == str(config_dir / "model" / "mine.yaml")
    shown = "\n".join([*plan.notices, *typed.notices])
    golden.says("precedence: a model yaml of yours, then the command line", shown, {config_dir: "<dir>"})
    swept = build_plan([searched(config_dir), "model=mine", "model.batch_size=4,16"])
    besides = build_plan([searched(config_dir), "model=mine", "model.batch_size=8,16"])
    assert sizes(swept) == {(4, 32), (16, 32)} and sizes(besides) == {(8, 32), (16, 32)}
    assert "model.batch_size=4,16 (the command line) runs, not model.batch_size=8" in "\n".join(swept.notices)
    assert not [n for n in besides.notices if "(the command line) runs, not" in n], "8 runs too: nothing left out"


def test_an_option_file_of_yours_edited_between_two_plans_of_one_process_plans_as_it_reads_now(config_dir):
    """Its value changed, and its keys moved to the root (`@package _global_`), which Hydra composes in full."""
    assert sizes(build_plan([searched(config_dir), "model=mine"])) == {(8, 32)}
    moved = "# @package _global_\nmodel:\n  _target_: imagelib.models.SmallCNN\n  name: mine\n  batch_size: 2\n"
    (config_dir / "model" / "mine.yaml").write_text(moved)
    assert sizes(build_plan([searched(config_dir), "model=mine"])) == {(2, 32)}


def test_a_preset_you_chose_gives_way_to_a_sweep_files_params_with_a_line_that_names_both():
    plan = build_plan(["model=test_resnet", "repeats=1"])  # conf/model/test_resnet.yaml: batch 4; the default sweep: 16
    assert sizes(plan) == {(16, 32)} and len(plan.runs) == 6
    assert plan.notices == (
        "model.batch_size=16 (sweeps/default.yaml) runs, not model.batch_size=4 (conf/model/test_resnet.yaml): a "
        "sweep file's params come before perfsweep's presets; type model.batch_size=4 to run the preset's",
    )
    typed = build_plan(["model=test_resnet", "model.batch_size=4", "repeats=1"])
    assert sizes(typed) == {(4, 32)} and not typed.notices


def test_a_preset_s_value_that_the_sweep_files_params_sweep_too_gives_way_to_no_one(tmp_path):
    """dist=ddp's preset runs 2 ranks; sweep=dist_scaling scale=cpu sweeps 1 and 2: the preset's 2 runs too."""
    both = build_plan(["sweep=dist_scaling", "scale=cpu", "dist=ddp", "repeats=1"])
    assert {spec.config.dist.world_size for spec in both.runs} == {1, 2} and not both.notices, both.notices
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "mine.yaml").write_text("params:\n  model: tiny_cnn\n  dist.world_size: 1,4\n")
    (said,) = build_plan([searched(tmp_path), "sweep=mine", "dist=ddp", "repeats=1"]).notices
    mine = tmp_path / "sweeps" / "mine.yaml"
    assert said.startswith(
        f"dist.world_size=1,4 ({mine}) runs, not dist.world_size=2 (conf/dist/ddp.yaml): a sweep file's params come "
        "before perfsweep's presets"
    ), said


def test_a_preset_that_a_sweep_file_chose_gives_way_to_its_params_without_a_word(tmp_path):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "mine.yaml").write_text("params:\n  model: test_resnet\n  model.batch_size: 8\n")
    plan = build_plan([searched(tmp_path), "sweep=mine", "repeats=1"])
    assert sizes(plan) == {(8, 32)} and not plan.notices, "the file's author chose the preset and its batch"


def test_hydras_cfg_job_shows_the_config_the_first_run_runs_with_the_sweep_files_params_applied(tmp_path):
    """The default sweep's steps, warm-up and budget, which Hydra's composition alone lacks. An option that is not
    there is refused."""
    shown = launch_here("--cfg", "job", "model=tiny_cnn", "input_type=tensor,subclass", f"runs_dir={tmp_path}")
    assert shown.returncode == 0, shown.stderr
    first = build_plan(["model=tiny_cnn", "input_type=tensor,subclass", f"runs_dir={tmp_path}"]).runs[0]
    head, config = shown.stdout.split("\n", 1)
    assert head.startswith(f"# the first of the sweep's 16 runs, {first.name}; the others differ in memory_format.name")
    assert "\nsteps: 10\nwarmup_steps: 3\n" in config and "  budget_s: 50.0\n" in config
    auto = launch_here("--cfg=job", "model=tiny_cnn", "repeats=auto", f"runs_dir={tmp_path}")
    assert auto.returncode == 0 and "\nrepeats: 3\n" in auto.stdout and "  budget_s: null\n" in auto.stdout, (
        "its first look"
    )
    refused = launch_here("-c", "job", "model=tiny_cnn", "precision=bf16", f"runs_dir={tmp_path}")
    assert refused.returncode == 2 and "Could not find 'precision/bf16'" in refused.stderr
    assert not any(tmp_path.iterdir())


def test_a_sweep_file_of_yours_gives_way_to_your_option_files(config_dir):
    (config_dir / "workload").mkdir()
    (config_dir / "workload" / "clip.yaml").write_text(
        "_target_: mylib.steps.Clipped\nname: clip\nkwargs: {max_norm: 1.0}\nreads: [model]\n"
        "axes: {workload: workload.name, model: model.name}\n"
    )
    (config_dir / "sweeps").mkdir()
    (config_dir / "sweeps" / "mine.yaml").write_text(
        "params:\n  model: mine\n  model.batch_size: 32\n  +model.kwargs.width: 16\n  workload: clip\n"
        "  workload.kwargs.max_norm: 0.5\n  repeats: 1\n"
    )
    (spec,) = build_plan([searched(config_dir), "sweep=mine"]).runs
    assert spec.config.model.batch_size == 8 and spec.config.model.kwargs == {"width": 8}
    assert spec.config.workload.kwargs == {"max_norm": 1.0}
    shown = "\n".join(build_plan([searched(config_dir), "sweep=mine"]).notices)
    golden.says("precedence: a sweep file of yours and your option files", shown, {config_dir: "<dir>"})


def test_a_workload_yaml_of_yours_without_axes_says_that_a_swept_input_type_is_neither_named_nor_compared(config_dir):
    (config_dir / "workload").mkdir()
    declared = "_target_: mylib.steps.Step\nname: mystep\nreads: [model, input_type]\n"
    (config_dir / "workload" / "mystep.yaml").write_text(declared)
    plan = build_plan([searched(config_dir), "workload=mystep", "input_type=tensor,subclass", "repeats=1"])
    assert not any("subclass" in spec.name for spec in plan.runs), "names alike but for their hash"
    said = (
        "input_type=tensor,subclass runs, but workload mystep declares no axis for input_type: its runs are neither "
        "named nor compared by it."
    )
    assert any(notice.startswith(said) for notice in plan.notices), plan.notices
    (config_dir / "workload" / "mystep.yaml").write_text(declared + "axes: {input_type: input_type.name}\n")
    plan = build_plan([searched(config_dir), "workload=mystep", "input_type=tensor,subclass", "repeats=1"])
    assert not any("declares no axis" in notice for notice in plan.notices)
    assert {spec.axes["input_type"] for spec in plan.runs} == {"tensor", "subclass"}


@pytest.mark.slow
def test_a_model_yaml_of_yours_runs_at_its_batch_and_the_table_says_so(imagelib, config_dir, tmp_path):
    result = launch_here(
        *SMALL, "--config-dir", str(config_dir), "model=mine", "launcher=debug", f"runs_dir={tmp_path}"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = [records.read_json(path) for path in (tmp_path / "default").glob("*/summary.json")]
    assert summary["batch_size"] == 8
    assert " optim=torch model.kwargs.width=8 | batch 8, 32 px | " in result.stdout, "the table says what it ran"
    assert f"model.batch_size=8 ({config_dir / 'model' / 'mine.yaml'}) runs, not model.batch_size=16" in result.stderr


def readme_command() -> list[str]:
    """The overrides of README's command that times a model of one's own alone ("Time your own code")."""
    lines = (ROOT / "README.md").read_text().splitlines()
    line = next(line for line in lines if line.startswith("perfsweep model=imagelib.models.SmallCNN "))
    return shlex.split(line.split("  #")[0])[1:]


def test_your_model_alone_runs_one_configuration_and_each_axis_you_type():
    """README's own command: the default sweep's run settings, not its axes."""
    plan = build_plan(readme_command())
    assert configurations(plan, "input_type", "memory_format", "precision", "compile") == {
        ("tensor", "contiguous", "fp32", "eager"),
        ("MetaImage", "contiguous", "fp32", "eager"),
    }
    assert sizes(plan) == {(16, 32)} and {(s.config.steps, s.config.repeats) for s in plan.runs} == {(10, 4)}
    golden.says("precedence: a model of yours leaves the default sweep's axes out", "\n".join(plan.notices))
    perfsweeps = build_plan(["model=resnet50"])  # the default sweep's question, asked of another model of perfsweep's
    assert len(configurations(perfsweeps, "input_type", "memory_format")) == 6 and not perfsweeps.notices


TOKENS = ["model=imagelib.models.Tagger", "model.inputs=imagelib.models.token_batch"]


def test_channels_last_on_inputs_that_hold_no_image_is_refused_before_anything_runs(imagelib, tmp_path):
    plan = build_plan([*TOKENS, "precision=fp32,amp_bf16,fp16"])
    assert configurations(plan, "precision", "input_type", "memory_format") == {
        (precision, "tensor", "contiguous") for precision in ("fp32", "amp_bf16", "fp16")
    }
    assert validate(plan, run_problems) == [], "fp16 casts the model; the token ids stay integers"
    typed = launch_here(*TOKENS, "memory_format=contiguous,channels_last", f"runs_dir={tmp_path}")
    asked = launch_here(*TOKENS, "sweep=default", f"runs_dir={tmp_path}")  # the default sweep by name: its axes
    for result in (typed, asked):
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert not (tmp_path / "default").exists()
    golden.says("refused: channels_last on token ids", typed.stderr)
    assert "use memory_format=contiguous [set by sweeps/default.yaml]" in asked.stderr


HISTOGRAM = '''
import torch


class Step:
    """Builds its own tensors: it reads the model's batch size, and neither input type nor memory format."""

    phases = ("histogram",)
    reads = ("model",)

    def __init__(self, cfg, device):
        self.values = torch.rand(cfg.model.batch_size * 100, device=device)

    def step(self, index, clock):
        clock.start()
        torch.histc(self.values, bins=16)
        clock.mark()
        return None


class Misdeclared(Step):
    reads = "model"
'''


def test_a_step_of_yours_is_swept_only_along_the_fields_it_declares_it_reads(user_module, tmp_path):
    user_module("histbench", HISTOGRAM)
    alone = build_plan(["workload=histbench.Step"])
    asked = build_plan(["workload=histbench.Step", "sweep=default"])  # the default sweep by name: said, and not run
    for plan in (alone, asked):
        assert len(plan.runs) == 4 and {spec.axes["workload"] for spec in plan.runs} == {"Step"}
        assert {tuple(spec.axes) for spec in plan.runs} == {("workload", "model", "compile", "replicate")}
    golden.says("precedence: the default sweep's axes, which a step of yours does not read", "\n".join(asked.notices))
    typed = launch_here("workload=histbench.Step", "input_type=tensor,subclass", f"runs_dir={tmp_path}")
    misdeclared = launch_here("workload=histbench.Misdeclared", f"runs_dir={tmp_path}")
    for result in (typed, misdeclared):
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    golden.says("refused: an axis no run reads", typed.stderr)
    golden.says("refused: a step's reads that are no run fields", misdeclared.stderr)


def test_a_typed_value_of_a_field_no_run_reads_is_said_to_run_as_without_it(user_module):
    user_module("histbench", HISTOGRAM)
    plan = build_plan(["workload=histbench.Step", "precision=amp_bf16"])
    assert plan.runs and "precision" not in plan.runs[0].axes
    golden.says("precedence: a typed value no run reads", "\n".join(plan.notices))


def test_a_workload_yaml_that_declares_no_reads_takes_its_steps_own(user_module, tmp_path):
    user_module("histbench", HISTOGRAM)
    (tmp_path / "perf" / "workload").mkdir(parents=True)
    (tmp_path / "perf" / "workload" / "hist.yaml").write_text("_target_: histbench.Step\nname: hist\n")
    plan = build_plan([f"hydra.searchpath=[file://{tmp_path / 'perf'}]", "workload=hist", "model.batch_size=4,8"])
    assert all(list(spec.config.workload.reads) == ["model"] for spec in plan.runs)
    assert {spec.config.model.batch_size for spec in plan.runs} == {4, 8} and "input_type" not in plan.runs[0].axes


def test_a_function_benchmark_without_a_sweep_runs_once_and_says_what_it_left_out():
    plan = build_plan(["workload=sampler", "repeats=1"])
    assert len(plan.runs) == 1
    golden.says(
        "precedence: the default sweep's axes, which a function benchmark does not read", "\n".join(plan.notices)
    )


def test_a_value_a_sweep_file_set_for_a_workload_the_command_line_chose_names_both(tmp_path):
    """The command line's workload took the place of the grid's, whose impl it has not."""
    refused = launch_here("sweep=loops_vs_broadcasting", "workload=pairwise_sum_prod", f"runs_dir={tmp_path}")
    assert refused.returncode == 2
    said = "workload.impl='eager' is not one of pairwise_sum_prod's: loop, broadcast [set by "
    said += "sweeps/loops_vs_broadcasting.yaml, with workload set by the command line]"
    assert said in refused.stderr, refused.stderr


def test_an_option_file_of_the_users_code_without_a_name_is_named_by_its_option(tmp_path):
    """Not by the schema's default model, which it never builds: its figures would be published under that name."""
    folder = tmp_path / "perf"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "tiny.yaml").write_text("_target_: imagelib.models.SmallCNN\nwidth: 8\n")
    plan = build_plan(["model=tiny,resnet18", "input_type=tensor", "memory_format=contiguous", searched(folder)])
    assert {(spec.axes["model"], spec.config.model._target_) for spec in plan.runs} == {
        ("tiny", "imagelib.models.SmallCNN"),
        ("resnet18", ""),
    }
    shown = launch_here("--config-dir", str(folder), "model=tiny", "--cfg", "job")
    assert "  name: tiny\n  source: torchvision\n  _target_: imagelib.models.SmallCNN\n" in shown.stdout, shown.stderr


def test_a_model_of_yours_beside_one_of_perfsweeps_says_which_keeps_the_default_sweeps_axes():
    """Only the user's model leaves the default sweep's question out; the notice says the other keeps it."""
    plan = build_plan(["model=resnet18,imagelib.models.SmallCNN"])
    assert {(s.axes["model"], s.axes["input_type"]) for s in plan.runs} == {
        ("resnet18", "tensor"), ("resnet18", "subclass"), ("resnet18", "tensorbase"), ("SmallCNN", "tensor"),
    }  # fmt: skip
    (notice,) = [n for n in plan.notices if "is yours" in n]
    assert notice.endswith("an axis you type is swept; resnet18, not yours, keeps them"), notice
