"""scripts/gpu-check plans every GPU stage on any machine: the dry run composes and checks each sweep with
device=cuda, prints each step's command and an estimate, and runs nothing (the stages themselves need a GPU)."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from perfsweep import records
from perfsweep.gpu import check as gpu_check
from perfsweep.gpu import handover
from perfsweep.records import code as records_code
from tests.helpers import ROOT, wait_for


@pytest.mark.slow
def test_the_dry_run_plans_every_stage_and_runs_nothing(tmp_path):
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check"), "all", "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("stage ")] == [
        f"stage {stage}" for stage in gpu_check.STAGES
    ]
    for sweep in gpu_check.SEED_SWEEPS + gpu_check.TIMM_SWEEPS:
        assert f"launch.py sweep={sweep} steps=30 warmup_steps=20" in out and "device=cuda" in out
    assert "-m pytest -m gpu" in out and "perfsweep.bench.overhead --synced" in out
    assert re.search(r"launch.py sweep=dist_scaling dist.world_size=1[,\d]* launcher.gpus_per_node=", out), "NCCL"
    assert re.search(r"-m perfsweep.bench.syncs .* dist=ddp,fsdp dist.world_size=1", out), (
        "what DDP and FSDP add, counted"
    )
    compiled = [line.split(" (")[0].strip() for line in out.splitlines() if line.startswith("  compile-")]
    assert compiled == [f"compile-{mode}" for mode in gpu_check.COMPILE_MODES] + ["compile-table"]
    assert compiled[-2] == "compile-max_autotune" and out.count("sweep_name=compile_modes") == len(compiled) - 1
    assert "nothing stops the stages; nothing was run" in out
    assert not (ROOT / "results" / "GPU-torchVERSION").exists() and not list(tmp_path.iterdir())


def test_a_stage_that_a_check_stops_is_reported():
    bad = gpu_check.Step("bad", ["true"], sweep=["sweep=subclass_gpu", "input_type=nosuch", "device=cuda"])
    seconds, notes = gpu_check.plan_step(bad)
    assert seconds == 0 and any("input_type/nosuch" in note for note in notes)


@pytest.mark.slow
def test_a_stage_ends_a_hung_step_with_all_it_started_and_keeps_its_summary(tmp_path):
    marker = tmp_path / "grandchild-alive"
    # the step starts a grandchild (as a launch starts its jobs) that would write the marker after 4 s, and says its pid
    hung = gpu_check.Step("hung", ["bash", "-c", f"(sleep 4; touch {marker}) & echo started $!; sleep 60"])
    table = "echo 'SHARED GPU r1: other processes on its GPU: x'; echo 'NOISY r2: robust CV 11%'; echo 'NOISY r3: y'"
    table += "; echo 'NOISY 4 of 9 runs: robust CV 11%-20% > 10%'"
    tabled = gpu_check.Step("tabled", ["echo", "what finished"], tables=True)
    steps = [gpu_check.Step("quick", ["bash", "-c", table]), hung, gpu_check.Step("after", ["true"]), tabled]
    code = gpu_check.run_steps("check", steps, tmp_path, limit_s=2)
    assert code == 1
    summary = (tmp_path / "summary.md").read_text()
    rows = {line.split(" | ")[0].strip("| "): line for line in summary.splitlines() if line.startswith("| ")}
    assert (
        "passed; flagged: 1 SHARED GPU, 6 NOISY" in rows["quick"] and "stopped at the stage's 2 s limit" in rows["hung"]
    )
    assert "not run: the stage's 2 s were spent" in rows["after"]
    assert "| passed |" in rows["tabled"], "a table of what finished runs after the limit"
    assert "what finished" in (tmp_path / "tabled.txt").read_text()
    assert f"- perfsweep: {records_code.git_commit()['commit']}" in summary
    assert "started" in (tmp_path / "hung.txt").read_text() and "SHARED GPU r1" in (tmp_path / "quick.txt").read_text()
    grandchild = int(re.search(r"^started (\d+)$", (tmp_path / "hung.txt").read_text(), re.MULTILINE)[1])
    wait_for(lambda: not running(grandchild), "the hung step's grandchild to end with the stage", timeout=10)
    assert not marker.exists()


def running(pid: int) -> bool:
    """Whether process `pid` runs: it exists and is not a zombie that waits for its parent to read its end."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_resume_keeps_the_steps_that_passed_and_runs_the_others(tmp_path):
    broken = gpu_check.Step("bad", ["bash", "-c", "echo broken >&2; exit 3"])
    first = [gpu_check.Step("ok", ["true"]), broken, gpu_check.Step("later", ["true"])]
    assert gpu_check.run_steps("check", first, tmp_path, limit_s=60) == 1
    assert "| bad | failed (3): broken |" in (tmp_path / "summary.md").read_text()
    kept = gpu_check.passed_before(tmp_path)
    assert list(kept) == ["ok", "later"]
    # run again, "ok" and "later" would now fail: they are kept, not run; "bad" is run again and passes
    again = [gpu_check.Step("ok", ["false"]), gpu_check.Step("bad", ["true"]), gpu_check.Step("later", ["false"])]
    assert gpu_check.run_steps("check", again, tmp_path, limit_s=60, kept=kept) == 0
    steps = gpu_check.read_summary(tmp_path).steps
    assert steps == [kept["ok"], steps[1], kept["later"]] and steps[1].command == ["true"]
    summary = (tmp_path / "summary.md").read_text()
    assert "| ok | passed |" in summary and "| bad | passed |" in summary and "failed" not in summary


