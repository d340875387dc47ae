"""One launcher at a time per sweep folder.

It takes an exclusive lock (fcntl.flock) on <sweep_dir>/.lock.
It holds the lock for as long as a launch submits and follows its runs.

A second launch or resume of the same folder is refused at once.
The refusal names the holder (host, pid, since when, its command), which the lock file records.
The kernel releases the lock of a process that dies, however it dies.
So a crashed launcher leaves nothing to clean up.
A launch that ends empties the lock file as it releases it (launching).
Reading a sweep (status, table, report) never needs the lock.
"""

import contextlib
import fcntl
import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

from perfsweep import user_command
from perfsweep.records.files import now

LOCK = ".lock"


class SweepLocked(RuntimeError):
    """The sweep folder is locked by another launcher, or cannot be locked here."""


def process_start(pid: int) -> str | None:
    """When a process started, in clock ticks since boot, from /proc.

    A pid with another start is another process.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name before ")" may hold spaces


def _recorded(sweep_dir: Path) -> dict:
    """What the lock file says of its holder; {} where it says nothing readable."""
    try:
        lock_info = json.loads((Path(sweep_dir) / LOCK).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return lock_info if isinstance(lock_info, dict) else {}


def holder(sweep_dir: Path) -> str:
    """Who holds the folder's lock, as the lock file says."""
    lock_info = _recorded(sweep_dir)
    if "pid" not in lock_info:
        return "an unknown launcher"
    command = " ".join(lock_info.get("argv", []))
    return f"pid {lock_info.get('pid')} on {lock_info.get('host')} since {lock_info.get('since')} (perfsweep {command})"


def holding_host(sweep_dir: Path) -> str | None:
    """The host whose launch the lock file names as holding the folder; None where it names none.

    A launch that ends empties it; a crashed one's record stays.
    """
    lock_info = _recorded(sweep_dir)
    return lock_info.get("host") if "pid" in lock_info else None


def launching(sweep_dir: Path) -> str | None:
    """The id of the launch on this host that holds the folder's lock now; None where none does.

    A launch empties the lock file as it ends.
    A crashed launcher's record stays, but its process has gone: its pid may be another process's now.
    One process may launch a folder again (a notebook): each launch has an id of its own.
    """
    lock_info = _recorded(sweep_dir)
    try:
        started = process_start(int(lock_info["pid"]))
    except (ValueError, KeyError, TypeError):
        return None
    if started is None or started != lock_info.get("started") or lock_info.get("host") != socket.gethostname():
        return None
    return lock_info.get("launch")


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
        me |= {"launch": uuid.uuid4().hex, "started": process_start(os.getpid())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock
