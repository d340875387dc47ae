"""Replicates: the plan's order and ids, validation, and the statistics across runs on data of known variance."""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.groups import baselines, configurations, labels
from perfsweep.analysis.render import text
from perfsweep.analysis.statistics import distributions, variance
from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import ACROSS, PAIRED, WITHIN_RUN, Sample, Speedup, figures, speedup
from perfsweep.analysis.views import replicates
from perfsweep.launcher.validate import validate
from perfsweep.sweeps.plan import PlanError, build_plan
from perfsweep.train.checks import problems
from tests import synthetic
from tests.helpers import TINY, launch_here, write_model_run

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
    [
        (["repeats=0"], "repeats=0 must be 1 or more, or auto .rounds until decided."),
        (["order=random"], r"Invalid value 'random', expected one of \[interleaved, shuffled, grouped\]"),
    ],
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


def _sample(runs) -> Sample:
    return Sample(tuple(runs), tuple(range(len(runs))))


def test_across_run_intervals_cover_the_truth_and_within_run_intervals_do_not():
    rng = np.random.default_rng(0)
    covered_runs = covered_steps = 0
    trials = 200
    for _ in range(trials):
        a, b = _runs(rng, 10.0, 5, 0.05), _runs(rng, 11.0, 5, 0.05)  # b is 10% slower: a's speed-up is 1.1
        across = speedup(_sample(a), _sample(b))
        pooled = speedup(_sample([np.concatenate(a)]), _sample([np.concatenate(b)]))
        assert across.basis == ACROSS and pooled.basis == WITHIN_RUN
        covered_runs += across.low <= 1.1 <= across.high
        covered_steps += pooled.low <= 1.1 <= pooled.high
    assert 0.90 <= covered_runs / trials <= 0.99  # a 95% interval that includes run-to-run variance
    assert covered_steps / trials < 0.6  # steps alone understate the uncertainty


def test_runs_of_one_round_are_paired_and_drift_over_the_sweep_cancels():
    """Every configuration's runs drift together over the rounds (a warming machine): pairs by round see through
    it, unpaired runs do not."""
    drift = np.array([1.0, 1.1, 1.2, 1.3])
    rng = np.random.default_rng(3)
    a = [10.0 * d * np.exp(rng.normal(0, 0.002, 50)) for d in drift]
    b = [10.5 * d * np.exp(rng.normal(0, 0.002, 50)) for d in drift]
    paired = speedup(_sample(a), _sample(b), paired=True)
    unpaired = speedup(_sample(a), _sample(b))
    assert paired.basis == PAIRED and paired.low > 1.04 and paired.high < 1.06
    assert unpaired.basis == ACROSS and unpaired.low < 1 < unpaired.high


def test_a_configurations_interval_is_a_t_interval_on_its_runs_log_medians():
    medians = np.array([10.0, 10.5, 9.5, 10.2, 9.8])
    value, low, high = variance.across_runs(medians)
    logs = np.log(medians)
    half = 2.776 * logs.std(ddof=1) / math.sqrt(5)
    assert value == pytest.approx(math.exp(logs.mean()))
    expected = [math.exp(logs.mean() - half), math.exp(logs.mean() + half)]
    assert [low, high] == pytest.approx(expected, rel=1e-4)
    assert math.isnan(variance.across_runs(np.array([10.0]))[1])


def test_the_variance_split_recovers_known_parts_between_and_within_processes():
    rng = np.random.default_rng(2)
    noise = synthetic.Noise(run_sd=0.05, step_sd=0.02, rho=0.5, warmup=0.0, bimodal=0.0, steps=200)
    found = variance.split(_sample([synthetic.run_steps(10.0, noise, rng) for _ in range(60)]))
    assert found.between == pytest.approx(0.05, rel=0.25) and found.within == pytest.approx(0.02, rel=0.1)
    assert found.rho == pytest.approx(0.5, abs=0.08)
    assert found.effective_steps == pytest.approx(200 * (1 - found.rho) / (1 + found.rho))
    assert variance.split(_sample([np.ones(5)])) is None  # one run: nothing between processes to see


