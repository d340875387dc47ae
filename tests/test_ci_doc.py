"""docs/ci.md's scripts, as written there: the per-push one at each commit of a generated repository, and the pull
request's comment, posted with a stand-in for GitHub's command-line tool.

A push's job runs it in the checkout of its commit, with the CI's variables set; here each commit is checked out in
turn. The workflows' YAML around it needs a GitHub or GitLab runner and is not run.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfsweep.bench.gitrepo import TARGET, generate
from perfsweep.records import load_sweep
from tests import synthetic
from tests.helpers import ROOT, launch_here

SWEEP = [TARGET, "steps=6", "warmup_steps=1", "repeats=1"]  # its step, a wait, reads no model, input or precision


def per_push_script() -> str:
    """The script docs/ci.md gives, from its first line (`# ci/perf.sh`) to the end of its block."""
    text = (ROOT / "docs" / "ci.md").read_text()
    return re.search(r"```shell\n(# ci/perf\.sh.*?)```", text, re.DOTALL)[1]


@pytest.mark.slow
def test_the_per_push_script_records_each_commit_and_gates_on_the_planted_step(tmp_path):
    repo, runs = tmp_path / "repo", tmp_path / "runs"
    hashes = generate(repo, commits=4, planted=3, factor=10.0, sleep_ms=10.0)
    (tmp_path / "perf.sh").write_text(per_push_script())
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PERF_RUNS": str(runs)}
    # launcher=debug: each push's runs in its launch's process, which spares the suite a job's start-up a push
    overrides = [*SWEEP, "threads=1", "tracker.mode=disabled", "launcher=debug"]
    env |= {"PERF_SWEEP": " ".join(overrides), "GITHUB_ACTIONS": "true"}
    statuses, said = [], []
    for index, commit in enumerate(hashes, 1):
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", commit], check=True)
        pushed = env | {"GITHUB_SHA": commit, "GITHUB_RUN_ID": str(100 + index), "GITHUB_REF_NAME": "main"}
        done = subprocess.run(["bash", str(tmp_path / "perf.sh")], cwd=repo, env=pushed, capture_output=True, text=True)
        statuses.append(done.returncode)
        said.append(done.stdout)
    assert statuses == [0, 0, 0, 1], done.stdout[-3000:] + done.stderr[-3000:]
    assert "not enough history: 1 point;" in said[0] and "perfsweep: no regression flagged" in said[0], said[0]
    assert "a confirmed regression" in done.stdout
    planted = rf"change points: {hashes[1][:8]}\.\.{hashes[2][:8]} \((?:[4-9]|1\d)\.\d\dx"  # the 10x wait
    assert re.search(planted, done.stdout), done.stdout
    first = load_sweep(runs / f"commit-{hashes[0][:12]}")[0].status
    assert first.code_under_test["commit"] == hashes[0] and first.code_under_test["repository"] == str(repo)
    assert first.code_under_test["chosen_by"] == "imports" and first.code_under_test["dirty"] is False
    assert first.ci == {
        "provider": "github",
        "branch": "main",
        "run_id": "101",
        "commit": hashes[0],
        "url": None,
        "repository": None,
    }, "no GITHUB_REPOSITORY: no page, no repository's name"
    page = repo / "perf-history" / "history.html"
    assert "History: steplib.step.Step" in page.read_text()
    bmf = json.loads((repo / "perf-history" / "bmf.json").read_text())
    (name,) = bmf
    assert name.startswith("default/workload=Step compile=eager"), "by the value of each field it reads"
    (repo / ".git").rename(repo / "git-moved")  # no repository at hand: commit time orders the points
    names = [runs / f"commit-{h[:12]}" for h in reversed(hashes)]
    again = launch_here("history", *map(str, names))
    assert "by commit time" in again.stdout
    shorts = [h[:8] for h in hashes]
    cells = [line.split("|")[1].strip() for line in again.stdout.splitlines() if line.startswith("| ")]
    assert [cell for cell in cells if cell in shorts] == shorts, "oldest first"


def comment_script() -> str:
    """The pull request's script docs/ci.md gives (`# ci/perf-comment.sh`), as written there."""
    text = (ROOT / "docs" / "ci.md").read_text()
    return re.search(r"```shell\n(# ci/perf-comment\.sh.*?)```", text, re.DOTALL)[1]


# A stand-in for GitHub's command-line tool: there is no GitHub here. It posts nothing; it keeps what it was given.
STAND_IN_GH = """#!/bin/sh
echo "a stand-in for gh, not gh: nothing is posted" >&2
printf '%s\\n' "$@" > "$GH_ASKED"
while [ $# -gt 0 ]; do [ "$1" = --body-file ] && cp "$2" "$GH_ASKED.body"; shift; done
"""


@pytest.mark.parametrize("slowdown", [1.25, 1.0])
def test_the_comment_script_posts_a_slowdown_with_gh_and_nothing_when_nothing_changed(tmp_path, slowdown):
    repo, runs = tmp_path / "repo", tmp_path / "runs"
    head = generate(repo, commits=2, planted=2, factor=1.0)[-1]
    rng = np.random.default_rng(0)
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    base = synthetic.write(synthetic.sweep(synthetic.grid(), 3, steady, rng), tmp_path / "base")
    grid = synthetic.grid({"subclass": slowdown})
    synthetic.write(synthetic.sweep(grid, 3, steady, rng), runs / f"commit-{head[:12]}")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "gh").write_text(STAND_IN_GH)
    (tools / "gh").chmod(0o755)
    (tmp_path / "perf-comment.sh").write_text(comment_script())
    path = f"{tools}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    asked = tmp_path / "asked"
    env = {**os.environ, "PATH": path, "PERF_RUNS": str(runs), "BASE_SWEEP": str(base), "PR_NUMBER": "7"}
    done = subprocess.run(
        ["bash", str(tmp_path / "perf-comment.sh")], cwd=repo, env={**env, "GH_ASKED": str(asked)},
        capture_output=True, text=True,
    )  # fmt: skip
    if slowdown == 1.0:
        assert done.returncode == 0 and not asked.exists(), done.stdout + done.stderr
        assert (repo / "perf-comment.md").read_text() == "", "--only-changes: nothing to post"
        return
    assert done.returncode == 1, done.stdout + done.stderr
    assert asked.read_text().split() == ["pr", "comment", "7", "--body-file", "perf-comment.md"]
    posted = (tmp_path / "asked.body").read_text()
    assert posted.startswith("### perfsweep: 1.2") and "x slower in subclass (REGRESSION)" in posted
