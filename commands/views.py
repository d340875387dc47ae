"""The commands that show or write the views of a sweep's records.

They are table, runs, published, replicates, compare, history, export, plots, report and sync.
Each imports what it needs when it runs, so that `perfsweep status` starts fast.
"""

import argparse
import sys
from pathlib import Path

# `table`, `export`, `report` or `published` where a configuration of the sweep has no done run: its figures are
# missing, so a script must not read the rest as the sweep's answer.
EXIT_UNMEASURED = 1
EXIT_NOTHING_PUBLISHED = 2  # `published` of a sweep that has, or ran, no published comparison: it answers nothing


def show_table(args: argparse.Namespace) -> int:
    from perfsweep.analysis.bisection import store
    from perfsweep.analysis.bisection.view import machine_of, point_flags, view
    from perfsweep.analysis.render import render, text
    from perfsweep.analysis.views import sweep_views, table
    from perfsweep.records import load_sweep

    form = table_format(args)
    if (search := store.load(args.sweep_dir)) is not None:  # a bisect's folder: its points are sweeps in it
        shown = view(search, machine_of(args.sweep_dir, search), point_flags(args.sweep_dir, search))
        print(render(shown, form), end="")
        return 0
    runs = load_sweep(args.sweep_dir)
    if args.repro:
        print(render(table.repro_view(args.sweep_dir, runs), form), end="")
        return 0
    if args.csv == "timm":
        from perfsweep.analysis.views.timm_csv import timm_view

        print(render(timm_view(args.sweep_dir), form), end="")
    elif form != "markdown":  # the table alone, as data or for a paper; CSV keeps no flags
        stranded = stranded_runs(args.sweep_dir, runs) if form != "csv" else {}
        print(render(table.view(args.sweep_dir, vs=args.vs, stranded=stranded), form), end="")
    else:
        stranded = stranded_runs(args.sweep_dir, runs)
        print("\n\n".join(text(view) for view in sweep_views(args.sweep_dir, vs=args.vs, stranded=stranded)))
    return said_unmeasured(args.sweep_dir, runs)


def stranded_runs(sweep_dir: Path, runs: list) -> dict[str, tuple[str, str]]:
    """The unfinished runs that no job will finish (run_states.stranded); the scheduler is asked only where one is."""
    from perfsweep.launcher.run_states import stranded
    from perfsweep.records import FINAL

    return stranded(sweep_dir) if any(run.state not in FINAL for run in runs) else {}


def said_unmeasured(sweep_dir: Path, runs: list, view: str = "table") -> int:
    """Name the configurations without a done run on stderr: EXIT_UNMEASURED where there are any, else 0."""
    from perfsweep.analysis.groups import configurations
    from perfsweep.analysis.views.table import unmeasured
    from perfsweep.records import DONE
    from perfsweep.records.words import counted

    if not any(run.state == DONE for run in runs):
        print(f"perfsweep: no run of {sweep_dir} is done: its {view} has no figures", file=sys.stderr)
        return EXIT_UNMEASURED
    missing = unmeasured(configurations(runs)) if runs else []
    if not missing:
        return 0
    print(
        f"perfsweep: {counted(len(missing), 'configuration')} of {sweep_dir} without a done run, so without "
        f"figures: {'; '.join(missing)}",
        file=sys.stderr,
    )
    return EXIT_UNMEASURED


def said_unfinished(sweep_dir: Path, runs: list) -> None:
    """Name on stderr the runs of the sweep not finished.

    An export holds its done runs alone.
    A run pending or running has no figures in it.
    Nor has one whose job is gone (its scheduler's word).
    Nor has one the launch's budget stopped or left unstarted.
    """
    from collections import Counter

    from perfsweep.records import DONE, FINAL

    unfinished = [run for run in runs if run.state not in FINAL]
    if not unfinished:
        return
    stranded = stranded_runs(sweep_dir, runs)
    budget = sum(bool(run.status.over_budget) for run in unfinished)
    states = Counter(stranded.get(run.name, (run.state,))[0] for run in unfinished if not run.status.over_budget)
    why = [f"{n} {state}" for state, n in sorted(states.items())]
    why += [f"{budget} stopped or not started by the launch's budget"] if budget else []
    done = sum(run.state == DONE for run in runs)
    print(
        f"perfsweep: {len(unfinished)} of the {len(runs)} runs in {sweep_dir} are not finished "
        f"({', '.join(why)}): the export holds the {done} done runs",
        file=sys.stderr,
    )


