"""Planning: sweep file + overrides -> runs with stable, distinct ids and safe folder names."""

import dataclasses
import hashlib
import json

import pytest

from perfsweep.records import json_line
from perfsweep.sweeps import compose
from perfsweep.sweeps.plan import PlanError, build_plan
from perfsweep.sweeps.spec import run_fields


def test_default_sweep_is_input_type_by_memory_format():
    plan = build_plan([])
    assert len(plan.runs) == 6 * 4  # 6 configurations, each in 4 rounds (the sweep file's repeats)
    assert {s.config.repeats for s in plan.runs} == {4}
    pairs = {(s.axes["input_type"], s.axes["memory_format"]) for s in plan.runs}
    assert pairs == {(i, m) for i in ("tensor", "subclass", "tensorbase") for m in ("contiguous", "channels_last")}
    assert {s.config.model.image_size for s in plan.runs} == {32}
    assert str(plan.sweep_dir) == "runs/default"


def test_command_line_grid_replaces_the_sweeps_axes():
    plan = build_plan(
        [
            "model=resnet18,resnet50",
            "input_type=tensor,subclass",
            "precision=fp32",
            "memory_format=contiguous,channels_last",
            "repeats=1",
        ]
    )
    assert len(plan.runs) == 8
    assert {s.axes["model"] for s in plan.runs} == {"resnet18", "resnet50"}
    assert {s.axes["precision"] for s in plan.runs} == {"fp32"}


def test_an_override_read_again_is_hydras_reading_not_what_an_earlier_caller_changed():
    """Overrides are parsed once per text and handed out as copies; a shuffle(...) still shuffles each time."""
    (first,) = compose.parsed_overrides(["+model.kwargs.widths=[8,16]"])
    first.value().append(32)  # a caller that changes what it was given
    (again,) = compose.parsed_overrides(["+model.kwargs.widths=[8,16]"])
    assert again.value() == [8, 16]
    shuffled = "seed=shuffle(1,2,3,4,5,6,7,8)"
    orders = {tuple(compose.parsed_overrides([shuffled])[0].sweep_string_iterator()) for _ in range(3)}
    assert len(orders) > 1, "three orders of 8 values alike: once in 1.6e9"


def test_run_ids_are_stable_and_distinct():
    first, second = build_plan([]), build_plan([])
    assert [s.run_id for s in first.runs] == [s.run_id for s in second.runs]
    assert len({s.run_id for s in first.runs}) == 6 * 4  # every replicate of the default's 6 configurations
    assert len({s.name for s in first.runs}) == 6 * 4


def test_run_id_ignores_where_the_sweep_runs():
    base = build_plan(["input_type=tensor", "memory_format=contiguous"]).runs[0]
    moved = build_plan(
        [
            "input_type=tensor",
            "memory_format=contiguous",
            "launcher.parallelism=4",
            "tracker.mode=disabled",
            "runs_dir=elsewhere",
        ]
    ).runs[0]
    changed = build_plan(["input_type=tensor", "memory_format=contiguous", "model.batch_size=8"]).runs[0]
    assert base.run_id == moved.run_id
    assert base.run_id != changed.run_id


def test_duplicate_runs_are_planned_once():
    plan = build_plan(["input_type=tensor,tensor", "memory_format=contiguous", "repeats=1"])
    assert len(plan.runs) == 1


def test_sweep_wide_settings_cannot_be_swept():
    with pytest.raises(PlanError, match="launcher is a setting of the whole sweep") as numbers:
        build_plan(["launcher.parallelism=1,2"])
    assert str(numbers.value).endswith("(launcher.parallelism=1,2 sweeps it)"), "a number is no list in quotes"
    with pytest.raises(PlanError) as refused:
        build_plan(["launcher=slurm", "launcher.partition=cpu,gpu"])
    said = "(launcher.partition=cpu,gpu sweeps it); a value that holds a comma is one value in quotes: "
    assert said + """'launcher.partition="cpu,gpu"'""" in str(refused.value), "the key, and how to give a list"


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden"])
def test_sweep_name_cannot_leave_the_runs_folder(name):
    with pytest.raises(PlanError, match="must be a plain folder name"):
        build_plan([f"sweep_name={name}"])


def test_run_names_are_plain_folder_names():
    (spec,) = build_plan(
        ["model=timm_resnet50", "model.name=../../etc", "input_type=tensor", "memory_format=contiguous", "repeats=1"]
    ).runs
    assert "/" not in spec.name and not spec.name.startswith(".")


