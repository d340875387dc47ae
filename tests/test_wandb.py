"""W&B as a view of the records, read back from real offline run files: run pages, the sweep-level run,
profiles, sync, reports, and secrets that never leave the environment."""

import dataclasses
import datetime
import gzip
import http.server
import json
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.views import wandb_sweep
from perfsweep.analysis.views.report import PLOT_SECTIONS, build_wandb_report, wandb_report_content
from perfsweep.analysis.views.wandb_sweep import offline_runs
from perfsweep.records import load_sweep
from perfsweep.sweeps.plan import build_plan
from tests import golden, synthetic
from tests.helpers import (
    FAKE_KEY,
    HF_TOKEN,
    ONE_OF_TWO_FAILS,
    SECRET,
    TINY,
    launch_here,
    offline_wandb,
    run,
    wandb_records,
)


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> tuple[Path, Any, list[dict]]:
    """One tiny run in this process, W&B offline: its folder, its summary, and what W&B got. Read only."""
    folder = tmp_path_factory.mktemp("offline")
    plan = build_plan([*TINY, "input_type=subclass", "memory_format=channels_last", f"runs_dir={folder / 'runs'}"])
    with pytest.MonkeyPatch.context() as patch:  # made before any test's own W&B folders (conftest.py)
        offline_wandb(patch, folder)
        run_dir, summary = run(plan)
    return run_dir, summary, wandb_records(run_dir)


@pytest.mark.slow
def test_run_page_has_axes_env_group_tags_and_summary(offline_run):
    run_dir, _, logged = offline_run
    (page,) = [r["run"] for r in logged if r["type"] == "run"]
    config = page["config"]["update"]
    assert config["input_type.name"] == "subclass" and config["memory_format.name"] == "channels_last"
    assert config["env.packages.torch"] and config["env.device"] == "cpu"
    command, caveat = config["repro"].split("  # ")  # the command that measures it again, and its code's commit
    assert command.startswith("perfsweep model=tiny_cnn ") and "input_type=subclass" in command and caveat
    assert page["run_group"] == records.group_of(run_dir.parent) and "subclass" in page["tags"]
    summary = _summary(logged)
    assert summary["state"] == "done" and summary["median_ms.step_ms"] > 0 and summary["samples_per_s"] > 0
    assert not [key for key in summary if key.startswith("warmup/")], "no warm-up step's figure sums the run up"
    measured = records.read_steps(run_dir / records.STEPS).to_pandas().query("not warmup")
    assert summary["step_ms"] == summary["median_ms.step_ms"] == pytest.approx(measured["step_ms"].median()), (
        "a phase's summary is its median step, not its last"
    )


@pytest.mark.slow
def test_a_run_page_lists_no_installed_packages_but_the_versions_that_matter(offline_run):
    """W&B's requirements.txt of every installed package costs each run a read of every package's metadata."""
    run_dir, _, logged = offline_run
    assert not list((run_dir / "wandb").rglob("requirements.txt"))
    (page,) = [r["run"] for r in logged if r["type"] == "run"]
    assert {"env.packages.torch", "env.packages.wandb"} <= set(page["config"]["update"])


@pytest.mark.slow
def test_wandb_starts_after_the_measured_window_ends(offline_run):
    _, summary, logged = offline_run
    (page,) = [r["run"] for r in logged if r["type"] == "run"]
    started = datetime.datetime.fromisoformat(page["start_time"].replace("Z", "+00:00")).timestamp()
    assert started >= summary.window_ended_at, "no wandb call (and no W&B process) overlaps a timed step"


def test_profile_trace_is_kept_and_uploaded_as_an_artifact(tiny_plan):
    run_dir, _ = run(tiny_plan("input_type=tensor", "memory_format=contiguous", "profile=true", "tracker.mode=offline"))
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
    assert page["job_type"] == "sweep" and page["run_group"] == records.group_of(sweep) != "default"
    (results,) = sweep.glob("wandb/offline-run-*/files/media/table/results_*.table.json")
    table = json.loads(results.read_text())
    step = table["columns"].index("step ms")
    assert all(isinstance(row[step], float) for row in table["data"]), "figures W&B can sort and plot"
    assert "ran" not in table["columns"], "what ran is the sweep run's summary, not a column of every row"
    (found,) = sweep.glob("wandb/offline-run-*/files/media/table/speedups_*.table.json")
    speedups = json.loads(found.read_text())
    assert {row[speedups["columns"].index("word")] for row in speedups["data"]} == {None}, "one run each: no word"
    (artifact,) = [
        r["artifact"] for r in logged if r["type"] == "artifact" and r["artifact"]["type"] == "perfsweep-records"
    ]
    paths = {c["path"] for c in artifact["manifest"]["contents"]}
    run_names = [p.parent.name for p in sweep.glob("*/status.json")]
    assert {"sweep.json", "runs.jsonl", "jobs.json", "report.html"} <= paths
    assert run_names and all(f"{name}/steps.parquet" in paths and f"{name}/summary.json" in paths for name in run_names)
    assert not any("/wandb/" in p or p.startswith((".submitit", ".code")) for p in paths)


