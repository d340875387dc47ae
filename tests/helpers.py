"""Plain helpers the test files share, importable as tests.helpers: the repository root, the tiny CPU config and
the device tests run on, launches in a fresh process or in this one, the input types that can run here and their
models' output types, a hand-made finished run, the two-run sweep where one fails, and fake secrets. Pytest's
fixtures and hooks are in tests/conftest.py."""

import collections
import contextlib
import io
import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from perfsweep import records
from perfsweep.records import lifecycle

ROOT = Path(__file__).resolve().parent.parent
# is_available() by NVML, as a forking job asks it: the CUDA runtime's check would leave this process unable to fork
# a child that uses the GPU (tests/test_isolation.py forks from it)
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
# Where tests' runs go with device=auto: the GPU where there is one (scripts/gpu-check tests runs them there).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# timm's smallest network at 32 px: a real model that trains a step in milliseconds on a CPU.
# One process per configuration (repeats=1) where a test is not about replication: a third of the default's runs.
TINY = ["model=test_resnet", "steps=3", "warmup_steps=1", "data_batches=2", "repeats=1"]
# A project of one's own that perfsweep times (docs/your-code.md), and a small sweep of it.
EXAMPLE = ROOT / "examples" / "imagelib"
SMALL = ["repeats=1", "steps=3", "warmup_steps=1", "tracker.mode=disabled"]


def input_types() -> list[str]:
    """Every registered input type that can run here (fastai's need fastai: CI installs it)."""
    from perfsweep.train import fastai_parts
    from perfsweep.train.catalog import INPUT_TYPES

    return [n for n, cls in sorted(INPUT_TYPES.items()) if not cls.needs_fastai or fastai_parts.installed()]


def output_type(input_type: str) -> str:
    """The type of a model's output for an input type, by torch's rule: a Tensor subclass whose
    __torch_function__ re-wraps results (a subclass's default) spreads through the network; a plain
    Tensor, or a subclass with __torch_function__ disabled, gives plain Tensors."""
    from perfsweep.train.inputs import get_input_type

    kind = get_input_type(input_type)
    cls = type(kind.before_model(kind.wrap(torch.zeros(1))))
    disabled = cls.__torch_function__ is torch._C._disabled_torch_function_impl
    return "Tensor" if cls is torch.Tensor or disabled else cls.__name__


# Inputs the property-based tests (test_records_fuzz.py, test_overrides_fuzz.py) tried, by what read them: printed at
# the end of every test run, a worker's (pytest-xdist) handed to the one that prints.
TRIED: collections.Counter = collections.Counter()


def write_model_run(sweep_dir, sweep, model, memory_format, samples_per_s, batch=8, replicate=None):
    """A done infer_step run of `model` whose forward phase runs at `samples_per_s` (20 steps, 1% jitter), as
    sweep `sweep` (its published figures are looked up by that name); a replicate where one is given."""
    name = f"{model}-{memory_format}" + (f"-replicate={replicate}" if replicate is not None else "")
    axes = {"model": model, "memory_format": memory_format}
    config = {"sweep": sweep, "model": {"name": model, "batch_size": batch}, "memory_format": {"name": memory_format}}
    if replicate is not None:
        axes, config = axes | {"replicate": str(replicate)}, config | {"seed": replicate}
    (sweep_dir / name).mkdir(parents=True)
    record = {"run_id": name, "axes": axes, "axis_order": list(axes)}
    record["baseline"] = {"axis": "memory_format", "value": "contiguous"}
    records.write_json(sweep_dir / name / records.CONFIG, record | {"config": config})
    forward_ms = 1000 * batch / samples_per_s * (1 + 0.01 * np.sin(np.arange(20)))
    steps = [
        {"data_ms": 0.0, "forward_ms": ms, "step_ms": ms, "warmup": False, "step": i} for i, ms in enumerate(forward_ms)
    ]
    records.write_steps(sweep_dir / name / records.STEPS, steps)
    median = float(np.median(forward_ms))
    medians = {"data_ms": 0.0, "forward_ms": median, "step_ms": median}
    summary = {"phases": ["data", "forward"], "median_ms": medians, "workload": "infer_step"}
    records.write_json(sweep_dir / name / records.SUMMARY, summary)
    lifecycle.finish(sweep_dir / name)


# Two runs that pass every plan check; the in_chans=4 one raises when it runs (torchvision takes 3 channels).
ONE_OF_TWO_FAILS = [
    "model=resnet18",
    "model.image_size=32",
    "model.batch_size=2",
    "model.in_chans=3,4",
    "input_type=tensor",
    "memory_format=contiguous",
    "tracker.mode=disabled",
]


def assert_one_of_two_failed(result: subprocess.CompletedProcess, sweep: Path) -> None:
    """The launch of ONE_OF_TWO_FAILS reported the failure, and the other run finished."""
    from perfsweep import records

    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout and "FAILED resnet18" in result.stdout
    assert "torchvision models take 3 input channels" in result.stdout
    by_channels = {
        records.read_json(p.parent / records.CONFIG)["config"]["model"]["in_chans"]: records.read_status(p.parent)
        for p in sweep.glob("*/status.json")
    }
    assert by_channels[3].state == "done"
    assert by_channels[4].state == "failed" and "Traceback" in by_channels[4].error.traceback


def launch(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run launch.py as a user would, in a fresh process: for what the process boundary is part of (local jobs,
    Slurm arrays, signals, W&B's own processes)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def launch_here(*args: str, monkeypatch: pytest.MonkeyPatch | None = None) -> subprocess.CompletedProcess:
    """launch.main in this process, its output captured: for what needs no fresh process (planning, checks,
    tables, the debug launcher's in-process runs). Environment changes go through `monkeypatch`."""
    from perfsweep import launch as entry

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = entry.main(list(args))
        except SystemExit as stopped:  # argparse's usage errors, as a process would exit
            code = stopped.code
    return subprocess.CompletedProcess(["perfsweep", *args], code, out.getvalue(), err.getvalue())


FAKE_KEY = "fakekey" + "0123456789abcdef" * 2  # a W&B key's length (40); never valid
SECRET = "s3cr3t-token-not-for-records"
HF_TOKEN = "hf_" + "notarealtoken" * 3  # in launcher.setup: kept in local records, never sent to W&B or reports


def cells(out: str, first: str) -> list[dict[str, str]]:
    """The rows of the table printed in `out` whose first column is `first`, as column -> cell."""
    lines = out[out.index(f"| {first} ") :].splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines[2:]))
    return [dict(zip(header, (cell.strip() for cell in row.strip("|").split("|")), strict=True)) for row in rows]