def test_a_stages_summary_is_a_json_record_that_resume_reads_and_its_markdown_is_rendered_from_it(tmp_path):
    broken = gpu_check.Step("bad", ["bash", "-c", "echo broken >&2; exit 3"])
    assert gpu_check.run_steps("check", [gpu_check.Step("ok", ["true"]), broken], tmp_path, limit_s=60) == 1
    record = json.loads((tmp_path / "summary.json").read_text())
    assert record["stage"] == "check" and record["machine"]["torch"] == torch.__version__
    assert record["perfsweep"].startswith(records_code.git_commit()["commit"])
    assert [(s["name"], s["result"], s["passed"], s["command"]) for s in record["steps"]] == [
        ("ok", "passed", True, ["true"]),
        ("bad", "failed (3): broken", False, broken.command),
    ]
    summary = gpu_check.read_summary(tmp_path)
    assert (tmp_path / "summary.md").read_text() == gpu_check.render_summary(summary)
    # --resume reads the record, not the markdown a reader may edit
    (tmp_path / "summary.md").write_text("| bad | passed | 1 | `true` |\n")
    assert gpu_check.passed_before(tmp_path) == {"ok": summary.steps[0]}
    # a folder with only an older gpu-check's summary.md has nothing passed to keep
    (tmp_path / "summary.json").unlink()
    assert gpu_check.passed_before(tmp_path) == {}


def test_summary_md_keeps_the_look_of_the_tables_in_results():
    ran = gpu_check.StepResult("pytest-gpu", "passed", True, 104.4, ["python3", "-m", "pytest", "-m", "gpu"])
    skipped = gpu_check.StepResult("syncs", "not run: not asked for (--step)", False, 0.0, ["python3", "a b"])
    machine = {"torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": "91900", "gpu": "NVIDIA H100", "driver": "580.1"}
    pins = "torch 2.11.0+cu130 (perfsweep pins 2.14.1)"
    summary = gpu_check.Summary("tests", machine, pins, ["torch.x is missing"], "f663706", [ran, skipped])
    assert gpu_check.render_summary(summary) == GOLDEN_SUMMARY_MD


GOLDEN_SUMMARY_MD = """# gpu-check tests

- torch: 2.11.0+cu130
- cuda: 13.0
- cudnn: 91900
- gpu: NVIDIA H100
- driver: 580.1
- torch 2.11.0+cu130 (perfsweep pins 2.14.1)
- perfsweep: f663706
- torch.x is missing

| step | result | seconds | command |
|---|---|---|---|
| pytest-gpu | passed | 104 | `python3 -m pytest -m gpu` |
| syncs | not run: not asked for (--step) | 0 | `python3 'a b'` |
"""


def test_only_the_steps_asked_for_run_and_the_others_are_written_down(tmp_path, capsys):
    steps = [gpu_check.Step(name, ["bash", "-c", f"touch {tmp_path / name}"]) for name in ("a", "b", "c")]
    assert gpu_check.run_steps("check", steps, tmp_path, limit_s=60, only=["b"]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name in "abc"] == ["b"]
    rows = [line for line in (tmp_path / "summary.md").read_text().splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| a", "not run: not asked for (--step)"],
        ["| b", "passed"],
        ["| c", "not run: not asked for (--step)"],
    ]
    with pytest.raises(SystemExit) as refused:
        gpu_check.main(["compile", "--step", "compile-max_autotune", "nosuch"])
    said = capsys.readouterr().err
    assert refused.value.code == 2, "argparse's exit status for words it does not take"
    assert "--step nosuch: not a step of compile; its steps: compile-eager, compile-default" in said


