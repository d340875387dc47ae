"""Everything that would stop a plan's runs, found before anything is submitted.

Each check lives beside what it checks.
A setting's values: its dataclass in conf/schema.py (`LauncherConf.problems`, `TrackerConf.problems`).
What a place can run: its backend (`Backend.problems`).
A run's config: train's checks and each workload's `problems`, handed over as `run_problems`.
`validate` collects them all, with where each value came from.
"""

import os
import sys
from collections.abc import Callable
from pathlib import Path

from perfsweep import records
from perfsweep.conf.schema import CONTROL, RunConf, commit_pins
from perfsweep.launcher.backends import backend_for, isolation
from perfsweep.sweeps.plan import Plan

# What is wrong with one run's config (train.checks.problems, handed over by launch.py); the device is checked
# only where the run will execute on this host.
RunChecks = Callable[[RunConf, bool], list[str]]


def path_control_characters(plan: Plan) -> list[str]:
    """The paths every job's command or script holds (its sweep folder, the Python it starts), checked as the
    launcher's strings are: a newline in them would end the #SBATCH block as surely."""
    runs_dir, folder = plan.settings.runs_dir, str(plan.sweep_dir.resolve())
    problems = []
    if CONTROL.search(runs_dir):
        problems.append(f"runs_dir={runs_dir!r} holds a control character (a newline, a tab...): paths take none")
    elif CONTROL.search(folder):
        problems.append(f"the sweep folder {folder!r} (runs_dir in the working directory) holds a control character")
    if CONTROL.search(sys.executable):
        problems.append(f"the Python that jobs run, {sys.executable!r}, holds a control character")
    return problems


def writable(sweep_dir: Path) -> list[str]:
    """Whether the sweep folder can be made and written: its nearest existing ancestor must be writable."""
    existing = sweep_dir.resolve()
    while not existing.exists():
        existing = existing.parent
    if existing.is_dir() and os.access(existing, os.W_OK | os.X_OK):
        return []
    return [
        f"runs_dir={sweep_dir.parent}: cannot write the sweep folder {sweep_dir} ({existing} is not a writable folder)"
    ]


def bisect_folder(sweep_dir: Path) -> list[str]:
    """A sweep folder that holds a bisect's points is the bisect's: a sweep's runs there would hide among them."""
    if not (sweep_dir / records.BISECT).is_file():
        return []
    return [f"{sweep_dir} holds a bisect's points, not a sweep's runs; sweep_name=NAME: a folder of its own"]


def validate(plan: Plan, run_problems: RunChecks) -> list[str]:
    """Every problem of the plan, each named once with the first run that has it and where its value was set."""
    settings = plan.settings
    backend = backend_for(settings.launcher)
    problems = settings.launcher.problems() + backend.problems(plan) + settings.tracker.problems()
    problems += settings.cost.problems()
    problems += path_control_characters(plan)
    problems += writable(plan.sweep_dir) + bisect_folder(plan.sweep_dir)
    if settings.repeats > 1 and settings.launcher.runs_per_job > 1 and isolation(settings.launcher) != "fork":
        problems.append(
            f"repeats={settings.repeats} with launcher.runs_per_job={settings.launcher.runs_per_job} and isolation="
            f"{isolation(settings.launcher)}: replicates must each start a fresh process (cuDNN autotuning, allocator "
            "and compile caches); use runs_per_job=1 or launcher.isolation=fork"
        )
    problems = list(plan.problems) + [plan.explain(problem) for problem in problems]
    on_this_host = backend.on_this_host  # else the device is checked where it runs
    first_in: dict[str, str] = {}
    for spec in plan.runs:
        if commit_pins(spec.config.env.packages):  # its code is a commit's, imported only where it is installed
            continue
        for problem in run_problems(spec.config, on_this_host):
            first_in.setdefault(problem, spec.name)
    return problems + [f"{plan.explain(problem)} (first in run {name})" for problem, name in first_in.items()]
