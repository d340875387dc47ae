"""Replicates: the plan's order and ids, validation, and the statistics across runs on data of known variance."""

import math

import numpy as np
import pytest

from analysis import replicates, stats
from analysis.render import text
from launcher.validate import validate
from sweeps.plan import PlanError, build_plan
from tests.conftest import TINY, launch_here, write_model_run
from train.checks import problems

TWO = [*TINY, "input_type=tensor,subclass", "memory_format=contiguous"]


def test_interleaved_order_runs_every_configuration_before_any_twice():
    plan = build_plan([*TWO, "repeats=3", "seed=7"])
    order = [(r.axes["input_type"], r.config.replicate, r.config.seed) for r in plan.runs]
    assert order == [(t, r, 7 + r) for r in range(3) for t in ("tensor", "subclass")]
    assert len({r.run_id for r in plan.runs}) == 6 and all(
        f"replicate={r.config.replicate}" in r.name for r in plan.runs
    )


def test_grouped_and_shuffled_orders():
    grouped = build_plan([*TWO, "repeats=2", "order=grouped"]).runs
    assert [(r.axes["input_type"], r.config.replicate) for r in grouped] == [
        ("tensor", 0), ("tensor", 1), ("subclass", 0), ("subclass", 1)
    ]  # fmt: skip
    shuffled = [r.name for r in build_plan([*TWO, "repeats=3", "order=shuffled"]).runs]
    assert shuffled == [r.name for r in build_plan([*TWO, "repeats=3", "order=shuffled"]).runs]  # seeded
    assert sorted(shuffled) == sorted(r.name for r in build_plan([*TWO, "repeats=3"]).runs)


def test_without_repeats_nothing_changes():
    (run,) = build_plan([*TINY, "input_type=tensor", "memory_format=contiguous"]).runs
    assert "replicate" not in run.axes and run.config.replicate == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [(["repeats=0"], "repeats=0 must be 1 or more"), (["order=random"], "order='random' is not one of: interleaved")],
)
def test_bad_repeats_or_order(overrides, message):
    with pytest.raises(PlanError, match=message):
        build_plan([*TWO, *overrides])


def test_replicates_must_each_have_their_own_process():
    spawned = validate(build_plan([*TWO, "repeats=2", "launcher.runs_per_job=4", "launcher.isolation=spawn"]), problems)
    assert any("replicates must each start a fresh process" in p for p in spawned)
    forked = validate(build_plan([*TWO, "repeats=2", "launcher.runs_per_job=4", "launcher.isolation=fork"]), problems)
    assert forked == [], "forked from one job, each replicate still gets a process of its own"


def _runs(rng, true_ms: float, n_runs: int, between: float, within: float = 0.01, steps: int = 100):
    """Steps of n_runs runs: each run's level off the truth by lognormal(0, between), steps around it."""
    return [true_ms * math.exp(rng.normal(0, between)) * np.exp(rng.normal(0, within, steps)) for _ in range(n_runs)]


def test_across_run_intervals_cover_the_truth_and_step_intervals_do_not():
    rng = np.random.default_rng(0)
    covered_runs = covered_steps = 0
    trials = 200
    for _ in range(trials):
        a, b = _runs(rng, 10.0, 5, 0.05), _runs(rng, 11.0, 5, 0.05)  # b is 10% slower: a's speed-up is 1.1
        medians_a, medians_b = (np.array([np.median(s) for s in runs]) for runs in (a, b))
        across = stats.speedup_across_runs(medians_a, medians_b)
        pooled = stats.speedup(np.concatenate(a), np.concatenate(b), resamples=500)
        covered_runs += across.low <= 1.1 <= across.high
        covered_steps += pooled.low <= 1.1 <= pooled.high
    assert 0.90 <= covered_runs / trials <= 0.99  # a 95% interval that includes run-to-run variance
    assert covered_steps / trials < 0.6  # steps alone understate the uncertainty


def test_a_configuration_interval_uses_t_for_few_runs_and_the_bootstrap_for_many():
    medians = np.array([10.0, 10.5, 9.5, 10.2, 9.8])
    value, low, high, method = replicates.across_runs(medians)
    half = 2.776 * medians.std(ddof=1) / math.sqrt(5)
    assert method == "t-interval, 5 runs" and value == pytest.approx(10.0)
    assert (low, high) == (pytest.approx(10.0 - half), pytest.approx(10.0 + half))
    assert replicates.across_runs(np.linspace(9, 11, 12))[3] == "bootstrap over 12 runs"
    assert replicates.across_runs(np.array([10.0]))[3] == "one run: no interval"


def test_repeats_needed_resolves_the_effect_at_the_stated_power():
    n = replicates.repeats_needed(0.05, 0.05)
    assert n == math.ceil(2 * ((1.959964 + 0.841621) * 0.05 / math.log(1.05)) ** 2) == 17
    rng = np.random.default_rng(1)
    found = 0
    for _ in range(300):
        a = np.exp(rng.normal(0, 0.05, n)) * 10.0
        b = np.exp(rng.normal(0, 0.05, n)) * 10.5
        found += stats.speedup_across_runs(a, b).low > 1
    assert 0.7 <= found / 300 <= 0.92  # about 80% power


@pytest.mark.slow
def test_a_sweep_with_repeats_reports_each_configuration_across_its_replicates(tmp_path):
    runs = tmp_path / "runs"
    args = ["workload=pairwise_sum_prod", "workload.impl=loop,broadcast", "workload.size=10", "steps=5"]
    result = launch_here(*args, "repeats=3", "tracker.mode=disabled", "launcher=debug", f"runs_dir={runs}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "t-interval, 3 runs" in result.stdout and "repeats for 5%" in result.stdout
    started = [line.split()[-1] for line in result.stdout.splitlines() if "] start " in line]
    assert [name.split("-")[1] for name in started] == ["loop", "broadcast"] * 3, "interleaved"
    assert "6 done runs in 2 configurations" in text(replicates.view(runs / "default"))
    assert launch_here("report", str(runs / "default")).returncode == 0
    page = (runs / "default" / "report.html").read_text()
    assert "<h2>Across replicates</h2>" in page and "t-interval, 3 runs" in page


def test_each_configuration_is_compared_with_the_baseline_of_its_own_row_group(tmp_path):
    """Two models, each slower by a fifth in channels_last, 3 replicates each: every speed-up is 0.80, none is
    one model over the other."""
    sweep_dir = tmp_path / "sweep"
    for replicate, jitter in enumerate((1.0, 1.02, 0.98)):
        for model, rate in (("resnet18", 100.0), ("resnet34", 50.0)):
            write_model_run(sweep_dir, "models", model, "contiguous", rate * jitter, replicate=replicate)
            write_model_run(sweep_dir, "models", model, "channels_last", rate * 0.8 * jitter, replicate=replicate)
    shown = replicates.view(sweep_dir)
    speedups = {row[0]: row[5].split("x")[0] for row in shown.rows}
    assert speedups == {
        "resnet18 contiguous": "1.00", "resnet18 channels_last": "0.80",
        "resnet34 contiguous": "1.00", "resnet34 channels_last": "0.80",
    }  # fmt: skip
    assert "speed-up vs contiguous: across runs" in shown.header
