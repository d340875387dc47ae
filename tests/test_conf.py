"""Every config group value composes, is typed, and passes the run checks; bad values name the allowed ones."""

from pathlib import Path

import pytest

from perfsweep.conf.schema import Config, LauncherName, MemoryFormat
from perfsweep.launcher.backends import BACKENDS
from perfsweep.sweeps.compose import CONF_DIR
from perfsweep.sweeps.plan import PlanError, build_plan
from perfsweep.train import fastai_parts
from perfsweep.train.build import MEMORY_FORMATS
from perfsweep.train.checks import problems
from perfsweep.train.inputs import INPUT_TYPES

GROUPS = ["model", "memory_format", "precision", "input_type", "compile", "launcher", "tracker"]
NAMED = ["memory_format", "precision", "input_type", "compile", "launcher"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_value_composes(tiny_plan, group, option):
    plan = tiny_plan("input_type=tensor", "memory_format=contiguous", f"{group}={option}")
    (spec,) = plan.runs
    assert isinstance(spec.config, Config)
    if group in NAMED:
        assert getattr(spec.config, group).name == option, "a group value's name must be its file name"


@pytest.mark.parametrize("option", options("model"))
def test_every_model_exists_in_its_library(tiny_plan, option):
    (spec,) = tiny_plan("input_type=tensor", "memory_format=contiguous", f"model={option}").runs
    assert problems(spec.config, on_this_host=False) == []


def test_input_type_files_match_the_registry():
    assert options("input_type") == sorted(INPUT_TYPES)


@pytest.mark.parametrize("option", options("precision"))
def test_precision_support_on_cpu(tiny_plan, option):
    (spec,) = tiny_plan(f"precision={option}", "input_type=tensor", "memory_format=contiguous", "device=cpu").runs
    found = problems(spec.config)
    if option == "tf32":
        assert len(found) == 1 and "tf32" in found[0] and "CPU" in found[0]
    else:
        assert found == []


def test_unknown_group_value_lists_the_allowed_ones(tiny_plan):
    with pytest.raises(PlanError) as error:
        tiny_plan("input_type=tensor,nosuch")
    text = str(error.value)
    assert "input_type/nosuch" in text
    assert all(name in text for name in INPUT_TYPES)


def test_type_error_names_the_field(tiny_plan):
    with pytest.raises(PlanError, match=r"model.batch_size=abc[\s\S]*Integer"):
        tiny_plan("model.batch_size=abc")


def test_unknown_model_and_compile_mode_are_checks(tiny_plan):
    (spec,) = tiny_plan(
        "model.name=resnet_nosuch",
        "compile=default",
        "compile.mode=fastest",
        "input_type=tensor",
        "memory_format=contiguous",
    ).runs
    found = "\n".join(problems(spec.config))
    assert "model.name='resnet_nosuch' is not a perfsweep model" in found
    assert "compile.mode='fastest' is not one of" in found and "max-autotune" in found
    (compiled,) = tiny_plan(
        "compile=default", "compile.backend=nosuch", "input_type=tensor", "memory_format=contiguous"
    ).runs
    said = "compile.backend='nosuch' is not a backend of perfsweep's torch; its backends: "
    assert any(p.startswith(said) and "aot_eager" in p for p in problems(compiled.config)), "before any run fails"
    pin = ("compile=default", "compile.backend=onnxrt", "torch=2.5.1", "input_type=tensor", "memory_format=contiguous")
    (pinned,) = tiny_plan(*pin).runs
    assert not any("compile.backend" in p for p in problems(pinned.config)), "another torch's backends are its own"


def test_unknown_sweep_lists_the_sweeps_and_the_config_dir_that_has_one_of_that_name(tmp_path, monkeypatch):
    with pytest.raises(PlanError, match="unknown sweep 'nosuch'.*default"):
        build_plan(["sweep=nosuch"])
    (tmp_path / "perf" / "sweeps").mkdir(parents=True)
    (tmp_path / "perf" / "sweeps" / "mine.yaml").write_text("params: {repeats: 1}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        PlanError,
        match=r"unknown sweep 'mine' \(sweep=mine\); perf/sweeps/mine.yaml is one: launch "
        r"with --config-dir perf;",
    ):
        build_plan(["sweep=mine"])


@pytest.mark.slow
def test_sweep_files_all_plan():
    for path in sorted(Path(CONF_DIR.parent / "sweeps").glob("*.yaml")):
        plan = build_plan([f"sweep={path.stem}"])
        assert plan.runs and plan.sweep_dir.name == path.stem
        found = [problem for spec in plan.runs for problem in problems(spec.config, on_this_host=False)]
        if not fastai_parts.installed():  # a GPU image has no fastai: its sweeps are checked where it is (CI)
            found = [problem for problem in found if "needs fastai" not in problem]
        assert found == [], path.stem


def test_each_closed_set_in_the_schema_is_what_the_code_behind_it_serves():
    """launcher.name picks a submitit backend and memory_format.name a torch memory format: the enums that check
    them at composition must list exactly those."""
    assert set(LauncherName) == set(BACKENDS) and set(MemoryFormat) == set(MEMORY_FORMATS)
