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
    rank: int | None = None  # its commit's place in the commit graph's order, where the history has a graph

    @property
    def label(self) -> str:
        if self.commit is None:
            return self.sweeps[0]
        return self.commit[:8] + ("+dirty" if self.dirty else "")


@dataclasses.dataclass
class History:
    points: list[Point]
    order: str  # how the points are ordered, and what was left out, in words


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


def _told_apart(folders: list[Path]) -> dict[Path, str]:
    """Each folder by its name, or by as many of its last parts as tell it from the others: runs-a/default."""
    for parts in range(1, max((len(folder.parts) for folder in folders), default=1)):
        names = {folder: "/".join(folder.parts[1:][-parts:]) for folder in folders}  # parts[0]: the root
        if len(set(names.values())) == len(folders):
            return names
    return {folder: str(folder) for folder in folders}


def _launched_at(sweep_dir: Path) -> float:
    from datetime import datetime

    created = (records.read_manifest(sweep_dir) or {}).get("created_at")
    return datetime.fromisoformat(created).timestamp() if created else sweep_dir.stat().st_mtime


def _tested(run: RunRecord) -> dict:
    return run.status.code_under_test or {}


def _points_by_commit(done: dict[Path, list[RunRecord]], names: dict[Path, str]) -> list[Point]:
    """A point per commit; a dirty commit's sweep is a point of its own (its edits are its own).

    `names` tells the sweep folders apart.
    """
    by_commit: dict[tuple, Point] = {}
    for sweep_dir, runs in done.items():
        name = names[sweep_dir]
        for run in runs:
            tested = _tested(run)
            dirty = bool(tested.get("dirty"))
            key = (tested["commit"], dirty, name if dirty else "")
            point = by_commit.setdefault(
                key, Point(key[0], dirty, tested.get("subject") or "", tested.get("committed_at") or 0.0, [], [])
            )
            point.runs.append(run)
            if name not in point.sweeps:
                point.sweeps.append(name)
    return list(by_commit.values())


def _named_commit(runs: list[RunRecord]) -> str:
    """'cc1d2e3f+dirty its subject': the commit a sweep's runs all name, for a point ordered by launch time; else ''.

    A run of an older perfsweep may not record the subject: another run's stands.
    """
    named = {(_tested(run).get("commit"), bool(_tested(run).get("dirty"))) for run in runs}
    if len(named) != 1:
        return ""
    ((commit, dirty),) = named
    subject = next((said for run in runs if (said := _tested(run).get("subject"))), "")
    return f"{commit[:8]}{'+dirty' * dirty} {subject}".strip() if commit else ""


def _rev_list(repository: Path, *args: str) -> list[str] | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(repository), "rev-list", *args], capture_output=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode().split()


def _in_graph(points: list[Point], rank: dict[str, int]) -> list[Point]:
    """The points in the graph's order, each with its place in it."""
    for point in points:
        point.rank = rank[point.commit]
    return sorted(points, key=lambda p: (p.rank, p.dirty, p.at))


def history(paths: list[Path], repository: Path | None = None) -> History:
    """The points of the sweeps under `paths`, oldest first.

    `repository` (--repo) orders commits by its graph, and keeps only the commits its HEAD descends from: a
    branch's history, not its neighbours'. By default the repository the runs recorded orders them, where it is
    still there.

    Raises:
        HistoryError: no done runs, --repo is no repository, or the runs name commits of several repositories.
    """
    done = {}
    for sweep_dir in sweep_folders(paths):
        runs = [r for r in records.load_sweep(sweep_dir) if r.state == DONE and r.summary]
        if runs:
            done[sweep_dir] = runs
    if not done:
        raise HistoryError(f"no done runs in {', '.join(map(str, paths))}")
    if repository is not None and _rev_list(repository, "--max-count=1", "HEAD") is None:
        raise HistoryError(f"--repo {repository}: not a git repository with a commit")
    names = _told_apart(list(done))
    unnamed = sorted(names[d] for d, runs in done.items() if not all(_tested(r).get("commit") for r in runs))
    apart = ""
    if unnamed and repository is not None:  # --repo asks for its commits: sweeps of no commit are not its points
        done = {d: runs for d, runs in done.items() if names[d] not in unnamed}
        if not done:
            raise HistoryError(f"--repo {repository}: no sweep's runs name a commit of the code under test (code=PATH)")
        apart, unnamed = f"; left out, naming no commit: {', '.join(unnamed[:5])}{', ...' * (len(unnamed) > 5)}", []
    if unnamed:
        points = [
            Point(None, False, _named_commit(found), _launched_at(d), [names[d]], found) for d, found in done.items()
        ]
        points.sort(key=lambda p: p.at)
        said = ", ".join(unnamed[:5]) + (", ..." if len(unnamed) > 5 else "")
        return History(points, f"by launch time, as the runs of {said} name no commit of the code under test")
    runs = [run for found in done.values() for run in found]
    repositories = Counter(_tested(run).get("repository") for run in runs)
    if repository is None and len(repositories) > 1:
        listed = ", ".join(f"{where} ({count} runs)" for where, count in repositories.most_common())
        raise HistoryError(f"the runs measured commits of several repositories: {listed}; --repo PATH picks one")
    points = _points_by_commit(done, names)
    where = (repository or Path(next(iter(repositories)))).resolve()  # `--repo .` names the folder, not "."
    graph = _rev_list(where, "--topo-order", "--reverse", "HEAD") if repository else None
    graph = graph or _rev_list(where, "--topo-order", "--reverse", *sorted({p.commit for p in points}))
    rank = {commit: index for index, commit in enumerate(graph or [])}
    if repository is not None:
        elsewhere = [p for p in points if p.commit not in rank]
        points = [p for p in points if p.commit in rank]
        if not points:
            raise HistoryError(f"none of the runs' commits is an ancestor of {repository}'s HEAD")
        left = f"; left out, not ancestors of its HEAD: {', '.join(p.label for p in elsewhere)}" if elsewhere else ""
        return History(_in_graph(points, rank), f"by the commit graph of {where}{left}{apart}")
    if all(p.commit in rank for p in points):
        return History(_in_graph(points, rank), f"by the commit graph of {where}")
    points.sort(key=lambda p: (p.at, p.dirty))
    return History(points, "by commit time (no repository at hand that holds every commit)")
