"""A project's history: each configuration's step time over the commits of the code under test.

    perfsweep history RUNS... [--repo PATH] [--phase NAME] [--threshold 0.05] [--max-unmatched 0.0] [--out DIR]

RUNS are sweep folders, or folders that hold them: a sweep per commit, as CI keeps them.
Each configuration gets a table of its points, oldest first: the commit, its runs, the step time and its 95%
interval across the runs (processes).
Change points are marked on the first point of each new segment (analysis/statistics/changepoints.py).
With --out, a plot per configuration and history.html are written there.

The newest point is held to the points before it as compare holds B to A.
A configuration of the points before it that the newest point lacks is named, with the overrides that would match.
Past the share of those configurations that --max-unmatched allows (default 0: none), they fail the gate.
A point that shares no configuration with the others is named, with what parts it from them.
A configuration that only the newest point has is named; it fails nothing.

The exit status is for CI.
It reads the newest point of each configuration.
Each configuration's test gives a p-value that its newest points are slower (changepoints.py).
A flag stands where it is beyond the threshold and significant with the sweep's configurations held as a family
to a 5% error rate (Holm's step-down, as compare holds its configurations).
So with nothing changed, a history flags any of its configurations in at most 5% of pushes, however many.

    0   nothing flagged, or not enough history (fewer than 3 points)
    1   REGRESSION: the newest point lies in a segment that a change point made slower by more than the
        threshold, and the two newest points are each slower than the segment before by more than it
        (consecutive sweeps agree, as PyTorch's regression reports ask)
    3   POSSIBLE REGRESSION: such a change point that the two newest points do not both confirm, or that only
        points beside a neighbour confirm (shared host); or the newest point alone slower than its segment by more
        than the threshold, and beyond the noise (the next sweep confirms it or not)
    8   more of the configurations before the newest point missing from it than --max-unmatched allows, and
        nothing else flagged; 9 and 11 are 8 added to 1 and 3
    2   no history could be made (no done runs, a bad argument); with --wandb, W&B unreachable before anything
        was written (a failure after it is a warning: the status stays the history's)
    70  perfsweep failed (a traceback): no verdict (commands/entry.py's INTERNAL_ERROR)
"""

import dataclasses
import html
import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np

from perfsweep.analysis import machines
from perfsweep.analysis.groups import USER_KEYS, code_name
from perfsweep.analysis.render import Column, View, figure, html_section
from perfsweep.analysis.statistics import changepoints, host_flags, machine_speed
from perfsweep.analysis.statistics.speedup import figures, holm, percent
from perfsweep.analysis.statistics.variance import across_runs
from perfsweep.analysis.timeline import History, Point
from perfsweep.analysis.views.compare import (
    EXIT_UNMATCHED,
    UNMATCHED,
    UNSET,
    Identity,
    beyond,
    changes,
    code_of,
    differences,
    identity_of,
    lacking,
    launch,
    measuring,
    parted,
    unmatched_share,
)
from perfsweep.conf.schema import COMMIT
from perfsweep.records import RunRecord, atomic_write
from perfsweep.records.words import counted

EXIT_REGRESSION, EXIT_POSSIBLE, EXIT_NO_HISTORY = 1, 3, 2
OWN_FILES = "perfsweep files"  # code_of's key of perfsweep's own modules
CONFIRMING = 2  # the newest points that must each be slower, beyond the threshold, for a confirmed regression
SHARED = "shared host"  # a regression that only points beside a neighbour confirm: possible, as compare says it
ALONE_P = 0.05  # an open regression's newest point, slower again than its segment, is named past this one-sided p
NEWEST_FROM = 3  # points a history needs before its newest alone can stand out (two to set the noise by)
PAGE = "history.html"


@dataclasses.dataclass
class Row:
    """A point of one configuration's history."""

    point: Point
    times: np.ndarray  # each run's median time of the phase
    change: changepoints.Change | None = None  # the change point that starts a segment here
    apart: float | None = None  # left out of the search: its runs' variance over the other points' (spread_apart)


