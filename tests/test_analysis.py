"""The table from records with known values: ratios to the baseline of the same group, failures listed."""

import dataclasses
import os
import re
from pathlib import Path

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.groups import compared_as_asked, configurations, in_order, labels, speedups
from perfsweep.analysis.render import text
from perfsweep.analysis.views import compare, replicates, runs
from perfsweep.analysis.views.table import stalled, table_view, view
from perfsweep.launch import main as analysis_cli
from perfsweep.records import load_sweep
from tests import synthetic
from tests.helpers import ENV as GPU_ENV
from tests.helpers import cells, launch_here, write_model_run, write_run


def rows(runs):
    shown = table_view("sweep", runs)
    return shown.header, shown.rows


def render(sweep):
    return text(view(sweep))


@pytest.fixture
def sweep(tmp_path):
    sweep = tmp_path / "sweep"
    write_run(sweep, "a", "tensor", "contiguous", 100.0)
    write_run(sweep, "b", "subclass", "contiguous", 60.0)
    write_run(sweep, "c", "subclass", "channels_last", 90.0)
    write_run(sweep, "d", "tensor", "channels_last", 120.0)
    write_run(sweep, "e", "tensorbase", "channels_last", 0, state="failed")
    return sweep


def test_ratios_are_to_the_configuration_that_differs_only_in_that_axis(sweep):
    header, table = rows(load_sweep(sweep))
    assert header[:2] == ["memory_format", "input_type"]
    ratio, formats = header.index("vs tensor"), header.index("vs contiguous")
    assert [(r[0], r[1], r[ratio].split(" [")[0], r[formats].split(" [")[0]) for r in table] == [
        ("contiguous", "tensor", "1.00x", "1.00x"),
        ("contiguous", "subclass", "0.600x", "1.00x"),
        ("channels_last", "tensor", "1.00x", "1.20x"),
        ("channels_last", "subclass", "0.750x", "1.50x"),
    ]
    # the speed-up and its interval, from one run a side: it resamples that run's steps, and says so
    assert table[3][ratio] == "0.750x [0.749, 0.751] within-run"
    assert table[1][header.index("step ms")] == "267"


def vs_words(runs) -> dict[str, str]:
    """Each input type's word beside its speed-up in the table of these runs ('1.00x' for the baseline)."""
    shown = table_view("synthetic", runs)
    vs, kind = shown.header.index("vs tensor"), shown.header.index("input_type")
    return {row[kind]: row[vs].split()[-1] for row in shown.rows}


def test_a_speedup_across_runs_says_in_a_word_what_its_interval_says():
    rng = np.random.default_rng(0)
    steady = synthetic.Noise(run_sd=0.002, step_sd=0.005, rho=0.0, warmup=0.0, bimodal=0.0, steps=50)
    levels = synthetic.grid({"subclass": 1.3, "tensorbase": 0.8})
    assert vs_words(synthetic.sweep(levels, 3, steady, rng)) == {
        "tensor": "1.00x",
        "subclass": "slower",
        "tensorbase": "faster",
    }
    assert vs_words(synthetic.sweep(synthetic.grid(), 3, steady, rng))["subclass"] == "same"
    noisy = synthetic.sweep(synthetic.grid(), 3, synthetic.Noise(run_sd=0.08, step_sd=0.05, rho=0.3, steps=10), rng)
    assert vs_words(noisy)["subclass"] == "undetermined"
    shown = table_view("synthetic", noisy)
    assert "[95% CI across runs, each run one process]" in shown.above[1]
    assert shown.notes == [
        "vs words: slower or faster where the 95% interval excludes 1.00x; same where it lies within -+2% of 1.00x "
        "(auto.half_width, by which repeats=auto decides); else undetermined: more runs narrow it"
    ]


def test_a_column_for_each_axis_that_varies_and_none_for_one_that_does_not(tmp_path):
    """One input type: its column would read 1.00x against itself; memory formats are compared with contiguous."""
    sweep = tmp_path / "sweep"
    write_run(sweep, "a", "tensor", "contiguous", 100.0)
    write_run(sweep, "b", "tensor", "channels_last", 120.0)
    header, table = rows(load_sweep(sweep))
    assert [h for h in header if h.startswith("vs ")] == ["vs contiguous"]
    assert [row[header.index("vs contiguous")].split(" [")[0] for row in table] == ["1.00x", "1.20x"]


