"""Bisection across releases or commits: which one first shows a change, found by measuring midpoints.

A bisect follows one metric from a good release to a bad one: a ratio of step times measured side by side.

- Against the good release (one configuration): a release's step time over the good release's.
  The two alternate in the rounds of the point's sweep (A B A B), so that drift falls on both.
- One comparison (two configurations, one the workload's baseline: `input_type=tensor,subclass`):
  within each release's environment, the one's step time over its baseline's ("subclass step / tensor step").

The endpoints are measured first.
Ends not told apart that measure alike stop the search.
Their ratio's interval then lies within -+ALIKE.
No change that size lies between them.
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
The 5% is split evenly over the looks a point may take, as repeats=auto splits it (statistics/rounds.py).
It is split again over the most releases a search over these can place (Bonferroni's bound).

A point adds runs until it is placed or its looks run out.
Its looks follow a schedule fixed before the search: 3 runs a side, then 1.5 times as many at each look, up to a cap.
Its first look is the number that the spread measured so far says it needs.
That spread comes from other processes than the point's own: the points before it, or runs given (`Prior`).
So each look's interval keeps its level, and the point never takes more looks than the schedule's count.

The search's record is store.py's; its words and table are view.py's.
"""

import dataclasses
import math
import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from perfsweep import records
from perfsweep.analysis.groups import compared_along, configurations, speedups
from perfsweep.analysis.statistics import distributions
from perfsweep.analysis.statistics.bootstrap import LEVEL
from perfsweep.analysis.statistics.speedup import Speedup, figures
from perfsweep.analysis.statistics.variance import fewest_runs
from perfsweep.records import RunRecord

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
        commits = [v for v in (good, bad) if v not in known and re.fullmatch(r"(?=[0-9]*[a-f])[0-9a-f]{7,40}", v)]
        hint = f"; {commits[0]} reads as a commit: --git GOOD BAD bisects your repository's commits" if commits else ""
        raise BisectError(f"{' and '.join(missing)}: not a release this Python can install; the latest: {near}{hint}")
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


FIRST_LOOK = 3  # runs a side: the fewest a t-interval at a search's level can place a point with
GROWTH = 1.5  # each look of a point has this many times the runs of the one before
ALIKE = 0.05  # ends closer than this measure alike: compare's default threshold for a change


def schedule(max_runs: int) -> list[int]:
    """The runs a side at which a point may be looked at: 3, 5, 8, 12, 18, 27, 41... and the cap.

    Growing by half at each look, few looks reach many runs: each look spends a share of the error.
    """
    looks = [min(FIRST_LOOK, max_runs)]
    while looks[-1] < max_runs:
        looks.append(min(max_runs, math.ceil(looks[-1] * GROWTH)))
    return looks


def point_looks(first: int, looks: list[int]) -> list[int]:
    """A point's looks: its first at `first` runs a side, then the schedule's looks beyond it.

    `first` is at least the schedule's first look, so a point takes no more looks than the schedule has.
    """
    return [first, *(n for n in looks if n > first)]


MOST_RUNS = 1000  # a point that needs more runs a side than this is taken as one no number of runs places


def runs_for(distance: float, spread: float, at: float, least: int = 2) -> int | None:
    """The fewest runs a side, from `least`, whose interval at level `at` reaches no further than `distance`.

    `distance` is on the log scale: from the point's ratio to the boundary.
    `spread` is the standard deviation of the point's log ratio with one run a side.
    None where more than MOST_RUNS would be needed, or the distance is 0.
    """
    runs = fewest_runs(spread, distance, at, least)
    return runs if runs is not None and runs <= MOST_RUNS else None


def version_of(run: RunRecord, package: str) -> str | None:
    """The release of `package` a run measured (its axis), or else the commit of the code under test it recorded."""
    return run.axis(package) if run.axis(package) != "-" else (run.status.code_under_test or {}).get("commit")


@dataclasses.dataclass(frozen=True)
class Prior:
    """What runs measured before a bisect say of its points (`--from`).

    The spread is that of a point's log ratio between runs, with one run a side.
    The ratio is the bad end's value over the good end's, where the runs hold both ends.
    """

    spread: float = math.nan
    df: float = 0
    ratio: float = math.nan
    source: str = ""  # the folders, in words


