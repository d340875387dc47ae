"""Streams a run's records to Weights & Biases; a failure here never fails the run.

W&B is a view of the records.
The W&B run starts after the measured window.
It gets the rows from the buffer the records are written from.
So no timed step overlaps a `wandb.log` call or W&B's service process.
A `wandb.log` call takes ~150 us of host time, and sometimes a blocking flush.
Every W&B error becomes a warning in the run's status.
"""

import shutil
import threading
from pathlib import Path
from typing import Any

from perfsweep import records, user_command
from perfsweep.conf.schema import TrackerConf
from perfsweep.conf.tracking import WANDB_SETTINGS
from perfsweep.records import flatten
from perfsweep.records.redact import redact
from perfsweep.records.repro import code_of
from perfsweep.sweeps.spec import RunSpec, run_fields


class Tracker:
    def __init__(self, conf: TrackerConf, spec: RunSpec, run_dir: Path, tracker_id: str):
        self.warnings: list[str] = []
        self.run = None
        self.warm_keys: set[str] = set()  # the warm-up steps' keys it logged (`logged`)
        if conf.mode == "disabled":
            return
        try:
            import wandb

            self._replace_earlier(run_dir, tracker_id)
            self.run = wandb.init(
                mode=conf.mode,
                project=conf.project,
                entity=conf.entity,
                group=records.group_of(run_dir.parent),
                name=spec.name,
                id=tracker_id,
                resume="allow",
                reinit="create_new",  # a run of its own, even beside a run left behind (runs_per_job > 1)
                config=self._config(spec, run_dir),
                tags=sorted(set(spec.axes.values())),
                dir=str(run_dir),
                settings=wandb.Settings(
                    x_disable_stats=not conf.system_metrics, init_timeout=conf.timeout_s, **WANDB_SETTINGS
                ),
            )
            self.run.define_metric("step")
            self.run.define_metric("*", step_metric="step")
        except Exception as error:  # W&B must not take the run down with it
            self._warn("init", error)

    @staticmethod
    def _config(spec: RunSpec, run_dir: Path) -> dict[str, Any]:
        """The run's fields, its env.json as env.* keys and its repro command, redacted.

        env.json holds the versions, device, host and code revision.
        """
        env_record = records.read_record(run_dir / records.ENV)
        environment = flatten(env_record, "env.") if isinstance(env_record, dict) else {}
        status = records.read_status(run_dir)
        code = code_of(status.code_under_test, env_record if isinstance(env_record, dict) else None, status.code)
        repro = records.Repro(spec.repro, code) if spec.repro else None
        shown = {"repro": repro.redacted().line()} if repro else {}
        return {**redact({**flatten(run_fields(spec.config)), "run_id": spec.run_id, **environment}), **shown}

    @staticmethod
    def _replace_earlier(run_dir: Path, tracker_id: str) -> None:
        """Remove the offline W&B runs with the same id that an earlier start of this run left.

        An earlier start is one that was requeued or resumed.
        The records are rebuilt from scratch, so the W&B run is too, rather than forked into two.
        """
        for earlier in (run_dir / "wandb").glob(f"offline-run-*-{tracker_id}"):
            shutil.rmtree(earlier, ignore_errors=True)

    def _warn(self, what: str, error: Exception) -> None:
        self.warnings.append(f"wandb {what} failed: {type(error).__name__}: {error}")
        self.run = None

    def log_rows(self, rows: list[dict[str, Any]]) -> None:
        if self.run is None:
            return
        try:
            for row in rows:
                shown = logged(row)
                self.warm_keys |= {key for key in shown if key.startswith(WARMUP)}
                self.run.log(shown)
        except Exception as error:
            self._warn("log", error)

    def finish(self, summary: dict[str, Any], run_dir: Path, failed: bool = False) -> None:
        """Log the summary and state, and the profiler trace as an artifact if the run has one; then close the run.

        W&B sums up a logged key by its last value: a phase's (step_ms) is its median over the window instead.
        """
        if self.run is None:
            return
        try:
            import wandb

            state = records.FAILED if failed else records.DONE
            for key in sorted(self.warm_keys):  # W&B sums a key up by its last value: no warm-up step's
                del self.run.summary[key]
            self.run.summary.update(redact({**flatten(summary), **summary.get("median_ms", {}), "state": state}))
            if (run_dir / records.PROFILE).exists():
                artifact = wandb.Artifact(f"profile-{self.run.id}", type="profile")
                artifact.add_file(str(run_dir / records.PROFILE))
                self.run.log_artifact(artifact)
            self.run.finish(exit_code=1 if failed else 0)
        except Exception as error:
            self._warn("finish", error)


WARMUP = "warmup/"  # the prefix of a warm-up step's figures in W&B


def logged(row: dict[str, Any]) -> dict[str, Any]:
    """A step's row as W&B gets it: a warm-up step's figures under `warmup/`.

    A chart of `step_ms` then shows the measured steps alone, as the table's medians take them.
    """
    if not row.get("warmup"):
        return row
    return {key if key in ("step", "warmup") else WARMUP + key: value for key, value in row.items()}


def track(
    conf: TrackerConf,
    spec: RunSpec,
    run_dir: Path,
    tracker_id: str,
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    failed: bool = False,
) -> list[str]:
    """Log a finished run (its rows and summary) to W&B within conf.timeout_s.

    W&B works in a thread of its own.
    The run waits for it at most timeout_s.
    A stalled network or service leaves it behind; the run's records are complete and final.
    `perfsweep sync` uploads it later.

    Returns:
        The warnings, one per W&B failure.
    """
    if conf.mode == "disabled":
        return []
    tracker_warnings: list[str] = []

    def work() -> None:
        tracker = Tracker(conf, spec, run_dir, tracker_id)
        tracker.log_rows(rows)
        tracker.finish(summary, run_dir, failed=failed)
        tracker_warnings.extend(tracker.warnings)

    thread = threading.Thread(target=work, name="wandb", daemon=True)
    thread.start()
    thread.join(conf.timeout_s)
    if thread.is_alive():
        return [
            f"wandb did not finish within tracker.timeout_s={conf.timeout_s:g} s and was left behind: the run's "
            f"records are complete; `{user_command()} sync {run_dir.parent}` uploads its offline W&B run later"
        ]
    return tracker_warnings
