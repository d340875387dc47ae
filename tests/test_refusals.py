"""Bad input is refused before anything is written or submitted: exit status 2, the bad value named with what is
allowed, no traceback, and nothing already recorded touched."""

import pytest

import records
from tests.helpers import launch, launch_here
from tests.test_faults import FAST


def _refused(result, *expected: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "perfsweep: nothing was run" in result.stderr and "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ("steps=[", "no viable alternative at input '['"),
        ("model=resnet18,,resnet50", "extraneous input ','"),
        ("workload.size=8)", "extraneous input ')' expecting <EOF>"),
        ("sweep_name=é", "a character its grammar does not take unquoted ('é', character 12)"),
    ],
)
def test_an_override_hydra_cannot_read_is_named_and_refused(tmp_path, override, reason):
    result = launch_here(override, f"runs_dir={tmp_path}")
    _refused(result, f"{override!r} cannot be read: {reason}", "KEY=a,b (a sweep)")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("launcher.max_array_size=-1", "launcher.max_array_size=-1 must be 1 or more"),
        ("launcher.gpus_per_node=-1", "launcher.gpus_per_node=-1 must be 0 or more"),
        ("threads=0", "threads=0 must be 1 or more (or null"),
        ("threads=-2", "threads=-2 must be 1 or more (or null"),
        ("launcher.timeout_min=0", "launcher.timeout_min=0 must be positive"),
        ("launcher.timeout_min=inf", "launcher.timeout_min=inf must be positive and at most 525600 (a year)"),
        ("launcher.timeout_retries=-1", "launcher.timeout_retries=-1 must be 0 or more"),
        ("launcher.wait=false", "launcher.wait=false with launcher=local"),
        ("launcher=debug launcher.wait=false", "wait=false is for launcher=slurm"),
    ],
)
def test_a_value_out_of_range_is_refused(tmp_path, override, message):
    _refused(launch_here(*FAST, *override.split(), f"runs_dir={tmp_path}"), message)
    assert not any(tmp_path.iterdir())


def test_an_unknown_model_preset_says_how_to_ask_for_any_model_by_name(tmp_path):
    result = launch_here("model=convnext_small", f"runs_dir={tmp_path}")
    _refused(result, "Could not find 'model/convnext_small'", "model.name=convnext_small model.source=timm")


def test_a_control_character_in_a_path_never_reaches_a_job_script(tmp_path):
    """A newline in runs_dir would end the #SBATCH block and run the rest as a command on the node."""
    runs_dir = f"{tmp_path}/sl\ntouch {tmp_path}/PWNED\n"
    result = launch_here(*FAST, "launcher=slurm", "launcher.max_array_size=8", f"runs_dir='{runs_dir}'")
    _refused(result, f"runs_dir={runs_dir!r} holds a control character")
    assert not any(tmp_path.iterdir())
    # the same newline from the working directory that runs_dir is relative to
    odd = tmp_path / "work\ndir"
    odd.mkdir()
    result = launch(*FAST, "launcher=slurm", "launcher.max_array_size=8", cwd=odd)
    _refused(result, f"the sweep folder {str(odd / 'runs' / 'default')!r} (runs_dir in the working directory)")
    assert list(odd.iterdir()) == []


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


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["-"], "'-' cannot be read"),
        (["--cfg", "job", "steps=["], "'steps=[' cannot be read"),
        (["launcher.gpus=${steps}"], "int is not a ListConfig"),
        (["launcher.sbatch_extra=${steps}"], "Cannot assign int to Dict"),
        (["steps=???"], "steps=???: ??? leaves a value missing"),
        (["model.name=???"], "model.name=???: ??? leaves a value missing"),
    ],
)
def test_what_the_property_based_tests_found_is_refused(tmp_path, words, message):
    result = launch_here("steps=1", *words, "launcher.wait=false", f"runs_dir={tmp_path}")
    _refused(result, message)
    assert not any(tmp_path.iterdir())
