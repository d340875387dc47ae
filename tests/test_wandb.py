"""W&B as a view of the records, read back from real offline run files: run pages, the sweep-level run,
profiles, sync, reports, and secrets that never leave the environment."""

import datetime
import gzip
import json
import os
from pathlib import Path

from wandb_workspaces.expr import expr_to_filters

import records
from analysis.report import wandb_report_content
from tests.conftest import FAKE_KEY, HF_TOKEN, SECRET, launch
from tests.test_run import run, wandb_records


def test_run_page_has_axes_env_group_tags_and_summary(tiny_plan):
    run_dir, _ = run(tiny_plan("input_type=subclass", "memory_format=channels_last"))
    logged = wandb_records(run_dir)
    (page,) = [r["run"] for r in logged if r["type"] == "run"]
    config = page["config"]["update"]
    assert config["input_type.name"] == "subclass" and config["memory_format.name"] == "channels_last"
    assert config["env.packages.torch"] and config["env.device"] == "cpu"
    assert page["run_group"] == tiny_plan().sweep_dir.name and "subclass" in page["tags"]
    summary = {}
    for update in (r["summary"]["update"] for r in logged if r["type"] == "summary"):
        summary.update(update)
    assert summary["state"] == "done" and summary["median_ms.step_ms"] > 0 and summary["samples_per_s"] > 0


def test_wandb_starts_after_the_measured_window_ends(tiny_plan):
    run_dir, summary = run(tiny_plan("input_type=tensor", "memory_format=contiguous"))
    (page,) = [r["run"] for r in wandb_records(run_dir) if r["type"] == "run"]
    started = datetime.datetime.fromisoformat(page["start_time"].replace("Z", "+00:00")).timestamp()
    assert started >= summary.window_ended_at, "no wandb call (and no W&B process) overlaps a timed step"


def test_profile_trace_is_kept_and_uploaded_as_an_artifact(tiny_plan):
    run_dir, _ = run(tiny_plan("input_type=tensor", "memory_format=contiguous", "profile=true"))
    trace = json.loads(gzip.decompress((run_dir / records.PROFILE).read_bytes()))
    assert any(e.get("name", "").startswith("aten::conv") for e in trace["traceEvents"])
    steps = records.read_steps(run_dir / records.STEPS).to_pylist()
    assert len(steps) == 4, "profiled steps come after the measured window and are not recorded as steps"
    artifacts = [r["artifact"] for r in wandb_records(run_dir) if r["type"] == "artifact"]
    assert [a["type"] for a in artifacts] == ["profile"]
    assert [c["path"] for c in artifacts[0]["manifest"]["contents"]] == [records.PROFILE]


def test_sweep_level_run_holds_the_table_and_the_records(local_sweep):
    sweep, *_ = local_sweep
    logged = wandb_records(sweep)
    (page,) = [r["run"] for r in logged if r["type"] == "run"]
    assert page["job_type"] == "sweep" and page["run_group"] == "default"
    assert any(
        f["path"].startswith("media/table/results") for r in logged if r["type"] == "files" for f in r["files"]["files"]
    )
    (artifact,) = [
        r["artifact"] for r in logged if r["type"] == "artifact" and r["artifact"]["type"] == "perfsweep-records"
    ]
    paths = {c["path"] for c in artifact["manifest"]["contents"]}
    run_names = [p.parent.name for p in sweep.glob("*/status.json")]
    assert {"sweep.json", "runs.jsonl", "jobs.json", "report.html"} <= paths
    assert all(f"{name}/steps.parquet" in paths and f"{name}/summary.json" in paths for name in run_names)
    assert not any("/wandb/" in p or p.startswith((".submitit", ".code")) for p in paths)


def test_html_report_is_self_contained(local_sweep):
    sweep, _, report, _ = local_sweep
    assert f"report: {sweep / 'report.html'}" in report.stdout
    page = (sweep / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "<td>subclass</td>" in page and "vs tensor" in page
    assert page.count('src="data:image/png;base64,') == 3 and "http" not in page.split("<body>")[1]


def test_secrets_never_reach_records_logs_reports_or_w_and_b_files(local_sweep):
    sweep, result, report, _ = local_sweep
    leaks = []
    for path in sweep.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaks += [
                f"{path}: {s}" for s in (FAKE_KEY, SECRET) if s.encode() in data or s.encode() in _maybe_gunzip(data)
            ]
    assert not leaks
    assert FAKE_KEY not in result.stdout + result.stderr + report.stdout + report.stderr


def test_a_token_in_a_launcher_setting_and_the_home_folder_stay_on_this_machine(local_sweep):
    sweep, _, _, env = local_sweep
    leaving = [*sweep.rglob("wandb/**/*"), *Path(env["WANDB_DATA_DIR"]).rglob("*"), sweep / "report.html"]
    home = os.path.expanduser("~").encode()
    leaks = []
    for path in (p for p in leaving if p.is_file()):
        data = path.read_bytes() + _maybe_gunzip(path.read_bytes())
        leaks += [f"{path}: {s!r}" for s in (HF_TOKEN.encode(), home + b"/") if s in data]
    assert not leaks
    staged = [p for p in Path(env["WANDB_DATA_DIR"]).rglob("*") if p.is_file()]
    assert any(b'"setup": "***"' in p.read_bytes() for p in staged), "the records artifact, redacted"
    assert HF_TOKEN in (sweep / "runs.jsonl").read_text(), "the local records keep what resume needs"


def _maybe_gunzip(data: bytes) -> bytes:
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else b""


def test_sync_refuses_without_a_key(local_sweep, tmp_path):
    sweep, *_ = local_sweep
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    env["NETRC"] = str(tmp_path / "empty-netrc")
    (tmp_path / "empty-netrc").write_text("")
    result = launch("sync", str(sweep), env={"NETRC": env["NETRC"], "WANDB_API_KEY": ""})
    assert result.returncode == 2
    assert "no W&B API key (run `wandb login` or set WANDB_API_KEY): nothing was uploaded" in result.stderr


def test_wandb_report_content_is_built_offline_and_its_filter_parses():
    content = wandb_report_content("seed001_sampler", "perfsweep", None, ["call"])
    (grid,) = [b for b in content["blocks"] if b["type"] == "panel_grid"]
    assert grid["runset"]["filters"] == "Metric('Group') == 'seed001_sampler'"
    parsed = expr_to_filters(grid["runset"]["filters"])
    assert "seed001_sampler" in parsed.model_dump_json() and "group" in parsed.model_dump_json()
    assert [p["y"] for p in grid["panels"] if p["type"] == "line"] == [["call_ms"], ["step_ms"]]
    assert grid["panels"][0] == {"type": "bar", "metrics": ["median_ms.call_ms", "median_ms.step_ms"]}
