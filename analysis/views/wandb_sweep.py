"""The sweep as a whole in W&B: a sweep-level run with the result table and the records; sync.

The sweep-level run has job type "sweep", is named <sweep>-sweep, and is in the sweep's group.
It holds the sweep's table as a wandb.Table ("results", one row per configuration), as data.
A figure is a number, with its interval's bounds and its word in columns of their own, as the CSV has them.
The CSV's `ran`, what ran and where, is in the run's summary instead, with the table's flags.
With explain=true it holds each decided comparison's ranked differences ("explain").
A sweep that reproduces published figures holds each side-by-side table with its verdicts ("published").
It holds the records as an artifact of type "perfsweep-records":

- each run's config, env, steps, summary, status, profiler trace and ops record (explain=true);
- the sweep's manifest, plan, jobs and HTML report.

W&B's own files, submitit's pickles and logs, and the code snapshot stay out.
W&B is a view: a failure here is returned as a warning, never raised.
`sync` uploads every offline W&B run of a sweep, as `wandb sync` does.
"""

import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from perfsweep import records, user_command
from perfsweep.analysis.groups import configurations, labels, speedups
from perfsweep.analysis.render import View
from perfsweep.analysis.statistics.rounds import rule_of
from perfsweep.analysis.views import explain, published_views, table
from perfsweep.conf.schema import TrackerConf
from perfsweep.conf.tracking import WANDB_SETTINGS
from perfsweep.records import load_sweep
from perfsweep.records.redact import redact, redact_text

RUN_FILES = (
    records.CONFIG, records.ENV, records.STEPS, records.SUMMARY, records.STATUS, records.PROFILE, records.OPS
)  # fmt: skip
SWEEP_FILES = (records.SWEEP, records.RUNS, records.JOBS, records.REPORT)
EXPLAIN_TABLE = "explain"  # explain=true: each decided comparison's ranked differences (analysis/views/explain.py)
PUBLISHED_TABLE = "published"  # the sweep beside the published figures, with its verdicts (analysis/views/published.py)


def published_tables(sweep_dir: Path) -> list[tuple[str, View]]:
    """Each published view of the sweep, by the name of its wandb.Table: published, published_2..."""
    return [
        (PUBLISHED_TABLE if index == 0 else f"{PUBLISHED_TABLE}_{index + 1}", view)
        for index, view in enumerate(published_views(sweep_dir))
    ]


def tracker_conf(sweep_dir: Path) -> TrackerConf:
    """The tracker settings the sweep's runs were launched with; ValueError if no run can be read."""
    runs = load_sweep(sweep_dir)
    if not runs:
        raise ValueError(f"{sweep_dir}: no run that can be read: none is planned there, or the warnings above say why")
    return tracker_of(runs[0])


def tracker_of(run: records.RunRecord) -> TrackerConf:
    """The tracker settings `run` was launched with."""
    recorded = {k.split(".", 1)[1]: v for k, v in run.fields.items() if k.startswith("tracker.")}
    return TrackerConf(**records.known_fields(TrackerConf, recorded))  # a version's settings that this one has


def record_files(sweep_dir: Path) -> list[Path]:
    files = [sweep_dir / name for name in SWEEP_FILES]
    files += [run_dir / name for run_dir in sorted(p for p in sweep_dir.iterdir() if p.is_dir()) for name in RUN_FILES]
    return [f for f in files if f.is_file()]


def redacted_copy(path: Path, copy: Path) -> Path | None:
    """`path` as it may leave the machine (records.redact).

    - A JSON record is redacted into `copy`.
    - An unreadable one is left out (None).
    - Other files stay as they are: steps hold numbers, and the HTML report is written redacted.
    """
    if path.suffix not in (".json", ".jsonl"):
        return path
    record = records.read_record(path)
    if isinstance(record, records.Unreadable):
        return None
    copy.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        copy.write_text("".join(records.json_line(redact(row)) + "\n" for row in record))
    else:
        copy.write_text(json.dumps(redact(record), indent=2, sort_keys=True, default=str))
    return copy


def view_run(conf: TrackerConf, folder: Path, run_id: str, job_type: str, group: str, name: str):
    """A W&B run of a view (a sweep's, a history's) in `folder`; an earlier offline one of the same id is replaced."""
    import wandb

    for earlier in (folder / "wandb").glob(f"offline-run-*-{run_id}"):
        shutil.rmtree(earlier, ignore_errors=True)
    return wandb.init(
        mode=conf.mode,
        project=conf.project,
        entity=conf.entity,
        group=group,
        name=name,
        id=run_id,
        job_type=job_type,
        resume="allow",
        reinit="create_new",
        dir=str(folder),
        settings=wandb.Settings(x_disable_stats=True, init_timeout=conf.timeout_s, **WANDB_SETTINGS),
    )


def speedup_rows(sweep_dir: Path, done: list[records.RunRecord]) -> list[list]:
    """Each speed-up of the done runs over their baseline, at the sweep's level, as the "speedups" table's rows.

    Each has the table's word: slower, faster, same or undetermined; none where it is within-run.
    Its flag is NOT COMPILED where a compiled side ran eagerly, as the table's cell says.
    """
    names = labels(configurations(done))
    rule = rule_of(sweep_dir, done)
    return [
        [
            *(names[v.config.key], names[v.base.key], s.value, s.low, s.high, rule.word(s) or None, rule.level),
            *(s.basis, table.not_compiled(v.config, v.base).strip() or None),
        ]
        for v, s in speedups(done, rule.level)
    ]


