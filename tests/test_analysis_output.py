"""Where report and plots write, and what the commands that read a whole sweep say when they cannot: a sweep folder
that is read-only (--out names where to write instead), a folder with no run that can be read."""

import json
import shutil
import subprocess
import sys
import warnings

import pytest

from perfsweep import records
from tests import golden
from tests.helpers import ROOT, launch_here, write_sweep

# Runs launch.main on each list of words in argv[1] (JSON) in one process; prints each one's exit status and output.
COMMANDS = """
import contextlib, io, json, sys
from perfsweep import launch
said = []
for words in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = launch.main(words)
    said.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(said))
"""


def on_a_read_only_mount(folder, *commands):
    """launch.py's commands, run with `folder` mounted read-only: a bind mount in a mount namespace of their own,
    which stops root too (a folder's mode does not)."""
    mount = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    command = ["unshare", "--map-root-user", "--mount", "sh", "-c", mount, str(folder)]
    if shutil.which("unshare") is None or subprocess.run([*command, "true"], capture_output=True).returncode:
        pytest.skip("needs unshare to mount a folder read-only (user and mount namespaces)")
    found = subprocess.run(
        [*command, sys.executable, "-c", COMMANDS, json.dumps(commands)], capture_output=True, text=True, cwd=ROOT
    )
    assert found.returncode == 0, found.stderr
    return json.loads(found.stdout)


@pytest.mark.slow
def test_report_and_plots_on_a_read_only_sweep_say_where_to_write_instead_and_write_there(tmp_path):
    sweep = write_sweep(tmp_path / "sweep")
    before = sorted(p.relative_to(sweep) for p in sweep.rglob("*"))
    out = tmp_path / "elsewhere"
    report, plots, report_out, plots_out = on_a_read_only_mount(
        sweep,
        ["report", str(sweep)],
        ["plots", str(sweep)],
        ["report", str(sweep), "--out", str(out)],
        ["plots", str(sweep), "--out", str(out / "figures")],
    )
    for command, refused in (("report", report), ("plots", plots)):
        assert refused["code"] == 2 and "Traceback" not in refused["err"], refused
        golden.says(f"{command} on a read-only sweep", refused["err"], {sweep: "<sweep>"})
    assert report_out["code"] == 0, report_out["err"]
    assert f"report: {out / records.REPORT}" in report_out["out"]
    assert (out / records.REPORT).read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["phases.png", "runs.png", "speedups.png"]
    assert plots_out["code"] == 0, plots_out["err"]
    assert plots_out["out"].split() == [
        str(out / "figures" / "plots" / n) for n in ("phases.png", "runs.png", "speedups.png")
    ]
    assert sorted(p.relative_to(sweep) for p in sweep.rglob("*")) == before, "nothing written into the sweep"


def test_a_launch_that_adds_runs_after_the_report_says_the_report_predates_them(tmp_path):
    fast = ["workload=pairwise_sum_prod", "workload.size=10", "steps=3", "warmup_steps=1", "repeats=1"]
    fast += ["tracker.mode=disabled", "launcher=debug", f"runs_dir={tmp_path}"]
    first = launch_here(*fast, "workload.impl=broadcast")
    assert first.returncode == 0 and "predates" not in first.stdout, first.stderr
    assert launch_here("report", str(tmp_path / "default")).returncode == 0
    wider = launch_here(*fast, "workload.impl=broadcast,loop")
    assert f"{tmp_path / 'default' / records.REPORT} predates some runs' records: `perfsweep report " in wider.stdout


def test_report_writes_into_the_folder_out_names_and_nothing_into_the_sweep(tmp_path):
    """Nor does it log the sweep's W&B run there.

    --out asks for nothing to be written into the sweep.
    """
    sweep = write_sweep(tmp_path / "sweep")
    for name in ("a", "b"):
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["tracker"] = {"mode": "offline"}
        records.write_json(sweep / name / records.CONFIG, config)
    before = sorted(p.relative_to(sweep) for p in sweep.rglob("*"))
    out = tmp_path / "made" / "for" / "it"
    shown = launch_here("report", str(sweep), "--out", str(out))
    assert shown.returncode == 0, shown.stderr
    assert (out / records.REPORT).is_file() and not (sweep / records.REPORT).exists()
    assert sorted(p.relative_to(sweep) for p in sweep.rglob("*")) == before


