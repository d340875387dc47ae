"""What every run of a sweep folder is doing, from its records and, for runs not finished, the scheduler.

python launch.py status SWEEP_DIR
"""

import dataclasses
import socket
from pathlib import Path

from perfsweep import records, user_command
from perfsweep.launcher.backends import BACKENDS, SchedulerUnavailable, slurm
from perfsweep.launcher.run_job import slurm_end
from perfsweep.records import FINAL, LOST, PENDING, RUNNING, STATES, UNKNOWN, UNREADABLE, Status, Unreadable
from perfsweep.records.lock import holding_host, launching
from perfsweep.records.words import counted


@dataclasses.dataclass
class RunState:
    """A run as `status` sees it: its status record, and whether its job is alive.

    Whether the job is alive is known for an unfinished, submitted run only.
    """

    run: str
    status: Status
    state: str  # the record's state, or lost, or unreadable
    job_id: str | None
    log: str | None
    launcher: str | None
    job_alive: bool | None = None
    job_waits: str = ""  # the scheduler's word on why its queued job waits (Dependency, JobHeldUser...)
    clusters: str | None = None  # the Slurm clusters its job was sent to, where not this host's


def _names(sweep_dir: Path, unreadable: list[Unreadable]) -> list[str]:
    """Every planned run: from the manifest, else from runs.jsonl.

    The manifest spares parsing each run's config record.
    """
    manifest = records.read_manifest(sweep_dir, unreadable)
    return sorted(manifest["runs"]) if manifest else sorted(records.planned_runs(sweep_dir, unreadable))


def _launcher(planned: dict) -> str | None:
    """The launcher a planned run's config names.

    The config follows this schema only where this version of perfsweep wrote it.
    """
    launcher = planned["config"].get("launcher")
    return launcher.get("name") if isinstance(launcher, dict) else None


def run_states(sweep_dir: Path, notes: list[str] | None = None) -> list[RunState]:
    """One per run: its state, job id and log.

    The state is pending, running, done, failed, lost or unreadable.
    It is unknown where the scheduler did not answer.
    What else the user should know is added to `notes`:

    - sweep-level files that could not be read, and were read as rebuilt from the run folders;
    - a scheduler that did not answer.
    """
    notes = [] if notes is None else notes
    unreadable: list[Unreadable] = []
    jobs = records.submitted_jobs(sweep_dir, unreadable)
    launchers: dict[str, str] | None = None
    rows = []
    for name in _names(sweep_dir, unreadable):
        status = records.read_status(sweep_dir / name)
        # An unfinished run belongs to its latest submission; a finished one to the job that finished it.
        latest = jobs.get(name, {}) if status.state not in FINAL else {}
        launcher = latest.get("launcher")
        if latest and launcher is None:  # an older jobs.json names no launcher: the run's config does
            launchers = launchers or {n: _launcher(r) for n, r in records.planned_runs(sweep_dir).items()}
            launcher = launchers.get(name)
        job_id, log = latest.get("job_id", status.job_id), latest.get("log", status.log)
        state = UNREADABLE if status.unreadable else status.state
        rows.append(RunState(name, status, state, job_id, log, launcher, clusters=latest.get("clusters")))
    notes += [f"{u}: read as rebuilt from the run folders; a launch or resume rewrites it" for u in unreadable]
    unfinished = [r for r in rows if r.state not in FINAL and r.job_id and r.launcher in BACKENDS]
    for launcher in {r.launcher for r in unfinished}:
        mine = [r for r in unfinished if r.launcher == launcher]
        try:
            alive = BACKENDS[launcher].alive_ids(sweep_dir, {r.job_id: jobs.get(r.run, {}) for r in mine})
        except SchedulerUnavailable as error:  # unknown, never lost
            notes.append(f"{launcher}: {error}: whether the unfinished runs' jobs are alive is unknown")
            for row in mine:
                row.state = UNKNOWN
            continue
        for row in mine:
            row.job_alive = row.job_id in alive
            row.job_waits = alive.get(row.job_id, "")
            # Its job has ended, but the run, which started, never wrote a final state.
            # A run that was interrupted wrote that it is pending again.
            # A run that never started is pending still.
            if not row.job_alive and row.state == RUNNING:
                row.state = LOST
    return rows


def stranded(sweep_dir: Path) -> dict[str, tuple[str, str]]:
    """The unfinished runs that no job will finish, each with its state (lost or pending) and what to do.

    Their job has ended, or is queued where it can never start (CANNOT_START).
    A run's records say running or pending until it records its end; only its scheduler knows this.
    """
    said = {}
    for row in run_states(sweep_dir):
        if row.job_alive is False and row.state in (LOST, PENDING):
            said[row.run] = (row.state, f"{job_ended(row)}; `{user_command()} resume {sweep_dir}` runs it again")
        elif row.state == PENDING and row.job_alive and row.job_waits in CANNOT_START:
            said[row.run] = (row.state, cannot_start_line(row.job_waits, row.job_id, sweep_dir, row.clusters))
    return said


