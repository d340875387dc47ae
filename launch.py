#!/usr/bin/env python
"""perfsweep's entry point: plan a sweep from Hydra overrides, check it, run it through submitit, print its table.

python launch.py [-m] [OVERRIDE ...]      run sweeps/<sweep>.yaml (default: sweeps/default.yaml), its
                                          axes narrowed or widened by Hydra overrides (model=a,b sweeps)
python launch.py status SWEEP_DIR         each run's state, job id and log
python launch.py resume SWEEP_DIR         run again every run of the sweep that is not done
python launch.py table SWEEP_DIR [--csv]  print a sweep's table from its records
python launch.py report SWEEP_DIR [--wandb]  write SWEEP_DIR/report.html (and a W&B Report, online)
python launch.py sync SWEEP_DIR           upload the sweep's offline W&B runs (needs a W&B API key)
python launch.py --help | --cfg job ...   Hydra's own flags, as in any Hydra app
"""

import argparse
import sys
from pathlib import Path

from hydra._internal.utils import get_args_parser


def hydra_app() -> None:
    """Hydra's own handling of --help, --cfg, --info... (it never calls the task for those flags)."""
    import hydra

    import conf.schema  # noqa: F401  (registers the schema the configs extend)

    @hydra.main(config_path="conf", config_name="config", version_base="1.3")
    def show(cfg) -> None:
        raise RuntimeError("launch.py runs sweeps itself; Hydra only answers its informational flags")

    show()


def launch_plan(plan_of, argv: list[str]) -> int:
    """Plan (by calling `plan_of`), check, launch; then print the table, or where to follow the jobs."""
    from analysis.table import render, views
    from analysis.wandb_sweep import log_sweep
    from launcher.submit import launch
    from launcher.sweepdir import SweepDirError
    from launcher.validate import validate
    from sweeps.plan import PlanError

    plan = None
    try:
        plan = plan_of()
        if not plan.runs:
            print(f"{plan.sweep_dir}: every run is done; nothing to run")
            return 0
        problems = validate(plan)
        if problems:
            raise PlanError(problems)
        print(f"sweep {plan.sweep_dir}: {len(plan.runs)} runs, {plan.settings.launcher.parallelism} at a time")
        outcome = launch(plan, argv)
    except (PlanError, SweepDirError) as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
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
    print(render(plan.sweep_dir, names=[spec.name for spec in plan.runs]))
    for extra in views(plan.sweep_dir):
        print(f"\n{extra}")
    for warning in log_sweep(plan.sweep_dir, plan.settings.tracker):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"records: {plan.sweep_dir.resolve()}")
    return 1 if outcome.failed else 0


def sweep_dir_command(argv: list[str], name: str, about: str, overrides: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python launch.py {name}", description=about)
    parser.add_argument("sweep_dir", type=Path)
    if overrides:
        parser.add_argument("overrides", nargs="*", help="launcher.KEY=VALUE or tracker.KEY=VALUE")
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        parser.error(f"no sweep folder at {args.sweep_dir}")
    return args


def status(argv: list[str]) -> int:
    from launcher.status import render

    print(render(sweep_dir_command(argv, "status", "each run's state, job id and log").sweep_dir))
    return 0


def resume(argv: list[str]) -> int:
    from launcher.sweepdir import recorded_plan

    args = sweep_dir_command(argv, "resume", "run again every run that is not done", overrides=True)
    return launch_plan(lambda: recorded_plan(args.sweep_dir, args.overrides), ["resume", *argv])


def table(argv: list[str]) -> int:
    from analysis.table import main

    return main(argv)


def report(argv: list[str]) -> int:
    from analysis.report import html_report, save_wandb_report, wandb_report_content
    from analysis.wandb_sweep import NO_KEY, log_sweep, tracker_conf
    from train.tracker import has_wandb_key

    parser = argparse.ArgumentParser(prog="python launch.py report", description="the sweep's report")
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--wandb", action="store_true", help="also create a W&B Report (needs a W&B API key)")
    args = parser.parse_args(argv)
    if not (args.sweep_dir / "sweep.json").is_file():
        parser.error(f"no sweep folder at {args.sweep_dir}")
    if args.wandb and not has_wandb_key():
        print(f"perfsweep: {NO_KEY}", file=sys.stderr)
        return 2
    print(f"report: {html_report(args.sweep_dir)}")
    conf = tracker_conf(args.sweep_dir)
    for warning in log_sweep(args.sweep_dir, conf):
        print(f"warning: {warning}", file=sys.stderr)
    if args.wandb:
        from analysis.load import load_sweep

        phases = next((r.summary["phases"] for r in load_sweep(args.sweep_dir) if r.summary), [])
        content = wandb_report_content(args.sweep_dir.name, conf.project, conf.entity, phases)
        print(f"W&B report: {save_wandb_report(content)}")
    return 0


def sync(argv: list[str]) -> int:
    from analysis.wandb_sweep import sync as upload

    return upload(sweep_dir_command(argv, "sync", "upload the sweep's offline W&B runs").sweep_dir)


SUBCOMMANDS = {"status": status, "resume": resume, "table": table, "report": report, "sync": sync}


def main(argv: list[str]) -> int:
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv[1:])
    args = get_args_parser().parse_args(argv)
    if args.help or args.hydra_help or args.cfg or args.info or args.shell_completion:
        hydra_app()
        return 0
    from sweeps.plan import build_plan

    return launch_plan(lambda: build_plan(args.overrides, strict=False), argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
