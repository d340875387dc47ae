"""`perfsweep bisect --git`: the commits of a repository of one's own, each built and installed into an environment
of its own, searched for the first that shows the sweep's change."""

import json
import re

import pytest

from perfsweep import launch as launcher
from perfsweep.analysis.bisection.search import GOOD, BisectError, BisectSearch, Point, schedule
from perfsweep.analysis.bisection.store import RECORD
from perfsweep.analysis.bisection.view import outcome
from perfsweep.bench.gitrepo import TARGET, generate
from perfsweep.commands import cli
from perfsweep.commands.bisect import asked, commits_between, one_metric, pinned, project_name
from perfsweep.launcher import envs
from perfsweep.records import load_sweep
from perfsweep.sweeps.plan import build_plan
from tests import golden
from tests.helpers import launch, launch_here


@pytest.fixture
def repo(tmp_path):
    """steplib's repository: 5 commits, the step three times as costly from commit 3."""
    folder = tmp_path / "repo"
    return folder, generate(folder, commits=5, planted=3, factor=3.0)


def test_the_commits_from_good_to_bad_with_their_subjects(repo):
    folder, hashes = repo
    commits, subjects = commits_between(folder, hashes[1], "main", allow_dirty=False)
    assert commits == hashes[1:]
    assert subjects[hashes[2]] == "commit 3: the step does more products"
    assert project_name(folder, hashes[-1]) == "steplib"


@pytest.mark.parametrize(
    ("good", "bad", "said"),
    [
        ("main", "HEAD~2", "is not an ancestor of bad=HEAD~2"),
        ("nowhere", "main", "good=nowhere: not a commit of"),
        ("mian", "main", "good=mian: not a commit of .+; did you mean main\\?"),
        ("main", "main", "good and bad are the same commit"),
    ],
)
def test_a_commit_that_is_not_there_or_not_an_ancestor_is_refused(repo, good, bad, said):
    with pytest.raises(BisectError, match=said):
        commits_between(repo[0], good, bad, allow_dirty=False)


def test_bisect_s_help_gives_its_exit_statuses():
    shown = launch_here("bisect", "--help").stdout
    assert "exit status 0 where it names one, 1 where it does not, 2 on bad input" in " ".join(shown.split())


def test_uncommitted_changes_are_refused_unless_asked_for(repo):
    folder, hashes = repo
    (folder / "steplib" / "step.py").write_text("# an edit not committed\n")
    with pytest.raises(BisectError, match="1 file\\): a bisect measures commits, not the working tree"):
        commits_between(folder, hashes[0], hashes[-1], allow_dirty=False)
    assert commits_between(folder, hashes[0], hashes[-1], allow_dirty=True)[0] == hashes


def test_a_commit_pin_needs_its_repository_and_is_shown_by_its_short_hash():
    commit = "ab" * 20
    request = envs.request_of("current", {"steplib": commit})
    assert envs.problems(request) == [f"steplib={commit}: a commit; env.repo=PATH names its repository"]
    assert envs.request_of("current", {"steplib": commit}, repo="/r").label == "steplib@abababababab"
    short = envs.request_of("current", {"steplib": "abab123"}, repo="/r")
    assert envs.problems(short) == [
        "steplib=abab123: a commit of env.repo is named by its full 40-hex hash (git rev-parse abab123)"
    ]


def test_the_search_names_the_first_bad_commit_with_its_subject():
    commits = [f"{i:02d}" * 20 for i in range(1, 6)]
    subjects = {c: f"commit {i}" for i, c in enumerate(commits, 1)}
    search = BisectSearch("steplib", commits, "ratio", 0.99, subjects=subjects)
    for index in (0, 4, 2, 1):  # the ends first, then midpoints, as a search measures them
        ratio = 3.0 if index >= 2 else 1.0
        search.add(Point(commits[index], ratio, ratio * 0.95, ratio * 1.05, 3, se=0.01, df=2))
    assert search.points[commits[1]].side == GOOD
    assert outcome(search) == [
        f"first commit on the bad side: steplib {commits[2][:12]} (commit 3) ({commits[1][:12]}, before it, is good)"
    ]


def test_bad_git_arguments_say_so_before_anything_runs(repo, tmp_path):
    folder, hashes = repo
    done = launch_here("bisect", "--git", hashes[-1], hashes[0], "--repo", str(folder), TARGET)
    assert done.returncode == 2 and "is not an ancestor of bad" in done.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    done = launch_here("bisect", "--git", "a", "b", "--repo", str(plain), TARGET)
    assert done.returncode == 2 and f"--repo {plain}: not a git repository" in done.stderr
    done = launch_here("bisect", "--good", "1.0", TARGET)
    assert done.returncode == 2 and "--git GOOD BAD two commits" in done.stderr
    done = launch_here("bisect", "--git", hashes[0], hashes[-1], "--good", "1.0", "--repo", str(folder), TARGET)
    assert done.returncode == 2 and "--good and --bad name releases: one or the other" in done.stderr


SWEEP = [TARGET, "threads=1", "steps=8", "warmup_steps=1"]