def test_a_sweep_with_nothing_to_compare_has_no_vs_column(tmp_path):
    """Two models: other work, not another way to do the same work, so never a speed-up of one over the other."""
    sweep = tmp_path / "sweep"
    write_model_run(sweep, "models", "resnet18", "contiguous", 100.0)
    write_model_run(sweep, "models", "resnet34", "contiguous", 50.0)
    header, table = rows(load_sweep(sweep))
    assert header[0] == "model" and not any(h.startswith("vs ") for h in header) and len(table) == 2
    assert "vs:" not in table_view("sweep", load_sweep(sweep)).above[1]


def test_a_group_without_baseline_has_no_ratio(sweep):
    write_run(sweep, "f", "subclass", "contiguous_3d", 50.0)
    header, table = rows(load_sweep(sweep))
    assert ["contiguous_3d", "subclass"] == table[-1][:2] and table[-1][header.index("vs tensor")] == "-"


def test_a_baseline_that_nothing_is_compared_with_shows_no_ratio(sweep):
    """A plain Tensor in a memory format no other input type ran in: no 1.00x for a comparison not made."""
    write_run(sweep, "f", "tensor", "contiguous_3d", 50.0)
    header, table = rows(load_sweep(sweep))
    row = next(r for r in table if r[:2] == ["contiguous_3d", "tensor"])
    assert row[header.index("vs tensor")] == "-"
    assert row[header.index("vs contiguous")].startswith("0.500x")


def test_the_table_compares_along_the_axis_and_value_asked_for(sweep, capsys):
    assert analysis_cli(["table", str(sweep), "--vs", "memory_format=contiguous"]) == 1, "e failed: no figures"
    lines = [line.split("|") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0]]
    cells = [[cell.strip() for cell in line] for line in lines[1:]]
    ratio = header.index("vs contiguous")
    speedups = {(r[1], r[2]): r[ratio].split(" [")[0] for r in cells}
    assert speedups == {
        ("contiguous", "tensor"): "1.00x",
        ("channels_last", "tensor"): "1.20x",
        ("contiguous", "subclass"): "1.00x",
        ("channels_last", "subclass"): "1.50x",
    }
    refused = [
        ("compiled=eager", "'compiled' is not an axis"),
        ("memory_format=cl", "memory_format='cl'"),
        ("memory_format", "--vs memory_format=VALUE; its values: channels_last, contiguous"),
        # an axis at one value: compared along it, no row has a comparison, and the sweep's own would be gone
        ("compile=eager", "every run of this sweep ran compile=eager: nothing to compare along it; the axes it varies"),
    ]
    for vs, named in refused:
        assert analysis_cli(["table", str(sweep), "--vs", vs]) == 2
        assert named in capsys.readouterr().err


def test_vs_a_setting_the_sweep_varies_says_why_it_is_no_axis(tmp_path, capsys):
    for name, size in (("a", 32), ("b", 64)):
        write_run(tmp_path, name, "tensor", "contiguous", 100.0)
        record = records.read_json(tmp_path / name / records.CONFIG)
        record["config"]["model"]["image_size"] = size
        records.write_json(tmp_path / name / records.CONFIG, record)
    assert analysis_cli(["table", str(tmp_path), "--vs", "model.image_size=32"]) == 2
    said = capsys.readouterr().err
    assert "model.image_size is a setting this sweep varies, not an axis" in said and "samples/s column" in said
    assert "settings compared as axes: threads, cudnn_benchmark, model.batch_size" in said


