"""A sweep folder's own files: its manifest (sweep.json), its planned runs (runs.jsonl), their jobs (jobs.json).

Each can be rebuilt from the run folders when it cannot be read.
Readers get the rebuilt value, and, given a list, the Unreadable found.
A launcher, holding the sweep's lock, writes it back with `repair` and moves the broken file aside.
"""

import dataclasses
import json
from pathlib import Path
from typing import Any, NotRequired

from typing_extensions import TypedDict  # pydantic validates typing's TypedDict only from Python 3.12

from perfsweep.records.files import (
    CONFIG,
    JOBS,
    RUNS,
    STATUS,
    SWEEP,
    Unreadable,
    declare,
    json_line,
    now,
    quarantine,
    read_record,
    readable_lines,
    write_json,
    write_jsonl,
)
from perfsweep.records.status import read_status

# Sweep names that read a sweep file of another name.
# A sweep keeps the name it was launched under: its folder, its records, the command a resume replays.
# This map gives the file that name reads.
# It is here, in the records, because two stages read such sweeps: the planner (a resume) and the analysis
# (published figures). Only the records sit below both.
RENAMED_SWEEPS = {
    "seed000_subclass": "subclass_slowdown",
    "seed000_t4": "subclass_slowdown_t4",
    "seed000_followup": "subclass_followups",
    "seed001_sampler": "sampler_nonzero",
    "seed002_batching": "loops_vs_broadcasting",
    "seed003_nested": "nested_tensor",
}

# The word that launches a sweep's rounds until its comparisons are decided.
# It is here because two stages read it from a launch's words in sweep.json: the commands (a resume) and the
# analysis (its views keep the level of its looks).
AUTO = "repeats=auto"


def sweep_file_name(name: str) -> str:
    """The name of the sweep file (and published figures) that the sweep named `name` reads."""
    return RENAMED_SWEEPS.get(name, name)


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The axis a run is compared along, and the value of the run it is compared with."""

    axis: str
    value: str


class ConfigRecord(TypedDict):
    """What a run's config.json holds: its id, axes, baseline and resolved config."""

    run_id: str
    axes: dict[str, str]
    baseline: Baseline  # as its JSON object
    config: dict[str, Any]  # the resolved config, nested
    name: NotRequired[str]
    axis_order: NotRequired[list[str] | None]  # the axes in the order the workload declares them
    named_axes: NotRequired[list[str] | None]  # axes shown by their value alone
    # The words of the command that measures this configuration again, after `perfsweep` (records/repro.py)
    repro: NotRequired[list[str] | None]
    # Each file of its config dirs (--config-dir), by path, and a digest of what it held when the run was planned
    repro_files: NotRequired[dict[str, str] | None]
    # Swept settings that are no axis, named in the run's name as key=value (model.batch_size)
    named_keys: NotRequired[list[str] | None]


class PlannedRun(ConfigRecord):
    """A line of runs.jsonl: a planned run's config record, which names it."""

    name: str


class Launch(TypedDict):
    at: str
    argv: list[str]
    runs: list[str]  # the runs it planned


class Manifest(TypedDict):
    """What sweep.json holds."""

    uid: str | None  # the sweep's W&B runs' ids begin with it
    group: NotRequired[str]  # its W&B runs' group: its name and uid, apart from other sweeps of its name
    runs: dict[str, str]  # name -> run id
    launches: list[Launch]
    created_at: NotRequired[str]
    rebuilt_at: NotRequired[str]


class Job(TypedDict):
    """The job a run was submitted to, as jobs.json holds it."""

    job_id: str
    log: str | None
    launcher: NotRequired[str]  # which launcher: a sweep's runs can go to more than one
    host: NotRequired[str]  # a local job's host: only there is its id the pid of its process


declare(CONFIG, "config record", ConfigRecord)
declare(RUNS, "planned run", PlannedRun)
declare(SWEEP, "sweep manifest", Manifest)
declare(JOBS, "jobs record", dict[str, Job])


def _read(path: Path, rebuild, unreadable: list[Unreadable] | None) -> Any:
    record = read_record(path)
    if not isinstance(record, Unreadable):
        return record
    if unreadable is not None:
        unreadable.append(record)
    return rebuild(path.parent)


def _run_folders(sweep_dir: Path) -> list[Path]:
    return sorted(p.parent for p in sweep_dir.glob(f"*/{STATUS}")) + sorted(
        p.parent for p in sweep_dir.glob(f"*/{CONFIG}") if not (p.parent / STATUS).exists()
    )


def rebuilt_manifest(sweep_dir: Path) -> dict[str, Any]:
    """sweep.json from the planned runs, and the runs' statuses for its uid (which W&B run ids begin with)."""
    uids = {read_status(folder).tracker_id or "" for folder in _run_folders(sweep_dir)}
    uid = next((u.split("-")[0] for u in sorted(uids) if "-" in u), None)
    runs = {name: row["run_id"] for name, row in planned_runs(sweep_dir).items()}
    return {"uid": uid, "created_at": now(), "runs": runs, "launches": [], "rebuilt_at": now()}