@dataclasses.dataclass
class Series:
    """One configuration across the points that hold it, and what its history says."""

    label: str
    rows: list[Row]
    changes: list[changepoints.Change] | None  # None: not enough history
    flag: str = ""
    p: float = math.nan  # its test's one-sided p that the newest points are slower; NaN: no test
    index: int = 0  # its place among the history's configurations, which names its plot apart from theirs
    held: list[tuple[Point, list[RunRecord]]] = dataclasses.field(default_factory=list)  # its runs at each point
    threshold: float = math.nan  # the smallest slowdown it flags (--threshold)
    since: int | None = None  # where the flagged slowdown starts: its change point, or the newest point alone

    @property
    def slug(self) -> str:
        named = "".join(c if c.isalnum() else "_" for c in self.label).strip("_")[:80]
        return f"{self.index:02d}-{named or 'configuration'}"


def matched_on(runs: list[RunRecord]) -> tuple[Identity, list[str]]:
    """What the history matches runs by, and the keys it leaves out of the match.

    It is compare's identity over the keys every run records, without those that follow from an axis's value.
    A setting only some record (one added to perfsweep since) is left out.
    A key of the user's own (model.kwargs.d_model) is matched on wherever some run records it: unset where not.
    """
    of = identity_of(runs)
    # a commit pinned in the environment (bisect --git's points) is the point, not the configuration
    identities = {id(run): {k: v for k, v in of(run).items() if not COMMIT.match(v.strip("'"))} for run in runs}
    every = set().union(*identities.values())
    shared = set.intersection(*(set(i) for i in identities.values())) | {k for k in every if k.startswith(USER_KEYS)}
    unshared = sorted(every - shared)
    return (lambda run: {k: identities[id(run)].get(k, UNSET) for k in shared}), unshared


def series_of(found: History, phase: str, threshold: float) -> tuple[list[Series], list[str]]:
    """Each configuration's series, and what was left out.

    Runs are matched by what each measured (matched_on).
    """
    runs = [run for point in found.points for run in point.runs]
    phases = {p for run in runs for p in ("step", *run.summary.phases)}
    if phase not in phases:
        raise ValueError(f"--phase {phase}: no run recorded it; the phases: {', '.join(sorted(phases))}")
    of, unshared = matched_on(runs)
    keys: dict[tuple, list[tuple[Point, list[RunRecord]]]] = {}
    for point in found.points:
        by_key: dict[tuple, list[RunRecord]] = {}
        for run in point.runs:
            by_key.setdefault(tuple(sorted(of(run).items())), []).append(run)
        for key, held in by_key.items():
            keys.setdefault(key, []).append((point, held))
    varying = [k for k in sorted({k for key in keys for k, _ in key}) if len({dict(key)[k] for key in keys}) > 1]
    made, left = [], [f"not matched on (not recorded by every run): {', '.join(unshared)}"] if unshared else []
    for key, held in keys.items():
        values = dict(key)
        shown = (values[k].strip("'") if k.endswith(".name") else f"{k}={values[k]}" for k in varying)
        label = " ".join(shown) or code_name(held[-1][1][0])  # axes by their value, as the table shows them
        rows = []
        for point, point_runs in held:
            times = np.array([t for r in point_runs if (t := r.summary.median(phase)) is not None and t > 0])
            if len(times):
                rows.append(Row(point, times))
        if len(rows) < len(found.points):
            left.append(f"{label}: in {len(rows)} of the {len(found.points)} points")
        made.append(judged(Series(label, rows, None, index=len(made), held=held), threshold))
    return [with_context(series) for series in family(made)], left


def lacks(gone: list[Series], before: list[Series], newest: Point) -> str:
    """'1 of the 2 configurations before 04ababab not in it'."""
    of = f"{len(gone)} of the {len(before)} configurations" if len(before) > 1 else "the one configuration"
    return f"{of} before {newest.label} not in it"


