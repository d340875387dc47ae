#!/usr/bin/env python
"""perfsweep's entry point: plan a sweep from Hydra overrides, check it, run it through submitit, print its table.

perfsweep [run] [-m] [OVERRIDE ...]    run sweeps/<sweep>.yaml (default: sweeps/default.yaml), its axes
                                       narrowed or widened by Hydra overrides (model=a,b sweeps)
perfsweep --config-dir DIR [OVERRIDE ...]   the same with a folder of the user's sweep files and options
perfsweep status SWEEP_DIR             each run's state, job id and log
perfsweep resume SWEEP_DIR [launcher.KEY=VALUE ...]   run again every run of the sweep that is not done
perfsweep envs [--dir DIR] [--prune [--unused-days N]]   the environments built for package-version axes
perfsweep bisect --good A --bad B [--package NAME] [OVERRIDE ...]   the first release of a package (torch by
                                       default) between good and bad that shows the change the sweep measures
perfsweep table|runs|published|replicates|compare|plots|report|sync ...   the views of the records
                                       (analysis/cli.py; also python -m perfsweep.analysis COMMAND)
perfsweep --help | --cfg job ...       Hydra's own flags, as in any Hydra app

`python launch.py ...` is the same command. This module sits on top of the house: it hands the
launcher the run (train.run.execute) and the run checks (train.checks.problems) as functions.
"""

import argparse
import os
import sys
from pathlib import Path

from perfsweep.analysis.cli import add_commands, parse, run, sweep_folder

MULTIRUN = ("-m", "--multirun")  # every launch is a sweep: accepted, changes nothing


def hydra_flags(args: list[str]) -> int:
    """Hydra's own flags (--help, --cfg job, --info...), answered by Hydra's public entry point, hydra.main. What
    Hydra would not take is refused first, exit status 2: a flag it has not (by its own parser's usage line), an
    override its grammar cannot read. --help lists the user's config dir's options with perfsweep's (Hydra's
    --config-dir: the first of them), then the sweep files."""
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
        if done.code:
            return 2  # Hydra has said what it could not compose
    finally:
        sys.argv = argv
    if "--help" in args or "-h" in args:
        print(f"Sweep files (sweep=NAME): {', '.join(available_sweeps(dirs))}")
    return 0


def launch_plan(plan_of, argv: list[str], show: bool = True, quiet_envs: bool = False) -> int:
    """Plan (by calling `plan_of`), check, build its environments, launch; then print the views of the records
    (unless not `show`), or where to follow the jobs. `quiet_envs`: the environments were built and said before."""
    from perfsweep import records
    from perfsweep.analysis.render import text
    from perfsweep.analysis.views import sweep_views
    from perfsweep.analysis.wandb_sweep import log_sweep
    from perfsweep.launcher import envs
    from perfsweep.launcher.runs import Runner
    from perfsweep.launcher.submit import SubmissionFailed, launch
    from perfsweep.launcher.sweepdir import SweepDirError
    from perfsweep.launcher.validate import validate
    from perfsweep.records.lock import SweepLocked
    from perfsweep.sweeps.plan import PlanError
    from perfsweep.train.checks import problems as run_problems
    from perfsweep.train.dist import task_rank
    from perfsweep.train.run import execute, lazy_imports

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
            say = (lambda line: None) if quiet_envs else print
            pythons = envs.for_plan(plan.runs, plan.settings.launcher.name, say)
        except envs.EnvError as error:
            raise PlanError([str(error)]) from error
        print(f"sweep {plan.sweep_dir}: {len(plan.runs)} runs, {plan.settings.launcher.parallelism} at a time")
        outcome = launch(plan, argv, Runner(execute, imports=lazy_imports, rank=task_rank), pythons)
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

    from perfsweep import records
    from perfsweep.analysis import rounds
    from perfsweep.analysis.render import text
    from perfsweep.analysis.views import sweep_views
    from perfsweep.analysis.wandb_sweep import log_sweep
    from perfsweep.sweeps.plan import PlanError, build_plan

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
    from perfsweep.sweeps.plan import build_plan

    if AUTO in overrides:
        return launch_rounds(overrides, args.argv)

    def planned():
        plan = build_plan(overrides, partial=True)
        if plan.runs and plan.settings.sweep_name is None:
            shared_folder(plan)
        return plan

    return launch_plan(planned, args.argv)


