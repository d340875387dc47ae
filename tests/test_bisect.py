"""`perfsweep bisect`: the search over releases (analysis/bisection/) on points given to it, and a real bisect of
numpy's releases, each point's environment built with uv, whose workload has a step planted in one release."""

import dataclasses
import json
import math
import re
import types

import numpy as np
import pytest
from scipy import stats as distributions

from perfsweep import launch, records
from perfsweep.analysis.bisection.search import (
    BAD,
    GOOD,
    UNBUILT,
    UNDETERMINED,
    BisectError,
    BisectSearch,
    Point,
    between,
    level,
    most_points,
    point_looks,
    prior_of,
    schedule,
    values,
)
from perfsweep.analysis.bisection.store import RECORD
from perfsweep.analysis.bisection.view import outcome, point_flags, view, would_need
from perfsweep.analysis.statistics.speedup import Sample, speedup
from perfsweep.commands.bisect import Bisection, folder_conflict
from perfsweep.records import load_sweep
from tests import golden, synthetic
from tests.helpers import ONE_OF_TWO_FAILS, UNSTABLE, launch_here, write_run

RELEASES = [f"1.{minor}.0" for minor in range(9)]  # 1.0.0 (good) .. 1.8.0 (bad)


def point(version: str, ratio: float, half: float = 0.05, runs: int = 3, at: float = 0.95) -> Point:
    """A point whose interval (at level `at`, a t-interval on its log) spans -+`half` of its ratio."""
    se = math.log(1 + half) / distributions.t.ppf(0.5 + at / 2, runs - 1)
    return Point(version, ratio, ratio / (1 + half), ratio * (1 + half), runs, se=se, df=runs - 1)


def bisected(releases: list[str], measure) -> tuple[BisectSearch, list[str]]:
    """A search run to its end on `measure` (release -> its Point, or None: cannot be built); the midpoints it
    measured, in order."""
    search = BisectSearch("pkg", releases, "a ratio", 0.95)
    search.add(measure(releases[0]))
    search.add(measure(releases[-1]))
    measured = []
    while (version := search.next()) is not None:
        measured.append(version)
        search.add(measure(version) or Point(version, side=UNBUILT, why="no wheel"))
    return search, measured


@pytest.mark.parametrize("planted", range(1, 9))
def test_the_search_names_the_planted_release_in_a_logarithmic_number_of_points(planted):
    search, measured = bisected(RELEASES, lambda v: point(v, 3.0 if RELEASES.index(v) >= planted else 1.0))
    assert search.first_bad() == (RELEASES[planted - 1], RELEASES[planted])
    assert len(measured) <= math.ceil(math.log2(len(RELEASES) - 1)), "a midpoint per halving, no more"
    path = sorted(search.points.values(), key=lambda p: p.order)
    assert [p.version for p in path] == [RELEASES[0], RELEASES[-1], *measured], "the path, in the order it was taken"
    assert outcome(search) == [
        f"first release on the bad side: pkg {RELEASES[planted]} ({RELEASES[planted - 1]}, before it, is good)"
    ]


def test_a_fix_is_found_as_a_change_is_when_good_is_the_newer_release():
    releases = between(RELEASES, good="1.8.0", bad="1.0.0")
    assert releases == RELEASES[::-1]
    search, _ = bisected(releases, lambda v: point(v, 0.5 if v < "1.3.0" else 1.0))  # slow before 1.3.0
    assert search.first_bad() == ("1.3.0", "1.2.0")
    (said,) = outcome(search)
    assert said == "the change came in pkg 1.3.0: the first release on the good side (1.2.0, before it, is bad)"


def test_a_release_that_cannot_be_built_is_passed_over_and_named():
    unbuilt = {"1.4.0", "1.5.0"}
    search, measured = bisected(RELEASES, lambda v: None if v in unbuilt else point(v, 3.0 if v >= "1.5.0" else 1.0))
    assert unbuilt <= set(measured) and search.first_bad() is None, "no single release can be named"
    assert search.points["1.3.0"].side == GOOD and search.points["1.6.0"].side == BAD
    assert outcome(search) == ["the change is in one of pkg 1.4.0, 1.5.0, 1.6.0: 1.4.0, 1.5.0 cannot be built here"]


