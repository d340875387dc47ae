"""A project's history: the code under test recorded by each run, points over commits, change points, the gate."""

import dataclasses
import html
import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.render import text as as_text
from perfsweep.analysis.statistics import changepoints
from perfsweep.analysis.timeline import History, HistoryError, Point, history
from perfsweep.analysis.views import comment, wandb_history
from perfsweep.analysis.views import history as views
from perfsweep.analysis.views.report import build_wandb_report, outline
from perfsweep.bench.gitrepo import generate
from perfsweep.conf.schema import TrackerConf
from perfsweep.records import lifecycle
from perfsweep.records.code import ci_run, under_test
from perfsweep.sweeps.plan import PlanError
from tests import golden, synthetic
from tests.helpers import FAKE_KEY, launch_here, wandb_records, write_run

GIT_WHO = {
    "GIT_AUTHOR_NAME": "a",
    "GIT_AUTHOR_EMAIL": "a@b.c",
    "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@b.c",
}


def write_commit_sweep(
    folder: Path, repo: Path, commit: str, dirty: bool, memory_format: str = "contiguous", types: tuple = ("tensor",)
) -> None:
    """A sweep of a done run per input type whose status names `commit` of `repo` as its code under test."""
    folder.mkdir(parents=True)
    tested = {"repository": str(repo), "commit": commit, "dirty": dirty, "subject": "s", "committed_at": 1}
    for index, input_type in enumerate(types, 1):
        write_run(folder, f"t{index}", input_type, memory_format, 100.0 * index)
        lifecycle.finish(folder / f"t{index}", code_under_test=tested)
    records.write_json(folder / records.SWEEP, {"uid": "0f0f0f0f", "runs": {}, "launches": []})


TRIALS = 500


def synthetic_points(rng, commits=16, planted=None, factor=1.2, runs=3, run_sd=0.05, day_sd=0.03) -> list:
    """Each commit's runs' median step times: a run's own noise, and a day's that its sweep's runs share."""
    points = []
    for commit in range(1, commits + 1):
        level = 50.0 * (factor if planted and commit >= planted else 1.0) * np.exp(rng.normal(0, day_sd))
        points.append(level * np.exp(rng.normal(0, run_sd, runs)))
    return points


def test_false_change_points_in_at_most_five_percent_of_aa_histories_and_the_planted_step_found_in_80():
    """16 commits of 3 runs each; a run's spread 5%, a sweep's (its day's) 3%; the step 20% from commit 11."""
    rng = np.random.default_rng(0)
    false = sum(bool(changepoints.changes(synthetic_points(rng))) for _ in range(TRIALS)) / TRIALS
    found = [changepoints.changes(synthetic_points(rng, planted=11)) for _ in range(TRIALS)]
    exactly = sum([c.index for c in changes] == [10] for changes in found) / TRIALS
    assert false <= 0.05, f"change points in {false:.1%} of histories with nothing planted"
    assert exactly >= 0.80, f"the step found at commit 11, and nothing else, in {exactly:.1%}"


def test_too_few_points_are_not_enough_history_and_the_newest_point_alone_is_told_apart():
    rng = np.random.default_rng(1)
    assert changepoints.changes(synthetic_points(rng, commits=3)) is None
    points = synthetic_points(rng, commits=10, day_sd=0.0)
    points[-1] = points[-1] * 1.3
    (change,) = changepoints.changes(points)
    assert change.index == len(points) - 1 and change.ratio == pytest.approx(1.3, rel=0.1), "the newest point's own"
    ratio, low, high, p = changepoints.newest_alone(points, 0)
    assert ratio == pytest.approx(1.3, rel=0.1) and p < 1e-4 and 1 < low < ratio < high
    ratio, _, _, p = changepoints.newest_alone(synthetic_points(rng, commits=10, day_sd=0.0), 0)
    assert ratio == pytest.approx(1.0, abs=0.1) and p > 0.01


def test_a_newest_point_judged_by_its_own_few_runs_spread_takes_students_tail():
    """Two of its five runs were twice as slow: its mean is 1.35x, but five runs say little of their spread."""
    points = [
        np.array([2.047, 2.083, 2.249, 2.137, 2.739]),
        np.array([1.723, 2.078, 1.891, 2.17, 2.397]),
        np.array([4.375, 4.341, 2.056, 2.317, 2.179]),
    ]
    ratio, low, high, p = changepoints.newest_alone(points, 0)
    assert ratio == pytest.approx(1.35, abs=0.01) and 0.05 < p < 0.15, p
    assert low < 1 < high, "a one-sided p over 2.5%: its 95% interval holds 1"
    rng = np.random.default_rng(3)
    aa = [changepoints.newest_alone([np.exp(rng.normal(0, 0.1, 5)) for _ in range(3)], 0) for _ in range(2000)]
    assert sum(found.p < 0.05 for found in aa) / len(aa) <= 0.05


SWEEP = 20  # configurations in a sweep
REPLICATES = 5  # runs a point: docs/ci.md's repeats=5
AA_TRIALS, AA_BOUND = 400, 12  # P(12 or fewer of 400 | a true 5%) = 0.036: a rate of 5% passes by luck in under 5%
POWER_TRIALS, POWER_BOUND = 100, 87  # P(87 or more of 100 | a true 80%) = 0.047


def sweep_histories(rng, trials: int, slower: int | None = None) -> np.ndarray:
    """Each configuration's runs' median step times at each of 16 commits, in tests/synthetic.py's noise.

    Its shape is (trials, SWEEP, commits, REPLICATES); the first configuration is 10% slower from `slower` on.
    """
    levels = np.full((trials, SWEEP, 16, REPLICATES), 50.0)
    if slower is not None:
        levels[:, 0, slower:] *= 1.1
    return np.median(synthetic.run_steps(levels, synthetic.Noise(), rng, runs=levels.shape), axis=-1)


def gated(history: np.ndarray) -> list:
    """The history's configurations, each judged and held with the others as a family."""
    point = Point(None, False, "", 0.0, ["s"], [])
    made = [
        views.Series(str(i), [views.Row(point, times) for times in config], None) for i, config in enumerate(history)
    ]
    return views.family([views.judged(series, 0.05) for series in made])


