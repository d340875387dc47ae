"""Turns: warm jobs of several environments whose runs take turns in the plan's order.

A sweep whose runs alternate between environments (a bisect's A B A B) would start a job each time the
environment changes, and pay Python's and torch's start-up at every run.
On this host, one run at a time, it starts one warm job per environment instead, all at once.
Each job forks its runs as `launcher/warm.py` does, but forks a run only once it has its turn.

A turn is a file in the sweep's `.turns/` folder, named by the run; so is a job's word that it has warmed up.
The launcher gives the first turn once every job is warm, so that no job's imports share a CPU with a measured run.
A job whose run has ended gives the next run its turn at once.
Where a job ends without doing so (killed, lost), the launcher gives it at its next look.
"""

import shutil
import time
from pathlib import Path
from typing import NamedTuple

FOLDER = ".turns"
WAIT_S = 0.02  # how often a warm job looks for its next turn


class Turn(NamedTuple):
    """A run's place in the order: the file that gives it its turn, and the one that gives the next run its own."""

    go: Path
    then: Path | None  # None: the last run


def fresh(sweep_dir: Path, order: list[str]) -> list[Turn]:
    """The turns of runs in `order`, in an emptied folder: turns of an earlier launch are not this one's."""
    folder = sweep_dir / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    files = [folder / name for name in order]
    return [Turn(go, then) for go, then in zip(files, [*files[1:], None], strict=True)]


def warm(turn: Turn) -> Path:
    """The file by which the job whose first run has `turn` says it has warmed up."""
    return turn.go.with_name(f"{turn.go.name}.warm")


def given(waiting: list[Turn]) -> Turn | None:
    """The first of a job's `waiting` runs' turns that has come; None where none has."""
    return next((turn for turn in waiting if turn.go.exists()), None)


def next_turn(waiting: list[Turn]) -> Turn:
    """The first of a job's `waiting` runs' turns to come, once it has."""
    while (turn := given(waiting)) is None:
        time.sleep(WAIT_S)
    return turn


class Turns:
    """The launcher's side: the first turn, and each turn that a job that ended did not give."""

    def __init__(self, order: list[str], turns: list[Turn]):
        self.order, self.turns = order, turns  # the runs in plan order, and their turns

    def give(self, ended: set[str], alive: list[Turn]) -> None:
        """Give the turns that are due.

        Args:
            ended: the runs that have ended.
            alive: the first runs' turns of the jobs still alive.
        """
        if not self.turns[0].go.exists():
            if any(not warm(first).exists() for first in alive):
                return
            self.turns[0].go.touch()
        for name, turn in zip(self.order, self.turns, strict=True):
            if name not in ended:
                return
            if turn.then is not None and not turn.then.exists():
                turn.then.touch()