def unmatched(found: History, made: list[Series], max_unmatched: float) -> tuple[list[str], int]:
    """What the newest point lacks of the points before it, in lines, and its part of the exit status.

    The newest point is held to the points before it as compare holds B to A: past --max-unmatched, the
    configurations it lacks add EXIT_UNMATCHED.
    A point that shares no configuration with the others is named, with what parts it from them.
    """
    if len(found.points) < 2:
        return [], 0
    newest, of = found.points[-1], matched_on([run for point in found.points for run in point.runs])[0]
    before = [s for s in made if s.held[0][0] is not newest]
    gone = [s for s in before if s.held[-1][0] is not newest]
    new = [s for s in made if s.held[0][0] is newest]
    failing = beyond(len(gone), len(before), max_unmatched)
    lines = [
        f"the newest point, {newest.label}: {len(before) - len(gone)} of the {counted(len(before), 'configuration')} "
        f"before it matched in it, {unmatched_share(len(gone), len(before), max_unmatched)}; {len(new)} only in it"
    ]
    isolated = [p for p in found.points if all(len(s.held) == 1 for s in made if any(q is p for q, _ in s.held))]
    for point in isolated:
        others = [run for other in found.points if other is not point for run in other.runs]
        how = lacking(others, point.runs, {}, of)
        lines.append(
            f"{point.label} ({', '.join(point.sweeps)}) shares no configuration with the other points: "
            + "; ".join(parted(others, point.runs, {}, ("the others", "it"), of))
            + (f"; to match them, {launch(f'the sweep of {point.label} again', how)}" if how else "")
        )
    if gone:
        # the configurations of a point that shares none are that point's to match (said above), not the newest's
        kept = [s for s in gone if not any(s.held[0][0] is p for p in isolated)]
        how = lacking([run for s in kept for run in s.held[-1][1]], newest.runs, {}, of) if kept else []
        lines.append(
            f"{f'{UNMATCHED}: ' if failing else ''}{lacks(gone, before, newest)}: "
            + ", ".join(f"{s.label} (last in {s.held[-1][0].label})" for s in gone)
            + (f"; to match them, {launch(f'the sweep of {newest.label} again', how)}" if how else "")
        )
    if new:
        lines.append(f"configurations only in {newest.label}: {', '.join(s.label for s in new)}")
    return lines, EXIT_UNMATCHED if failing else 0


def family(made: list[Series]) -> list[Series]:
    """The series with only the flags that stand with the configurations tested held to 5% as a family (Holm)."""
    tested = [series for series in made if not math.isnan(series.p)]
    for series, significant in zip(tested, holm([series.p for series in tested]), strict=True):
        series.flag = series.flag if significant else ""
    return made


def with_context(series: Series) -> Series:
    """The series, with what its newest point did differently beside its flag.

    That is how long it measured, what its host showed, and the machine's speed on a fixed workload.
    A regression that only points beside a neighbour confirm is a possible one (`loaded`), as compare holds it.
    """
    if series.flag.startswith("REGRESSION") and loaded(series):
        series.flag = f"POSSIBLE REGRESSION ({SHARED})" + series.flag.removeprefix("REGRESSION")
    if series.flag and len(series.held) > 1:
        start = _start(series)
        before = [run for _, runs in series.held[:start] for run in runs]
        after = [run for _, runs in series.held[start:] for run in runs]
        first = series.held[start][0].label
        named = ("the points before", first if start == len(series.held) - 1 else f"the points from {first} on")
        if measured := differences(before, after, of=measuring):
            series.flag += f"; it measured for another length: {changes(measured)}"
        if hosts := host_flags.differ(before, after, named):
            series.flag += f"; their hosts differ in: {hosts}"
        if speed := machine_speed.compared(before, after, named):
            series.flag += f"; {speed}"
        if tool := perfsweep_changed(series):
            series.flag += f"; {tool}"
    return series