@pytest.mark.slow
def test_a_sweep_of_20_configurations_with_nothing_changed_warns_in_at_most_5_percent_of_histories():
    """The gate's 1 and 3 together, over every configuration of the sweep: Holm's family holds them to 5%.

    Yet a 10% slowdown of one configuration is flagged at the push that brings it in at least 80% of histories.
    """
    rng = np.random.default_rng(10)
    alarms = sum(views.exit_status(gated(history)) != 0 for history in sweep_histories(rng, AA_TRIALS))
    found = sum(bool(gated(history)[0].flag) for history in sweep_histories(rng, POWER_TRIALS, slower=15))
    assert alarms <= AA_BOUND, f"{alarms} of {AA_TRIALS} histories with nothing changed warned or failed"
    assert found >= POWER_BOUND, f"the slowdown flagged in {found} of {POWER_TRIALS}"


def synthetic_history(rng, slower_from: int | None, commits: int = 8, newest: float = 1.0) -> History:
    """A history of synthetic sweeps of two configurations, each commit's subclass `factor` slower from one on."""
    levels = []
    for commit in range(1, commits + 1):
        factor = 1.3 if slower_from and commit >= slower_from else 1.0
        factor *= newest if commit == commits else 1.0
        levels.append({("tensor", "contiguous"): 20.0, ("subclass", "contiguous"): 30.0 * factor})
    return history_of(rng, levels)


def history_of(rng, levels: list[dict], replicates: int = 3) -> History:
    """A history of synthetic sweeps, a commit each: each gives its configurations' levels, as synthetic.sweep.

    Each configuration runs `replicates` times a sweep.
    """
    points = []
    for commit, given in enumerate(levels, 1):
        runs = synthetic.sweep(given, replicates, synthetic.Noise(), rng)
        sha = f"{commit:02d}" + "ab" * 19
        points.append(Point(sha, False, f"commit {commit}", float(commit), [f"c{commit}"], runs))
    return History(points, "by the commit graph")


def shown(found: History, tmp_path: Path | None = None) -> tuple[list, str, int]:
    made, left = views.series_of(found, "step", 0.05)
    text = "\n".join(as_text(views.view(s, "step", found)) for s in made)
    if tmp_path is not None:
        views.write(made, [views.view(s, "step", found) for s in made], "step", tmp_path, [])
    return made, text, views.exit_status(made)


def test_a_slowdown_after_commits_no_sweep_measured_says_they_may_hold_its_start():
    """Two commits between the 4th point and the 5th were never swept: the slowdown may start at either."""
    found = synthetic_history(np.random.default_rng(2), slower_from=5)
    for point, rank in zip(found.points, [0, 1, 2, 3, 6, 7, 8, 9], strict=True):
        point.rank = rank
    made, _, _ = shown(found)
    (slower,) = [s for s in made if s.label == "subclass"]
    said = (
        "on (or from one of the 2 commits between 04ababab and it at which this configuration was not measured: "
        "bisect --git 04ababababab 05ababababab with the sweep's overrides finds which); the newest points: "
    )
    assert said in slower.flag, slower.flag


def test_a_slowdown_from_a_commit_on_is_a_regression_of_that_configuration_alone(tmp_path):
    made, text, status = shown(synthetic_history(np.random.default_rng(2), slower_from=5), tmp_path)
    assert status == views.EXIT_REGRESSION
    by_label = {s.label: s for s in made}
    assert [c.index for c in by_label["subclass"].changes] == [4]
    assert by_label["subclass"].flag.startswith("REGRESSION: 1.3") and "from 05abab" in by_label["subclass"].flag
    assert by_label["tensor"].changes == [] and not by_label["tensor"].flag
    assert "04ababab..05ababab (1.3" in text, "the change's commit range"
    page = (tmp_path / views.PAGE).read_text()
    assert "History: subclass" in page and "history-01-subclass.png" in page
    assert (tmp_path / "history-01-subclass.png").stat().st_size > 1000


def test_a_regression_from_where_perfsweep_s_own_code_changed_says_so_beside_its_flag():
    """perfsweep was upgraded at the commit the slowdown starts from: the slowdown may be how it measures."""
    found = synthetic_history(np.random.default_rng(2), slower_from=5)

    def measured_by(point, digest: str):
        runs = [
            dataclasses.replace(r, status=dataclasses.replace(r.status, code={"perfsweep": digest * 12}))
            for r in point.runs
        ]
        return dataclasses.replace(point, runs=runs)

    points = [measured_by(p, "b" if i >= 4 else "a") for i, p in enumerate(found.points)]
    made, _, status = shown(dataclasses.replace(found, points=points))
    (flagged,) = [series for series in made if series.flag]
    assert status == views.EXIT_REGRESSION and flagged.label == "subclass"
    assert flagged.flag.endswith("; perfsweep's own code differs: perfsweep files aaaaaaaa -> bbbbbbbb"), flagged.flag
    made, _, _ = shown(dataclasses.replace(found, points=[measured_by(p, "a") for p in found.points]))
    assert not any("perfsweep's own code" in series.flag for series in made)


def test_a_short_history_without_a_change_point_says_the_smallest_step_it_would_find():
    """Six points of three runs each, 5% apart within each point; the series itself shows no noise but the step."""
    spread = np.exp([-0.05, 0.0, 0.05])

    def points(step: float, after: int = 3) -> list[np.ndarray]:
        return [10 * spread * (step if i >= 6 - after else 1.0) for i in range(6)]

    smallest, newest = changepoints.smallest_step(points(1.0)), changepoints.smallest_step(points(1.0), 2)
    assert 1.05 < smallest < newest < 1.2, "a step before the newest two points needs more than one at the middle"
    for step, after in ((smallest, 3), (newest, 2)):
        assert changepoints.changes(points(step * 1.01, after)), "a step just above it is found"
        assert changepoints.changes(points(step / 1.01, after)) == [], "a step just below it is not"


