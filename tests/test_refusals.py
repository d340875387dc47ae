"""Bad input is refused before anything is written or submitted: exit status 2, the bad value named with what is
allowed, no traceback, and nothing already recorded touched."""

import sys

import numpy as np
import pytest

from perfsweep import records
from perfsweep.commands.cli import with_config_dirs
from perfsweep.sweeps.plan import PlanError, build_plan
from tests import golden, synthetic
from tests.helpers import FAST, launch_here


def _refused(result, *expected: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "perfsweep: nothing was run" in result.stderr and "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


# Bad command lines, each refused before anything is written. What each one says is in the golden file, whole: the
# wording a user reads is checked in one place, the behaviour (exit status 2, no traceback, nothing written) here.
BAD = [
    # overrides Hydra's parser cannot read
    ["steps=["],
    ["model=resnet18,,resnet50"],
    ["workload.size=8)"],
    ["sweep_name=é"],
    ["-"],
    ["--cfg", "job", "steps=["],
    # values out of range, or outside a closed set
    [*FAST, "launcher.max_array_size=-1"],
    [*FAST, "launcher.gpus_per_node=-1"],
    [*FAST, "threads=0"],
    [*FAST, "launcher.timeout_min=0"],
    [*FAST, "launcher.timeout_min=inf"],
    [*FAST, "launcher.timeout_min=1:30:00"],
    [*FAST, "launcher.timeout_retries=-1"],
    [*FAST, "launcher.budget_s=0"],
    [*FAST, "launcher.wait=false"],
    [*FAST, "launcher=debug", "launcher.wait=false"],
    [*FAST, "launcher.isolation=bogus"],
    [*FAST, "tracker.mode=bogus"],
    [*FAST, "order=bogus"],
    [*FAST, "cost.per_hour=-1"],
    [*FAST, "cost.per_hour=inf"],
    [*FAST, "cost.per_hour=abc"],
    [*FAST, "repeats=two"],
    ["memory_format.name=nchw"],
    # what the property-based tests found
    ["steps=1", "launcher.gpus=${steps}", "launcher.wait=false"],
    ["steps=1", "launcher.sbatch_extra=${steps}", "launcher.wait=false"],
    ["steps=1", "steps=???", "launcher.wait=false"],
    ["steps=1", "model.name=???", "launcher.wait=false"],
    # a model preset that does not exist
    ["model=convnext_small"],
    # keys no part of perfsweep reads, misspelt keys and values
    ["+foo=1"],
    ["+model.width=32"],
    ["+model._target_=mylib.models.SmallCNN"],
    ["inptu_type=subclass"],
    ["batch_size=8"],
    ["model.nmae=resnet50"],
    ["input_type=subclas"],
    ["memory_format.name=chanels_last"],
    ["sweep=defualt"],
    ["precision=bf16"],
    ["model.name=convnext_tinyy", "model.source=timm"],
    ["+model.kwargs.num_classes=10"],
    # compile settings that no run reads, and the switch its option sets
    ["compile=eager,default", "compile.enabled=true"],
    # what a precision option sets, typed beside it: both would run bfloat16 autocast, one called fp32
    ["precision=fp32,amp_bf16", "precision.autocast_dtype=bfloat16"],
    ["precision=fp16", "precision.autocast_dtype=bfloat16", "precision.tf32=true"],
    ["precision=fp32", "precision.name=fp32", "precision.autocast_dtype=bfloat16"],  # an option's name is not one's own
    ["precision=amp_bf16", "~precision.autocast_dtype"],
    # Hydra's settings that a Hydra app reads and perfsweep does not
    ["hydra.run.dir=/tmp/elsewhere"],
    ["hydra/job_logging=disabled"],
    # one name for two things, which the table would show as one
    ["model=resnet18,mylib.models.resnet18"],
    # a list of a group's options, which Hydra would merge into one run named by the last
    ["precision=[amp_bf16,fp32]"],
    # a value of the wrong type beside a swept axis: the one problem, not a second about what no run reads
    ["input_type=tensor,subclass", "steps=ten"],
    # a key typed twice, the last a slip: the warning names both, before the refusal
    ["model=tiny_cnn", "model=tiny_cnnn"],
]


def _bad(args: list[str]) -> str:
    return " ".join(a for a in args if a not in FAST)


@pytest.mark.parametrize("args", BAD, ids=_bad)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, args):
    result = launch_here(*args, f"runs_dir={tmp_path}")
    _refused(result)
    assert not any(tmp_path.iterdir())
    golden.says(f"refused: {_bad(args)}", result.stderr, {tmp_path: "<runs>"})