def test_an_undetermined_point_stops_the_search_and_says_what_it_would_need():
    boundary = math.sqrt(3.0)
    search, measured = bisected(
        RELEASES,
        lambda v: point(v, boundary * 1.05, half=0.2) if v == "1.4.0" else point(v, 3.0 if v > "1.4.0" else 1.0),
    )
    assert measured == ["1.4.0"] and search.points["1.4.0"].side == UNDETERMINED
    assert search.first_bad() is None and search.next() is None
    stopped, need = outcome(search)
    assert stopped.startswith("stopped at pkg 1.4.0: ") and stopped.endswith(f"one of {', '.join(RELEASES[1:])}")
    runs = int(re.search(r"about (\d+) runs a side would place 1.4.0, .* repeats=(\d+)", need)[1])
    assert runs > 3, "more runs than it had"
    assert search.runs_needed(point("1.4.0", boundary, half=0.2)) is None, "at the boundary no number of runs will do"
    assert would_need(search, point("1.4.0", 2.0, runs=1)).startswith("1.4.0 has 1 done runs a side")


def test_ends_not_told_apart_name_no_release():
    search, measured = bisected(
        RELEASES, lambda v: point(v, 1.1, half=0.2) if v == "1.8.0" else point(v, 1.0, half=0.2)
    )
    assert not measured and search.first_bad() is None
    assert outcome(search)[0].startswith("pkg 1.0.0 and 1.8.0 are not told apart at this level")


def test_ends_that_measure_alike_say_that_no_change_of_five_percent_lies_between_them():
    """Each end within -+2% at 12 runs: their ratio's interval lies within -+5%, so no midpoint is worth a run."""
    search = BisectSearch("pkg", RELEASES, "a ratio", 0.95)
    search.add(point(RELEASES[0], 1.0, half=0.02, runs=12))
    (alone,) = outcome(search)[1:]
    assert alone == "1.0.0 is placed against the boundary between the ends, and one end has no value yet"
    assert not search.ends_alike(), "one end alone says nothing"
    search.add(point(RELEASES[-1], 1.0, half=0.02, runs=12))
    assert search.ends_alike() and search.next() is None
    stopped, *need = outcome(search)
    said = "1.8.0 measures 1.00x of 1.0.0, its interval within -+5%: no change of 5% or more lies between them"
    assert stopped.startswith("pkg 1.0.0 and 1.8.0 are not told apart") and need == [said]
    search.add(point(RELEASES[-1], 1.0, half=0.05, runs=12))
    assert not search.ends_alike(), "ends whose ratio's interval reaches past 5% may hold such a change"


def test_a_look_at_the_ends_stops_once_they_measure_alike(tmp_path):
    """More runs of ends that measure alike would only narrow an interval that already rules out a 5% change."""
    search = BisectSearch("pkg", RELEASES, "a ratio", 0.95)
    bisection = Bisection(search, "pkg", tmp_path, [], None, None, None)
    bisection.versions = [RELEASES[0], RELEASES[-1]]
    for end in bisection.versions:
        search.add(point(end, 1.0, half=0.05, runs=6))
    assert not bisection.decided(), "undetermined ends whose ratio may still hold a change look again"
    search.add(point(RELEASES[-1], 1.0, half=0.02, runs=12))
    search.add(point(RELEASES[0], 1.0, half=0.02, runs=12))
    assert bisection.decided()