def test_a_history_with_nothing_changed_exits_0_and_a_slower_newest_point_alone_exits_3():
    _, text, status = shown(synthetic_history(np.random.default_rng(3), slower_from=None))
    said = (
        r"change points: none; at this history's noise, a step of 1\.\d\dx or more at its middle would be one, 1\.\d\dx"
    )
    assert status == 0 and re.search(said + r" before its newest 2 points", text), text
    _, text, status = shown(synthetic_history(np.random.default_rng(4), slower_from=None, newest=1.5))
    assert status == views.EXIT_POSSIBLE, "one point does not confirm a regression"
    assert re.search(r"POSSIBLE REGRESSION: .*1\.[45]\dx", text), text


def test_a_newest_point_measured_beside_a_neighbour_says_so_beside_its_flag():
    """The newest sweep's runs lost 40% of their CPUs to another process, and its subclass is 1.5x slower: the flag
    names the neighbour, which the points before did not have."""
    found = synthetic_history(np.random.default_rng(4), slower_from=None, newest=1.5)

    points = [
        dataclasses.replace(p, runs=synthetic.beside(p.runs, 0.8 if p is found.points[-1] else 0.0))
        for p in found.points
    ]
    made, _, status = shown(dataclasses.replace(found, points=points))
    (flagged,) = [series for series in made if series.flag]
    assert status == views.EXIT_POSSIBLE and flagged.label == "subclass"
    said = "their hosts differ in: others' CPU the points before 0%, 08ababab 40% (medians over their runs)"
    assert flagged.flag.endswith(said), flagged.flag


def test_a_point_measured_beside_a_neighbour_is_named_above_its_table_flagged_or_not():
    """The middle sweep ran beside a busy loop and nothing is flagged: its time beside the others needs its cause."""
    found = synthetic_history(np.random.default_rng(4), slower_from=None)
    loaded = found.points[3]
    points = [dataclasses.replace(p, runs=synthetic.beside(p.runs, 0.8 if p is loaded else 0.0)) for p in found.points]
    made, text, _ = shown(dataclasses.replace(found, points=points))
    said = f"SHARED HOST {loaded.label} (others' CPU 40%, the median over its runs): its time may be the load's"
    assert text.count(said) == len(made), text
    quiet = [dataclasses.replace(p, runs=synthetic.beside(p.runs, 0.0)) for p in found.points]
    assert "SHARED HOST" not in shown(dataclasses.replace(found, points=quiet))[1]
    busy = [dataclasses.replace(p, runs=synthetic.beside(p.runs, 0.8)) for p in found.points]  # a busy CI runner's
    said = shown(dataclasses.replace(found, points=busy))[1]
    newest = found.points[-1].label
    assert "SHARED HOST 3 earlier points and " in said, said
    assert f"{newest} (others' CPU 40%, the median over its runs): their times may be the load's" in said, said


def test_a_regression_that_only_points_beside_a_neighbour_confirm_is_a_possible_one():
    """subclass is 1.3x slower from the 7th of 8 commits on, and both those sweeps lost 40% of their CPUs to another
    process: the load may be the cause, as compare says of such a change. Where one of them ran alone, it stands."""
    found = synthetic_history(np.random.default_rng(2), slower_from=7)

    def loaded(shared: set[int]):
        points = [
            dataclasses.replace(p, runs=synthetic.beside(p.runs, 0.8 if index in shared else 0.0))
            for index, p in enumerate(found.points)
        ]
        made, _, status = shown(dataclasses.replace(found, points=points))
        return next(series for series in made if series.label == "subclass"), status

    both, status = loaded({6, 7})
    assert status == views.EXIT_POSSIBLE and both.flag.startswith("POSSIBLE REGRESSION (shared host): 1.2"), both.flag
    one, status = loaded({7})
    assert status == views.EXIT_REGRESSION and one.flag.startswith("REGRESSION: 1.2"), "a quiet point confirms it"


def test_a_newest_point_that_measured_fewer_steps_says_so_beside_its_flag():
    """Steps are not matched on: a sweep of half the steps is still a point of the history, and its flag says so."""
    found = synthetic_history(np.random.default_rng(4), slower_from=None, newest=1.5)

    def steps(point, count: int):
        return dataclasses.replace(
            point, runs=[dataclasses.replace(r, fields=r.fields | {"steps": count}) for r in point.runs]
        )

    points = [steps(p, 10 if p is found.points[-1] else 20) for p in found.points]
    made, _, status = shown(dataclasses.replace(found, points=points))
    (flagged,) = [series for series in made if series.flag]
    assert status == views.EXIT_POSSIBLE and flagged.flag.endswith("; it measured for another length: steps 20 -> 10")
    mixed = dataclasses.replace(points[2], runs=[*points[2].runs[:2], *steps(points[2], 40).runs[2:]])
    _, text, _ = shown(dataclasses.replace(found, points=[*points[:2], mixed, *points[3:]]))
    said = "03ababab: its runs measured for 2 lengths, which its time mixes: steps=20 (1 run); steps=40 (2 runs)"
    assert said in text, "two sweeps of one commit, at two lengths, in one point"


def test_a_regression_heads_the_comment_and_the_configurations_not_flagged_are_folded():
    found = synthetic_history(np.random.default_rng(2), slower_from=5)
    made, _ = views.series_of(found, "step", 0.05)
    said = comment.history_comment(made, [views.view(s, "step", found) for s in made], [])
    head, counts, flagged, folded = said.split("\n\n", 3)
    assert head.startswith("### perfsweep history: subclass: REGRESSION: 1.3") and "from 05ababab on" in head
    assert counts == (
        "**1 regressed**, 0 possibly, 1 not flagged, of 2 configurations (flagged: slower by more than 0.05, 5%)"
    )
    assert flagged == "#### History: subclass" and folded.startswith("8 points, ordered by the commit graph")
    assert said.count("<details><summary>1 not flagged</summary>") == 1 and "#### History: tensor" in said