def loaded(series: Series) -> bool:
    """Whether each point that confirms the regression ran beside a load that the points before its change did not.

    Others or steal took their runs' CPUs past the flags' thresholds (host_flags.shared_side).
    The load may then be the slowdown's cause.
    A point whose host tells nothing confirms it as before.
    """
    before = [run for _, runs in series.held[: _start(series)] for run in runs]
    return all(host_flags.shared_side(before, runs) == "B" for _, runs in series.held[-CONFIRMING:])


def _start(series: Series) -> int:
    """Where in `held` the flagged slowdown starts: its change point, or the newest point alone."""
    if series.since is None:
        return len(series.held) - 1
    start = series.rows[series.since].point
    return next(index for index, (point, _) in enumerate(series.held) if point is start)


def perfsweep_changed(series: Series) -> str:
    """Where perfsweep's own code differs between the points before the flagged slowdown and those from it; else ''.

    The slowdown may then be how perfsweep measures, not the code under test.
    """
    start = _start(series)
    before = [run for _, runs in series.held[:start] for run in runs]
    after = [run for _, runs in series.held[start:] for run in runs]
    differ = differences(before, after, of=lambda run: {k: v for k, v in code_of(run).items() if k == OWN_FILES})
    return f"perfsweep's own code differs: {changes(differ)}" if differ else ""


def judged(series: Series, threshold: float) -> Series:
    """The series with its change points marked, its newest point's flag beyond the threshold, and its test's p.

    Some points' runs spread far wider than the others' (changepoints.spread_apart).
    They are left out of the search.
    The flag stands or falls with the family (`family`).
    """
    series.threshold = threshold
    for index, ratio in changepoints.spread_apart([row.times for row in series.rows], threshold).items():
        series.rows[index].apart = ratio
    kept = searched(series)
    times = [series.rows[index].times for index in kept]
    found = changepoints.changes(times)
    series.changes = None if found is None else [dataclasses.replace(c, index=kept[c.index]) for c in found]
    if series.changes is None:  # too few points for a change point; the newest may still stand out alone
        return _alone(series, 0, threshold, "the others") if len(times) >= NEWEST_FROM else series
    for change in series.changes:
        series.rows[change.index].change = change
    last = series.changes[-1] if series.changes else None
    if last is not None and last.ratio > 1 + threshold:
        newest = [centre(series.rows[index]) for index in kept[-CONFIRMING:]]
        # the slowdowns still open, newest first: a later one must not hide an earlier one the newest points confirm
        open_ = list(itertools.takewhile(lambda change: change.ratio > 1, reversed(series.changes)))
        confirmed = next((c for c in open_ if all(t / c.before > 1 + threshold for t in newest)), None)
        change = confirmed or last
        series.p, series.since = change.p, change.index
        shown = ", ".join(f"{t / change.before:.2f}x" for t in newest)  # where it stands now, beside its segment's
        word = "REGRESSION" if confirmed else "POSSIBLE REGRESSION"
        series.flag = (
            f"{word}: {change.ratio:.2f}x slower from {_first_slow(series, change)} on"
            f"{unmeasured_before(series, change)}; the newest points: {shown}"
        )
        if change is not last:
            series.flag += f"; possibly slower again: {last.ratio:.2f}x from {_first_slow(series, last)} on"
        alone = changepoints.newest_alone(times, kept.index(last.index))
        if change is last and alone is not None and alone.ratio > 1 + threshold and alone.p < ALONE_P:
            series.flag += (
                f"; and the newest point alone is {alone.ratio:.2f}x slower than its segment (p={alone.p:.2g}): "
                "possibly a change again"
            )
        return series
    return _alone(series, kept.index(last.index) if last else 0, threshold, "its segment")