def test_a_commit_whose_own_runs_fail_is_passed_over_though_the_good_one_s_beside_it_are_done(tmp_path):
    """A point's sweep alternates it with the good commit: the good one's done runs place nothing of the point."""
    commits = ["c1", "c2", "c3"]
    search = BisectSearch("pkg", commits, "a ratio", 0.95, subjects={c: f"commit {c}" for c in commits})
    bisection = Bisection(search, "pkg", tmp_path, [], "c1", None, None)
    sweep = tmp_path / "pkg-c2"
    for name, commit, state in (("a", "c1", "done"), ("b", "c2", "failed"), ("c", "c1", "done"), ("d", "c2", "failed")):
        write_run(sweep, name, "tensor", "contiguous", 100.0, state=state)
        record = records.read_json(sweep / name / records.CONFIG)
        record["axes"] |= {"pkg": commit}
        records.write_json(sweep / name / records.CONFIG, record | {"axis_order": [*record["axis_order"], "pkg"]})
    plan = types.SimpleNamespace(sweep_dir=sweep, runs=[types.SimpleNamespace(name=name) for name in "abcd"])
    bisection.looked(plan, 2)
    assert search.points["c2"].side == UNBUILT, search.points["c2"]
    assert search.points["c2"].why == "its runs fail: OutOfMemoryError: CUDA out of memory"


def test_ends_within_five_percent_say_there_may_be_no_change_rather_than_ask_for_hundreds_of_runs():
    search, measured = bisected(
        RELEASES, lambda v: point(v, 1.03, half=0.1, runs=8) if v == "1.8.0" else point(v, 1.0, half=0.1, runs=8)
    )
    assert not measured and search.first_bad() is None
    stopped, need = outcome(search)
    assert stopped.startswith("pkg 1.0.0 and 1.8.0 are not told apart")
    assert re.fullmatch(
        r"1\.8\.0 measures 1\.03x of 1\.0\.0, within 5%: there may be no change between them to find \(about \d+ runs "
        r"a side would tell them apart\)",
        need,
    ), need


def test_one_run_a_side_or_runs_without_spread_place_no_point():
    search = BisectSearch("pkg", RELEASES, "a ratio", 0.95)
    search.add(point("1.0.0", 1.0))
    search.add(point("1.8.0", 3.0))
    assert search.add(point("1.4.0", 3.0, runs=1)).side == UNDETERMINED
    coarse = Point("1.5.0", 1.05, 1.05, 1.05, 3, se=0.0, df=2)  # a coarse timer: every run the same
    assert search.add(coarse).side == UNDETERMINED and "no spread" in would_need(search, search.points["1.5.0"])


def test_against_the_good_release_the_good_one_is_the_reference_not_a_measurement():
    search = BisectSearch("pkg", RELEASES, "a ratio", 0.95)
    assert search.add(Point("1.0.0", 1.0, 1.0, 1.0, reference=True)).side == GOOD
    search.add(point("1.8.0", 3.0))
    assert search.ends_differ() and search.points["1.0.0"].interval() == "1.00x (the reference)"
    unmeasured = BisectSearch("pkg", RELEASES, "a ratio", 0.95)
    assert unmeasured.add(Point("1.0.0")).side == UNDETERMINED, "a good end with no runs is not good"


def test_the_level_splits_the_error_over_looks_and_points():
    assert level(1, 5) == pytest.approx(1 - 0.05 / 4)  # the two ends and two midpoints
    assert level(5, 9) == pytest.approx(1 - 0.05 / 25)


def test_a_point_looks_at_runs_growing_by_half_and_never_more_often_than_the_schedule():
    assert schedule(40) == [3, 5, 8, 12, 18, 27, 40]
    assert schedule(5) == [3, 5] and schedule(2) == [2]
    assert point_looks(19, schedule(40)) == [19, 27, 40], "a first look from the spread, then the schedule's beyond it"
    assert all(len(point_looks(first, schedule(40))) <= len(schedule(40)) for first in range(3, 41))


def measured_ends(bad_half: float, runs: int = 5) -> BisectSearch:
    """An adaptive search over RELEASES whose good end is the reference and whose bad end measured 1.44x, its
    interval -+`bad_half` at `runs` runs a side: the boundary is 1.2x."""
    search = BisectSearch("pkg", RELEASES, "a ratio", level(7, len(RELEASES)), looks=schedule(40))
    search.add(Point("1.0.0", 1.0, 1.0, 1.0, reference=True))
    search.add(point("1.8.0", 1.44, half=bad_half, runs=runs, at=search.level))
    return search