def test_vs_threads_sets_a_sweeps_thread_counts_side_by_side(tmp_path, capsys):
    """Two runs of each thread count, the two-thread ones twice as fast: threads do the same work another way."""
    for name, threads, rate in (("a", 1, 100.0), ("b", 1, 102.0), ("c", 2, 200.0), ("d", 2, 198.0)):
        write_run(tmp_path, name, "tensor", "contiguous", rate)
        record = records.read_json(tmp_path / name / records.CONFIG)
        record["config"]["threads"] = threads
        records.write_json(tmp_path / name / records.CONFIG, record)
    assert analysis_cli(["table", str(tmp_path)]) == 0
    assert f"table {tmp_path} --vs threads=1` sets its values side by side" in capsys.readouterr().out
    assert analysis_cli(["table", str(tmp_path), "--vs", "threads=1"]) == 0
    (one, two) = cells(capsys.readouterr().out, "threads")
    assert one["threads"] == "1" and one["vs threads=1"] == "1.00x", one
    assert two["vs threads=1"].startswith("1.97x"), two


def test_failed_runs_are_listed_not_tabled(sweep):
    text = render(sweep)
    assert "5 runs, 4 done, 1 failed" in text
    assert "FAILED e (channels_last tensorbase): OutOfMemoryError: CUDA out of memory" in text
    assert "| tensorbase" not in text
    assert "NO FIGURES channels_last tensorbase: none of its runs is done, so the table has no row for it" in text


def test_a_stall_of_microseconds_says_how_long_its_longest_step_took():
    """Steps of 5 us, one of 280 us: the longest is said as 0.28 ms, not rounded to 0."""
    step_ms = np.full(20, 0.005)
    step_ms[7] = 0.28
    run = synthetic.record("copy", {"input_type": "tensor"}, step_ms, 0, 0, np.random.default_rng(0))
    assert "the longest took 0.28 ms" in stalled(run), stalled(run)
    assert stalled(run).endswith("the longest took 0.28 ms"), "no samples/s: no word of it"
    sampled = dataclasses.replace(run, summary=dataclasses.replace(run.summary, samples_per_s=100.0))
    assert stalled(sampled).endswith(
        "Its row's samples/s counts that stall and its step ms does not: they may rank rows apart"
    )


def test_a_run_whose_steps_mostly_stalled_says_its_step_time_counts_the_stall_too():
    """Three of five steps slowed by a neighbour: the median is one of them."""
    step_ms = np.array([12.6, 6.5, 208.5, 2.6, 2.9])
    run = synthetic.record("copy", {"input_type": "tensor"}, step_ms, 0, 0, np.random.default_rng(0))
    said = stalled(run)
    assert "Its median step is 2.2x its fastest quarter's (2.9 ms), so its step ms counts the stall too" in said, said
    assert "its step ms does not" not in said


def test_a_run_with_a_stalled_step_is_flagged_as_its_samples_per_s_parts_from_its_step_time(sweep):
    """a: one of its 20 steps took 21 times its median; b: one took twice as long, as a busy moment does."""
    for name, slowest in (("a", 21.0), ("b", 2.0)):
        steps = records.read_steps(sweep / name / records.STEPS).to_pylist()
        steps[7]["step_ms"] *= slowest
        records.write_steps(sweep / name / records.STEPS, steps)
    shown = render(sweep)
    assert re.search(
        r"STALLED a: its steps took 3[12]\d ms on average against a median of 160 ms: the longest took 33", shown
    )
    assert "they may rank rows apart" in shown and "STALLED b" not in shown


def test_a_configuration_whose_runs_disagree_is_flagged_as_one_run_moves_its_row():
    """Three runs of subclass: one beside a neighbour took 33 times the others' step; the others agree."""
    done = synthetic.sweep(synthetic.grid(), 3, synthetic.Noise(run_sd=0.02), np.random.default_rng(5))
    slow = next(r for r in done if r.axes["input_type"] == "subclass")
    median = {**slow.summary.median_ms, "step_ms": 33 * slow.summary.median_ms["step_ms"]}
    done = [
        dataclasses.replace(r, summary=dataclasses.replace(r.summary, median_ms=median)) if r is slow else r
        for r in done
    ]
    (said,) = [flag for flag in table_view(Path("sweep"), done).flags if flag.startswith("RUNS DISAGREE")]
    assert re.match(r"RUNS DISAGREE subclass: its 3 runs' step medians span \d+(\.\d)?-1\d{3} ms \(3\d\.?\d*x\)", said)
    assert said.endswith("`perfsweep runs sweep` shows each run, and what its host showed"), said


