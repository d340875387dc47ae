"""Bisection across releases: which release of a package first shows a change, found by measuring midpoints.

A bisect follows one metric from a good release to a bad one: a ratio of step times measured side by side.

- Against the good release (one configuration): a release's step time over the good release's.
  The two run in the same interleaved rounds of the point's sweep.
- One comparison (two configurations, one the workload's baseline: `input_type=tensor,subclass`):
  within each release's environment, the one's step time over its baseline's ("subclass step / tensor step").

The endpoints are measured first.
The boundary is the geometric middle of their values.
A release's side follows from its interval:

- good: the interval lies wholly on the good release's side of the boundary;
- bad: it lies wholly on the other side;
- undetermined: otherwise, or with one run a side.

The midpoint of what is left is measured, and the range halves.
This goes on until the first release on the bad side is next to the last on the good side.
A release that cannot be built is passed over for its neighbour.
An undetermined point stops the search.
It then says where, which releases may still hold the change, and the runs that point would need.
It claims nothing beyond the measurements.

Every interval is across runs: the process is the unit.
Its level holds the chance of any wrong side under 5% over the whole search.
The 5% is split evenly over each point's looks (repeats=auto's schedule).
It is split again over the most releases a search over these can place (Bonferroni's bound).
"""

import dataclasses
import math
from pathlib import Path

from packaging.version import InvalidVersion, Version
from scipy import stats as distributions

from perfsweep import records, user_command
from perfsweep.analysis.groups import compared_along, speedups
from perfsweep.analysis.render import Column, View
from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import figures
from perfsweep.records import RunRecord

RECORD = "bisect.json"  # in the bisect's folder, beside its points' sweep folders
GOOD, BAD, UNDETERMINED, UNBUILT = "good", "bad", "undetermined", "cannot be built"


class BisectError(Exception):
    """A bisect that cannot start: the reason, and what would work."""


def between(versions: list[str], good: str, bad: str) -> list[str]:
    """The releases from `good` to `bad`, both included, in that order (newest last where bad is newer)."""
    known = {}
    for version in versions:
        try:
            known[version] = Version(version)
        except InvalidVersion:
            continue
    missing = [f"{which}={v}" for which, v in (("good", good), ("bad", bad)) if v not in known]
    if missing:
        near = ", ".join(sorted(known, key=known.get, reverse=True)[:12])
        raise BisectError(f"{' and '.join(missing)}: not a release this Python can install; the latest: {near}")
    if good == bad:
        raise BisectError(f"good and bad are the same release ({good}): nothing to bisect")
    for which, version in (("good", good), ("bad", bad)):
        if known[version].is_prerelease or known[version].local is not None:
            raise BisectError(
                f"{which}={version} is a pre-release or a local build; a bisect runs over final releases (the "
                f"latest: {', '.join(v for v in sorted(known, key=known.get, reverse=True) if _final(known[v]))[:80]})"
            )
    low, high = sorted((known[good], known[bad]))
    final = [v for v in known if _final(known[v])]  # not 2.13.0+cpu: a build of 2.13.0
    inside = sorted((v for v in final if low <= known[v] <= high), key=known.get)
    return inside if known[good] < known[bad] else inside[::-1]


def _final(version: Version) -> bool:
    return not version.is_prerelease and version.local is None


def most_points(releases: int) -> int:
    """The most releases a search over `releases` (both ends included) places.

    That is the two ends and a midpoint per halving.
    """
    return 2 + math.ceil(math.log2(max(releases - 1, 1)))


def level(looks: int, releases: int) -> float:
    return 1 - (1 - LEVEL) / (looks * most_points(releases))


@dataclasses.dataclass(frozen=True)
class Point:
    """One release's value of the metric (a ratio of step times, with its interval across runs)."""

    version: str
    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    runs: int = 0  # runs a side
    se: float = math.nan  # of the log ratio, and its degrees of freedom
    df: float = math.nan
    sweep: str = ""  # the sweep folder it was measured in, within the bisect's folder
    side: str = ""
    why: str = ""  # cannot be built: the reason
    order: int = 0  # the search's path: 1 for the first release placed
    reference: bool = False  # the good release the others' step times are taken over: 1.00x by definition

    def interval(self) -> str:
        if self.side == UNBUILT or not math.isfinite(self.ratio):
            return "-"
        if self.runs == 0:
            return f"{self.ratio:.2f}x (the reference)"
        value, low, high = figures(self.ratio, self.low, self.high)
        return f"{value}x [{low}, {high}]"


