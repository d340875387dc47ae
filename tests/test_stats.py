"""The statistics on synthetic steps with known answers, compare on two real-format sweeps, and the plots."""

import dataclasses
import shutil

import matplotlib.pyplot
import numpy as np
import pytest
from scipy import stats

from perfsweep import records
from perfsweep.analysis import groups
from perfsweep.analysis.render import text
from perfsweep.analysis.statistics import distributions
from perfsweep.analysis.statistics.bootstrap import resampled_medians
from perfsweep.analysis.statistics.speedup import ACROSS, IN_PROCESS, PAIRED, Sample, Speedup, speedup, suite_speedup
from perfsweep.analysis.statistics.steps import above_noisy, noise, phase_stats, trend
from perfsweep.analysis.statistics.verdict import UNDETERMINED, word
from perfsweep.analysis.views import compare, plots
from perfsweep.commands.__main__ import main as views_main
from perfsweep.records import lifecycle
from tests import synthetic

PHASES = ["data", "forward", "backward", "optimizer"]


def test_the_distributions_are_scipy_stats_own():
    for df in (1, 2, 5, 30):
        for q in (0.9, 0.975, 0.995):
            assert distributions.t_ppf(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-12)
            assert distributions.chi2_ppf(1 - q, df) == pytest.approx(stats.chi2.ppf(1 - q, df), rel=1e-12)
        assert distributions.t_sf(2.5, df) == pytest.approx(stats.t.sf(2.5, df), rel=1e-12)
    assert distributions.norm_sf(1.7) == pytest.approx(stats.norm.sf(1.7), rel=1e-12)


@pytest.mark.parametrize("n", [3, 10, 40])
def test_spearman_is_scipys_with_ties_and_trends(n):
    rng = np.random.default_rng(n)
    for slope in (0.0, 0.05, 1.0):
        y = np.round(rng.normal(size=n) + slope * np.arange(n), 1)  # rounded: ties
        rho, p = distributions.spearman(np.arange(n), y)
        expected = stats.spearmanr(np.arange(n), y)
        assert (rho, p) == pytest.approx((expected.statistic, expected.pvalue), abs=1e-12)
    assert np.isnan(distributions.spearman(np.arange(n), np.ones(n))).all(), "a constant side: no correlation"


def test_phase_stats_of_known_steps():
    s = phase_stats(np.arange(1, 101, dtype=float))  # 1..100 ms
    assert (s.n, s.median, s.q1, s.q3) == (100, 50.5, 25.75, 75.25)
    assert s.p5 == pytest.approx(5.95) and s.p95 == pytest.approx(95.05)
    assert 40 <= s.ci_low < 50.5 < s.ci_high <= 61  # about the ranks 50 -+ 9.8
    assert s.outliers == 0


def test_median_interval_covers_the_true_median_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    covered = [(s := phase_stats(rng.lognormal(0.0, 0.2, 101))).ci_low <= 1.0 <= s.ci_high for _ in range(400)]
    assert 0.92 <= np.mean(covered) <= 0.99


@pytest.mark.parametrize("n", [7, 50, 201])
def test_bootstrap_medians_without_resampling_match_resampling(n):
    rng = np.random.default_rng(n)
    steps = rng.lognormal(0, 0.5, n)
    fast = resampled_medians(steps, 20000, np.random.default_rng(1))
    slow = np.median(steps[np.random.default_rng(2).integers(0, n, (20000, n))], axis=1)
    for q in (2.5, 25, 50, 75, 97.5):
        assert np.percentile(fast, q) == pytest.approx(np.percentile(slow, q), rel=0.02)


def test_a_steady_run_is_not_flagged():
    steps = np.random.default_rng(1).normal(10, 0.2, 200)
    assert noise(steps, phase_stats(steps)) == []


def test_a_run_still_warming_up_is_flagged_with_the_reason():
    steps = np.linspace(20, 10, 100)
    reasons = noise(steps, phase_stats(steps))
    assert len(reasons) == 1 and "warm-up not long enough" in reasons[0] and "robust CV" in reasons[0]


def test_a_run_slowing_down_is_not_said_to_warm_up():
    steps = np.linspace(10, 20, 100)
    (reason,) = noise(steps, phase_stats(steps))
    assert "slowing down" in reason and "warm-up" not in reason