def test_a_history_that_regresses_reverts_and_regresses_again_fails_the_gate():
    """Five sweeps of four runs: fast, slow, reverted to fast, slow again, still slow.

    Three of the four steps between neighbours are changes: read as the series' noise, they would hide the last one.
    """
    levels = [{("tensor", "contiguous"): ms} for ms in (4.26, 9.58, 5.63, 11.3, 12.6)]
    (made,), text, status = shown(history_of(np.random.default_rng(9), levels, replicates=4))
    assert status == views.EXIT_REGRESSION, text
    assert [c.index for c in made.changes] == [3] and made.flag.startswith("REGRESSION: 1.9"), made.flag


def test_a_step_at_the_newest_point_is_named_at_its_commit_and_its_revert_passes_the_gate():
    """Six sweeps of three runs: a step at the newest point alone is its change, at its own ratio, not one blended
    over the newest two. A slowdown that the newest point reverts is two changes, and the gate passes it."""
    rng = np.random.default_rng(5)
    stepped = [{("tensor", "contiguous"): ms} for ms in (10.0, 10.0, 10.0, 10.0, 10.0, 14.8)]
    (made,), text, status = shown(history_of(rng, stepped))
    assert status == views.EXIT_POSSIBLE and [c.index for c in made.changes] == [5], text
    said = r"POSSIBLE REGRESSION: 1\.4\dx slower from 06abab\w+ on; the newest points: \d\.\d\dx, 1\.4\dx"
    assert re.match(said, made.flag), made.flag
    reverted = [{("tensor", "contiguous"): ms} for ms in (10.0, 10.0, 10.0, 10.0, 20.0, 10.0)]
    (made,), text, status = shown(history_of(rng, reverted))
    assert status == 0 and not made.flag, text
    assert [(c.index, round(c.ratio, 1)) for c in made.changes] == [(4, 2.0), (5, 0.5)], text
    assert re.search(r"04ababab\.\.05ababab \(2\.0\dx slower.*; 05ababab\.\.06ababab \(\d\.\d\dx faster", text), text
    partly = [{("tensor", "contiguous"): ms} for ms in (10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 20.0, 12.0)]
    (made,), text, status = shown(history_of(rng, partly))
    assert status == views.EXIT_REGRESSION and made.flag.startswith("REGRESSION: 1.5"), "a partial revert, still slower"


def test_an_open_regression_names_where_it_stands_now_and_a_newest_point_slower_again():
    """Slower from the 4th of 9 commits, and slower again at the 9th: the flag gives both, and what the newest points
    measure against the segment before the first change, which they confirm. A later change point that the newest
    points do not confirm hides no earlier one they do. The flag's context holds the points from the change on."""

    def history(newest: float, seed: int, busy: float = 0.0) -> History:
        levels = [{("tensor", "contiguous"): ms} for ms in (10.0, 10.0, 10.0, 20.0, 20.0, 20.0, 20.0, 20.0, newest)]
        found = history_of(np.random.default_rng(seed), levels)
        loads = [busy if index >= 3 else 0.0 for index in range(len(levels))]
        return History(
            [
                dataclasses.replace(p, runs=synthetic.beside(p.runs, load))
                for p, load in zip(found.points, loads, strict=True)
            ],
            found.order,
        )

    (made,), text, status = shown(history(26.0, 0))
    assert status == views.EXIT_REGRESSION and [c.index for c in made.changes] == [3, 8], text
    head = r"REGRESSION: [12]\.\d\dx slower from 04ababab\w* on; the newest points: 1\.9\dx, "
    assert re.match(head + r"2\.5\dx; possibly slower again: 1\.3\dx from 09ababab\w* on$", made.flag), made.flag
    (made,), text, status = shown(history(22.0, 0))
    assert status == views.EXIT_REGRESSION and [c.index for c in made.changes] == [3], text
    alone = r"2\.1\dx; and the newest point alone is 1\.1\dx slower than its segment \(p=[\d.e-]+\): possibly a change"
    assert re.match(head + alone + " again$", made.flag), made.flag
    (made,), _, _ = shown(history(22.0, 0, busy=0.8))
    assert "others' CPU the points before 0%, the points from 04ababab" in made.flag, made.flag


def test_one_noisy_point_hides_no_step_of_a_longer_history():
    """Eleven commits: slower at the 4th, reverted at the 6th, slower again at the 8th; the 7th's runs spread wide,
    as beside a neighbour. Its steps cost the series' fit more penalty than they explain: the neighbours' estimate
    holds."""
    rng = np.random.default_rng(1)
    levels = [6.6, 6.6, 6.6, 9.9, 9.9, 6.5, None, 10.0, 9.55, 9.9, 9.9]
    noisy = np.array([6.51, 8.22, 12.0, 6.28])
    points = [noisy if ms is None else ms * np.exp(rng.normal(0, 0.015, 4)) for ms in levels]
    assert [c.index for c in changepoints.changes(points)] == [3, 5, 7]