def test_report_of_a_sweep_launched_online_logs_its_w_and_b_run_offline_without_wandb(tmp_path, monkeypatch):
    """A view sends nothing to W&B unless --wandb asks it to.

    --wandb checks the key and the server first.
    """
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    sweep = write_sweep(tmp_path / "sweep")
    for name in ("a", "b"):
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["tracker"] = {"mode": "online", "timeout_s": 10}
        records.write_json(sweep / name / records.CONFIG, config)
    shown = launch_here("report", str(sweep))
    assert shown.returncode == 0 and "wandb" not in shown.stderr, shown.stderr
    assert [p.name.endswith("-sweep") for p in (sweep / "wandb").glob("offline-run-*")] == [True]


@pytest.mark.parametrize("command", ["report", "sync"])
def test_report_and_sync_with_no_run_that_can_be_read_say_so(command, tmp_path):
    folder = write_sweep(tmp_path / "sweep")
    for name in ("a", "b"):
        (folder / name / records.CONFIG).write_text("[]")
    (folder / records.RUNS).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shown = launch_here(command, str(folder))
    assert shown.returncode == 2, shown
    golden.says(f"{command} on a folder with no run that can be read", shown.stderr, {folder: "<sweep>"})


@pytest.mark.parametrize("command", ["report", "sync"])
def test_report_and_sync_refuse_a_folder_that_holds_no_sweep(command, tmp_path):
    shown = launch_here(command, str(tmp_path))
    assert shown.returncode == 2 and f"{tmp_path} is no sweep folder: it holds no sweep.json" in shown.stderr


def test_report_on_a_sweep_without_sweep_json_says_its_w_and_b_run_is_not_logged(tmp_path):
    sweep = write_sweep(tmp_path / "sweep")
    (sweep / records.SWEEP).unlink()
    for name in ("a", "b"):
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["tracker"] = {"mode": "offline"}
        records.write_json(sweep / name / records.CONFIG, config)
    shown = launch_here("report", str(sweep))
    assert shown.returncode == 0, shown.stderr
    assert (sweep / records.REPORT).is_file() and not (sweep / "wandb").exists()
    golden.says("report of offline runs without their sweep.json", shown.stderr, {sweep: "<sweep>"})


def test_report_takes_the_tracker_settings_it_knows_of_a_config_written_by_another_version(tmp_path):
    sweep = write_sweep(tmp_path / "sweep")
    for name in ("a", "b"):
        config = records.read_json(sweep / name / records.CONFIG)
        config["config"]["tracker"] |= {"tags": ["a setting this version does not have"]}
        records.write_json(sweep / name / records.CONFIG, config)
    shown = launch_here("report", str(sweep))
    assert shown.returncode == 0, shown.stderr
    assert (sweep / records.REPORT).is_file()


def test_an_out_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    sweep = write_sweep(tmp_path / "sweep")
    a_file = tmp_path / "made.json"
    a_file.write_text("{}")
    for words, said in (
        (["history", str(sweep), "--out", str(a_file)], "is a file"),
        (["export", str(sweep), "--format", "bmf", "--out", str(tmp_path)], "is a folder"),
        (["export", str(sweep), "--format", "bmf", "--out", str(a_file / "bmf.json")], "a file elsewhere: --out FILE"),
    ):
        refused = launch_here(*words)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stdout + refused.stderr
        assert said in refused.stderr and not refused.stdout, refused.stdout
    made = launch_here("export", str(sweep), "--format", "bmf", "--out", str(tmp_path / "new" / "bmf.json"))
    assert made.returncode == 0 and (tmp_path / "new" / "bmf.json").is_file(), made.stderr
