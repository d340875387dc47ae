"""A generated git repository of a small package, steplib, whose training step gets slower at a known commit.

steplib's step multiplies a matrix by itself `PRODUCTS` times.
From commit `planted` on (1-based), it does `factor` times as many products: a step `factor` times as costly.
Or it waits (`sleep_ms`), `factor` times as long from that commit on.
Every commit changes a file, so each has code of its own; only the planted one changes the cost.

The history bench and tests launch a sweep per commit of it, and bisect over it.
"""

import subprocess
from pathlib import Path

PRODUCTS = 10  # matrix products per step before the planted commit
SIZE = 192  # the matrix's side: a step of milliseconds, not of Python overhead

STEP = '''"""steplib's training step: products of a matrix with itself."""

import torch

PRODUCTS = {products}
SIZE = {size}


class Step:
    phases = ("compute",)
    reads = ()  # no model, input or precision

    def __init__(self, cfg, device):
        generator = torch.Generator().manual_seed(cfg.seed)
        self.a = (torch.randn(SIZE, SIZE, generator=generator) / SIZE**0.5).to(device)

    def step(self, index, clock):
        clock.start()
        x = self.a
        for _ in range(PRODUCTS):
            x = x @ self.a
        clock.mark()
        return x.sum()
'''

SLEEP = '''"""steplib's training step: a wait of known length, a cost that no neighbour's load changes much."""

import time

import torch

MS = {ms}


class Step:
    phases = ("compute",)
    counts_flops = False  # a wait does none
    reads = ()  # no model, input or precision: its job imports no model zoo

    def __init__(self, cfg, device):
        self.a = torch.ones(1, device=device)

    def step(self, index, clock):
        clock.start()
        time.sleep(MS / 1000)
        clock.mark()
        return self.a.sum()
'''

PYPROJECT = """[project]
name = "steplib"
version = "0.{commit}.0"

[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
"""

TARGET = "workload._target_=steplib.step.Step"  # the override that times steplib's step


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    """Run git in `repo` as steplib's author; a commit made at `date` (ISO 8601) where given."""
    who = {"NAME": "steplib", "EMAIL": "steplib@example.invalid"}
    env = {f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER") for key, value in who.items()}
    env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def generate(
    repo: Path, commits: int = 16, planted: int | None = 11, factor: float = 1.2, sleep_ms: float | None = None
) -> list[str]:
    """Make `repo` with `commits` commits, the step `factor` times as costly from commit `planted` on.

    planted=None plants nothing.
    With `sleep_ms`, the step waits that long (`factor` times as long from `planted` on) in place of its products.
    A test that checks the machinery, not the measuring, needs a cost the suite's own load cannot blur.

    Returns:
        The commits' hashes, oldest first.
    """
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "steplib").mkdir()
    (repo / "steplib" / "__init__.py").write_text('"""steplib: a small package with a training step."""\n')
    hashes = []
    for commit in range(1, commits + 1):
        slower = planted is not None and commit >= planted
        scale = factor if slower else 1.0
        products = STEP.format(products=round(PRODUCTS * scale), size=SIZE)
        step = SLEEP.format(ms=sleep_ms * scale) if sleep_ms else products
        (repo / "steplib" / "step.py").write_text(step)
        (repo / "pyproject.toml").write_text(PYPROJECT.format(commit=commit))
        (repo / "NOTES").write_text(f"commit {commit}\n")
        _git(repo, "add", "-A")
        subject = f"commit {commit}: " + ("the step does more products" if slower and commit == planted else "notes")
        date = f"2026-01-{commit:02d}T12:00:00+00:00"  # one a day, in order
        _git(repo, "commit", "-q", "-m", subject, date=date)
        hashes.append(_git(repo, "rev-parse", "HEAD"))
    return hashes
