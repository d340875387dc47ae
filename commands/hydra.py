"""Hydra's own flags (--help, --cfg job, --info...), answered by Hydra itself."""

import sys


def hydra_flags(args: list[str]) -> int:
    """Hydra's own flags (--help, --cfg job, --info...), answered by Hydra's public entry point, hydra.main.

    What Hydra would not take is refused first, with exit status 2:

    - a flag it has not, by its own parser's usage line;
    - an override its grammar cannot read.

    --help lists the user's config dir's options with perfsweep's, then the sweep files.
    The user's config dir is the first of them, as Hydra's --config-dir.
    """
    import hydra
    from hydra._internal.utils import get_args_parser

    import perfsweep.conf.schema  # noqa: F401  (registers the schema the configs extend)
    from perfsweep.sweeps.plan import PlanError, available_sweeps, config_dirs, unreadable_overrides

    flags = get_args_parser()
    flags.prog = "perfsweep"
    overrides = flags.parse_intermixed_args(args).overrides
    unreadable, dirs = unreadable_overrides(overrides), ()
    try:
        dirs = config_dirs(overrides)[0] if not unreadable else ()
    except PlanError as error:
        unreadable = error.problems
    if unreadable:
        print("perfsweep: nothing was run:\n" + "\n".join(f"- {line}" for line in unreadable), file=sys.stderr)
        return 2
    from perfsweep.sweeps.compose import as_hydra_takes

    flags_only = [a for a in args if a not in overrides]
    args = [*flags_only, *as_hydra_takes(overrides, dirs), *(["--config-dir", str(dirs[0])] if dirs else [])]

    @hydra.main(config_path="../conf", config_name="config", version_base="1.3")
    def show(cfg) -> None:
        raise SystemExit("perfsweep runs sweeps itself; Hydra answers only its informational flags (--help, --cfg...)")

    argv, sys.argv = sys.argv, [sys.argv[0], *args]
    try:
        show()
    except SystemExit as done:
        if isinstance(done.code, str):  # our task's refusal: a flag for which Hydra would run a job
            print(done.code, file=sys.stderr)
            return 2
        if done.code:
            return 2  # Hydra has said what it could not compose
    finally:
        sys.argv = argv
    if "--help" in args or "-h" in args:
        print(f"Sweep files (sweep=NAME): {', '.join(available_sweeps(dirs))}")
    return 0
