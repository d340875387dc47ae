"""Hydra's own flags (--help, --info...), answered by Hydra itself.

--cfg job shows the config of a launch's first run.
"""

import shutil
import sys
from collections.abc import Callable
from pathlib import Path


def as_settings(extra: list[str], words: list[str] | None = None) -> str:
    """'; a setting is KEY=VALUE, without dashes: repeats=3' for `--repeats=3` or `--repeats 3`; else ''.

    The value of `--repeats 3` is the word after it in `words` (default: `extra`).
    """
    first = extra[0] if extra else ""
    key, equals, value = first[2:].partition("=")
    if not first.startswith("--") or not key.isidentifier():
        return ""
    words = words or extra
    after = words[words.index(first) + 1 : words.index(first) + 2]
    value = value if equals else next((w for w in after if not w.startswith("-") and "=" not in w), "VALUE")
    return f"; a setting is KEY=VALUE, without dashes: {key}={value}"


def hydra_flags(args: list[str], command_list: Callable[[], str]) -> int:
    """Hydra's own flags (--help, --cfg hydra, --info...), answered by Hydra's public entry point, hydra.main.

    What Hydra would not take is refused first, with exit status 2:

    - a flag it has not, by its own parser's usage line;
    - an override its grammar cannot read.

    --help lists the commands: `command_list()`, as ${perfsweep.commands:} of conf/config.yaml.
    It lists the user's config dir's options with perfsweep's, then the sweep files.
    The user's config dir is the first of them, as Hydra's --config-dir.
    """
    import hydra
    from hydra._internal.utils import get_args_parser
    from omegaconf import OmegaConf

    import perfsweep.conf.schema  # noqa: F401  (registers the schema the configs extend)
    from perfsweep.sweeps.plan import PlanError, available_sweeps, config_dirs, unreadable_overrides

    OmegaConf.register_new_resolver("perfsweep.commands", command_list, replace=True)
    flags = get_args_parser()
    flags.prog = "perfsweep"
    known, rest = flags.parse_known_intermixed_args(args)
    if rest:  # argparse would name the overrides after an unknown flag too
        unknown = [a for a in rest if a.startswith("-")]
        flags.error(f"unrecognized arguments: {' '.join(unknown) or ' '.join(rest)}{as_settings(unknown, args)}")
    overrides = known.overrides
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
    args = [*flags_only, *as_hydra_takes(overrides, dirs), *(["--config-dir", str(config_dir(dirs))] if dirs else [])]

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


def config_dir(dirs: tuple[Path, ...]) -> Path:
    """The folder Hydra's --config-dir names.

    It is a copy of the option files of the user's first config dir, as deep as a repro command reads them.

    Its sweep files are left out: Hydra would list `sweeps` as a group.
    No override selects it: sweep=NAME does.
    Some option files give a `_target_` its arguments beside it.
    Those are moved under `kwargs` (compose.converted), as a launch composes them.
    Hydra searches --config-dir first, so the file as written would come first otherwise.
    """
    import hashlib

    from perfsweep.records.repro import CONFIG_DEPTH
    from perfsweep.sweeps.compose import converted, scratch

    moved = converted(dirs)
    if moved is None and not (dirs[0] / "sweeps").is_dir():
        return dirs[0]
    named = hashlib.sha1(f"{dirs[0].resolve()}\0{moved}".encode()).hexdigest()[:12]
    whole = Path(scratch().name) / f"{named}-whole"
    if not whole.is_dir():
        for glob in CONFIG_DEPTH:
            for path in dirs[0].glob(glob):
                if path.is_file() and path.relative_to(dirs[0]).parts[0] != "sweeps":
                    (whole / path.relative_to(dirs[0])).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, whole / path.relative_to(dirs[0]))
        if moved is not None:
            shutil.copytree(moved, whole, dirs_exist_ok=True)
    return whole


def job_config_asked(words: list[str]) -> list[str] | None:
    """The overrides beside Hydra's `--cfg job` (or `-c job`) as the one flag.

    None for any other flags.
    """
    words = [part for word in words for part in (("--cfg", "job") if word == "--cfg=job" else (word,))]
    flags = [index for index, word in enumerate(words) if word.startswith("-")]
    if len(flags) != 1 or words[flags[0]] not in ("--cfg", "-c") or words[flags[0] + 1 : flags[0] + 2] != ["job"]:
        return None
    return words[: flags[0]] + words[flags[0] + 2 :]


def show_job_config(overrides: list[str]) -> int:
    """The YAML config of the launch's first run.

    A line above names what the other runs differ in.

    Hydra alone would show its composition without the sweep file's params; the runs take them.
    What the planner refuses is refused, with exit status 2; the runs' own checks wait for a launch.
    With repeats=auto, the first run is that of its first look, which runs without a budget.
    """
    import dataclasses

    from omegaconf import OmegaConf

    from perfsweep.analysis.statistics.rounds import schedule
    from perfsweep.records import AUTO, flatten
    from perfsweep.sweeps.plan import PlanError, build_plan

    try:
        if AUTO in overrides:  # planned as commands/auto.py plans its first look
            base = [o for o in overrides if o != AUTO]
            looks = schedule(build_plan([*base, "repeats=1"]).settings.auto.max_runs)
            overrides = [*base, f"repeats={looks[0]}", "launcher.budget_s=null"]
        plan = build_plan(overrides)
    except PlanError as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    flat = [flatten(dataclasses.asdict(spec.config)) for spec in plan.runs]
    differ = {key: list(dict.fromkeys(str(run.get(key)) for run in flat)) for key in flat[0]}
    swept = [f"{key} ({', '.join(values)})" for key, values in differ.items() if len(values) > 1]
    others = f"; the others differ in {', '.join(swept)}" if swept else ""
    for notice in plan.notices:
        print(f"perfsweep: {notice}", file=sys.stderr)
    which = f"the first of the sweep's {len(plan.runs)} runs" if len(plan.runs) > 1 else "the sweep's one run"
    print(f"# {which}, {plan.runs[0].name}{others}")
    print(OmegaConf.to_yaml(OmegaConf.structured(plan.runs[0].config)), end="")
    return 0
