"""A sweep's figures exported for PyTorch's benchmark database (v3 schema) and for Bencher (BMF)."""

import csv
import dataclasses
import io
import json
import shutil

import numpy as np
import pytest

from perfsweep import records
from perfsweep.records.host import HostBlock, HostState
from tests import synthetic
from tests.helpers import launch_here, write_run


@pytest.fixture
def sweep(tmp_path):
    """Two runs of tensor (100 and 125 samples/s, batch 16) and one of subclass (80 samples/s), of sweep file
    `mine`, in the folder of one commit's sweep."""
    folder = tmp_path / "runs" / "commit-0123456789ab"
    folder.mkdir(parents=True)
    for name, input_type, rate in (("t1", "tensor", 100.0), ("t2", "tensor", 125.0), ("s1", "subclass", 80.0)):
        write_run(folder, name, input_type, "contiguous", rate)
        config = records.read_json(folder / name / records.CONFIG)
        records.write_json(folder / name / records.CONFIG, config | {"config": config["config"] | {"sweep": "mine"}})
    records.write_json(folder / records.SWEEP, {"uid": "0f0f0f0f", "runs": {}, "launches": []})
    return folder


def exported(*args: str):
    done = launch_here("export", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_pytorch_v3_has_a_record_per_configuration_and_metric_with_a_value_per_run(sweep):
    found = exported(str(sweep.parent), "--format", "pytorch-v3")
    step = {r["model"]["extra_info"]["input_type"]: r for r in found if r["metric"]["name"] == "step_ms"}
    assert sorted(step["tensor"]["metric"]["benchmark_values"]) == pytest.approx([128.0, 160.0]), "16 / rate, in ms"
    assert step["subclass"]["metric"]["benchmark_values"] == pytest.approx([200.0])
    record = step["tensor"]
    assert set(record) == {"benchmark", "model", "metric", "runners", "dependencies"}
    assert record["benchmark"]["name"] == "perfsweep mine", "named by its sweep file: one series over commits"
    info = record["benchmark"]["extra_info"]
    assert info["sweep_folder"] == "commit-0123456789ab" and info["finished_at"].startswith("20"), "which sweep of it"
    assert record["model"]["name"] == "resnet18"
    assert all(
        isinstance(v, str) for r in found for part in ("benchmark", "model") for v in r[part]["extra_info"].values()
    )
    rate = next(r for r in found if r["metric"]["name"] == "samples_per_s")
    assert rate["metric"]["extra_info"]["statistic"].startswith("each run's samples over its whole measured window")
    names = {r["metric"]["name"] for r in found if r["model"]["extra_info"]["input_type"] == "tensor"}
    assert names == {"step_ms", "data_ms", "forward_ms", "backward_ms", "optimizer_ms", "samples_per_s"}


def test_a_stalled_run_s_samples_per_s_says_it_counts_the_stall_as_the_table_flags_it(sweep):
    """t1: one step took 21 times its median, which the table flags STALLED. s1: its window took 1.4 times its steps'
    median a step, its steps as steady as t1's others: the table flags nothing, so the export says nothing."""
    steps = records.read_steps(sweep / "t1" / records.STEPS).to_pylist()
    steps[7]["step_ms"] *= 21
    records.write_steps(sweep / "t1" / records.STEPS, steps)
    summary = records.read_json(sweep / "s1" / records.SUMMARY)
    summary |= {"steps": 20, "window_s": 1.4 * 20 * summary["median_ms"]["step_ms"] / 1e3}
    records.write_json(sweep / "s1" / records.SUMMARY, summary)
    found = exported(str(sweep), "--format", "pytorch-v3")
    rates = {
        r["model"]["extra_info"]["input_type"]: r["metric"]["extra_info"]
        for r in found
        if r["metric"]["name"] == "samples_per_s"
    }
    assert rates["tensor"]["stalled"] == "1 of 2 runs: their samples/s counts the stall", rates
    assert "stalled" not in rates["subclass"]
    table = launch_here("table", str(sweep)).stdout
    assert "STALLED t1" in table and "STALLED s1" not in table, "the table's flags are the export's"


def test_an_export_of_a_sweep_with_runs_not_finished_says_so_and_holds_the_done_ones(sweep):
    """t2 is still running, and a launch's budget left u1 unstarted: the export is of t1 and s1, and says so."""
    from perfsweep.records import lifecycle

    lifecycle.start(sweep / "t2")
    write_run(sweep, "u1", "subclass", "contiguous", 50.0)
    lifecycle.stop(sweep / "u1", records.BUDGET, "the launch's budget ran out")
    done = launch_here("export", str(sweep), "--format", "bmf")
    assert done.returncode == 0 and len(json.loads(done.stdout)) == 2, done.stderr
    said = f"perfsweep: 2 of the 4 runs in {sweep} are not finished (1 running, 1 stopped or not started by the "
    assert said + "launch's budget): the export holds the 2 done runs" in done.stderr, done.stderr
    for record in exported(str(sweep), "--format", "pytorch-v3"):  # a dashboard sees a configuration's share too
        assert (record["benchmark"]["extra_info"]["runs"], record["benchmark"]["extra_info"]["runs_planned"]) == (
            "1",
            "2",
        ), record["benchmark"]


def test_a_function_benchmark_is_exported_as_itself_not_as_the_model_it_never_built(sweep):
    """A workload that reads no model nor precision, with a forward phase only, as loops_vs_broadcasting's."""
    for name in ("t1", "t2", "s1"):
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["workload"] = {"name": "pairwise_distance", "reads": []}
        records.write_json(sweep / name / records.CONFIG, config)
        summary = records.read_json(sweep / name / records.SUMMARY)
        summary |= {"workload": "pairwise_distance", "phases": ["data", "forward"]}
        records.write_json(sweep / name / records.SUMMARY, summary)
    record = exported(str(sweep.parent), "--format", "pytorch-v3")[0]
    assert record["model"]["name"] == "pairwise_distance" and record["model"]["type"] == "function"
    assert record["benchmark"]["mode"] == "inference" and record["benchmark"]["dtype"] == ""
    for name in ("t1", "t2", "s1"):  # a step of the user's own that trains, its phases named its own way
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["workload"] = {"name": "MyStep", "reads": ["model", "optim"]}
        records.write_json(sweep / name / records.CONFIG, config)
    assert exported(str(sweep.parent), "--format", "pytorch-v3")[0]["benchmark"]["mode"] == "training"


def test_a_step_of_the_user_s_own_is_named_by_its_arguments_and_its_batch(sweep):
    """Two sweeps of one sweep file, a step's flag set otherwise in the second: two series, not one."""
    step = {"name": "LoaderStep", "_target_": "mypkg.steps.LoaderStep", "reads": ["model"], "kwargs": {"loop": False}}
    for name in ("t1", "t2", "s1"):
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["workload"] = step
        config["axes"] = {axis: value for axis, value in config["axes"].items() if axis != "model"}
        records.write_json(sweep / name / records.CONFIG, config)
    names = list(exported(str(sweep), "--format", "bmf"))
    assert all(name.endswith(" model.batch_size=16 model.image_size=32 workload.kwargs.loop=False") for name in names)
    record = exported(str(sweep), "--format", "pytorch-v3")[0]
    assert record["model"]["extra_info"]["workload.kwargs.loop"] == "False", record["model"]


def test_a_model_of_the_user_s_own_is_exported_as_its_import_path_not_a_model_zoo(sweep):
    """model=mynet.models.Net leaves model.source at its default, torchvision, which does not build it."""
    for name in ("t1", "t2", "s1"):
        config = records.read_json(sweep / name / records.CONFIG)
        model = config["config"]["model"] | {"_target_": "mynet.models.Net", "name": "Net", "source": "torchvision"}
        records.write_json(sweep / name / records.CONFIG, config | {"config": config["config"] | {"model": model}})
    found = exported(str(sweep.parent), "--format", "pytorch-v3")
    assert {(r["model"]["name"], r["model"]["type"]) for r in found} == {("Net", "mynet.models.Net")}


def test_bmf_gives_latency_in_nanoseconds_with_bounds_across_runs_only_where_there_are_two(sweep, tmp_path):
    out = tmp_path / "bmf.json"
    done = launch_here("export", str(sweep), "--format", "bmf", "--out", str(out))
    assert done.returncode == 0 and str(out) in done.stdout
    found = json.loads(out.read_text())
    axes = "model=resnet18 memory_format=contiguous precision=fp32 input_type={} compile=eager"
    size = "model.batch_size=16 model.image_size=32"
    named = [f"mine/{axes.format(t)} {size}" for t in ("subclass", "tensor")]
    assert sorted(found) == named, "every axis's value, and the size"
    subclass, tensor = (found[name] for name in named)
    assert tensor["latency"]["value"] == pytest.approx((128.0 * 160.0) ** 0.5 * 1e6)
    assert tensor["latency"]["lower_value"] < tensor["latency"]["value"] < tensor["latency"]["upper_value"]
    assert subclass["latency"] == {"value": pytest.approx(200.0e6)}, "one run: no interval across runs"
    assert subclass["throughput"]["value"] == pytest.approx(80.0)
    assert "latency-forward" in tensor


def test_a_folder_without_done_runs_and_an_unknown_format_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    records.write_json(tmp_path / "empty" / records.SWEEP, {"uid": None, "runs": {}, "launches": []})
    done = launch_here("export", str(tmp_path / "empty"), "--format", "bmf")
    assert done.returncode == 2 and "nothing to export" in done.stderr
    wrong = launch_here("export", str(tmp_path / "empty"), "--format", "csv")
    assert wrong.returncode == 2 and "invalid choice: 'csv'" in wrong.stderr


def test_two_sweeps_that_give_one_bmf_benchmark_are_refused(sweep):
    """Two commits' sweeps of one sweep file: a BMF report would keep only the later's value under each name."""
    later = sweep.with_name("commit-fedcba987654")
    shutil.copytree(sweep, later)
    done = launch_here("export", str(sweep.parent), "--format", "bmf")
    said = f"--format bmf: {sweep} and {later} both give benchmark mine/"
    assert done.returncode == 2 and said in done.stderr and "export each sweep to a report of its own" in done.stderr
    assert len(exported(str(sweep.parent), "--format", "pytorch-v3")) == 2 * len(
        exported(str(sweep), "--format", "pytorch-v3")
    )


def test_configurations_apart_only_in_how_long_they_measured_keep_a_benchmark_each(sweep):
    """Two lengths of one configuration: BMF would keep one value under one name."""
    config = records.read_json(sweep / "t2" / records.CONFIG)
    records.write_json(sweep / "t2" / records.CONFIG, config | {"config": config["config"] | {"steps": 40}})
    found = exported(str(sweep), "--format", "bmf")
    assert len(found) == 3 and sum(name.endswith(" steps=40") for name in found) == 1, list(found)
    extra = {r["benchmark"]["extra_info"]["configuration"] for r in exported(str(sweep), "--format", "pytorch-v3")}
    assert extra == {name.removeprefix("mine/") for name in found}, "both formats name a configuration alike"


def test_a_swept_batch_size_keeps_its_series_apart_and_its_name_when_one_batch_size_failed(sweep):
    """s1 at batch 32 beside the tensor runs at 16; then a batch-64 run that failed."""
    for name, batch, state in (("s1", 32, "done"), ("f1", 64, "failed")):
        if state == "failed":
            write_run(sweep, name, "tensor", "contiguous", 100.0, state="failed")
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"] |= {"sweep": "mine", "model": config["config"]["model"] | {"batch_size": batch}}
        records.write_json(sweep / name / records.CONFIG, config)
    v3 = [r for r in json.loads(launch_here("export", str(sweep), "--format", "pytorch-v3").stdout)]
    batches = {r["model"]["extra_info"].get("model.batch_size") for r in v3 if r["metric"]["name"] == "step_ms"}
    assert batches == {"16", "32"}, "a dashboard that groups by model and dtype keeps the two batch sizes apart"
    shutil.rmtree(sweep / "s1")  # the batch sizes that ran are all 16 now; 64 failed
    names = set(json.loads(launch_here("export", str(sweep), "--format", "bmf").stdout))
    axes = "model=resnet18 memory_format=contiguous precision=fp32 input_type=tensor compile=eager"
    assert names == {f"mine/{axes} model.batch_size=16 model.image_size=32"}, "a batch-16 series keeps its name"


def test_two_sweeps_of_one_sweep_file_at_two_batch_sizes_are_two_series(sweep):
    """Each sweep holds its batch size constant: 16 in one commit's folder, 4 in the other's."""
    smaller = sweep.with_name("commit-fedcba987654")
    shutil.copytree(sweep, smaller)
    for name in ("t1", "t2", "s1"):
        config = records.read_json(smaller / name / records.CONFIG)
        config["config"] |= {"model": config["config"]["model"] | {"batch_size": 4}}
        records.write_json(smaller / name / records.CONFIG, config)
    v3 = exported(str(sweep.parent), "--format", "pytorch-v3")
    steps = [r for r in v3 if r["metric"]["name"] == "step_ms" and r["model"]["extra_info"]["input_type"] == "tensor"]
    assert sorted(r["model"]["extra_info"]["model.batch_size"] for r in steps) == ["16", "4"]
    assert len({r["benchmark"]["extra_info"]["configuration"] for r in steps}) == 2, "two configurations, not one"
    names = exported(str(sweep.parent), "--format", "bmf")
    axes = "model=resnet18 memory_format=contiguous precision=fp32 input_type=tensor compile=eager"
    assert {
        f"mine/{axes} model.batch_size=16 model.image_size=32",
        f"mine/{axes} model.batch_size=4 model.image_size=32",
    } <= set(names)


def test_bmf_keeps_throughput_and_gives_energy_a_measure_of_its_own(sweep):
    """A run whose CPU packages used 100 J over its 2 s window, alone on the machine: 0.5 J a sample at 100/s."""
    block = HostBlock(2.0, 2, 2.0, 2.0, 0.0, cpu_energy_j=100.0, machine_cpus=2)
    summary = records.read_json(sweep / "s1" / records.SUMMARY)
    host = dataclasses.asdict(HostState.of([block]))
    records.write_json(sweep / "s1" / records.SUMMARY, summary | {"host": host})
    subclass = next(
        measures for name, measures in exported(str(sweep), "--format", "bmf").items() if "subclass" in name
    )
    assert subclass["throughput"]["value"] == pytest.approx(80.0)
    assert subclass["joules-per-sample"]["value"] == pytest.approx(50.0 / 80.0)


def test_a_run_across_ranks_exports_its_straggler_exposed_communication_and_bus_bandwidth(sweep):
    """s1 ran on 2 ranks, with every figure of its own; t1 and t2 on 1, which has no straggler or bandwidth."""
    ranks = {"world_size": 2, "step_ms": [30.0, 31.0], "straggler_index": 1.2, "exposed_comm_ms": 4.5}
    two = ranks | {"bus_gbps_min": 0.8, "exposed_comm_share": 0.15}
    records.write_json(
        sweep / "s1" / records.SUMMARY, records.read_json(sweep / "s1" / records.SUMMARY) | {"ranks": two}
    )
    for name in ("t1", "t2"):
        one = {"world_size": 1, "step_ms": [30.0], "exposed_comm_ms": 0.0 if name == "t1" else 4.0}  # t1 hid it
        records.write_json(
            sweep / name / records.SUMMARY, records.read_json(sweep / name / records.SUMMARY) | {"ranks": one}
        )
    found = exported(str(sweep), "--format", "pytorch-v3")
    metrics = {(r["model"]["extra_info"]["input_type"], r["metric"]["name"]): r["metric"] for r in found}
    assert metrics["subclass", "straggler_index"]["benchmark_values"] == [1.2]
    assert metrics["subclass", "bus_gbps_min"]["extra_info"]["unit"] == "GB/s"
    exposed = metrics["tensor", "exposed_comm_ms"]
    assert sorted(exposed["benchmark_values"]) == [0.0, 4.0] and "a value per run" in exposed["extra_info"]["statistic"]
    assert ("tensor", "straggler_index") not in metrics and ("tensor", "bus_gbps_min") not in metrics, "1 rank"
    bmf = {
        name.split("input_type=")[1].split()[0]: measures
        for name, measures in exported(str(sweep), "--format", "bmf").items()
    }
    assert bmf["subclass"]["latency-exposed-comm"]["value"] == pytest.approx(4.5e6), "ns, as latency"
    assert bmf["subclass"]["straggler-index"]["value"] == 1.2 and bmf["subclass"]["bus-bandwidth-min"]["value"] == 0.8
    assert "straggler-index" not in bmf["tensor"]
    assert bmf["tensor"]["latency-exposed-comm"] == {"value": pytest.approx(2e6)}, "geometric mean and bounds: none"
    assert "a value per run (its ranks together)" in metrics["subclass", "samples_per_s"]["extra_info"]["statistic"]


def test_pytorch_v3_says_what_other_processes_took_of_a_configuration_s_runs_and_how_many_were_noisy(sweep):
    """tensor's two runs shared their 2 CPUs with a neighbour that took 40% of them; subclass's host was not read.
    A dashboard shows none of the table's flags: the benchmark's record carries them."""
    block = HostBlock(1.0, 2, 1.2, busy_s=2.0, others_cpu_s=0.8, tick_s=0.01)
    host = dataclasses.asdict(HostState.of([block]))
    for name in ("t1", "t2"):
        summary = records.read_json(sweep / name / records.SUMMARY)
        records.write_json(sweep / name / records.SUMMARY, summary | {"host": host})
    steps = records.read_steps(sweep / "t1" / records.STEPS).to_pylist()
    for index, row in enumerate(steps):
        row["step_ms"] *= 1 + 0.3 * (index % 2)  # every other step 30% slower: NOISY
    records.write_steps(sweep / "t1" / records.STEPS, steps)
    found = exported(str(sweep), "--format", "pytorch-v3")
    info = {r["model"]["extra_info"]["input_type"]: r["benchmark"]["extra_info"] for r in found}
    assert info["tensor"]["host"] == "others' CPU 40%, the median over its runs", info["tensor"]
    assert info["tensor"]["flags"] == "NOISY 1/2"
    assert "host" not in info["subclass"] and "flags" not in info["subclass"], "nothing to say: nothing said"
    short = dataclasses.asdict(HostState.of([HostBlock(0.02, 2, 0.02, busy_s=0.04, others_cpu_s=0.0, tick_s=0.01)]))
    summary = records.read_json(sweep / "s1" / records.SUMMARY)
    records.write_json(sweep / "s1" / records.SUMMARY, summary | {"host": short})
    found = exported(str(sweep), "--format", "pytorch-v3")
    info = {r["model"]["extra_info"]["input_type"]: r["benchmark"]["extra_info"] for r in found}
    subclass = info["subclass"]["host"]
    assert subclass.startswith("unknown: their windows (0.02-0.02 s) are too short for /proc/stat"), "not none"


def test_pytorch_v3_carries_the_sweep_s_order_effect_in_each_configuration(tmp_path):
    """Each run 1% faster than the one before it: every configuration's times moved with their place in the sweep."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, rho=0.0, warmup=0.0, bimodal=0.0, steps=20)
    runs = synthetic.sweep(synthetic.grid(), 6, steady, np.random.default_rng(8))
    slower = [{c: v * 0.99**i for c, v in run.measured.items()} for i, run in enumerate(runs)]
    drifting = [
        dataclasses.replace(run, measured=m, summary=synthetic.summary_of(m))
        for run, m in zip(runs, slower, strict=True)
    ]
    folder = synthetic.write(drifting, tmp_path / "drift")
    records.write_json(folder / records.SWEEP, {"uid": "0f0f0f0f", "runs": {}, "launches": []})
    found = exported(str(folder), "--format", "pytorch-v3")
    assert {r["benchmark"]["extra_info"]["sweep_flags"].split(":")[0] for r in found} == {"ORDER EFFECT"}


def test_a_configuration_that_ran_eagerly_keeps_its_flag_in_each_export(sweep):
    """subclass asked torch.compile and ran no compiled graph: eager times under a compiled configuration's name.
    The table's CSV row, its JSON row and its BMF benchmark's name each say so."""
    summary = records.read_json(sweep / "s1" / records.SUMMARY)
    compiled = {"backend": "inductor", "graphs_run": 0, "graph_breaks": {}}
    records.write_json(sweep / "s1" / records.SUMMARY, summary | {"compiled": compiled})
    rows = list(csv.DictReader(io.StringIO(launch_here("table", str(sweep), "--csv").stdout)))
    assert {row["input_type"]: row["flags"] for row in rows} == {"tensor": "", "subclass": "NOT COMPILED 1/1"}
    shown = json.loads(launch_here("table", str(sweep), "--format", "json").stdout)
    assert [row["flags"] for row in shown["rows"]] == ["", "NOT COMPILED 1/1"]
    names = exported(str(sweep), "--format", "bmf")
    assert {"input_type=subclass" in name for name in names if name.endswith(" NOT COMPILED")} == {True}, names


def test_pytorch_v3_names_the_repository_as_the_ci_does_not_by_the_runners_checkout(sweep):
    for name in ("t1", "t2", "s1"):
        status = records.read_json(sweep / name / records.STATUS)
        status["code_under_test"] = {"repository": "/home/runner/work/lib/lib", "commit": "abc", "dirty": False}
        status["ci"] = {"provider": "github", "branch": "main", "repository": "me/lib"}
        records.write_json(sweep / name / records.STATUS, status)
    (found, *_) = exported(str(sweep.parent), "--format", "pytorch-v3")
    tested = found["dependencies"]["code_under_test"]
    assert (tested["repo"], tested["branch"], tested["sha"]) == ("me/lib", "main", "abc")
    for ci, repo in (
        ({"repository": "https://user:token@git.example.com/me/lib.git", "commit": "abc"}, "me/lib"),
        ({"repository": "git@github.com:me/lib.git"}, "me/lib"),
        ({"repository": "group/sub/lib", "commit": "abc"}, "group/sub/lib"),  # GitLab's nested groups
        ({"repository": "https://github.com/me/lib/"}, "me/lib"),
        ({"repository": "me/bench", "commit": "fff"}, "/home/runner/work/lib/lib"),  # the CI's checkout is another
    ):
        for name in ("t1", "t2", "s1"):
            status = records.read_json(sweep / name / records.STATUS)
            records.write_json(sweep / name / records.STATUS, status | {"ci": ci})
        (found, *_) = exported(str(sweep.parent), "--format", "pytorch-v3")
        assert found["dependencies"]["code_under_test"]["repo"] == repo


def test_pytorch_v3_names_perfsweep_s_own_commit_which_measured_every_run(sweep):
    """A sweep of perfsweep's own model names no code under test: its figures still come of one perfsweep commit."""
    for name in ("t1", "t2", "s1"):
        own = {"commit": "0123abcd" * 5, "dirty": True, "source": "/src/perfsweep"}
        records.write_json(sweep / name / records.ENV, {"code": own, "packages": {"torch": "2.14.1"}})
    (found, *_) = exported(str(sweep.parent), "--format", "pytorch-v3")
    assert found["dependencies"]["perfsweep"] == {"repo": "perfsweep", "sha": "0123abcd" * 5, "version": "dirty"}


def test_a_workload_without_a_model_names_no_size(sweep):
    """A function benchmark's config carries the default model group, which it never reads."""
    for name in ("t1", "t2", "s1"):
        config = records.read_json(sweep / name / records.CONFIG)
        config["axes"] = {k: v for k, v in config["axes"].items() if k != "model"}
        config["axis_order"] = [a for a in config["axis_order"] if a != "model"]
        records.write_json(sweep / name / records.CONFIG, config)
    names = exported(str(sweep), "--format", "bmf")
    assert names and not any("batch_size" in name or "image_size" in name for name in names), list(names)
    v3 = exported(str(sweep), "--format", "pytorch-v3")
    assert not any("model.batch_size" in r["model"]["extra_info"] for r in v3)


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"model": {"kwargs": {"width": 64}}}, "model.kwargs.width=64"),
        ({"workload": {"name": "infer_step"}}, "workload.name=infer_step"),
        (
            {"workload": {"name": "Step", "_target_": "lib.Step"}, "model": {"kwargs": {"width": 8}}},
            "model.kwargs.width=8",
        ),
    ],
    ids=["model-width", "inference", "own-step"],
)
def test_two_sweeps_of_one_sweep_file_at_two_widths_or_workloads_are_two_series(sweep, changed, named):
    """One sweep holds a constructor argument, or the inference step, constant: a dashboard must not merge it."""
    other = sweep.with_name("commit-fedcba987654")
    shutil.copytree(sweep, other)
    for name in ("t1", "t2", "s1"):
        config = records.read_json(other / name / records.CONFIG)
        for group, values in changed.items():
            config["config"][group] = config["config"].get(group, {}) | values
        records.write_json(other / name / records.CONFIG, config)
    names = exported(str(sweep.parent), "--format", "bmf")
    axes = "model=resnet18 memory_format=contiguous precision=fp32 input_type=tensor compile=eager"
    assert f"mine/{axes} model.batch_size=16 model.image_size=32 {named}" in names, list(names)
    assert f"mine/{axes} model.batch_size=16 model.image_size=32" in names, "the other sweep's series keeps its name"
