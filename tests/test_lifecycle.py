"""A run's life: each change of state, and its one writer."""

import ast

from perfsweep import records
from perfsweep.records import lifecycle
from tests.helpers import ROOT

WRITERS = {"write_json", "atomic_write", "write_text", "write_bytes", "open"}


def test_only_lifecycle_writes_status_json():
    writers = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0] in {"tests", "examples", ".venv", "results"} or path.name == "lifecycle.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            target = ast.unparse(node.args[0]) if node.args else ""
            if name in WRITERS and ("STATUS" in target or "status.json" in target):
                writers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert writers == []


def test_a_start_keeps_the_earlier_attempts(tmp_path):
    first = lifecycle.start(tmp_path, job_id="1")
    lifecycle.fail(tmp_path, error=records.RunError("OSError", "disk"), job_id="1", started_at=first.started_at)
    status = lifecycle.start(tmp_path, job_id="2")
    assert status.state == records.RUNNING and status.job_id == "2"
    assert [(a["state"], a["job_id"], a["error"]) for a in status.attempts] == [("failed", "1", "OSError")]
    assert records.read_status(tmp_path) == status


def test_a_run_left_pending_keeps_its_history_and_a_done_run_stays_done(tmp_path):
    started, done = tmp_path / "started", tmp_path / "done"
    lifecycle.start(started)
    done.mkdir()
    lifecycle.finish(done)
    assert lifecycle.leave_pending(done, "JobEnded", "job 7 ended") is None
    pending = lifecycle.leave_pending(started, "JobEnded", "job 7 ended")
    assert pending.interrupted["reason"] == "job 7 ended" and len(pending.attempts) == 1
    assert records.read_status(done).state == records.DONE


def test_a_failure_found_by_the_launcher_never_replaces_the_runs_own_end(tmp_path):
    lifecycle.finish(tmp_path)
    kept = lifecycle.fail_unless_final(tmp_path, records.RunError("LostRun"))
    assert kept.state == records.DONE and records.read_status(tmp_path).state == records.DONE


def test_a_lost_run_is_failed_and_an_unreadable_status_moved_aside(tmp_path):
    (tmp_path / records.STATUS).write_text("{cut")
    status = lifecycle.lose(tmp_path, records.RunError("LostRun", "job 3 ended"), job_id="3")
    assert (status.state, status.error.type, status.job_id) == (records.FAILED, "LostRun", "3")
    assert [p.name.split("-")[0] for p in tmp_path.glob("status.json.corrupt-*")] == ["status.json.corrupt"]


def test_only_a_run_with_a_status_is_resubmitted(tmp_path):
    assert lifecycle.resubmit(tmp_path) is None and not (tmp_path / records.STATUS).exists()
    lifecycle.fail(tmp_path, error=records.RunError("ValueError"))
    again = lifecycle.resubmit(tmp_path)
    assert again.state == records.PENDING and again.resubmitted_at and len(again.attempts) == 0