def test_a_run_getting_faster_with_one_late_stall_is_not_said_to_slow_down():
    """Ten steps: a fifth is two of them. The stall lifts the last fifth's median above the first's, though the steps
    get faster: the ranks say so, and the stall is named as an outlier."""
    steps = np.array([2.93, 2.26, 2.49, 1.79, 1.75, 1.71, 1.72, 1.59, 4.77, 1.62])
    (reason,) = noise(steps, phase_stats(steps))
    assert reason == "robust CV 30.2% > 10%: 1 outlier step of 10", reason


def test_a_run_warming_up_then_slowing_down_is_not_steady_both_ways():
    """Its fifths say warm-up, its ranks a slowdown: neither alone, and it is not steady."""
    steps = np.concatenate([np.full(11, 20.0), np.linspace(10.0, 14.0, 89)])
    assert trend(steps).endswith("(Spearman +0.41): step times move one way, then the other"), trend(steps)


def test_a_robust_cv_just_above_the_threshold_is_not_printed_at_it():
    assert (above_noisy(0.1004), above_noisy(0.102), above_noisy(0.3)) == ("10.04%", "10.2%", "30.0%")


def test_outlier_steps_are_counted_not_dropped():
    steps = np.concatenate([np.full(95, 10.0) + np.linspace(0, 0.1, 95), np.full(5, 100.0)])
    s = phase_stats(steps)
    assert s.outliers == 5 and s.n == 100 and s.median == pytest.approx(10.05, abs=0.01)


def write_sweep(root, name, scale, seed, loss=2.0, compile_name="eager", n=200, repeats=1, slowed=None):
    """A sweep folder in perfsweep's record format, with step times drawn around `scale` x 10 ms (the input type
    `slowed`'s alone, where given), each of its two configurations run `repeats` times (each run 1% off the truth,
    as processes differ)."""
    rng = np.random.default_rng(seed)
    for input_type, replicate in [(t, r) for r in range(repeats) for t in ("tensor", "subclass")]:
        run = f"{input_type}-run" + (f"-replicate={replicate}" if repeats > 1 else "")
        folder = root / name / run
        folder.mkdir(parents=True)
        scaled = scale if slowed in (None, input_type) else 1.0
        factor = scaled * (1.3 if input_type == "subclass" else 1.0) * rng.lognormal(0, 0.01)
        rows = []
        for step in range(n):
            row = {f"{p}_ms": factor * rng.normal(2.5, 0.05) for p in PHASES}
            row.update(step_ms=sum(row[f"{p}_ms"] for p in PHASES), step=step, warmup=False, loss=loss)
            rows.append(row)
        records.write_steps(folder / records.STEPS, rows)
        axes = {"input_type": input_type, "compile": compile_name}
        config = {"input_type": {"name": input_type}, "compile": {"name": compile_name}, "sweep": name, "steps": n}
        if repeats > 1:
            axes["replicate"] = str(replicate)
            config |= {"replicate": replicate, "seed": replicate, "repeats": repeats}
        baseline = {"axis": "input_type", "value": "tensor"}
        records.write_json(
            folder / records.CONFIG,
            {
                "run_id": run,
                "name": run,
                "axes": axes,
                "axis_order": list(axes),
                "baseline": baseline,
                "config": config,
            },
        )
        medians = {f"{p}_ms": float(np.median([r[f"{p}_ms"] for r in rows])) for p in [*PHASES, "step"]}
        records.write_json(
            folder / records.SUMMARY,
            {
                "phases": PHASES,
                "median_ms": medians,
                "steps_per_s": 1000 / medians["step_ms"],
                "loss_first": 3.0,
                "loss_last": loss,
            },
        )
        lifecycle.finish(folder)
    return root / name


def test_compare_flags_a_ten_percent_regression_across_runs_and_exits_1(tmp_path):
    a = write_sweep(tmp_path, "before", 1.0, seed=1, repeats=3)
    b = write_sweep(tmp_path, "after", 1.1, seed=2, compile_name="default", repeats=3)
    shown, status = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)
    text_ = text(shown)
    assert status == compare.EXIT_REGRESSION and "they differ in: compile.name 'eager' -> 'default'" in text_
    assert [line.flag for line in shown.items if line.flag] == ["REGRESSION"] * 2  # the step of each; phases shown
    assert "2 of A's 2 configurations matched in B, 0 without a match; 0 of B's 2 without" in text_ and "3/3" in text_
    assert "suite: B's geometric-mean step speed-up over A's, 2 configurations: 0.9" in text_
    assert views_main(["compare", str(a), str(b)]) == 1
    gated = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05, gate_phases=True)[0]
    assert sum(line.flag == "REGRESSION" for line in gated.items) == 2 * 5  # four phases and the step


