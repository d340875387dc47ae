"""timm's published tables beside ours: rank order, throughput relative to a reference, channels-last speed-up,
on records with known figures; and that every stored table matches timm and the sweeps that reproduce it."""

import shutil

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.render import text
from perfsweep.analysis.statistics import bootstrap, distributions
from perfsweep.analysis.views import published, published_models
from perfsweep.sweeps.model_sets import default_image_size
from perfsweep.sweeps.plan import build_plan
from tests.helpers import write_model_run

SWEEP = "timm_infer_memory_format"
SOURCES = sorted(p.stem for p in published.PUBLISHED_DIR.glob("timm_*.yaml"))
LAYOUT = {"contiguous": "nchw", "channels_last": "nhwc"}


def published_rates(layout: str) -> dict[str, float]:
    source = published.published_for(SWEEP)
    return published_models.samples_per_s(source["models"]["tables"][layout])


def rows_of(view, model):
    return [row for row in view.rows if row[0] == model]


@pytest.fixture
def same_order(tmp_path):
    """Six models at a hundredth of timm's throughput, in both layouts, except resnet34's channels-last run,
    slower than its contiguous one where timm's was faster; each run 3 times (each round 2% off the last, every
    model alike, as a machine drifts), for verdicts across runs."""
    sweep_dir = tmp_path / SWEEP
    models = ["mobilenetv3_small_100", "lcnet_100", "resnet18", "ghostnet_100", "resnet34", "resnet26"]
    for replicate, drift in enumerate((1.0, 1.02, 0.98)):
        for memory_format, layout in LAYOUT.items():
            rates = published_rates(layout)
            for model in models:
                slowed = 0.5 if (model, memory_format) == ("resnet34", "channels_last") else 1.0
                rate = rates[model] / 100 * slowed * drift
                write_model_run(sweep_dir, SWEEP, model, memory_format, rate, replicate=replicate)
    return sweep_dir


def test_the_same_rank_order_is_reproduced_and_each_ratio_and_speed_up_is_judged(same_order):
    ranks, relative, channels_last = published_models.views(same_order)
    nchw, nhwc = ranks.rows
    assert nchw[:3] == ["nchw", "6 of 20", "1.00 [1.00, 1.00]"] and nchw[3] == "reproduced"
    assert nhwc[1] == "6 of 20" and nhwc[3].startswith("undetermined (low end")  # resnet34 halved: it moves down
    (lcnet,) = [row for row in rows_of(relative, "lcnet_100") if row[1] == "nchw"]
    assert lcnet[4:6] == ["1.99x", "1.99x [1.98, 1.99]"] and lcnet[6:] == ["1.00", "reproduced"]  # paired by round
    assert rows_of(channels_last, "resnet18")[0][-1] == "reproduced"
    (resnet34,) = rows_of(channels_last, "resnet34")
    assert resnet34[3] == "1.37x" and resnet34[4].startswith("0.686x") and resnet34[5:] == ["0.50", "reversed"]
    assert "not run in this sweep (14): regnetx_002" in text(channels_last)
    assert "Spearman's rho" in text(ranks) and "RTX 4090" in text(ranks)


def test_a_shuffled_rank_order_of_one_run_a_model_is_indicative_and_too_few_models_are_said(tmp_path):
    sweep_dir = tmp_path / SWEEP
    rates = published_rates("nchw")
    models = list(rates)[:8]
    for model, rate in zip(models, reversed([rates[m] for m in models]), strict=True):
        write_model_run(sweep_dir, SWEEP, model, "contiguous", rate / 100)
    write_model_run(sweep_dir, SWEEP, "resnet18", "channels_last", 10.0)
    nchw, nhwc = published_models.views(sweep_dir)[0].rows
    assert nchw[2].startswith("-1.00") and nchw[3] == "indicative (8 of 8 models with 1 run)"
    assert nhwc[1:3] == ["1 of 20", "-"] and nhwc[3].startswith("too few models")


