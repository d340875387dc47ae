"""The analysis commands, as argparse subcommands: `python -m perfsweep.analysis COMMAND` and `perfsweep COMMAND` both
take them from here. Each command imports what it needs when it runs, so that `perfsweep status` starts fast."""

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def _holds_a_sweep(path: Path) -> bool:
    from perfsweep import records

    return (path / records.SWEEP).is_file() or (path / "bisect.json").is_file() or any(path.glob("*/status.json"))


def sweep_folder(value: str) -> Path:
    """A sweep's folder; for a folder that holds sweeps (runs/), an error that lists them."""
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"no sweep folder at {path}")
    if not _holds_a_sweep(path):
        inner = sorted(p.name for p in path.iterdir() if p.is_dir() and _holds_a_sweep(p))
        if inner:
            raise argparse.ArgumentTypeError(
                f"{path} holds sweeps, each a folder: {', '.join(inner)} (name one: {path / inner[0]})"
            )
    return path


def show_table(args: argparse.Namespace) -> int:
    from perfsweep.analysis import table
    from perfsweep.analysis.bisect import Search
    from perfsweep.analysis.render import as_csv, text
    from perfsweep.analysis.views import sweep_views

    if (search := Search.load(args.sweep_dir)) is not None:  # a bisect's folder: its points are sweeps in it
        print(as_csv(search.view()) if args.csv else text(search.view()), end="" if args.csv else "\n")
        return 0
    if args.csv == "timm":
        from perfsweep.analysis.timm_csv import timm_view

        print(as_csv(timm_view(args.sweep_dir)), end="")
        return 0
    if args.csv:
        print(as_csv(table.view(args.sweep_dir, vs=args.vs)), end="")
        return 0
    print("\n\n".join(text(view) for view in sweep_views(args.sweep_dir, vs=args.vs)))
    return 0


def show_runs(args: argparse.Namespace) -> int:
    from perfsweep.analysis import summary
    from perfsweep.analysis.render import text

    print(text(summary.view(args.sweep_dir)))
    return 0


def show_published(args: argparse.Namespace) -> int:
    from perfsweep.analysis.render import text
    from perfsweep.analysis.views import published_views

    views = published_views(args.sweep_dir)
    print("\n\n".join(map(text, views)) or f"{args.sweep_dir}: its sweep has no published figures (sweeps/published/)")
    return 0


def show_replicates(args: argparse.Namespace) -> int:
    from perfsweep.analysis import replicates
    from perfsweep.analysis.render import text

    print(text(replicates.view(args.sweep_dir, args.half_width)))
    return 0


def show_comparison(args: argparse.Namespace) -> int:
    from perfsweep.analysis import compare
    from perfsweep.analysis.render import text

    view, status = compare.compare(args.sweep_a, args.sweep_b, args.threshold, args.loss_tolerance, args.gate_phases)
    print(text(view))
    return status


class CannotWrite(Exception):
    """The folder a command would write into cannot be written (exit 2)."""


def output_folder(args: argparse.Namespace) -> Path:
    """Where a command writes what it makes: --out, else the sweep folder; refused before any work if it cannot be
    written (a read-only sweep), saying where to write instead."""
    from perfsweep import records

    folder = args.out or args.sweep_dir
    cannot = records.unwritable(folder)
    if cannot:
        raise CannotWrite(f"cannot write into {folder}: {cannot}; give a folder to write into instead: --out DIR")
    return folder


def write_plots(args: argparse.Namespace) -> int:
    from perfsweep.analysis import plots

    for path in plots.write_plots(args.sweep_dir, output_folder(args)):
        print(path)
    return 0


def write_report(args: argparse.Namespace) -> int:
    from perfsweep.analysis import wandb_online
    from perfsweep.analysis.report import html_report, outline, save_wandb_report, wandb_report_content
    from perfsweep.analysis.wandb_sweep import log_sweep, tracker_conf
    from perfsweep.records import load_sweep

    conf = wandb_online.with_overrides(tracker_conf(args.sweep_dir), args.overrides)
    summaries = [r.summary for r in load_sweep(args.sweep_dir) if r.summary] if args.wandb else []
    phases = list(summaries[0].phases) if summaries else []
    ranks = max((s.world_size or 0 for s in summaries), default=0)
    if args.wandb and args.dry_run:  # writes nothing
        print(outline(wandb_report_content(args.sweep_dir.name, conf.project, conf.entity, phases, ranks)))
        return 0
    out = output_folder(args)
    if args.wandb:
        try:
            conf = wandb_online.go_online(conf, args.sweep_dir)
        except wandb_online.WandbUnreachable as error:
            print(f"perfsweep: {error}", file=sys.stderr)
            return 1
    print(f"report: {html_report(args.sweep_dir, out)}")
    for warning in log_sweep(args.sweep_dir, conf):
        print(f"perfsweep: warning: {warning}", file=sys.stderr)
    if args.wandb:
        content = wandb_report_content(args.sweep_dir.name, conf.project, conf.entity, phases, ranks)
        try:
            url = wandb_online.within(conf.timeout_s, "saving the W&B Report", save_wandb_report, content)
        except wandb_online.WandbUnreachable as error:
            print(f"perfsweep: {error}", file=sys.stderr)
            return 1
        print(f"W&B report: {url}")
    return 0


