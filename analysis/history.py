"""Sweeps as the points of a history: one point per commit of the code under test.

Each run records the commit of the code under test its launch found (records/code.py `under_test`).
The runs of every sweep at one commit make that commit's point.
Points are ordered by the repository's commit graph where the repository is at hand.
Else they are ordered by commit time.
Sweeps whose runs name no commit are a point each, ordered by when they were launched.
"""

import dataclasses
import subprocess
from collections import Counter
from pathlib import Path

from perfsweep import records
from perfsweep.records import DONE, RunRecord


class HistoryError(ValueError):
    """No history can be made of what was given: the reason, and what would work."""


@dataclasses.dataclass
class Point:
    """One commit of the code under test (or one sweep, where none is recorded) and its done runs."""

    commit: str | None
    dirty: bool
    subject: str
    at: float  # commit time, or the sweep's launch time, in unix seconds
    sweeps: list[str]
    runs: list[RunRecord]

    @property
    def label(self) -> str:
        if self.commit is None:
            return self.sweeps[0]
        return self.commit[:8] + ("+dirty" if self.dirty else "")


@dataclasses.dataclass
class History:
    points: list[Point]
    order: str  # how the points are ordered, in words
    repository: str | None  # the code under test's repository, where the runs name one


def sweep_folders(paths: list[Path]) -> list[Path]:
    """The sweep folders given: each path that is one, and the sweep folders inside each path that is not."""
    found = []
    for path in paths:
        if (path / records.SWEEP).is_file():
            found.append(path)
        elif path.is_dir():
            inside = sorted(p.parent for p in path.glob(f"*/{records.SWEEP}"))
            if not inside:
                raise HistoryError(f"{path}: neither a sweep folder nor a folder of them (no sweep.json)")
            found += inside
        else:
            raise HistoryError(f"{path}: no such folder")
    return list(dict.fromkeys(p.resolve() for p in found))


def _launched_at(sweep_dir: Path) -> float:
    from datetime import datetime

    created = (records.read_manifest(sweep_dir) or {}).get("created_at")
    return datetime.fromisoformat(created).timestamp() if created else sweep_dir.stat().st_mtime


def _tested(run: RunRecord) -> dict:
    return run.status.code_under_test or {}


def _points_by_commit(done: dict[Path, list[RunRecord]]) -> list[Point]:
    by_commit: dict[tuple[str, bool], Point] = {}
    for sweep_dir, runs in done.items():
        for run in runs:
            tested = _tested(run)
            key = (tested["commit"], bool(tested.get("dirty")))
            point = by_commit.setdefault(
                key, Point(key[0], key[1], tested.get("subject") or "", tested.get("committed_at") or 0.0, [], [])
            )
            point.runs.append(run)
            if sweep_dir.name not in point.sweeps:
                point.sweeps.append(sweep_dir.name)
    return list(by_commit.values())


def _graph_order(repository: Path, commits: set[str]) -> list[str] | None:
    """The commits oldest first by the repository's graph; None where it is not at hand or lacks one."""
    try:
        out = subprocess.run(
            ["git", "-C", str(repository), "rev-list", "--topo-order", "--reverse", *sorted(commits)],
            capture_output=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    listed = [line for line in out.stdout.decode().split() if line in commits]
    return listed if set(listed) == commits else None


def history(paths: list[Path], repository: Path | None = None) -> History:
    """The points of the sweeps under `paths`, oldest first.

    `repository` orders commits by its graph; by default the one the runs recorded, where it is still there.
    """
    done = {}
    for sweep_dir in sweep_folders(paths):
        runs = [r for r in records.load_sweep(sweep_dir) if r.state == DONE and r.summary]
        if runs:
            done[sweep_dir] = runs
    if not done:
        raise HistoryError(f"no done runs in {', '.join(map(str, paths))}")
    runs = [run for found in done.values() for run in found]
    if all(_tested(run).get("commit") for run in runs):
        points = _points_by_commit(done)
        named = Counter(_tested(run).get("repository") for run in runs).most_common(1)[0][0]
        where = repository or (Path(named) if named else None)
        graph = _graph_order(where, {p.commit for p in points}) if where else None
        if graph:
            rank = {commit: index for index, commit in enumerate(graph)}
            points.sort(key=lambda p: (rank[p.commit], p.dirty))
            return History(points, f"by the commit graph of {where}", named)
        points.sort(key=lambda p: (p.at, p.dirty))
        return History(points, "by commit time (no repository at hand that holds every commit)", named)
    points = [
        Point(None, False, "", _launched_at(sweep_dir), [sweep_dir.name], found) for sweep_dir, found in done.items()
    ]
    points.sort(key=lambda p: p.at)
    return History(points, "by launch time (runs that name no commit of the code under test)", None)
