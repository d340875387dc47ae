"""Pytest's fixtures and hooks: the one real local sweep that several files read, the local Slurm cluster, a tiny
plan from the real conf/, the example project's package and modules of the user's own made importable, W&B offline
in every test, the GPU skip, and the property-based tests' tally. Plain helpers (launches, the tiny config, ROOT...)
are in tests/helpers.py."""

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Three workers share two cores (pyproject.toml), and the torch threads of a run wait for each other in OpenMP. Spinning
# while the thread they wait for was descheduled, a sweep of tiny runs took six times the CPU it takes alone; waiting
# passively, they sleep. OpenMP reads this once, when torch loads it: before the imports below. Jobs inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402
from filelock import FileLock  # noqa: E402

from perfsweep.bench.gitrepo import SLEEP  # noqa: E402
from perfsweep.sweeps.plan import build_plan  # noqa: E402
from tests.helpers import (  # noqa: E402
    EXAMPLE,
    FAKE_KEY,
    HF_TOKEN,
    ROOT,
    SECRET,
    SLOW,
    TINY,
    TRIED,
    launch,
    launch_here,
    offline_wandb,
)


def pytest_report_header(config):
    """The machine the suite's time depends on, in its header: timings of the suite name their machine."""
    from perfsweep.records.noise import cpu_model

    return f"machine: {cpu_model()}, {os.cpu_count()} CPUs; torch {torch.__version__}"


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["tried"] = dict(TRIED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    TRIED.update(getattr(node, "workeroutput", {}).get("tried", {}))


def pytest_terminal_summary(terminalreporter):
    if TRIED:
        terminalreporter.section("generated inputs tried, per reader (property-based tests)")
        for reader, count in sorted(TRIED.items()):
            terminalreporter.line(f"{count:>6}  {reader}")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    skip = None if torch.cuda.is_available() else pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "local_sweep" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)  # the main job's sweep takes about 35 s
        if skip and "gpu" in item.keywords:
            item.add_marker(skip)
    # Each worker takes a file at a time, so a long file taken last holds up the end of the run.
    # The Slurm tests run one after another and take the longest: a worker starts them first.
    # The other files follow by their count of slow tests, the most first.
    slow: dict[str, int] = {}
    for item in items:
        slow[item.path.name] = slow.get(item.path.name, 0) + ("slow" in item.keywords)
    items.sort(key=lambda item: (item.path.name != "test_slurm.py", -slow[item.path.name]))


@pytest.fixture(autouse=True)
def _offline_wandb(monkeypatch, tmp_path):
    offline_wandb(monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def slurm_cluster() -> dict[str, str]:
    """The project's one-node Slurm cluster (scripts/slurm-local), started if it is not up.

    Skipped where it cannot start, except in CI, where the Slurm tests must run.
    """
    up = subprocess.run(["bash", str(ROOT / "scripts" / "slurm-local"), "up"], capture_output=True, text=True)
    if up.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"the local Slurm cluster did not start in CI:\n{up.stdout}\n{up.stderr}")
        pytest.skip(f"no local Slurm cluster here (scripts/slurm-local up failed: {up.stderr.strip()[-300:]})")
    conf = subprocess.run(["bash", str(ROOT / "scripts" / "slurm-local"), "env"], capture_output=True, text=True)
    return {"SLURM_CONF": conf.stdout.strip().split("=", 1)[1]}


@pytest.fixture
def imagelib(monkeypatch):
    """The example's package importable in this process, as a project's working directory makes it; forgotten by
    the import system afterwards."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    yield EXAMPLE
    for name in [n for n in sys.modules if n == "imagelib" or n.startswith("imagelib.")]:
        del sys.modules[name]


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write a module of the user's own into a folder on sys.path; forgotten by the import system afterwards."""
    written = []
    monkeypatch.syspath_prepend(str(tmp_path / "user"))

    def write(name: str, text: str) -> Path:
        path = tmp_path / "user" / f"{name}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        written.append(name)
        return path

    yield write
    for name in written:
        sys.modules.pop(name, None)