def test_a_sweep_of_a_step_without_axes_heads_its_table_with_the_step(tmp_path):
    write_run(tmp_path, "a", "tensor", "contiguous", 100.0)
    record = records.read_json(tmp_path / "a" / records.CONFIG)
    record |= {"axes": {}, "axis_order": []}
    record["config"]["workload"] = {"_target_": "mylib.steps.Step", "name": "mystep"}
    records.write_json(tmp_path / "a" / records.CONFIG, record)
    head = table_view(tmp_path, load_sweep(tmp_path)).above[1]
    assert head.startswith("mylib.steps.Step | CPU "), head


def test_a_run_that_shared_its_gpu_is_flagged(sweep):
    summary = records.read_json(sweep / "a" / records.SUMMARY)
    other = {"pid": 777, "name": "other_job", "used_mib": 2048}
    summary["neighbours"] = {"start": {"gpu_processes": []}, "end": {"gpu_processes": [other]}}
    records.write_json(sweep / "a" / records.SUMMARY, summary)
    assert "SHARED GPU a: other processes on its GPU: other_job (pid 777, end)" in render(sweep)
    assert "SHARED GPU c" not in render(sweep)


def test_a_run_on_another_machine_is_flagged_and_the_usual_one_named(sweep):
    """env.json as a GPU run writes it (train/env.py): two kinds of GPU machine cannot be had here."""
    h100 = {"gpu": {"name": "NVIDIA H100 80GB HBM3", "driver": "580.159.04"}, "cuda": "13.0", "cudnn": 91900}
    h100["packages"] = {"torch": "2.11.0"}
    for name in "abcd":
        records.write_json(sweep / name / records.ENV, h100)
    assert "MIXED" not in render(sweep)
    records.write_json(sweep / "a" / records.ENV, h100 | {"cuda": "12.8", "packages": {"torch": "2.14.1"}})
    shown = render(sweep)
    assert "MIXED MACHINES a: torch 2.14.1, CUDA 12.8 (the table's other 3 runs: torch 2.11.0, CUDA 13.0)" in shown
    assert "| NVIDIA H100 80GB HBM3 | torch 2.11.0 |" in shown and "MIXED MACHINES b" not in shown


def cpu_runs(sweep, threads: dict[str, int | None], torch_threads: dict[str, int]) -> None:
    """Each run's env as a CPU run writes it, with torch's `torch_threads`; `threads` as its config set them."""
    for name, count in torch_threads.items():
        env = {"cpu": "AMD EPYC", "torch_threads": count, "packages": {"torch": "2.14.1"}}
        records.write_json(sweep / name / records.ENV, env)
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["threads"] = threads.get(name)
        records.write_json(sweep / name / records.CONFIG, config)


def test_threads_a_sweep_asked_for_are_its_configuration_not_another_machine(sweep):
    """threads=1,2 sets torch's threads: its runs ran on one machine. Unasked, a different count is another one's."""
    cpu_runs(sweep, {"a": 1, "b": 1, "c": 1, "d": 2}, {"a": 1, "b": 1, "c": 1, "d": 2})
    shown = render(sweep)
    assert "MIXED" not in shown and "CPU AMD EPYC |" in shown, "the threads are the runs' settings, not the machine's"
    cpu_runs(sweep, {"c": 1, "d": 1}, {"a": 2, "b": 2, "c": 1, "d": 1})
    shown = render(sweep)
    assert "MIXED" not in shown and "CPU AMD EPYC (2 threads)" in shown, "set for some runs: theirs tell no machine"
    cpu_runs(sweep, {"d": 1}, {"a": 2, "b": 2, "c": 4, "d": 1})
    shown = render(sweep)
    assert "MIXED MACHINES c: threads 4 (the table's other 3 runs: threads 2)" in shown, "two unasked counts differ"
    assert "MIXED MACHINES d" not in shown and "MIXED MACHINES a" not in shown
    cpu_runs(sweep, {}, {"a": 1, "b": 1, "c": 1, "d": 1})
    assert "CPU AMD EPYC (1 thread) |" in render(sweep), "one thread, in its number"


