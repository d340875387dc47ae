"""Published figures beside ours: the statistics, the verdicts, and that every stored comparison names real runs."""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.groups import configurations, measures, speedup_over
from perfsweep.analysis.statistics.speedup import ACROSS, IN_PROCESS, WITHIN_RUN, Sample, Speedup, speedup
from perfsweep.analysis.statistics.verdict import direction, verdict
from perfsweep.analysis.views import published, sweep_views
from perfsweep.analysis.views.published import NOT_RUN
from perfsweep.records import Baseline, RunError, RunRecord, Status, flatten, lifecycle
from perfsweep.sweeps.plan import build_plan
from tests import synthetic
from tests.helpers import launch_here

# the seeds' published tables (timm's, timm_*, are test_published_models.py's)
SWEEPS = sorted(p.stem for p in published.PUBLISHED_DIR.glob("*.yaml") if not p.stem.startswith("timm_"))


def one_run(steps: np.ndarray) -> Sample:
    return Sample((steps,), (0,))


def test_a_within_run_interval_finds_a_ten_percent_slowdown_and_no_change_and_says_what_it_is():
    rng = np.random.default_rng(1)
    base = rng.normal(10.0, 0.3, 200)
    slowed = speedup(one_run(base * 1.1), one_run(base))
    assert slowed.value == pytest.approx(1 / 1.1, rel=1e-9) and slowed.excludes(1.0)
    assert slowed.low < 1 / 1.1 < slowed.high and not slowed.replicated and str(slowed).endswith(" within-run")
    assert 0 < slowed.p <= 0.01, "no resample crossed 1: the least p its resamples can give, never 0"
    flagged = sum(
        speedup(one_run(rng.normal(10, 0.3, 200)), one_run(rng.normal(10, 0.3, 200)), seed=s).excludes(1.0)
        for s in range(40)
    )
    assert flagged <= 6  # a 95% interval misses 1.0 in about 2 of 40 draws of identical distributions


@pytest.mark.parametrize(
    ("item", "ours", "expected"),
    [
        ({"speedup": 0.6}, (0.62, 0.58, 0.66), "reproduced"),
        ({"speedup": 0.6}, (0.5, 0.45, 0.55), "larger"),  # a larger effect the same way, wholly beyond it
        ({"speedup": 0.6}, (0.5, 0.4, 0.62), "reproduced"),  # holding it
        ({"speedup": 0.6}, (0.5, 0.25, 0.62), "undetermined"),  # holding it, and reaching below half of it
        ({"speedup": 0.6}, (0.5, 0.33, 0.62), "undetermined"),  # holding it, and reaching past twice its effect (0.36)
        ({"speedup": 1.1}, (1.5, 1.01, 2.2), "undetermined"),  # within twice the ratio; 8 times the effect
        ({"speedup": 0.6}, (0.3, 0.0, 0.7), "undetermined"),  # a bound of 0 has no log
        ({"speedup": 1.1}, (1.1, 1.06, 1.15), "reproduced"),
        ({"published": {"of": 0.0249, "over": 82.3}}, (6100.0, 61.0, 6.2e5), "undetermined"),  # 3305x, 2 runs
        ({"speedup": 2650}, (1600.0, 100.0, 14800.0), "undetermined"),
        ({"speedup": 2650}, (2000.0, 1400.0, 3000.0), "reproduced"),
        ({"published": {"of": 0.0249, "over": 82.3}}, (8000.0, 4000.0, 14000.0), "larger"),
        ({"speedup": 0.6}, (0.9, 0.88, 0.92), "smaller"),
        ({"speedup": 0.6}, (0.99, 0.95, 1.03), "absent"),  # inside +-5% of no effect
        ({"speedup": 0.6}, (0.99, 0.985, 0.995), "absent"),  # slower, but inside +-5%: no effect, as with fewer runs
        ({"direction": "slower"}, (0.99, 0.985, 0.995), "absent"),
        ({"speedup": [0.93, 0.97]}, (0.96, 0.955, 0.965), "reproduced"),  # a small claim, measured: no absence
        ({"speedup": 0.941}, (0.952, 0.951, 0.954), "smaller"),
        ({"speedup": 0.6}, (0.99, 0.85, 1.15), "undetermined"),  # too wide to say
        ({"speedup": 0.6}, (1.2, 1.1, 1.3), "reversed"),
        ({"speedup": [2, 52]}, (30.0, 25.0, 35.0), "reproduced"),
        ({"speedup": [1.7, 1.75]}, (1.2, 1.1, 1.3), "smaller"),
        ({"published": {"of": 498.0, "over": 375.5}}, (0.8, 0.77, 0.83), "smaller"),
        ({"direction": "slower"}, (0.9, 0.85, 0.95), "reproduced"),
        ({"direction": "same"}, (0.99, 0.97, 1.01), "reproduced"),
        ({"direction": "same"}, (0.7, 0.65, 0.75), "contradicted"),
        ({"direction": "same"}, (0.98, 0.93, 1.03), "undetermined"),  # reaches beyond -5%: not shown the same
        ({"direction": "same"}, (0.9, 0.85, 0.96), "undetermined"),  # not wholly outside +-5% either
        ({}, (0.7, 0.65, 0.75), "no published figure"),
    ],
)
def test_verdicts(item, ours, expected):
    assert verdict(item, Speedup(*ours, basis=ACROSS, runs=(3, 3))) == expected


@pytest.mark.parametrize("item", [{"speedup": 0.6}, {"direction": "same"}, {"direction": "slower"}])
def test_one_run_a_side_is_indicative_never_a_verdict(item):
    for ours in [(0.62, 0.58, 0.66), (0.7, 0.65, 0.75), (1.0, 0.99, 1.01)]:
        assert verdict(item, Speedup(*ours, basis=WITHIN_RUN)) == "indicative (1 run)"


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_comparison_names_one_planned_configuration_on_each_side(sweep):
    """One configuration: its replicates (3 by default), which differ only in their replicate and seed."""
    source = published.published_for(sweep)
    assert source["title"] and source["hardware"] and source["software"] and source["source"]
    assert source["device"] in ("cpu", "gpu"), "the kind of device its figures ran on, which a verdict names"
    runs = [(spec.axes, flatten(spec.record()["config"])) for spec in build_plan([f"sweep={sweep}", "device=cpu"]).runs]
    for item in source["comparisons"]:
        assert item["label"]
        for side in ("of", "over"):
            named = [fields for axes, fields in runs if published.matches(axes, fields, item[side])]
            configs = {repr(sorted((k, v) for k, v in f.items() if measures(k))) for f in named}
            assert len(named) == 3 and len(configs) == 1, f"{sweep}: {item['label']} {side}={item[side]}"
        assert direction(item) in (None, "slower", "faster", "same")


def test_a_failed_run_is_the_verdict_with_its_error():
    first = "Multiple dispatch failed for 'torch._ops.aten._to_copy.default'; all handlers returned NotImplemented:"
    message = first + "\n\n  - mode object <...>"
    status = Status("failed", error=RunError("TypeError", message, "..."))
    axes = {"input_type": "subclass"}
    failed = RunRecord(
        Path("r"), "resnet-subclass-compiled", "r", axes, list(axes), list(axes), Baseline("input_type", "tensor"),
        {}, status, None, None,
    )  # fmt: skip
    item = {"label": "compiled, subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    verdict = published.compare([failed], item)[-1]
    assert verdict == (
        "run failed: TypeError: Multiple dispatch failed for 'torch._ops.aten._to_copy.default'; "
        "all handlers returned NotImplemented: (resnet-subclass-compiled)"
    )
    cut = failed.error_line(limit=60)
    assert cut == "TypeError: Multiple dispatch failed f ... ed NotImplemented:", "its start and its end, 60 long"


def test_ours_gives_each_side_the_time_the_table_gives_its_configuration():
    """Runs whose medians are 10, 11 and 20 ms: their median (11) is not the table's figure, their geometric mean
    (13.0) is, and the speed-up across runs is the ratio of the two sides' geometric means."""
    rng = np.random.default_rng(0)
    runs = []
    for replicate, (tensor_ms, subclass_ms) in enumerate([(10.0, 20.0), (11.0, 21.0), (20.0, 40.0)]):
        for input_type, ms in (("tensor", tensor_ms), ("subclass", subclass_ms)):
            axes = {"input_type": input_type, "memory_format": "contiguous"}
            runs.append(synthetic.record(input_type, axes, np.full(5, ms), replicate, len(runs), rng))
    item = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    shown = published.compare(runs, item)[-3]
    tensor, subclass = (10 * 11 * 20) ** (1 / 3), (20 * 21 * 40) ** (1 / 3)
    assert shown == f"{subclass:.3g} / {tensor:.3g} ms (3 / 3 runs)"
    table_ms = {c.first.axes["input_type"]: c.median("step") for c in configurations(runs)}
    assert table_ms == pytest.approx({"tensor": tensor, "subclass": subclass})


def test_a_sweep_recorded_under_its_earlier_name_still_finds_its_published_figures():
    assert published.published_for("seed000_subclass") == published.published_for("subclass_slowdown") is not None


def test_ours_rests_on_the_same_pairing_as_the_table_where_sides_shared_processes():
    """Each round's two sides shared a process: the published row gives the table's interval, paired in process."""
    levels = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 55.0}
    runs = synthetic.sweep(levels, 4, synthetic.Noise(), np.random.default_rng(1), paired=True)
    item = {"label": "subclass vs Tensor", "of": {"input_type": "tensor"}, "over": {"input_type": "subclass"}}
    by_type = {c.first.axes["input_type"]: c for c in configurations(runs)}
    table = speedup_over(by_type["tensor"], by_type["subclass"])
    assert table.basis == IN_PROCESS
    assert published.compare(runs, item)[-2] == str(table)