def shared_folder(plan) -> None:
    """Warn that this launch's runs join those of earlier launches in a folder named by the sweep alone (no
    sweep_name): `table` of the folder shows them all."""
    from perfsweep import records

    earlier = set((records.read_manifest(plan.sweep_dir) or {}).get("runs", {})) - {s.name for s in plan.runs}
    if earlier:
        print(
            f"perfsweep: warning: {plan.sweep_dir} holds {len(earlier)} run{'s' * (len(earlier) > 1)} of earlier "
            f"launches that this one does not plan. Its runs join them there, and `perfsweep table {plan.sweep_dir}` "
            "shows them all. sweep_name=NAME gives a launch a folder of its own.",
            file=sys.stderr,
        )


def show_status(args: argparse.Namespace) -> int:
    from perfsweep.launcher.status import render

    print(render(args.sweep_dir))
    return 0


def resume(args: argparse.Namespace) -> int:
    """Run what is not done of the sweep's recorded plan; a sweep launched with repeats=auto then goes on with its
    rounds (its launch's overrides, and these)."""
    from perfsweep import records
    from perfsweep.launcher.sweepdir import recorded_plan

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

    from perfsweep.launcher import envs

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


def one_metric(plan, good: str) -> tuple[str | None, str]:
    """What a bisect of this sweep follows: (the release each point's step time is taken over, for one
    configuration, or None for two that are one against its baseline; the metric in words). BisectError for a
    sweep with any other configurations."""
    from perfsweep.analysis.bisect import BisectError

    specs = list(plan.runs)
    if len(specs) == 1:
        return good, f"a release's step time over {good}'s, the two side by side in one sweep"
    baseline = specs[0].config.workload.baseline
    if len(specs) == 2 and baseline.axis:
        a, b = specs
        differ = {k for k in {*a.axes, *b.axes} if a.axes.get(k) != b.axes.get(k)}
        values = [spec.axes.get(baseline.axis) for spec in specs]
        if differ == {baseline.axis} and baseline.value in values:
            other = next(v for v in values if v != baseline.value)
            return None, f"within each release, the step time of {other} over its baseline's ({baseline.value})"
    differ = sorted({k for spec in specs for k, v in spec.axes.items() if v != specs[0].axes.get(k)})
    shown = "; ".join(" ".join(f"{k}={spec.axes.get(k, '-')}" for k in differ) for spec in specs)
    two = f"two, one of them {baseline.axis}={baseline.value} (the workload's baseline) and one other {baseline.axis}"
    raise BisectError(
        f"a bisect follows one metric, and this sweep has {len(specs)} configurations a release ({shown}); narrow it "
        f"to one configuration (its step time against the good release's) or to {two if baseline.axis else 'one'}"
    )


def pinned(package: str, version: str) -> str:
    """The override that asks for `version` of `package`: torch=V, or +env.packages.NAME=V."""
    return f"torch={version}" if package == "torch" else f"+env.packages.{package}={version}"