def test_compare_names_no_machine_difference_in_what_both_sweeps_set(tmp_path):
    sweeps = [tmp_path / "a", tmp_path / "b"]
    for folder, threads in zip(sweeps, (4, 8), strict=True):
        write_run(folder, "a", "tensor", "contiguous", 100.0)
        cpu_runs(folder, {"a": threads}, {"a": threads})
    a, b = (load_sweep(folder) for folder in sweeps)
    assert compare.machine_differences(a, b) == {}, "the line of what the sweeps differ in names threads 4 -> 8"
    cpu_runs(sweeps[1], {}, {"a": 16})
    assert compare.machine_differences(a, load_sweep(sweeps[1])) == {"threads": ("4", "16")}, "B's own count"


def test_a_swept_number_runs_down_the_table_by_size(tmp_path):
    sweep = tmp_path / "sweep"
    for name, batch in (("a", 32), ("b", 8), ("c", 16)):
        write_run(sweep, name, "tensor", "contiguous", 100.0)
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["model"]["batch_size"] = batch
        records.write_json(sweep / name / records.CONFIG, config)
    header, table = rows(load_sweep(sweep))
    assert [row[header.index("model.batch_size")] for row in table] == ["8", "16", "32"]
    across = text(replicates.view(sweep, 0.02))
    assert across.index("batch_size=8 ") < across.index("batch_size=16") < across.index("batch_size=32")


def test_a_column_s_values_go_numbers_by_size_then_text_by_its_numbers():
    values = ["2.2.10", 32, "x", None, "0.5", "2.2.9", 8, "1e-3", "-1", True, "0.25"]
    assert sorted(values, key=in_order) == ["-1", "1e-3", "0.25", "0.5", 8, 32, "2.2.9", "2.2.10", None, True, "x"]


def test_a_model_s_source_is_a_column_only_where_one_name_has_two(tmp_path):
    """A model of the user's own keeps model.source's default, which builds nothing: it is no column beside
    perfsweep's tiny_cnn. timm's resnet18 beside torchvision's needs one."""
    sweep = tmp_path / "sweep"
    for model, source in (("tiny_cnn", "perfsweep"), ("Net", "torchvision"), ("resnet18", "timm")):
        write_model_run(sweep, "models", model, "contiguous", 100.0)
        config = records.read_json(sweep / f"{model}-contiguous" / records.CONFIG)
        config["config"]["model"]["source"] = source
        records.write_json(sweep / f"{model}-contiguous" / records.CONFIG, config)
    header, _ = rows(load_sweep(sweep))
    assert "model.source" not in header
    write_model_run(tmp_path / "other", "models", "resnet18", "contiguous", 100.0)
    (tmp_path / "other" / "resnet18-contiguous").rename(sweep / "resnet18-torchvision")
    config = records.read_json(sweep / "resnet18-torchvision" / records.CONFIG)
    config["config"]["model"]["source"], config["run_id"] = "torchvision", "resnet18-torchvision"
    records.write_json(sweep / "resnet18-torchvision" / records.CONFIG, config)
    header, table = rows(load_sweep(sweep))
    sources = sorted((row[header.index("model")], row[header.index("model.source")]) for row in table)
    assert sources == [
        ("Net", "torchvision"),
        ("resnet18", "timm"),
        ("resnet18", "torchvision"),
        ("tiny_cnn", "perfsweep"),
    ]


def test_unreadable_run_is_skipped_with_a_warning(sweep):
    (sweep / "b" / records.CONFIG).write_text("{ half a file")
    with pytest.warns(UserWarning, match="skipping run b"):
        runs = load_sweep(sweep)
    assert sorted(r.name for r in runs) == ["a", "c", "d", "e"]