def test_the_plan_resolves_the_half_width_it_was_asked_for():
    split = variance.Split(runs=3, steps=10, between=0.03, within=0.01, rho=0.0)
    steps, runs = split.plan(0.02, run_cost_s=2.0, step_s=0.05)
    assert steps == 5  # the spread is between processes: more steps do not narrow it, more runs do
    rng = np.random.default_rng(1)
    widths = []
    for _ in range(300):
        a = [10.0 * math.exp(rng.normal(0, 0.03)) * np.exp(rng.normal(0, 0.01, steps)) for _ in range(runs)]
        b = [10.0 * math.exp(rng.normal(0, 0.03)) * np.exp(rng.normal(0, 0.01, steps)) for _ in range(runs)]
        found = speedup(_sample(a), _sample(b))
        widths.append(max(found.high / found.value, found.value / found.low) - 1)
    assert 0.015 <= np.median(widths) <= 0.021
    # Steps that follow their neighbours, a spread within runs and costly runs: more steps per run, fewer runs.
    steps_within, runs_within = variance.Split(3, 10, 0.002, 0.05, 0.5).plan(0.02, run_cost_s=10.0, step_s=0.01)
    assert steps_within > 100 and runs_within < runs


@pytest.mark.slow
def test_a_sweep_with_repeats_reports_each_configuration_across_its_replicates(tmp_path):
    runs = tmp_path / "runs"
    args = ["workload=pairwise_sum_prod", "workload.impl=loop,broadcast", "workload.size=10", "steps=5"]
    result = launch_here(*args, "repeats=3", "tracker.mode=disabled", f"runs_dir={runs}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "effective steps" in result.stdout and "for -+2%: steps x runs" in result.stdout
    started = [line.split()[-1] for line in result.stdout.splitlines() if "] start " in line]
    assert [name.split("-")[1] for name in started] == ["loop", "broadcast"] * 3, "interleaved"
    assert "6 done runs in 2 configurations on CPU " in text(replicates.view(runs / "default")), "and its torch"
    assert launch_here("report", str(runs / "default")).returncode == 0
    page = (runs / "default" / "report.html").read_text()
    assert "<h2>Across replicates</h2>" in page and "effective steps" in page


def test_each_configuration_is_compared_with_the_baseline_of_its_own_row_group(tmp_path):
    """Two models, each slower by a fifth in channels_last, 3 replicates each: every speed-up is 0.800, none is
    one model over the other."""
    sweep_dir = tmp_path / "sweep"
    for replicate, jitter in enumerate((1.0, 1.02, 0.98)):
        for model, rate in (("resnet18", 100.0), ("resnet34", 50.0)):
            write_model_run(sweep_dir, "models", model, "contiguous", rate * jitter, replicate=replicate)
            write_model_run(sweep_dir, "models", model, "channels_last", rate * 0.8 * jitter, replicate=replicate)
    shown = replicates.view(sweep_dir)
    column = shown.header.index("vs contiguous")
    speedups = {row[0]: row[column].split("x")[0] for row in shown.rows}
    assert speedups == {
        "resnet18 contiguous": "1.00", "resnet18 channels_last": "0.800",
        "resnet34 contiguous": "1.00", "resnet34 channels_last": "0.800",
    }  # fmt: skip
    assert all("within-run" not in row[column] for row in shown.rows)


def test_the_replicates_view_compares_along_the_axis_asked_for_as_the_table_does(tmp_path):
    sweep_dir = tmp_path / "sweep"
    for replicate, jitter in enumerate((1.0, 1.02, 0.98)):
        write_model_run(sweep_dir, "models", "resnet18", "contiguous", 100.0 * jitter, replicate=replicate)
        write_model_run(sweep_dir, "models", "resnet18", "channels_last", 80.0 * jitter, replicate=replicate)
    shown = launch_here("replicates", str(sweep_dir), "--vs", "memory_format=channels_last")
    assert shown.returncode == 0, shown.stderr
    header = next(line for line in shown.stdout.splitlines() if line.startswith("| configuration"))
    assert "vs channels_last" in header and "vs contiguous" not in header
    cells = {row.split("|")[1].strip(): row for row in shown.stdout.splitlines() if row.startswith("| c")}
    assert "| 1.25" in cells["contiguous"] and "| 1.00x" in cells["channels_last"]
    shown_with_table = launch_here("table", str(sweep_dir), "--vs", "memory_format=channels_last")
    assert shown_with_table.stdout.count("vs channels_last") == 2 and "vs contiguous" not in shown_with_table.stdout
    tabled = next(row for row in shown_with_table.stdout.splitlines() if row.startswith("| contiguous"))
    word = "1.25x [1.25, 1.25] undetermined |"  # no spread between the runs' ratios: no test, so no verdict
    assert word in tabled and word in cells["contiguous"], "the word the table gives"


@pytest.mark.parametrize("runs", [1, 3])
def test_a_speed_up_over_steps_of_zero_ms_prints_unknown_instead_of_failing(runs):
    # A coarse timer, or a damaged record, can leave a median step of 0 ms: no ratio exists.
    zero, some = _sample([np.zeros(5)] * runs), _sample([np.full(5, 2.0)] * runs)
    for found in (speedup(zero, some), speedup(some, zero), speedup(zero, zero)):
        assert str(found).startswith("unknown")
        assert not found.beyond(0.05) and math.isnan(found.p)


def test_figures_of_an_interval_without_finite_bounds_print_them_as_they_are():
    value, low, high = figures(12.0, math.nan, math.inf)
    assert float(value) == 12.0 and (low, high) == ("nan", "inf")


def test_an_interval_over_orders_of_magnitude_prints_two_digits_a_figure_rounded_outward():
    """Two noisy runs a side: t with one degree of freedom spans orders of magnitude. Each figure keeps two digits of
    its own, so that the table's cell stays short; the bounds still hold the computed interval."""
    assert figures(0.8237666, 0.0000005, 1315583.5725628) == ("0.82", "5.0e-07", "1.32e+06")
    assert figures(0.723, 0.0013, 292.533) == ("0.72", "0.0013", "300")
    assert figures(2.0, 0.9, 4.4) == ("2.0", "0.9", "4.4"), "an interval within a factor of 10 keeps its digits"
    assert figures(1.13, 0.129, 9.829) == ("1.1", "0.129", "9.9"), "not 1.130 [0.129, 9.829]: the low bound's digits"
    assert figures(1.13, 0.129, 1.229) == ("1.13", "0.129", "1.229"), "within a factor of 10 too: the value's three"
    assert figures(1.0012, 1.0004, 1.002, apart=1.0) == ("1.0012", "1.0004", "1.0020"), "not 1.00 beside a word"


def test_a_printed_bound_lies_within_5_percent_of_the_computed_one():
    """To the estimate's digits, 92.1 [69.6, 121.9] would print 90 [60, 130], and [171, 14762] as [100, 14800]: a
    bound pasted into a write-up would be 14% and 42% off. Such a bound gets the digits that keep it within 5%."""
    assert figures(92.1, 69.6, 121.9) == ("92", "69", "122")
    assert figures(1600.0, 171.0, 14762.0) == ("1600", "170", "15000")
    assert figures(1188.0, 977.0, 1550.0) == ("1190", "970", "1550")
    rng = np.random.default_rng(0)
    for value in np.exp(rng.uniform(-5, 8, 300)):
        low, high = value / np.exp(rng.uniform(0, 3)), value * np.exp(rng.uniform(0, 3))
        _, shown_low, shown_high = figures(value, low, high)
        assert low * 0.95 <= float(shown_low) <= low and high <= float(shown_high) <= high * 1.05, (value, low, high)
    assert figures(3.0, 1.09, 1200.0)[1] == "1.09", "an interval over orders of magnitude too: 1.0 is 8% off"
    assert figures(1.026, 1.0125, 4110.0, apart=1.0) == ("1.03", "1.01", "4200"), "not 1.0 outside [1.01, 4200]"


def test_a_speed_up_whose_interval_excludes_one_is_printed_with_bounds_that_exclude_it():
    """Rounded outward to one decimal, 1.04 would print 1.0 beside the word "faster": the bounds get the digits that
    keep 1 out, and an interval that holds 1 keeps its digits."""
    assert str(Speedup(1.21, 1.04, 1.47, basis=ACROSS)) == "1.21x [1.04, 1.47]"
    assert str(Speedup(0.81, 0.68, 0.96, basis=ACROSS)) == "0.81x [0.68, 0.96]"
    assert str(Speedup(1.0, 0.797, 1.315, basis=ACROSS)) == "1.00x [0.79, 1.32]"
    assert figures(1.21, 1.04, 1.47) == ("1.2", "1.0", "1.5"), "a step time's interval has no figure to keep out"


def test_sides_that_shared_their_processes_plan_from_the_spread_their_ratio_keeps():
    """Sides in one process share its 5% offset: their ratio keeps only the 0.5% of their own."""
    noise = synthetic.Noise(run_sd=0.05, side_sd=0.005, step_sd=0.03, rho=0.3, bimodal=0.0, steps=20)
    runs = synthetic.sweep(synthetic.grid(), 10, noise, np.random.default_rng(6), paired=True)
    configs = configurations(runs)
    base_of = baselines(configs)
    (subclass,) = (c for c in configs if c.first.axes["input_type"] == "subclass")
    paired = replicates.row(subclass, {"input_type": base_of["input_type"][subclass.key]})
    assert paired.sides.between < 0.02 < paired.split.between
    apart = dataclasses.replace(paired, sides=None)  # as if each side had a process of its own
    runs_needed = [int(row.plan(0.02, (1.0, 0.05)).split(" x ")[1]) for row in (paired, apart)]
    assert 4 * runs_needed[0] < runs_needed[1]


def test_a_lone_configuration_is_named_by_its_model_not_by_its_first_run(tmp_path):
    sweep_dir = tmp_path / "sweep"
    for replicate in range(2):
        write_model_run(sweep_dir, "models", "resnet18", "contiguous", 100.0, replicate=replicate)
    shown = launch_here("replicates", str(sweep_dir))
    assert shown.returncode == 0, shown.stderr
    rows = [line.split("|")[1].strip() for line in shown.stdout.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["resnet18"], "one row, the model's name: the run's folder name holds its replicate"
    note = shown.stdout.split("step ms: geometric mean", 1)[1]
    assert "between sides:" not in note and "vs: speed-up" not in note, "it explains no column it lacks"


def test_configurations_that_differ_only_in_their_steps_keep_names_of_their_own(tmp_path):
    sweep_dir = tmp_path / "sweep"
    for replicate, steps in ((0, 10), (1, 20)):
        write_model_run(sweep_dir, "models", "resnet18", "contiguous", 100.0, replicate=replicate)
        config = sweep_dir / f"resnet18-contiguous-replicate={replicate}" / records.CONFIG
        written = records.read_json(config)
        records.write_json(config, written | {"config": written["config"] | {"steps": steps}})
    found = configurations(records.load_sweep(sweep_dir))
    assert len(found) == 2 and len(set(labels(found).values())) == 2


def test_a_spread_between_processes_measured_near_zero_is_planned_at_its_upper_bound():
    """Ten processes that happened to agree do not show a machine without spread between processes."""
    measured = variance.Split(runs=10, steps=10, between=0.0, within=0.02, rho=0.0)
    bound = measured.at_most()
    assert bound.between > 0.005 and bound.within == measured.within
    assert bound.decided_in(600, 0.3, 0.03) > measured.decided_in(600, 0.3, 0.03)
    many = dataclasses.replace(measured, runs=1000).at_most()
    assert many.between < bound.between, "more processes, a tighter bound"


def test_more_time_decides_a_smaller_difference_however_many_runs_it_takes():
    """A fast step with a wide spread between processes: ten minutes already hold thousands of processes."""
    spread = variance.Split(runs=10, steps=20, between=0.15, within=0.25, rho=0.1)
    minute, ten, hour = (spread.decided_in(budget, 0.07, 0.003) for budget in (60, 600, 3600))
    assert minute > ten > hour
    steps, runs = spread.plan(ten, 0.07, 0.003)
    assert runs > 1000 and 2 * runs * (0.07 + steps * 0.003) <= 600, "the plan the ten minutes hold, as it is"
    quantile = 0.5 + LEVEL / 2
    enough = distributions.t_ppf(quantile, runs - 1) * math.sqrt(2 * spread.run_variance(steps) / runs)
    assert enough <= math.log(1 + ten), "it resolves the difference"
    fewer = distributions.t_ppf(quantile, runs - 2) * math.sqrt(2 * spread.run_variance(steps) / (runs - 1))
    assert fewer > math.log(1 + ten), "with no run to spare"


def test_no_number_of_runs_resolves_a_half_width_of_zero_or_a_spread_that_is_not_finite():
    spread = variance.Split(runs=10, steps=20, between=0.15, within=0.25, rho=0.1)
    assert spread.runs_for(0.0, 20) is None and spread.runs_for(-0.02, 20) is None
    broken = dataclasses.replace(spread, within=math.nan)
    assert broken.plan(0.02, 0.07, 0.003) == (20, None) and broken.decided_in(600, 0.07, 0.003) is None


def test_the_fewest_runs_are_those_a_count_from_the_least_finds():
    """The count starts at the normal quantile's runs: a t interval that few runs cannot reach is never skipped."""
    for spread in (0.0, 0.01, 0.2, 1.0):
        for distance in (0.01, 0.05, 0.5):
            for least in (2, 7):
                counted = next(
                    n
                    for n in itertools.count(least)
                    if distributions.t_ppf(0.975, n - 1) * spread / math.sqrt(n) <= distance
                )
                assert variance.fewest_runs(spread, distance, 0.95, least) == counted, (spread, distance, least)
    assert variance.fewest_runs(0.2, 0.0) is None and variance.fewest_runs(math.inf, 0.05) is None


def test_the_replicates_note_describes_a_paired_sweeps_intervals_as_the_table_does(tmp_path):
    """Each round's sides shared one process (pairing=auto): each interval is across processes, one ratio each."""
    runs = synthetic.sweep(synthetic.grid(), 3, synthetic.Noise(), np.random.default_rng(0), paired=True)
    said = replicates.view(synthetic.write(runs, tmp_path / "sweep")).notes[0]
    assert "CI as in the table: across processes, each one ratio of its sides" in said, said


def test_two_axes_of_the_same_values_are_named_with_their_axes(tmp_path):
    """loss and optim, each fastai or torch: `vs torch` twice, and rows `fastai torch`, would not say which is which."""
    rng = np.random.default_rng(0)
    runs = [
        synthetic.record(f"{loss}-{optim}", {"loss": loss, "optim": optim}, np.full(20, 50.0), rep, position, rng)
        for position, (rep, loss, optim) in enumerate(itertools.product(range(2), *[("fastai", "torch")] * 2))
    ]
    shown = replicates.view(tmp_path, runs=runs)
    headers = [column.header for column in shown.columns]
    assert "vs loss=torch" in headers and "vs optim=torch" in headers, headers
    names = {row[0] for row in shown.rows}
    assert names == {f"loss={loss} optim={optim}" for loss in ("fastai", "torch") for optim in ("fastai", "torch")}