GRID = [
    "model=resnet18,test_resnet",
    "workload=train_step,sampler",  # a dict field (the workload's axes) must not merge across options
    "launcher=local,slurm",
    "model.image_size=48",
    "seed=range(0,2)",
    "optim.lr=0.5",
    "tracker.entity=me",
    "compile=max_autotune",
    "threads=2",
    "launcher.setup=[module load cuda]",
]


ADDED = ["+launcher.sbatch_extra.gres=gpu:1", "+env.packages.numpy=2.2.6,2.2"]  # keys added to dict fields
# code of the user's own, by import path: as a group's value, and as a _target_ with and without a name
TARGETS = [
    "model.name=mine",
    "model=mylib.models.Net,resnet18",
    "input_type=tensor,mylib.tensors.Image",
    "workload=mylib.steps.Step",
    "+model.kwargs.width=8",
    "input_type._target_=mylib.Other",
    "input_type.name=other,mine",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "grid", [GRID, [*GRID[:2], *ADDED], [*GRID[:2], "steps=${warmup_steps}"], TARGETS[:6], TARGETS[3:]]
)
def test_reused_templates_give_what_hydra_composes(grid, monkeypatch):
    """Runs composed from reused nodes equal Hydra's own composition of each, with keys added to dict fields too
    (an interpolation is composed by Hydra in full)."""
    by_hydra = []
    monkeypatch.setattr(
        compose,
        "composed_by_hydra",
        lambda run, options, hydra=compose.composed_by_hydra: by_hydra.append(run) or hydra(run, options),
    )
    runs = compose.expand(grid)
    assert len(runs) == 2 ** sum("," in o or "range(" in o for o in grid)
    fast, fast_errors = compose.compose_all(runs)
    assert not (by_hydra and ADDED[0] in grid), "a key added to a dict field needs no composition in full"
    slow, slow_errors = compose.compose_all(runs, reuse=False)
    assert fast_errors == slow_errors == {}
    assert [dataclasses.asdict(c) for c in fast] == [dataclasses.asdict(c) for c in slow]


def test_a_bad_value_fails_the_same_both_ways():
    runs = compose.expand(["model=resnet18,test_resnet", "model.batch_size=abc"])
    for reuse in (True, False):
        configs, errors = compose.compose_all(runs, reuse=reuse)
        assert not configs and len(errors) == 1
        assert "model.batch_size=abc" in next(iter(errors)) and "Integer" in next(iter(errors))


@pytest.mark.parametrize("added", ["+steps=3", "+model.name=resnet50", "+env.packages=x"])
def test_a_key_added_where_one_is_fails_the_same_both_ways(added):
    runs = compose.expand(["model=resnet18,test_resnet", added])
    fast, slow = (compose.compose_all(runs, reuse=reuse) for reuse in (True, False))
    assert fast == slow and not fast[0] and len(fast[1]) == 1, "Hydra refuses to add a key that is there"


def test_run_ids_and_records_are_the_plain_json_of_what_a_run_measures():
    """The cached serialisation of shared config nodes gives exactly json.dumps(..., sort_keys=True)."""
    plan = build_plan(["model=resnet18,test_resnet", "workload=train_step,sampler", "seed=range(0,2)", "repeats=1"])
    assert len(plan.runs) == 2 * 2 * 6 + 2, "a function benchmark's runs are not multiplied by the training axes"
    for spec in plan.runs:
        canonical = json.dumps(run_fields(spec.config), sort_keys=True, default=str)
        assert spec.run_id == hashlib.sha1(canonical.encode()).hexdigest()[:12]
        assert json.loads(spec.record_line()) == spec.record() and spec.record_line() == json_line(spec.record())


def test_a_sweep_launched_under_its_earlier_name_plans_as_it_did():
    """A sweep keeps the name it was launched under: a resume replays `sweep=seed000_subclass`."""
    old, new = (
        build_plan(["sweep=seed000_subclass", "device=cpu"]),
        build_plan(["sweep=subclass_slowdown", "device=cpu"]),
    )
    assert [r.run_id for r in old.runs] == [r.run_id for r in new.runs]
    assert old.sweep_dir.name == "seed000_subclass" and new.sweep_dir.name == "subclass_slowdown"