@pytest.mark.slow
def test_a_sweep_whose_every_run_failed_still_logs_its_sweep_run(tmp_path):
    failing = [*ONE_OF_TWO_FAILS[:3], "model.in_chans=4", "input_type=tensor,subclass", "memory_format=contiguous"]
    result = launch_here(*failing, "steps=2", "warmup_steps=1", "repeats=1", "launcher=debug", f"runs_dir={tmp_path}")
    assert result.returncode == 1 and "0 done, 2 failed" in result.stdout, result.stdout + result.stderr
    assert "wandb" not in result.stderr, "no W&B warning: the sweep run holds the failures"
    logged = wandb_records(tmp_path / "default")
    (page,) = [r["run"] for r in logged if r["type"] == "run"]
    assert page["job_type"] == "sweep"
    summary = _summary(logged)
    assert summary["runs"] == 2 and summary["failed"] == 2 and summary["done"] == 0
    assert "FAILED" in summary["flags"] and "ran" not in summary, "no run done: no setting to name, its failures"
    (artifact,) = [
        r["artifact"] for r in logged if r["type"] == "artifact" and r["artifact"]["type"] == "perfsweep-records"
    ]
    statuses = [c["path"] for c in artifact["manifest"]["contents"] if c["path"].endswith("/status.json")]
    assert len(statuses) == 2, "each failed run's status, with its error, is in the records artifact"


def test_html_report_is_self_contained(local_sweep):
    sweep, _, report, _ = local_sweep
    assert f"report: {sweep / 'report.html'}" in report.stdout
    page = (sweep / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "<td>subclass</td>" in page and "vs tensor" in page
    assert page.count('src="data:image/png;base64,') == 3
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page.split("<body>")[1])  # base64 may spell http
    assert "http" not in text, "nothing is fetched from elsewhere"


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


def test_sync_refuses_without_a_key(local_sweep, tmp_path, monkeypatch):
    sweep, *_ = local_sweep
    (tmp_path / "empty-netrc").write_text("")
    monkeypatch.setenv("NETRC", str(tmp_path / "empty-netrc"))
    monkeypatch.setenv("WANDB_API_KEY", "")
    result = launch_here("sync", str(sweep))
    assert result.returncode == 2
    golden.says("sync without a W&B key", result.stderr, {sweep: "<sweep>"})


@pytest.mark.slow
def test_the_wandb_report_is_built_offline_on_the_keys_and_runs_the_sweep_logged(local_sweep):
    # a requirement, but not on a GPU machine's image, where only the `gpu` tests are collected from this module
    expr_to_filters = pytest.importorskip("wandb_workspaces.expr").expr_to_filters
    sweep, *_ = local_sweep
    group = records.group_of(sweep)  # its name and uid: two machines' `default` sweeps stay apart in one project
    assert group.startswith(f"{sweep.name}-") and group != sweep.name
    content = wandb_report_content(
        sweep.name, group, "perfsweep", "perf-team", ["data", "forward", "backward", "optimizer"]
    )
    report = build_wandb_report(content)  # wandb_workspaces objects: nothing is sent
    runs = [wandb_records(path.parent) for path in sweep.glob("*/wandb")]
    swept = wandb_records(sweep)  # the sweep-level run, which logs the tables
    pages = [r["run"] for found in [*runs, swept] for r in found if r["type"] == "run"]
    steps = [r["history"]["item"] for found in runs for r in found if r["type"] == "history"]
    history = [set(step) for step in steps if not step["warmup"]]  # the measured steps, which the charts show
    summaries = [_summary(found) for found in runs]
    files = {f["path"] for r in swept if r["type"] == "files" for f in r["files"]["files"]}
    grids = [b for b in report.blocks if type(b).__name__ == "PanelGrid"]
    ran = _summary(swept)["ran"]  # beside the sweep run's tables: what ran and where
    assert " | batch 16, 32 px | CPU " in ran and " | torch " in ran, ran
    assert [b.text for b in report.blocks if type(b).__name__ == "H2"] == ["Results", *PLOT_SECTIONS]
    for grid in grids:
        (runset,) = grid.runsets
        found = json.loads(expr_to_filters(runset.filters).model_dump_json())
        assert group in json.dumps(found) and "group" in json.dumps(found)
        assert {page["run_group"] for page in pages} == {group} and len(pages) == 4, "3 runs and the sweep's"
        for panel in grid.panels:
            kind = type(panel).__name__
            if kind == "BarPlot":
                assert summaries and all(set(panel.metrics) <= set(summary) for summary in summaries), panel.metrics
            elif kind == "LinePlot":
                assert history and all({panel.x, *panel.y} <= keys for keys in history), panel.y
            else:
                assert any(f.startswith(f"media/table/{panel.table_name}_") for f in files), panel.table_name