def values(runs: list[RunRecord], package: str, reference: str | None, at: float) -> dict[str, Point]:
    """Each release's value in one point's done runs.

    The value is its step time over the `reference` release's, compared along the package's axis.
    Where there is no reference, it is the release's one comparison.
    Raises BisectError where a release has not exactly one comparison.
    """
    if reference is not None:
        runs = compared_along(runs, f"{package}={reference}")
    found: dict[str, list[Point]] = {}
    for versus, s in speedups(runs, at):
        version = versus.config.first.axis(package)
        ratio = Point(version, 1 / s.value, 1 / s.high, 1 / s.low, min(s.runs), s.se, s.df)
        found.setdefault(version, []).append(ratio if s.replicated else dataclasses.replace(ratio, runs=1))
    several = {version: len(points) for version, points in found.items() if len(points) > 1}
    if several:
        raise BisectError(f"{package}: a bisect follows one comparison a release; these make several: {several}")
    return {version: points[0] for version, points in found.items()}


@dataclasses.dataclass
class Search:
    """The state of a bisect: the releases from good to bad, and the points measured."""

    package: str
    releases: list[str]  # good first, bad last
    metric: str  # what the ratio is, in words
    level: float
    points: dict[str, Point] = dataclasses.field(default_factory=dict)
    subjects: dict[str, str] = dataclasses.field(default_factory=dict)  # a bisect over commits: commit -> subject

    @property
    def unit(self) -> str:
        """What the search steps over: releases of a package, or commits of a repository."""
        return "commit" if self.subjects else "release"

    def shown(self, version: str) -> str:
        """A release as `numpy 2.2.4`; a commit as `steplib 68b671b2c3d4 (its subject)`."""
        if not self.subjects:
            return f"{self.package} {version}"
        return f"{self.package} {version[:12]} ({self.subjects.get(version, '')})"

    @property
    def good(self) -> str:
        return self.releases[0]

    @property
    def bad(self) -> str:
        return self.releases[-1]

    @property
    def boundary(self) -> float | None:
        ends = [self.points.get(v) for v in (self.good, self.bad)]
        if not all(p and math.isfinite(p.ratio) for p in ends):
            return None
        return math.sqrt(ends[0].ratio * ends[1].ratio)

    def side(self, point: Point) -> str:
        """Which side of the boundary the point's interval lies on (the reference is on its own side)."""
        if point.side == UNBUILT:
            return UNBUILT
        if point.reference:
            return GOOD
        boundary, good = self.boundary, self.points[self.good].ratio
        # one run a side, or runs of no spread at all (a coarse timer): no interval to place it by
        if point.runs < 2 or not point.se > 0 or boundary is None or not math.isfinite(point.low):
            return UNDETERMINED
        below = point.high < boundary
        if below or point.low > boundary:
            return GOOD if below == (good < boundary) else BAD
        return UNDETERMINED

    def add(self, point: Point) -> Point:
        """Place `point` (measured again: in its place in the path)."""
        earlier = self.points.get(point.version)
        order = earlier.order if earlier else len(self.points) + 1
        self.points[point.version] = dataclasses.replace(point, order=order)  # an end's value moves the boundary
        self.points[point.version] = dataclasses.replace(point, order=order, side=self.side(point))
        if point.version in (self.good, self.bad):  # the boundary moved: the other end is placed again
            for end in (self.good, self.bad):
                if end in self.points:
                    self.points[end] = dataclasses.replace(self.points[end], side=self.side(self.points[end]))
        return self.points[point.version]

    def ends_differ(self) -> bool:
        ends = ((self.good, GOOD), (self.bad, BAD))
        return all(v in self.points and self.points[v].side == side for v, side in ends)

    def bracket(self) -> tuple[int, int]:
        """The indices of the last release on the good side before the first on the bad side, and of that one."""
        sides = [self.points[v].side if v in self.points else "" for v in self.releases]
        first_bad = sides.index(BAD)
        last_good = max(i for i in range(first_bad) if sides[i] == GOOD)
        return last_good, first_bad

    def undetermined(self) -> Point | None:
        low, high = self.bracket()
        inside = [self.points.get(v) for v in self.releases[low + 1 : high]]
        return next((p for p in inside if p and p.side == UNDETERMINED), None)

    def midpoints_left(self) -> int:
        """How many more releases the search may place within its level (unbuilt ones place nothing)."""
        placed = [p for v, p in self.points.items() if v not in (self.good, self.bad) and p.side != UNBUILT]
        return most_points(len(self.releases)) - 2 - len(placed)

    def next(self) -> str | None:
        """The release to measure next: the untried one nearest the middle of what is left; None when done."""
        if not self.ends_differ() or self.undetermined() or self.midpoints_left() <= 0:
            return None
        low, high = self.bracket()
        left = [i for i in range(low + 1, high) if self.releases[i] not in self.points]
        middle = (low + high) / 2
        return self.releases[min(left, key=lambda i: (abs(i - middle), i))] if left else None

    def runs_needed(self, point: Point) -> int | None:
        """The runs a side that would place `point` on one side, at its value and spread.

        Returns None where more runs would not place it:
        it measures at the boundary, more than 1000 would be needed, or it has no spread to go by.
        """
        boundary = self.boundary
        if boundary is None or not (point.se > 0 and point.runs >= 2):
            return None
        distance, spread = abs(math.log(point.ratio / boundary)), point.se * math.sqrt(point.runs)
        if distance == 0:
            return None
        for runs in range(max(point.runs, 2), 1001):
            if distributions.t.ppf(0.5 + self.level / 2, runs - 1) * spread / math.sqrt(runs) < distance:
                return runs
        return None

    def outcome(self) -> list[str]:
        """What the search found, in words.

        That is the first bad release, or where it stands, or why it stopped and what it would need.
        """
        if not self.ends_differ():
            ends = [self.points[v] for v in (self.good, self.bad) if v in self.points]
            said = "; ".join(f"{p.version}: {p.interval()} ({p.side})" for p in ends) or "not measured"
            lines = [
                f"{self.shown(self.good)} and {self.shown(self.bad).removeprefix(self.package + ' ')} are not told "
                "apart at this level, so no "
                f"{self.unit} is named "
                f"({said}; boundary {self._boundary()})"
            ]
            return lines + [self.would_need(p) for p in ends if p.side == UNDETERMINED]
        low, high = self.bracket()
        candidates = ", ".join(v[:12] if self.subjects else v for v in self.releases[low + 1 : high + 1])
        if stuck := self.undetermined():
            return [
                f"stopped at {self.shown(stuck.version)}: {stuck.interval()} is not on one side of the boundary "
                f"{self._boundary()}; the first {self.unit} on the bad side is one of {candidates}",
                self.would_need(stuck),
            ]
        if self.next() is not None:
            return [f"so far: the first release on the bad side is one of {candidates}"]
        if any(v not in self.points for v in self.releases[low + 1 : high]):  # its budget spent
            return [
                f"stopped: the search has placed as many releases as its level allows "
                f"({most_points(len(self.releases))}: releases that cannot be built moved its midpoints); the first "
                f"release on the bad side is one of {candidates}"
            ]
        if high - low > 1:
            unbuilt = ", ".join(self.releases[low + 1 : high])
            return [f"the change is in one of {self.package} {candidates}: {unbuilt} cannot be built here"]
        older = bool(self.subjects) or Version(self.good) < Version(self.bad)  # a good commit is an ancestor
        first_bad, last_good = self.releases[high], self.releases[low]
        if older:
            return [
                f"first {self.unit} on the bad side: {self.shown(first_bad)} ({last_good[:12]}, before it, is good)"
            ]
        return [f"the change came in {self.shown(last_good)}: the first {self.unit} on the good side ({first_bad}, "
                "before it, is bad)"]  # fmt: skip

    def would_need(self, point: Point) -> str:
        """What would place an undetermined point, in words."""
        if point.runs < 2:
            return (
                f"{point.version} has {point.runs} done runs a side, and a side needs 2 or more: `{user_command()} "
                f"status` on its sweep ({point.sweep or 'not started'}) says why"
            )
        if not point.se > 0:
            return f"{point.version}'s runs show no spread at all (a coarse timer?): more steps a run, not more runs"
        runs = self.runs_needed(point)
        if runs is None:
            return f"more runs would not place {point.version}: it measures at the boundary (part of the change?)"
        return (
            f"about {runs} runs a side would place {point.version}, at its value and spread: the bisect again with "
            f"repeats={runs}, into a new folder (sweep_name=NAME)"
        )

    def _boundary(self) -> str:
        return f"{self.boundary:.3g}x" if self.boundary is not None else "unknown"

    def view(self) -> View:
        measured = [v for v in self.releases if v in self.points]
        order = sorted(measured, key=lambda v: self.releases.index(v))
        return View(
            title=f"bisect {self.package}",
            above=[
                f"bisect {self.package} from {self.good} (good) to {self.bad} (bad): "
                f"{len(self.releases)} {self.unit}s; {self.metric}; boundary {self._boundary()} (the geometric "
                "middle of the ends)"
            ],
            columns=[
                Column("step", lambda v: str(self.points[v].order)),
                Column(self.package if not self.subjects else "commit", lambda v: self.shown(v).split(" ", 1)[1]),
                Column("runs a side", lambda v: str(self.points[v].runs or "-")),
                Column(f"ratio [{self.level:.2%} CI across runs]", lambda v: self.points[v].interval()),
                Column("side", lambda v: ": ".join(filter(None, (self.points[v].side, self.points[v].why)))),
                Column("sweep", lambda v: self.points[v].sweep or "-"),
            ],
            items=order,
            notes=[
                f"Intervals at {self.level:.2%}: the 5% chance of a wrong side split over the search's looks and "
                "points. A side is given where the interval lies wholly on one side of the boundary, taken as known "
                "(its own error is not counted). The search assumes one change between good and bad that does not "
                "reverse; with several, it finds one of them.",
                *self.outcome(),
            ],
        )

    def first_bad(self) -> tuple[str, str] | None:
        """(the last release on the good side, the first on the bad side) where the search has named them."""
        if not self.ends_differ() or self.undetermined() or self.next() is not None:
            return None
        low, high = self.bracket()
        return (self.releases[low], self.releases[high]) if high - low == 1 else None

    def record(self, overrides: list[str], looks: list[int]) -> dict:
        found = self.first_bad()
        return {
            "package": self.package,
            "looks": looks,
            "good": self.good,
            "bad": self.bad,
            "overrides": overrides,
            "metric": self.metric,
            "level": self.level,
            "boundary": self.boundary,
            "releases": self.releases,
            **({"subjects": self.subjects} if self.subjects else {}),
            "points": [dataclasses.asdict(self.points[v]) for v in self.releases if v in self.points],
            "first_bad": found[1] if found else None,
            "last_good": found[0] if found else None,
            "outcome": self.outcome(),
        }

    def save(self, folder: Path, overrides: list[str], looks: list[int]) -> None:
        records.write_json(folder / RECORD, self.record(overrides, looks))

    @classmethod
    def load(cls, folder: Path) -> "Search | None":
        """The search a bisect's folder records (None where the folder is not a bisect's)."""
        if not (folder / RECORD).is_file():
            return None
        record = records.read_json(folder / RECORD)
        search = cls(record["package"], record["releases"], record["metric"], record["level"])
        search.subjects = record.get("subjects", {})
        for fields in record["points"]:  # JSON has no NaN: a figure not measured was written as null
            search.points[fields["version"]] = Point(**{k: math.nan if v is None else v for k, v in fields.items()})
        return search