def test_code_of_ones_own_is_named_by_the_last_part_of_its_import_path_however_it_is_given():
    """model=PATH and model._target_=PATH are one run, named by PATH's last part unless a name is given; a step's
    runs are named by it (a workload axis)."""
    fixed = ["repeats=1", "input_type=tensor", "memory_format=contiguous"]
    (by_value,) = build_plan([*fixed, "model=mylib.models.Net", "workload=mylib.steps.Step"]).runs
    (by_key,) = build_plan([*fixed, "model._target_=mylib.models.Net", "workload._target_=mylib.steps.Step"]).runs
    assert by_value.run_id == by_key.run_id and by_value.name == by_key.name
    assert by_value.name.startswith("Step-Net-contiguous-") and by_value.axes["workload"] == "Step"
    (named,) = build_plan([*fixed, "model._target_=mylib.models.Net", "model.name=mine"]).runs
    assert named.config.model.name == "mine" and named.run_id != by_key.run_id


def test_a_compile_setting_no_run_reads_is_named_at_the_launch():
    """compile.mode on the default sweep, whose runs are all eager: it goes unused, and the launch says so."""
    notices = build_plan(["compile.mode=max-autotune"]).notices
    said = "compile.mode=max-autotune is read by no run: none of this sweep compiles (compile=eager)"
    assert any(notice.startswith(said) for notice in notices), notices
    assert not any("compile.mode" in n for n in build_plan(["compile=default", "compile.mode=max-autotune"]).notices)


def test_a_sweep_file_s_axes_swept_beside_the_command_line_s_are_named_with_the_count():
    """`compile=eager,default` on the default sweep runs 12 configurations: its input types and formats too."""
    plan = build_plan(["model=tiny_cnn", "compile=eager,default"])
    said = (
        "memory_format=contiguous,channels_last and input_type=tensor,subclass,tensorbase (sweeps/default.yaml) are "
        "swept beside the command line's axes: 12 configurations; one value of each runs fewer"
    )
    assert said in plan.notices, plan.notices
    (one,) = [n for n in build_plan(["input_type.name=tensor,subclass"]).notices if "swept beside" in n]
    alone = "memory_format=contiguous,channels_last (sweeps/default.yaml) is swept beside the command line's axes: 4 "
    assert one.startswith(alone + "configurations"), "the typed axis, by its field, is the command line's"
    for quiet in (["input_type=tensor", "memory_format=contiguous"], [], ["seed=0,1"]):  # no axis typed: no notice
        assert not any("swept beside" in n for n in build_plan(quiet).notices), quiet
    typed = ["workload=pairwise_sum_prod", "workload.impl=loop,broadcast", "+env.packages.numpy=2.2.6,2.4.6"]
    assert not any("swept beside" in n for n in build_plan(typed).notices), "a package's versions typed are typed"


def test_a_scale_that_changes_nothing_is_the_sweeps_full_scale():
    """loops_vs_broadcasting runs on a CPU as published: its scale cpu sets nothing, so its runs are not scaled."""
    at_cpu = build_plan(["sweep=loops_vs_broadcasting", "scale=cpu", "tracker.mode=disabled"])
    assert {run.config.scale for run in at_cpu.runs} == {"full"}
    smoke = build_plan(["sweep=loops_vs_broadcasting", "scale=smoke", "tracker.mode=disabled"])
    assert {run.config.scale for run in smoke.runs} == {"smoke"}


def test_runs_that_a_swept_setting_alone_tells_apart_are_named_by_it_and_resume_finds_them(tmp_path):
    """model.batch_size=2,4 is no axis: without it in their names, flags and `runs` could not say which batch."""
    from perfsweep.launcher import sweepdir

    one = ["model=tiny_cnn", "model.image_size=32", "input_type=tensor", "memory_format=contiguous"]
    plan = build_plan([*one, "model.batch_size=2,4", "seed=0", "repeats=1", f"runs_dir={tmp_path}"])
    names = sorted(spec.name for spec in plan.runs)
    assert [name.split("-")[-2] for name in names] == ["model.batch_size=2", "model.batch_size=4"], names
    assert not any("seed" in name for name in names), "a setting every run shares names none"
    assert not any(spec.named_keys for spec in build_plan(["sweep=default"]).runs), "axes alone tell them apart"
    sweepdir.open_sweep(plan, [])
    sweepdir.mark_pending(plan, list(plan.runs))
    assert sorted(spec.name for spec in sweepdir.recorded_plan(plan.sweep_dir).runs) == names
    (narrowed,) = build_plan([*one, "model.batch_size=4", "seed=0", "repeats=1", f"runs_dir={tmp_path}"]).runs
    assert narrowed.name == names[1], "planned again alone, a run keeps the name its folder has"