def test_compare_of_one_configuration_gives_its_speed_up_not_a_mean_of_configurations(tmp_path):
    a = write_sweep(tmp_path, "before", 1.0, seed=1, repeats=3)
    b = write_sweep(tmp_path, "after", 1.1, seed=2, repeats=3)
    for folder in [*a.glob("subclass-run-*"), *b.glob("subclass-run-*")]:
        shutil.rmtree(folder)
    text_ = text(compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)[0])
    assert "1 of A's 1 configuration matched in B" in text_, text_
    assert "suite: B's step speed-up over A's, 1 configuration: 0.9" in text_ and "(3 runs of A, 3 of B)" in text_
    assert "configurations:" not in text_


def test_compare_of_one_run_a_side_says_possible_and_exits_3(tmp_path):
    a = write_sweep(tmp_path, "before", 1.0, seed=1)
    b = write_sweep(tmp_path, "after", 1.1, seed=2)
    shown, status = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_POSSIBLE and views_main(["compare", str(a), str(b)]) == 3
    assert [line.flag for line in shown.items if line.flag] == ["POSSIBLE REGRESSION (1 run)"] * 2
    assert "within-run" in text(shown) and "suite: no geometric mean with an interval" in text(shown)
    # 10% apart, the resamples never cross 1: the least p they can give, a bound, and blind to the processes' spread
    assert "| <=0.001 within-run | POSSIBLE REGRESSION (1 run) |" in text(shown), text(shown)


def test_compare_names_where_the_two_sweeps_machines_differ(tmp_path):
    """env.json as a CPU run writes it (train/env.py), with another torch in B: one machine here has one torch."""
    a = write_sweep(tmp_path, "before", 1.0, seed=1)
    b = write_sweep(tmp_path, "after", 1.0, seed=2)
    env = {"cpu": "Intel Xeon", "torch_threads": 2}
    for sweep, torch_version in ((a, "2.11.0"), (b, "2.14.1")):
        for run in sweep.iterdir():
            records.write_json(run / records.ENV, env | {"packages": {"torch": torch_version}})
    shown, _ = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)
    assert "they differ in: nothing" in text(shown) and "their machines differ in: torch 2.11.0 -> 2.14.1" in text(
        shown
    )


def test_compare_flags_nothing_for_the_same_speed_over_many_seeds(tmp_path):
    flagged = 0
    for seed in range(10):
        a = write_sweep(tmp_path / str(seed), "a", 1.0, seed=seed)
        b = write_sweep(tmp_path / str(seed), "b", 1.0, seed=100 + seed)
        shown, status = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)
        flagged += status != 0 or "improvement" in text(shown)
    assert flagged == 0


def test_compare_catches_a_change_in_training_even_at_the_same_speed_and_exits_4(tmp_path):
    a = write_sweep(tmp_path, "a", 1.0, seed=1, loss=2.0)
    b = write_sweep(tmp_path, "b", 1.0, seed=2, loss=2.5)
    shown, status = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_LOSS == 4 and views_main(["compare", str(a), str(b)]) == 4
    assert "LOSS CHANGED in 1 of 1 run pair (replicate 0): final loss 2 -> 2.5 (A trained from 3)" in text(shown)
    assert "REGRESSION" not in text(shown)
    same = write_sweep(tmp_path, "c", 1.0, seed=3, loss=2.04)  # 4% of the 1.0 the loss moved while A trained
    assert "LOSS CHANGED" not in text(compare.compare(a, same, threshold=0.05, loss_tolerance=0.05)[0])


def with_losses(runs, last: dict[int, float | None], nonfinite: dict[int, int] | None = None):
    """The runs with A-like losses from 3 to 2, but the replicates that `last` gives another final loss."""
    nonfinite = nonfinite or {}
    return [
        dataclasses.replace(
            run,
            summary=dataclasses.replace(
                run.summary,
                loss_first=3.0,
                loss_last=last.get(groups.round_of(run), 2.0),
                nonfinite_losses=nonfinite.get(groups.round_of(run), 0),
            ),
        )
        for run in runs
    ]