def interruption(status: Status) -> str:
    """What interrupted a run, when, and why where it was said.

    A run its job never started says so: only a started run was cut off as it measured.
    """
    interrupted = status.interrupted or {}
    reason = f": {interrupted['reason']}" if "reason" in interrupted else ""
    said = f"({interrupted.get('type')} at {interrupted.get('at')}){reason}"
    return f"interrupted {said}" if status.started_at else f"not started: its job was interrupted {said}"


def job_ended(row: RunState) -> str:
    """Why a run whose job has ended is not done, with Slurm's word for the end.

    That is its recorded interruption, else that its job ended before it started or before it recorded its end.
    """
    before = "the run recorded its end" if row.state == LOST else "the run started"
    said = interruption(row.status) if row.status.interrupted else f"its job ended before {before}"
    end = slurm_end(row.log)
    return said + (f" ({end})" if end else "")


def in_flight(rows: list[RunState]) -> set[str]:
    """The runs of these rows (run_states) whose job is still queued or running.

    Submitting them again would run them twice.
    """
    return {row.run for row in rows if row.state == UNKNOWN or (row.state in (PENDING, RUNNING) and row.job_alive)}


def cannot_start(rows: list[RunState]) -> set[str]:
    """The runs whose queued job cannot start (CANNOT_START).

    They are not in flight for `status`.
    Resume still leaves them to their job.
    """
    return {row.run for row in rows if row.state == PENDING and row.job_alive and row.job_waits in CANNOT_START}


# `status`'s exit status: 0 where every run is done.
EXIT_NOT_DONE = 1  # a run is not done, and no job of the sweep's runs is queued or running but those that cannot start
EXIT_IN_FLIGHT = 4  # a run's job is still queued or running, or the scheduler did not say


def exit_status(rows: list[RunState]) -> int:
    """What `status` exits with.

    A script can wait for a sweep, then check it, without reading text.
    A running run without a job to ask is not in flight: waiting would never end, and resume runs it.
    Nor is a run whose job cannot start (CANNOT_START): it waits for `scancel`.
    Nor is a run whose job is held (HELD): it waits for a person's `scontrol release`.
    """
    held = {row.run for row in rows if row.state == PENDING and row.job_alive and row.job_waits in HELD}
    if in_flight(rows) - cannot_start(rows) - held:
        return EXIT_IN_FLIGHT
    return 0 if rows and all(row.state == records.DONE for row in rows) else EXIT_NOT_DONE


def render(sweep_dir: Path) -> tuple[str, int]:
    """What `status` prints of a sweep folder, and its exit status (exit_status)."""
    notes: list[str] = []
    rows = run_states(sweep_dir, notes)
    counts = {s: sum(r.state == s for r in rows) for s in STATES}
    if not rows:  # a folder of sweeps (a bisect's points), or one with nothing launched yet
        inside = sorted(p.parent.name for p in sweep_dir.glob(f"*/{records.SWEEP}"))
        each = f"; its sweeps: {', '.join(inside)} ({user_command()} status {sweep_dir}/SWEEP)" if inside else ""
        return "\n".join([f"{sweep_dir}: no runs{each}", *notes]), EXIT_NOT_DONE
    states = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines = [f"{sweep_dir}: {counted(len(rows), 'run')}, {states}", *notes]
    unsubmitted = not_submitted(sweep_dir, rows)
    for row in rows:
        detail = f"  {row.status.error_line(160)}" if row.status.error else ""
        if row.state == UNREADABLE:
            detail = f"  {Unreadable(sweep_dir / row.run / records.STATUS, row.status.unreadable)}"
        if row.state == PENDING and row.status.interrupted:
            detail = f"  {interruption(row.status)}"
        elif row.state == PENDING and row.job_alive is False:
            detail = f"  {job_ended(row)}"
        elif row.state == PENDING and row.job_waits in CANNOT_START:
            detail = f"  {cannot_start_line(row.job_waits, row.job_id, sweep_dir, row.clusters)}"
        elif row.state == PENDING and row.job_waits:
            detail = f"  queued: {_waits(row)}"
        elif row.run in unsubmitted:
            detail = "  never submitted: no job holds it, and no launch holds the folder"
        ended = row.job_alive is False and (row.state == LOST or row.status.interrupted)
        if ended and (end := slurm_end(row.log)):
            detail += f" ({end})" if detail else f"  its job ended: {end}"
        job = f"  job {row.job_id}" + (f" (cluster {row.clusters})" if row.clusters else "") if row.job_id else ""
        log = f"  log {row.log}" if row.log and row.state != records.DONE else ""
        lines.append(f"{row.state:<8} {row.run}{job}{log}{detail}")
    if (
        counts[LOST]
        or counts[records.FAILED]
        or counts[UNREADABLE]
        or unsubmitted
        or any(r.job_alive is False for r in rows)
    ):
        lines.append(_rerun(rows, sweep_dir))
    elif counts[records.DONE] == len(rows):
        lines.append(f"all done: `{user_command()} table {sweep_dir}` gives their figures")
    return "\n".join(lines), exit_status(rows)


