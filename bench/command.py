"""The command line every bench shares: a parser named after the bench, with --dry-run, and its plans checked.

A bench measures for minutes.
--dry-run checks its arguments as a launch would and says what it would measure, in seconds.
"""

import argparse

from perfsweep.launcher.validate import validate
from perfsweep.sweeps.plan import Plan, PlanError, build_plan
from perfsweep.train.checks import problems as run_problems


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