def rebuilt_planned(sweep_dir: Path) -> list[dict[str, Any]]:
    """runs.jsonl from its lines still readable and the config.json of each run that has started."""
    rows = {row["name"]: row for row in readable_lines(sweep_dir / RUNS) if isinstance(row, dict) and "name" in row}
    for path in sorted(sweep_dir.glob(f"*/{CONFIG}")):
        config = read_record(path)
        if isinstance(config, dict) and "name" in config:
            rows.setdefault(config["name"], config)
    return list(rows.values())


def rebuilt_jobs(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """jobs.json from the job each started run recorded in its status."""
    jobs = {}
    for folder in _run_folders(sweep_dir):
        status = read_status(folder)
        if status.job_id:
            jobs[folder.name] = {"job_id": status.job_id, "log": status.log}
    return jobs


def group_of(sweep_dir: Path) -> str:
    """The W&B group of the sweep in `sweep_dir`, as its sweep.json keeps it.

    A sweep launched before sweep.json kept one logged by its name alone.
    """
    return (read_manifest(sweep_dir) or {}).get("group") or sweep_dir.name


def read_manifest(sweep_dir: Path, unreadable: list[Unreadable] | None = None) -> dict[str, Any] | None:
    """sweep.json: uid, created_at, runs (name -> run id), launches (at, argv, runs).

    Returns:
        Those, or None before the first launch.
    """
    return _read(Path(sweep_dir) / SWEEP, rebuilt_manifest, unreadable)


def last_launch(sweep_dir: Path) -> dict[str, Any] | None:
    """The sweep's last launch that planned runs (at, argv, runs), not a resume; None before the first."""
    launches = (read_manifest(sweep_dir) or {}).get("launches", [])
    planned = [launch for launch in launches if launch.get("argv", [])[:1] != ["resume"]]
    return planned[-1] if planned else None


def planned_runs(sweep_dir: Path, unreadable: list[Unreadable] | None = None) -> dict[str, dict[str, Any]]:
    """What runs.jsonl holds: run name -> its config record (as config.json has it once the run starts)."""
    rows = _read(Path(sweep_dir) / RUNS, rebuilt_planned, unreadable) or []
    return {row["name"]: row for row in rows}


def write_planned(sweep_dir: Path, lines: dict[str, str]) -> None:
    """Add runs to runs.jsonl: run name -> its config record as one JSON line (`json_line`).

    A run planned again replaces its line.
    The other lines are kept as they are.
    """
    path = Path(sweep_dir) / RUNS
    kept = [line for line in (path.read_text().splitlines() if path.exists() else []) if line.strip()]
    write_jsonl(path, [line for line in kept if _name(line) not in lines] + list(lines.values()))


def _name(line: str) -> str | None:
    try:
        return json.loads(line)["name"]
    except (ValueError, KeyError, TypeError):  # a damaged line: dropped
        return None


def record_jobs(sweep_dir: Path, jobs: dict[str, dict[str, Any]]) -> None:
    """Note which job each run was submitted to (run name -> job id, log, launcher)."""
    write_json(Path(sweep_dir) / JOBS, {**submitted_jobs(sweep_dir), **jobs})


def submitted_jobs(sweep_dir: Path, unreadable: list[Unreadable] | None = None) -> dict[str, dict[str, Any]]:
    return _read(Path(sweep_dir) / JOBS, rebuilt_jobs, unreadable) or {}


_REBUILD = {SWEEP: rebuilt_manifest, RUNS: rebuilt_planned, JOBS: rebuilt_jobs}


def repair(sweep_dir: Path) -> list[str]:
    """Move each unreadable sweep-level file aside and write it again, rebuilt from the run folders.

    This is for a launcher, which holds the sweep's lock.

    Returns:
        What was done, a line per file.
    """
    sweep_dir = Path(sweep_dir)
    done = []
    for name, rebuild in _REBUILD.items():
        unreadable: list[Unreadable] = []
        value = _read(sweep_dir / name, rebuild, unreadable)
        if not unreadable:
            continue
        aside = quarantine(sweep_dir / name)
        where = f"moved aside to {aside.name}" if aside else "could not be moved aside"
        if name == SWEEP and value["uid"] is None:  # no run has started: this launch makes a new one
            done.append(f"{unreadable[0]}: {where}; made anew")
            continue
        if name == RUNS:
            write_jsonl(sweep_dir / name, [json_line(row) for row in value])
        else:
            write_json(sweep_dir / name, value)
        done.append(f"{unreadable[0]}: {where}; rebuilt from the run folders")
    return done