def table_format(args: argparse.Namespace) -> str:
    """The format `table` writes: --format, where --csv (its alias for csv) does not say otherwise."""
    if args.csv and args.format not in (None, "csv"):
        raise ValueError(f"--csv writes CSV, --format {args.format} another format: give one of them")
    return "csv" if args.csv else args.format or "markdown"


def show_runs(args: argparse.Namespace) -> int:
    from perfsweep.analysis.render import text
    from perfsweep.analysis.views import runs

    print(text(runs.view(args.sweep_dir)))
    return 0


def show_published(args: argparse.Namespace) -> int:
    """The published views, then the flags of the runs behind them, as the table below them in a launch says them."""
    from perfsweep import user_command
    from perfsweep.analysis.render import text
    from perfsweep.analysis.views import published_views, table
    from perfsweep.analysis.views.published import NOT_DECIDED, NOT_RUN, PUBLISHED_DIR
    from perfsweep.records import load_sweep

    runs = load_sweep(args.sweep_dir)
    views = published_views(args.sweep_dir)
    if not views:
        if not runs:
            return said_unmeasured(args.sweep_dir, runs, "published view")
        sweep = runs[0].fields.get("sweep", "?")
        having = ", ".join(sorted(path.stem for path in PUBLISHED_DIR.glob("*.yaml")))
        print(
            f"perfsweep: {args.sweep_dir}: its sweep ({sweep}) has no published figures; those that have: {having} "
            f"(`{user_command()} sweep=NAME` launches one)",
            file=sys.stderr,
        )
        return EXIT_NOTHING_PUBLISHED
    flags = table.table_view(args.sweep_dir, runs, stranded_runs(args.sweep_dir, runs)).flags
    said = "\n".join(["flags of its runs, as the table's:", *flags]) if flags else ""
    print("\n\n".join([*map(text, views), *([said] if said else [])]))
    rows = [row for view in views for row in view.items]
    if rows and all(str(row[-1]).startswith(NOT_RUN) for row in rows):
        none_ran = f"none of its {len(rows)} published comparisons ran"
        none_ran = none_ran if len(rows) > 1 else "its one published comparison did not run"
        print(
            f"perfsweep: {args.sweep_dir}: {none_ran} in this sweep (each row says what it ran instead, where it ran "
            "the configuration at other settings)",
            file=sys.stderr,
        )
        return EXIT_NOTHING_PUBLISHED
    status = said_unmeasured(args.sweep_dir, runs, "published view")
    if undecided := [row for row in rows if str(row[-1]).startswith(NOT_DECIDED)]:
        print(
            f"perfsweep: {args.sweep_dir}: {len(undecided)} of its {len(rows)} rows matched runs of several "
            "configurations, each row says what parts them: launch each setting into a folder of its own "
            "(sweep_name=NAME)",
            file=sys.stderr,
        )
        return max(status, EXIT_UNMEASURED)
    return status


def show_replicates(args: argparse.Namespace) -> int:
    from perfsweep.analysis.groups import compared_as_asked
    from perfsweep.analysis.render import render
    from perfsweep.analysis.views import replicates
    from perfsweep.records import load_sweep

    runs = compared_as_asked(load_sweep(args.sweep_dir), args.vs)
    print(render(replicates.view(args.sweep_dir, args.half_width, runs), args.format), end="")
    return 0