def test_points_whose_runs_spread_far_wider_than_the_others_are_left_out_and_named():
    """A per-push history of 5 runs a point, a 1.86x slowdown at the third push. The fourth push ran beside a
    neighbour: its runs took 9.6-89 ms. Read as noise, its spread and level hid the step (no change point, exit 0).
    It is left out of the search, and named with what its host showed; the newest point is never left out."""
    runs = [
        [6.74, 6.28, 6.17, 6.97, 6.43],
        [5.82, 6.32, 6.02, 7.9, 8.61],
        [15.23, 9.55, 13.32, 11.42, 13.53],
        [23.79, 66.67, 89.25, 9.55, 9.9],
        [12.93, 12.88, 12.14, 11.76, 12.06],
        [75.27, 12.17, 11.78, 7.89, 10.41],
    ]
    points = [Point(f"{i:02d}" + "cd" * 19, False, f"push {i}", float(i), [f"c{i}"], []) for i in range(1, 7)]
    assert changepoints.spread_apart([np.array(r) for r in runs], 0.05) == {3: pytest.approx(29.8, abs=0.1)}
    slower = [np.array([10.26, 9.99, 10.26]), np.array([10.41, 10.16, 10.55]), np.array([9.74, 10.03, 9.93])]
    slower += [np.array([10.03, 10.16, 9.99]), np.array([22.78, 19.67, 20.46]), np.array([12.03, 12.31, 12.14])]
    assert changepoints.spread_apart(slower, 0.05) == {}, "runs 15% apart: their mean is known within 5%"
    for pushes in (5, 6):
        rows = [views.Row(point, np.array(r)) for point, r in zip(points[:pushes], runs, strict=False)]
        series = views.judged(views.Series("mine", rows, None, held=[(r.point, []) for r in rows]), 0.05)
        assert series.flag.startswith("REGRESSION: 1.86x slower from 03cdcdcd on" if pushes == 5 else "REGRESSION: 2.0")
        assert [c.index for c in series.changes] == [2] and rows[3].apart is not None and rows[-1].apart is None
        shown = as_text(views.view(series, "step", History(points[:pushes], "by the commit graph")))
        assert "left out of the search, as their runs spread far wider than the other points'" in shown
        assert "04cdcdcd (" in shown and "left out: its runs' variance" in shown
        assert "02cdcdcd..03cdcdcd" in shown, "the change's range, between the points searched"
    before = [runs[0], runs[1], runs[3], runs[2], runs[4], [12.5, 12.1, 12.9, 12.3, 12.6]]  # beside it, before the step
    rows = [views.Row(point, np.array(r)) for point, r in zip(points, before, strict=True)]
    series = views.judged(views.Series("mine", rows, None, held=[(r.point, []) for r in rows]), 0.05)
    assert [c.index for c in series.changes] == [3] and series.since == 3 and rows[2].apart is not None
    assert series.flag.startswith("REGRESSION: 1.8") and "slower from one of 03cdcdcd..04cdcdcd on" in series.flag
    shown = as_text(views.view(series, "step", History(points, "by the commit graph")))
    assert "change points: 02cdcdcd..04cdcdcd (1.8" in shown, "the left-out point may hold the change"
    rows = rows[:4]
    series = views.judged(views.Series("mine", rows, None, held=[(r.point, []) for r in rows]), 0.05)
    shown = as_text(views.view(series, "step", History(points[:4], "by the commit graph")))
    assert (
        rows[2].apart is not None and "too few to find one (3 points searched, of 4; a change point needs 4)" in shown
    )


TWO = {("tensor", "contiguous"): 20.0, ("subclass", "contiguous"): 30.0}
OTHER = {("tensor", "channels_last"): 20.0, ("subclass", "channels_last"): 30.0}


def gaps(found: History, max_unmatched: float = 0.0) -> tuple[str, int]:
    """What `history` says of the configurations its points lack, and its exit status."""
    made, _ = views.series_of(found, "step", 0.05)
    lines, unmatched = views.unmatched(found, made, max_unmatched)
    return "\n".join(lines), views.exit_status(made) + unmatched


def test_a_newest_sweep_that_shares_no_configuration_with_the_history_fails_the_gate(tmp_path):
    repo, runs = tmp_path / "repo", tmp_path / "runs"
    hashes = generate(repo, commits=4, planted=None)
    for index, commit in enumerate(hashes):
        write_commit_sweep(runs / f"s{index}", repo, commit, False, "channels_last" if index == 3 else "contiguous")
    shown = launch_here("history", str(runs), "--repo", str(repo))
    assert shown.returncode == 8, shown.stdout + shown.stderr
    said = shown.stdout[shown.stdout.index("the newest point") :]
    golden.says(
        "history: a newest sweep that shares no configuration",
        said,
        {h[:8]: f"<commit {i}>" for i, h in enumerate(hashes)},
    )
    assert launch_here("history", str(runs), "--repo", str(repo), "--max-unmatched", "1").returncode == 0
    out = tmp_path / "out"
    written = launch_here("history", str(runs), "--repo", str(repo), "--out", str(out))
    outlined = launch_here("history", str(runs), "--repo", str(repo), "--out", str(out), "--wandb", "--dry-run")
    unmatched = next(line for line in shown.stdout.splitlines() if line.startswith("UNMATCHED: "))
    assert written.returncode == outlined.returncode == 8, written.stdout + written.stderr + outlined.stderr
    assert html.escape(unmatched) in (out / views.PAGE).read_text(), "the page says what failed the gate"
    assert f"\n{unmatched}\n" in outlined.stdout, outlined.stdout


def test_a_history_of_two_configurations_names_each_above_its_table(tmp_path):
    repo, runs = tmp_path / "repo", tmp_path / "runs"
    hashes = generate(repo, commits=4, planted=None)
    for index, commit in enumerate(hashes):
        write_commit_sweep(runs / f"s{index}", repo, commit, False, types=("tensor", "subclass"))
    shown = launch_here("history", str(runs), "--repo", str(repo))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    titles = [line for line in shown.stdout.splitlines() if line.startswith("History: ")]
    assert titles == ["History: tensor", "History: subclass"], shown.stdout
    quiet = launch_here("history", str(runs), "--repo", str(repo), "--format", "markdown", "--only-changes")
    assert (quiet.returncode, quiet.stdout) == (0, "")
    said = launch_here("history", str(runs), "--repo", str(repo), "--format", "markdown", "--out", str(tmp_path / "h"))
    assert said.stdout.startswith("### perfsweep history: no regression\n") and "**0 regressed**" in said.stdout
    last = "\n\nexit status 0 (`perfsweep history --help` says what each status flags)\n"
    assert said.stdout.endswith(last), "the comment's file holds it alone"
    assert said.stderr.startswith(f"history: {tmp_path / 'h'}"), said.stderr


def test_a_sweep_in_the_middle_that_shares_no_configuration_fails_the_gate():
    said, status = gaps(history_of(np.random.default_rng(5), [TWO, TWO, OTHER, TWO, TWO]))
    assert status == views.EXIT_UNMATCHED
    golden.says("history: a sweep in the middle that shares no configuration", said)


def test_a_configuration_that_only_the_newest_point_has_is_named_and_fails_nothing():
    newer = TWO | {("tensorbase", "contiguous"): 20.0}
    said, status = gaps(history_of(np.random.default_rng(6), [TWO, TWO, TWO, newer]))
    assert status == 0
    assert said.endswith("configurations only in 04ababab: tensorbase"), said