def test_compare_says_once_per_configuration_which_run_pairs_changed_their_loss():
    rng = np.random.default_rng(0)
    levels = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 50.0}
    a = with_losses(synthetic.sweep(levels, 3, synthetic.Noise(), rng), {})
    b = with_losses(synthetic.sweep(levels, 3, synthetic.Noise(), rng), {0: 2.5, 2: 2.7})
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    said = (
        "LOSS CHANGED in 2 of 3 run pairs (replicates 0, 2 of 0, 1, 2): final loss 2 -> 2.6, medians (A trained from 3)"
    )
    assert [(line.configuration, line.runs, line.flag) for line in shown.items if line.phase == "final loss"] == [
        ("tensor", "3/3", said),
        ("subclass", "3/3", said),
    ]
    assert status == compare.EXIT_LOSS


def test_compare_names_the_side_and_the_replicates_whose_losses_are_not_finite():
    rng = np.random.default_rng(1)
    levels = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 50.0}
    a = with_losses(synthetic.sweep(levels, 3, synthetic.Noise(), rng), {})
    b = with_losses(synthetic.sweep(levels, 3, synthetic.Noise(), rng), {1: None, 2: None}, {1: 3, 2: 5})
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    flags = [line.flag for line in shown.items if line.phase == "final loss"]
    assert flags == ["NON-FINITE LOSS: NaN or infinite losses in B's replicates 1, 2 (3, 5 steps)"] * 2


@pytest.mark.parametrize(("repeats", "status"), [(3, 5), (1, 7)], ids=["confirmed", "possible"])
def test_a_loss_change_beside_a_slowdown_adds_4_to_the_slowdowns_exit_status(tmp_path, repeats, status):
    a = write_sweep(tmp_path, "a", 1.0, seed=1, loss=2.0, repeats=repeats)
    b = write_sweep(tmp_path, "b", 1.1, seed=2, loss=2.5, repeats=repeats, slowed="subclass")
    assert compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)[1] == status
    assert compare.timing(status) == (compare.EXIT_REGRESSION if repeats > 1 else compare.EXIT_POSSIBLE)