def test_a_midpoints_first_look_is_what_the_spread_measured_so_far_says_it_needs():
    steady, noisy, wild = (measured_ends(half).first_look("1.4.0", None) for half in (0.01, 0.3, 3.0))
    said = "what the spread of the points measured so far says a point needs"
    assert steady == (3, said), "a spread small beside the step: the schedule's first look places it"
    assert 5 < noisy[0] < 40 and noisy[1] == said, "more runs than the ends had, from the first look"
    assert wild == (40, said), "no more than --max-runs"


def test_an_ends_first_look_comes_from_the_runs_given_else_from_the_schedule():
    search = BisectSearch("torch", ["2.9.1", "2.10.0", "2.12.1"], "a ratio", level(7, 3), looks=schedule(40))
    assert search.first_look("2.12.1", None) == (3, "the schedule's first look")
    noisy = synthetic.Noise(run_sd=0.1, bimodal=0)
    given = synthetic_sweep({("tensor", "2.12.1"): 60.0, ("tensor", "2.9.1"): 50.0}, runs=8, noise=noisy)
    prior = prior_of([given], "torch", "2.9.1", "2.12.1", True, "the runs given")
    assert prior.ratio == pytest.approx(1.2, rel=0.1) and prior.df == 14
    assert prior.spread == pytest.approx(0.1 * math.sqrt(2), rel=0.5), "two runs apart: each side's spread, twice"
    first, why = search.first_look("2.12.1", prior)
    assert 5 < first < 40 and why == "what the spread of the runs given says a point needs"
    commits = {"2.9.1": "aa" * 20, "2.12.1": "bb" * 20}  # a history's runs: each sweep at a commit, no axis of it
    history = [
        dataclasses.replace(
            run,
            axes={"input_type": "tensor"},
            status=dataclasses.replace(run.status, code_under_test={"commit": commits[run.axes["torch"]]}),
        )
        for run in given
    ]
    by_commit = prior_of([history], "steplib", "aa" * 20, "bb" * 20, True, "a history")
    assert by_commit.ratio == pytest.approx(prior.ratio), "a commit's runs found by their code under test"


def test_for_one_comparison_the_spread_given_is_the_comparisons_and_runs_without_one_are_refused():
    given = synthetic_sweep({("tensor", "2.9.1"): 50.0, ("subclass", "2.9.1"): 60.0}, runs=4)
    prior = prior_of([given], "torch", "2.9.1", "2.12.1", False, "the runs given")
    assert prior.spread > 0 and prior.df == 3 and math.isnan(prior.ratio)
    alone = synthetic_sweep({("tensor", "2.9.1"): 50.0}, runs=1)
    with pytest.raises(BisectError, match="--from: the runs given show no spread between runs"):
        prior_of([alone], "torch", "2.9.1", "2.12.1", True, "the runs given")


def test_an_undetermined_point_says_which_setting_would_place_it():
    search = measured_ends(0.01)
    stuck = point("1.4.0", 1.25, half=0.1, runs=40, at=search.level)
    more = re.search(
        r"about (\d+) runs a side .* with --max-runs (\d+), into a new folder \(sweep_name=NAME\)$",
        would_need(search, stuck),
    )
    assert more and int(more[1]) == int(more[2]) > 40, "more runs than the cap, in a search of its own"
    search.stopped = "its time (--max-minutes 5) ran out"
    early = point("1.4.0", 1.25, half=0.1, runs=12, at=search.level)
    assert would_need(search, early).endswith(
        "its time (--max-minutes 5) ran out at 12 runs a side: the same command again goes on"
    )
    search.fixed, search.looks, search.stopped = True, [3], ""
    assert "the bisect again with repeats=" in would_need(search, early)


