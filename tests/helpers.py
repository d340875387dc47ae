"""Plain helpers the test files share, importable as tests.helpers.

- the repository root, the tiny CPU config and the device tests run on;
- launches in a fresh process or in this one, and a launcher started as a terminal's job;
- a plan's one run executed in this process, and its W&B records read back;
- the input types that can run here and their models' output types;
- hand-made finished runs and sweeps, and the two-run sweep where one fails;
- fake secrets.

Pytest's fixtures and hooks are in tests/conftest.py.
No test file imports another: what two share lives here.
"""

import collections
import contextlib
import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from perfsweep import records
from perfsweep.launcher.run_job import RunJob, Runner
from perfsweep.launcher.warm import fork_runs
from perfsweep.records import lifecycle
from perfsweep.sweeps.plan import build_plan
from perfsweep.train.instrumented import execute

ROOT = Path(__file__).resolve().parent.parent
# is_available() by NVML, as a forking job asks it: the CUDA runtime's check would leave this process unable to fork
# a child that uses the GPU (tests/test_isolation.py forks from it)
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
# Where tests' runs go with device=auto: the GPU where there is one (scripts/gpu-check tests runs them there).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# perfsweep's own small CNN at 32 px (train/own_models.py): a real model that trains a step in a millisecond on a CPU,
# and whose runs import neither timm nor torchvision.
# One process per configuration (repeats=1) where a test is not about replication: a third of the default's runs.
TINY = ["model=tiny_cnn", "steps=3", "warmup_steps=1", "data_batches=2", "repeats=1"]
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


# Two runs of a step of the user's own that waits 20 ms a step (the `sleeping_steps` fixture makes it importable).
# 150 steps last 3 s on any machine and cost little CPU: time to kill or interrupt one mid-way.
# One process per configuration (repeats=1): these tests are about faults, not replication.
SLOW = ["workload._target_=slow_steps.Step", "steps=150", "seed=0,1", "tracker.mode=disabled", "repeats=1"]


# A step of the user's own that cannot be built for seed 1; for seed 0, steps of 50 ms. It counts no FLOPs and reads
# no model, so its job imports neither torch._dynamo nor torchvision.
FAILS_AT_SEED_1 = """import time

import torch


class Step:
    phases = ("compute",)
    counts_flops = False
    reads = ()

    def __init__(self, cfg, device):
        if cfg.seed == 1:
            raise ValueError("this side cannot be built")
        self.a = torch.ones(1, device=device)

    def step(self, index, clock):
        clock.start()
        time.sleep(0.05)
        clock.mark()
        return self.a.sum()
"""


FAST = [
    "workload=pairwise_sum_prod",
    "workload.impl=broadcast",
    "workload.size=10",
    "steps=5",
    "warmup_steps=1",
    "repeats=1",
]


def wait_for(condition, what: str, timeout: float = 180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def as_in_a_terminal() -> None:
    """Ctrl-C's default, as a terminal gives it: a test run started in the background (`cmd &` in a script)
    hands its children SIGINT ignored, and Python then leaves it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def as_in_the_background() -> None:
    """SIGINT ignored, as a script's `cmd &` starts a command."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start_launcher(runs: Path, *args: str, background: bool = False) -> subprocess.Popen:
    """The launcher of SLOW (the `sleeping_steps` fixture) in a process group of its own.

    It is started as a terminal's foreground job, or as a script's background one."""
    command = [sys.executable, str(ROOT / "launch.py"), *SLOW, f"runs_dir={runs}", *args]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_in_the_background if background else as_in_a_terminal,
    )


def run(plan) -> tuple[Path, dict]:
    (spec,) = plan.runs
    run_dir = plan.sweep_dir / spec.name
    return run_dir, execute(spec, run_dir, tracker_id=f"t-{spec.run_id}", launch={"parallelism": 1})


def offline_wandb(patch: pytest.MonkeyPatch, folder: Path) -> None:
    """W&B offline, with its config, its cache and the artifacts it stages in `folder`."""
    patch.setenv("WANDB_MODE", "offline")
    patch.setenv("WANDB_CONFIG_DIR", str(folder / "wandb-config"))
    patch.setenv("WANDB_CACHE_DIR", str(folder / "wandb-cache"))
    patch.setenv("WANDB_DATA_DIR", str(folder / "wandb-data"))  # where artifacts are staged


def wandb_records(run_dir: Path) -> list[dict]:
    # `python -m wandb`: where wandb is installed with --target (a GPU machine's image), no script sits beside Python
    command = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_dir / "wandb")]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def write_run(sweep, name, input_type, memory_format, samples_per_s, state="done", host_step_ms=None):
    """A run's records with known figures; `host_step_ms` makes them a CUDA run's (event timer, host time
    apart from device time), written here as a GPU would write them: there is none on this machine."""
    run_dir = sweep / name
    run_dir.mkdir(parents=True)
    axes = {
        "model": "resnet18",
        "memory_format": memory_format,
        "precision": "fp32",
        "input_type": input_type,
        "compile": "eager",
    }
    config = {
        "model": {"name": "resnet18", "batch_size": 16, "image_size": 32},
        "input_type": {"name": input_type},
        "memory_format": {"name": memory_format},
        "steps": 20,
    }
    baseline = {"axis": "input_type", "value": "tensor"}
    order = list(axes)
    record = {"run_id": name, "name": name, "axes": axes, "axis_order": order, "baseline": baseline, "config": config}
    records.write_json(run_dir / records.CONFIG, record)
    if state == "done":
        phases = ("data", "forward", "backward", "optimizer")
        step_ms = 1000 * 16 / samples_per_s
        host_ms = host_step_ms or step_ms
        medians = {f"{p}_ms": step_ms / 4 for p in phases} | {"step_ms": step_ms}
        medians |= {f"{p}_host_ms": host_ms / 4 for p in phases} | {"step_host_ms": host_ms}
        records.write_json(
            run_dir / records.SUMMARY,
            {
                "phases": ["data", "forward", "backward", "optimizer"],
                "median_ms": medians,
                "samples_per_s": samples_per_s,
                "steps_per_s": samples_per_s / 16,
                "output_type": "Tensor",
                "timer": "cuda_event" if host_step_ms else "perf_counter",
            },
        )
        rows = []
        for i in range(20):
            jitter = 1 + 0.001 * (i % 3 - 1)
            rows.append({f"{p}_ms": step_ms / 4 * jitter for p in phases} | {"step_ms": step_ms * jitter})
            rows[-1] |= {"warmup": False, "step": i}
        records.write_steps(run_dir / records.STEPS, rows)
        lifecycle.finish(run_dir)
    else:
        lifecycle.fail(run_dir, error={"type": "OutOfMemoryError", "message": "CUDA out of memory"})


