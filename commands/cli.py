"""The command line's plumbing: subcommands, their arguments, and how a command's errors end it."""

import argparse
import math
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from perfsweep.commands.bisect import bisect
from perfsweep.commands.envs import show_envs
from perfsweep.commands.explain import show_explanations
from perfsweep.commands.noise import add_command as add_noise_command
from perfsweep.commands.run import resume, run_sweep, show_status
from perfsweep.commands.views import (
    CannotWrite,
    show_comparison,
    show_history,
    show_published,
    show_replicates,
    show_runs,
    show_table,
    upload,
    write_export,
    write_plots,
    write_report,
)


def _holds_a_sweep(path: Path) -> bool:
    from perfsweep import records

    return (path / records.SWEEP).is_file() or (path / "bisect.json").is_file() or any(path.glob("*/status.json"))


def sweep_folder(value: str) -> Path:
    """A sweep's folder; for a folder that holds sweeps (runs/), an error that lists them; for another, an error."""
    from perfsweep import records, user_command

    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"no sweep folder at {path}")
    if not _holds_a_sweep(path):
        inner = sorted(p.name for p in path.iterdir() if p.is_dir() and _holds_a_sweep(p))
        if inner:
            raise argparse.ArgumentTypeError(
                f"{path} holds sweeps, each a folder: {', '.join(inner)} (name one: {path / inner[0]})"
            )
        if (path / records.STATUS).is_file():  # its folder holds a run's folder: a sweep's
            raise argparse.ArgumentTypeError(
                f"{path} is a run's folder, of the sweep {path.resolve().parent}: name the sweep's folder "
                f"(`{user_command()} runs SWEEP_DIR` shows each of its runs)"
            )
        raise argparse.ArgumentTypeError(
            f"{path} is no sweep folder: it holds no sweep.json and no run's folder (a launch prints its sweep's "
            "folder: RUNS_DIR/SWEEP_NAME)"
        )
    return path


Handler = Callable[[argparse.Namespace], int]
WANDB_OVERRIDES = "tracker.entity=NAME, tracker.project=NAME, tracker.timeout_s=SECONDS"


def _command(subparsers, name: str, about: str, handler: Handler, sweep_dir: bool = True) -> argparse.ArgumentParser:
    """A subcommand that `handler` runs; most take one sweep folder."""
    parser = subparsers.add_parser(name, help=about, description=about)
    parser.set_defaults(handler=handler)
    if sweep_dir:
        parser.add_argument("sweep_dir", type=sweep_folder)
    return parser


def _vs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vs",
        metavar="AXIS=VALUE",
        help="compare along this axis alone, each run with the run of this value and every other axis equal "
        "(compile=eager); default: along every axis the sweep varies, each with its baseline (docs/analysis.md)",
    )