def test_a_search_whose_time_ran_out_says_where_it_stands_and_that_the_same_command_goes_on():
    search = measured_ends(0.01)
    bisection = Bisection(search, "pkg", None, [], "1.0.0", None, max_minutes=1.0)
    assert not bisection.ran_out()
    bisection.began -= 61  # a minute and a second later
    assert bisection.ran_out() and search.next() == "1.4.0", "the next point is not measured"
    assert outcome(search) == [
        f"so far: the first release on the bad side is one of {', '.join(RELEASES[1:])}",
        "stopped: its time (--max-minutes 1) ran out; the same command again goes on",
    ]


@pytest.mark.slow
def test_a_point_at_the_boundary_is_placed_in_at_most_its_share_of_the_error_over_its_looks():
    """The worst case for a point: its true ratio is the boundary, so either side is wrong. Each trial adds runs
    along the adaptive looks, each a real paired interval at the search's level; a point is placed, wrongly, in at
    most its share of the 5%: 5% over the most points (3 here). Each look at that share alone would place it in
    several times as many."""
    releases, looks, trials = RELEASES[:3], schedule(40), 2000
    search = BisectSearch("pkg", releases, "a ratio", level(len(looks), len(releases)), looks=looks)
    search.add(Point(releases[0], 1.0, 1.0, 1.0, reference=True))
    search.add(point(releases[-1], 1.44, half=0.01, runs=5, at=search.level))  # the boundary: 1.2x
    rng, first = np.random.default_rng(11), search.first_look(releases[1], None)[0]
    placed = 0
    for _ in range(trials):
        rounds, good = rng.normal(0, 0.07, 40), rng.normal(0, 0.07, 40)  # each run's log offset: one pair a round
        for n in point_looks(first, looks):
            of = Sample(tuple(np.exp(rounds[:n, None]) * 60.0), tuple(range(n)))  # 1.2x the good one's 50 ms
            over = Sample(tuple(np.exp(good[:n, None]) * 50.0), tuple(range(n)))
            found = search.add(Point.of(releases[1], speedup(of, over, paired=True, level=search.level)))
            if found.side != UNDETERMINED:
                placed += 1
                break
    share = 0.05 / most_points(len(releases))
    assert placed / trials <= share + 2 * math.sqrt(share * (1 - share) / trials)


def test_releases_between_are_final_releases_and_unknown_ones_are_refused():
    assert between(["2.0.0", "1.9.0rc1", "1.9.0+cpu", "1.9.0", "1.8.1", "1.8.0"], "1.8.0", "2.0.0") == [
        "1.8.0",
        "1.8.1",
        "1.9.0",
        "2.0.0",
    ]
    with pytest.raises(BisectError, match=r"bad=9.9.9: not a release this Python can install; the latest: 2.0.0, 1.9"):
        between(["2.0.0", "1.9.0"], "1.9.0", "9.9.9")
    with pytest.raises(BisectError, match=r"; 9bbb409 reads as a commit: --git GOOD BAD bisects your repository's"):
        between(["2.0.0", "1.9.0"], "9bbb409", "97ce000")
    with pytest.raises(BisectError, match=r"bad=2.1.0.dev1 is a pre-release or a local build"):
        between(["2.1.0.dev1", "2.0.0", "1.9.0"], "1.9.0", "2.1.0.dev1")


STEADY = synthetic.Noise(bimodal=0)


def synthetic_sweep(levels: dict[tuple[str, str], float], runs: int = 4, noise: synthetic.Noise = STEADY) -> list:
    """Done runs of (input_type, torch) configurations at these step times (ms), interleaved in rounds."""
    rng, found = np.random.default_rng(0), []
    for replicate in range(runs):
        for (input_type, torch), ms in levels.items():
            steps = synthetic.run_steps(ms, noise, rng)
            axes = {"input_type": input_type, "torch": torch}
            found.append(synthetic.record(f"{input_type}-{torch}", axes, steps, replicate, len(found), rng))
    return found


def test_against_the_good_release_a_point_is_its_step_time_over_the_good_ones():
    runs = synthetic_sweep({("tensor", "2.12.1"): 75.0, ("tensor", "2.9.1"): 50.0})
    (found,) = values(runs, "torch", "2.9.1", 0.95).values()
    assert found.version == "2.12.1" and found.runs == 4 and found.low < 1.5 < found.high
    assert found.ratio == pytest.approx(1.5, rel=0.05)


