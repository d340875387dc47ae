#!/usr/bin/env python
"""perfsweep's entry point: plan a sweep from Hydra overrides, check it, run it through submitit, print its table.

`perfsweep [run] [-m] [OVERRIDE ...]` runs a sweep file: sweeps/default.yaml unless sweep=NAME.
With no command, or with an override or a flag first, the words are a sweep's.
Hydra's own flags (--help, --cfg job...) answer as in any Hydra app.
`perfsweep --help` lists the commands, from the parser of commands/cli.py.
`perfsweep COMMAND --help` gives a command's arguments.

`python launch.py ...` is the same command.
It parses the words and hands them to a command (commands/).
"""

import os
import sys
from typing import NoReturn

from perfsweep import COMMAND, typed_command
from perfsweep.commands.cli import parse, parser, run, with_config_dirs
from perfsweep.commands.entry import run_to_end


def main(argv: list[str] | None = None) -> int:
    os.environ[COMMAND] = typed_command()  # its messages, and its jobs' (processes of their own), name it
    argv = with_config_dirs(sys.argv[1:] if argv is None else argv)
    if os.getcwd() not in sys.path:  # the user's own code imports from the launch's folder, as `python -m` has it
        sys.path.insert(0, os.getcwd())
    # No command: run a sweep. Its words go to it as they are, Hydra's flags (--help, --cfg...) included.
    if not argv or argv[0].startswith("-") or "=" in argv[0]:
        argv = ["run", *argv]
    words = ["run", "--", *argv[1:]] if argv[0] == "run" else argv
    args = parse(parser(__doc__.splitlines()[0]), words)
    args.argv = argv[1:] if argv[0] == "run" else argv
    return run(args)


def cli() -> NoReturn:
    """The command line's entry (`perfsweep`, `python launch.py`), to its exit status (commands/entry.py)."""
    run_to_end(main)


if __name__ == "__main__":
    cli()