def test_a_bisect_of_commits_speaks_of_commits_and_goes_on_once_narrowed_to_one_configuration(repo, tmp_path, capsys):
    folder, hashes = repo
    words = ["bisect", "--git", hashes[0], hashes[-1], "--repo", str(folder), f"runs_dir={tmp_path / 'runs'}"]
    assert launcher.main([*words, *SWEEP[:-3], "threads=1,2"]) == 2 and not (tmp_path / "runs").exists()
    golden.says("a bisect of commits with two configurations a commit", capsys.readouterr().err)
    narrowed = build_plan([*SWEEP, f"env.repo={folder}", pinned("steplib", hashes[0]), "repeats=1"])
    reference, metric = one_metric(narrowed, hashes[0], "commit")
    assert reference == hashes[0] and metric.startswith(f"a point's step time over {hashes[0][:12]}'s")


@pytest.mark.parametrize(("last", "looks"), [("repeats=auto", schedule(40)), ("repeats=5", [5])])
def test_the_last_repeats_says_whether_a_point_adds_runs_until_placed(repo, last, looks):
    folder, hashes = repo
    words = ["bisect", "--git", hashes[0], hashes[-1], "--repo", str(folder), *SWEEP, "repeats=3", last]
    found = asked(cli.parse(cli.parser(""), words))
    assert (found.looks, found.fixed, found.unit) == (looks, last != "repeats=auto", "commit")


@pytest.fixture(scope="module")
def bisected(tmp_path_factory, env_dir):
    """One bisect of steplib's three commits, the step's wait ten times as long from the second, that the two tests
    below read: launched from the repository, with no repeats given and whose working copy, broken here, never runs.

    Returns:
        The repository, its commits' hashes, the launch, and the bisect's runs folder.
    """
    folder = tmp_path_factory.mktemp("bisected") / "repo"
    hashes = generate(folder, commits=3, planted=2, factor=10.0, sleep_ms=2.0)
    (folder / "steplib" / "step.py").write_text("raise ImportError('the working copy is not measured')\n")
    runs = folder.parent / "runs"
    where = [f"env.dir={env_dir}", f"runs_dir={runs}", "tracker.mode=disabled"]
    done = launch("bisect", "--git", hashes[0], hashes[-1], "--allow-dirty", *SWEEP, *where, cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder, hashes, done, runs


@pytest.mark.network
@pytest.mark.slow
def test_a_bisect_of_a_repository_names_the_commit_that_made_the_step_slower(bisected, env_dir, monkeypatch):
    """Each commit is built into a wheel and installed into an environment whose runs record that commit as their code
    under test; the working copy never runs, and a run that would import the package from PYTHONPATH fails and says
    so."""
    folder, hashes, _, runs = bisected
    record = json.loads((runs / "default" / RECORD).read_text())
    assert (record["last_good"], record["first_bad"]) == (hashes[0], hashes[1])
    measured = [p for p in record["points"] if p["sweep"]]
    run = next(r for r in load_sweep(runs / "default" / measured[0]["sweep"]))
    environment = run.env["environment"]
    assert environment["repo"] == str(folder) and environment["requested"]["steplib"] in hashes
    assert run.status.code_under_test["commit"] == environment["requested"]["steplib"]
    assert run.status.code_under_test["chosen_by"] == "environment"
    monkeypatch.setenv("PYTHONPATH", str(folder))  # the launch's jobs inherit it
    on_path = launch_here(
        *SWEEP, "repeats=1", f"+env.packages.steplib={hashes[0]}", f"env.repo={folder}", f"env.dir={env_dir}",
        f"runs_dir={runs}", "sweep_name=path", "tracker.mode=disabled",
    )  # fmt: skip
    assert on_path.returncode == 1
    (failed,) = load_sweep(runs / "path")
    assert "steplib would be imported from" in failed.status.error.message


@pytest.mark.network
@pytest.mark.slow
def test_a_bisect_of_commits_adds_the_runs_each_point_needs_and_names_the_planted_commit_by_itself(bisected):
    """No repeats given: each point looks at its runs until it is placed, the midpoint included, and the planted
    commit is named in one command."""
    _, hashes, done, runs = bisected
    said = f"first commit on the bad side: steplib {hashes[1][:12]} (commit 2: the step does more products)"
    assert said in done.stdout, done.stdout[-3000:]
    assert re.search(r"^machine: CPU .+, torch \d", done.stdout, re.M), "the machine its figures are of"
    record = json.loads((runs / "default" / RECORD).read_text())
    assert (record["last_good"], record["first_bad"], record["fixed"]) == (hashes[0], hashes[1], False)
    measured = sorted((p for p in record["points"] if p["sweep"]), key=lambda p: p["order"])
    assert [p["version"] for p in measured] == [hashes[2], hashes[1]] and all(p["runs"] >= 3 for p in measured)
    for point in measured:
        runs_of = sorted(load_sweep(runs / "default" / point["sweep"]), key=lambda r: r.summary.window_ended_at)
        commits = [run.axes["steplib"] for run in runs_of]
        assert set(commits[::2]) != set(commits[1::2]) and len(set(commits[::2])) == 1, "A B A B: each round both"
        jobs = json.loads((runs / "default" / point["sweep"] / "jobs.json").read_text())
        ids = [job["job_id"] for job in jobs.values()]
        assert len(set(ids)) <= len(ids) // 2, "a warm job per commit's environment, not one per run"
