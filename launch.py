#!/usr/bin/env python
"""perfsweep's entry point: plan a sweep from Hydra overrides, check it, run it through submitit, print its table.

perfsweep [run] [-m] [OVERRIDE ...]    run sweeps/<sweep>.yaml (default: sweeps/default.yaml), its axes
                                       narrowed or widened by Hydra overrides (model=a,b sweeps)
perfsweep status SWEEP_DIR             each run's state, job id and log
perfsweep resume SWEEP_DIR [launcher.KEY=VALUE ...]   run again every run of the sweep that is not done
perfsweep envs [--dir DIR] [--prune [--unused-days N]]   the environments built for package-version axes
perfsweep table|runs|published|replicates|compare|plots|report|sync ...   the views of the records
                                       (analysis/cli.py; also python -m analysis COMMAND)
perfsweep --help | --cfg job ...       Hydra's own flags, as in any Hydra app

`python launch.py ...` is the same command. This module sits on top of the house: it hands the
launcher the run (train.run.execute) and the run checks (train.checks.problems) as functions.
"""

import argparse
import sys

from analysis.cli import add_commands, parse, run, sweep_folder

MULTIRUN = ("-m", "--multirun")  # every launch is a sweep: accepted, changes nothing


def hydra_flags(args: list[str]) -> int:
    """Hydra's own flags (--help, --cfg job, --info...), answered by Hydra's public entry point, hydra.main. What
    Hydra would not take is refused first, exit status 2: a flag it has not (by its own parser's usage line), an
    override its grammar cannot read."""
    import hydra
    from hydra._internal.utils import get_args_parser

    import conf.schema  # noqa: F401  (registers the schema the configs extend)
    from sweeps.plan import unreadable_overrides

    flags = get_args_parser()
    flags.prog = "perfsweep"
    unreadable = unreadable_overrides(flags.parse_intermixed_args(args).overrides)
    if unreadable:
        print("perfsweep: nothing was run:\n" + "\n".join(f"- {line}" for line in unreadable), file=sys.stderr)
        return 2

    @hydra.main(config_path="conf", config_name="config", version_base="1.3")
    def show(cfg) -> None:
        raise SystemExit("perfsweep runs sweeps itself; Hydra answers only its informational flags (--help, --cfg...)")

    argv, sys.argv = sys.argv, [sys.argv[0], *args]
    try:
        show()
    except SystemExit as done:
        if isinstance(done.code, str):  # our task's refusal: a flag for which Hydra would run a job
            print(done.code, file=sys.stderr)
            return 2
        return 2 if done.code else 0  # Hydra has said what it could not compose
    finally:
        sys.argv = argv
    return 0