# What Slurm's reasons for a pending job mean to a sweep's runs; others are shown as Slurm words them.
WAITS = {
    "Dependency": "after the sweep's earlier arrays, so that no more run at once than launcher.parallelism",
    "JobArrayTaskLimit": "after its array's other tasks, launcher.parallelism at a time",
    "JobHeldUser": "held; `scontrol {where}release {job}` lets it run",
    "JobHeldAdmin": "held by an administrator",
    "None": "just queued: Slurm's scheduler has not looked at it yet",
}


# Slurm's reasons for a pending job that waits for a person: `status` does not count it in flight.
HELD = ("JobHeldUser", "JobHeldAdmin")

# Slurm's reasons for a pending job that no wait ends: the job asks for what its partition cannot give.
CANNOT_START = {
    "PartitionConfig": "it asks for more CPUs, memory or GPUs a node than its partition's nodes have",
    "PartitionTimeLimit": "its time limit is over its partition's",
    "BadConstraints": "no node of its partition meets its constraints",
}


def cannot_start_line(reason: str, job_id: str | None, sweep_dir: Path, clusters: str | None = None) -> str:
    """What a run whose queued job cannot start (CANNOT_START) says: why, and how to run it instead.

    `clusters` are those its job was sent to, where not this host's.
    """
    return f"queued, cannot start: {reason} ({CANNOT_START[reason]}); {refit(job_id, sweep_dir, clusters)}"


def on(clusters: str | None) -> str:
    """The option that sends a Slurm command to a job's cluster.

    It is '' for this host's cluster.
    """
    return f"--clusters {clusters} " if clusters else ""


def refit(job_id: str | None, sweep_dir: Path, clusters: str | None = None) -> str:
    """How to run a job's runs that cannot start: cancel the job, then resume with launcher settings that fit.

    The job is named by its array: every task of it asks for the same, so none can start.
    A job sent to another cluster is cancelled there.
    """
    array = slurm.arrays([job_id])[0] if job_id else job_id
    return (
        f"`scancel {on(clusters)}{array}`, then `{user_command()} resume {sweep_dir} launcher.KEY=VALUE` with "
        'settings that fit (`sinfo -o "%P %c %m %G %l %D"` gives each partition\'s CPUs, memory, GPUs, time limit '
        "and nodes)"
    )


def _waits(row: RunState) -> str:
    """Why a run's queued job waits: Slurm's reason, and what it means (WAITS)."""
    meaning = WAITS.get(row.job_waits)
    return f"{row.job_waits} ({meaning.format(job=row.job_id, where=on(row.clusters))})" if meaning else row.job_waits


def not_submitted(sweep_dir: Path, rows: list[RunState]) -> set[str]:
    """The pending runs that no job holds, while no launch holds the folder.

    A launch's submission left them.
    """
    if launching(sweep_dir) is not None or holding_host(sweep_dir) not in (None, socket.gethostname()):
        return set()
    return {row.run for row in rows if row.state == PENDING and not row.job_id and not row.status.interrupted}


def _rerun(rows: list[RunState], sweep_dir: Path) -> str:
    """The advice for runs not done: resume, where it could change something.

    A run that failed on a known issue fails on it again with the same settings.
    """
    failed = [row.status.error for row in rows if row.state == records.FAILED and row.status.error]
    known = [error.known for error in failed if error.known]
    issues = list(dict.fromkeys(known))
    on = f"{counted(len(known), 'failed run')} on {'a known issue' if len(issues) == 1 else 'known issues'}"
    if len(known) == sum(row.state != records.DONE for row in rows):
        it = "it" if len(issues) == 1 else "them"
        return f"not done: {on} ({', '.join(issues)}), which a resume meets again; change the settings that meet {it}"
    again = f" ({on} fail{'s' * (len(known) == 1)} again: {', '.join(issues)})" if known else ""
    return f"re-run what is not done: {user_command()} resume {sweep_dir}{again}"