def _first_slow(series: Series, change: changepoints.Change) -> str:
    """The change's first slow point.

    Points left out of the search may lie just before it: it is then 'one of A..B'.
    """
    before = searched_before(series, change)
    first = series.rows[change.index].point.label
    return first if before == change.index - 1 else f"one of {series.rows[before + 1].point.label}..{first}"


def unmeasured_before(series: Series, change: changepoints.Change) -> str:
    """' (or from one of the commits before it at which this configuration was not measured...)'.

    They are the commits between the change's first point and the point searched before it, in the graph's order.
    It is '' where there are none, or the history has no commit graph.
    """
    point, before = series.rows[change.index].point, series.rows[searched_before(series, change)].point
    if point.rank is None or before.rank is None or point.rank - before.rank < 2:
        return ""
    between = point.rank - before.rank - 1
    which = "the commit" if between == 1 else f"one of the {between} commits"
    bisect = f"bisect --git {before.commit[:12]} {point.commit[:12]} with the sweep's overrides finds which"
    return (
        f" (or from {which} between {before.label} and it at which this configuration was not measured"
        f"{'' if point.dirty or before.dirty else ': ' + bisect})"
    )


def searched_before(series: Series, change: changepoints.Change) -> int:
    """The last row searched before the change's first."""
    return max(index for index in searched(series) if index < change.index)


def searched(series: Series) -> list[int]:
    """The rows the search reads: all but those whose runs spread apart."""
    return [index for index, row in enumerate(series.rows) if row.apart is None]


def _alone(series: Series, since: int, threshold: float, than: str) -> Series:
    """The series with its newest point's test against its segment's others, and its flag.

    `since` is the segment's first among the rows searched.
    """
    alone = changepoints.newest_alone([series.rows[index].times for index in searched(series)], since)
    if alone is not None:
        series.p, series.since = alone.p, len(series.rows) - 1
        if alone.ratio > 1 + threshold:
            _, low, high = figures(alone.ratio, alone.low, alone.high, apart=1.0)
            series.flag = (
                f"POSSIBLE REGRESSION: the newest point alone is {alone.ratio:.2f}x slower than {than} (its time "
                f"over theirs, 95% interval [{low}, {high}])"
            )
    return series


def centre(row: Row) -> float:
    """The point's time: the geometric mean of its runs' medians."""
    return float(np.exp(np.mean(np.log(row.times))))


def _interval(row: Row) -> str:
    if len(row.times) < 2:
        return "- (one run)"
    _, low, high = across_runs(row.times)
    return f"[{figure(low)}, {figure(high)}]"


def _change(row: Row) -> str:
    if row.apart is not None:
        return f"left out: its runs' variance {row.apart:.0f}x the others'"
    if row.change is None:
        return ""
    return f"change: {_times(row.change.ratio)}, {figure(row.change.before)} -> {figure(row.change.after)}"


def _times(ratio: float) -> str:
    """A ratio of times as a change.

    It is '7.81x slower' where the time grew, '2.00x faster' where it fell.
    """
    return f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"


def _commit_range(series: Series, change: changepoints.Change) -> str:
    """The last commit searched before the change..its first.

    A point left out between them may hold the change.
    """
    before = searched_before(series, change)
    return f"{series.rows[before].point.label}..{series.rows[change.index].point.label}"


def left_out(series: Series) -> list[str]:
    """A line naming the points whose runs spread apart, with what their hosts showed.

    There is none where no point's did.
    Each such point's mean is uncertain by more than the threshold.
    Its runs' variance is far above the others'.
    """
    held = {id(point): runs for point, runs in series.held}
    named = []
    for row in series.rows:
        if row.apart is not None:
            host = host_flags.taken(held.get(id(row.point), []))
            named.append(f"{row.point.label} ({row.apart:.0f}x{f'; host: {host}' if host else ''})")
    if not named:
        return []
    return [
        "left out of the search, as their runs spread far wider than the other points' (their runs' variance over "
        f"the others' median), beyond the threshold: {', '.join(named)}; a sweep again at such a commit measures it "
        "again"
    ]