def test_a_configuration_the_newest_point_lacks_is_counted_against_max_unmatched():
    found = history_of(np.random.default_rng(7), [TWO, TWO, TWO, {("tensor", "contiguous"): 20.0}])
    said, status = gaps(found)
    assert status == views.EXIT_UNMATCHED and "UNMATCHED: 1 of the 2 configurations before 04ababab not in it: " in said
    made, _ = views.series_of(found, "step", 0.05)
    posted = comment.history_comment(made, [views.view(s, "step", found) for s in made], said.splitlines())
    head = posted.splitlines()[0]
    assert head.endswith("; 1 of the 2 configurations before 04ababab not in it (UNMATCHED)"), head
    assert gaps(found, 0.5) == (
        said.replace("above --max-unmatched 0%", "within --max-unmatched 50%").replace("UNMATCHED: ", ""),
        0,
    )


def test_the_ci_run_is_read_from_each_ci_s_own_variables():
    github = {"GITHUB_ACTIONS": "true", "GITHUB_HEAD_REF": "", "GITHUB_REF_NAME": "main", "GITHUB_RUN_ID": "7"}
    github |= {"GITHUB_SHA": "abc", "GITHUB_REPOSITORY": "me/lib", "GITHUB_SERVER_URL": "https://github.com"}
    assert ci_run(github) == {
        "provider": "github",
        "branch": "main",
        "run_id": "7",
        "commit": "abc",
        "url": "https://github.com/me/lib/actions/runs/7",
        "repository": "me/lib",
    }
    gitlab = {"GITLAB_CI": "true", "CI_COMMIT_REF_NAME": "fix", "CI_PIPELINE_ID": "9", "CI_PIPELINE_URL": "u"}
    expected = {"provider": "gitlab", "branch": "fix", "run_id": "9", "commit": None, "url": "u", "repository": None}
    assert ci_run(gitlab) == expected
    assert ci_run({"CI": "true"}) is None, "a CI that says nothing of itself"


def test_the_code_under_test_is_the_named_folder_else_the_imports_else_the_launch_folder(tmp_path):
    lib, other = tmp_path / "lib", tmp_path / "other"
    hashes = generate(lib, commits=2, planted=None)
    generate(other, commits=1, planted=None)
    plain = tmp_path / "plain"
    plain.mkdir()
    named = under_test(str(other), [lib / "steplib"], plain)
    assert named["repository"] == str(other) and named["chosen_by"] == "code"
    imported = under_test(None, [lib / "steplib"], plain)
    assert imported["commit"] == hashes[-1] and imported["chosen_by"] == "imports"
    assert imported["subject"] == "commit 2: notes" and imported["dirty"] is False
    (lib / "steplib" / "step.py").write_text("# edited\n")
    assert under_test(None, [], lib)["dirty"] is True and under_test(None, [], lib)["chosen_by"] == "launch"
    assert under_test(None, [], plain) is None


def test_code_that_is_no_git_repository_is_refused_before_anything_runs(tiny_plan, tmp_path):
    with pytest.raises(PlanError, match="code=/nowhere: no such file or folder"):
        tiny_plan("code=/nowhere")
    with pytest.raises(PlanError, match=f"code={tmp_path}: not in a git repository"):
        tiny_plan(f"code={tmp_path}")


def test_history_of_a_folder_without_sweeps_says_so(tmp_path):
    with pytest.raises(HistoryError, match="neither a sweep folder nor a folder of them"):
        history([tmp_path])


def test_a_branch_s_history_leaves_out_its_neighbours_commits_and_bad_histories_say_why(tmp_path, monkeypatch):
    """Sweeps of two branches in one folder: --repo reads the commits its HEAD descends from."""
    repo = tmp_path / "repo"
    hashes = generate(repo, commits=3, planted=None)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "side", hashes[1]], check=True)
    (repo / "NOTES").write_text("a side branch\n")
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "side"], check=True, env={**os.environ, **GIT_WHO})
    side = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    runs = tmp_path / "runs"
    for index, commit in enumerate([*hashes, side]):
        write_commit_sweep(runs / f"s{index}", repo, commit, dirty=False)
    found = history([runs], repo)
    assert [p.commit for p in found.points] == hashes
    assert f"left out, not ancestors of its HEAD: {side[:8]}" in found.order
    monkeypatch.chdir(repo)
    assert history([runs], Path(".")).order.startswith(f"by the commit graph of {repo.resolve()};"), "not of ."
    with pytest.raises(HistoryError, match="not a git repository"):
        history([runs], tmp_path)
    with pytest.raises(ValueError, match="--phase forwards: no run recorded it; the phases: backward, data, forward"):
        views.series_of(found, "forwards", 0.05)
    write_commit_sweep(runs / "elsewhere", tmp_path / "other", hashes[0], dirty=False)
    with pytest.raises(HistoryError, match="commits of several repositories"):
        history([runs])


def test_with_repo_a_sweep_of_no_commit_in_the_same_folder_is_left_out_and_named(tmp_path):
    """A runs folder shared with sweeps of other code: --repo asks for its commits' history, not launch times."""
    repo = tmp_path / "repo"
    hashes = generate(repo, commits=3, planted=None)
    runs = tmp_path / "runs"
    for index, commit in enumerate(hashes):
        write_commit_sweep(runs / f"s{index}", repo, commit, dirty=False)
    write_run(runs / "plain", "t1", "tensor", "contiguous", 100.0)
    lifecycle.finish(runs / "plain" / "t1")
    records.write_json(runs / "plain" / records.SWEEP, {"uid": "0f0f0f0f", "runs": {}, "launches": []})
    assert history([runs]).order.startswith("by launch time"), "without --repo, every sweep is a point"
    found = history([runs], repo)
    assert [p.commit for p in found.points] == hashes
    assert found.order == f"by the commit graph of {repo.resolve()}; left out, naming no commit: plain", found.order
    shutil.rmtree(runs / "s1")
    assert [p.rank for p in history([runs], repo).points] == [0, 2], "the second commit, unswept, lies between"


