"""Everything that would stop a plan's runs, found before anything is submitted."""

import dataclasses
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from perfsweep.conf.schema import LauncherConf, RunConf
from perfsweep.conf.tracking import tracker_problems
from perfsweep.launcher.backends import BACKENDS, isolation
from perfsweep.launcher.backends.local import UNLIMITED_MIN, local_gpus, pinned_gpus
from perfsweep.launcher.backends.slurm import cluster_max_array_size
from perfsweep.sweeps.plan import Plan

# What is wrong with one run's config (train.checks.problems, handed over by launch.py); the device is checked
# only where the run will execute on this host.
RunChecks = Callable[[RunConf, bool], list[str]]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def control_characters(conf: LauncherConf) -> list[str]:
    """Launcher strings with a control character: a newline in a Slurm option would end the #SBATCH block
    and run the rest as a shell command (and sbatch would ignore the options after it)."""
    texts = {f"launcher.{f.name}": getattr(conf, f.name) for f in dataclasses.fields(conf)}
    texts |= {f"launcher.setup[{i}]": line for i, line in enumerate(conf.setup)}
    texts |= {f"launcher.srun_args[{i}]": arg for i, arg in enumerate(conf.srun_args)}
    for key, value in conf.sbatch_extra.items():
        texts |= {f"launcher.sbatch_extra key {key!r}": key, f"launcher.sbatch_extra.{key}": value}
    return [
        f"{where}={text!r} holds a control character (a newline, a tab...): launcher settings take none"
        for where, text in texts.items()
        if isinstance(text, str) and _CONTROL.search(text)
    ]


def path_control_characters(plan: Plan) -> list[str]:
    """The paths every job's command or script holds (its sweep folder, the Python it starts), checked as the
    launcher's strings are: a newline in them would end the #SBATCH block as surely."""
    runs_dir, folder = plan.settings.runs_dir, str(plan.sweep_dir.resolve())
    problems = []
    if _CONTROL.search(runs_dir):
        problems.append(f"runs_dir={runs_dir!r} holds a control character (a newline, a tab...): paths take none")
    elif _CONTROL.search(folder):
        problems.append(f"the sweep folder {folder!r} (runs_dir in the working directory) holds a control character")
    if _CONTROL.search(sys.executable):
        problems.append(f"the Python that jobs run, {sys.executable!r}, holds a control character")
    return problems


SLURM_COMMANDS = ("sbatch", "squeue", "srun")


def launcher_problems(conf: LauncherConf) -> list[str]:
    problems = control_characters(conf)
    missing = [command for command in SLURM_COMMANDS if not shutil.which(command)]
    if not BACKENDS[conf.name].on_this_host and missing:
        problems.append(
            f"launcher={conf.name} needs Slurm's commands ({', '.join(SLURM_COMMANDS)}) on PATH; not found here: "
            f"{', '.join(missing)}"
        )
    elif not BACKENDS[conf.name].on_this_host and not conf.max_array_size:
        try:
            cluster_max_array_size()
        except ValueError as error:
            problems.append(str(error))
    if BACKENDS[conf.name].on_this_host and conf.wait is False:
        problems.append(
            f"launcher.wait=false with launcher={conf.name}: its runs run under this launcher, which follows them to "
            "their end; wait=false is for launcher=slurm, whose jobs outlive the launcher"
        )
    for key in ("parallelism", "runs_per_job"):
        if getattr(conf, key) < 1:
            problems.append(f"launcher.{key}={getattr(conf, key)} must be 1 or more")
    for key in ("max_array_size", "cpus_per_task", "mem_gb"):
        if getattr(conf, key) is not None and getattr(conf, key) < 1:
            problems.append(f"launcher.{key}={getattr(conf, key)} must be 1 or more (or null: the cluster's)")
    if conf.gpus_per_node is not None and conf.gpus_per_node < 0:
        problems.append(f"launcher.gpus_per_node={conf.gpus_per_node} must be 0 or more (or null: see conf/schema.py)")
    if not 0 < conf.timeout_min <= UNLIMITED_MIN:  # NaN included
        problems.append(
            f"launcher.timeout_min={conf.timeout_min:g} must be positive and at most {UNLIMITED_MIN} (a year), in "
            "minutes (0.5 is 30 s)"
        )
    if conf.timeout_retries < 0:
        problems.append(f"launcher.timeout_retries={conf.timeout_retries} must be 0 or more")
    if conf.gpus is not None and (
        conf.name != "local" or len(set(conf.gpus)) != len(conf.gpus) or min(conf.gpus, default=0) < 0
    ):
        problems.append(
            f"launcher.gpus={conf.gpus} must list distinct GPU indices (0, 1...) for launcher=local, e.g. "
            "launcher.gpus=[0,1]"
        )
    if conf.isolation == "fork" and not hasattr(os, "fork"):
        problems.append(
            "launcher.isolation=fork needs os.fork, which this platform lacks: use launcher.isolation=spawn"
        )
    if conf.poll_s is not None and conf.poll_s <= 0:
        problems.append(f"launcher.poll_s={conf.poll_s} must be positive (or null: 0.5 s here, 5 s on Slurm)")
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


