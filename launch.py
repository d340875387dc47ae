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
import traceback
from typing import NoReturn

from perfsweep import COMMAND, typed_command
from perfsweep.commands.cli import parse, parser, run, with_config_dirs
from perfsweep.launcher.process_end import (
    CLOSED_OUTPUT,
    as_killed_at_the_end,
    end_at_exit,
    interrupted,
    output_reader_gone,
    stop_as_interrupted,
)

INTERRUPTED = 130  # a shell's status for a command that SIGINT ended
# An error perfsweep did not foresee: a status no verdict has (compare's 1 is a regression), as sysexits' EX_SOFTWARE.
INTERNAL_ERROR = 70


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
    """The command line's entry (`perfsweep`, `python launch.py`).

    Its end skips Python's teardown of its modules: a second of a CPU once torch is imported (launcher/process_end.py).
    Where the reader of its output has gone (`perfsweep status | head`), it ends quietly, with CLOSED_OUTPUT.
    SIGTERM stops it as Ctrl-C does, with its own exit status (143).
    An error it did not foresee ends it with INTERNAL_ERROR: in a CI gate, 1 would read as a regression.
    """
    stop_as_interrupted()
    try:
        try:
            code = main()
        except SystemExit:  # argparse's help and usage: their output is flushed here, as is a command's
            sys.stdout.flush()
            raise
        sys.stdout.flush()
    except BrokenPipeError:
        if not output_reader_gone():  # another pipe's: a failure like any other
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else Python's end flushes it again
        code = CLOSED_OUTPUT
    except KeyboardInterrupt as stop:  # Ctrl-C after a launch's runs (a launch's own says more), or in a view
        print(f"\nperfsweep: {interrupted(stop)}", file=sys.stderr)
        code = getattr(stop, "status", INTERRUPTED)
    except Exception:
        traceback.print_exc()
        print(
            f"perfsweep: an error it did not foresee ended it (exit status {INTERNAL_ERROR}); the traceback above is "
            "perfsweep's fault, not a verdict on your runs",
            file=sys.stderr,
        )
        code = INTERNAL_ERROR
    as_killed_at_the_end()
    end_at_exit(code)
    sys.exit(code)


if __name__ == "__main__":
    cli()