def test_a_precision_of_the_users_own_named_by_them_is_planned_under_its_name():
    """What a precision option sets may be typed with a name of its own.

    The table then calls it by that name.
    """
    plan = build_plan([*FAST, "precision.name=bf16_autocast_fp16_params", "precision.autocast_dtype=bfloat16"])
    assert {run.config.precision.name for run in plan.runs} == {"bf16_autocast_fp16_params"}
    same = build_plan([*FAST, "precision=amp_bf16", "precision.autocast_dtype=bfloat16"])
    assert {run.config.precision.autocast_dtype for run in same.runs} == {"bfloat16"}, "what the option sets, typed"
    with pytest.raises(PlanError) as refused:
        build_plan([*FAST, "precision=amp_bf16", "precision.autocast_dtype=null"])
    assert str(refused.value).count("precision.autocast_dtype=null: precision=amp_bf16 sets it otherwise") == 1


def test_a_control_character_in_a_path_never_reaches_a_job_script(tmp_path, monkeypatch):
    """A newline in runs_dir would end the #SBATCH block and run the rest as a command on the node."""
    runs_dir = f"{tmp_path}/sl\ntouch {tmp_path}/PWNED\n"
    result = launch_here(*FAST, "launcher=slurm", "launcher.max_array_size=8", f"runs_dir='{runs_dir}'")
    _refused(result, f"runs_dir={runs_dir!r} holds a control character")
    assert not any(tmp_path.iterdir())
    # the same newline from the working directory that runs_dir is relative to
    odd = tmp_path / "work\ndir"
    odd.mkdir()
    monkeypatch.chdir(odd)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the launch puts its working directory first
    result = launch_here(*FAST, "launcher=slurm", "launcher.max_array_size=8")
    _refused(result, f"the sweep folder {str(odd / 'runs' / 'default')!r} (runs_dir in the working directory)")
    assert list(odd.iterdir()) == []