def _summary(found: list[dict]) -> dict:
    """A W&B run's summary as its records leave it: their updates and removals, in order."""
    summary: dict = {}
    for record in (r["summary"] for r in found if r["type"] == "summary"):
        summary.update(record.get("update", {}))
        for item in record.get("remove") or []:
            summary.pop(item["key"], None)
    return summary


def test_report_dry_run_prints_the_outline_without_a_key_or_a_network(local_sweep, monkeypatch):
    sweep, *_ = local_sweep
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    shown = launch_here("report", str(sweep), "--wandb", "--dry-run", "tracker.entity=perf-team")
    assert shown.returncode == 0, shown.stderr
    assert "W&B Report 'perfsweep: default' in perf-team/perfsweep" in shown.stdout
    group = records.group_of(sweep)
    section = f"## Median time per phase\n  runs: Metric('Group') == '{group}'\n  bar chart: median_ms.data_ms"
    assert section in shown.stdout
    assert "line chart: step_ms over step" in shown.stdout and "table panel: speedups" in shown.stdout
    head = shown.stdout.split("## Results")[0]  # shared on its own, the Report says what ran and where
    assert " | batch 16, 32 px | CPU " in head and " | torch " in head, head


def test_a_report_of_a_replicated_sweep_says_what_its_words_mean(paired_sweep):
    """Shared on its own, the Report defines its words as the table does below it."""
    shown = launch_here("report", str(paired_sweep), "--wandb", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    head = shown.stdout.split("## Results")[0]
    assert "\nvs words: slower or faster where the 95% interval excludes 1.00x" in head, head


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _files(sweep: Path) -> dict[str, tuple[int, int]]:
    """The sweep's files, by size and time, but W&B's own debug logs: a W&B service of an earlier command may still
    be writing them."""
    service_logs = set(sweep.rglob("logs/debug*.log"))
    found = (p for p in sweep.rglob("*") if p.is_file() and p not in service_logs)
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in found}


def test_sync_and_report_stop_within_the_timeout_when_the_server_cannot_be_reached(local_sweep, monkeypatch):
    sweep, *_ = local_sweep
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("WANDB_BASE_URL", url)
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    before = _files(sweep)
    for command in (["sync"], ["report", "--wandb"]):
        started = time.monotonic()
        result = launch_here(*command, str(sweep), "tracker.timeout_s=5")
        assert time.monotonic() - started < 15
        assert result.returncode == 1, result.stderr
        said = "\n".join(line for line in result.stderr.splitlines() if line.startswith("perfsweep"))
        golden.says(f"{' '.join(command)}: W&B unreachable", said, {url: "<url>", sweep: "<sweep>"})
    assert _files(sweep) == before, "the offline runs and the records are untouched"


def test_sync_of_a_sweep_that_logged_nothing_says_so_before_it_asks_the_server(paired_sweep, monkeypatch):
    """Its runs ran with W&B off: a later sync would send nothing either, so none is promised."""
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    result = launch_here("sync", str(paired_sweep), "tracker.timeout_s=5")
    assert result.returncode == 0 and "later" not in result.stdout + result.stderr, result.stderr
    assert result.stdout == f"{paired_sweep}: no offline W&B runs to sync (it ran with tracker.mode=disabled)\n"


def test_a_sweeps_offline_runs_leave_out_those_of_a_sweep_inside_it(tmp_path):
    """explain's launch again is a sweep inside the sweep: its W&B runs are its own to sync."""
    for folder in ("run1/wandb/offline-run-1", "wandb/offline-run-2", "default-explain/wandb/offline-run-3"):
        (tmp_path / folder).mkdir(parents=True)
    records.write_json(tmp_path / "default-explain" / records.SWEEP, {"uid": None, "runs": {}, "launches": []})
    assert offline_runs(tmp_path) == [tmp_path / "run1/wandb/offline-run-1", tmp_path / "wandb/offline-run-2"]


class _ServerWithoutEntity(http.server.BaseHTTPRequestHandler):
    """A stand-in for a W&B server (none can exist here) whose key has no default entity."""

    def do_HEAD(self):
        self.send_response(200)
        self.end_headers()

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"data": {"viewer": {"entity": None}}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_no_entity_is_a_clear_error_before_anything_is_sent(local_sweep, monkeypatch):
    sweep, *_ = local_sweep
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ServerWithoutEntity)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
        before = _files(sweep)
        result = launch_here("report", str(sweep), "--wandb")
    finally:
        server.shutdown()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    golden.says("report --wandb: the server names no entity", result.stderr, {sweep: "<sweep>"})
    assert _files(sweep) == before