# What a training run writes beside its medians (as train/instrumented.py writes them on a CPU), and its environment,
# on a GPU that b shared with another process.
MEASURED = {
    "workload": "train_step",
    "steps": 20,
    "window_s": 3.2,
    "window_ended_at": 1795578698.665,
    "batch_size": 16,
    "params": 373658,
    "loss_first": 2.33,
    "loss_last": 2.24,
    "nonfinite_losses": 0,
    "host_syncs_per_step": None,
    "flops_per_step": 1559586816,
    "tflops_per_s": 0.0108,
    "peak_tflops": None,
    "peak_memory_mib": 858.7,
    "peak_memory_kind": "process_max_rss",
    "clocks": {when: {"mhz": 2596.1, "source": "cpu_mhz", "temperature_c": None} for when in ("start", "end")},
    "neighbours": {when: {"gpu_processes": None, "loadavg": [1.9, 1.3, 0.7]} for when in ("start", "end")},
}


ENV = {
    "cpu": "AMD EPYC",
    "torch_threads": 2,
    "packages": {"torch": "2.14.1", "timm": "1.0.31", "wandb": None},
    "gpu": {"name": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "uuid": "GPU-0", "memory_gib": 79.2},
    "cuda": "13.0",
    "cudnn": 92400,
    "code": {"commit": "37ba291", "dirty": False},
}


def write_sweep(folder):
    """Two done runs, a and b (its baseline a), with every record as a launch and its runs write them; W&B off."""
    for name, input_type, samples_per_s in (("a", "tensor", 100.0), ("b", "subclass", 60.0)):
        write_run(folder, name, input_type, "contiguous", samples_per_s)
        config = records.read_json(folder / name / records.CONFIG)
        config["config"]["tracker"] = {"mode": "disabled"}
        config["repro"] = [f"input_type={input_type}", "memory_format=contiguous", "repeats=1"]
        records.write_json(folder / name / records.CONFIG, config)
        summary = records.read_json(folder / name / records.SUMMARY) | MEASURED
        if name == "b":
            summary["neighbours"]["end"] = {"gpu_processes": [{"pid": 7, "name": "other", "used_mib": 512}]}
        records.write_json(folder / name / records.SUMMARY, summary)
        records.write_json(folder / name / records.ENV, ENV)
        earlier = {"state": "failed", "started_at": records.now(), "error": "LostRun", "message": "job 1 ended"}
        timing = {"startup_s": 0.4, "warmup_s": 1.0, "window_s": 3.2, "records_s": 0.2}
        lifecycle.finish(folder / name, job_id=f"DEBUG_{name}", pid=8012, attempts=[earlier], timing=timing)
    planned = {name: records.read_json(folder / name / records.CONFIG) for name in ("a", "b")}
    records.write_planned(folder, {name: records.json_line(row) for name, row in planned.items()})
    runs = {name: row["run_id"] for name, row in planned.items()}
    launch = {"at": records.now(), "argv": ["input_type=tensor,subclass"], "runs": list(runs)}
    manifest = {"uid": "0f0f0f0f", "created_at": records.now(), "runs": runs, "launches": [launch]}
    records.write_json(folder / records.SWEEP, manifest)
    job = {"log": "/runs/.submitit/DEBUG_0_log.out", "launcher": "debug", "submitted_at": records.now()}
    records.write_json(folder / records.JOBS, {name: {"job_id": f"DEBUG_{name}", **job} for name in runs})
    return folder


def record_done(spec, run_dir, tracker_id, launch):
    run_dir.mkdir(parents=True, exist_ok=True)
    lifecycle.finish(run_dir, pid=os.getpid())


def touch_cuda(spec, run_dir, tracker_id, launch):
    torch.zeros(1, device="cuda")
    record_done(spec, run_dir, tracker_id, launch)


def fork_two(runs_dir: str) -> set[str]:
    """Two runs that use the GPU, forked from this process as a warm job forks them; their final states."""
    plan = build_plan([*FAST, "seed=0,1", f"runs_dir={runs_dir}"])
    runs = [RunJob(spec, Path(runs_dir) / spec.name, "id", 1) for spec in plan.runs]
    states = fork_runs(Runner(touch_cuda), runs, 1, (), {})
    assert not torch.cuda.is_initialized(), "a child's CUDA stays in the child"
    return set(states.values())


EXAMPLES = int(os.environ.get("PERFSWEEP_FUZZ_EXAMPLES", "50"))


# what changes with the index and the machine: the latest releases, and this Python
UNSTABLE = {re.compile(r"the latest: .*"): "the latest: <versions>", re.compile(r"CPython [\d.]+ [\w-]+"): "<this>"}