def prior_from(paths: list[Path], package: str, good: str, bad: str, against_good: bool) -> Prior:
    """What the done runs of the sweeps under `paths` (a folder of sweeps, as for `history`) say (prior_of).

    Raises:
        BisectError: the paths hold no sweep, or no spread between runs.
    """
    from perfsweep.analysis.timeline import HistoryError, sweep_folders

    try:
        folders = sweep_folders(paths)
    except HistoryError as error:
        raise BisectError(f"--from: {error}") from error
    sweeps = [[r for r in records.load_sweep(f) if r.state == records.DONE and r.summary] for f in folders]
    return prior_of(sweeps, package, good, bad, against_good, f"the runs in {', '.join(map(str, paths))}")


def prior_of(
    sweeps: list[list[RunRecord]], package: str, good: str, bad: str, against_good: bool, source: str
) -> Prior:
    """The spread, and the ratio of the ends, that the done runs of `sweeps` show.

    `against_good`: the metric is one configuration's step time over the good end's.
    Its spread is that of two runs apart: each configuration's spread between its runs, times the square root of 2.
    The ratio of the ends is then that of the step times of the runs at good and at bad (version_of).
    Otherwise the metric is a comparison within each point; its spread is that of the sweeps' comparisons.

    Raises:
        BisectError: no spread between runs.
    """
    spreads, at = [], {good: [], bad: []}
    for runs in sweeps:
        if not against_good:
            spreads += [(s.se * math.sqrt(s.runs[0]), s.df) for _, s in speedups(runs) if s.se > 0 and s.df > 0]
            continue
        for config in configurations(runs):
            logs = [math.log(m) for r in config.runs if (m := r.summary.median("step")) and m > 0]
            if len(logs) >= 2:
                mean = sum(logs) / len(logs)
                variance = sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)
                spreads.append((math.sqrt(2 * variance), len(logs) - 1))
        for run in runs:
            if (version := version_of(run, package)) in at and (m := run.summary.median("step")) and m > 0:
                at[version].append(math.log(m))
    df = sum(d for _, d in spreads)
    if not df:
        raise BisectError(f"--from: {source} show no spread between runs (no configuration has 2 done runs)")
    ratio = math.exp(sum(at[bad]) / len(at[bad]) - sum(at[good]) / len(at[good])) if all(at.values()) else math.nan
    return Prior(math.sqrt(sum(d * s * s for s, d in spreads) / df), df, ratio, source)


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

    @classmethod
    def of(cls, version: str, s: Speedup) -> "Point":
        """The point of a speed-up of the release's runs over the reference's (its ratio is the inverse)."""
        point = cls(version, 1 / s.value, 1 / s.high, 1 / s.low, min(s.runs), s.se, s.df)
        return point if s.replicated else dataclasses.replace(point, runs=1)

    def interval(self, boundary: float | None = None) -> str:
        """'1.0x [0.798, 1.228]': to the digits that keep the bounds on their side of the boundary (else of 1.0)."""
        if self.side == UNBUILT or not math.isfinite(self.ratio):
            return "-"
        if self.runs == 0:
            return f"{self.ratio:.2f}x (the reference)"
        value, low, high = figures(self.ratio, self.low, self.high, apart=boundary or 1.0)
        return f"{value}x [{low}, {high}]"


def values(
    runs: list[RunRecord], package: str, reference: str | None, at: float, unit: str = "release"
) -> dict[str, Point]:
    """Each release's value in one point's done runs.

    The value is its step time over the `reference` release's, compared along the package's axis.
    Where there is no reference, it is the release's one comparison.
    Raises BisectError where a release has not exactly one comparison.
    `unit` names what the search steps over in that message: release or commit.
    """
    if reference is not None:
        runs = compared_along(runs, f"{package}={reference}")
    found: dict[str, list[Point]] = {}
    for versus, s in speedups(runs, at):
        version = versus.config.first.axis(package)
        found.setdefault(version, []).append(Point.of(version, s))
    several = {version: len(points) for version, points in found.items() if len(points) > 1}
    if several:
        raise BisectError(f"{package}: a bisect follows one comparison a {unit}; these make several: {several}")
    return {version: points[0] for version, points in found.items()}


