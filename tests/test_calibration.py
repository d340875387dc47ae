"""Calibration of the views' verdicts on synthetic sweeps of known truth (tests/synthetic.py), through the views
themselves: in A/A trials (two labels of one truth) no view may call noise a finding more often than its error
rate says, and a real slowdown must still be found.

Each rate is over TRIALS trials; at a true 5% its sampling sd is 1.0%, so a bound of 5% allows 7%.
"""

import dataclasses
import re

import numpy as np
import pytest

from perfsweep.analysis.statistics import rounds
from perfsweep.analysis.statistics.verdict import INDICATIVE
from perfsweep.analysis.views import compare, published, table
from perfsweep.records import DONE, Status
from tests import synthetic

TRIALS = 500
ALLOWED = 0.07  # 5% and two sampling sd of it over TRIALS trials
REPEATS = 3  # the default

# From a steady GPU (run spread 1%, little autocorrelation) to a CPU sharing its cores with a launcher (5% spread
# between processes, strongly correlated steps, a slow mode in one run of five).
NOISES = {
    "steady": synthetic.Noise(run_sd=0.01, step_sd=0.01, rho=0.1, warmup=0.02, bimodal=0.02, steps=100),
    "shared": synthetic.Noise(run_sd=0.05, step_sd=0.08, rho=0.6, warmup=0.10, bimodal=0.2, steps=10),
}


def vs_cells(runs) -> list[tuple[float, float]]:
    """The (low, high) of each `vs` cell of the table the terminal prints, but the baselines' 1.00x."""
    view = table.table_view("synthetic", runs)
    column = next(i for i, h in enumerate(view.header) if h.startswith("vs "))
    found = [re.search(r"\[([-\d.]+), ([-\d.]+)\]", row[column]) for row in view.rows]
    return [(float(m[1]), float(m[2])) for m in found if m]


@pytest.mark.slow
@pytest.mark.parametrize("paired", [False, True], ids=["apart", "paired"])
@pytest.mark.parametrize("noise", NOISES)
def test_the_tables_vs_interval_excludes_one_in_at_most_five_percent_of_aa_trials(noise, paired):
    rng = np.random.default_rng(1)
    excluded = total = 0
    for _ in range(TRIALS // 2):  # two comparisons per trial
        for low, high in vs_cells(synthetic.sweep(synthetic.grid(), REPEATS, NOISES[noise], rng, paired)):
            excluded += low > 1 or high < 1
            total += 1
    assert excluded / total <= ALLOWED


@pytest.mark.slow
@pytest.mark.parametrize("noise", NOISES)
def test_a_compare_of_two_identical_sweeps_exits_1_in_at_most_five_percent_of_trials(noise):
    rng = np.random.default_rng(2)
    levels = synthetic.grid(formats=("contiguous", "channels_last"))
    exits = []
    for _ in range(TRIALS):
        a, b = (synthetic.sweep(levels, REPEATS, NOISES[noise], rng) for _ in range(2))
        exits.append(compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)[1])
    assert np.mean([compare.timing(status) == compare.EXIT_REGRESSION for status in exits]) <= ALLOWED


