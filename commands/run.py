"""`perfsweep run` (a sweep, once or in rounds), `status` and `resume`."""

import argparse
import functools
import sys

from perfsweep.commands.launching import MULTIRUN, launch_plan


def run_sweep(args: argparse.Namespace) -> int:
    overrides = [a for a in args.overrides if a not in MULTIRUN]
    if any(a.startswith("-") for a in overrides):
        from perfsweep.commands.hydra import hydra_flags, job_config_asked, show_job_config

        if (rest := job_config_asked(overrides)) is not None:
            return show_job_config(rest)
        return hydra_flags(args.overrides, args.command_list)
    from perfsweep.records import AUTO
    from perfsweep.sweeps.keys import given_twice
    from perfsweep.sweeps.plan import build_plan

    for line in given_twice(overrides):
        print(f"perfsweep: warning: {line}", file=sys.stderr)

    if AUTO in overrides:
        from perfsweep.commands.auto import launch_rounds

        return launch_rounds(overrides, args.argv)

    def planned():
        plan = build_plan(overrides, partial=True)
        if plan.runs and plan.settings.sweep_name is None:
            shared_folder(plan)
        return plan

    return launch_plan(planned, args.argv)


def shared_folder(plan) -> None:
    """Warn that this launch's runs join those of earlier launches in the sweep's folder.

    The folder is named by the sweep alone, with no sweep_name.
    `table` of the folder shows them all.
    """
    from perfsweep import records, user_command

    earlier = set((records.read_manifest(plan.sweep_dir) or {}).get("runs", {})) - {s.name for s in plan.runs}
    if earlier:
        print(
            f"perfsweep: warning: {plan.sweep_dir} holds {len(earlier)} run{'s' * (len(earlier) > 1)} of earlier "
            "launches that this one does not plan. Its runs join them there, and "
            f"`{user_command()} table {plan.sweep_dir}` shows them all. sweep_name=NAME gives a launch a folder of "
            "its own.",
            file=sys.stderr,
        )


def show_status(args: argparse.Namespace) -> int:
    from perfsweep.launcher.run_states import render

    shown, status = render(args.sweep_dir)
    print(shown)
    return status


def resume(args: argparse.Namespace) -> int:
    """Run what is not done of the sweep's recorded plan.

    A sweep launched with repeats=auto then goes on with its rounds.
    The rounds take its launch's overrides, and these.
    """
    from perfsweep import records
    from perfsweep.launcher.sweepdir import recorded_plan

    launched = (records.last_launch(args.sweep_dir) or {}).get("argv", [])
    auto = launched if records.AUTO in launched else None
    every = list(records.planned_runs(args.sweep_dir))  # the views show the sweep's done runs too
    plan_of = functools.partial(recorded_plan, args.sweep_dir, args.overrides)
    status = launch_plan(plan_of, args.argv, show=auto is None, shown=every)
    if auto is None or status not in (0, 1):
        return status
    from perfsweep.commands.auto import launch_rounds

    return max(status, launch_rounds([*(a for a in auto if a not in MULTIRUN), *args.overrides], auto))