def test_cuda_event_runs_show_the_hosts_time_beside_the_devices(tmp_path, sweep):
    cuda = tmp_path / "cuda"
    write_run(cuda, "a", "tensor", "contiguous", 100.0, host_step_ms=50.0)
    write_run(cuda, "b", "subclass", "contiguous", 50.0, host_step_ms=310.0)
    header, table = rows(load_sweep(cuda))
    column = header.index("step host ms")
    assert header[column - 1] == "step ms"
    assert [(r[0], r[column - 1], r[column]) for r in table] == [("tensor", "160", "50"), ("subclass", "320", "310")]
    for name in ("a", "b"):
        records.write_json(cuda / name / records.ENV, GPU_ENV)
    said, *lines = text(runs.view(cuda)).splitlines()
    assert said.startswith(f"{cuda}: 2 done runs on GPU "), "the machine its figures are of"
    assert lines[0].split("|")[3:5] == [" median ms ", " host median ms "]
    forward = next(line for line in lines if "| b " in line and "| forward " in line)
    assert [cell.strip() for cell in forward.split("|")[3:5]] == ["80", "77.5"]
    assert "step host ms" not in rows(load_sweep(sweep))[0]  # a CPU's phase times are the host's already
    assert "host median ms" not in text(runs.view(sweep))


GOLDEN = Path(__file__).parent / "golden" / "table.txt"


def test_the_table_reads_as_its_golden_file(sweep):
    """The table's text, whole: its layout is what people paste. PERFSWEEP_GOLDEN=update rewrites the file."""
    shown = text(table_view(Path("sweep"), load_sweep(sweep))) + "\n"
    if os.environ.get("PERFSWEEP_GOLDEN") == "update":
        GOLDEN.write_text(shown)
    assert shown == GOLDEN.read_text()


@pytest.mark.parametrize(
    "args, said",
    [
        (["compare", "A", "B", "--threshold", "-1"], "--threshold: -1: a fraction from 0 up to, not including, 1"),
        (
            ["compare", "A", "B", "--loss-tolerance", "inf"],
            "--loss-tolerance: inf: a fraction from 0 up to, not including, 1 (0.05), or a percentage",
        ),
        (
            ["compare", "A", "B", "--loss-tolerance", "5"],
            "--loss-tolerance: 5: a fraction from 0 up to, not including, 1 (0.05), or a percentage (5%, 150%) "
            "(5 reads as 500%: type 500% if you mean it)",
        ),
        (["history", "A", "--threshold", "x"], "--threshold: x: a fraction from 0 up to, not including, 1"),
        (
            ["history", "A", "--threshold", "5"],
            "--threshold: 5: a fraction from 0 up to, not including, 1 (0.05), or a percentage (5%, 150%) (5 reads as "
            "500%: type 500% if you mean it)",
        ),
        (["replicates", "A", "--half-width", "0"], "--half-width: 0: a number above 0"),
    ],
)
def test_a_threshold_or_half_width_out_of_range_is_refused_by_name(sweep, args, said):
    """A negative threshold would flag every change, an infinite one none; no number of runs resolves a 0 width.

    A threshold of 5 is 5% mistyped, which would pass a 3x slowdown."""
    named = [str(sweep) if arg in ("A", "B") else arg for arg in args]
    refused = launch_here(*named)
    assert refused.returncode == 2 and said in refused.stderr, refused.stderr


def test_a_sweep_compared_with_itself_is_refused(sweep, monkeypatch):
    """A gate that compares one folder with itself passes whatever the code does: a script's typo.

    The folder is named once by its full path and once from its parent."""
    monkeypatch.chdir(sweep.parent)
    refused = launch_here("compare", str(sweep), sweep.name)
    assert refused.returncode == 2 and "are one sweep: compared with itself it can show no change" in refused.stderr


def test_runs_of_one_folder_are_one_sweep_whatever_folder_name_they_recorded(tmp_path):
    """A sweep folder copied and launched into again records its new name in the runs it adds."""
    sweep = tmp_path / "copy"
    for replicate in (0, 1, 2):
        write_model_run(sweep, "default", "resnet18", "contiguous", 100.0, replicate=replicate)
    for index, config in enumerate(sorted(sweep.glob(f"*/{records.CONFIG}"))):
        record = records.read_json(config)
        record["config"] |= {"sweep_name": "original" if index else "copy", "runs_dir": str(tmp_path / f"r{index}")}
        records.write_json(config, record)
    (config,) = view(sweep).items
    assert len(config.runs) == 3


