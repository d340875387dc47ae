"""A process's end: without Python's teardown of its modules, and on a signal to stop.

A command or a job whose work is done ends without the teardown.
A command sent SIGTERM (`kill`, `timeout`, a CI job's cancel) stops as Ctrl-C stops it.

Python's own end frees every object of every module it imported.
For torch and torch._dynamo that takes a CPU about a second.
A job on a loaded host pays it before its launcher sees it end, and the next environment's job waits for that.
Nothing there needs freeing: the process is about to go.
So such a process ends as Python would, less that.
A file it opened and never closed is left unflushed: perfsweep's records are written and closed as they go.
"""

import atexit
import os
import select
import signal
import sys

CLOSED_OUTPUT = 120  # Python's own exit status where its standard output could not be flushed


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C is: a launch stops its runs on this host and leaves them pending.

    Without it the command would die at once, and its local jobs would run on, unwatched.
    Its exit status is a shell's for the signal: 128 + its number.
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


def interrupted(stop: KeyboardInterrupt) -> str:
    """What stopped a command, in words: Ctrl-C, or the signal Terminated names."""
    return f"interrupted by {stop}" if isinstance(stop, Terminated) else "interrupted"


def stop_as_interrupted() -> None:
    """Have SIGTERM raise Terminated in this process, once.

    Later ones are ignored while the first one's stop goes on.
    A SIGTERM this process was started ignoring stays ignored.
    SIGHUP is left alone: a closed terminal sends it to the runs' processes too, which it ends.
    """

    def raised(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated(signum)

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, raised)


def as_killed_at_the_end() -> None:
    """A SIGTERM past the command's work ends it as the signal's default does, not with the work's exit status.

    Raised in an exit handler, Terminated would be swallowed there.
    """
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def end_at_exit(code: int = 0) -> None:
    """End this process without the teardown once it exits, with exit status `code`.

    Arm it as the process's last step, once its work is done.
    Python's end then goes as usual: it stops and joins its threads, then runs the exit handlers, the last registered
    first.
    This one runs first.
    It takes itself off and runs the others (W&B's, logging's...), flushes the standard streams, and leaves with
    os._exit.
    Python's own end, teardown included, takes over where the process ends otherwise than planned:

    - an exception raised after it was armed (Python's status for it, 1 or a signal's);
    - an exit handler registered after it (it would run twice).

    A `sys.exit(n)` after it was armed ends the process with `code`, not n.
    """
    unhandled = getattr(sys, "last_value", None)  # an exception Python reported before: not this end's

    def ending() -> None:
        if getattr(sys, "last_value", None) is not unhandled or atexit._ncallbacks() > armed:
            return  # Python's own end
        atexit.unregister(ending)
        status = code
        try:
            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                if stream is not None and not stream.closed:
                    try:
                        stream.flush()
                    except (OSError, ValueError):  # a closed pipe
                        status = status or CLOSED_OUTPUT
        finally:
            os._exit(status)  # never back into Python's end: its handlers have run

    atexit.register(ending)
    armed = atexit._ncallbacks()


def in_own_job_process() -> bool:
    """Whether this process was started to run a submitit job: not a launcher running one in itself (debug)."""
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    return "SUBMITIT_FOLDER" in os.environ and getattr(main, "name", None) == "submitit.core._submit"


def output_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (`perfsweep ... | head`): poll says POLLERR."""
    poller = select.poll()
    poller.register(sys.stdout.fileno(), select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))
