"""explain=true: each run's operators counted after its window, and each decided difference accounted for by them."""

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from perfsweep import records
from perfsweep.analysis.groups import speedups
from perfsweep.analysis.render import text
from perfsweep.analysis.timeline import sweep_folders
from perfsweep.analysis.views import explain
from perfsweep.analysis.views.report import EXPLAIN_SECTION, outline, wandb_report_content
from perfsweep.commands.explain import other_code, unfinished, words_changed
from perfsweep.records import lifecycle, load_sweep
from perfsweep.sweeps.pairing import groups
from perfsweep.train import instrumented as train_run
from tests import synthetic
from tests.helpers import launch_here

TINY = ["model=tiny_cnn", "model.image_size=32", "model.batch_size=4", "memory_format=contiguous", "steps=4"]
TINY += ["warmup_steps=1", "tracker.mode=disabled", "launcher=debug", "explain=true"]


def ops_by_input(sweep) -> dict[str, dict]:
    return {run.axes["input_type"]: records.read_json(run.path / records.OPS) for run in load_sweep(sweep)}


def test_a_subclass_s_run_records_the_calls_it_dispatches_and_the_operators_it_adds(tmp_path):
    done = launch_here(*TINY, "input_type=tensor,subclass", "repeats=1", f"runs_dir={tmp_path}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ops = ops_by_input(tmp_path / "default")
    assert ops["tensor"]["subclass_calls"] == {} and ops["subclass"]["subclass_calls"]["SubClassedTensor"] > 10
    assert "aten::alias" not in ops["tensor"]["operators"], "a plain Tensor's step makes no alias"
    assert ops["subclass"]["operators"]["aten::alias"]["calls"] >= 10, "each call's result is re-wrapped"
    for record in ops.values():
        assert record["steps"] == 3 and set(record["phases"]) == {"data", "forward", "backward", "optimizer"}
        assert record["phases"]["forward"]["net_allocated_mib"] is not None, "a CPU's memory: the profiler's"
        assert record["phases"]["forward"]["peak_allocated_mib"] is None, "a peak needs CUDA's allocator"
    (run,) = [r for r in load_sweep(tmp_path / "default") if r.axes["input_type"] == "subclass"]
    assert (run.path / records.PROFILE).stat().st_size > 1000, "the Chrome trace, kept for Perfetto"
    assert "explanation" in done.stdout, "the progress line says what the profiled window cost"
    assert run.summary.phase_memory_kind == "profiler_net_allocated", "a CPU's: no allocator to read a peak from"
    assert set(run.summary.phase_memory_mib) == {"data", "forward", "backward", "optimizer"}
    assert "MiB by phase (net on a CPU)" in done.stdout, "the table shows it"
    shown = launch_here("explain", str(tmp_path / "default"))
    assert shown.returncode == 0
    assert "Explain: subclass vs tensor: no decided difference (one run a side): nothing explained" in shown.stdout


def test_the_sampler_s_nonzero_is_named_as_the_host_read_the_static_sampler_does_without(tmp_path):
    sweep = ["workload=sampler", "workload.impl=nonzero,static", "workload.size=1000", "workload.batch=1"]
    args = [*sweep, "steps=4", "warmup_steps=1", "repeats=1", "tracker.mode=disabled", "launcher=debug"]
    done = launch_here(*args, "explain=true", f"runs_dir={tmp_path}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ops = {run.axes["impl"]: records.read_json(run.path / records.OPS) for run in load_sweep(tmp_path / "default")}
    assert ops["nonzero"]["host_reads"].get("nonzero", 0) >= 1, ops["nonzero"]["host_reads"]
    assert "nonzero" not in ops["static"]["host_reads"]
    assert any("nonzero" in name for name in ops["nonzero"]["operators"])
    places = list(ops["nonzero"]["host_read_places"])
    assert places and all("train/functions/" in place for place in places), places


def test_a_profiler_that_fails_leaves_the_run_done_and_says_why(tmp_path, monkeypatch):
    def broken(*args, **kwargs):  # stands in for a profiler that cannot start (another one active, a kineto error)
        raise RuntimeError("the profiler cannot start here")

    monkeypatch.setattr(torch.profiler, "profile", broken)
    done = launch_here(*TINY, "input_type=tensor", "repeats=1", f"runs_dir={tmp_path}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = load_sweep(tmp_path / "default")
    assert run.state == records.DONE and run.summary.median("step") > 0, "the measured records are whole"
    assert records.read_json(run.path / records.OPS) == {"error": "RuntimeError: the profiler cannot start here"}
    shown = launch_here("explain", str(tmp_path / "default"))
    said = f"nothing to explain: {run.name}: its profiled window failed: RuntimeError: the profiler cannot start here"
    assert shown.returncode == 2 and said in shown.stderr


def ops_record(alias_calls: float, outside_ms: float, rng) -> dict:
    """An ops record as train/op_breakdown.py writes it: a convolution, and a subclass's aliases where it has them."""
    operators = {"aten::convolution": {"calls": 20.0, "self_cpu_us": 5000.0 * rng.uniform(0.95, 1.05)}}
    if alias_calls:
        operators["aten::alias"] = {"calls": alias_calls, "self_cpu_us": 10.0 * alias_calls}
    phase = {"cpu_us": 9000.0 + outside_ms * 1e3, "outside_operators_us": outside_ms * 1e3, "net_allocated_mib": 6.0}
    subclass = {"Sub": 92} if alias_calls else {}
    return {
        "steps": 3, "device": "cpu", "operators": {k: {**v, "self_device_us": 0.0} for k, v in operators.items()},
        "phases": {"forward": phase}, "torch_calls": 600, "subclass_calls": subclass, "host_reads": {}, "dynamo": None,
    }  # fmt: skip


def explained_sweep(tmp_path, slowdown: float, record=None, paired: bool = False) -> list:
    """Synthetic runs of a Tensor and a subclass `slowdown` times as slow, each with its ops record on disk.

    `record(subclass, rng)` makes a run's ops record where given.
    `paired`: the sides of a round share a process, whose offset is wide and each side's own is not."""
    rng = np.random.default_rng(0)
    levels = {("tensor", "contiguous"): 20.0, ("subclass", "contiguous"): 20.0 * slowdown}
    noise = synthetic.Noise(bimodal=0.0, run_sd=0.3, side_sd=0.05) if paired else synthetic.Noise(bimodal=0.0)
    runs = synthetic.sweep(levels, 4, noise, rng, paired=paired)
    placed = []
    for run in runs:
        folder = tmp_path / run.name
        folder.mkdir(parents=True)
        subclass = run.axes["input_type"] == "subclass"
        outside = 4.0 + (3.0 if subclass and slowdown > 1 else 0.0) + rng.normal(0, 0.1)
        made = record(subclass, rng) if record else ops_record(47.0 if subclass else 0.0, outside, rng)
        records.write_json(folder / records.OPS, made)
        placed.append(dataclasses.replace(run, path=folder))
    return placed


def test_a_decided_slowdown_is_ranked_by_operator_with_its_counts_and_the_part_left_unexplained(tmp_path):
    (view,) = explain.views(tmp_path, explained_sweep(tmp_path, slowdown=1.3))
    shown = text(view)
    said = "Explain: subclass vs tensor: slower, by operator (medians over each side's 4 and 4 runs, on CPU synthetic, "
    assert shown.startswith(said + "threads ?, torch synthetic)"), "and the machine they were measured on"
    rows = {row[0]: row for row in view.rows}
    assert float(rows["outside operators (forward)"][4]) == pytest.approx(3.0, abs=0.3)
    assert rows["aten::alias"][1:3] == ["added", "0 -> 47"], "the count is the finding, though its time is small"
    assert view.items[0].name == "outside operators (forward)", "ranked by time: the Python between operators first"
    assert "torch calls through a subclass's __torch_function__, per step: Sub 92 (baseline: none)" in shown
    assert "unexplained" in shown and "memory by phase, MiB allocated net (profiler)" in shown
    totals = re.search(
        r"host time \(each row's median, summed\), baseline -> this: ([\d.]+) ms \(\d+% outside operators\) -> "
        r"([\d.]+) ms \(",
        shown,
    )
    profiled = float(re.search(r"([+-][\d.]+) ms/step in the profiled steps", shown)[1])
    assert float(totals[2]) - float(totals[1]) == pytest.approx(profiled, abs=0.06), (
        "one profiled difference, said twice"
    )
    assert "which 4 and 4 runs do by chance in 3% of rows that did not change (about 0.1 of these 3, more" in shown


def test_a_profile_that_does_not_show_the_measured_difference_says_so_first(tmp_path):
    """The subclass measured 1.3x slower, but its profiled steps ran 3 ms faster outside operators."""

    def faster_in_the_profile(subclass, rng):
        return ops_record(0.0, 4.0 if subclass else 7.0, rng)

    (view,) = explain.views(tmp_path, explained_sweep(tmp_path, slowdown=1.3, record=faster_in_the_profile))
    assert view.above[1].startswith("the profiled steps do not show the measured difference: +6.9 ms/step measured")
    assert "(host time); the rows account for the profile, not for the table's difference" in view.above[1]
    (agreed,) = explain.views(tmp_path / "agreed", explained_sweep(tmp_path / "agreed", slowdown=1.3))
    assert not any("do not show" in line or "times the measured" in line for line in agreed.above)

    def a_third_in_the_profile(subclass, rng):  # the profile shows about 2.2 of the measured 6.9 ms
        return ops_record(0.0, 6.2 if subclass else 4.0, rng)

    (third,) = explain.views(tmp_path / "third", explained_sweep(tmp_path / "third", 1.3, a_third_in_the_profile))
    assert third.above[1].startswith("the profiled steps do not show the measured difference: +6.9 ms/step measured")
    assert re.search(r"ms/step in the profiled steps \(host time, 3\d% of the measured\)", "\n".join(third.above))

    def slowed_by_the_profiler(subclass, rng):  # its many small calls cost the profiler more than they cost
        return ops_record(0.0, 24.0 if subclass else 4.0, rng)

    (inflated,) = explain.views(
        tmp_path / "inflated", explained_sweep(tmp_path / "inflated", 1.3, slowed_by_the_profiler)
    )
    assert inflated.above[1].startswith(
        "the profiled steps show 2.9 times the measured difference (+19.9 ms/step profiled, +6.9 measured)"
    )

    def alike_on_the_device(subclass, rng):
        return gpu_ops_record(False, rng)

    (host,) = explain.views(tmp_path / "gpu", explained_sweep(tmp_path / "gpu", 1.3, record=alike_on_the_device))
    assert "(device time)" in host.above[1] and "a difference on the host (Python, kernel launches)" in host.above[1]


# Kernels as an H200's profiler named them in the seeds' ResNet50 step (results/nvidia-h200-torch2.11.0/state).
BATCHNORM = (
    "void cudnn::batchnorm_bwtr_nhwc_semiPersist<__half, float, __half, 512, 16, 3, 4, 1, {}, true, 2>"
    "(cudnn::NhwcBatchNormBwdParams<__half, float>)"
)
FILL = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::Half>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<c10::Half>, std::array<char*, 1ul>)"
)
ADD = (
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add"
    "<c10::Half> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::Half> const&)::{lambda(int)#1}>"
    "(int, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::Half> >(at::TensorIteratorBase&, "
    "at::native::CUDAFunctor_add<c10::Half> const&)::{lambda(int)#1})"
)


def gpu_ops_record(subclass: bool, rng) -> dict:
    """A GPU step's ops record: two batch norms' kernels that differ in one template argument, a fill that the
    subclass calls more often, and an addition that it adds."""
    calls = {BATCHNORM.format(0): (16, 400.0), BATCHNORM.format(1): (16, 300.0), FILL: (51 if subclass else 2, 20.0)}
    if subclass:
        calls[ADD] = (12, 1700.0)
    operators = {
        name: {"calls": float(n), "self_cpu_us": 0.0, "self_device_us": us * (n / 16) * rng.uniform(0.98, 1.02)}
        for name, (n, us) in calls.items()
    }
    return {
        "steps": 3, "device": "cuda", "operators": operators, "phases": {}, "torch_calls": 600,
        "subclass_calls": {"Sub": 233} if subclass else {}, "host_reads": {}, "dynamo": None,
    }  # fmt: skip


def test_a_gpu_comparison_names_each_kernel_short_and_tells_apart_those_that_shorten_alike(tmp_path):
    (view,) = explain.views(tmp_path, explained_sweep(tmp_path, slowdown=1.3, record=gpu_ops_record))
    names = [row[0] for row in view.rows]
    assert names[0] == "elementwise_kernel<CUDAFunctor_add, Half>", "the added kernel, ranked first by its time"
    assert "vectorized_elementwise_kernel<FillFunctor, Half>" in names
    assert sorted(n for n in names if n.startswith("batchnorm")) == [
        "batchnorm_bwtr_nhwc_semiPersist<Half> #1",
        "batchnorm_bwtr_nhwc_semiPersist<Half> #2",
    ], "two kernels whose names differ in one template argument stay two rows a reader tells apart"
    assert all(len(name) <= 60 for name in names)
    assert "each kernel's whole name" in text(view)


def test_a_kernel_behind_a_return_type_or_a_generic_name_is_named_by_what_it_runs():
    """cuBLAS's and CUTLASS's kernels as a profiler names them: a return type before the name, or a name that only its
    namespace or its template argument tells apart."""
    from perfsweep.analysis.kernel_names import short_name

    gemv = (
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __half, __half, float, false, true, "
        "true, false, 7, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__half const>, "
        "cublasGemvTensorStridedBatched<__half>, float> >(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched"
        "<__half const>, cublasGemvTensorStridedBatched<__half>, float>)"
    )
    gemm = "cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8"
    assert short_name(gemv) == "gemvx::kernel<Half>", "the data's type before an index's"
    assert short_name(f"void cutlass::Kernel2<{gemm}>({gemm}::Params)") == f"Kernel2<{gemm}>"


def test_a_comparison_not_decided_explains_nothing(tmp_path):
    (view,) = explain.views(tmp_path, explained_sweep(tmp_path, slowdown=1.0))
    assert view.rows == [] and "nothing explained" in text(view)
    assert "no decided difference (" in text(view)
    assert "more runs a side may decide it: launch its sweep with explain=true repeats=auto" in text(view)


def test_the_ranked_rows_go_to_w_and_b_as_one_table_and_the_report_gets_its_section(tmp_path):
    shown = explain.views(tmp_path, explained_sweep(tmp_path, slowdown=1.3))
    header, rows = explain.table(shown)
    assert header[:2] == ["comparison", "difference"] and {row[0] for row in rows} == {"subclass vs tensor"}
    assert len(rows) == len(shown[0].rows)
    assert header[-1] == "account" and all(row[-1] == "; ".join(shown[0].above[1:]) for row in rows)
    assert " ms/step measured (the baseline's " in rows[0][-1], "what the rows account for goes with them"
    said = outline(wandb_report_content("s", "s-ab12cd34", "perfsweep", "team", ["forward"], explained=True))
    assert f"## {EXPLAIN_SECTION}\n  runs: Metric('Group') == 's-ab12cd34'\n  table panel: explain" in said
    assert EXPLAIN_SECTION not in outline(wandb_report_content("s", "s-ab12cd34", "perfsweep", "team", ["forward"]))
    assert explain.table(explain.views(tmp_path, explained_sweep(tmp_path / "same", slowdown=1.0))) == ([], [])


def test_the_run_s_time_limit_stops_its_profiled_window_as_it_stops_the_rest(tmp_path):
    def past_the_limit(index, clock):  # what the run's interval timer raises in whatever the run is doing
        raise records.Stopped("RunTimeout")

    work = SimpleNamespace(phases=("forward",), step=past_the_limit, cfg=None)  # a workload that reached its limit
    measured = SimpleNamespace(work=work, after=4)
    with pytest.raises(records.Stopped):
        train_run.record_ops(measured, torch.device("cpu"), tmp_path)


def test_explain_on_a_sweep_run_without_it_launches_the_sweep_again_with_it_inside_the_first(tmp_path, monkeypatch):
    plain = [arg for arg in TINY if arg != "explain=true"]
    assert launch_here(*plain, "input_type=tensor,subclass", "repeats=1", f"runs_dir={tmp_path}").returncode == 0
    assert launch_here("resume", str(tmp_path / "default")).returncode == 0, "a resume is no launch to run again"
    monkeypatch.chdir(tmp_path / "default")
    shown = launch_here("explain", ".")
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    again = tmp_path / "default" / "default-explain"
    said = f"its launch runs again with explain=true into {again}: 2 runs, which took [\\d.]+ (s|min) the first time;"
    assert re.search(said, shown.stdout), shown.stdout
    assert sweep_folders([tmp_path]) == [tmp_path / "default"], "no sweep of the runs folder: history leaves it out"
    assert "Explain: subclass vs tensor: " in shown.stdout, "the launch's views, the explanations among them"
    assert all((run.path / records.OPS).is_file() for run in load_sweep(again)) and len(load_sweep(again)) == 2
    assert not any((run.path / records.OPS).exists() for run in load_sweep(tmp_path / "default")), "untouched"
    later = launch_here("explain", str(tmp_path / "default"))
    said = f"from {again}, default's launch again with explain=true: its words and times are its own runs', which "
    said += f"`perfsweep table {again}` shows, not default's:\nExplain: subclass vs"
    assert later.stdout.startswith(said), later.stdout


def test_explain_does_not_take_a_folder_in_the_sweep_that_another_launch_made(tmp_path):
    fast = ["workload=pairwise_sum_prod", "workload.impl=broadcast,loop", "workload.size=10", "steps=3"]
    fast += ["warmup_steps=1", "repeats=1"]
    fast += ["tracker.mode=disabled", "launcher=debug"]
    assert launch_here(*fast, f"runs_dir={tmp_path}").returncode == 0
    inside = [f"runs_dir={tmp_path / 'default'}", "sweep_name=default-explain"]
    assert launch_here(*fast, "explain=true", "steps=4", *inside).returncode == 0
    refused = launch_here("explain", str(tmp_path / "default"))
    assert refused.returncode == 2 and "holds another launch than default's with explain=true" in refused.stderr


def test_explain_of_a_sweep_another_command_launched_says_how_to_launch_it_with_explain(tmp_path):
    """A bisect's point: its launch's words are the bisect's, not a sweep's overrides."""
    fast = ["workload=pairwise_sum_prod", "workload.impl=broadcast,loop", "workload.size=10", "steps=3"]
    fast += ["warmup_steps=1", "repeats=1"]
    assert launch_here(*fast, "tracker.mode=disabled", "launcher=debug", f"runs_dir={tmp_path}").returncode == 0
    manifest = records.read_manifest(tmp_path / "default")
    manifest["launches"][-1]["argv"] = ["bisect", "--git", "v1", "main", "--repo", ".", "sweep=mine"]
    records.write_json(tmp_path / "default" / records.SWEEP, manifest)
    refused = launch_here("explain", str(tmp_path / "default"))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "bisect` launched it, and explain launches again only a sweep's own overrides" in refused.stderr
    assert "env.repo=REPO +env.packages.PACKAGE=GOOD,BAD explain=true" in refused.stderr
    assert not (tmp_path / "default" / "default-explain").exists()


def test_explain_of_a_sweep_without_a_comparison_is_refused_before_anything_runs_again(tmp_path):
    """One configuration: its launch again with explain=true would explain nothing either."""
    fast = ["workload=pairwise_sum_prod", "workload.impl=loop", "workload.size=10", "steps=3", "warmup_steps=1"]
    launched = launch_here(*fast, "repeats=1", "tracker.mode=disabled", "launcher=debug", f"runs_dir={tmp_path}")
    assert launched.returncode == 0, launched.stderr
    refused = launch_here("explain", str(tmp_path / "default"))
    assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "nothing to explain: its runs have no baseline to compare with" in refused.stderr
    assert not (tmp_path / "default" / "default-explain").exists()
    both = [*fast, "workload.impl=broadcast,loop", "repeats=1", "tracker.mode=disabled", "launcher=debug"]
    assert launch_here(*both, "sweep_name=both", f"runs_dir={tmp_path}").returncode == 0
    loop = next(r.path for r in load_sweep(tmp_path / "both") if r.axes["impl"] == "loop")
    lifecycle.fail(loop, records.RunError("out of memory"))
    again = launch_here("explain", str(tmp_path / "both"))
    assert "its launch runs again with explain=true" in again.stdout, "it plans both sides, the failed one's too"


def test_explain_of_a_sweep_without_a_done_run_is_refused_before_anything_runs_again(tmp_path):
    """Its budget stopped every run: it decided nothing, and its launch again would meet the same budget."""
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(0))
    sweep_dir = synthetic.write(runs, tmp_path / "cut")
    for run in runs:
        lifecycle.stop(sweep_dir / run.name, records.BUDGET, "launcher.budget_s: the launch's budget ran out")
    refused = launch_here("explain", str(sweep_dir))
    assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
    said = f"{sweep_dir}: no run of it is done, so it decided nothing to explain: `perfsweep resume {sweep_dir} "
    assert said + "launcher.budget_s=null` runs them, then explain" in refused.stderr, refused.stderr
    assert not (sweep_dir / "cut-explain").exists()
    for run in runs:
        lifecycle.fail(sweep_dir / run.name, records.RunError("RuntimeError", "out of memory"))
    failed = launch_here("explain", str(sweep_dir))
    assert failed.returncode == 2 and "its runs failed (" in failed.stderr and "out of memory" in failed.stderr