def add_view_commands(subparsers) -> None:
    """Add the view commands to an argparse subparsers object."""
    about = "one row per configuration: medians per phase, speed-up over the baseline"
    parser = _command(subparsers, "table", about, show_table)
    parser.add_argument(
        "--csv",
        nargs="?",
        const="table",
        choices=["table", "timm"],
        help="the table alone, as CSV (--format csv); --csv timm: in the columns of timm's benchmark result files",
    )
    _format_option(parser, None, "; csv, json and latex: the table alone")
    _vs_option(parser)
    parser.add_argument(
        "--repro",
        action="store_true",
        help="each configuration's command that measures it again, in place of the table",
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
    about = "each decided difference with its baseline, by operator (a sweep run with explain=true)"
    _command(subparsers, "explain", about, show_explanations)
    parser = _command(subparsers, "replicates", "per configuration across its replicates (repeats=N)", show_replicates)
    parser.add_argument(
        "--half-width", type=positive, default=0.02, help="the speed-up's half-width to plan for (default 0.02: -+2%%)"
    )
    _vs_option(parser)
    _format_option(parser)
    about = (
        "two sweeps configuration by configuration; exit status 1 on a regression, 3 on a possible one (1 run, a "
        "shared host, a moved machine, a configuration compiled in A that ran eagerly in B, a slowdown left "
        "undetermined beside a shared host), "
        "4 added where a final loss changed, 8 where configurations of A have no match in B, 16 with "
        "--fail-undetermined where the runs did not rule out a slowdown, 2 where none matched"
    )
    parser = _command(subparsers, "compare", about, show_comparison, sweep_dir=False)
    parser.add_argument("sweep_a", type=sweep_folder, help="the reference sweep (before)")
    parser.add_argument("sweep_b", type=sweep_folder, help="the candidate sweep (after)")
    parser.add_argument(
        "--threshold",
        type=relative,
        default=0.05,
        help="smallest change flagged: the slower side's time over the other's, past 1 + it (default 0.05: 5%%)",
    )
    parser.add_argument(
        "--loss-tolerance",
        type=relative,
        default=0.05,
        help="how far B's final loss may be off A's, as a share of how far A's loss moved (default 0.05: 5%%)",
    )
    parser.add_argument("--gate-phases", action="store_true", help="flag each phase's change too, not only the step's")
    parser.add_argument(
        "--fail-undetermined",
        action="store_true",
        help="add 16 to the exit status where the runs did not rule out a slowdown beyond the threshold (UNDETERMINED)",
    )
    _max_unmatched_option(parser, "A's configurations without a match in B (1: B may be a subset of A)")
    comment = "a comment for a pull request: a headline, counts, the configurations that changed"
    _format_option(parser, None, "; by default, as the terminal shows it", comment)
    _only_changes_option(parser)
    about = (
        "each configuration's step time over the commits of the code under test, with its change points; exit "
        "status 1 when the newest point is a confirmed regression, 3 a possible one, 8 added where configurations "
        "of the points before it are not in it"
    )
    parser = _command(subparsers, "history", about, show_history, sweep_dir=False)
    parser.add_argument(
        "runs", nargs="+", type=Path, help="sweep folders, or folders that hold them; then tracker.NAME=VALUE settings"
    )
    parser.add_argument("--repo", type=Path, help="the repository whose commit graph orders the points")
    parser.add_argument("--phase", default="step", help="the phase to follow (default: the whole step)")
    parser.add_argument(
        "--threshold", type=relative, default=0.05, help="smallest slowdown flagged (default 0.05: 5%%)"
    )
    _max_unmatched_option(parser, "the configurations of the points before the newest that it lacks")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="write history.html, a plot per configuration and a W&B run"
    )
    parser.add_argument("--wandb", action="store_true", help="also create a W&B Report (needs --out and a W&B key)")
    parser.add_argument(
        "--format",
        choices=["markdown"],
        help="markdown: a comment for a pull request, a headline, counts and the flagged configurations' points; "
        "by default, as the terminal shows it",
    )
    _only_changes_option(parser)
    parser.set_defaults(overrides=[])  # tracker.NAME=VALUE after the options (cli.parse)
    parser.add_argument(
        "--dry-run", action="store_true", help="with --wandb: print the W&B Report's outline, send nothing"
    )
    about = "the sweeps' figures for another dashboard: PyTorch's benchmark database (v3) or Bencher (BMF)"
    parser = _command(subparsers, "export", about, write_export, sweep_dir=False)
    parser.add_argument("runs", nargs="+", type=Path, help="sweep folders, or folders that hold them")
    parser.add_argument("--format", required=True, choices=["pytorch-v3", "bmf"], help="the format written")
    parser.add_argument("--out", type=Path, metavar="FILE", help="write the JSON into FILE (default: print it)")
    parser = _command(subparsers, "report", "write SWEEP_DIR/report.html (and a W&B Report with --wandb)", write_report)
    parser.add_argument("--wandb", action="store_true", help="also create a W&B Report (needs a W&B API key)")
    parser.add_argument(
        "--dry-run", action="store_true", help="with --wandb: print the W&B Report's outline, send nothing"
    )
    _out_option(parser, "report.html and plots/")
    parser.add_argument("overrides", nargs="*", help=WANDB_OVERRIDES)


def _only_changes_option(parser: argparse.ArgumentParser) -> None:
    said = "with --format markdown: print nothing, and exit 0, where nothing was flagged"
    parser.add_argument("--only-changes", action="store_true", help=said)


TABLE_FORMATS = (
    "csv and json: numbers as numbers, each speed-up's interval and word in fields of their own; latex: a booktabs "
    "table (docs/analysis.md)"
)


def _format_option(
    parser: argparse.ArgumentParser,
    default: str | None = "markdown",
    more: str = "",
    markdown: str = "as the terminal shows it (the default)",
) -> None:
    from perfsweep.analysis.render import FORMATS

    said = f"markdown: {markdown}; {TABLE_FORMATS}{more}"
    parser.add_argument("--format", choices=FORMATS, default=default, help=said)


def positive(value: str) -> float:
    """A number above 0."""
    found = _number(value)
    if not found > 0:
        raise argparse.ArgumentTypeError(f"{value}: a number above 0")
    return found