def upload(args: argparse.Namespace) -> int:
    from perfsweep.analysis import wandb_online
    from perfsweep.analysis.wandb_sweep import sync, tracker_conf

    conf = wandb_online.with_overrides(tracker_conf(args.sweep_dir), args.overrides)
    try:
        return sync(args.sweep_dir, wandb_online.go_online(conf, args.sweep_dir))
    except wandb_online.WandbUnreachable as error:
        print(f"perfsweep: {error}", file=sys.stderr)
        return 1


Handler = Callable[[argparse.Namespace], int]
WANDB_OVERRIDES = "tracker.entity=NAME, tracker.project=NAME, tracker.timeout_s=SECONDS"


def _command(subparsers, name: str, about: str, handler: Handler, sweep_dir: bool = True) -> argparse.ArgumentParser:
    """A subcommand that `handler` runs; most take one sweep folder."""
    parser = subparsers.add_parser(name, help=about, description=about)
    parser.set_defaults(handler=handler)
    if sweep_dir:
        parser.add_argument("sweep_dir", type=sweep_folder)
    return parser


def add_commands(subparsers) -> None:
    """Add the analysis commands to an argparse subparsers object."""
    about = "one row per configuration: medians per phase, speed-up over the baseline"
    parser = _command(subparsers, "table", about, show_table)
    parser.add_argument(
        "--csv",
        nargs="?",
        const="table",
        choices=["table", "timm"],
        help="the table alone, as CSV; --csv timm: in the columns of timm's benchmark result files",
    )
    parser.add_argument(
        "--vs",
        metavar="AXIS=VALUE",
        help="compare each run with the run of its row group that has this value (compile=eager); default: the "
        "workload's baseline (input_type=tensor, impl=...)",
    )
    for name, about, handler in [
        ("runs", "per run and phase: median, within-run interval, IQR, p5-p95, robust CV, outliers", show_runs),
        ("published", "the published figures the sweep reproduces, beside ours", show_published),
    ]:
        _command(subparsers, name, about, handler)
    parser = _command(subparsers, "plots", "PNG plots into SWEEP_DIR/plots/", write_plots)
    _out_option(parser, "plots/")
    parser = _command(subparsers, "sync", "upload the sweep's offline W&B runs (needs a W&B API key)", upload)
    parser.add_argument("overrides", nargs="*", help=WANDB_OVERRIDES)
    parser = _command(subparsers, "replicates", "per configuration across its replicates (repeats=N)", show_replicates)
    parser.add_argument(
        "--half-width", type=float, default=0.02, help="the speed-up's half-width to plan for (default 0.02: -+2%%)"
    )
    about = "two sweeps configuration by configuration; exit status 1 on a regression, 3 on a possible one (1 run)"
    parser = _command(subparsers, "compare", about, show_comparison, sweep_dir=False)
    parser.add_argument("sweep_a", type=sweep_folder, help="the reference sweep (before)")
    parser.add_argument("sweep_b", type=sweep_folder, help="the candidate sweep (after)")
    parser.add_argument("--threshold", type=float, default=0.05, help="smallest change flagged (default 0.05)")
    parser.add_argument("--loss-tolerance", type=float, default=0.05, help="relative final-loss change flagged")
    parser.add_argument("--gate-phases", action="store_true", help="flag each phase's change too, not only the step's")
    parser = _command(subparsers, "report", "write SWEEP_DIR/report.html (and a W&B Report with --wandb)", write_report)
    parser.add_argument("--wandb", action="store_true", help="also create a W&B Report (needs a W&B API key)")
    parser.add_argument(
        "--dry-run", action="store_true", help="with --wandb: print the W&B Report's outline, send nothing"
    )
    _out_option(parser, "report.html and plots/")
    parser.add_argument("overrides", nargs="*", help=WANDB_OVERRIDES)


def _out_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help=f"write {what} into DIR instead of SWEEP_DIR (a read-only sweep)"
    )


def parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """`words` parsed; KEY=VALUE overrides may come after flags (`report DIR --wandb tracker.entity=x`), which
    argparse alone does not take for a command's trailing overrides."""
    args, extra = parser.parse_known_args(words)
    if extra and hasattr(args, "overrides") and all("=" in w and not w.startswith("-") for w in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def run(args: argparse.Namespace) -> int:
    """Run a parsed command; records that cannot be read, or a folder it cannot write into, end it with a message
    and exit status 2."""
    try:
        return args.handler(args)
    except (FileNotFoundError, ValueError, CannotWrite) as error:
        print(f"perfsweep: error: {error}", file=sys.stderr)
        return 2