def test_with_one_comparison_a_point_is_its_ratio_within_each_release():
    levels = {("tensor", "2.9.1"): 50.0, ("subclass", "2.9.1"): 50.0, ("tensor", "2.12.1"): 50.0}
    found = values(synthetic_sweep({**levels, ("subclass", "2.12.1"): 100.0}), "torch", None, 0.95)
    assert found["2.9.1"].ratio == pytest.approx(1.0, rel=0.05) and found["2.12.1"].ratio == pytest.approx(2, rel=0.05)
    with pytest.raises(BisectError, match="a bisect follows one comparison a release; these make several"):
        values(synthetic_sweep({**levels, ("tensorbase", "2.9.1"): 60.0}), "torch", None, 0.95)


# A step planted 50 times over: under the suite's load (its spread between runs up to 2x and more) 5 runs a side
# still place every point on its side of the boundary (7x), and 3 do where the machine is quieter.
PLANTED = [
    "workload=planted_step",
    "workload.impl=steady,planted",
    "workload.size=128",
    "planted.version=2.2.4",
    "planted.factor=50",
    "threads=1",
    "steps=40",
    "warmup_steps=2",
    "repeats=auto",
    "tracker.mode=disabled",
]


@pytest.mark.network
def test_a_bisect_of_numpys_releases_finds_the_planted_step(tmp_path, env_dir):
    """Four real releases, each point's environment built as a user's is; the step is planted in 2.2.4."""
    args = [
        "--package",
        "numpy",
        "--good",
        "2.2.3",
        "--bad",
        "2.2.6",
        "--max-runs",
        "8",  # the planted step spreads on a loaded machine: room to place each point
        *PLANTED,
        f"env.dir={env_dir}",
    ]
    result = launch_here("bisect", *args, f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "first release on the bad side: numpy 2.2.4 (2.2.3, before it, is good)" in result.stdout
    record = json.loads((tmp_path / "default" / RECORD).read_text())
    assert (record["first_bad"], record["last_good"]) == ("2.2.4", "2.2.3")
    assert record["releases"] == ["2.2.3", "2.2.4", "2.2.5", "2.2.6"]
    sides = {p["version"]: p["side"] for p in record["points"]}
    assert sides == {"2.2.3": GOOD, "2.2.4": BAD, "2.2.6": BAD}, "2.2.5 was not needed"
    for measured in record["points"]:
        runs = load_sweep(tmp_path / "default" / measured["sweep"])
        assert {run.axes["numpy"] for run in runs} >= {measured["version"]}
        for run in runs:
            asked = run.axes["numpy"]
            assert run.env["packages"]["numpy"] == asked, "each run imported the numpy it asked for"
            assert run.env["environment"]["requested"] == {"numpy": asked}
            assert run.env["environment"]["resolved"] == [f"numpy=={asked}"]
    table = launch_here("table", str(tmp_path / "default" / "numpy-2.2.4")).stdout
    assert "numpy=2.2.4" in table.splitlines()[1] and "| planted " in table, "the point's table names its release"
    shown = launch_here("table", str(tmp_path / "default"))
    assert shown.returncode == 0 and shown.stdout.strip() in result.stdout, "the folder's table is the search's"
    status = launch_here("status", str(tmp_path / "default")).stdout
    assert status.startswith(f"{tmp_path / 'default'}: no runs; its sweeps: numpy-2.2.3, numpy-2.2.4, numpy-2.2.6 ")
    runs_before = sorted(tmp_path.glob("default/*/*/status.json"))
    again = launch_here("bisect", *args, f"runs_dir={tmp_path}")
    assert again.returncode == 0 and "were already done and were not run again" in again.stdout, "resumed"
    assert sorted(tmp_path.glob("default/*/*/status.json")) == runs_before, "no run ran again"
    assert json.loads((tmp_path / "default" / RECORD).read_text()) == record, "the same search, found again"
    other = launch_here("bisect", *[a.replace("threads=1", "threads=2") for a in args], f"runs_dir={tmp_path}")
    assert other.returncode == 2 and "holds another bisect (numpy 2.2.3..2.2.6" in other.stderr


@pytest.mark.network
def test_a_point_whose_runs_all_fail_stops_the_bisect_with_their_error(tmp_path, env_dir):
    """torchvision's ResNet18 cannot take 4 input channels: every run fails as it builds its model."""
    failing = [*ONE_OF_TWO_FAILS[:3], "model.in_chans=4", "input_type=tensor,subclass", "memory_format=contiguous"]
    args = ["--package", "numpy", "--good", "2.2.3", "--bad", "2.2.6", *failing, "steps=2", "warmup_steps=1"]
    result = launch_here(
        "bisect", *args, "repeats=2", "tracker.mode=disabled", f"env.dir={env_dir}", f"runs_dir={tmp_path}"
    )
    assert result.returncode == 2, result.stdout + result.stderr
    said = "perfsweep: the bisect stopped:\n- numpy 2.2.3: none of its 4 runs is done ("
    assert said in result.stderr and "3 input channels" in result.stderr and "Traceback" not in result.stderr
    assert json.loads((tmp_path / "default" / RECORD).read_text())["points"] == [], "the search, saved as it stood"


def test_a_bisect_refuses_a_sweep_of_more_than_one_comparison(tmp_path, capsys):
    args = ["bisect", "--good", "2.2.2", "--bad", "2.2.6", "--package", "numpy", "workload=sampler"]
    status = launch.main([*args, "workload.impl=nonzero,static", "workload.size=10,20", f"runs_dir={tmp_path}"])
    assert status == 2 and not any(tmp_path.iterdir())
    golden.says("a bisect of a sweep with four configurations", capsys.readouterr().err)


@pytest.mark.network
def test_a_bisect_refuses_a_release_the_index_does_not_have(tmp_path, capsys):
    status = launch.main(
        ["bisect", "--package", "numpy", "--good", "2.2.2", "--bad", "9.9.9", *PLANTED, f"runs_dir={tmp_path}"]
    )
    assert status == 2 and not any(tmp_path.iterdir())
    golden.says("a bisect to a release that does not exist", capsys.readouterr().err, UNSTABLE)


@pytest.mark.parametrize(
    ("override", "name"),
    [
        ("auto.max_runs=20", "a bisect with repeats=auto's cap"),
        ("launcher.budget_s=50", "a bisect with a launch's budget"),
        ("++auto.max_runs=20", "a bisect with repeats=auto's cap forced in"),
        ("order=grouped", "a bisect in grouped order"),
    ],
)
def test_a_bisect_refuses_repeats_autos_caps_and_an_order_that_is_not_interleaved(tmp_path, capsys, override, name):
    args = ["bisect", "--package", "numpy", "--good", "2.2.2", "--bad", "2.2.6", *PLANTED, override]
    assert launch.main([*args, f"runs_dir={tmp_path}"]) == 2 and not any(tmp_path.iterdir())
    golden.says(name, capsys.readouterr().err)


@pytest.mark.parametrize(
    ("budget", "said"),
    [
        (["--max-runs", "1"], "--max-runs 1: a point needs 2 or more runs a side"),
        (["--max-minutes", "0"], "--max-minutes 0: the search needs some time; give more than 0"),
    ],
)
def test_a_bisect_refuses_a_budget_that_places_no_point_naming_that_budget_alone(tmp_path, capsys, budget, said):
    args = ["bisect", "--package", "numpy", "--good", "2.2.2", "--bad", "2.2.6", *PLANTED, *budget]
    assert launch.main([*args, f"runs_dir={tmp_path}"]) == 2 and not any(tmp_path.iterdir())
    assert capsys.readouterr().err.strip().endswith(said)


def test_a_bisect_refuses_the_bisected_package_among_the_overrides(tmp_path, capsys):
    args = ["bisect", "--package", "numpy", "--good", "2.2.2", "--bad", "2.2.6", *PLANTED, "+env.packages.numpy=2.0.0"]
    assert launch.main([*args, f"runs_dir={tmp_path}"]) == 2 and not any(tmp_path.iterdir())
    golden.says("a bisect with its package pinned", capsys.readouterr().err)


@pytest.mark.network
def test_a_bisect_whose_end_has_no_wheel_for_this_python_runs_nothing(tmp_path, env_dir, capsys):
    """numpy 1.23.0 has no build for Python 3.11 (its wheels start at 1.23.2): refused before any run, in seconds,
    rather than compiled from its source."""
    args = ["bisect", "--package", "numpy", "--good", "1.23.0", "--bad", "1.23.2", *PLANTED, f"env.dir={env_dir}"]
    assert launch.main([*args, f"runs_dir={tmp_path}"]) == 2 and not any(tmp_path.iterdir())
    golden.says("a bisect from a release with no wheel for this Python", capsys.readouterr().err, UNSTABLE)


@pytest.mark.network
def test_a_bisect_refuses_a_folder_that_holds_a_sweeps_runs(tmp_path, capsys):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "sweep.json").write_text("{}")  # as a sweep launched into it leaves
    args = ["bisect", "--package", "numpy", "--good", "2.2.2", "--bad", "2.2.6", *PLANTED, f"runs_dir={tmp_path}"]
    assert launch.main(args) == 2
    said = capsys.readouterr().err
    assert f"{tmp_path / 'default'} holds a sweep's runs, not a bisect's points; sweep_name=NAME" in said
    assert sorted(p.name for p in (tmp_path / "default").iterdir()) == ["sweep.json"], "nothing written"