def show_comparison(args: argparse.Namespace) -> int:
    from perfsweep.analysis.render import render
    from perfsweep.analysis.views import comment, compare

    if args.only_changes and args.format != "markdown":
        raise ValueError("--only-changes goes with --format markdown: a comment only where something changed")
    if args.sweep_a.resolve() == args.sweep_b.resolve():  # a gate script's typo would pass whatever the code does
        raise ValueError(
            f"{args.sweep_a} and {args.sweep_b} are one sweep: compared with itself it can show no change; "
            "give the reference sweep first and the candidate second"
        )
    view, status = compare.compare(
        args.sweep_a,
        args.sweep_b,
        args.threshold,
        args.loss_tolerance,
        args.gate_phases,
        args.max_unmatched,
        args.fail_undetermined,
    )
    if args.format != "markdown":
        print(render(view, args.format or "markdown"), end="")
    elif not (args.only_changes and status == 0 and not comment.changed(view)):
        print(comment.comment(view, args.threshold) + f"\n{comment.gate(status, 'compare')}\n", end="")
    return status


def show_history(args: argparse.Namespace) -> int:
    from perfsweep.analysis.render import text
    from perfsweep.analysis.timeline import history
    from perfsweep.analysis.views import comment, wandb_history, wandb_online
    from perfsweep.analysis.views import history as views
    from perfsweep.analysis.views.report import outline

    overrides = [*args.overrides, *(str(a) for a in args.runs if str(a).startswith("tracker."))]
    if args.dry_run and not args.wandb:
        raise ValueError("--dry-run prints the W&B Report's outline: it goes with --wandb")
    if args.only_changes and args.format != "markdown":
        raise ValueError("--only-changes goes with --format markdown: a comment only where something changed")
    if args.wandb and not args.out:
        raise ValueError("history --wandb logs a run into a folder: give it one with --out DIR")
    if args.out and not args.dry_run:  # made once there is something to write; a dry run writes nothing
        writable_folder(args.out, make=False)
    found = history([a for a in args.runs if str(a) not in overrides], args.repo)
    made, left = views.series_of(found, args.phase, args.threshold)
    gaps, unmatched = views.unmatched(found, made, args.max_unmatched)
    status = views.exit_status(made) + unmatched
    shown = [views.view(series, args.phase, found) for series in made]
    conf = wandb_online.with_overrides(wandb_history.tracker_conf(found), overrides)
    said = ["left out: " + "; ".join(left)] * bool(left) + gaps
    if args.wandb and args.dry_run:  # writes nothing
        print(outline(wandb_history.report_content(made, shown, found, args.out, conf, said)))
        return status
    if args.wandb:
        try:
            conf = wandb_online.go_online(conf, "nothing was written or sent; run the command again later")
        except wandb_online.WandbUnreachable as error:
            print(f"perfsweep: {error}", file=sys.stderr)
            return views.EXIT_NO_HISTORY
        conf = wandb_online.kept_offline(conf)  # logged here, then uploaded: a run of its own each time
    if args.format == "markdown":
        if not (args.only_changes and status == 0 and not any(series.flag for series in made)):
            print(comment.history_comment(made, shown, said) + f"\n{comment.gate(status, 'history')}\n", end="")
    else:
        print("\n\n".join(f"{view.title}\n{text(view)}" if len(shown) > 1 else text(view) for view in shown))
        for line in said:
            print(line)
    where = sys.stderr if args.format == "markdown" else sys.stdout  # a comment's file holds the comment alone
    if args.out:
        print(f"history: {views.write(made, shown, args.phase, args.out, said)}", file=where)
        for warning in wandb_history.log_history(made, shown, found, args.out, conf, said):
            print(f"perfsweep: warning: {warning}", file=sys.stderr)
    if args.wandb:
        for warning in upload_history(made, shown, found, args.out, conf, said, where):
            print(f"perfsweep: warning: {warning}", file=sys.stderr)
    return status