@pytest.fixture
def sleeping_steps(tmp_path, monkeypatch) -> Iterator[list[str]]:
    """SLOW's step, importable here and in the launches started from here.

    PYTHONPATH carries it to them.
    """
    folder = tmp_path / "slow"
    folder.mkdir()
    (folder / "slow_steps.py").write_text(SLEEP.format(ms=20))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
    yield SLOW
    sys.modules.pop("slow_steps", None)


@pytest.fixture
def tiny_plan(tmp_path):
    """Plan a tiny sweep from the real configs, into a temporary runs folder, W&B off: a test of W&B asks for
    tracker.mode=offline, as its start costs each run in-process about half a CPU-second."""

    def plan(*overrides: str):
        return build_plan([*TINY, "tracker.mode=disabled", f"runs_dir={tmp_path / 'runs'}", *overrides])

    return plan


def once_a_session(tmp_path_factory, name: str, make: Callable[[Path], Any]) -> Any:
    """What `make(folder)` returned (JSON), made once for all of pytest's workers, in a folder they share: the first
    to ask makes it, while the others wait."""
    mine = tmp_path_factory.getbasetemp()
    shared = mine.parent if os.environ.get("PYTEST_XDIST_WORKER") else mine  # the session's, which workers share
    made = shared / f"{name}.json"
    with FileLock(f"{made}.lock"):
        if not made.is_file():
            made.write_text(json.dumps(make(shared / name)))
    return json.loads(made.read_text())


@pytest.fixture(scope="session")
def local_sweep(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, subprocess.CompletedProcess, dict]:
    """The one real process-per-run sweep (pairing=process), then its report.

    It is three tiny runs, two at a time, each pinned to one of two listed GPU ids.
    A CPU host runs them on its CPU all the same.
    They go through submitit's local executor, W&B offline.
    It is launched as a user would, with a (fake) W&B key and a secret in the environment.
    A launcher setting holds a (fake) token.
    Read only.
    It is launched once for all of pytest's workers: the first to ask launches it, while the others wait.
    A user's sweep is launched once, however many read it.
    """
    sweep, result, report, env = once_a_session(
        tmp_path_factory, "local", lambda folder: _launch_local_sweep(folder / "runs")
    )
    return Path(sweep), subprocess.CompletedProcess(*result), subprocess.CompletedProcess(*report), env


def _launch_local_sweep(runs: Path) -> tuple[str, tuple, tuple, dict]:
    env = {"WANDB_API_KEY": FAKE_KEY, "MY_SERVICE_TOKEN": SECRET, "WANDB_MODE": "offline"}
    env.update({k: str(runs.parent / k.lower()) for k in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")})
    args = ["-m", *TINY, "input_type=tensor,subclass,tensorbase", "memory_format=contiguous", "pairing=process"]
    args += ["launcher.parallelism=2", "launcher.gpus=[0,1]"]  # pinned to listed GPUs (ids only, without a GPU)
    args += [f'launcher.setup=["export HF_TOKEN={HF_TOKEN}"]']
    result = launch(*args, f"runs_dir={runs}", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = launch("report", str(runs / "default"), env=env)
    assert report.returncode == 0, report.stderr
    done = [(p.args, p.returncode, p.stdout, p.stderr) for p in (result, report)]
    return str(runs / "default"), *done, env


@pytest.fixture(scope="session")
def paired_sweep(tmp_path_factory) -> Path:
    """The default sweep's shape at a tiny size: three input types by two memory formats, each compared with its
    baseline, in two rounds; each round's six configurations are the sides of one process (pairing=auto), forked from
    a warm job of submitit's local executor. W&B off.
    Read only: copy it to change it.
    It is launched once for all of pytest's workers."""
    return Path(once_a_session(tmp_path_factory, "paired", _launch_paired_sweep))


def _launch_paired_sweep(runs: Path) -> str:
    tiny = [arg for arg in TINY if not arg.startswith("repeats=")]
    axes = ["input_type=tensor,subclass,tensorbase", "memory_format=contiguous,channels_last", "repeats=2"]
    result = launch_here(*tiny, *axes, "pairing=auto", "tracker.mode=disabled", f"runs_dir={runs}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return str(runs / "default")


@pytest.fixture(scope="session")
def env_dir(tmp_path_factory):
    """One cache for the session: each environment is built once, as a user's cache would keep it."""
    return tmp_path_factory.mktemp("envs")