def test_a_bisect_that_placed_no_point_leaves_its_folder_to_one_with_other_settings(tmp_path):
    settings = {
        "package": "mylib",
        "good": "a1",
        "bad": "b2",
        "overrides": ["model=mylib.MPL"],
        "looks": [4],
        "from": [],
    }
    fixed = {**settings, "overrides": ["model=mylib.MLP"]}
    (tmp_path / RECORD).write_text(json.dumps({**settings, "points": []}))
    assert folder_conflict(tmp_path, fixed) == ""
    (tmp_path / RECORD).write_text(json.dumps({**settings, "points": [{"version": "a1", "reference": True}]}))
    assert folder_conflict(tmp_path, fixed) == "", "the good end as the reference is no measurement"
    (tmp_path / RECORD).write_text(json.dumps({**settings, "points": [{"version": "a1"}]}))
    assert "holds another bisect" in folder_conflict(tmp_path, fixed)
    assert folder_conflict(tmp_path, settings) == ""


def test_a_points_printed_interval_keeps_its_bounds_on_their_side_of_the_boundary():
    """A good point at 1.0x [0.798, 1.228] beside a boundary of 1.24x: one decimal would print [0.7, 1.3]."""
    point = Point("c7", 1.0, 0.798, 1.228, 5, se=0.1, df=4)
    assert point.interval(1.24) == "1.00x [0.79, 1.23]"
    assert point.interval() == "1.00x [0.79, 1.23]", "without a boundary, as no bound moves past 5% of itself"


def test_a_bisect_s_table_carries_each_point_s_flags_from_its_sweep(tmp_path):
    """A point whose runs were noisy says so beside its ratio, each side named, as its sweep's table does."""
    noisy = synthetic.Noise(step_sd=0.3, steps=20)
    runs = synthetic.sweep(synthetic.grid(), 4, noisy, np.random.default_rng(3))
    runs = [r for r in runs if r.axes["input_type"] in ("tensor", "subclass")]
    synthetic.write(runs, tmp_path / "point")
    search = BisectSearch("input_type", ["tensor", "subclass"], "a ratio", 0.95)
    search.points["subclass"] = dataclasses.replace(point("subclass", 1.0), sweep="point")
    (flags,) = point_flags(tmp_path, search).values()
    assert flags.startswith("point: NOISY ") and "; reference: NOISY " in flags, flags
    shown = view(search, "", point_flags(tmp_path, search))
    assert shown.header[-1] == "flags" and shown.rows[0][-1] == flags