def upload_history(made, shown, found, out: Path, conf, said: list[str], where) -> list[str]:
    """Upload the history run logged in `out` and create its W&B Report; what went wrong, as warnings.

    A history's exit status is its verdict, for CI: W&B, a view of it, does not change it.
    """
    from perfsweep.analysis.views import wandb_history, wandb_online
    from perfsweep.analysis.views.report import save_wandb_report
    from perfsweep.analysis.views.wandb_sweep import sync_runs

    offline = wandb_history.offline_run(out, found)
    if not offline:
        return [f"no W&B history run in {out} to upload: the warning above says why"]
    again = " ".join(["wandb", "sync", "--entity", conf.entity, "--project", conf.project, *map(str, offline)])
    if sync_runs(offline, conf, again) != 0:
        return [f"the history run was not uploaded; it stays offline in {out}: `{again}` uploads it"]
    content = wandb_history.report_content(made, shown, found, out, conf, said)
    try:
        url = wandb_online.within(conf.timeout_s, "saving the W&B Report", save_wandb_report, content)
    except wandb_online.WandbUnreachable as error:
        return [str(error)]
    print(f"W&B report: {url}", file=where)
    return []


def write_export(args: argparse.Namespace) -> int:
    import json

    from perfsweep.analysis.views.export import export, sweep_folders
    from perfsweep.records import atomic_write, load_sweep

    if args.out:
        writable_file(args.out)
    found = export(args.runs, args.format)
    if not found:
        raise ValueError(f"no done runs in {', '.join(map(str, args.runs))}: nothing to export")
    status = 0
    for folder in sweep_folders(args.runs):
        runs = load_sweep(folder)
        status = max(status, said_unmeasured(folder, runs, "export"))
        said_unfinished(folder, runs)
    text = json.dumps(found, indent=1) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(args.out, text.encode())
        print(f"{args.format}: {args.out}")
    else:
        print(text, end="")
    return status


class CannotWrite(Exception):
    """The folder a command would write into cannot be written (exit 2)."""


def output_folder(args: argparse.Namespace) -> Path:
    """Where a command writes what it makes: --out, else the sweep folder.

    A folder that cannot be written (a read-only sweep) is refused before any work.

    Raises:
        CannotWrite: saying where to write instead.
    """
    return writable_folder(args.out or args.sweep_dir)


def writable_folder(
    folder: Path, make: bool = True, instead: str = "a folder to write into instead: --out DIR"
) -> Path:
    """`folder`, made if missing (where `make`), where a file can be written into it.

    Raises:
        CannotWrite: saying why not, and where to write `instead`.
    """
    from perfsweep import records

    cannot = records.unwritable(folder, make)
    if cannot:
        raise CannotWrite(f"cannot write into {folder}: {cannot}; give {instead}")
    return folder


def writable_file(path: Path) -> Path:
    """`path`, where a file can be written there: not a folder, in a folder made if missing.

    Raises:
        CannotWrite: saying why not.
    """
    if path.is_dir():
        raise CannotWrite(f"cannot write {path}: it is a folder; --out names the file to write, as {path / 'out.json'}")
    writable_folder(path.parent, make=False, instead=f"a file elsewhere: --out FILE, as /tmp/{path.name}")
    return path


def write_plots(args: argparse.Namespace) -> int:
    from perfsweep.analysis.views import plots

    for path in plots.write_plots(args.sweep_dir, output_folder(args)):
        print(path)
    return 0