def test_a_sweep_launched_before_sweep_json_kept_a_group_is_grouped_by_its_name(tmp_path):
    """Its W&B runs were logged in the group of its name: its Report and a resume's runs keep to it."""
    old = tmp_path / "old"
    old.mkdir()
    records.write_json(old / records.SWEEP, {"uid": "ab12cd34", "runs": {}, "launches": []})
    assert records.group_of(old) == "old"
    records.write_json(old / records.SWEEP, {"uid": "ab12cd34", "group": "old-ab12cd34", "runs": {}, "launches": []})
    assert records.group_of(old) == "old-ab12cd34"


def test_a_warm_up_step_is_logged_under_warmup_and_a_measured_one_as_it_is():
    """A rank's columns of a run across ranks too; a row without the flag (a step without sync) stays as it is."""
    from perfsweep.train.tracker import logged

    warm = {"step": 0, "warmup": True, "step_ms": 9.0, "rank1/step_ms": 8.0, "rank1/probe": False}
    assert logged(warm) == {
        "step": 0, "warmup": True, "warmup/step_ms": 9.0, "warmup/rank1/step_ms": 8.0, "warmup/rank1/probe": False
    }  # fmt: skip
    measured = {"step": 3, "warmup": False, "step_ms": 2.0}
    unflagged = {"step": 4, "rank1/step_ms": 2.0}
    assert logged(measured) == measured and logged(unflagged) == unflagged


def test_the_sweep_runs_speedups_carry_the_tables_words(tmp_path):
    """A subclass 30% slower over three runs a side: the W&B table says slower, as the terminal's does."""
    rng = np.random.default_rng(3)
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 3, synthetic.Noise(run_sd=0.01, bimodal=0.0), rng)
    sweep = synthetic.write(runs, tmp_path / "sweep")
    rows = wandb_sweep.speedup_rows(sweep, load_sweep(sweep))
    words = {row[0]: row[5] for row in rows}
    assert words["subclass"] == "slower" and words["tensorbase"] in ("same", "undetermined"), words
    assert {row[0]: row[8] for row in rows} == {"subclass": None, "tensorbase": None}
    for folder in sweep.iterdir():  # the subclass compiled, and torch.compile ran none of its ops in a graph
        if folder.is_dir() and "subclass" in folder.name:
            summary = records.read_json(folder / records.SUMMARY)
            records.write_json(
                folder / records.SUMMARY,
                summary | {"compiled": {"backend": "inductor", "graphs_run": 0, "graph_breaks": {}}},
            )
    flags = {row[0]: row[8] for row in wandb_sweep.speedup_rows(sweep, load_sweep(sweep))}
    assert flags == {"subclass": "NOT COMPILED", "tensorbase": None}, flags


def test_the_report_s_panels_hold_every_workload_s_phases(tmp_path):
    """An inference step's runs first, then a training step's: the Report charts the training step's phases too."""
    rng = np.random.default_rng(4)
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), rng)
    timed = ("step_ms", "forward_ms")
    infer = [
        dataclasses.replace(
            r,
            name=f"a-infer-{r.name}",
            run_id=f"a-{r.run_id}",
            summary=dataclasses.replace(
                r.summary, phases=("forward",), median_ms={k: r.summary.median_ms[k] for k in timed}
            ),
            measured={k: r.measured[k] for k in timed},
        )
        for r in runs
    ]
    sweep = synthetic.write(infer + runs, tmp_path / "sweep")
    shown = launch_here("report", str(sweep), "--wandb", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "median_ms.backward_ms" in shown.stdout and "median_ms.optimizer_ms" in shown.stdout, shown.stdout


def test_the_sweep_run_holds_the_published_verdicts_and_the_report_their_section(tmp_path):
    """Shared through W&B, a reproduction keeps its answer: the side-by-side table, verdicts and all."""
    from perfsweep.analysis.views import published
    from perfsweep.conf.schema import TrackerConf

    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    sweep = synthetic.published_sweep(tmp_path / "sweep", steady, seed=8)
    records.write_json(sweep / records.SWEEP, {"uid": "ab12cd34", "runs": {}, "launches": []})
    assert wandb_sweep.log_sweep(sweep, TrackerConf(mode="offline")) == []
    (found,) = sweep.glob("wandb/offline-run-*/files/media/table/published_*.table.json")
    logged = json.loads(found.read_text())
    verdicts = [row[logged["columns"].index("verdict")] for row in logged["data"]]
    assert verdicts == [published.view(sweep).items[0][-1]] and verdicts[0].startswith("reproduced"), verdicts
    shown = launch_here("report", str(sweep), "--wandb", "--dry-run")
    assert "## Beside the published figures\n" in shown.stdout, shown.stdout
    assert "table panel: published (a wandb.Table" in shown.stdout, shown.stdout
