"""The example project (examples/imagelib), copied outside the clone beside a train.py, records.py, conf/ and
analysis/ of its own, sweeps its model, tensor type and step from its own config dir with the perfsweep command,
as its user would: no file of perfsweep changed, nothing of perfsweep's shadowed."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfsweep import records
from tests.helpers import EXAMPLE, ROOT, SMALL, cells

PERFSWEEP = Path(sys.executable).parent / "perfsweep"  # the command `pip install` gives
# What a user's project often has beside its package: modules and folders named as perfsweep's stages are.
SHADOWS = {
    "train.py": "raise ImportError('the project\\'s own train.py was imported')\n",
    "records.py": "raise ImportError('the project\\'s own records.py was imported')\n",
    "conf/__init__.py": "raise ImportError('the project\\'s own conf/ was imported')\n",
    "analysis/__init__.py": "raise ImportError('the project\\'s own analysis/ was imported')\n",
}


@pytest.fixture
def project(tmp_path_factory) -> Path:
    """The example project copied outside the clone, with a train.py, records.py, conf/ and analysis/ of its own."""
    folder = tmp_path_factory.mktemp("outside") / "imagelib"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", "runs"))
    for name, text in SHADOWS.items():
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(text)
    assert not folder.is_relative_to(ROOT)
    return folder


CLIPPED_PHASES = ("data", "forward", "backward", "clip", "optimizer", "step")  # imagelib's step, and the whole step


def perfsweep(project: Path, *args: str, wait: bool = True):
    """The perfsweep command, run in the project's folder as its user runs it."""
    command = [str(PERFSWEEP), "--config-dir", "perf", *args]
    env = {**os.environ, "PYTHONPATH": ""}  # the project is found as the working directory, nothing else
    if not wait:
        return subprocess.Popen(
            command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_example_sweeps_its_model_and_tensor_type_with_its_sweep_file_from_outside_the_clone(project):
    result = perfsweep(project, "sweep=imagelib", *SMALL)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = cells(result.stdout, "memory_format")
    assert {(row["memory_format"], row["input_type"], row["output type"]) for row in rows} == {
        (memory_format, *types)
        for memory_format in ("contiguous", "channels_last")
        for types in (("tensor", "Tensor"), ("metaimage", "MetaImage"))
    }
    assert all(row["vs tensor"] == "1.00x" for row in rows if row["input_type"] == "tensor")
    assert "input_type._target_" not in rows[0], "a _target_ is shown by its option's name"
    assert "imagelib's README, MetaImage against a plain Tensor | published: " in result.stdout
    sweep = project / "runs" / "imagelib"
    assert (sweep / records.PUBLISHED).read_text() == (EXAMPLE / "perf/sweeps/published/imagelib.yaml").read_text()
    (snapshot,) = (sweep / ".code").iterdir()
    for run in sweep.glob("*/config.json"):
        config = records.read_json(run)["config"]
        assert config["model"]["_target_"] == "imagelib.models.SmallCNN" and config["model"]["kwargs"] == {"width": 16}
        code = records.read_json(run.parent / records.ENV)["user_code"]["imagelib"]
        assert code["source"] == str(project / "imagelib") and code["copied"]
        assert code["imported_from"] == str(snapshot / "imagelib"), "runs import the launch's copy"
        assert str(snapshot / "imagelib" / "models.py") in code["files"]


def _first_run_done(sweep: Path, launched: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while not any(records.read_status(p.parent).state == "done" for p in sweep.glob("*/status.json")):
        assert launched.poll() is None and time.monotonic() < deadline, launched.communicate()
        time.sleep(0.2)


# A model in a module of the project's folder that imports another module of it: its code is copied as it is.
WIDE = {
    "blocks.py": "import torch\n\n\ndef block(width):\n    return torch.nn.Conv2d(3, width, 3)\n",
    "wide.py": (
        "import torch\n\nfrom blocks import block\n\n\nclass Wide(torch.nn.Sequential):\n"
        "    def __init__(self, num_classes=10):\n"
        "        super().__init__(block(8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), "
        "torch.nn.Linear(8, num_classes))\n"
    ),
}


@pytest.mark.slow
def test_the_example_sweeps_its_own_step_and_an_edit_mid_sweep_reaches_no_later_run(project):
    """Each run a new interpreter (launcher.isolation=spawn), which imports the project's code: the launch's copy.
    The step's file and a module its model imports are broken once the first run is done, and the second runs them
    as they were at launch."""
    for name, text in WIDE.items():
        (project / name).write_text(text)
    args = ["sweep=imagelib_step", "model=wide.Wide", *SMALL, "launcher.isolation=spawn"]
    launched = perfsweep(project, *args, wait=False)
    sweep = project / "runs" / "imagelib_step"
    _first_run_done(sweep, launched)
    for edited in (project / "imagelib" / "steps.py", project / "blocks.py"):
        edited.write_text("raise RuntimeError('edited after the launch')\n")
    out, err = launched.communicate(timeout=600)
    assert launched.returncode == 0, out + err
    rows = cells(out, "input_type")
    assert [row["input_type"] for row in rows] == ["tensor", "metaimage"]
    assert all(float(row[f"{phase} ms"]) > 0 for row in rows for phase in CLIPPED_PHASES)
    assert rows[0]["vs tensor"] == "1.00x" and rows[1]["vs tensor"].endswith("within-run")
    assert [p.parent.name.split("-")[0] for p in sorted(sweep.glob("*/status.json"))] == ["clipped_step"] * 2
