"""The user's own code under test, in this process: a model on its own batch factory, import paths that name
nothing or the wrong kind, a constructor or step that fails, plugins by entry points, fastai's own loop, and what
a newcomer tripped over. The example project swept from outside the clone: tests/test_example_project.py."""

import shutil
from pathlib import Path

import pytest
import torch

from perfsweep import records
from perfsweep.launcher.sweepdir import recorded_plan
from perfsweep.sweeps.plan import PlanError, build_plan
from perfsweep.train import checks, user_targets
from tests import golden, untraceable
from tests.helpers import FAILS_AT_SEED_1, ROOT, SMALL, cells, launch_here, write_model_run


def here(tmp_path, *args: str):
    """A sweep run in this process (launcher=debug), its records in tmp_path; `args` after the small sizes."""
    return launch_here(*SMALL, *args, "launcher=debug", f"runs_dir={tmp_path / 'runs'}")


@pytest.mark.slow
def test_a_model_that_takes_tokens_trains_on_its_own_batch_factory(imagelib, tmp_path):
    result = here(
        tmp_path,
        "model=imagelib.models.Tagger",
        "model.inputs=imagelib.models.token_batch",
        "+model.kwargs.tags=8",
        "input_type=tensor,subclass",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = cells(result.stdout, "input_type")
    assert [(row["input_type"], row["output type"]) for row in rows] == [
        ("tensor", "Tensor"),
        ("subclass", "SubClassedTensor"),
    ]
    summary = records.read_json(next((tmp_path / "runs" / "default").glob("*/summary.json")))
    assert summary["flops_per_step"] > 0 and summary["loss_first"] > 0


BAD_PATHS = [
    ["model=nosuchpackage.Net"],
    ["model._target_=imagelib.models.SmallCN"],
    ["model._target_=collections.OrderedDict"],
    ["model=imagelib.models.SmallCNN", "+model.kwargs.depth=3"],
    ["model.inputs=math.pi"],
    ["model.inputs=errno.EIO"],
    ["input_type=collections.OrderedDict"],
    ["workload=imagelib.models.SmallCNN"],
    ["workload=imagelib.models.SmallCN"],
    ["input_type=broken_on_import.Image"],
    ["input_type=imagelib.tensors"],
    ["model=imagelib.model.SmallCNN"],
    ["model=needs.Net"],
    ["workload=badsteps.NoStep"],
    ["workload=badsteps.OneArgument"],
]
BAD_STEPS = """class NoStep:
    phases = ("call",)

    def __init__(self, cfg, device):
        pass


class OneArgument:
    phases = ("call",)

    def __init__(self, cfg):
        pass

    def step(self, index, clock):
        pass
"""
NEEDS = """import torch


class Net(torch.nn.Linear):
    def __init__(self, depth, num_classes=10):
        super().__init__(4, num_classes)


class Positional(torch.nn.Linear):
    def __init__(self, depth, /, num_classes=10):
        super().__init__(depth, num_classes)
"""


def test_an_argument_given_by_position_is_not_asked_for_by_name(user_module):
    user_module("needs", NEEDS)
    for args in (["model=needs.Positional"], ["model=needs.Net", "+model.kwargs._args_=[4]"]):
        plan = build_plan([*args, "input_type=tensor", "memory_format=contiguous", "repeats=1"])
        assert not [p for p in checks.problems(plan.runs[0].config) if "argument" in p], args


@pytest.mark.parametrize("args", BAD_PATHS, ids=" ".join)
def test_an_import_path_that_names_nothing_or_the_wrong_kind_is_refused(imagelib, user_module, tmp_path, args):
    user_module("broken_on_import", "import torch\nraise ValueError('this module needs a GPU driver')\n")
    user_module("needs", NEEDS)
    user_module("badsteps", BAD_STEPS)
    result = here(tmp_path, *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert not (tmp_path / "runs").exists(), "refused before anything was written"
    golden.says(f"refused: {' '.join(args)}", result.stderr, {tmp_path: "<tmp>", ROOT: "<repo>"})


def test_a_misspelled_step_path_is_said_once_not_after_hydra_s_log(imagelib, tmp_path, caplog):
    """Hydra's get_object logs its import error before it raises it: perfsweep says it, once, with the nearest."""
    shown = launch_here("workload=imagelib.models.SmallCN", f"runs_dir={tmp_path}")
    assert shown.returncode == 2 and not [r for r in caplog.records if "Error getting object" in r.getMessage()]
    assert shown.stderr.count("imagelib.models has no attribute 'SmallCN'; did you mean SmallCNN?") == 1, shown.stderr


FAULTY = """
import torch


class Fine(torch.nn.Linear):
    def __init__(self, num_classes: int = 10):
        super().__init__(3 * 8 * 8, num_classes)

    def forward(self, x):
        return super().forward(x.flatten(1))


class Exploding(Fine):
    def __init__(self, num_classes: int = 10):
        raise ValueError(f"no weights for {num_classes} classes")


class Undermarked:
    phases = ("data", "compute")

    def __init__(self, cfg, device):
        self.x = torch.ones(4, device=device)

    def step(self, index, clock):
        clock.start()
        clock.mark()
        return (self.x * 2).sum()


class RaisingStep(Undermarked):
    def step(self, index, clock):
        clock.start()
        clock.mark()
        if index == 2:
            raise KeyError(f"no batch {index}")
        clock.mark()
        return (self.x * 2).sum()


class Overmarked(Undermarked):
    def step(self, index, clock):
        clock.start()
        for _ in range(3):
            clock.mark()
        return (self.x * 2).sum()


class IndexErrorOfItsOwn(Undermarked):
    def step(self, index, clock):
        clock.start()
        clock.mark()
        clock.mark()
        if index == 1:  # the measured window's one step, after its marks: its last
            raise IndexError("no batch 1")
        return self.x.sum()
"""


@pytest.mark.slow
def test_a_constructor_that_raises_fails_its_run_with_the_users_frames_and_the_others_go_on(user_module, tmp_path):
    source = user_module("faulty", FAULTY)
    result = here(
        tmp_path,
        "model=faulty.Fine,faulty.Exploding",
        "model.image_size=8",
        "input_type=tensor",
        "memory_format=contiguous",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    states = {
        p.parent.name.split("-")[0]: records.read_status(p.parent) for p in (tmp_path / "runs").glob("*/*/status.json")
    }
    assert states["Fine"].state == "done" and states["Exploding"].state == "failed"
    error = states["Exploding"].error
    assert error.type == "ValueError" and error.line().startswith("ValueError: no weights for 10 classes (raised in")
    assert f'File "{source}"' in error.traceback and "perfsweep" not in error.traceback, error.traceback


def test_a_step_that_reads_no_model_has_no_samples_per_s_of_the_models_batch(user_module, tmp_path):
    user_module("nobatch", FAILS_AT_SEED_1)  # seed 0 builds: a step of 50 ms that reads no model
    result = here(tmp_path, "workload=nobatch.Step", "model.batch_size=16")
    assert result.returncode == 0, result.stdout + result.stderr
    (summary,) = [records.read_json(p) for p in (tmp_path / "runs").glob("*/*/summary.json")]
    assert "samples_per_s" not in summary and "batch_size" not in summary, summary
    header = next(line for line in result.stdout.splitlines() if "| compute ms |" in line)
    assert "samples/s" not in header, result.stdout


def test_a_step_s_summary_of_a_field_summary_json_has_not_fails_naming_it_and_the_fields(user_module, tmp_path):
    user_module("summed", FAILS_AT_SEED_1 + "\n    def summary(self, steps_per_s):\n        return {'result': 1.0}\n")
    result = here(tmp_path, "workload=summed.Step")
    assert result.returncode == 1, result.stdout + result.stderr
    (status,) = [records.read_status(p.parent) for p in (tmp_path / "runs").glob("*/*/status.json")]
    said = "summed.Step.summary returned 'result': a step's summary gives only samples_per_s, batch_size, output_type"
    assert status.error.type == "TypeError" and said in status.error.line(), status.error


def test_a_library_model_that_raises_as_it_is_built_fails_with_its_own_error_not_hydras(tmp_path):
    result = here(tmp_path, "model=torch.nn.Linear", "+model.kwargs.in_features=-1", "+model.kwargs.out_features=10")
    assert result.returncode == 1, result.stdout + result.stderr
    (status,) = [records.read_status(p.parent) for p in (tmp_path / "runs").glob("*/*/status.json")]
    assert status.error.type == "RuntimeError" and "negative dimension -1" in status.error.line(), status.error
    assert "InstantiationException" in status.error.traceback, "the whole chain stays in its traceback"


def test_a_step_that_raises_fails_its_run_with_the_users_frames(user_module, tmp_path):
    source = user_module("raising", FAULTY)
    result = here(tmp_path, "workload=raising.RaisingStep", "input_type=tensor", "memory_format=contiguous")
    assert result.returncode == 1, result.stdout + result.stderr
    (status,) = [records.read_status(p.parent) for p in (tmp_path / "runs").glob("*/*/status.json")]
    line = next(n for n, text in enumerate(FAULTY.splitlines(), 1) if "raise KeyError" in text)
    assert status.error.line() == f"KeyError: 'no batch 2' (raised in step (raising.py:{line}))"
    assert status.error.traceback.splitlines()[1].startswith(f'  File "{source}", line {line}, in step')


TAGGED = """
import torch


class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def forward(x):
    return x @ torch.ones(3, 4)
"""


def test_an_error_through_a_tensor_type_s_hook_is_placed_at_the_call_that_reached_it(user_module):
    """Every torch call on a Tagged tensor passes its __torch_function__: the matmul that failed is forward's."""
    source = user_module("tagged", TAGGED)
    import tagged

    with pytest.raises(RuntimeError) as raised:
        tagged.forward(torch.ones(2, 5).as_subclass(tagged.Tagged))
    lines = TAGGED.splitlines()
    call = next(n for n, text in enumerate(lines, 1) if "x @ torch.ones" in text)
    hook = next(n for n, text in enumerate(lines, 1) if "return super().__torch_function__" in text)
    said = user_targets.where(raised.value, (source.parent,))
    assert said == f"forward (tagged.py:{call}), through __torch_function__ (tagged.py:{hook})"


@pytest.mark.parametrize(
    ("step", "error", "said"),
    [
        ("Undermarked", "PhaseMarksError", "the step marked its clock 2 times in 1 steps. Each step calls"),
        ("Overmarked", "PhaseMarksError", "the step marked its clock more than 3 times in 1 steps. Each step calls"),
        ("IndexErrorOfItsOwn", "IndexError", "no batch 1"),
    ],
)
def test_a_step_that_marks_its_clock_wrongly_fails_saying_how(user_module, tmp_path, step, error, said):
    user_module("marks", FAULTY)
    args = [f"workload=marks.{step}", "input_type=tensor", "memory_format=contiguous", "warmup_steps=1", "steps=1"]
    result = here(tmp_path, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    (status,) = [records.read_status(p.parent) for p in (tmp_path / "runs").glob("*/*/status.json")]
    assert (status.error.type, status.error.message[: len(said)]) == (error, said)


def installed(site: Path, distribution: str, entry_points: str) -> None:
    """A package's metadata as pip installs it (its .dist-info with entry_points.txt), in a folder on sys.path."""
    info = site / f"{distribution}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.mark.slow
def test_an_installed_package_adds_options_by_entry_points(imagelib, tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    installed(
        site,
        "imagelib",
        "[perfsweep.input_types]\nmeta = imagelib.tensors:MetaImage\n\n"
        "[perfsweep.workloads]\nclipped = imagelib.steps:ClippedStep\n",
    )
    monkeypatch.syspath_prepend(str(site))
    help_text = launch_here("--help").stdout
    assert "input_type: cast, fastai_tensorbase, meta, " in help_text and "workload: clipped, " in help_text
    result = here(tmp_path, "workload=clipped", "input_type=tensor,meta", "memory_format=contiguous")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = cells(result.stdout, "input_type")
    assert [row["input_type"] for row in rows] == ["tensor", "meta"] and "clip ms" in rows[0]
    config = records.read_json(next((tmp_path / "runs" / "default").glob("clipped-*-meta-*/config.json")))["config"]
    assert config["input_type"]["_target_"] == "imagelib.tensors.MetaImage"
    assert config["workload"]["_target_"] == "imagelib.steps.ClippedStep" and config["workload"]["name"] == "clipped"


def test_a_name_claimed_twice_is_refused(imagelib, tmp_path, monkeypatch):
    """By two installed packages, by a package and perfsweep, or by a config dir and perfsweep."""
    site = tmp_path / "site"
    installed(site, "one", "[perfsweep.input_types]\nmeta = imagelib.tensors:MetaImage\n")
    installed(site, "two", "[perfsweep.input_types]\nmeta = two.tensors:Meta\ntensor = two.tensors:Plain\n")
    monkeypatch.syspath_prepend(str(site))
    conf = tmp_path / "perf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "resnet18.yaml").write_text("_target_: imagelib.models.SmallCNN\n")
    result = here(tmp_path, "--config-dir", str(conf), "input_type=meta")
    assert result.returncode == 2, result.stdout + result.stderr
    golden.says("refused: a name claimed twice", result.stderr, {tmp_path: "<tmp>"})


def test_a_package_installed_or_removed_between_two_plans_changes_the_next_plans_options(
    imagelib, tmp_path, monkeypatch
):
    """Plans read the installed options once per state of the import path, not once per process."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(PlanError, match="meta"):
        build_plan(["input_type=meta"])
    installed(site, "imagelib", "[perfsweep.input_types]\nmeta = imagelib.tensors:MetaImage\n")
    assert build_plan(["input_type=meta"]).runs[0].config.input_type._target_ == "imagelib.tensors.MetaImage"
    shutil.rmtree(site / "imagelib-0.1.dist-info")
    installed(site, "imagelib", "[perfsweep.input_types]\nmeta2 = imagelib.tensors:MetaImage\n")  # at its version
    assert build_plan(["input_type=meta2"]).runs[0].config.input_type._target_ == "imagelib.tensors.MetaImage"
    shutil.rmtree(site / "imagelib-0.1.dist-info")
    with pytest.raises(PlanError, match="meta"):
        build_plan(["input_type=meta2"])


@pytest.mark.slow
def test_fastais_loop_beside_the_plain_loop_lines_up_their_phases(tmp_path):
    pytest.importorskip("fastai")
    result = launch_here(
        "sweep=fastai_loop",
        "scale=smoke",
        "memory_format=contiguous",
        "repeats=1",
        "launcher=debug",
        "tracker.mode=disabled",
        f"runs_dir={tmp_path}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = cells(result.stdout, "input_type")
    loops = {(row["workload"], row["input_type"], row["cast_to_tensor"]): row for row in rows}
    assert set(loops) == {
        ("train_step", "tensorimage", "-"),
        ("fastai_step", "tensorimage", "True"),
        ("fastai_step", "tensorimage", "False"),
        ("train_step", "tensor", "-"),
    }
    assert all(float(row[f"{phase} ms"]) > 0 for row in rows for phase in ("data", "forward", "backward", "optimizer"))
    assert loops["train_step", "tensorimage", "-"]["vs train_step"] == "1.00x"
    assert all(
        loops["fastai_step", "tensorimage", cast]["vs train_step"].endswith("within-run") for cast in ("True", "False")
    )
    # CastToTensor hands the model a plain Tensor; without it the model sees (and returns) fastai's TensorImage
    assert loops["fastai_step", "tensorimage", "True"]["output type"] == "Tensor"
    assert loops["fastai_step", "tensorimage", "False"]["output type"] == "TensorImage"


@pytest.mark.slow
def test_runs_done_with_other_code_are_named_when_they_are_not_run_again(user_module, tmp_path):
    args = ["model=edited.Fine", "model.image_size=8", "input_type=tensor", "memory_format=contiguous"]
    user_module("edited", FAULTY)
    assert here(tmp_path, *args).returncode == 0
    again = here(tmp_path, *args)
    assert again.returncode == 0 and "other code" not in again.stderr, "the same code: nothing to say"
    user_module("edited", FAULTY + "\n# an edit\n")
    edited = here(tmp_path, *args)
    assert edited.returncode == 0, edited.stderr
    assert "1 of the runs already done measured other code than this launch's (what differs since: edited)" in (
        edited.stderr
    )
    assert "launch again into another folder (sweep_name=NAME)" in edited.stderr


def test_hydras_own_flags_take_an_import_path(imagelib):
    shown = launch_here("--cfg", "job", "model=imagelib.models.SmallCNN", "workload=imagelib.steps.ClippedStep")
    assert shown.returncode == 0, shown.stderr
    assert "  name: SmallCNN\n" in shown.stdout and "  _target_: imagelib.models.SmallCNN\n" in shown.stdout
    assert "  _target_: imagelib.steps.ClippedStep\n" in shown.stdout


def test_table_of_a_folder_of_sweeps_names_them(tmp_path):
    for sweep in ("first", "second"):
        write_model_run(tmp_path / "runs" / sweep, sweep, "resnet18", "contiguous", 100.0)
    result = launch_here("table", str(tmp_path / "runs"))
    assert result.returncode == 2 and "0 runs" not in result.stdout
    assert f"{tmp_path / 'runs'} holds sweeps, each a folder: first, second" in result.stderr
    run = tmp_path / "runs" / "first" / "resnet18-contiguous"
    result = launch_here("published", str(run))
    said = f"{run} is a run's folder, of the sweep {tmp_path / 'runs' / 'first'}: name the sweep's folder"
    assert result.returncode == 2 and said in result.stderr, result.stderr


@pytest.mark.slow
def test_a_launch_into_a_folder_named_by_its_sweep_alone_is_told_what_else_it_holds(tmp_path):
    first = here(tmp_path, "model=tiny_cnn", "input_type=tensor", "memory_format=contiguous")
    assert first.returncode == 0 and "warning" not in first.stderr, first.stderr
    again = here(tmp_path, "model=tiny_cnn", "input_type=tensor", "memory_format=contiguous")
    assert again.returncode == 0 and "warning" not in again.stderr, "the same runs: nothing else there"
    other = here(tmp_path, "model=tiny_cnn", "input_type=subclass", "memory_format=contiguous")
    assert other.returncode == 0, other.stderr
    assert "holds 1 run of earlier launches that this one does not plan" in other.stderr
    assert "sweep_name=NAME gives a launch a folder of its own" in other.stderr


def test_the_snapshot_holds_the_launchs_folder_as_runs_import_it(tmp_path, monkeypatch):
    """Modules, packages and namespace packages of the folder, a symlink by its own name; data and a module named
    as Python's own said so; and each module's hash, which changes with it alone."""
    from perfsweep.launcher import snapshot

    project = tmp_path / "project"
    for path, text in {"model.py": "A = 1\n", "pkg/__init__.py": "", "ns/part.py": "B = 2\n", "random.py": ""}.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    (project / "alias").symlink_to(project / "ns")
    (project / "notes").mkdir()  # no module of its own: not a package
    monkeypatch.setattr(snapshot, "MAX_BYTES", 2**10)
    (project / "pkg" / "weights.bin").write_bytes(b"\0" * (snapshot.MAX_BYTES + 1))
    first = snapshot.snapshot(tmp_path / "code", set(), here=project)
    copied = sorted(str(p.relative_to(first.folder)) for p in first.folder.rglob("*.py") if "perfsweep" not in p.parts)
    assert copied == ["alias/part.py", "model.py", "ns/part.py", "pkg/__init__.py", "random.py"]
    assert first.shadowing == ("random",)
    kept = records.read_json(first.folder / "perfsweep" / "user_code.json")
    assert kept["pkg"]["left_out"] == [str(project / "pkg" / "weights.bin")]
    (project / "model.py").write_text("A = 2\n")
    second = snapshot.snapshot(tmp_path / "code", set(), here=project)
    assert {m for m in first.modules if first.modules[m] != second.modules[m]} == {"model"}


def test_a_stop_that_comes_as_the_batch_factory_is_tried_stops_the_run():
    """The run's time limit or the launch's budget may fire inside the user's batch factory: it is not their error."""

    def factory(batch, device):
        raise records.BudgetSpent("launcher.budget_s: the launch's budget ran out")

    with pytest.raises(records.BudgetSpent):
        user_targets._sample_inputs(factory)


def test_resume_plans_a_sweep_of_the_users_step_under_the_names_it_planned(imagelib, tmp_path):
    """runs.jsonl keeps a config's keys sorted; the run's name keeps its step's axes in their declared order."""
    plan = build_plan(
        [
            "model=imagelib.models.SmallCNN",
            "workload=imagelib.steps.ClippedStep",
            "input_type=tensor,subclass",
            f"runs_dir={tmp_path / 'runs'}",
        ]
    )
    plan.sweep_dir.mkdir(parents=True)
    records.write_planned(plan.sweep_dir, {spec.name: spec.record_line() for spec in plan.runs})
    resumed = recorded_plan(plan.sweep_dir)
    assert sorted(spec.name for spec in resumed.runs) == sorted(spec.name for spec in plan.runs)


def test_a_users_step_that_reads_the_model_is_refused_a_size_of_0_but_not_a_model_name_of_its_own(imagelib, tmp_path):
    result = here(
        tmp_path, "model=imagelib.models.SmallCNN", "workload=imagelib.steps.ClippedStep", "model.batch_size=0"
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "model.batch_size=0 must be positive" in result.stderr
    assert not (tmp_path / "runs").exists(), "refused before anything was written"
    own = build_plan(["workload=imagelib.steps.ClippedStep", "model.name=its_own_net", "repeats=1"]).runs[0]
    assert checks.problems(own.config) == [], "a step may build its own model: its name is its own"


@pytest.mark.slow
def test_a_compiled_side_that_ran_eagerly_is_flagged_and_its_pair_is_not(user_module, tmp_path):
    user_module("tagged", Path(untraceable.__file__).read_text())
    result = here(
        tmp_path,
        "model=tiny_cnn",
        "compile=default",
        "compile.backend=aot_eager",  # the compile path without inductor's C++ build
        "warmup_steps=2",
        "input_type=tensor,tagged.Tagged",
        "memory_format=contiguous",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    flagged = [line for line in result.stdout.splitlines() if line.startswith("NOT COMPILED")]
    assert len(flagged) == 1 and "-Tagged-" in flagged[0], result.stdout
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("|") and "NOT COMPILED" in line]
    assert "Tagged" in row, "the side that ran eagerly, in the table too"
    assert "Unsupported tensor subclass overridden attribute access" in flagged[0]
