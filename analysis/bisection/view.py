"""A bisect's search in words: its releases and commits as named, what it found, what it would need, its table."""

import math
from pathlib import Path

from packaging.version import Version

from perfsweep import user_command
from perfsweep.analysis import machines
from perfsweep.analysis.bisection.search import (
    ALIKE,
    GROWTH,
    UNDETERMINED,
    BisectSearch,
    Point,
    most_points,
    version_of,
)
from perfsweep.analysis.groups import configurations
from perfsweep.analysis.render import Column, View
from perfsweep.analysis.statistics.drift import order_effect
from perfsweep.analysis.views.table import row_flags
from perfsweep.records import DONE, load_sweep


def shown(search: BisectSearch, version: str) -> str:
    """A release as `numpy 2.2.4`; a commit as `steplib 68b671b2c3d4 (its subject)`."""
    if not search.subjects:
        return f"{search.package} {version}"
    return f"{search.package} {version[:12]} ({search.subjects.get(version, '')})"


def label(search: BisectSearch, version: str) -> str:
    """A release as `2.2.4`; a commit as `68b671b2c3d4 (its subject)`."""
    return shown(search, version).removeprefix(f"{search.package} ")


def short(search: BisectSearch, version: str) -> str:
    """A release as it is; a commit by its first 12 hex digits."""
    return version[:12] if search.subjects else version


def outcome(search: BisectSearch) -> list[str]:
    """What the search found, in words.

    That is the first bad release, or where it stands, or why it stopped and what it would need.
    """
    if not search.ends_differ():
        ends = [search.points[v] for v in (search.good, search.bad) if v in search.points]
        said = (
            "; ".join(f"{short(search, p.version)}: {p.interval(search.boundary)} ({p.side})" for p in ends)
            or "not measured"
        )
        lines = [
            f"{shown(search, search.good)} and {label(search, search.bad)} are not told apart at this level, so no "
            f"{search.unit} is named ({said}; boundary {_boundary(search)})"
        ]
        return lines + list(dict.fromkeys(would_need(search, p) for p in ends if p.side == UNDETERMINED))
    low, high = search.bracket()
    candidates = ", ".join(v[:12] if search.subjects else v for v in search.releases[low + 1 : high + 1])
    if stuck := search.undetermined():
        return [
            f"stopped at {shown(search, stuck.version)}: {stuck.interval(search.boundary)} is not on one side of the "
            f"boundary {_boundary(search)}; the first {search.unit} on the bad side is one of {candidates}",
            would_need(search, stuck),
        ]
    if search.next() is not None:
        so_far = [f"so far: the first {search.unit} on the bad side is one of {candidates}"]
        return so_far + ([f"stopped: {search.stopped}; the same command again goes on"] if search.stopped else [])
    if any(v not in search.points for v in search.releases[low + 1 : high]):  # its budget spent
        return [
            f"stopped: the search has placed as many {search.unit}s as its level allows "
            f"({most_points(len(search.releases))}: {search.unit}s that cannot be built moved its midpoints); the "
            f"first {search.unit} on the bad side is one of {candidates}"
        ]
    if high - low > 1:
        unbuilt = ", ".join(search.releases[low + 1 : high])
        return [f"the change is in one of {search.package} {candidates}: {unbuilt} cannot be built here"]
    older = bool(search.subjects) or Version(search.good) < Version(search.bad)  # a good commit is an ancestor
    first_bad, last_good = search.releases[high], search.releases[low]
    if older:
        return [
            f"first {search.unit} on the bad side: {shown(search, first_bad)} ({last_good[:12]}, before it, is good)"
        ]
    return [f"the change came in {shown(search, last_good)}: the first {search.unit} on the good side ({first_bad}, "
            "before it, is bad)"]  # fmt: skip


def would_need(search: BisectSearch, point: Point) -> str:
    """What would place an undetermined point, in words."""
    name = short(search, point.version)
    if point.runs < 2:
        return (
            f"{name} has {point.runs} done runs a side, and a side needs 2 or more: `{user_command()} "
            f"status` on its sweep ({point.sweep or 'not started'}) says why"
        )
    if not point.se > 0:
        return f"{name}'s runs show no spread at all (a coarse timer?): more steps a run, not more runs"
    if search.boundary is None:
        return f"{name} is placed against the boundary between the ends, and one end has no value yet"
    runs = search.runs_needed(point)
    if point.version in (search.good, search.bad):
        ends = search.points[search.bad].ratio / search.points[search.good].ratio
        measures = f"{short(search, search.bad)} measures {ends:.2f}x of {short(search, search.good)}"
        if search.ends_alike():
            return f"{measures}, its interval within -+{ALIKE:.0%}: no change of {ALIKE:.0%} or more lies between them"
        if runs is None:
            return (
                f"more runs would not tell the ends apart: {measures}, so there may be no change between them to find"
            )
        if abs(math.log(ends)) <= math.log1p(ALIKE):  # as ends_alike bounds it: either way, times 1 + ALIKE
            return (
                f"{measures}, within {ALIKE:.0%}: there may be no change between them to find (about {runs} runs a "
                "side would tell them apart)"
            )
    if runs is None:
        return f"more runs would not place {name}: it measures at the boundary (part of the change?)"
    if search.stopped and search.looks and point.runs < search.looks[-1]:
        return (
            f"about {runs} runs a side would place {name}, at its value and spread; {search.stopped} at "
            f"{point.runs} runs a side: the same command again goes on"
        )
    setting = f"repeats={runs}" if search.fixed or not search.looks else f"--max-runs {runs}"
    return (
        f"about {runs} runs a side would place {name}, at its value and spread: the bisect again with {setting}, "
        "into a new folder (sweep_name=NAME)"
    )