@pytest.mark.slow
@pytest.mark.parametrize("noise", NOISES)
def test_a_same_claim_is_contradicted_in_at_most_five_percent_of_aa_trials(noise):
    rng = np.random.default_rng(3)
    claim = {"label": "subclass", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    claim["direction"] = "same"
    verdicts = [
        published.compare(synthetic.sweep(synthetic.grid(), REPEATS, NOISES[noise], rng), claim)[-1]
        for _ in range(TRIALS)
    ]
    assert verdicts.count("contradicted") / TRIALS <= ALLOWED
    assert set(verdicts) <= {"reproduced", "undetermined", "contradicted"}


def ten_percent_slower(seed: int, trials: int = 200, slowed: str | None = None) -> list[int]:
    """compare's exit statuses where each configuration of the candidate is 10% slower (of the input type `slowed`
    alone, where given): six configurations at the default repeats, with a 2% spread between runs."""
    rng = np.random.default_rng(seed)
    noise = synthetic.Noise(run_sd=0.02, step_sd=0.03, rho=0.3, steps=20)
    levels = synthetic.grid(formats=("contiguous", "channels_last"))
    slower = {key: level * (1.1 if slowed in (None, key[0]) else 1.0) for key, level in levels.items()}
    sides = (
        (
            synthetic.sweep(levels, REPEATS, noise, rng),
            synthetic.with_code(synthetic.sweep(slower, REPEATS, noise, rng), "b"),
        )
        for _ in range(trials)
    )
    return [compare.compare_runs(a, b, 0.05, 0.05, fail_undetermined=True)[1] for a, b in sides]


@pytest.mark.slow
def test_a_ten_percent_slowdown_with_a_two_percent_run_spread_is_found_at_least_80_percent_of_the_time():
    """The family's error control must not cost the power to see it, where every configuration slowed or some."""
    found = [compare.timing(status) == compare.EXIT_REGRESSION for status in ten_percent_slower(4)]
    assert np.mean(found) >= 0.8
    controlled = [compare.timing(status) for status in ten_percent_slower(4, slowed="subclass")]
    assert compare.EXIT_POSSIBLE not in controlled and compare.EXIT_REGRESSION in controlled


@pytest.mark.slow
def test_a_ten_percent_slowdown_at_three_runs_is_flagged_or_undetermined_never_passed_by_a_strict_gate():
    """Where the family's test cannot confirm a measured slowdown, a strict gate says undetermined, not nothing."""
    assert np.mean([status == 0 for status in ten_percent_slower(6)]) <= 0.01


@pytest.mark.slow
def test_paired_sides_find_a_ten_percent_slowdown_that_a_five_percent_process_spread_hides_from_runs_apart():
    """A CPU's spread between processes (5%) hides a 10% slowdown from runs apart at the default repeats.
    With each round's sides in one process, the table's vs interval excludes 1 in at least 80% of trials."""
    rng = np.random.default_rng(5)
    noise = synthetic.Noise(run_sd=0.05, step_sd=0.03, rho=0.3, bimodal=0.0, steps=20)
    levels = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 55.0}
    found = {
        paired: np.mean([vs_cells(synthetic.sweep(levels, REPEATS, noise, rng, paired))[0][1] < 1 for _ in range(200)])
        for paired in (True, False)
    }
    assert found[True] >= 0.8 > found[False]


def test_one_run_per_configuration_gives_no_verdict_word_and_no_95_percent_ci():
    rng = np.random.default_rng(5)
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.5}), 1, NOISES["steady"], rng)
    shown = table.table_view("synthetic", runs)
    text = "\n".join([*shown.above, *(" ".join(row) for row in shown.rows)])
    assert "95% CI" not in text and "within-run" in text
    claim = {"label": "s", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}, "speedup": 0.66}
    assert published.compare(runs, claim)[-1] == INDICATIVE
    slower = synthetic.sweep(synthetic.grid({"subclass": 1.5}), 1, NOISES["steady"], rng)
    view, status = compare.compare_runs(synthetic.sweep(synthetic.grid(), 1, NOISES["steady"], rng), slower, 0.05, 0.05)
    flags = [line.flag for line in view.items if line.flag]
    assert status == compare.EXIT_POSSIBLE and flags == ["POSSIBLE REGRESSION (1 run)"]


def auto(levels: dict, noise: synthetic.Noise, rng, max_runs: int = 10) -> tuple[list, rounds.Look]:
    """repeats=auto on a synthetic sweep: the runs of the rounds up to the look where it stopped, and that look."""
    runs = synthetic.sweep(levels, max_runs, noise, rng)
    looks = rounds.schedule(max_runs)
    for k in looks:
        taken = [r for r in runs if int(r.axes["replicate"]) < k]
        found = rounds.look(taken, k, 0.02, len(looks))
        if found.met:
            break
    return taken, found


