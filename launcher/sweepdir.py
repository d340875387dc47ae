"""The sweep folder: its manifest (sweep.json), which runs are done, and each run's folder."""

import os
import uuid
from pathlib import Path

from omegaconf import OmegaConf

from conf.schema import Config
from sweeps.plan import Plan, PlanError
from sweeps.spec import RunSpec
from train import records
from train.run import earlier_attempts


class SweepDirError(OSError):
    pass


def open_sweep(plan: Plan, argv: list[str]) -> dict:
    """Create or reopen the sweep folder and add this launch's runs to its manifest."""
    sweep_dir = plan.sweep_dir
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(sweep_dir, os.W_OK):
            raise PermissionError(f"not writable: {sweep_dir}")
    except OSError as error:
        raise SweepDirError(f"cannot write the sweep folder {sweep_dir}: {error}") from error
    path = sweep_dir / records.SWEEP
    manifest = (
        records.read_json(path)
        if path.exists()
        else {"uid": uuid.uuid4().hex[:8], "created_at": records.now(), "runs": {}, "launches": []}
    )
    manifest["runs"].update({spec.name: spec.run_id for spec in plan.runs})
    manifest["launches"].append({"at": records.now(), "argv": argv, "runs": [spec.name for spec in plan.runs]})
    records.write_json(path, manifest)
    return manifest


def run_dir(plan: Plan, spec: RunSpec) -> Path:
    """The run's folder, absolute: jobs start in the code snapshot, not where the launch was started."""
    return plan.sweep_dir.resolve() / spec.name


def is_done(plan: Plan, spec: RunSpec) -> bool:
    folder = run_dir(plan, spec)
    return folder.is_dir() and records.read_status(folder)["state"] == "done"


def mark_pending(plan: Plan, specs: list[RunSpec]) -> None:
    """Record the runs about to be submitted in runs.jsonl: one file, however many runs.

    A run gets its own folder when it starts; until then it is pending, by its absence.
    """
    planned = records.planned_runs(plan.sweep_dir)
    planned.update({spec.name: spec.record() for spec in specs})
    records.write_jsonl(plan.sweep_dir / records.RUNS, list(planned.values()))
    for spec in specs:  # a run submitted again: its last status (failed, lost) is now history, not its state
        folder = run_dir(plan, spec)
        if (folder / records.STATUS).exists():
            records.write_status(folder, "pending", resubmitted_at=records.now(), attempts=earlier_attempts(folder))


def record_jobs(sweep_dir: Path, jobs: dict[str, dict]) -> None:
    """Note which job each run was submitted to (run name -> job id and log)."""
    path = sweep_dir / records.JOBS
    records.write_json(path, {**(records.read_json(path) if path.exists() else {}), **jobs})


def submitted_jobs(sweep_dir: Path) -> dict[str, dict]:
    path = sweep_dir / records.JOBS
    return records.read_json(path) if path.exists() else {}


def tracker_id(manifest: dict, spec: RunSpec) -> str:
    """A W&B run id fixed for this run in this sweep folder, so a re-run resumes rather than forks."""
    return f"{manifest['uid']}-{spec.run_id}"


RESUME_OVERRIDABLE = ("launcher.", "tracker.")  # settings of the sweep, not of what a run measures


def recorded_plan(sweep_dir: Path, overrides: list[str] = ()) -> Plan:
    """The plan of a sweep folder's runs that are not done, rebuilt from their recorded configs.

    `overrides` (launcher.KEY=VALUE, tracker.KEY=VALUE) change how they are launched, not what they measure.
    """
    bad = [o for o in overrides if not o.startswith(RESUME_OVERRIDABLE) or "=" not in o]
    if bad:
        raise PlanError([f"resume takes launcher.KEY=VALUE and tracker.KEY=VALUE overrides only; not: {' '.join(bad)}"])
    changes = OmegaConf.from_dotlist(list(overrides))
    runs = []
    for name, record in sorted(records.planned_runs(sweep_dir).items()):
        if records.read_status(sweep_dir / name)["state"] == "done":
            continue
        config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(Config), record["config"], changes))
        spec = RunSpec(config=config, sweep_name=sweep_dir.name)
        if spec.run_id != record["run_id"]:
            raise ValueError(f"run {name}: its config no longer gives its run id (written by another version?)")
        runs.append(spec)
    return Plan(sweep_dir=sweep_dir, runs=tuple(runs))
