"""The sweep folder as a launch sees it.

- opened for a launch;
- which runs are done;
- each run's folder and W&B id;
- the plan of a folder's unfinished runs, rebuilt from their records.
"""

import os
import uuid
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from perfsweep import records
from perfsweep.conf.schema import Config
from perfsweep.records import lifecycle
from perfsweep.sweeps.compose import CONF_DIR
from perfsweep.sweeps.plan import Plan, PlanError, unreadable_overrides
from perfsweep.sweeps.spec import RunSpec


class SweepDirError(OSError):
    pass


def make_folder(sweep_dir: Path) -> None:
    """Create the sweep folder, or find it writable."""
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(sweep_dir, os.W_OK):
            raise PermissionError(f"not writable: {sweep_dir}")
    except OSError as error:
        raise SweepDirError(f"cannot write the sweep folder {sweep_dir}: {error}") from error


def open_sweep(plan: Plan, argv: list[str]) -> dict:
    """Create or reopen the sweep folder and add this launch's runs to its manifest."""
    sweep_dir = plan.sweep_dir
    make_folder(sweep_dir)
    uid = uuid.uuid4().hex[:8]
    manifest = records.read_manifest(sweep_dir) or {
        "uid": uid,
        "group": f"{sweep_dir.name}-{uid}",  # two sweeps of one name stay apart in one W&B project
        "created_at": records.now(),
        "runs": {},
        "launches": [],
    }
    names = [spec.name for spec in plan.runs]
    manifest["runs"].update({spec.name: spec.run_id for spec in plan.runs})
    manifest["launches"].append({"at": records.now(), "argv": argv, "runs": names})
    records.write_json(sweep_dir / records.SWEEP, manifest)
    if plan.published is not None:  # the figures of the user's own travel with the records
        records.atomic_write(sweep_dir / records.PUBLISHED, plan.published.read_bytes())
    return manifest


def mark_pending(plan: Plan, specs: list[RunSpec]) -> None:
    """Record the runs about to be submitted in runs.jsonl: one file, however many runs.

    A run gets its own folder when it starts; until then it is pending, by its absence.
    """
    records.write_planned(plan.sweep_dir, {spec.name: spec.record_line() for spec in specs})
    root = plan.sweep_dir.resolve()
    for spec in specs:
        lifecycle.resubmit(root / spec.name)


def tracker_id(manifest: dict, spec: RunSpec) -> str:
    """A W&B run id fixed for this run in this sweep folder.

    A re-run then resumes its W&B run rather than forks it.
    """
    return f"{manifest['uid']}-{spec.run_id}"


RESUME_OVERRIDABLE = ("launcher.", "tracker.")  # settings of the sweep, not of what a run measures
EXTRA = "launcher.sbatch_extra"  # the options a launch added to sbatch's: resume may drop one
AGAIN = (
    "launch the sweep again with its command (sweep.json's launches list it), which plans them anew and keeps what is "
    "done"
)


def recorded_plan(sweep_dir: Path, overrides: list[str] = ()) -> Plan:
    """The plan of a sweep folder's runs that are not done, rebuilt from their recorded configs.

    `overrides` (launcher.KEY=VALUE, tracker.KEY=VALUE) change how they are launched, not what they measure.
    `~launcher.sbatch_extra.KEY` drops an option the launch added (one sbatch refused).
    An older record's config may lack its workload's declaration.
    It then gets it from conf/workload/.
    A workload of the user's own records its own.
    """
    dropped = [o[1:] for o in overrides if o.startswith(f"~{EXTRA}.") and "=" not in o]
    overrides = [o for o in overrides if o[1:] not in dropped]
    bad = [o for o in overrides if not o.startswith(RESUME_OVERRIDABLE) or "=" not in o]
    if bad:
        raise PlanError(
            [
                "resume takes launcher.KEY=VALUE and tracker.KEY=VALUE overrides only, and ~launcher.sbatch_extra.KEY "
                f"to drop an option; not: {' '.join(bad)}"
            ]
        )
    changes = _changes(list(overrides))
    unreadable: list[records.Unreadable] = []
    planned = records.planned_runs(sweep_dir, unreadable)
    manifest = records.read_manifest(sweep_dir)
    if manifest is None and not planned and not unreadable:
        raise PlanError(
            [
                f"{sweep_dir} holds no sweep to resume: neither {records.SWEEP} nor {records.RUNS}; resume takes "
                "the folder that a launch printed (sweep RUNS_DIR/NAME)"
            ]
        )
    lost = sorted(set((manifest or {}).get("runs", {})) - set(planned))
    if unreadable and lost:
        raise PlanError(
            [
                f"{unreadable[0]}, and the configs of the runs that never started cannot be rebuilt from the run "
                f"folders ({len(lost)}: {', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}): {AGAIN}"
            ]
        )
    runs = []
    for name, record in sorted(planned.items()):
        if records.is_done(sweep_dir / name):
            continue
        file = CONF_DIR / "workload" / f"{record['config']['workload']['name']}.yaml"
        declared = OmegaConf.create({"workload": OmegaConf.load(file)} if file.is_file() else {})
        merged = OmegaConf.merge(OmegaConf.structured(Config), declared, record["config"], changes)
        _drop(merged, dropped)
        if order := record.get("named_axes"):  # the config's keys were written sorted: its name keeps this order
            merged.workload.axes = {axis: merged.workload.axes[axis] for axis in order}
        repro, keys = tuple(record.get("repro") or ()), tuple(record.get("named_keys") or ())
        spec = RunSpec(OmegaConf.to_object(merged), sweep_dir.name, repro, named_keys=keys)
        if spec.run_id != record["run_id"] or spec.name != name:
            raise PlanError(
                [f"run {name}: its recorded config now gives another id or name (another version recorded it): {AGAIN}"]
            )
        runs.append(spec)
    origins = {override.split("=", 1)[0]: "the command line" for override in overrides}
    return Plan(sweep_dir=sweep_dir, runs=tuple(runs), origins=origins, unset_origin="as the sweep was launched")


def _drop(config: DictConfig, keys: list[str]) -> None:
    """Remove each of `keys` (launcher.sbatch_extra.KEY) from the config; one it lacks is named with those it has."""
    extra = OmegaConf.select(config, EXTRA) or {}
    for key in keys:
        name = key.removeprefix(f"{EXTRA}.")
        if name not in extra:
            raise PlanError([f"~{key}: the launch added no such option; its {EXTRA}: {dict(extra) or 'none'}"])
        del extra[name]


def _changes(overrides: list[str]) -> DictConfig:
    """The overrides as a config to merge into each run's.

    Each is checked against the schema before any is used: the key exists, and the value fits its type.
    """
    unreadable = unreadable_overrides(overrides)
    if unreadable:
        raise PlanError(unreadable)
    schema = OmegaConf.structured(Config)
    problems = []
    for override in overrides:
        try:
            OmegaConf.merge(schema, OmegaConf.from_dotlist([override]))
        except Exception as error:  # OmegaConf's errors: an unknown key, a value of the wrong type, bad YAML
            problems.append(f"{override}: {str(error).splitlines()[0]}")
    if problems:
        raise PlanError(problems)
    return OmegaConf.from_dotlist(overrides)