@pytest.mark.slow
@pytest.mark.parametrize("noise", NOISES)
def test_repeats_auto_keeps_its_error_under_its_looks(noise):
    """A/A under repeats=auto: looking again and again calls no effect an effect at most 5% of the time, at the
    looks (decisive, at the level each look spends) and in the table's 95% intervals at the end."""
    rng = np.random.default_rng(6)
    decisive = excluded = total = 0
    for _ in range(TRIALS // 2):
        taken, found = auto(synthetic.grid(), NOISES[noise], rng)
        decisive += any(c.speedup.excludes(1.0) for c in found.comparisons)
        for low, high in vs_cells(taken):
            excluded += low > 1 or high < 1
            total += 1
    assert decisive / (TRIALS // 2) <= ALLOWED  # of a family of two comparisons
    assert excluded / total <= ALLOWED


def test_repeats_auto_finds_a_ten_percent_slowdown_with_a_two_percent_run_spread_within_its_cap():
    rng = np.random.default_rng(7)
    noise = synthetic.Noise(run_sd=0.02, step_sd=0.03, rho=0.3, steps=20)
    found = 0
    for _ in range(200):
        _, stopped = auto(synthetic.grid({"subclass": 1.1}), noise, rng)
        (subclass,) = [c for c in stopped.comparisons if c.label.startswith("subclass")]
        found += subclass.speedup.high < 1
    assert found / 200 >= 0.8


def test_a_drift_over_the_sweep_is_flagged_as_an_order_effect_and_none_is_not():
    """Every run 1% slower than the one before it (a machine heating up): each run beside its own configuration's
    runs, the later half is slower. Without drift, the flag is rare."""
    rng = np.random.default_rng(8)
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, rho=0.0, warmup=0.0, bimodal=0.0, steps=20)
    drifting = [
        dataclasses.replace(run, measured={c: v * 1.01**i for c, v in run.measured.items()})
        for i, run in enumerate(synthetic.sweep(synthetic.grid(), 6, steady, rng))
    ]
    drifting = [dataclasses.replace(r, summary=synthetic.summary_of(r.measured)) for r in drifting]
    (flag,) = [f for f in table.table_view("synthetic", drifting).flags if f.startswith("ORDER EFFECT")]
    assert "later half +" in flag
    flagged = sum(
        any(
            f.startswith("ORDER EFFECT")
            for f in table.table_view("s", synthetic.sweep(synthetic.grid(), 6, steady, rng)).flags
        )
        for _ in range(100)
    )
    assert flagged <= 5


def test_runs_that_started_in_one_second_are_ordered_by_their_windows_not_by_their_times():
    """Fast runs start many to a second (the status's resolution). Ordered by their own times within it, steady runs
    would read as drifting; ordered by when their windows ended, they do not."""
    rng = np.random.default_rng(8)
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, rho=0.0, warmup=0.0, bimodal=0.0, steps=20)
    flagged = 0
    for _ in range(50):
        runs = synthetic.sweep(synthetic.grid(formats=("contiguous", "channels_last")), 2, steady, rng)
        one_second = Status(state=DONE, started_at="2026-01-01T00:00:00+00:00")
        runs = [
            dataclasses.replace(r, status=one_second, summary=dataclasses.replace(r.summary, window_ended_at=i))
            for i, r in enumerate(runs, start=1000)
        ]
        flagged += any(f.startswith("ORDER EFFECT") for f in table.table_view("s", runs).flags)
    assert flagged <= 3


def test_a_run_still_settling_is_flagged_not_steady_though_its_spread_is_small():
    rng = np.random.default_rng(9)
    runs = synthetic.sweep(synthetic.grid(), 3, synthetic.Noise(warmup=0.0, bimodal=0.0, steps=50), rng)
    climbing = np.linspace(50, 56, 50)  # 12% over the window: a throttling device
    runs[0] = dataclasses.replace(runs[0], measured={**runs[0].measured, "step_ms": climbing})
    flags = table.table_view("synthetic", runs).flags
    assert [f.split(":")[0] for f in flags if f.startswith(("NOT STEADY", "NOISY"))] == [f"NOT STEADY {runs[0].name}"]
    assert "slowing down" in flags[0]