def planned_as_done(overrides: list[str]) -> list[RunRecord]:
    """The runs a launch with these overrides plans, as done runs of 1 ms steps."""
    rng = np.random.default_rng(0)
    found = []
    for position, spec in enumerate(build_plan(overrides).runs):
        axes = {k: v for k, v in spec.axes.items() if k != "replicate"}
        run = synthetic.record(spec.name, axes, np.ones(5), int(spec.axes["replicate"]), position, rng)
        found.append(dataclasses.replace(run, fields=flatten(spec.record()["config"])))
    return found


def test_a_comparison_run_at_other_settings_than_published_names_them_and_gives_no_verdict():
    """The smoke scale runs the loops at 10 elements, not the talk's 100, and compiles through aot_eager.
    A side of several settings run otherwise names each."""
    verdicts = {
        item["label"]: published.compare(planned_as_done([f"sweep={sweep}", "scale=smoke"]), item)[-1]
        for sweep in ("loops_vs_broadcasting", "sampler_nonzero")
        for item in published.published_for(sweep)["comparisons"]
    }
    assert verdicts["pairwise_sum_prod N=100, broadcast vs loop"] == "not run in this sweep at size=100 (ran 10)"
    compiled = verdicts["batch 1, 1e3 samples, compiled static vs nonzero"]
    assert compiled == "not run in this sweep at compile.backend=inductor (ran aot_eager)"
    square = verdicts["x = x * x five times, torch.compile vs eager"]
    assert square == "not run in this sweep at compile.backend=inductor (ran aot_eager)", "compile=default ran"
    item = next(i for i in published.published_for("loops_vs_broadcasting")["comparisons"] if "compile" in i["of"])
    eager = planned_as_done(["sweep=loops_vs_broadcasting", "scale=cpu", "compile=eager"])
    said = published.compare(eager, item)[-1]
    assert said == "not run in this sweep at compile=default (ran eager)", "an eager sweep: no backend of its own"
    several = verdicts["batch 32, 1e5 samples, compiled static vs nonzero loop"]  # three settings run otherwise
    assert several == (
        "not run in this sweep at compile.backend=inductor (ran aot_eager); batch=32 (ran 1, 4); size=100000 (ran 1000)"
    )
    nested = planned_as_done(["sweep=nested_tensor", "scale=cpu"])
    item = next(i for i in published.published_for("nested_tensor")["comparisons"] if "2^16" in i["label"])
    assert published.compare(nested, item)[-1].endswith("(ran 1024, 4096, 16384)"), "sizes in order, not as text"


def test_the_published_view_of_a_repeats_auto_sweep_keeps_the_level_of_its_looks(tmp_path):
    """At 95%, the published view would decide what the looks left undetermined."""
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.04}), 3, synthetic.Noise(), np.random.default_rng(17))
    sweep_dir = synthetic.write(runs, tmp_path / "sweep")
    comparison = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    source = {"title": "t", "hardware": "h", "software": "s", "source": "x", "comparisons": [comparison]}
    records.write_json(sweep_dir / records.PUBLISHED, source)
    launch = {"at": records.now(), "argv": ["repeats=auto"], "runs": [r.name for r in runs]}
    records.write_json(sweep_dir / records.SWEEP, {"uid": "x", "runs": {}, "launches": [launch]})
    shown = published.view(sweep_dir)
    subclass, tensor = (
        next(c for c in configurations(runs) if c.first.axes["input_type"] == t) for t in ("subclass", "tensor")
    )
    at_99 = speedup_over(subclass, tensor, level=0.99)
    assert shown.header[-2] == "ours [99%]" and shown.items[0][-2] == str(at_99)