def test_a_launch_again_of_other_code_says_its_explanations_are_of_that_code(tmp_path):
    """The user's model changed since the sweep ran: explain's launch again measured the new one."""

    def measured(files: str) -> list:
        runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), np.random.default_rng(0))
        code = {"mynet": files * 12, "perfsweep": "c" * 12}
        return [dataclasses.replace(r, status=dataclasses.replace(r.status, code=code)) for r in runs]

    sweep, again = tmp_path / "before", tmp_path / "before" / "before-explain"
    (said,) = other_code(sweep, measured("a"), again, measured("b"))
    assert "before-explain measured other code than before: mynet files aaaaaaaa -> bbbbbbbb. Its explanations" in said
    assert f"check its code out, move {again} away, and explain again" in said
    assert other_code(sweep, measured("a"), again, measured("a")) == []


def test_a_launch_again_that_decides_otherwise_says_so(tmp_path):
    """The sweep found the subclass 30% slower; its profiled launch again did not decide it: its words are its own.
    A launch again that decides nothing is not said to decide otherwise."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    slower = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 3, steady, np.random.default_rng(0))
    alike = synthetic.sweep(synthetic.grid(), 3, steady, np.random.default_rng(1))
    sweep, again = tmp_path / "before", tmp_path / "before" / "before-explain"
    (said,) = words_changed(sweep, slower, again, alike)
    assert "before-explain decided otherwise than before: tensorbase vs tensor (undetermined -> same). " in said
    assert "before-explain left undecided what before decided: subclass vs tensor (slower -> undetermined)" in said
    assert words_changed(sweep, slower, again, slower) == []
    once = synthetic.sweep(synthetic.grid(), 1, steady, np.random.default_rng(1))
    (said,) = words_changed(sweep, slower, again, once)
    assert "before-explain left undecided what before decided: subclass vs tensor (slower -> one run a side)" in said
    assert "decided otherwise" not in said, "one run a side decides nothing"


def test_explain_of_a_sweep_with_runs_not_done_says_so_and_how_to_run_them(tmp_path):
    """A launch stopped part-way leaves some runs pending: the views rest on the done ones, and say so."""
    runs = explained_sweep(tmp_path, slowdown=1.3)
    runs[-1] = dataclasses.replace(runs[-1], status=dataclasses.replace(runs[-1].status, state=records.PENDING))
    (said,) = unfinished(tmp_path, runs)
    assert "1 run of the sweep's 8 not done (1 pending): the views rest on the done ones; " in said
    assert said.rstrip().endswith(f"resume {tmp_path}` runs them")
    assert unfinished(tmp_path, runs[:-1]) == []


def test_a_paired_sweep_profiles_each_side_first_in_as_many_rounds(tiny_plan, tmp_path, monkeypatch):
    """The first side's counts and profile follow the window at once: each side goes first in one of two rounds."""
    plan = tiny_plan("input_type=tensor,subclass", "memory_format=contiguous", "steps=2", "warmup_steps=1",
                     "repeats=2", "pairing=auto", "explain=true")  # fmt: skip
    profiled, record_ops = [], train_run.record_ops

    def recorded(measured, device, run_dir):
        profiled.append(run_dir)
        return record_ops(measured, device, run_dir)

    monkeypatch.setattr(train_run, "record_ops", recorded)
    first = []
    for group in groups(list(plan.runs)):  # a process a round, as a launch runs them
        sides = [(spec, tmp_path / spec.name, f"id-{spec.name}") for spec in group.runs]
        train_run.execute_sides(sides, {})
        first += [spec.axes["input_type"] for spec, folder, _ in sides if folder == profiled[-2]]
    assert sorted(first) == ["subclass", "tensor"], first


def test_the_measured_difference_is_the_one_behind_the_table_s_speed_up(tmp_path):
    """Sides that shared processes: the table's speed-up is their paired ratio, which the medians' ratio is not."""
    runs = explained_sweep(tmp_path, slowdown=1.3, paired=True)
    ((versus, speedup),) = speedups(runs)
    base_ms, config_ms = versus.base.median("step"), versus.config.median("step")
    table_s = base_ms / speedup.value - base_ms
    assert abs(table_s - (config_ms - base_ms)) > 0.05, "a sweep where the two differ (by 2%)"
    (view,) = explain.views(tmp_path, runs)
    how = rf"the baseline's {base_ms:.3g} ms divided by the table's speed-up, {speedup}"
    said = re.search(rf"step time: ([+-][\d.e-]+) ms/step measured \({re.escape(how)}\)", text(view))
    assert said and float(said[1]) == pytest.approx(table_s, rel=0.01), text(view)
