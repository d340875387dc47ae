"""One launcher at a time per sweep folder.

It takes an exclusive lock (fcntl.flock) on <sweep_dir>/.lock.
It holds the lock for as long as a launch submits and follows its runs.

A second launch or resume of the same folder is refused at once.
The refusal names the holder (host, pid, since when, its command), which the lock file records.
The kernel releases the lock of a process that dies, however it dies.
So a crashed launcher leaves nothing to clean up.
Reading a sweep (status, table, report) never needs the lock.
"""

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from perfsweep import user_command
from perfsweep.records.files import now

LOCK = ".lock"


class SweepLocked(RuntimeError):
    """The sweep folder is locked by another launcher, or cannot be locked here."""


def holder(sweep_dir: Path) -> str:
    """Who holds (or last held) the folder's lock, as the lock file says."""
    try:
        lock_info = json.loads((Path(sweep_dir) / LOCK).read_text() or "{}")
    except (OSError, ValueError):
        return "an unknown launcher"
    command = " ".join(lock_info.get("argv", []))
    return f"pid {lock_info.get('pid')} on {lock_info.get('host')} since {lock_info.get('since')} (perfsweep {command})"


@contextlib.contextmanager
def sweep_lock(sweep_dir: Path, argv: list[str]) -> Iterator[None]:
    """Hold the sweep folder's lock while the block runs.

    Raises SweepLocked if another launcher holds it.
    """
    path = Path(sweep_dir) / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SweepLocked(
                f"{sweep_dir} is being launched by {holder(sweep_dir)}: wait for it to end, or follow it with "
                f"`{user_command()} status {sweep_dir}`"
            ) from None
        except OSError as error:  # a shared filesystem without working locks (some NFS mounts)
            raise SweepLocked(
                f"cannot lock {path} ({error.strerror}): this filesystem may not support flock; with one launcher "
                "at a time on this folder, launcher.lock=false launches without the lock"
            ) from error
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": now(), "argv": list(argv)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