def test_each_dirty_sweep_is_a_point_of_its_own(tmp_path):
    repo = tmp_path / "repo"
    (commit,) = generate(repo, commits=1, planted=None)
    for name, dirty in (("clean", False), ("edit1", True), ("edit2", True)):
        write_commit_sweep(tmp_path / "runs" / name, repo, commit, dirty)
    found = history([tmp_path / "runs"])
    assert [(p.label, p.sweeps) for p in found.points] == [
        (commit[:8], ["clean"]),
        (f"{commit[:8]}+dirty", ["edit1"]),
        (f"{commit[:8]}+dirty", ["edit2"]),
    ]


def test_sweep_folders_of_one_name_are_points_named_apart(tmp_path):
    """Every launch without sweep_name= makes a folder `default`: two dirty ones of one commit stay two points, and
    sweeps that name no commit are labelled by as much of their path as tells them apart."""
    repo = tmp_path / "repo"
    (commit,) = generate(repo, commits=1, planted=None)
    for where in ("a", "b"):
        write_commit_sweep(tmp_path / "runs" / where / "default", repo, commit, dirty=True)
    found = history([tmp_path / "runs" / "a" / "default", tmp_path / "runs" / "b" / "default"])
    assert [p.sweeps for p in found.points] == [["a/default"], ["b/default"]]
    for where in ("c", "d"):
        folder = tmp_path / "plain" / where / "default"
        folder.mkdir(parents=True)
        write_run(folder, "t1", "tensor", "contiguous", 100.0)
        records.write_json(folder / records.SWEEP, {"uid": "0f0f0f0f", "runs": {}, "launches": []})
    found = history([tmp_path / "plain" / "c" / "default", tmp_path / "plain" / "d" / "default"])
    assert sorted(p.label for p in found.points) == ["c/default", "d/default"]


@pytest.mark.slow
def test_the_history_run_logs_each_configuration_s_points_and_the_report_reads_that_run_alone(tmp_path):
    expr_to_filters = pytest.importorskip("wandb_workspaces.expr").expr_to_filters
    found = synthetic_history(np.random.default_rng(2), slower_from=5)
    loaded = found.points[2]
    points = [dataclasses.replace(p, runs=synthetic.beside(p.runs, 0.8 if p is loaded else 0.0)) for p in found.points]
    found = dataclasses.replace(found, points=points)
    made, _, _ = shown(found, tmp_path)
    seen = [views.view(s, "step", found) for s in made]
    gate = "UNMATCHED: 1 of the 2 configurations before 08ababab not in it"
    assert wandb_history.log_history(made, seen, found, tmp_path, TrackerConf(), [gate]) == []
    logged = wandb_records(tmp_path)
    summary = {k: v for r in logged if r["type"] == "summary" for k, v in r["summary"].get("update", {}).items()}
    assert summary["gate"] == gate and summary["01-subclass/machine"].startswith("machine: CPU synthetic"), summary
    assert f"; SHARED HOST {loaded.label} (others' CPU 40%" in summary["01-subclass/machine"], summary
    steps = [r["history"]["item"] for r in logged if r["type"] == "history"]
    keys = set().union(*(set(step) for step in steps))
    files = {f["path"] for r in logged if r["type"] == "files" for f in r["files"]["files"]}
    content = wandb_history.report_content(made, seen, found, tmp_path, TrackerConf(entity="perf-team"), [gate])
    report = build_wandb_report(content)
    (run,) = [r["run"] for r in logged if r["type"] == "run"]
    for grid in (b for b in report.blocks if type(b).__name__ == "PanelGrid"):
        assert run["run_id"] in json.dumps(json.loads(expr_to_filters(grid.runsets[0].filters).model_dump_json()))
        line, table = grid.panels
        assert {line.x, *line.y} <= keys, line.y
        assert any(f.startswith(f"media/table/{table.table_name}_") for f in files), table.table_name
    said = outline(content)
    assert "## subclass" in said and "line chart: 01-subclass/ms, 01-subclass/low, 01-subclass/high over point" in said
    assert "step ms: the geometric mean over the point's runs of each run's median" in said, "what its figures are"
    points = [float(step["01-subclass/ms"]) for step in steps if "01-subclass/ms" in step]
    assert len(points) == len(found.points), "one value of the configuration per point"
    assert points[-1] / points[0] == pytest.approx(1.3, rel=0.1), "the planted slowdown, as the view gives it"


def test_the_history_run_s_summary_gives_a_newest_point_of_one_run_no_interval(tmp_path):
    """W&B's summary keeps the last value logged of each key: an older point's interval is not the newest's."""
    found = synthetic_history(np.random.default_rng(2), slower_from=None)
    newest = found.points[-1]
    alone = dataclasses.replace(newest, runs=[r for r in newest.runs if r.fields["replicate"] == 0])
    found = dataclasses.replace(found, points=[*found.points[:-1], alone])
    made, _, _ = shown(found)
    seen = [views.view(s, "step", found) for s in made]
    assert wandb_history.log_history(made, seen, found, tmp_path, TrackerConf(), []) == []
    summary: dict = {}
    for record in (r["summary"] for r in wandb_records(tmp_path) if r["type"] == "summary"):
        summary.update({item["key"]: None for item in record.get("remove", [])} | record.get("update", {}))
    for series in made:
        assert summary[f"{series.slug}/ms"] == pytest.approx(views.centre(series.rows[-1]))
        assert summary.get(f"{series.slug}/low") is None and summary.get(f"{series.slug}/high") is None, summary


def test_a_threshold_may_be_a_percentage_and_the_comment_names_it(tmp_path):
    repo = tmp_path / "repo"
    for index, commit in enumerate(generate(repo, commits=4, planted=None)):
        write_commit_sweep(tmp_path / "runs" / f"s{index}", repo, commit, dirty=False)
    shown = launch_here("history", str(tmp_path / "runs"), "--threshold", "12.5%")
    assert "slower by more than the threshold (0.125, 12.5%)" in shown.stdout, shown.stdout + shown.stderr