def test_a_step_passes_or_fails_by_its_verdict_record_never_by_its_text(tmp_path, monkeypatch):
    ok = gpu_check.step_verdict(gpu_check.Step("ok", ["true"]), 0, "", limit_s=60)
    assert ok == gpu_check.Verdict(passed=True, stage="exited", exit_code=0, limit_s=60)
    broken = gpu_check.step_verdict(gpu_check.Step("bad", ["false"]), 3, "why\nbroken\n", limit_s=60)
    assert (broken.passed, broken.exit_code, broken.reason) == (False, 3, "broken")
    assert broken.render() == "failed (3): broken"
    # a sweep whose only failed runs are known torch issues passed, and its row names them
    sweep = gpu_check.Step("sweep", ["false"], sweep=["sweep=default"])
    monkeypatch.setattr(gpu_check, "failed_runs", lambda step: (["torch#1", "torch#1"], []))
    known = gpu_check.step_verdict(sweep, 1, "", limit_s=60)
    assert known.passed and known.known_issues == ("torch#1", "torch#1")
    assert known.render() == "passed; 2 runs failed on known issues (torch#1)"
    # a table of the sweeps before it, where a configuration has no figures: those steps judged its runs
    unmeasured = "perfsweep: 1 configuration of x without a done run, so without figures: compile=max-autotune\n"
    table = gpu_check.step_verdict(gpu_check.Step("compile-table", ["false"], tables=True), 1, unmeasured, 60)
    assert table.passed and table.reason.endswith("without figures: compile=max-autotune")
    crashed = (
        "perfsweep: an error it did not foresee ended it (exit status 70): ...\nTraceback (most recent call last):\n"
    )
    crashed += "KeyError: 'step_ms'\n"  # a table that crashed exits 70, its error last
    judged = gpu_check.step_verdict(gpu_check.Step("compile-table", ["false"], tables=True), 70, crashed, 60)
    assert not judged.passed and judged.reason == "KeyError: 'step_ms'", judged
    # text that reads "passed" does not pass a step that failed
    said = gpu_check.Verdict(passed=False, stage="exited", reason="passed", exit_code=2, limit_s=60)
    monkeypatch.setattr(gpu_check, "run_and_judge", lambda step, out, left, limit: (said, 0.0))
    assert gpu_check.run_steps("check", [gpu_check.Step("x", ["true"])], tmp_path, limit_s=60) == 1
    assert gpu_check.read_summary(tmp_path).steps[0].passed is False
    assert said.render() == "failed (2): passed"


def test_a_failed_pytest_step_is_summed_up_by_pytests_own_last_line(tmp_path):
    script = "print('3 failed, 50 passed in 80.0s'); import sys; print('a plugin warning', file=sys.stderr); exit(1)"
    tests = gpu_check.Step("tests", [sys.executable, "-c", script], says="stdout")
    assert gpu_check.run_steps("check", [tests], tmp_path, limit_s=60) == 1
    assert "| tests | failed (1): 3 failed, 50 passed in 80.0s |" in (tmp_path / "summary.md").read_text()