def test_the_published_view_says_what_ran_beside_the_published_setting(tmp_path):
    """A scaled-down reproduction reads as like for like unless its model, batch and size are named."""
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(3))
    sized = {"model.name": "resnet18", "model.batch_size": 16, "model.image_size": 64}
    runs = [dataclasses.replace(r, fields=r.fields | sized, axes={"model": "resnet18", **r.axes}) for r in runs]
    sweep_dir = synthetic.write(runs, tmp_path / "sweep")
    comparison = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    source = {"title": "t", "hardware": "h", "software": "s", "source": "x", "comparisons": [comparison]}
    records.write_json(sweep_dir / records.PUBLISHED, source)
    shown = published.view(sweep_dir)
    assert shown.above[1].startswith("ours ran: ") and "batch 16, 64 px" in shown.above[1], shown.above


def test_a_verdict_on_another_device_or_scale_than_published_says_so_beside_its_word(tmp_path):
    """A GPU's figure reproduced on this CPU at the smoke scale: the word stands, and says what it rests on."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 3, steady, np.random.default_rng(5))
    runs = [dataclasses.replace(r, fields=r.fields | {"scale": "smoke"}) for r in runs]
    sweep_dir = synthetic.write(runs, tmp_path / "sweep")
    for run in runs:  # measured on this CPU
        records.write_json(sweep_dir / run.name / records.ENV, {"cpu": "AMD EPYC", "packages": {"torch": "2.14.1"}})
    comparison = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    source = {"title": "t", "device": "gpu", "hardware": "h", "software": "s", "source": "x"}
    records.write_json(sweep_dir / records.PUBLISHED, source | {"comparisons": [comparison | {"speedup": [0.7, 0.8]}]})
    (row,) = published.view(sweep_dir).items
    assert row[-1] == "reproduced (ours on a CPU, theirs on a GPU; scale=smoke)", row
    records.write_json(sweep_dir / records.PUBLISHED, source | {"comparisons": [comparison], "device": "cpu"})
    (row,) = published.view(sweep_dir).items
    assert row[-1] == "no published figure", "a word that decides nothing is not qualified"
    records.write_json(
        sweep_dir / records.PUBLISHED,
        {**source, "device": "cpu", "comparisons": [comparison | {"speedup": [0.7, 0.8]}]},
    )
    (row,) = published.view(sweep_dir).items
    assert row[-1] == "reproduced (scale=smoke)", "a CPU's figure on a CPU: the scale alone"


def test_published_of_a_sweep_that_ran_none_of_its_comparisons_answers_nothing_and_says_so(tmp_path):
    """The sweep ran its Tensor and TensorBase, not the subclass every published comparison measures."""
    levels = {("tensor", "contiguous"): 50.0, ("tensorbase", "contiguous"): 50.0}
    runs = synthetic.sweep(levels, 2, synthetic.Noise(), np.random.default_rng(6))
    sweep_dir = synthetic.write(runs, tmp_path / "sweep")
    comparison = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    source = {"title": "t", "hardware": "h", "software": "s", "source": "x"}
    records.write_json(sweep_dir / records.PUBLISHED, source | {"comparisons": [comparison | {"speedup": 0.7}]})
    shown = launch_here("published", str(sweep_dir))
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert ": its one published comparison did not run in this sweep" in shown.stderr, shown.stderr
    assert "not run in this sweep" in shown.stdout, "the view is still printed"


def test_a_verdict_whose_runs_disagree_says_so_in_its_cell(tmp_path):
    """One of the subclass's eight runs took 1.6 times the others' time: the word rests on runs that disagree."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 8, steady, np.random.default_rng(5))
    slow = synthetic.sweep(synthetic.grid({"subclass": 2.1}), 8, steady, np.random.default_rng(5))
    odd = lambda r: r.axes["input_type"] == "subclass" and r.fields["replicate"] == 7  # noqa: E731
    runs = [next(s for s in slow if s.name == r.name) if odd(r) else r for r in runs]
    sweep_dir = synthetic.write(runs, tmp_path / "sweep")
    comparison = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    source = {"title": "t", "hardware": "h", "software": "s", "source": "x", "comparisons": [comparison]}
    records.write_json(sweep_dir / records.PUBLISHED, source | {"comparisons": [comparison | {"speedup": 0.7}]})
    (row,) = published.view(sweep_dir).items
    assert re.fullmatch(r"\w+ \(RUNS DISAGREE: of's span 6\d\.\d-10\d ms\)", row[-1]), row