def log_sweep(sweep_dir: Path, conf: TrackerConf) -> list[str]:
    """Log the sweep-level W&B run into the sweep folder.

    Returns:
        Warnings where it could not be logged or W&B failed.
    """
    if conf.mode == "disabled":
        return []
    sweep_dir = Path(sweep_dir)
    uid = (records.read_manifest(sweep_dir) or {}).get("uid")
    if uid is None:
        return [
            f"no W&B sweep run: {sweep_dir} has no {records.SWEEP} with the sweep's uid (its W&B runs' ids hold it)"
        ]
    cannot = records.unwritable(sweep_dir)
    if cannot:  # W&B would write it elsewhere (a temporary folder), where `sync` never looks
        return [f"no W&B sweep run: its files go into {sweep_dir}, which cannot be written ({cannot})"]
    run_id = f"{uid}-sweep"
    try:
        import wandb

        runs = load_sweep(sweep_dir)
        results = table.table_view(sweep_dir, runs)  # what every row shares is the summary's `ran`, not a column
        run = view_run(
            conf, sweep_dir, run_id, "sweep", group=records.group_of(sweep_dir), name=f"{sweep_dir.name}-sweep"
        )
        plain = dataclasses.replace(results, shared={})
        run.log({"results": wandb.Table(columns=plain.fields, data=plain.records)})  # numbers W&B sorts
        done = [r for r in runs if r.state == records.DONE and r.summary]
        rows = speedup_rows(sweep_dir, done) if done else []  # a sweep whose every run failed has none
        columns = ["configuration", "baseline", "speed-up", "low", "high", "word", "level", "interval", "flag"]
        run.log({"speedups": wandb.Table(columns=columns, data=rows)})
        header, explained = explain.table(explain.views(sweep_dir, runs))
        if explained:
            run.log({EXPLAIN_TABLE: wandb.Table(columns=header, data=explained)})
        for name, view in published_tables(sweep_dir):
            run.log({name: wandb.Table(columns=view.fields, data=view.records)})
        artifact = wandb.Artifact(f"records-{sweep_dir.name}", type="perfsweep-records")
        states = [r.state for r in runs]
        counts = {state: states.count(state) for state in (records.DONE, records.FAILED)}
        # the tables' numbers need what ran and where, and the flags beside them, as the terminal's table says them
        said = {key: redact_text(value) for key, value in results.shared.items()}  # ran
        flags = redact_text("\n".join(results.flags))
        run.summary.update({"runs": len(runs), **counts, **said, "flags": flags})
        with tempfile.TemporaryDirectory(prefix="perfsweep-records-") as staging:
            for path in record_files(sweep_dir):
                name = str(path.relative_to(sweep_dir))
                copy = redacted_copy(path, Path(staging) / name)
                if copy is not None:
                    artifact.add_file(str(copy), name=name)
            run.log_artifact(artifact)
            run.finish()
    except Exception as error:  # W&B is a view of the records: its failure loses nothing
        return [f"wandb sweep run failed: {type(error).__name__}: {error}"]
    return []


def offline_runs(sweep_dir: Path) -> list[Path]:
    """The sweep's offline W&B runs: its runs', then its own; not those of a sweep inside it (explain's)."""
    runs = [p for p in Path(sweep_dir).glob("*/wandb/offline-run-*") if not (p.parents[1] / records.SWEEP).is_file()]
    return sorted(runs) + sorted(Path(sweep_dir).glob("wandb/offline-run-*"))


def nothing_to_sync(sweep_dir: Path, conf: TrackerConf) -> str:
    """Why the sweep has no offline W&B run to upload, where it has none; '' where it has some."""
    if offline_runs(sweep_dir):
        return ""
    why = " (it ran with tracker.mode=disabled)" if conf.mode == "disabled" else ""
    return f"{sweep_dir}: no offline W&B runs to sync{why}"


def sync(sweep_dir: Path, conf: TrackerConf) -> int:
    """Upload the sweep's offline W&B runs with `wandb sync` into conf's entity and project.

    Each run gets conf.timeout_s.
    The caller has checked the key and the server.
    """
    if none := nothing_to_sync(sweep_dir, conf):
        print(none)
        return 0
    return sync_runs(offline_runs(sweep_dir), conf, f"{user_command()} sync {sweep_dir}")


def sync_runs(runs: list[Path], conf: TrackerConf, again: str) -> int:
    """`wandb sync` of the offline `runs`, conf.timeout_s each; its exit status. `again` is the command that
    uploads what it could not."""
    cli = Path(sys.executable).with_name("wandb")
    command = [str(cli) if cli.exists() else "wandb", "sync", "--entity", conf.entity, "--project", conf.project]
    limit = conf.timeout_s * len(runs)
    try:
        return subprocess.run([*command, *map(str, runs)], timeout=limit).returncode
    except subprocess.TimeoutExpired:
        print(
            f"perfsweep: wandb sync did not finish within {limit:g} s (tracker.timeout_s per run); what it had not "
            f"uploaded stays offline: run `{again}` again later",
            file=sys.stderr,
        )
        return 1