def test_runs_an_older_launch_named_without_their_swept_setting_keep_their_folders(tmp_path):
    """A launch again of a sweep an older perfsweep named finds its runs by id, under their old names."""
    from perfsweep.launcher import sweepdir

    one = ["model=tiny_cnn", "model.image_size=32", "input_type=tensor", "memory_format=contiguous", "repeats=1"]
    plan = build_plan([*one, "model.batch_size=2,4", f"runs_dir={tmp_path}"])
    older = dataclasses.replace(plan, runs=tuple(dataclasses.replace(s, named_keys=()) for s in plan.runs))
    sweepdir.open_sweep(older, [])
    sweepdir.mark_pending(older, list(older.runs))
    again = build_plan([*one, "model.batch_size=2,4", f"runs_dir={tmp_path}"])
    assert sorted(spec.name for spec in again.runs) == sorted(spec.name for spec in older.runs)
    assert not any("model.batch_size" in spec.name for spec in again.runs)


def test_a_workload_declares_an_axis_on_an_argument_its_code_is_given(tmp_path, imagelib):
    """num_workers is the step's own argument (workload.kwargs): its runs are named and compared along it."""
    (tmp_path / "workload").mkdir()
    declared = (
        "_target_: imagelib.steps.ClippedStep\nname: clip\nkwargs: {max_norm: 1.0}\n"
        "reads: [model, memory_format, precision, input_type, optim, loss, data_batches]\n"
        "axes: {workload: workload.name, max_norm: workload.kwargs.max_norm}\nbaseline: {axis: max_norm, value: 1.0}\n"
    )
    (tmp_path / "workload" / "clip.yaml").write_text(declared)
    searched = f"hydra.searchpath=[file://{tmp_path}]"  # as --config-dir gives it
    plan = build_plan([searched, "workload=clip", "workload.kwargs.max_norm=1.0,0.5", "repeats=1"])
    assert sorted(spec.axes["max_norm"] for spec in plan.runs) == ["0.5", "1.0"]
    assert not any("declares no axis" in notice for notice in plan.notices)
    undeclared = declared.replace(", max_norm: workload.kwargs.max_norm}", "}").split("baseline")[0]
    (tmp_path / "workload" / "clip.yaml").write_text(undeclared)
    plan = build_plan([searched, "workload=clip", "workload.kwargs.max_norm=1.0,0.5", "repeats=1", "input_type=tensor"])
    assert sorted(spec.name.split("-")[-2] for spec in plan.runs) == [
        "workload.kwargs.max_norm=0.5",
        "workload.kwargs.max_norm=1.0",
    ]
    said = (
        "workload.kwargs.max_norm=1.0,0.5 runs, but workload clip declares no axis for it: its runs are named by it, "
        "not compared along it. Its yaml's `axes` and `baseline` compare them: axes: {max_norm: "
        "workload.kwargs.max_norm}, baseline: {axis: max_norm, value: 1.0}"
    )
    assert said in plan.notices, plan.notices
    (tmp_path / "workload" / "clip.yaml").write_text(declared.replace("kwargs.max_norm}", "kwargs.max_nrm}"))
    with pytest.raises(PlanError) as refused:
        build_plan([searched, "workload=clip", "repeats=1"])
    said = "workload clip declares its axis max_norm as workload.kwargs.max_nrm, which its runs have not: no 'max_nrm'"
    assert said in str(refused.value) and "did you mean max_norm" in str(refused.value), refused.value


def test_a_setting_some_run_lacks_names_no_run():
    """+model.kwargs.width=8,16 tells the tensor runs apart; a subclass run without the argument has no value."""
    from perfsweep.sweeps.spec import naming_keys

    plan = build_plan(["model=tiny_cnn", "input_type=tensor,subclass", "+model.kwargs.width=8,16", "repeats=1"])
    specs = list(plan.runs)
    assert "model.kwargs.width" in specs[0].named_keys
    lone = [s for s in specs if s.config.input_type.name == "subclass"][0]
    bare = dataclasses.replace(lone.config, model=dataclasses.replace(lone.config.model, kwargs={}))
    specs = [s for s in specs if s.config.input_type.name == "tensor"] + [dataclasses.replace(lone, config=bare)]
    assert naming_keys(specs, {"model.kwargs.width"}) == (), "a name would hold no value of it"