def test_models_in_the_published_order_whose_runs_overlap_leave_it_undetermined(tmp_path):
    """Six models whose medians keep timm's order, and whose two runs each lie 30% either side of it: an interval
    of rho that holds 1.00 and 0.09 neither bears the order out nor rules it out. A reversed order is ruled out."""
    sweep_dir = tmp_path / SWEEP
    rates = published_rates("nchw")
    for model in list(rates)[:6]:
        for replicate, off in enumerate((0.7, 1.3)):
            write_model_run(sweep_dir, SWEEP, model, "contiguous", rates[model] / 100 * off, replicate=replicate)
    nchw = published_models.views(sweep_dir)[0].rows[0]
    assert nchw[2].startswith("1.00 [") and not nchw[2].startswith("1.00 [1.00")
    assert nchw[3].startswith("undetermined (low end")
    reversed_dir = tmp_path / "reversed" / SWEEP
    for model, rate in zip(list(rates)[:6], reversed([rates[m] for m in list(rates)[:6]]), strict=True):
        for replicate, off in enumerate((0.98, 1.02)):
            write_model_run(reversed_dir, SWEEP, model, "contiguous", rate / 100 * off, replicate=replicate)
    backwards = published_models.views(reversed_dir)[0].rows[0]
    assert backwards[3].startswith("not reproduced (high end"), backwards


def test_a_per_sample_comparison_divides_by_each_runs_batch(tmp_path):
    sweep_dir = tmp_path / SWEEP
    write_model_run(sweep_dir, SWEEP, "resnet18", "contiguous", 100.0, batch=8)
    write_model_run(sweep_dir, SWEEP, "resnet34", "contiguous", 50.0, batch=16)
    runs = records.load_sweep(sweep_dir)
    item = {"label": "resnet34 / resnet18", "metric": "forward"}
    item |= {"of": {"model.name": "resnet34"}, "over": {"model.name": "resnet18"}}
    assert published.compare(runs, item)[5].startswith("0.250x")  # per step: resnet34's batch is twice as large
    assert published.compare(runs, item | {"per_sample": True})[5].startswith("0.500x")