def relative(value: str) -> float:
    """A relative change or tolerance: a fraction below 1 (0.05), or a percentage of any size (5%, 150%).

    A bare 5 is refused: it reads as 500%, and is more often 5% mistyped.
    """
    found = _number(value[:-1]) / 100 if value.endswith("%") else _number(value)
    if not (0 <= found < 1 or (value.endswith("%") and found >= 1)):
        read = f" ({value} reads as {found * 100:g}%: type {found * 100:g}% if you mean it)" if found >= 1 else ""
        raise argparse.ArgumentTypeError(
            f"{value}: a fraction from 0 up to, not including, 1 (0.05), or a percentage (5%, 150%){read}"
        )
    return found


def non_negative(value: str) -> float:
    """A number of 0 or more."""
    found = _number(value)
    if not found >= 0:
        raise argparse.ArgumentTypeError(f"{value}: a number of 0 or more")
    return found


def _number(value: str) -> float:
    """The finite number `value` writes; NaN where it writes none (inf and nan included)."""
    try:
        found = float(value)
    except ValueError:
        return math.nan
    return found if math.isfinite(found) else math.nan


def share(value: str) -> float:
    """A share from 0 to 1, or a percentage from 0% to 100%, as compare prints it."""
    found = _number(value[:-1]) / 100 if value.endswith("%") else _number(value)
    if not 0.0 <= found <= 1.0:
        raise argparse.ArgumentTypeError(f"{value}: a share from 0 to 1 (0.25: a quarter), or 0% to 100%")
    return found


def _max_unmatched_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--max-unmatched",
        type=share,
        default=0.0,
        metavar="SHARE",
        help=f"the share of {what} that passes the gate (default 0: none; past it, 8 is added to the exit status)",
    )


def _out_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help=f"write {what} into DIR instead of SWEEP_DIR (a read-only sweep)"
    )


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a command that is not there names the nearest of `commands`."""

    commands: list[str] = []

    def error(self, message: str):
        if chosen := re.match(r"argument COMMAND: invalid choice: '(.+?)'", message):
            from perfsweep.sweeps.keys import did_you_mean

            message += did_you_mean(chosen[1], self.commands)
        super().error(message)


def parser(description: str) -> argparse.ArgumentParser:
    """The command line: a sweep's commands, then the views'."""
    top = CommandParser(prog="perfsweep", description=description, add_help=False)
    commands = top.add_subparsers(title="commands", required=True, metavar="COMMAND")
    sweep = commands.add_parser("run", add_help=False, help="run a sweep (the default command)")
    sweep.add_argument("overrides", nargs="*", help="Hydra overrides; --help: Hydra's help")
    sweep.set_defaults(handler=run_sweep, command_list=command_list)  # Hydra's --help lists the commands
    about = (
        "each run's state, job id and log; exit status 0 when all are done, 4 while a run's job is queued or "
        "running (or the scheduler does not answer), else 1 (a held job too: a person releases it)"
    )
    status = commands.add_parser("status", help=about, description=about)
    status.add_argument("sweep_dir", type=sweep_folder)
    status.set_defaults(handler=show_status)
    about = "run again every run of the sweep that is not done"
    again = commands.add_parser(
        "resume",
        help=about,
        description=f"{about}, with the launcher and tracker settings it was launched with, but those given here; "
        "exit status as a launch's",
    )
    again.add_argument("sweep_dir", type=sweep_folder)
    again.add_argument(
        "overrides", nargs="*", help="launcher.KEY=VALUE or tracker.KEY=VALUE, over the settings it was launched with"
    )
    again.set_defaults(handler=resume)
    cached = commands.add_parser("envs", help="the environments built for package-version axes: list or remove")
    cached.add_argument("--dir", help="the cache (env.dir); default: ~/.cache/perfsweep/envs")
    cached.add_argument("--prune", action="store_true", help="remove the environments (see --unused-days)")
    cached.add_argument(
        "--unused-days", type=non_negative, default=0.0, help="with --prune: only those unused this long"
    )
    cached.set_defaults(handler=show_envs)
    about = "the first release (or commit of yours) between good and bad that shows the sweep's change"
    search = commands.add_parser(
        "bisect",
        help=about,
        description=f"{about}; exit status 0 where it names one, 1 where it does not, 2 on bad input, before anything "
        "runs",
    )
    search.add_argument("--good", help="a release without the change")
    search.add_argument("--bad", help="a release with it (older or newer than good)")
    search.add_argument(
        "--package", help="whose releases are bisected (default: torch); with --git, the package the repository builds"
    )
    search.add_argument(
        "--git", nargs=2, metavar=("GOOD", "BAD"), help="bisect the commits of your repository from GOOD to BAD"
    )
    search.add_argument("--repo", type=Path, help="with --git: the repository (default: the working directory's)")
    search.add_argument("--allow-dirty", action="store_true", help="with --git: a repository with uncommitted changes")
    search.add_argument(
        "--max-runs", type=int, default=40, metavar="N", help="the most runs a side a point adds until placed (40)"
    )
    search.add_argument(
        "--max-minutes", type=float, metavar="M", help="the search's time: no look starts after it (default: none)"
    )
    search.add_argument(
        "--from",
        dest="runs_from",
        type=Path,
        action="append",
        metavar="RUNS",
        help="sweeps run before (a history's): their spread sizes each point's first look; may be given again",
    )
    search.add_argument(
        "overrides", nargs="*", help="the sweep: Hydra overrides (repeats=N: fixed runs a point, 2 or more)"
    )
    search.set_defaults(handler=bisect)
    add_noise_command(commands)
    add_view_commands(commands)
    top.commands = list(commands.choices)
    return top


def commands() -> dict[str, str]:
    """Each command of the command line, with what it does (its help), in the parser's order."""
    (chosen,) = parser("")._subparsers._group_actions  # noqa: SLF001 (argparse keeps the commands there)
    return {action.dest: action.help for action in chosen._choices_actions}  # noqa: SLF001