def bisect(args: argparse.Namespace) -> int:
    """Measure the releases between --good and --bad, midpoint by midpoint (analysis/bisect.py), each point a sweep
    in the bisect's folder, with the good release beside it where the metric is a step time over the good
    release's: the endpoints first, then each midpoint. Each point runs repeats=auto's rounds (or a fixed
    repeats) until it is placed on a side, or the last; each is saved to bisect.json as it is placed."""
    import dataclasses

    from perfsweep import records
    from perfsweep.analysis import rounds
    from perfsweep.analysis.bisect import (
        RECORD,
        UNBUILT,
        UNDETERMINED,
        BisectError,
        Point,
        Search,
        between,
        level,
        values,
    )
    from perfsweep.analysis.render import text
    from perfsweep.launcher import envs
    from perfsweep.sweeps.plan import PlanError, build_plan

    package = args.package.lower()
    key = pinned(package, "").lstrip("+").removesuffix("=")  # torch, env.packages.NAME
    overrides = [o for o in args.overrides if o not in MULTIRUN]
    fixed = [o.partition("=")[2] for o in overrides if o.startswith("repeats=") and o != AUTO]
    base = [o for o in overrides if not o.startswith("repeats=")]
    try:
        if any(o.lstrip("+").partition("=")[0] == key for o in base):
            raise BisectError(f"{key}: the bisect sets it to each release itself; leave it out of the overrides")
        if fixed and not (fixed[-1].isdigit() and int(fixed[-1]) >= 2):
            raise BisectError(f"repeats={fixed[-1]}: a point is placed across runs: 2 or more a side, or repeats=auto")
        first = build_plan([*base, pinned(package, args.good), "repeats=1"])
        reference, metric = one_metric(first, args.good)
        looks = [int(fixed[-1])] if fixed else rounds.schedule(first.settings.auto.max_runs)
        listed = envs.available(package, first.settings.env.index_url)
        if not listed:
            raise BisectError(f"the package index lists no releases of {package} for this Python (pip index versions)")
        releases = between(listed, args.good, args.bad)
    except PlanError as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    except BisectError as error:
        print(f"perfsweep: nothing was run:\n- {error}", file=sys.stderr)
        return 2
    folder, launcher = first.sweep_dir, first.settings.launcher.name
    # a point's sweep is followed to its end before it is looked at, on Slurm too
    kept = [o for o in base if o.lstrip("+").partition("=")[0] not in ("runs_dir", "sweep_name", "launcher.wait")]
    settings = {"package": package, "good": args.good, "bad": args.bad, "overrides": kept, "looks": looks}
    if conflict := folder_conflict(folder, settings):
        print(f"perfsweep: nothing was run:\n- {conflict}", file=sys.stderr)
        return 2
    search = Search(package, releases, metric, level(len(looks), len(releases)))
    print(f"bisect {package}: {len(releases)} releases from {args.good} (good) to {args.bad} (bad)")

    def plan_of(version: str, repeats: int):
        """The sweep of one point: the release (beside the good one, where the metric is taken over it)."""
        asked = ",".join(dict.fromkeys([version, *([reference] if reference else [])]))
        where = [f"runs_dir={folder}", f"sweep_name={package}-{version}", "launcher.wait=true"]
        return build_plan([*kept, pinned(package, asked), f"repeats={repeats}", *where])

    def measure(versions: list[str]) -> int:
        """Place the releases: look after each of the schedule's rounds until none is undetermined; the launch's
        exit status where one could not run."""
        for repeats in looks:
            for version in versions:
                plan = plan_of(version, repeats)
                status = launch_plan(lambda plan=plan: plan, args.argv, show=False, quiet_envs=True)
                if status not in (0, 1):
                    return status
                runs = records.load_sweep(plan.sweep_dir, [spec.name for spec in plan.runs])
                done = [r for r in runs if r.state == records.DONE]
                if not done:  # nothing to place it by, and more runs would end as these did
                    said = next((why for r in runs if (why := r.status.why_not_done(200))), "no error recorded")
                    raise BisectError(
                        f"{package} {version}: none of its {len(runs)} runs is done ({said}); `perfsweep status "
                        f"{plan.sweep_dir}` says why, and the bisect again goes on from its records"
                    )
                found = values(done, package, reference, search.level)
                search.add(dataclasses.replace(found.get(version, Point(version)), sweep=plan.sweep_dir.name))
            if all(search.points[v].side != UNDETERMINED for v in versions):
                break
        for version in versions:
            print(f"bisect {package} {version}: {search.points[version].interval()}: {search.points[version].side}")
        return 0

    ends = [v for v in (args.good, args.bad) if v != reference]
    try:  # both ends built before anything runs
        for version in ends:
            envs.for_plan(plan_of(version, 1).runs, launcher)
    except envs.EnvError as error:
        print(f"perfsweep: nothing was run:\n- {error}", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if reference:
            search.add(Point(reference, 1.0, 1.0, 1.0, reference=True))
        status = measure(ends)
        while status == 0 and (version := search.next()) is not None:
            search.save(folder, kept, looks)
            try:
                envs.for_plan(plan_of(version, 1).runs, launcher)
            except envs.Unresolvable as error:  # no build of it for this Python: its neighbour is measured instead
                search.add(Point(version, side=UNBUILT, why=str(error).splitlines()[0]))
                print(f"bisect {package} {version}: {UNBUILT}; the search goes on beside it")
                continue
            status = measure([version])
    except (BisectError, envs.EnvError) as error:
        print(f"perfsweep: the bisect stopped:\n- {error}", file=sys.stderr)
        return 2
    finally:
        search.save(folder, kept, looks)
    if status:
        return status
    print(text(search.view()))
    print(f"records: {(folder / RECORD).resolve()}")
    return 0 if search.first_bad() else 1


def folder_conflict(folder, settings: dict) -> str:
    """Why the bisect cannot use `folder` ('' where it can): it holds a sweep's runs, or another bisect."""
    from perfsweep import records
    from perfsweep.analysis.bisect import RECORD

    name = "sweep_name=NAME: a folder of its own for this bisect"
    if (folder / records.SWEEP).is_file():
        return f"{folder} holds a sweep's runs, not a bisect's points; {name}"
    recorded = records.read_json(folder / RECORD) if (folder / RECORD).is_file() else None
    if recorded and {key: recorded.get(key) for key in settings} != settings:
        other = f"{recorded.get('package')} {recorded.get('good')}..{recorded.get('bad')}"
        return (
            f"{folder} holds another bisect ({other}, its overrides {recorded.get('overrides')}, looks at "
            f"{recorded.get('looks')} runs); the same command as its goes on with it, or {name}"
        )
    return ""


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
    search = commands.add_parser("bisect", help="the first release between good and bad that shows the sweep's change")
    search.add_argument("--good", required=True, help="a release without the change")
    search.add_argument("--bad", required=True, help="a release with it (older or newer than good)")
    search.add_argument("--package", default="torch", help="whose releases are bisected (default: torch)")
    search.add_argument("overrides", nargs="*", help="the sweep: Hydra overrides (repeats=N: fixed runs a point)")
    search.set_defaults(handler=bisect)
    add_commands(commands)
    return top


CONFIG_DIR = ("--config-dir", "-cd")  # Hydra's flag: a folder of config groups and sweep files of the user's own


def with_config_dirs(argv: list[str]) -> list[str]:
    """`argv` with each --config-dir DIR (Hydra's flag) made part of the override hydra.searchpath=[file://...]
    that perfsweep reads, the folder absolute: the launch's records keep where it was."""
    dirs, rest, words = [], [], iter(argv)
    for word in words:
        flag, equals, value = word.partition("=")
        if flag in CONFIG_DIR:
            value = value if equals else next(words, "")
            if not value:
                raise SystemExit(f"perfsweep: {flag} takes a folder: {flag} DIR")
            dirs.append(f"file://{Path(value).expanduser().resolve()}")
        else:
            rest.append(word)
    if not dirs:
        return argv
    given = [w for w in rest if w.lstrip("+").startswith("hydra.searchpath=")]
    earlier = given[-1].split("=", 1)[1].strip("[]").split(",") if given else []
    entries = ",".join(dict.fromkeys([*(e for e in earlier if e), *dirs]))
    return [*(w for w in rest if w not in given), f"hydra.searchpath=[{entries}]"]


def main(argv: list[str] | None = None) -> int:
    argv = with_config_dirs(sys.argv[1:] if argv is None else argv)
    if os.getcwd() not in sys.path:  # the user's own code imports from the launch's folder, as `python -m` has it
        sys.path.insert(0, os.getcwd())
    # No command: run a sweep. Its words go to it as they are, Hydra's flags (--help, --cfg...) included.
    if not argv or argv[0].startswith("-") or "=" in argv[0]:
        argv = ["run", *argv]
    words = ["run", "--", *argv[1:]] if argv[0] == "run" else argv
    args = parse(parser(), words)
    args.argv = argv[1:] if argv[0] == "run" else argv
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
