"""A command line's process from its words to its exit status: `perfsweep` and `python -m perfsweep.commands`.

Its end skips Python's teardown of its modules: a second of a CPU once torch is imported (launcher/process_end.py).
Where the reader of its output has gone (`perfsweep status | head`), it ends quietly, with CLOSED_OUTPUT.
SIGTERM stops it as Ctrl-C does, with its own exit status (143).
An error it did not foresee ends it with INTERNAL_ERROR.
In a CI gate, Python's 1 would read as compare's regression.
"""

import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from perfsweep.launcher.process_end import (
    CLOSED_OUTPUT,
    as_killed_at_the_end,
    end_at_exit,
    interrupted,
    output_reader_gone,
    stop_as_interrupted,
)

INTERRUPTED = 130  # a shell's status for a command that SIGINT ended
# An error perfsweep did not foresee: a status no verdict has, as sysexits' EX_SOFTWARE.
INTERNAL_ERROR = 70


def run_to_end(main: Callable[[], int]) -> NoReturn:
    """Run `main`, a command line's work, and end the process with its exit status."""
    stop_as_interrupted()
    try:
        try:
            code = main()
        except SystemExit:  # argparse's help and usage: their output is flushed here, as is a command's
            sys.stdout.flush()
            raise
        sys.stdout.flush()
    except BrokenPipeError:
        if output_reader_gone():
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else Python's end flushes it again
            code = CLOSED_OUTPUT
        else:  # another pipe's: a failure like any other
            code = unforeseen()
    except KeyboardInterrupt as stop:  # Ctrl-C after a launch's runs (a launch's own says more), or in a view
        print(f"\nperfsweep: {interrupted(stop)}", file=sys.stderr)
        code = getattr(stop, "status", INTERRUPTED)
    except Exception:
        code = unforeseen()
    as_killed_at_the_end()
    end_at_exit(code)
    sys.exit(code)


def unforeseen() -> int:
    """Say that the error being handled is perfsweep's, then its traceback; INTERNAL_ERROR.

    The traceback comes last: its last line, the error, is what a caller that reads one line reads (gpu/check.py).
    """
    print(
        f"perfsweep: an error it did not foresee ended it (exit status {INTERNAL_ERROR}): the traceback below is "
        "perfsweep's fault, not a verdict on your runs",
        file=sys.stderr,
    )
    traceback.print_exc()
    return INTERNAL_ERROR