def test_what_this_torch_lacks_is_reported_with_the_torch_that_has_it(monkeypatch):
    line, missing = gpu_check.torch_report()
    assert line.startswith("torch ") and "perfsweep pins" in line and missing == []
    monkeypatch.setitem(gpu_check.NEEDS, "torch.cuda.not_yet_there", "9.1")
    assert gpu_check.torch_report()[1] == ["torch.cuda.not_yet_there is missing: it needs torch 9.1+"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_without_a_gpu_a_stage_refuses_to_run_rather_than_pass_on_skipped_tests(tmp_path):
    assert gpu_check.main(["tests", "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


def tiny_sweep(out):
    """A step that launches a two-run CPU sweep into out/runs, in seconds."""
    tiny = ["workload=pairwise_sum_prod", "workload.impl=broadcast,loop", "workload.size=10", "steps=3"]
    tiny += ["warmup_steps=1", "repeats=1", "tracker.mode=disabled", "launcher=debug", f"runs_dir={out / 'runs'}"]
    return gpu_check.Step("tiny", [sys.executable, "launch.py", *tiny], sweep=tiny)


@pytest.mark.slow
def test_a_stage_cut_short_goes_on_from_its_packed_records_on_another_machine(tmp_path):
    out = tmp_path / "stage"
    sweep = tiny_sweep(out)
    tiny = sweep.sweep
    assert gpu_check.run_steps("check", [sweep], out, limit_s=120) == 0
    first = {run.name: run.status.finished_at for run in records.load_sweep(gpu_check.build_plan(tiny).sweep_dir)}
    assert len(first) == 2
    # another machine: the folder comes back as the summary and the one packed file, and the stage goes on
    shutil.rmtree(out / "runs")
    (out / "tiny.txt").unlink()
    handover.unpack_records(out)
    names = {p.name for p in (out / "runs").rglob("*")}
    assert {"steps.parquet", "summary.json", "status.json"} <= names and not names & {".code", ".submitit", ".lock"}
    assert gpu_check.run_steps("check", [sweep], out, limit_s=120) == 0
    assert "2 runs were already done" in (out / "tiny.txt").read_text()
    again = records.load_sweep(gpu_check.build_plan(tiny).sweep_dir)
    assert {run.name: run.status.finished_at for run in again} == first, "finished runs are not run again"
    # a limit that came while the second run was running: the row says how far the sweep got
    shutil.rmtree(again[0].path)
    verdict = gpu_check.step_verdict(sweep, None, "", limit_s=20)
    assert not verdict.passed and verdict.stage == "stopped" and verdict.runs_ended == (1, 2)
    assert verdict.render() == "failed: stopped at the stage's 20 s limit after 1 of its 2 runs"


@pytest.mark.slow
def test_resume_runs_again_a_table_and_a_sweep_whose_records_are_gone(tmp_path, monkeypatch):
    out = tmp_path / "stage"
    sweep = tiny_sweep(out)
    tiny = sweep.sweep
    table = gpu_check.Step("table", ["bash", "-c", f"ls {out / 'runs'} > {tmp_path / 'tabled'}"], tables=True)
    monkeypatch.setattr(gpu_check, "stage_steps", lambda stage, out: [sweep, table])
    assert gpu_check.run_stage("check", out, limit_s=120) == 0
    (tmp_path / "tabled").unlink()
    launched = (out / "tiny.txt").stat().st_mtime_ns
    # the records come back from the packed file: the sweep's row stands; the table is made again
    shutil.rmtree(out / "runs")
    assert gpu_check.run_stage("check", out, limit_s=120, resume=True) == 0
    assert (out / "tiny.txt").stat().st_mtime_ns == launched, "the sweep was not launched again"
    assert (tmp_path / "tabled").is_file()
    # the records are gone for good: the sweep's row no longer stands, and its runs run again
    shutil.rmtree(out / "runs")
    (out / handover.RECORDS).unlink()
    assert gpu_check.run_stage("check", out, limit_s=120, resume=True) == 0
    assert "sweep " in (out / "tiny.txt").read_text() and (out / "tiny.txt").stat().st_mtime_ns != launched
    assert len(records.load_sweep(gpu_check.build_plan(tiny).sweep_dir)) == 2


# Inductor times kernels only on a GPU: the step writes what a max-autotune compile writes, through Inductor's own
# cache (the ops' timings) and where Inductor puts a Triton kernel's best config (beside its source in cache_dir()).
TIMES_KERNELS = """
import json, pathlib, time
from torch._inductor.codecache import PersistentCache
from torch._inductor.runtime.runtime_utils import cache_dir
PersistentCache().update_local_cache({"convolution": {"x64": {"highest": {"triton_conv_1": 0.021, "aten": 0.025}}}})
kernel = pathlib.Path(cache_dir()) / "ab" / "cabkernel.best_config"
kernel.parent.mkdir(parents=True, exist_ok=True)
kernel.write_text(json.dumps({"XBLOCK": 1024, "num_warps": 4}))
print("timed", cache_dir(), flush=True)
time.sleep(120)
"""
READS_TIMINGS = """
import json
from torch._inductor.codecache import PersistentCache
print(json.dumps(PersistentCache().get_local_cache()))
"""


@pytest.mark.slow
def test_a_compile_cut_short_goes_on_from_what_inductor_timed_on_another_machine(tmp_path, monkeypatch):
    out = tmp_path / "stage"
    tuning = gpu_check.Step("tune", [sys.executable, "-c", TIMES_KERNELS])
    assert gpu_check.run_steps("check", [tuning], out, limit_s=20) == 1
    row = next(line for line in (out / "summary.md").read_text().splitlines() if line.startswith("| tune "))
    assert "stopped at the stage's 20 s limit; Inductor's timings kept: 1 ops, 1 kernels |" in row
    assert f"timed {out / handover.INDUCTOR_CACHE}" in (out / "tune.txt").read_text(), "the step used the stage's cache"
    # another machine: the stage's folder comes back without its Inductor cache; the stage unpacks what was timed
    shutil.rmtree(out / handover.INDUCTOR_CACHE)
    reading = gpu_check.Step("read", [sys.executable, "-c", READS_TIMINGS])
    monkeypatch.setattr(gpu_check, "stage_steps", lambda stage, out: [reading])
    assert gpu_check.run_stage("check", out, limit_s=60) == 0
    read = (out / "read.txt").read_text()
    assert '"triton_conv_1": 0.021' in read, "Inductor reads the timings it wrote on the first machine"
    assert (out / handover.INDUCTOR_CACHE / "ab" / "cabkernel.best_config").is_file()