def _boundary(search: BisectSearch) -> str:
    return f"{search.boundary:.3g}x" if search.boundary is not None else "unknown"


def machine_of(folder: Path, search: BisectSearch) -> str:
    """The machine most of the points' runs had, as a line; '' where unknown.

    It leaves out what the points' runs chose: a bisect of torch pins a torch a point.
    """
    sweeps = [folder / point.sweep for point in search.points.values() if point.sweep]
    runs = [run for sweep in sweeps if sweep.is_dir() for run in load_sweep(sweep)]
    return machines.named(runs, machines.chosen(runs))


def point_flags(folder: Path, search: BisectSearch) -> dict[str, str]:
    """Each point's flags, as its sweep's table gives them; a point without any has none.

    They are its runs' and its reference's runs' flags, each side named, and an order effect in its rounds.
    """
    found = {}
    for version, point in search.points.items():
        sweep = folder / point.sweep if point.sweep else None
        done = [r for r in load_sweep(sweep) if r.state == DONE and r.summary] if sweep and sweep.is_dir() else []
        configs = configurations(done) if done else []
        said = [
            f"{'reference' if version_of(c.first, search.package) == search.good else 'point'}: {flags}"
            for c in configs
            if (flags := row_flags(c))
        ]
        said += ["ORDER EFFECT (`table` of its sweep says it)"] if configs and order_effect(configs) else []
        if said:
            found[version] = "; ".join(said)
    return found


def view(search: BisectSearch, machine: str = "", flags: dict[str, str] | None = None) -> View:
    """The points measured, good first, and below them what the search found.

    `machine` is the machine most of the points' runs had, as machines.named gives it.
    `flags` are each point's (point_flags).
    """
    flags = flags or {}
    measured = [v for v in search.releases if v in search.points]
    order = sorted(measured, key=lambda v: search.releases.index(v))
    return View(
        title=f"bisect {search.package}",
        above=[
            f"bisect {search.package} from {short(search, search.good)} (good) to {short(search, search.bad)} (bad): "
            f"{len(search.releases)} {search.unit}s; {search.metric}; boundary {_boundary(search)} (the geometric "
            "middle of the ends)",
            *([f"machine: {machine}"] if machine else []),
        ],
        columns=[
            Column("step", lambda v: str(search.points[v].order)),
            Column(search.package if not search.subjects else "commit", lambda v: label(search, v)),
            Column("runs a side", lambda v: str(search.points[v].runs or "-")),
            Column(f"ratio [{search.level:.2%} CI across runs]", lambda v: search.points[v].interval(search.boundary)),
            Column("side", lambda v: ": ".join(filter(None, (search.points[v].side, search.points[v].why)))),
            Column("sweep", lambda v: search.points[v].sweep or "-"),
            *([Column("flags", lambda v: flags.get(v, ""))] if flags else []),
        ],
        items=order,
        notes=[
            f"Intervals at {search.level:.2%}: the 5% chance of a wrong side split over the search's looks and "
            "points. A side is given where the interval lies wholly on one side of the boundary, taken as known "
            "(its own error is not counted). The search assumes one change between good and bad that does not "
            "reverse; with several, it finds one of them.",
            *([runs_a_side(search)] if search.looks else []),
            *outcome(search),
        ],
    )


def runs_a_side(search: BisectSearch) -> str:
    """How many runs a side a point takes, in words."""
    if search.fixed:
        return f"Runs a side: {search.looks[0]} at each point (repeats={search.looks[0]})."
    return (
        f"Runs a side: each point's first look at what the spread measured so far says it needs (at least "
        f"{search.looks[0]}), then the next of {', '.join(map(str, search.looks))} (about {GROWTH:g} times as many) "
        f"at each look until it is placed, up to {search.looks[-1]} (--max-runs): at most {len(search.looks)} looks, "
        "as the level counts them."
    )
