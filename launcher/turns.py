"""Turns: warm jobs of several environments whose runs take turns in the plan's order.

A sweep whose runs alternate between environments (a bisect's A B A B) would start a job each time the
environment changes, and pay Python's and torch's start-up at every run.
On this host, one run at a time, it starts one warm job per environment instead, all at once.
Each job forks its runs as `launcher/warm.py` does, but forks a run only once it has its turn.

A turn is a file in the sweep's `.turns/` folder, named by the run; so is a job's word that it has warmed up.
The launcher gives the first turn once every job is warm, so that no job's imports share a CPU with a measured run.
A job whose run's process has ended gives the next run its turn, where it has runs left.
Its last run's turn, and those of a job that died, the launcher gives once the job has ended: no job's exit shares a
CPU with a measured run either.
A job waiting for a turn looks ten times a second, and gives up, leaving its runs pending, if the launcher is gone.
"""

import os
import shutil
import time
from pathlib import Path
from typing import NamedTuple

FOLDER = ".turns"
WAIT_S = 0.1  # how often a warm job looks for its next turn
LAUNCHER = "launcher"  # the file that holds the launcher's pid


class Turn(NamedTuple):
    """A run's place in the order: the file that gives it its turn, and the one that gives the next run its own."""

    go: Path
    then: Path | None  # None: the last run


def fresh(sweep_dir: Path, order: list[str]) -> list[Turn]:
    """The turns of runs in `order`, in an emptied folder: turns of an earlier launch are not this one's."""
    folder = sweep_dir / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / LAUNCHER).write_text(str(os.getpid()))
    files = [folder / name for name in order]
    return [Turn(go, then) for go, then in zip(files, [*files[1:], None], strict=True)]


def warm(turn: Turn) -> Path:
    """The file by which the job whose first run has `turn` says it has warmed up."""
    return turn.go.with_name(f"{turn.go.name}.warm")


def given(waiting: list[Turn]) -> Turn | None:
    """The first of a job's `waiting` runs' turns that has come; None where none has."""
    return next((turn for turn in waiting if turn.go.exists()), None)


def next_turn(waiting: list[Turn]) -> Turn:
    """The first of a job's `waiting` runs' turns to come, once it has.

    Raises:
        KeyboardInterrupt: the launcher that gives the turns is gone; the job leaves its runs pending, as on Ctrl-C.
    """
    while (turn := given(waiting)) is None:
        if not _launcher_alive(waiting[0].go.parent):
            raise KeyboardInterrupt("the launcher that gives this job's turns is gone")
        time.sleep(WAIT_S)
    return turn


def _launcher_alive(folder: Path) -> bool:
    try:
        os.kill(int((folder / LAUNCHER).read_text()), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError):  # another user's process, or no record: not known to be gone
        return True
    return True


class Turns:
    """The launcher's side: the first turn, and the turns after the runs of jobs that have ended."""

    def __init__(self, order: list[str], turns: list[Turn]):
        self.order, self.turns = order, turns  # the runs in plan order, and their turns

    def give(self, left: set[str], alive: list[Turn]) -> None:
        """Give the turns that are due.

        Args:
            left: the runs of the jobs that have ended; each run's process ended with its job.
            alive: the first runs' turns of the jobs still alive.
        """
        if not self.turns[0].go.exists():
            if any(not warm(first).exists() for first in alive):
                return
            self.turns[0].go.touch()
        for name, turn in zip(self.order, self.turns, strict=True):
            if turn.then is None or not (turn.then.exists() or name in left):
                return  # the last run, or one whose job has not given the next turn and has not ended
            if not turn.then.exists():
                turn.then.touch()