@dataclasses.dataclass
class BisectSearch:
    """The state of a bisect: the releases from good to bad, and the points measured."""

    package: str
    releases: list[str]  # good first, bad last
    metric: str  # what the ratio is, in words
    level: float
    points: dict[str, Point] = dataclasses.field(default_factory=dict)
    subjects: dict[str, str] = dataclasses.field(default_factory=dict)  # a bisect over commits: commit -> subject
    looks: list[int] = dataclasses.field(default_factory=list)  # the schedule of runs a side a point may look at
    fixed: bool = False  # repeats=N: one look at N runs a side, not looks until placed
    stopped: str = ""  # what stopped the search short of its end: its time spent

    @property
    def unit(self) -> str:
        """What the search steps over: releases of a package, or commits of a repository."""
        return "commit" if self.subjects else "release"

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

    def ends_alike(self) -> bool:
        """Whether the ends measure alike.

        The interval of their ratio, at the search's level, then lies within -+ALIKE.
        No change that size lies between them.
        So no midpoint is worth measuring.
        The interval combines the ends' own (Welch).
        The reference is 1.00x by definition: it adds none.
        """
        ends = [self.points.get(v) for v in (self.good, self.bad)]
        if not all(p and math.isfinite(p.ratio) for p in ends):
            return False
        measured = [p for p in ends if not p.reference]
        if any(p.runs < 2 or not p.se > 0 for p in measured):
            return False
        se = math.sqrt(sum(p.se**2 for p in measured))
        df = se**4 / sum(p.se**4 / p.df for p in measured)
        half = distributions.t_ppf(0.5 + self.level / 2, df) * se
        return abs(math.log(ends[1].ratio / ends[0].ratio)) + half <= math.log1p(ALIKE)

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
        distance = abs(math.log(point.ratio / boundary))
        return runs_for(distance, point.se * math.sqrt(point.runs), self.level, point.runs)

    def spread(self) -> float | None:
        """The spread of a point's log ratio with one run a side, pooled over the points measured so far.

        None where no point has two runs a side with a spread.
        """
        measured = [p for p in self.points.values() if not p.reference and p.runs >= 2 and p.se > 0 and p.df > 0]
        if not measured:
            return None
        return math.sqrt(sum(p.df * p.se**2 * p.runs for p in measured) / sum(p.df for p in measured))

    def first_look(self, version: str, prior: Prior | None) -> tuple[int, str]:
        """The runs a side of a point's first look, and where that number comes from.

        It is what the spread says would place a point at one end's value, at the search's level.
        The spread is the points' measured so far, else the prior's.
        A midpoint's distance to the boundary is an end's; an end's is half the prior's ratio of the ends.
        Without a spread or a distance, it is the schedule's first look.
        """
        if self.fixed:
            return self.looks[0], f"repeats={self.looks[0]}"
        spread, said = self.spread(), "the spread of the points measured so far"
        if spread is None and prior is not None:
            spread, said = prior.spread, f"the spread of {prior.source}"
        if version in (self.good, self.bad):
            distance = abs(math.log(prior.ratio)) / 2 if prior is not None and prior.ratio > 0 else math.nan
        else:
            distance = abs(math.log(self.boundary / self.points[self.good].ratio))
        needed = runs_for(distance, spread, self.level, self.looks[0]) if spread is not None else None
        if needed is None:
            return self.looks[0], "the schedule's first look"
        return min(needed, self.looks[-1]), f"what {said} says a point needs"

    def first_bad(self) -> tuple[str, str] | None:
        """(the last release on the good side, the first on the bad side) where the search has named them."""
        if not self.ends_differ() or self.undetermined() or self.next() is not None:
            return None
        low, high = self.bracket()
        return (self.releases[low], self.releases[high]) if high - low == 1 else None