def launch_plan(plan_of, argv: list[str], show: bool = True) -> int:
    """Plan (by calling `plan_of`), check, launch; then print the views of the records (unless not `show`), or where
    to follow the jobs."""
    import records
    from analysis.render import text
    from analysis.views import sweep_views
    from analysis.wandb_sweep import log_sweep
    from launcher import envs
    from launcher.runs import Runner
    from launcher.submit import SubmissionFailed, launch
    from launcher.sweepdir import SweepDirError
    from launcher.validate import validate
    from records.lock import SweepLocked
    from sweeps.plan import PlanError
    from train.checks import problems as run_problems
    from train.run import execute, lazy_imports

    plan = None
    try:
        plan = plan_of()
        if not plan.runs:
            print(f"{plan.sweep_dir}: every run is done; nothing to run")
            return 0
        problems = validate(plan, run_problems)
        if problems:
            raise PlanError(problems)
        try:
            pythons = envs.for_plan(plan.runs, plan.settings.launcher.name)
        except envs.EnvError as error:
            raise PlanError([str(error)]) from error
        print(f"sweep {plan.sweep_dir}: {len(plan.runs)} runs, {plan.settings.launcher.parallelism} at a time")
        outcome = launch(plan, argv, Runner(execute, lazy_imports), pythons)
    except (PlanError, SweepDirError, SweepLocked) as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    except SubmissionFailed as error:
        print(f"perfsweep: {error}", file=sys.stderr)
        return 1
    except records.RecordWriteError as error:  # the launcher's own files, before anything was submitted
        print(f"perfsweep: nothing was submitted: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        where = plan.sweep_dir if plan else "SWEEP_DIR"
        print(
            "\nperfsweep: interrupted. Runs on this host were stopped: a running run is pending again (its "
            "unfinished steps are dropped; it starts over), runs not started are pending, done runs are kept. "
            f"`python launch.py resume {where}` (or the same command) runs what is not done.",
            file=sys.stderr,
        )
        return 130
    if outcome.skipped:
        print(f"{len(outcome.skipped)} runs were already done and were not run again")
    if outcome.busy:
        print(f"{len(outcome.busy)} runs are still queued or running from an earlier launch; not submitted again")
    if not outcome.followed and not outcome.job_ids:
        print("nothing submitted")
        return 0
    if not outcome.followed:
        submitted = len(plan.runs) - len(outcome.skipped) - len(outcome.busy)
        print(f"submitted {submitted} runs as jobs {', '.join(outcome.job_ids)}")
        print(f"follow them: python launch.py status {plan.sweep_dir}")
        return 0
    if show:
        print("\n\n".join(text(view) for view in sweep_views(plan.sweep_dir, [spec.name for spec in plan.runs])))
        for warning in log_sweep(plan.sweep_dir, plan.settings.tracker):
            print(f"perfsweep: warning: {warning}", file=sys.stderr)
        print(f"records: {plan.sweep_dir.resolve()}")
    return 1 if outcome.failed else 0


AUTO = "repeats=auto"


def launch_rounds(overrides: list[str], argv: list[str]) -> int:
    """repeats=auto: launch the sweep's rounds up to each look of the schedule (analysis/rounds.py), look, and go on
    until every comparison is decided or a cap is reached; then print the views and what stayed undecided."""
    import time

    import records
    from analysis import rounds
    from analysis.render import text
    from analysis.views import sweep_views
    from analysis.wandb_sweep import log_sweep
    from sweeps.plan import PlanError, build_plan

    base = [o for o in overrides if o != AUTO]
    began = time.monotonic()
    try:
        first = build_plan([*base, "repeats=1"], partial=True)
    except PlanError as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    auto = first.settings.auto
    launcher = first.settings.launcher
    if not (launcher.wait or (launcher.wait is None and launcher.name != "slurm")):
        print(
            f"perfsweep: nothing was run:\n- {AUTO} looks at each round's records before the next: it needs "
            "launcher.wait=true (on Slurm, the launch follows each round's array)",
            file=sys.stderr,
        )
        return 2
    looks = rounds.schedule(auto.max_runs)
    failed, last_look, capped = False, None, f"{auto.max_runs} runs per configuration (auto.max_runs)"
    for k in looks:
        plan = build_plan([*base, f"repeats={k}"], partial=True)
        status = launch_plan(lambda plan=plan: plan, argv, show=False)
        if status not in (0, 1):
            return status
        failed = failed or status == 1
        names = [s.name for s in plan.runs]
        done = [r for r in records.load_sweep(plan.sweep_dir, names) if r.state == records.DONE]
        last_look = rounds.look(done, k, auto.half_width, len(looks))
        print(last_look.line())
        if last_look.met:
            break
        if time.monotonic() - began > 60 * auto.max_minutes and k != looks[-1]:
            capped = f"{auto.max_minutes:g} min (auto.max_minutes)"
            break
    print("\n\n".join(text(view) for view in sweep_views(plan.sweep_dir, names)))
    print("\n".join(rounds.summary(last_look, len(done), (time.monotonic() - began) / 60, capped)))
    for warning in log_sweep(plan.sweep_dir, plan.settings.tracker):
        print(f"perfsweep: warning: {warning}", file=sys.stderr)
    print(f"records: {plan.sweep_dir.resolve()}")
    return 1 if failed else 0


def run_sweep(args: argparse.Namespace) -> int:
    overrides = [a for a in args.overrides if a not in MULTIRUN]
    if any(a.startswith("-") for a in overrides):
        return hydra_flags(args.overrides)
    from sweeps.plan import build_plan

    if AUTO in overrides:
        return launch_rounds(overrides, args.argv)
    return launch_plan(lambda: build_plan(overrides, partial=True), args.argv)


def show_status(args: argparse.Namespace) -> int:
    from launcher.status import render

    print(render(args.sweep_dir))
    return 0


def resume(args: argparse.Namespace) -> int:
    """Run what is not done of the sweep's recorded plan; a sweep launched with repeats=auto then goes on with its
    rounds (its launch's overrides, and these)."""
    import records
    from launcher.sweepdir import recorded_plan

    launches = (records.read_manifest(args.sweep_dir) or {}).get("launches", [])
    launched = [launch.get("argv", []) for launch in launches if launch.get("argv", [])[:1] != ["resume"]]
    auto = launched[-1] if launched and AUTO in launched[-1] else None  # the sweep's last launch, not a resume
    status = launch_plan(lambda: recorded_plan(args.sweep_dir, args.overrides), args.argv, show=auto is None)
    if auto is None or status not in (0, 1):
        return status
    return max(status, launch_rounds([*(a for a in auto if a not in MULTIRUN), *args.overrides], auto))


def show_envs(args: argparse.Namespace) -> int:
    """The cached environments (launcher/envs.py), or, with --prune, remove them."""
    import datetime
    from pathlib import Path

    from launcher import envs

    cache = Path(args.dir).expanduser() if args.dir else envs.default_dir()
    if args.prune:
        removed = envs.prune(cache, args.unused_days)
        print(f"{cache}: removed {len(removed)} environments, {sum(env.own_mb for env in removed):.0f} MB freed")
        return 0
    listed = envs.cached(cache)
    print(f"{cache}: {len(listed)} environments, {sum(env.own_mb for env in listed):.0f} MB their own")
    for env in listed:
        used = datetime.datetime.fromtimestamp(env.last_used).strftime("%Y-%m-%d %H:%M")
        sizes = f"{env.size_mb:.0f} MB ({env.own_mb:.0f} MB its own)"
        print(f"{env.name}  {env.requested}  {sizes}  built {env.built_at}  last used {used}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="perfsweep", description=__doc__.splitlines()[0], add_help=False)
    commands = top.add_subparsers(title="commands", required=True, metavar="COMMAND")
    sweep = commands.add_parser("run", add_help=False, help="run a sweep (the default command)")
    sweep.add_argument("overrides", nargs="*", help="Hydra overrides; --help: Hydra's help")
    sweep.set_defaults(handler=run_sweep)
    status = commands.add_parser("status", help="each run's state, job id and log")
    status.add_argument("sweep_dir", type=sweep_folder)
    status.set_defaults(handler=show_status)
    again = commands.add_parser("resume", help="run again every run of the sweep that is not done")
    again.add_argument("sweep_dir", type=sweep_folder)
    again.add_argument("overrides", nargs="*", help="launcher.KEY=VALUE or tracker.KEY=VALUE")
    again.set_defaults(handler=resume)
    cached = commands.add_parser("envs", help="the environments built for package-version axes: list or remove")
    cached.add_argument("--dir", help="the cache (env.dir); default: ~/.cache/perfsweep/envs")
    cached.add_argument("--prune", action="store_true", help="remove the environments (see --unused-days)")
    cached.add_argument("--unused-days", type=float, default=0.0, help="with --prune: only those unused this long")
    cached.set_defaults(handler=show_envs)
    add_commands(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # No command: run a sweep. Its words go to it as they are, Hydra's flags (--help, --cfg...) included.
    if not argv or argv[0].startswith("-") or "=" in argv[0]:
        argv = ["run", *argv]
    words = ["run", "--", *argv[1:]] if argv[0] == "run" else argv
    args = parse(parser(), words)
    args.argv = argv[1:] if argv[0] == "run" else argv
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