def test_a_folder_launched_again_for_another_length_compares_each_configuration_with_its_own_lengths_baseline():
    """A subclass measured for 10 steps and for 20, beside a Tensor measured for each: each speed-up is over the Tensor
    of its own length, and each Tensor is its own baseline."""
    rng = np.random.default_rng(0)
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0, steps=10)
    short = synthetic.sweep({("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 55.0}, 3, steady, rng)
    longer = synthetic.sweep(
        {("tensor", "contiguous"): 100.0, ("subclass", "contiguous"): 100.0},
        3,
        dataclasses.replace(steady, steps=20),
        rng,
    )
    both = short + [dataclasses.replace(r, name=f"{r.name}-20", run_id=f"{r.run_id}-20") for r in longer]
    found = {
        (v.config.first.axes["input_type"], v.config.first.fields["steps"]): (v.base, s) for v, s in speedups(both)
    }
    assert set(found) == {("subclass", 10), ("subclass", 20)}
    assert [base.first.fields["steps"] for base, _ in found.values()] == [10, 20]
    assert found["subclass", 10][1].value == pytest.approx(50 / 55, rel=0.03)
    assert found["subclass", 20][1].value == pytest.approx(1.0, rel=0.03)


def test_a_setting_only_later_runs_record_still_parts_their_configuration():
    """A model built at its default width, then the same model launched into the folder at another width: the
    first run does not record the argument, and the runs are still two configurations, each with its own width."""
    rng = np.random.default_rng(1)
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0, steps=10)
    narrow = synthetic.sweep({("tensor", "contiguous"): 5.0}, 2, steady, rng)
    wide = synthetic.sweep({("tensor", "contiguous"): 40.0}, 2, steady, rng)
    wide = [
        dataclasses.replace(r, name=f"{r.name}-w", run_id=f"{r.run_id}-w", fields=r.fields | {"model.kwargs.width": 48})
        for r in wide
    ]
    found = configurations(narrow + wide)
    assert [sorted({r.fields.get("model.kwargs.width") for r in c.runs}, key=str) for c in found] == [[None], [48]]
    assert sorted(labels(found).values()) == ["model.kwargs.width=(unset)", "model.kwargs.width=48"]


def test_a_setting_perfsweep_added_since_some_runs_ran_parts_configurations_only_where_it_varies():
    """Runs of a folder resumed by a later perfsweep record settings the first runs' config had no field for."""
    rng = np.random.default_rng(2)
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0, steps=10)
    runs = synthetic.sweep({("tensor", "contiguous"): 5.0, ("subclass", "contiguous"): 6.0}, 4, steady, rng)
    later = [dataclasses.replace(r, fields=r.fields | {"blocks": 10}) if r.fields["replicate"] > 1 else r for r in runs]
    assert sorted(len(c.runs) for c in configurations(later)) == [4, 4]

    def factor(run):  # the first round, older, records none; the later rounds run two factors
        replicate = run.fields["replicate"]
        return run.fields | ({"planted.factor": replicate % 2 + 2} if replicate else {})

    older = [dataclasses.replace(r, fields=factor(r)) for r in later]
    assert len(configurations(older)) == 6, "a setting newer runs vary parts them, beside the runs without it"


def test_a_cuda_graph_mode_run_on_a_cpu_says_its_row_measures_the_mode_it_compiled_as():
    """reduce-overhead records CUDA graphs; on a CPU Inductor compiles it as default, so its row is default's code."""
    compiled = {"compile.enabled": True, "compile.mode": "reduce-overhead", "compile.name": "reduce_overhead"}
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(0))
    on_cpu = [dataclasses.replace(r, fields={**r.fields, **compiled}) for r in runs]
    (note,) = [n for n in table_view("sweep", on_cpu).notes if n.startswith("compile=")]
    assert note == (
        "compile=reduce_overhead ran on a CPU: Inductor records no CUDA graphs on one, so mode reduce-overhead "
        "compiled as default does. Its row measures mode default's code"
    )
    on_gpu = [dataclasses.replace(r, env=GPU_ENV) for r in on_cpu]
    assert not [n for n in table_view("sweep", on_gpu).notes if n.startswith("compile=")], "a GPU records them"


