"""The command line every bench shares: a parser named after the bench, with --dry-run, and its plans checked.

A bench measures for minutes.
--dry-run checks its arguments as a launch would and says what it would measure, in seconds.
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

from perfsweep import records
from perfsweep.launcher.validate import validate
from perfsweep.records import noise
from perfsweep.sweeps.plan import Plan, PlanError, build_plan
from perfsweep.train.checks import problems as run_problems

ROOT = Path(__file__).resolve().parent.parent


def parser(module: str, doc: str) -> argparse.ArgumentParser:
    """The parser of `python -m perfsweep.bench.<module>`, described by the first line of its docstring."""
    found = argparse.ArgumentParser(prog=f"python -m perfsweep.bench.{module}", description=doc.splitlines()[0])
    found.add_argument("--dry-run", action="store_true", help="check the arguments, say what would be measured, stop")
    return found


def checked(overrides: list[str]) -> Plan:
    """The plan of `overrides`, checked as a launch checks it.

    Raises:
        SystemExit: naming each problem.
    """
    try:
        plan = build_plan(overrides)
        problems = validate(plan, run_problems)
        if problems:
            raise PlanError(problems)
    except PlanError as error:
        raise SystemExit(f"the bench's runs cannot be launched:\n{error}") from None
    return plan


def would(what: str) -> None:
    """What a dry run says instead of measuring."""
    print(f"dry run: would measure {what}")


def launched(args: list[str], runs_dir: Path, name: str) -> tuple[Path, float]:
    """Launch a sweep as a user does.

    Returns:
        The sweep's folder and its wall time in seconds.
    """
    started = time.perf_counter()
    whole = "launcher.budget_s=null"  # a bench counts every round it launches
    command = [sys.executable, str(ROOT / "launch.py"), *args, whole, f"runs_dir={runs_dir}", f"sweep_name={name}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return runs_dir / name, time.perf_counter() - started


def machine(sweep: Path) -> tuple[str, dict]:
    """The machine kind, and what the figures depend on beyond their settings.

    The machine kind names the results folder.
    """
    run = next(r for r in records.load_sweep(sweep) if r.state == records.DONE)
    kind = noise.machine_kind(run.device, bool((run.env or {}).get("gpu")), run.torch_version)
    return kind, {"device": run.device, **run.machine}
