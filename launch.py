#!/usr/bin/env python
"""perfsweep's entry point: plan a sweep from Hydra overrides, check it, run it through submitit, print its table.

python launch.py [-m] [OVERRIDE ...]      run sweeps/<sweep>.yaml (default: sweeps/default.yaml), its
                                          axes narrowed or widened by Hydra overrides (model=a,b sweeps)
python launch.py table SWEEP_DIR [--csv]  print a sweep's table from its records
python launch.py --help | --cfg job ...   Hydra's own flags, as in any Hydra app
"""

import sys

from hydra._internal.utils import get_args_parser


def hydra_app() -> None:
    """Hydra's own handling of --help, --cfg, --info... (it never calls the task for those flags)."""
    import hydra

    import conf.schema  # noqa: F401  (registers the schema the configs extend)

    @hydra.main(config_path="conf", config_name="config", version_base="1.3")
    def show(cfg) -> None:
        raise RuntimeError("launch.py runs sweeps itself; Hydra only answers its informational flags")

    show()


def run_sweep(overrides: list[str], argv: list[str]) -> int:
    from analysis.table import render
    from launcher.submit import launch
    from launcher.sweepdir import SweepDirError
    from launcher.validate import validate
    from sweeps.plan import PlanError, build_plan

    try:
        plan = build_plan(overrides)
        problems = validate(plan)
        if problems:
            raise PlanError(problems)
        print(f"sweep {plan.sweep_dir}: {len(plan.runs)} runs, {plan.settings.launcher.parallelism} at a time")
        outcome = launch(plan, argv)
    except (PlanError, SweepDirError) as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "\nperfsweep: interrupted; running runs were cancelled. Run the same command again to resume.",
            file=sys.stderr,
        )
        return 130
    if outcome.skipped:
        print(f"{len(outcome.skipped)} runs were already done and were not run again")
    print(render(plan.sweep_dir, names=[spec.name for spec in plan.runs]))
    print(f"records: {plan.sweep_dir.resolve()}")
    return 1 if outcome.failed else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["table"]:
        from analysis.table import main as table

        return table(argv[1:])
    args = get_args_parser().parse_args(argv)
    if args.help or args.hydra_help or args.cfg or args.info or args.shell_completion:
        hydra_app()
        return 0
    return run_sweep(args.overrides, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