def command_list(width: int = 88) -> str:
    """The commands, one to a paragraph with what it does, wrapped to `width` (Hydra's --help shows it)."""
    found = commands()
    indent = max(map(len, found)) + 4
    return "\n".join(
        textwrap.fill(
            about,
            width,
            initial_indent=f"  {name:<{indent - 2}}",
            subsequent_indent=" " * indent,
            break_on_hyphens=False,
        )
        for name, about in found.items()
    )


CONFIG_DIR = ("--config-dir", "-cd")  # Hydra's flag: a folder of config groups and sweep files of the user's own


def with_config_dirs(argv: list[str]) -> list[str]:
    """`argv` with each --config-dir DIR (Hydra's flag) made part of an override perfsweep reads.

    That override is hydra.searchpath=[file://...].
    The folder is made absolute, so the launch's records keep where it was.
    """
    dirs, rest, words = [], [], iter(argv)
    for word in words:
        flag, equals, value = word.partition("=")
        if flag in CONFIG_DIR:
            value = value if equals else next(words, "")
            if not value:  # a bad argument's status, 2: SystemExit of a message would give 1, a regression's
                print(f"perfsweep: {flag} takes a folder: {flag} DIR", file=sys.stderr)
                raise SystemExit(2)
            dirs.append(f"file://{Path(value).expanduser().resolve()}")
        else:
            rest.append(word)
    if not dirs:
        return argv
    given = [w for w in rest if w.lstrip("+").startswith("hydra.searchpath=")]
    earlier = given[-1].split("=", 1)[1].strip("[]").split(",") if given else []
    entries = ",".join(dict.fromkeys([*(e for e in earlier if e), *dirs]))
    return [*(w for w in rest if w not in given), f"hydra.searchpath=[{entries}]"]


def parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """`words` parsed.

    KEY=VALUE overrides may come after flags: `report DIR --wandb tracker.entity=x`.
    argparse alone does not take those for a command's trailing overrides.
    """
    args, extra = parser.parse_known_args(words)
    if extra and hasattr(args, "overrides") and all("=" in w and not w.startswith("-") for w in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        from perfsweep.commands.hydra import as_settings

        settings = as_settings(extra) if hasattr(args, "overrides") else ""  # only a command that takes them
        parser.error(f"unrecognized arguments: {' '.join(extra)}{_options_of(parser, args)}{settings}")
    return args


def _options_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The options of the command `args` are for, as an error lists them: '; its options: --processes'."""
    (chosen,) = parser._subparsers._group_actions  # noqa: SLF001 (argparse keeps the commands there)
    for command in chosen.choices.values():
        if command.get_default("handler") is getattr(args, "handler", None):
            flags = [flag for action in command._actions for flag in action.option_strings if flag.startswith("--")]  # noqa: SLF001
            return f"; its options: {', '.join(flags)}"
    return ""


def run(args: argparse.Namespace) -> int:
    """Run a parsed command.

    Records that cannot be read, or a folder it cannot write into, end it.
    It then ends with a message and exit status 2.
    """
    try:
        return args.handler(args)
    except (FileNotFoundError, ValueError, CannotWrite) as error:
        print(f"perfsweep: error: {error}", file=sys.stderr)
        return 2