def test_batch_sizes_compared_as_asked_are_compared_per_sample():
    """Batch 16 at 100 ms a step does twice batch 4's samples a second at 50 ms: 2x per sample, not 0.5x a step."""
    rng = np.random.default_rng(1)

    def at(batch: int, ms: float) -> list:
        runs = synthetic.sweep({("tensor", "contiguous"): ms}, 4, synthetic.Noise(), rng)
        mark = {"model.batch_size": batch}
        return [dataclasses.replace(r, name=f"{r.name}-{batch}", fields={**r.fields, **mark}) for r in runs]

    runs = at(4, 50.0) + at(16, 100.0)
    shown = table_view("sweep", compared_as_asked(runs, "model.batch_size=4"))
    column = shown.header.index("vs model.batch_size=4")
    (row,) = [row for row in shown.rows if row[0] == "16"]
    assert 1.8 < float(row[column].split("x")[0]) < 2.2 and row[column].endswith("faster"), row
    assert "vs model.batch_size: the speed-up in time per sample" in " ".join(shown.notes)
    assert "batch 16" not in shown.above[1], "the rows show each batch: the line above names none"


def test_a_step_of_the_user_s_own_that_reads_the_model_shows_its_batch_above_the_table():
    """Its runs have no model axis; the step builds batches of model.batch_size all the same."""
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(2))
    assert "batch 16" not in table_view("sweep", runs).above[1], "a step that reads no model has no batch"
    reading = [dataclasses.replace(r, fields={**r.fields, "workload.reads": ["model"]}) for r in runs]
    assert " | batch 16 | " in table_view("sweep", reading).above[1]


def test_a_side_without_a_recorded_batch_is_compared_by_its_step():
    """Records that hold no batch (a function workload's, an older run's) cannot be compared per sample."""
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(4))
    unbatched = [
        dataclasses.replace(r, fields={k: v for k, v in r.fields.items() if k != "model.batch_size"})
        if r.axes["input_type"] == "subclass"
        else r
        for r in runs
    ]
    assert len(speedups(unbatched)) == len(speedups(runs)), "every comparison made, none per sample"


def test_a_sweep_explain_launched_again_points_its_table_at_that_sweep(sweep):
    """The explained runs live in a sweep of their own inside this one: its table says where, and that they differ."""
    assert not any(n.startswith("explain:") for n in view(sweep).notes)
    again = records.explained_in(sweep)
    again.mkdir()
    records.write_json(again / records.SWEEP, {"uid": "0f0f0f0f", "runs": {}, "launches": []})
    (note,) = [n for n in view(sweep).notes if n.startswith("explain:")]
    assert note.startswith(f"explain: {again} ran this sweep again with explain=true; ") and "may differ" in note


def test_world_sizes_compared_along_nothing_get_the_command_that_gives_their_scaling():
    """A world size is other work: no speed-up is made along it, unless --vs asks for the scaling."""
    runs = synthetic.sweep({("tensor", "contiguous"): 50.0}, 2, synthetic.Noise(), np.random.default_rng(5))
    ranked = [
        dataclasses.replace(
            r, name=f"{r.name}-{size}", axes={**r.axes, "world_size": size}, axis_order=[*r.axis_order, "world_size"]
        )
        for size in ("1", "2")
        for r in runs
    ]
    said = "world_size varies and is compared along nothing: `"
    assert any(
        n.startswith(said) and n.endswith("--vs world_size=1` gives the scaling over 1 rank")
        for n in table_view("sweep", ranked).notes
    )
    scaled = table_view("sweep", compared_as_asked(ranked, "world_size=1"))
    assert not any(n.startswith(said) for n in scaled.notes) and "vs world_size=1" in scaled.header