def ranks_problems(plan: Plan) -> list[str]:
    """What the launcher cannot give runs across ranks: their processes (launcher=debug runs every run in the
    launcher's), more nodes than one (launcher=slurm alone has them), a GPU for each rank of a local run."""
    conf = plan.settings.launcher
    across = [spec.config for spec in plan.runs if spec.config.dist.name != "none"]
    names = ",".join(sorted({str(cfg.dist.name) for cfg in across}))
    problems = []
    if across and conf.name == "debug":
        problems.append(
            f"dist={names} with launcher=debug: a run's ranks are processes of their own, and launcher=debug runs "
            "every run in this one; use launcher=local (or slurm)"
        )
    if conf.nodes < 1 or (conf.nodes > 1 and conf.name != "slurm"):
        problems.append(f"launcher.nodes={conf.nodes} with launcher={conf.name}: must be 1 (launcher=slurm: 1 or more)")
    elif conf.nodes > 1 and not across:
        problems.append(
            f"launcher.nodes={conf.nodes} is for runs across ranks (dist=ddp or dist=fsdp, dist.world_size ranks a "
            "node); these runs are one process each"
        )
    given = (1 if pinned_gpus(conf) else conf.gpus_per_node or 0) if conf.name == "local" and local_gpus() else None
    wide = max((cfg.dist.world_size for cfg in across if cfg.device != "cpu"), default=1)
    if given is not None and wide > given:
        problems.append(
            f"dist.world_size={wide} on GPUs: a rank needs a GPU of its own, and launcher=local gives each run "
            f"{given}; launcher.gpus_per_node={wide} gives a run this host's first {wide} (or device=cpu)"
        )
    elif given is not None and wide > 1 and conf.parallelism > 1:
        problems.append(
            f"launcher.parallelism={conf.parallelism} with dist.world_size={wide} on GPUs: each run is given this "
            f"host's first {given} GPUs, so runs at once would share them; use launcher.parallelism=1"
        )
    return problems


def validate(plan: Plan, run_problems: RunChecks) -> list[str]:
    """Every problem of the plan, each named once with the first run that has it and where its value was set."""
    settings = plan.settings
    problems = launcher_problems(settings.launcher) + tracker_problems(settings.tracker) + path_control_characters(plan)
    problems += writable(plan.sweep_dir)
    if settings.repeats > 1 and settings.launcher.runs_per_job > 1 and isolation(settings.launcher) != "fork":
        problems.append(
            f"repeats={settings.repeats} with launcher.runs_per_job={settings.launcher.runs_per_job} and isolation="
            f"{isolation(settings.launcher)}: replicates must each start a fresh process (cuDNN autotuning, allocator "
            "and compile caches); use runs_per_job=1 or launcher.isolation=fork"
        )
    if settings.repeats > 1 and settings.launcher.name == "debug":
        problems.append(
            f"repeats={settings.repeats} with launcher=debug: the debug launcher runs every run in this process, so "
            "its replicates would share one process's state and compare nothing between processes; use repeats=1 "
            "(one run per configuration, no verdicts) or launcher=local"
        )
    problems += ranks_problems(plan)
    problems = list(plan.problems) + [plan.explain(problem) for problem in problems]
    on_this_host = BACKENDS[settings.launcher.name].on_this_host  # else the device is checked where it runs
    first_in: dict[str, str] = {}
    for spec in plan.runs:
        for problem in run_problems(spec.config, on_this_host):
            first_in.setdefault(problem, spec.name)
    return problems + [f"{plan.explain(problem)} (first in run {name})" for problem, name in first_in.items()]