@pytest.mark.slow
def test_resume_refuses_a_bad_override_and_changes_nothing(tmp_path):
    result = launch_here(*FAST, "seed=0,1", "tracker.mode=disabled", "launcher=debug", f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    sweep = tmp_path / "default"
    before = {path: path.read_bytes() for path in sweep.rglob("*.json")}
    for override, message in [
        ("launcher.parallelism=abc", "launcher.parallelism=abc: Value 'abc' of type 'str' could not be converted"),
        ("launcher.parallelism=[", "'launcher.parallelism=[' cannot be read"),
        ("launcher.nope=3", "launcher.nope=3: Key 'nope' not in 'LauncherConf'"),
    ]:
        _refused(launch_here("resume", str(sweep), override), message)
    assert {path: path.read_bytes() for path in sweep.rglob("*.json")} == before
    assert all(records.read_status(path.parent).state == "done" for path in sweep.glob("*/status.json"))


def test_a_command_or_a_flag_that_is_not_there_is_named_alone_with_the_nearest(tmp_path):
    typo = launch_here("comapre", "a", "b")
    assert typo.returncode == 2 and typo.stderr.rstrip().endswith("'report'); did you mean compare?"), typo.stderr
    flag = launch_here("model=tiny_cnn", "--bogus", "tracker.mode=disabled", f"runs_dir={tmp_path}")
    said = "error: unrecognized arguments: --bogus; a setting is KEY=VALUE, without dashes: bogus=VALUE"
    assert flag.returncode == 2 and flag.stderr.rstrip().endswith(said), flag.stderr
    assert not any(tmp_path.iterdir())
    runs = synthetic.sweep({("tensor", "contiguous"): 50.0}, 1, synthetic.Noise(), np.random.default_rng(0))
    sweep = synthetic.write(runs, tmp_path / "sweep")
    view = launch_here("runs", str(sweep), "--format", "json")
    said = "error: unrecognized arguments: --format json; its options: --help"
    assert view.returncode == 2 and view.stderr.rstrip().endswith(said), "a view takes no settings to suggest"


DECLARED = """name: ps
impl: loop
size: 100
axes: {workload: workload.name, impl: workload.impl}
sizes: [size]
baseline: {axis: impl, value: loop}
"""


@pytest.mark.parametrize(
    "typo, said",
    [
        ("impl: workload.impl}", "impl: workload.imp}"),
        ("sizes: [size]", "sizes: [siez]"),
        ("baseline: {axis: impl,", "baseline: {axis: impll,"),
    ],
)
def test_a_workload_yaml_that_declares_what_its_runs_have_not_is_refused_not_crashed(tmp_path, typo, said):
    """A workload of the user's own (a copy of pairwise_sum_prod's yaml) with a typo in its declaration."""
    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "ps.yaml").write_text(DECLARED.replace(typo, said))
    args = ["workload=ps", "workload.impl=broadcast,loop", "repeats=1", f"runs_dir={tmp_path / 'runs'}"]
    result = launch_here("--config-dir", str(tmp_path), *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    golden.says(f"refused: a workload that declares {said}", result.stderr, {tmp_path: "<tmp>"})


def test_a_declared_baseline_the_sweep_does_not_run_is_said_with_the_one_it_compares_over(tmp_path):
    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "ps.yaml").write_text(DECLARED.replace("value: loop", "value: lop"))
    plan = build_plan(with_config_dirs(["--config-dir", str(tmp_path), "workload=ps", "workload.impl=broadcast,loop"]))
    said = "workload ps declares its baseline impl=lop, which this sweep does not run: its impl speed-ups are over"
    assert any(notice.startswith(said + " broadcast, the first it lists") for notice in plan.notices), plan.notices


def test_a_sweep_into_a_bisect_s_folder_is_refused_before_anything_runs(tmp_path):
    """A bisect without sweep_name writes runs/default: a plain launch there would hide its runs among the points."""
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / records.BISECT).write_text("{}")
    refused = launch_here(*FAST, f"runs_dir={tmp_path}")
    said = f"{tmp_path / 'default'} holds a bisect's points, not a sweep's runs; sweep_name=NAME: a folder of its own"
    assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    assert sorted(p.name for p in (tmp_path / "default").iterdir()) == [records.BISECT]


def test_a_baseline_typed_that_the_sweep_does_not_run_is_refused_with_its_values(tmp_path):
    """A yaml's baseline gives way to a narrowed sweep; one typed on the command line is the user's, and a typo."""
    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "ps.yaml").write_text(DECLARED)
    typed = [
        "--config-dir",
        str(tmp_path),
        "workload=ps",
        "workload.impl=broadcast,loop",
        "workload.baseline.value=lop",
    ]
    with pytest.raises(PlanError) as refused:
        build_plan(with_config_dirs(typed))
    said = "workload.baseline.value=lop: no run of this sweep has impl=lop; its values: broadcast, loop; did you mean "
    assert said + "loop?" in str(refused.value), refused.value


def test_a_size_of_0_or_less_for_a_step_of_the_user_s_own_is_refused(tmp_path, sleeping_steps):
    """perfsweep's own workloads check their sizes; a step of the user's own declares its size in its yaml."""
    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "nap.yaml").write_text("_target_: slow_steps.Step\nname: nap\nsize: 100\nsizes: [size]\n")
    args = ["workload=nap", "workload.size=100,0", "repeats=1", f"runs_dir={tmp_path / 'runs'}"]
    result = launch_here("--config-dir", str(tmp_path), *args)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "workload.size=0 must be 1 or more: workload nap declares size its problem's size" in result.stderr
