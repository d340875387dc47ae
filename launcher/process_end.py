"""A process's end without Python's teardown of its modules: for a command or a job whose work is done.

Python's own end frees every object of every module it imported.
For torch and torch._dynamo that takes a CPU about a second.
A job on a loaded host pays it before its launcher sees it end, and the next environment's job waits for that.
Nothing there needs freeing: the process is about to go.
So such a process ends as Python would, less that:

- it waits for the threads that are not daemons;
- it runs the exit handlers (W&B's, logging's...), each once;
- it flushes its standard streams;
- it then leaves with os._exit.
"""

import atexit
import os
import sys
import threading
from typing import NoReturn


def end_now(code: int) -> NoReturn:
    """End this process with exit status `code`, as Python would, less the freeing of its modules' objects."""
    for thread in threading.enumerate():
        if not thread.daemon and thread is not threading.current_thread():
            thread.join()
    atexit._run_exitfuncs()  # every handler once: the queue is emptied as it runs
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def end_now_at_exit(code: int = 0) -> None:
    """End this process as end_now does once its main code has returned, with exit status `code`.

    The handler registered here runs first at exit (the last registered runs first).
    It takes itself off, then runs every other handler.
    """

    def ending() -> NoReturn:
        atexit.unregister(ending)
        end_now(code)

    atexit.register(ending)


def in_own_job_process() -> bool:
    """Whether this process was started to run a submitit job: not a launcher running one in itself (debug)."""
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    return "SUBMITIT_FOLDER" in os.environ and getattr(main, "name", None) == "submitit.core._submit"