def test_history_wandb_dry_run_prints_the_report_outline_and_writes_nothing(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    for index, commit in enumerate(generate(repo, commits=3, planted=None)):
        write_commit_sweep(tmp_path / "runs" / f"s{index}", repo, commit, dirty=False)
    out, runs = tmp_path / "out", str(tmp_path / "runs")
    shown = launch_here("history", runs, "--out", str(out), "--wandb", "--dry-run", "tracker.entity=perf-team")
    assert shown.returncode == 0, shown.stderr
    assert "W&B Report 'perfsweep history to " in shown.stdout and "in perf-team/perfsweep" in shown.stdout
    assert "line chart: 00-resnet18/ms, 00-resnet18/low, 00-resnet18/high over point" in shown.stdout
    assert not out.exists()
    refused = launch_here("history", runs, "--wandb")
    assert refused.returncode == 2 and "give it one with --out DIR" in refused.stderr
    alone = launch_here("history", runs, "--dry-run")
    assert alone.returncode == 2 and "it goes with --wandb" in alone.stderr
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    with socket.socket() as probe:  # a port nothing listens on: the server does not answer
        probe.bind(("127.0.0.1", 0))
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{probe.getsockname()[1]}")
    unreachable = launch_here("history", runs, "--out", str(out), "--wandb", "tracker.timeout_s=2")
    assert unreachable.returncode == views.EXIT_NO_HISTORY, "not 1: that is a regression's"
    assert "unreachable" in unreachable.stderr and "nothing was written or sent" in unreachable.stderr
    assert not out.exists()


def test_a_setting_of_the_users_own_that_newer_sweeps_add_parts_their_configurations():
    """A constructor argument that only the newest sweeps set is a configuration of its own, not the older one's."""
    found = history_of(np.random.default_rng(8), [TWO, TWO, TWO, TWO])
    for point in found.points[2:]:
        point.runs[:] = [dataclasses.replace(r, fields=r.fields | {"model.kwargs.d_model": 256}) for r in point.runs]
    made, left = views.series_of(found, "step", 0.05)
    labels = {f"{t} model.kwargs.d_model={d}" for t in ("subclass", "tensor") for d in ("(unset)", 256)}
    assert {s.label for s in made} == labels
    assert all(len(s.held) == 2 for s in made), "each configuration holds the two points that ran it"
    assert not any(line.startswith("not matched on") for line in left), left


def test_a_newest_point_on_a_slower_machine_says_so_beside_its_flag():
    """The newest sweep's fixed workload took 1.5 times as long: its subclass's slowdown may be the machine's."""
    found = synthetic_history(np.random.default_rng(4), slower_from=None, newest=1.5)
    rng = np.random.default_rng(0)
    points = [
        dataclasses.replace(p, runs=synthetic.timed(p.runs, 1.0 if p is found.points[-1] else 0.67, rng))
        for p in found.points
    ]
    made, _, status = shown(dataclasses.replace(found, points=points))
    (flagged,) = [series for series in made if series.flag]
    assert status == views.EXIT_POSSIBLE and flagged.label == "subclass"
    said = "; the machine ran slower in 08ababab: a fixed workload (matmul 384x384 float32 on cpu, 2 threads, fastest"
    assert said in flagged.flag, flagged.flag


def test_a_history_names_its_machine_and_a_point_that_ran_on_another_one():
    """The history's page is what people share: its times need their machine, and a point's other machine is named."""
    found = synthetic_history(np.random.default_rng(5), slower_from=None)
    other = {"cpu": "another CPU", "packages": {"torch": "synthetic"}}
    points = [
        dataclasses.replace(p, runs=[dataclasses.replace(r, env=other) for r in p.runs]) if p is found.points[3] else p
        for p in found.points
    ]
    _, text, _ = shown(dataclasses.replace(found, points=points))
    assert "machine: CPU synthetic, threads " in text, text
    assert (
        "MIXED MACHINES 04ababab: CPU another CPU (most runs: CPU synthetic): its change may be the machine's" in text
    )


def test_three_points_hold_the_newest_alone_and_say_so_and_a_change_reads_as_slower_or_faster():
    _, text, status = shown(synthetic_history(np.random.default_rng(4), slower_from=None, newest=1.5, commits=3))
    said = "change points: too few to find one (3 points; a change point needs 4); its newest point is tested against"
    assert said in text and status == views.EXIT_POSSIBLE, text
    flag = r"POSSIBLE REGRESSION: the newest point alone is 1\.\d\dx slower than the others \(its time over theirs, "
    assert re.search(flag + r"95% interval \[1\.\d+, \d\.\d+\]\)", text), text
    _, text, _ = shown(synthetic_history(np.random.default_rng(4), slower_from=None, commits=2))
    assert "not enough history: 2 points; a change point needs 4, and a test of its newest point alone 3" in text, text
    _, text, _ = shown(synthetic_history(np.random.default_rng(4), slower_from=None, commits=1))
    assert "not enough history: 1 point; a change point needs 4" in text, text
    made, text, _ = shown(synthetic_history(np.random.default_rng(2), slower_from=5))
    assert re.search(r"04ababab\.\.05ababab \(1\.\d\dx slower: ", text), text
    assert re.search(r"change: 1\.\d\dx slower, ", text), text


def test_a_history_by_launch_time_keeps_the_commit_and_subject_of_the_sweeps_that_name_one(tmp_path):
    """One sweep of the history names no commit: the points go by launch time, and the others still say theirs."""
    repo = tmp_path / "repo"
    (commit,) = generate(repo, commits=1, planted=None)
    write_commit_sweep(tmp_path / "runs" / "named", repo, commit, dirty=False)
    write_commit_sweep(tmp_path / "runs" / "edited", repo, commit, dirty=True)
    plain = tmp_path / "runs" / "plain"
    plain.mkdir(parents=True)
    write_run(plain, "t1", "tensor", "contiguous", 100.0)
    records.write_json(plain / records.SWEEP, {"uid": "0f0f0f0f", "runs": {}, "launches": []})
    found = history([tmp_path / "runs" / "named", tmp_path / "runs" / "edited", plain])
    assert found.order == "by launch time, as the runs of plain name no commit of the code under test", found.order
    subjects = {p.label: p.subject for p in found.points}
    assert subjects == {"named": f"{commit[:8]} s", "edited": f"{commit[:8]}+dirty s", "plain": ""}
