"""What every run of a sweep folder is doing, from its records and, for runs not finished, the scheduler.

python launch.py status SWEEP_DIR
"""

from pathlib import Path

from launcher.executor import BACKENDS
from launcher.sweepdir import submitted_jobs
from train import records

FINAL = ("done", "failed")


def run_states(sweep_dir: Path) -> list[dict]:
    """One row per run: name, state (pending, running, done, failed, or lost), job id, log, error."""
    jobs = submitted_jobs(sweep_dir)
    rows = []
    for name, record in sorted(records.planned_runs(sweep_dir).items()):
        status = records.read_status(sweep_dir / name)
        # An unfinished run belongs to its latest submission; a finished one to the job that finished it.
        latest = jobs.get(name, {}) if status["state"] not in FINAL else {}
        rows.append({"run": name, "launcher": record["config"]["launcher"]["name"], **status, **latest})
    unfinished = [r for r in rows if r["state"] not in FINAL and r.get("job_id")]
    for name in {r["launcher"] for r in unfinished}:
        mine = [r for r in unfinished if r["launcher"] == name]
        alive = BACKENDS[name].alive_ids([r["job_id"] for r in mine])
        for row in mine:
            row["job_alive"] = row["job_id"] in alive
            # Its job has ended but the run never wrote a final state. (A run that was interrupted wrote
            # that it is pending again: it stopped cleanly and waits for a resume.)
            if row["job_id"] not in alive and not (row["state"] == "pending" and row.get("interrupted")):
                row["state"] = "lost"
    return rows


def in_flight(sweep_dir: Path) -> set[str]:
    """Runs whose job is still queued or running: submitting them again would run them twice."""
    return {
        row["run"] for row in run_states(sweep_dir) if row["state"] in ("pending", "running") and row.get("job_alive")
    }


def render(sweep_dir: Path) -> str:
    rows = run_states(sweep_dir)
    counts = {s: sum(r["state"] == s for r in rows) for s in ("pending", "running", "done", "failed", "lost")}
    lines = [f"{sweep_dir}: {len(rows)} runs, " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)]
    for row in rows:
        error = row.get("error") or {}
        detail = f"  {error.get('type')}: {str(error.get('message', '')).splitlines()[0][:160]}" if error else ""
        if row["state"] == "pending" and row.get("interrupted"):
            detail = f"  interrupted ({row['interrupted']['type']} at {row['interrupted']['at']})"
        job = f"  job {row['job_id']}" if row.get("job_id") else ""
        log = f"  log {row['log']}" if row.get("log") and row["state"] != "done" else ""
        lines.append(f"{row['state']:<8} {row['run']}{job}{log}{detail}")
    if counts["lost"] or counts["failed"]:
        lines.append(f"re-run what is not done: python launch.py resume {sweep_dir}")
    return "\n".join(lines)