def test_a_verdict_at_settings_typed_otherwise_than_the_published_ones_names_them(tmp_path):
    """The smoke scale's settings typed on the command line, at no scale: the word says it is not theirs."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 3, steady, np.random.default_rng(5))
    typed = {"model.name": "test_resnet", "model.image_size": 32, "precision.name": "fp32"}
    runs = [dataclasses.replace(r, fields=r.fields | typed) for r in runs]
    sweep_dir = synthetic.write(runs, tmp_path / "sweep")
    comparison = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    setting = {"model.image_size": 224, "model.name": "resnet50", "model.in_chans": 3, "precision.name": "fp32"}
    source = {"title": "t", "hardware": "h", "software": "s", "source": "x", "setting": setting}
    records.write_json(sweep_dir / records.PUBLISHED, source | {"comparisons": [comparison | {"speedup": [0.7, 0.8]}]})
    shown = published.view(sweep_dir)
    assert shown.items[0][-1] == "reproduced (not their model.image_size, model.name)", shown.items
    said = "not the published setting: model.image_size=32 (theirs 224), model.name=test_resnet (theirs resnet50)"
    assert shown.above[0].endswith(said), "in_chans: unrecorded, so unknown; precision: theirs"


SETTINGS = ["subclass_slowdown", "subclass_slowdown_t4", "timm_infer_cpu", "timm_infer_memory_format"]
SETTINGS += ["timm_train_memory_format"]  # the sources that name their setting; the others name sizes per comparison


def test_the_sources_that_name_a_setting_are_those_a_test_holds_to_their_sweep():
    named = sorted(
        p.stem for p in published.PUBLISHED_DIR.glob("*.yaml") if published.published_for(p.stem).get("setting")
    )
    assert named == sorted(SETTINGS)


@pytest.mark.parametrize("name", SETTINGS)
def test_each_sources_setting_is_what_its_sweep_runs_at_full_scale(name):
    source = published.published_for(name)
    plan = build_plan([f"sweep={name}", "device=cpu", "repeats=1"])
    assert source["setting"], name
    for key, theirs in source["setting"].items():
        ran = {str(records.flatten(spec.record()["config"])[key]) for spec in plan.runs}
        assert ran == {str(theirs)}, f"{name}: {key}"


def test_a_side_that_names_runs_of_two_settings_is_no_verdict_and_says_what_parts_them(tmp_path):
    """A folder launched again at another scale holds runs of 3 and of 50 steps: no one figure is ours."""
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(6))
    longer = [dataclasses.replace(r, name=f"{r.name}-50", fields=r.fields | {"steps": 50}) for r in runs]
    item = synthetic.SUBCLASS_VS_TENSOR
    said = published.compare(runs + longer, item)[-1]
    assert said.startswith("not decided: 2 configurations match {'input_type': 'subclass'}, parted by "), said
    assert said.endswith("steps (10, 50)"), said
    sweep_dir = synthetic.write(runs + longer, tmp_path / "sweep")
    synthetic.publish(sweep_dir, [item | {"speedup": 0.77}])
    shown = launch_here("published", str(sweep_dir))
    assert shown.returncode == 1, "a comparison without an answer is no pass"
    assert "1 of its 1 rows matched runs of several configurations" in shown.stderr, shown.stderr


def test_the_published_command_gives_the_flags_of_the_runs_behind_its_verdicts(tmp_path):
    """Its verdicts rest on noisy runs: alone, as beside the table in a launch, it says so."""
    noisy = synthetic.Noise(run_sd=0.01, step_sd=0.3, bimodal=0.0)
    sweep_dir = synthetic.published_sweep(tmp_path / "sweep", noisy, seed=8)
    shown = launch_here("published", str(sweep_dir))
    assert shown.returncode == 0, shown.stderr
    assert "| subclass vs Tensor |" in shown.stdout and "as the table's:\nNOISY " in shown.stdout, shown.stdout


def test_published_exits_1_where_a_comparison_is_not_measured_and_2_where_nothing_is_published(tmp_path):
    """A sweep cut short: its subclass runs never finished. Then a folder of no published sweep, and an empty one."""
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 2, synthetic.Noise(), np.random.default_rng(8))
    sweep_dir = synthetic.write(runs, tmp_path / "sweep")
    comparison = synthetic.SUBCLASS_VS_TENSOR
    synthetic.publish(sweep_dir, [comparison | {"speedup": 0.77}])
    for run in (r for r in runs if r.axes["input_type"] == "subclass"):
        (sweep_dir / run.name / records.STEPS).unlink()
        lifecycle.stop(sweep_dir / run.name, "interrupt", "Ctrl-C")
    shown = launch_here("published", str(sweep_dir))
    assert shown.returncode == 1 and "without a done run" in shown.stderr, shown.stdout + shown.stderr
    assert "not measured: 2 runs not finished (pending)" in shown.stdout, shown.stdout
    never = comparison | {"over": {"input_type": "tensor", "memory_format": "channels_last"}}
    row = published.compare(records.load_sweep(sweep_dir), never)
    assert row[-1].startswith(NOT_RUN) and "memory_format=channels_last (ran contiguous)" in row[-1], (
        "no resume runs it"
    )
    (sweep_dir / records.PUBLISHED).unlink()
    unpublished = launch_here("published", str(sweep_dir))
    assert unpublished.returncode == 2 and "its sweep (synthetic) has no published figures" in unpublished.stderr
    assert "those that have: loops_vs_broadcasting, nested_tensor, sampler_nonzero, " in unpublished.stderr
    (tmp_path / "empty").mkdir()
    empty = launch_here("published", str(tmp_path / "empty"))
    assert empty.returncode == 2 and "empty is no sweep folder" in empty.stderr, "a wrong path, refused"


def test_a_launchs_published_view_rests_on_its_own_runs_in_a_folder_of_other_launches(tmp_path):
    """A folder of a cpu-scale launch, launched again at the smoke scale: the second launch's views are its own.
    The folder's view gives each scale a row of its own, its word qualified by its own scale."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    launches = []
    for scale, seed in (("cpu", 5), ("smoke", 6)):
        runs = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 3, steady, np.random.default_rng(seed))
        launches.append(
            [dataclasses.replace(r, name=f"{scale}-{r.name}", fields=r.fields | {"scale": scale}) for r in runs]
        )
    sweep_dir = synthetic.write([*launches[0], *launches[1]], tmp_path / "sweep")
    comparison = synthetic.SUBCLASS_VS_TENSOR
    synthetic.publish(sweep_dir, [comparison | {"speedup": 0.77}])
    whole = published.view(sweep_dir)
    rows = {row[0]: row[-1] for row in whole.items}
    assert list(rows) == [f"subclass vs Tensor, scale={scale}" for scale in ("cpu", "smoke")], rows
    assert [word.split(" ", 1)[1] for word in rows.values()] == ["(scale=cpu)", "(scale=smoke)"], rows
    assert "launches at scales cpu, smoke (a row for each)" in whole.above[0], whole.above
    shown = sweep_views(sweep_dir, names=[r.name for r in launches[1]])[-1]
    assert shown.items[0][-1] == "reproduced (scale=smoke)", shown.items


def test_a_published_speed_up_of_thousands_reads_as_a_whole_number_as_ours_does():
    """pairwise_sum_prod's loop over broadcasting: 82.3 / 0.0249 ms, 3305x, not 3.31e+03x beside our 3200x."""
    item = {"label": "l", "of": {}, "over": {}, "published": {"of": 0.0249, "over": 82.3}}
    assert published.compare([], item)[3] == "3305x"
    assert published.compare([], {**item, "speedup": [2, 52]})[3] == "2-52x"


def test_our_interval_prints_the_digits_that_keep_the_published_figure_out_of_it(monkeypatch):
    """Beside `larger`, 4900x [3300, 7300] would read as holding their 3305x: the bound keeps its digits."""
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(6))
    ours = Speedup(4910.0, 3305.9, 7287.9, ACROSS, (2, 2))
    assert str(ours) == "4900x [3300, 7300]", "the premise: to the digits its width supports, it holds 3305"
    monkeypatch.setattr(published, "speedup", lambda *args, **kwargs: ours)
    item = {"label": "l", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}
    row = published.compare(runs, item | {"published": {"of": 0.0249, "over": 82.3}})
    assert row[-2:] == ["4910x [3305.9, 7287.9]", "larger"], row