def write_report(args: argparse.Namespace) -> int:
    from perfsweep import records
    from perfsweep.analysis.groups import phase_columns
    from perfsweep.analysis.views import explain, table, wandb_online
    from perfsweep.analysis.views.report import html_report, outline, save_wandb_report, wandb_report_content
    from perfsweep.analysis.views.wandb_sweep import log_sweep, published_tables, tracker_conf
    from perfsweep.records import load_sweep
    from perfsweep.records.redact import redact_text

    conf = wandb_online.with_overrides(tracker_conf(args.sweep_dir), args.overrides)
    runs = load_sweep(args.sweep_dir)
    summaries = [r.summary for r in runs if r.summary] if args.wandb else []
    phases = phase_columns(runs)[:-1] if summaries else []  # every workload's, the whole step apart
    ranks = max((s.ranks.world_size for s in summaries if s.ranks), default=0)
    explained = args.wandb and any(view.rows for view in explain.views(args.sweep_dir, runs))
    stranded = stranded_runs(args.sweep_dir, runs)  # asks the scheduler: once, for the table and the report
    shown = table.table_view(args.sweep_dir, runs, stranded) if args.wandb else None
    said = tuple(redact_text(line) for line in (*shown.above[1:], *shown.notes, *shown.flags)) if shown else ()
    group = records.group_of(args.sweep_dir)
    published = tuple(name for name, _ in published_tables(args.sweep_dir)) if args.wandb else ()
    content = wandb_report_content(
        args.sweep_dir.name, group, conf.project, conf.entity, phases, ranks, explained, said, published
    )
    if args.wandb and args.dry_run:  # writes nothing
        print(outline(content))
        return 0
    out = output_folder(args)
    if args.wandb:
        try:
            conf = wandb_online.go_online(conf, wandb_online.offline(args.sweep_dir))
        except wandb_online.WandbUnreachable as error:
            print(f"perfsweep: {error}", file=sys.stderr)
            return 1
    print(f"report: {html_report(args.sweep_dir, out, stranded)}")
    if args.wandb or not args.out:  # --out alone writes nothing into the sweep folder, its W&B run included
        for warning in log_sweep(args.sweep_dir, conf if args.wandb else wandb_online.kept_offline(conf)):
            print(f"perfsweep: warning: {warning}", file=sys.stderr)
    if args.wandb:
        try:
            url = wandb_online.within(conf.timeout_s, "saving the W&B Report", save_wandb_report, content)
        except wandb_online.WandbUnreachable as error:
            print(f"perfsweep: {error}", file=sys.stderr)
            return 1
        print(f"W&B report: {url}")
    return said_unmeasured(args.sweep_dir, runs, "report")


def upload(args: argparse.Namespace) -> int:
    from perfsweep.analysis.views import wandb_online
    from perfsweep.analysis.views.wandb_sweep import nothing_to_sync, sync, tracker_conf

    conf = wandb_online.with_overrides(tracker_conf(args.sweep_dir), args.overrides)
    if none := nothing_to_sync(args.sweep_dir, conf):  # before the server: a later sync would send nothing either
        print(none)
        return 0
    try:
        return sync(args.sweep_dir, wandb_online.go_online(conf, wandb_online.offline(args.sweep_dir)))
    except wandb_online.WandbUnreachable as error:
        print(f"perfsweep: {error}", file=sys.stderr)
        return 1


def stale_report(sweep_dir: Path) -> str:
    """A line where the sweep's report.html predates a run's records; else ''.

    Such a report shows fewer runs, or older ones.
    """
    from perfsweep import records, user_command

    report = sweep_dir / records.REPORT
    if not report.is_file():
        return ""
    newest = max((p.stat().st_mtime for p in sweep_dir.glob(f"*/{records.STATUS}")), default=0.0)
    if newest <= report.stat().st_mtime:
        return ""
    return f"{report} predates some runs' records: `{user_command()} report {sweep_dir}` writes it again"


def show_sweep(sweep_dir: Path, names: list[str], tracker, after: list[str] = (), stranded: dict | None = None) -> None:
    """Print the views of a launch's runs and the lines `after` them.

    `stranded` names the runs the launch left that no job will finish (table.flags).
    Then log the sweep to W&B, and say where its records are.
    """
    from perfsweep import records, user_command
    from perfsweep.analysis.render import text
    from perfsweep.analysis.views import sweep_views
    from perfsweep.analysis.views.wandb_sweep import log_sweep
    from perfsweep.records.words import counted

    print("\n\n".join(text(view) for view in sweep_views(sweep_dir, names, stranded=stranded)))
    others = {p.parent.name for p in sweep_dir.glob(f"*/{records.STATUS}")} - set(names)
    if others:  # the folder also holds other launches' runs, which the launch's views leave out
        print(f"{sweep_dir} also holds {counted(len(others), 'run')} of other launches: `{user_command()} table "
              f"{sweep_dir}` shows every run of the folder")  # fmt: skip
    if after:
        print("\n".join(after))
    if stale := stale_report(sweep_dir):
        print(stale)
    for warning in log_sweep(sweep_dir, tracker):
        print(f"perfsweep: warning: {warning}", file=sys.stderr)
    print(f"records: {sweep_dir.resolve()}")