def test_plots_are_written_as_png(tmp_path):
    sweep = write_sweep(tmp_path, "s", 1.0, seed=1)
    written = plots.write_plots(sweep)
    assert [p.name for p in written] == ["phases.png", "runs.png", "speedups.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    ((versus, interval),) = groups.speedups(records.load_sweep(sweep))
    config, base = versus.config, versus.base
    assert config.first.name == "subclass-run" and base.first.name == "tensor-run"
    assert interval.value == pytest.approx(1 / 1.3, rel=0.03) and interval.high < 1 and not interval.replicated


def test_a_process_of_paired_sides_gives_the_median_of_its_rounds_ratios():
    # each process's k-th steps of the two sides ran in one round, side by side; its ratio is their median ratio
    of = (np.array([10.0, 12, 14]), np.array([10.0, 12, 14]))
    over = (np.array([15.0, 12, 28]), np.array([15.0, 12, 28]))  # rounds 1.5x, 1x, 2x; medians 15 / 12 = 1.25x
    samples = Sample(of, (0, 1)), Sample(over, (0, 1))
    assert speedup(*samples, paired=True, basis=IN_PROCESS).value == pytest.approx(1.5)
    assert speedup(*samples, paired=True, basis=PAIRED).value == pytest.approx(1.25)


def test_an_interval_of_no_width_is_no_verdict():
    untested = Speedup(0.9, 0.9, 0.9, ACROSS, (3, 3))  # every run's ratio the same: no spread, so no test
    assert word(untested, 0.02) == UNDETERMINED


def test_a_speed_up_over_one_run_is_the_ratio_of_the_times_printed_beside_it():
    """One run against five, one of them a slow process: the ratio is of the geometric means of run medians."""
    rng = np.random.default_rng(0)
    one = Sample((rng.normal(2.8, 0.02, 50),), (0,))
    levels = (5.4, 2.3, 2.9, 84.9, 2.8)
    five = Sample(tuple(rng.normal(level, level / 100, 50) for level in levels), (0, 1, 2, 3, 4))
    found = speedup(five, one)
    assert found.value == pytest.approx(one.middle / five.middle)
    assert found.low < found.value < found.high and found.basis == "within-run"


def test_a_noisy_run_whose_fifths_differ_by_chance_is_given_no_trend():
    """Steps of a period of three, spread: the last fifth's median is 15% above the first's, the ranks flat."""
    steps = np.tile([5.0, 8.5, 17.0], 34)[:100] * np.random.default_rng(4).lognormal(0, 0.1, 100)
    assert noise(steps, phase_stats(steps), host="x") == [
        "robust CV 90.0% > 10%: steps spread without a trend or outliers; host: x"
    ]


def test_the_suite_interval_counts_each_round_once_where_its_configurations_move_together():
    """A/A sweeps of 8 configurations in 5 rounds a side: each round slows or speeds them all by one factor (5%).

    Configurations taken as independent would exclude 1 in most such comparisons; rounds as the unit, in 5%."""
    rng = np.random.default_rng(4)

    def sweep() -> list[Sample]:
        shared = np.exp(rng.normal(0, 0.05, 5))  # each round's machine: every configuration of it alike
        return [
            Sample(tuple(np.array([10.0 * f * np.exp(rng.normal(0, 0.005))]) for f in shared), tuple(range(5)))
            for _ in range(8)
        ]

    found = [suite_speedup(list(zip(sweep(), sweep(), strict=True))) for _ in range(400)]
    assert all(s.runs == (5, 5) and s.basis == "across runs" for s in found)
    assert sum(s.excludes(1.0) for s in found) / len(found) <= 0.07
    a, b = sweep(), sweep()
    twice = [Sample(tuple(2 * steps for steps in s.steps), s.rounds) for s in b]
    assert suite_speedup(list(zip(a, twice, strict=True))).value == pytest.approx(
        suite_speedup(list(zip(a, b, strict=True))).value / 2
    ), "B twice as slow: half the speed-up"
    lacking = Sample(b[0].steps[:3], b[0].rounds[:3])  # a configuration whose rounds 3 and 4 failed
    assert suite_speedup(list(zip(a, [lacking, *b[1:]], strict=True))).runs == (5, 3), "rounds every one ran"
    zero = Sample((np.array([0.0]), *b[0].steps[1:]), b[0].rounds)
    assert suite_speedup(list(zip(a, [zero, *b[1:]], strict=True))) is None, "0 ms has no logarithm"
    assert suite_speedup([]) is None


def test_the_speedups_axis_labels_speed_ups_on_both_sides_of_1():
    """Speed-ups from 0.6x to 1.57x: a log axis's own ticks label none between 1 and 2."""

    class Versus:  # a comparison's row: its label is drawn, and its sides' runs name no machine
        def __init__(self, text: str):
            self.text = text
            self.config = self.base = groups.Configuration((), [])

        def label(self, names: dict) -> str:
            return self.text

    found = [(Versus(f"{v}"), Speedup(v, v * 0.95, v * 1.05, ACROSS, (3, 3))) for v in (0.6, 0.9, 1.2, 1.57)]
    fig = plots.speedups_figure(found, {}, 0.95, 0.05)
    fig.canvas.draw()
    shown = [label.get_text() for label in fig.axes[0].get_xticklabels() if label.get_text()]
    matplotlib.pyplot.close(fig)
    assert {"0.67x", "1x", "1.5x"} <= set(shown) and len(shown) <= 9, shown


def test_the_speedups_plot_tells_the_same_from_undetermined_as_the_table_s_words_do():
    """1.0x [0.98, 1.02] is the same at a 5% margin; 1.0x [0.8, 1.25] is undetermined: gray would read alike."""

    class Versus:
        def __init__(self, text: str):
            self.text, self.config, self.base = text, groups.Configuration((), []), groups.Configuration((), [])

        def label(self, names: dict) -> str:
            return self.text

    same = Speedup(1.0, 0.98, 1.02, ACROSS, (3, 3), 0.9)
    open_ = Speedup(1.01, 0.8, 1.25, ACROSS, (3, 3), 0.9)
    slower = Speedup(0.8, 0.75, 0.85, ACROSS, (3, 3), 0.001)
    fig = plots.speedups_figure([(Versus("a"), same), (Versus("b"), open_), (Versus("c"), slower)], {}, 0.95, 0.05)
    colours = [line.get_color() for line in fig.axes[0].lines if line.get_marker() == "o"]
    matplotlib.pyplot.close(fig)
    assert colours == ["tab:red", "tab:blue", "tab:gray"], colours
