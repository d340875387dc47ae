"""Everything that would stop a plan's runs, found before anything is submitted."""

import shutil

from conf.schema import LauncherConf, TrackerConf
from launcher.executor import BACKENDS
from sweeps.plan import Plan
from train.checks import problems as run_problems
from train.tracker import has_wandb_key

TRACKER_MODES = ("offline", "online", "disabled")


def tracker_problems(conf: TrackerConf) -> list[str]:
    if conf.mode not in TRACKER_MODES:
        return [f"tracker.mode={conf.mode!r} is not one of: {', '.join(TRACKER_MODES)}"]
    if conf.mode == "online" and not has_wandb_key():
        return [
            "tracker.mode=online needs a W&B API key (run `wandb login` or set WANDB_API_KEY); "
            "tracker.mode=offline records locally and `wandb sync` uploads later"
        ]
    return []


def launcher_problems(conf: LauncherConf) -> list[str]:
    found = []
    if conf.name not in BACKENDS:
        found.append(f"launcher.name={conf.name!r} is not one of: {', '.join(BACKENDS)}")
    elif not BACKENDS[conf.name].on_this_host and not shutil.which("sbatch"):
        found.append(f"launcher={conf.name} needs Slurm's commands (sbatch, squeue, srun) on PATH; none here")
    for key in ("parallelism", "runs_per_job", "timeout_min"):
        if getattr(conf, key) < 1:
            found.append(f"launcher.{key}={getattr(conf, key)} must be 1 or more")
    return found


def validate(plan: Plan) -> list[str]:
    """Every problem of the plan, each named once with the first run that has it."""
    settings = plan.settings
    found = launcher_problems(settings.launcher) + tracker_problems(settings.tracker)
    backend = BACKENDS.get(settings.launcher.name)
    on_this_host = backend is not None and backend.on_this_host  # else the device is checked where it runs
    first_in: dict[str, str] = {}
    for spec in plan.runs:
        for problem in run_problems(spec.config, on_this_host):
            first_in.setdefault(problem, spec.name)
    return found + [f"{problem} (first in run {name})" for problem, name in first_in.items()]