def test_rank_correlation_is_spearmans_with_ties_and_an_interval_over_models_and_runs():
    assert distributions.spearman_rho([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert distributions.spearman_rho([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert distributions.spearman_rho([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)  # ties share a mean rank
    rng = np.random.default_rng(0)
    x = np.arange(30.0)
    rho = bootstrap.rank_correlation(x, x + rng.normal(0, 5, 30))
    assert 0.8 < rho.value < 1 and rho.low < rho.value < rho.high <= 1
    apart = bootstrap.rank_correlation(x[:4], [[1.0, 1.1], [2.0, 2.1], [3.0, 3.1], [4.0, 4.1]])
    overlapping = bootstrap.rank_correlation(x[:4], [[1.0, 2.5], [2.0, 3.5], [3.0, 4.5], [4.0, 5.5]])
    assert apart.low == apart.value == overlapping.value == 1.0 and overlapping.low < 1.0  # runs' noise counts


@pytest.mark.parametrize("sweep", SOURCES)
def test_each_stored_table_is_timms_and_its_sweep_runs_each_model_at_the_published_size(sweep):
    source = published.published_for(sweep)
    models = source["models"]
    assert models["reference"] and source["hardware"] and source["software"] and source["device"] in ("cpu", "gpu")
    runs = build_plan([f"sweep={sweep}", "device=cpu", "repeats=1"]).runs
    for name, table in models["tables"].items():
        assert len(table["commit"]) == 40 and table["file"].startswith("results/benchmark-") and name in table["file"]
        rates = published_models.samples_per_s(table)
        assert list(rates.values()) == sorted(rates.values(), reverse=True)  # timm's files: fastest first
        for model, size in published_models.image_sizes(table).items():
            assert default_image_size("timm", model) == size, f"{sweep} {name}: {model}"
    for item in published_models.comparisons(source):
        for side in ("of", "over"):
            named = [r for r in runs if published.matches(r.axes, records.flatten(r.record()["config"]), item[side])]
            assert len(named) == 1, f"{sweep}: {item['label']} {side}={item[side]} names {len(named)} runs"


def test_a_gpu_table_beside_cpu_runs_says_so_and_runs_of_two_settings_decide_nothing(same_order):
    """timm's RTX 4090 tables beside runs on this CPU; then the folder launched again at another length."""
    runs = sorted(p for p in same_order.iterdir() if (p / records.STATUS).is_file())
    for run in runs:  # measured on this CPU, for 20 steps each
        records.write_json(run / records.ENV, {"cpu": "AMD EPYC", "packages": {"torch": "2.14.1"}})
        record = records.read_json(run / records.CONFIG)
        records.write_json(run / records.CONFIG, record | {"config": record["config"] | {"steps": 20}})
    ranks, relative, channels_last = published_models.views(same_order)
    assert ranks.rows[0][3] == "reproduced (ours on a CPU, theirs on a GPU)", ranks.rows[0]
    assert rows_of(channels_last, "resnet18")[0][-1] == "reproduced (ours on a CPU, theirs on a GPU)"
    longer = same_order / f"{runs[0].name}-50"
    shutil.copytree(runs[0], longer)
    record = records.read_json(longer / records.CONFIG)
    records.write_json(longer / records.CONFIG, record | {"config": record["config"] | {"steps": 50}})
    ranks, *_ = published_models.views(same_order)
    assert any(row[3].startswith("not decided: 2 configurations match ") for row in ranks.rows), ranks.rows


def test_models_run_at_other_input_sizes_than_theirs_are_named_beside_the_verdict(same_order):
    for run in sorted(p for p in same_order.iterdir() if (p / records.STATUS).is_file()):
        record = records.read_json(run / records.CONFIG)
        model = record["config"]["model"] | {"image_size": 96 if "resnet18" in run.name else 224}
        records.write_json(run / records.CONFIG, record | {"config": record["config"] | {"model": model}})
    ranks = published_models.views(same_order)[0]
    assert "ours ran other input sizes than theirs: resnet18 at 96 px (theirs 224)" in ranks.above
    assert ranks.rows[0][3] == "reproduced (not their sizes)"


def test_our_samples_per_s_is_the_geometric_mean_of_a_models_runs_as_its_ratio_is(tmp_path):
    """Two runs of lcnet_100 at half and twice a rate: their median would read 1.25 times it, their ratio's 1."""
    sweep_dir = tmp_path / SWEEP
    rates = published_rates("nchw")
    for model in ("resnet18", "lcnet_100"):
        for replicate, off in enumerate((0.5, 2.0) if model == "lcnet_100" else (1.0, 1.0)):
            write_model_run(sweep_dir, SWEEP, model, "contiguous", rates[model] / 100 * off, replicate=replicate)
    relative = published_models.views(sweep_dir)[1]
    (lcnet,) = [row for row in rows_of(relative, "lcnet_100") if row[1] == "nchw"]
    assert float(lcnet[3]) == pytest.approx(rates["lcnet_100"] / 100, rel=0.01), lcnet


def test_a_folder_launched_at_two_scales_gives_the_views_of_each_named_by_it(same_order):
    """The folder launched again at the smoke scale: each scale's views are its own, not 'not decided' over both."""
    for run in sorted(p for p in same_order.iterdir() if (p / records.STATUS).is_file()):
        smoke = same_order / f"{run.name}-smoke"
        shutil.copytree(run, smoke)
        record = records.read_json(smoke / records.CONFIG)
        records.write_json(smoke / records.CONFIG, record | {"config": record["config"] | {"scale": "smoke"}})
    shown = published_models.views(same_order)
    assert [view.title.rsplit(", ", 1)[-1] for view in shown] == ["scale=full"] * 3 + ["scale=smoke"] * 3
    assert not any(row[3].startswith("not decided") for view in shown[::3] for row in view.rows), shown[0].rows