def view(series: Series, phase: str, found: History) -> View:
    columns = [
        Column("point", lambda row: row.point.label),
        Column("subject", lambda row: row.point.subject[:48]),
        Column("runs", lambda row: str(len(row.times))),
        Column(f"{phase} ms", lambda row: figure(centre(row))),
        Column("95% interval (across runs)", _interval),
        Column("change point", _change),
    ]
    kept = len(searched(series))
    counts = counted(kept, "point") + (f" searched, of {len(series.rows)}" if kept < len(series.rows) else "")
    needs = f"{counts}; a change point needs {changepoints.MIN_POINTS}"
    if series.changes is None and kept >= NEWEST_FROM:
        said = f"change points: too few to find one ({needs}); its newest point is tested against the others alone"
    elif series.changes is None:
        said = f"not enough history: {needs}, and a test of its newest point alone {NEWEST_FROM}"
    elif series.changes:
        said = "change points: " + "; ".join(
            f"{_commit_range(series, c)} ({_times(c.ratio)}: {figure(c.before)} -> {figure(c.after)} ms)"
            for c in series.changes
        )
    else:
        points = [series.rows[index].times for index in searched(series)]
        middle, newest = changepoints.smallest_step(points), changepoints.smallest_step(points, changepoints.MIN_SIZE)
        said = (
            f"change points: none; at this history's noise, a step of {middle:.2f}x or more at its middle would be "
            f"one, {newest:.2f}x before its newest {changepoints.MIN_SIZE} points ({counts}: more points find "
            "smaller steps)"
        )
    above = [
        f"{len(series.rows)} points, ordered {found.order}",
        said,
        *left_out(series),
        *mixed_lengths(series),
        *machine_lines(series),
        *host_lines(series),
    ]
    notes = [
        f"{phase} ms: the geometric mean over the point's runs of each run's median; a change point starts a "
        "segment whose mean differs beyond the noise that the runs and the series show (binary segmentation, "
        "ruptures); its range is the last commit before it..the first after; a flag stands where it is slower by "
        f"more than the threshold ({series.threshold:.3g}, {percent(series.threshold)}) and its test is significant "
        "with the history's configurations held to 5% as a family (Holm)"
    ]
    return View(f"History: {series.label}", above, columns, series.rows, notes, [series.flag] if series.flag else [])


def mixed_lengths(series: Series) -> list[str]:
    """A line per point whose runs measured for other lengths (steps, warm-up): two sweeps at one commit.

    Its time is the geometric mean over all its runs, of each length.
    """
    lines = []
    for point, runs in series.held:
        lengths = Counter(", ".join(f"{k}={v}" for k, v in measuring(run).items()) for run in runs)
        if len(lengths) > 1:
            each = "; ".join(f"{length} ({counted(n, 'run')})" for length, n in sorted(lengths.items()))
            lines.append(f"{point.label}: its runs measured for {len(lengths)} lengths, which its time mixes: {each}")
    return lines


def machine_lines(series: Series) -> list[str]:
    """The machine most of the series' runs had.

    A line more names each point whose runs had another.
    """
    main = machines.usual([run for _, held in series.held for run in held])
    if main is None:
        return []
    said = [f"machine: {machines.named([main])}"]
    for point, held in series.held:
        usual = machines.usual(held)
        differ = machines.differences(main.machine, usual.machine, main.asked | usual.asked) if usual else {}
        if differ:
            theirs = ", ".join(f"{label} {b}" for label, (_, b) in differ.items())
            others = ", ".join(f"{label} {a}" for label, (a, _) in differ.items())
            said.append(
                f"MIXED MACHINES {point.label}: {theirs} (most runs: {others}): its change may be the machine's"
            )
    return said


