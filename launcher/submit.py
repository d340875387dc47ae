"""Runs a plan through a submitit executor, `parallelism` runs at a time, skipping runs already done."""

import os
import time
from dataclasses import dataclass
from pathlib import Path

import submitit

from conf.schema import LauncherConf
from launcher import sweepdir
from launcher.progress import Progress
from sweeps.plan import Plan
from sweeps.spec import RunSpec
from train import records
from train.run import execute

PROJECT_ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.5


@dataclass
class Outcome:
    """How a launch ended: the runs it ran by final state, and those it skipped as already done."""

    states: dict[str, str]
    skipped: list[str]

    @property
    def failed(self) -> list[str]:
        return [name for name, state in self.states.items() if state != "done"]


def make_executor(conf: LauncherConf, folder: Path, gpus_per_run: int) -> submitit.Executor:
    executor = submitit.AutoExecutor(folder=folder, cluster=conf.name)
    executor.update_parameters(timeout_min=conf.timeout_min, gpus_per_node=gpus_per_run)
    return executor


def _gpus_per_run(conf: LauncherConf) -> int:
    if conf.gpus_per_run is not None:
        return conf.gpus_per_run
    import torch

    return 1 if torch.cuda.is_available() else 0


def _detail(job: submitit.Job, spec_dir: Path) -> tuple[str, str]:
    """Final state and a one-line detail, from the records first and submitit second."""
    status = records.read_status(spec_dir)
    if status["state"] == "done":
        summary = records.read_json(spec_dir / records.SUMMARY)
        return "done", f"step {summary['median_ms']['step_ms']:.1f} ms, {summary['samples_per_s']:.1f} samples/s"
    if status["state"] == "failed":
        return "failed", f"{status['error']['type']}: {status['error']['message'].splitlines()[0][:200]}"
    error = job.exception()
    reason = str(error).strip().splitlines()[-1][:200] if error else "ended without records"
    records.write_status(
        spec_dir,
        "failed",
        finished_at=records.now(),
        error={"type": "LostRun", "message": reason, "traceback": str(error)},
    )
    return "failed", reason


def launch(plan: Plan, argv: list[str]) -> Outcome:
    """Submit every run of `plan` that is not done yet and follow them until they end."""
    conf = plan.settings.launcher
    manifest = sweepdir.open_sweep(plan, argv)
    todo = [spec for spec in plan.runs if not sweepdir.is_done(plan, spec)]
    skipped = sorted({spec.name for spec in plan.runs} - {spec.name for spec in todo})
    for spec in todo:
        sweepdir.run_dir(plan, spec).mkdir(exist_ok=True)
        records.write_json(sweepdir.run_dir(plan, spec) / records.CONFIG, spec.record())
        records.write_status(sweepdir.run_dir(plan, spec), "pending", queued_at=records.now())
    # Runs import perfsweep's modules by name, wherever the launch was started from.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    executor = make_executor(conf, plan.sweep_dir / ".submitit", _gpus_per_run(conf))
    progress = Progress(len(todo))
    states: dict[str, str] = {}
    active: dict[submitit.Job, RunSpec] = {}
    queue = list(todo)
    try:
        while queue or active:
            while queue and len(active) < conf.parallelism:
                spec = queue.pop(0)
                job = executor.submit(
                    execute, spec, sweepdir.run_dir(plan, spec), sweepdir.tracker_id(manifest, spec), conf.parallelism
                )
                active[job] = spec
                progress.started(spec)
            for job in [j for j in active if j.done()]:
                spec = active.pop(job)
                states[spec.name], detail = _detail(job, sweepdir.run_dir(plan, spec))
                progress.ended(spec, states[spec.name], detail)
            progress.tick()
            time.sleep(POLL_S if active else 0)
    finally:
        for job in active:
            job.cancel(check=False)
    return Outcome(states, skipped)