def host_lines(series: Series) -> list[str]:
    """A line naming the points whose runs others or steal took past the flags' thresholds, by their medians.

    It names the newest five, which the gate judges, and counts those before them.
    A point's time beside a load may be the load's, flagged or not.
    """
    loaded = [
        f"{point.label} ({host_flags.taken(runs)})"
        for point, runs in series.held
        if any(host_flags.shares(runs).get(label, 0.0) > threshold for label, threshold, _ in host_flags.TAKEN)
    ]
    times = "its time" if len(loaded) == 1 else "their times"
    earlier = f"{len(loaded) - 5} earlier points and " if len(loaded) > 5 else ""
    return [f"SHARED HOST {earlier}{', '.join(loaded[-5:])}: {times} may be the load's"] if loaded else []


def exit_status(made: list[Series]) -> int:
    flags = [s.flag for s in made]
    if any(f.startswith("REGRESSION") for f in flags):
        return EXIT_REGRESSION
    return EXIT_POSSIBLE if any(f.startswith("POSSIBLE") for f in flags) else 0


def plot(series: Series, phase: str, path: Path) -> Path:
    """The configuration's points with their intervals, each segment's mean, and its change points marked."""
    from perfsweep.analysis.views.plots import plt, save

    x = np.arange(len(series.rows))
    centres = [centre(row) for row in series.rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(x) + 2), 4.3))
    machine = machines.named([run for _, held in series.held for run in held])
    fig.suptitle(
        f"{series.label}: {phase} time by commit" + (f"\non {machine}" if machine else ""),
        x=0.01,
        ha="left",
        fontsize=11,
    )
    for i, row in enumerate(series.rows):
        if len(row.times) >= 2:
            _, low, high = across_runs(row.times)
            ax.vlines(i, low, high, color="tab:blue", linewidth=2)
        ax.plot([i] * len(row.times), row.times, "o", color="black", markersize=3, alpha=0.6)
    ax.plot(x, centres, "-", color="tab:blue", alpha=0.4)
    bounds = [0, *(c.index for c in series.changes or []), len(x)]
    kept = searched(series)
    for start, end in zip(bounds, bounds[1:], strict=False):
        mean = float(np.exp(np.mean(np.log([centres[i] for i in kept if start <= i < end]))))
        ax.hlines(mean, start - 0.4, end - 0.6, color="tab:orange", linewidth=2)
    for i in set(range(len(x))) - set(kept):
        ax.plot(i, centres[i], "x", color="tab:red", markersize=8)
    for change in series.changes or []:
        ax.axvline(change.index - 0.5, color="tab:red", linestyle="--")
        ax.annotate(
            f"{_commit_range(series, change)}\n{_times(change.ratio)}",
            (change.index - 0.4, ax.get_ylim()[1]),
            fontsize=8,
            color="tab:red",
            ha="left",
            va="top",
        )
    ax.set_xticks(x, [row.point.label for row in series.rows], rotation=60, fontsize=7)
    ax.set_ylabel(f"{phase} ms")
    ax.grid(axis="y", alpha=0.3)
    save(fig, path)
    return path


def write(made: list[Series], views: list[View], phase: str, out: Path, said: list[str]) -> Path:
    """The plots (history-<configuration>.png) and history.html in `out`.

    `said` are the history's own lines: the points left out, the configurations unmatched.
    The page heads with them, as they may be what failed the gate.
    """
    out.mkdir(parents=True, exist_ok=True)
    parts = ["<h1>perfsweep: history</h1>", *(f"<p class=flag>{html.escape(line)}</p>" for line in said)]
    for series, shown in zip(made, views, strict=True):
        parts.append(html_section(shown))
        if series.rows:
            image = plot(series, phase, out / f"history-{series.slug}.png")
            parts.append(f"<img src='{html.escape(image.name)}' alt='{html.escape(series.label)}'>")
    page = "<!doctype html><html><head><meta charset=utf-8><title>perfsweep history</title></head><body>"
    path = out / PAGE
    atomic_write(path, (page + "".join(parts) + "</body></html>").encode())
    return path
