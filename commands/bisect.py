"""`perfsweep bisect`: the first release of a package, or commit of a repository, that shows the sweep's change."""

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from perfsweep import user_command
from perfsweep.commands.launching import MULTIRUN
from perfsweep.commands.until_decided import launch_until_decided
from perfsweep.sweeps.keys import override_key

if TYPE_CHECKING:
    from perfsweep.analysis.bisection.search import Prior
    from perfsweep.sweeps.plan import Plan


def one_metric(plan, good: str, unit: str = "release") -> tuple[str | None, str]:
    """What a bisect of this sweep follows: (the release each point's step time is taken over, for one
    configuration, or None for two that are one against its baseline; the metric in words). BisectError for a
    sweep with any other configurations. `unit`: what the search steps over, a release or a commit."""
    from perfsweep.analysis.bisection.search import BisectError

    specs = list(plan.runs)
    if len(specs) == 1:
        return good, f"a point's step time over {good[:12]}'s, the two alternating in one sweep's rounds (A B A B)"
    baseline = specs[0].config.workload.baseline
    if len(specs) == 2 and baseline.axis:
        a, b = specs
        differ = {k for k in {*a.axes, *b.axes} if a.axes.get(k) != b.axes.get(k)}
        values = [spec.axes.get(baseline.axis) for spec in specs]
        if differ == {baseline.axis} and baseline.value in values:
            other = next(v for v in values if v != baseline.value)
            return None, f"within each point, the step time of {other} over its baseline's ({baseline.value})"
    each = differences(specs)
    two = f"two, one of them {baseline.axis}={baseline.value} (the workload's baseline) and one other {baseline.axis}"
    raise BisectError(
        f"a bisect follows one metric, and this sweep has {len(specs)} configurations a {unit} ({'; '.join(each)}); "
        f"narrow it to one configuration ({each[0]}, say: its step time against the good {unit}'s) or to "
        f"{two if baseline.axis else 'one'}"
    )


def differences(specs: list) -> list[str]:
    """What sets each run apart from the others: its axes that vary, else its config's fields that do."""
    from perfsweep.records import flatten

    values = [spec.axes for spec in specs]
    if not any(axes != values[0] for axes in values):  # a setting that is no axis (threads=1,2)
        values = [flatten(spec.record()["config"]) for spec in specs]
    differ = sorted({k for found in values for k, v in found.items() if v != values[0].get(k)})
    return [" ".join(f"{k}={found.get(k, '-')}" for k in differ) for found in values]


def pinned(package: str, version: str) -> str:
    """The override that asks for `version` of `package`: torch=V, or +env.packages.NAME=V."""
    return f"torch={version}" if package == "torch" else f"+env.packages.{package}={version}"


class Bisection:
    """The points of a bisect, each a sweep in the bisect's folder, placed on a side as their runs come in.

    `prior` sizes the first look where no point has been measured yet.
    `max_minutes` is the search's time: no look starts after it has passed.
    """

    def __init__(
        self,
        search,
        package: str,
        folder,
        kept: list[str],
        reference: str | None,
        prior: "Prior | None",
        max_minutes: float | None,
    ):
        self.search, self.package, self.folder, self.kept, self.reference = search, package, folder, kept, reference
        self.prior, self.max_minutes, self.began = prior, max_minutes, time.monotonic()
        self.pinned: dict = {}  # every point's launches run the code the first one took
        self.versions: list[str] = []

    def plan_of(self, version: str, repeats: int):
        """The sweep of one point: the release, beside the good one where the metric is taken over it."""
        from perfsweep.sweeps.plan import build_plan

        asked = ",".join(dict.fromkeys([version, *([self.reference] if self.reference else [])]))
        where = [f"runs_dir={self.folder}", f"sweep_name={self.package}-{version}", "launcher.wait=true"]
        return build_plan([*self.kept, pinned(self.package, asked), f"repeats={repeats}", *where])

    def plans(self, runs: int) -> list:
        return [self.plan_of(version, runs) for version in self.versions]

    def looked(self, plan, runs: int) -> None:
        """Place the plan's release by its done runs. BisectError where none is done."""
        from perfsweep import records
        from perfsweep.analysis.bisection.search import UNBUILT, BisectError, Point, values
        from perfsweep.analysis.bisection.view import shown

        version = plan.sweep_dir.name.removeprefix(f"{self.package}-")
        measured = records.load_sweep(plan.sweep_dir, [spec.name for spec in plan.runs])
        done = [r for r in measured if r.state == records.DONE]
        own = [r for r in measured if r.axis(self.package) == version] or measured  # beside the good one's runs
        if not any(r.state == records.DONE for r in own):  # nothing to place it by, and more runs would end so
            said = next((why for r in own if (why := r.status.why_not_done(200))), "no error recorded")
            if self.search.subjects and version not in (self.search.good, self.search.bad):
                self.search.add(Point(version, side=UNBUILT, why=f"its runs fail: {said}", sweep=plan.sweep_dir.name))
                return
            raise BisectError(
                f"{shown(self.search, version)}: none of its {len(own)} runs is done ({said}); "
                f"`{user_command()} status {plan.sweep_dir}` says why; fix that, and run the bisect again"
            )
        found = values(done, self.package, self.reference, self.search.level, self.search.unit)
        self.search.add(dataclasses.replace(found.get(version, Point(version)), sweep=plan.sweep_dir.name))

    def decided(self) -> bool:
        """Whether the points measured are placed.

        Ends that measure alike count too: nothing lies between them.
        """
        from perfsweep.analysis.bisection.search import UNDETERMINED

        placed = all(self.search.points[v].side != UNDETERMINED for v in self.versions)
        ends = set(self.versions) <= {self.search.good, self.search.bad}
        return placed or (ends and self.search.ends_alike())

    def out_of_time(self) -> bool:
        return self.max_minutes is not None and time.monotonic() - self.began > 60 * self.max_minutes

    def stop(self, why: str) -> None:
        """Runs it launched cannot start.

        The same command would stop here until they fit.
        """
        from perfsweep.analysis.bisection.search import BisectError

        raise BisectError(
            f"{why}: `scancel` their jobs (the lines above name each), then run the bisect again with launcher "
            "settings that fit"
        )

    def ran_out(self) -> bool:
        """Whether the search's time has passed; the search then says so."""
        if self.out_of_time():
            self.search.stopped = f"its time (--max-minutes {self.max_minutes:g}) ran out"
        return bool(self.search.stopped)

    def measure(self, versions: list[str], argv: list[str]) -> int:
        """Place the releases, adding runs at each of their looks until placed; the exit status of a launch.

        The first look has the runs a side that the spread measured so far says a point needs.
        """
        from perfsweep.analysis.bisection.search import point_looks
        from perfsweep.analysis.bisection.view import shown

        self.versions = versions
        first, why = self.search.first_look(versions[-1], self.prior)
        looks = point_looks(first, self.search.looks)
        until = f", then more until placed, up to {looks[-1]}" if len(looks) > 1 else ""
        print(f"bisect {' and '.join(shown(self.search, v) for v in versions)}: {first} runs a side ({why}){until}")
        status = launch_until_decided(self, looks, argv, quiet_envs=True, pinned=self.pinned)
        if status not in (0, 1):
            return status
        if not self.decided():
            self.ran_out()
        for version in versions:
            point = self.search.points[version]
            said = f"{point.side}: {point.why}" if point.why else point.side
            runs = f" at {point.runs} runs a side" if point.runs else ""
            print(f"bisect {shown(self.search, version)}: {point.interval(self.search.boundary)}{runs}: {said}")
        return 0


def commits_between(repo: Path, good: str, bad: str, allow_dirty: bool) -> tuple[list[str], dict[str, str]]:
    """The commits from `good` to `bad` (good first) along bad's first parents, and each one's subject.

    Raises:
        BisectError: not a repository, a commit it lacks, good not an ancestor of bad, uncommitted changes.
    """
    import difflib

    from perfsweep.analysis.bisection.search import BisectError
    from perfsweep.records.code import commit_of, git
    from perfsweep.records.words import counted

    if git(repo, "rev-parse", "--git-dir") is None:
        raise BisectError(f"--repo {repo}: not a git repository")
    found = {}
    for which, rev in (("good", good), ("bad", bad)):
        commit = commit_of(repo, f"{rev}^{{commit}}")
        if commit is None:
            names = (git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/tags") or "").split()
            near = difflib.get_close_matches(rev, names, n=1)
            raise BisectError(f"{which}={rev}: not a commit of {repo}" + (f"; did you mean {near[0]}?" if near else ""))
        found[which] = str(commit["commit"])
    if found["good"] == found["bad"]:
        raise BisectError(f"good and bad are the same commit ({found['good'][:12]}): nothing to bisect")
    if git(repo, "merge-base", "--is-ancestor", found["good"], found["bad"]) is None:
        raise BisectError(f"good={good} is not an ancestor of bad={bad} in {repo}: a bisect walks from good to bad")
    changed = git(repo, "status", "--porcelain", "--untracked-files=no")
    if changed and not allow_dirty:
        raise BisectError(
            f"{repo} has uncommitted changes ({counted(len(changed.splitlines()), 'file')}): a bisect measures "
            "commits, not the working tree; commit or stash them, or --allow-dirty"
        )
    walk = ["--first-parent", "--ancestry-path", "--reverse", "--format=%H%x00%s", f"{found['good']}..{found['bad']}"]
    lines = [line.split("\0", 1) for line in (git(repo, "log", *walk) or "").splitlines()]
    subjects = {found["good"]: str(commit_of(repo, found["good"])["subject"])} | dict(lines)
    return list(subjects), subjects


def project_name(repo: Path, commit: str) -> str:
    """The package the repository builds at `commit`: its pyproject.toml's [project] name."""
    import tomllib

    from perfsweep.analysis.bisection.search import BisectError
    from perfsweep.records.code import git

    text = git(repo, "show", f"{commit}:pyproject.toml")
    try:
        return str(tomllib.loads(text or "")["project"]["name"])
    except (tomllib.TOMLDecodeError, KeyError) as error:
        raise BisectError(
            f"{repo} at {commit[:12]} has no pyproject.toml with a [project] name: --package NAME names its package"
        ) from error


@dataclasses.dataclass
class Asked:
    """What a bisect's command line asks for, checked before anything is built or run."""

    package: str
    releases: list[str]  # good first, bad last
    subjects: dict[str, str]  # a bisect over commits: commit -> subject
    base: list[str]  # the overrides of every point's sweep
    first: "Plan"  # the plan of the good end alone: the sweep's settings and folder
    reference: str | None  # the end each point's step time is taken over, for one configuration
    metric: str
    looks: list[int]  # the schedule of runs a side
    fixed: bool  # repeats=N: one look at N runs a side
    prior: "Prior | None"  # what the runs of --from say of a point
    source: list[str]  # the folders of --from, resolved

    @property
    def unit(self) -> str:
        return "commit" if self.subjects else "release"

    @property
    def kept(self) -> list[str]:
        """The overrides of every point's sweep, less its folder and whether to wait, which the bisect sets.

        A point's sweep is followed to its end before it is looked at, on Slurm too.
        """
        return [o for o in self.base if override_key(o) not in ("runs_dir", "sweep_name", "launcher.wait")]

    @property
    def ends(self) -> list[str]:
        """The ends to measure: good and bad, less the reference (its step time is what the others' are over)."""
        return [v for v in (self.releases[0], self.releases[-1]) if v != self.reference]


# repeats=auto's caps and a launch's budget: a bisect's are --max-runs and --max-minutes
BUDGET = ("auto.max_runs", "auto.max_minutes", "launcher.budget_s")


def asked(args: argparse.Namespace) -> Asked:
    """The bisect that `args` ask for.

    Raises:
        BisectError, PlanError: what is wrong with it, before anything is built or run.
    """
    from perfsweep.analysis.bisection.search import BisectError, between, prior_from, schedule
    from perfsweep.launcher import envs
    from perfsweep.records import AUTO
    from perfsweep.records.code import repository
    from perfsweep.sweeps.plan import build_plan

    overrides = [o for o in args.overrides if o not in MULTIRUN]
    repeats = next((o for o in reversed(overrides) if o.startswith("repeats=")), AUTO)  # the last one asked
    fixed = "" if repeats == AUTO else repeats.partition("=")[2]
    base = [o for o in overrides if not o.startswith("repeats=")]
    if args.git and (args.good or args.bad):
        raise BisectError("--git GOOD BAD names the commits; --good and --bad name releases: one or the other")
    if args.git:
        repo = (args.repo or repository(Path.cwd()) or Path.cwd()).resolve()
        releases, subjects = commits_between(repo, *args.git, args.allow_dirty)
        package = args.package or project_name(repo, releases[-1])
        base.append(f"env.repo={repo}")
    elif not (args.good and args.bad):
        raise BisectError("--good and --bad name two releases of --package; --git GOOD BAD two commits")
    else:
        releases, package, subjects = [args.good, args.bad], args.package or "torch", {}
    package, unit = package.lower(), "commit" if args.git else "release"
    key = pinned(package, "").lstrip("+").removesuffix("=")  # torch, env.packages.NAME
    if any(override_key(o) == key for o in overrides):
        raise BisectError(f"{key}: the bisect sets it to each point itself; leave it out of the overrides")
    if budget := [o for o in overrides if override_key(o) in BUDGET]:
        raise BisectError(
            f"{budget[0]}: a bisect's budget is --max-runs N (runs a side a point may take) and --max-minutes M (the "
            "search's time); leave it out of the overrides"
        )
    if fixed and not (fixed.isdigit() and int(fixed) >= 2):
        raise BisectError(f"repeats={fixed}: a point is placed across runs: 2 or more a side, or repeats=auto")
    if args.max_runs < 2:
        raise BisectError(f"--max-runs {args.max_runs}: a point needs 2 or more runs a side")
    if args.max_minutes is not None and not args.max_minutes > 0:
        raise BisectError(f"--max-minutes {args.max_minutes:g}: the search needs some time; give more than 0")
    base.append("launcher.budget_s=null")  # a point's launch runs its rounds whole (a sweep file's budget too)
    first = build_plan([*base, pinned(package, releases[0]), "repeats=1"])
    if first.settings.order != "interleaved":
        raise BisectError(
            f"order={first.settings.order}: a point's runs and the good {unit}'s alternate (order=interleaved), so "
            "that drift falls on both; leave order out"
        )
    reference, metric = one_metric(first, releases[0], unit)
    if not args.git:
        listed = envs.available(package, first.settings.env.index_url)
        if not listed:
            raise BisectError(f"the package index lists no releases of {package} for this Python (pip index versions)")
        releases = between(listed, *releases)
    looks = [int(fixed)] if fixed else schedule(args.max_runs)
    prior = prior_from(args.runs_from, package, releases[0], releases[-1], bool(reference)) if args.runs_from else None
    source = [str(path.resolve()) for path in args.runs_from or []]
    return Asked(package, releases, subjects, base, first, reference, metric, looks, bool(fixed), prior, source)


class Stop(Exception):
    """What ends a bisect with exit status 2: whether anything ran, and each reason, one a line."""

    def __init__(self, what: str, *reasons: object):
        super().__init__(f"perfsweep: {what}:\n" + "\n".join(f"- {reason}" for reason in reasons))


NOTHING_RUN = "nothing was run"


def bisect(args: argparse.Namespace) -> int:
    """Measure the releases between --good and --bad, or the commits of --git GOOD BAD, midpoint by midpoint.

    The search, its record and its table are in analysis/bisection/.
    A commit's code is built and installed into an environment of its own (launcher/envs.py).

    The endpoints go first, then each midpoint.
    Each point adds runs at each of its looks until it is placed on a side, or runs a fixed repeats.
    Each point is saved to bisect.json as it is placed.
    """
    from perfsweep.analysis.bisection.store import RECORD
    from perfsweep.analysis.bisection.view import machine_of, point_flags, view
    from perfsweep.analysis.render import text

    try:
        a = checked(args)
        bisection = started(a, args.max_minutes)
        status = searched(bisection, a, args.argv)
    except Stop as stop:
        print(stop, file=sys.stderr)
        return 2
    if status:
        return status
    search, folder = bisection.search, bisection.folder
    print(text(view(search, machine_of(folder, search), point_flags(folder, search))))
    print(f"records: {(bisection.folder / RECORD).resolve()}")
    return 0 if bisection.search.first_bad() else 1


def checked(args: argparse.Namespace) -> Asked:
    """The bisect that `args` ask for. Stop where it is wrong."""
    from perfsweep.analysis.bisection.search import BisectError
    from perfsweep.sweeps.plan import PlanError

    try:
        return asked(args)
    except PlanError as error:
        raise Stop(NOTHING_RUN, *error.problems) from error
    except BisectError as error:
        raise Stop(NOTHING_RUN, error) from error


def started(a: Asked, max_minutes: float | None) -> Bisection:
    """The search that `a` asks for, its folder made and both ends built. Stop where it cannot start."""
    from perfsweep.analysis.bisection.search import BisectSearch, level
    from perfsweep.analysis.bisection.view import label
    from perfsweep.launcher import envs

    folder, good, bad = a.first.sweep_dir, a.releases[0], a.releases[-1]
    settings = {"package": a.package, "good": good, "bad": bad, "overrides": a.kept, "looks": a.looks, "from": a.source}
    if conflict := folder_conflict(folder, settings):
        raise Stop(NOTHING_RUN, conflict)
    at = level(len(a.looks), len(a.releases))
    search = BisectSearch(a.package, a.releases, a.metric, at, subjects=a.subjects, looks=a.looks, fixed=a.fixed)
    bisection = Bisection(search, a.package, folder, a.kept, a.reference, a.prior, max_minutes)
    between = f"from {label(search, good)} (good) to {label(search, bad)} (bad)"
    print(f"bisect {a.package}: {len(a.releases)} {a.unit}s {between}")
    try:
        for version in a.ends:
            envs.for_plan(bisection.plan_of(version, 1).runs, a.first.settings.launcher.name)
    except envs.EnvError as error:
        raise Stop(NOTHING_RUN, error) from error
    folder.mkdir(parents=True, exist_ok=True)
    return bisection


def searched(bisection: Bisection, a: Asked, argv: list[str]) -> int:
    """Measure the ends, then each midpoint, saving bisect.json before each and at the end.

    Returns:
        0, or the exit status of a launch that could not run.

    Raises:
        Stop: a point it cannot place (none of its runs done, or several comparisons), or an environment that
            could not be built.
    """
    from perfsweep.analysis.bisection.search import UNBUILT, BisectError, Point
    from perfsweep.analysis.bisection.store import save
    from perfsweep.analysis.bisection.view import shown
    from perfsweep.launcher import envs

    search = bisection.search
    try:
        if a.reference:
            search.add(Point(a.reference, 1.0, 1.0, 1.0, reference=True))
        status = bisection.measure(a.ends, argv)
        while status == 0 and (version := search.next()) is not None and not bisection.ran_out():
            save(search, bisection.folder, a.kept, a.source)
            try:
                envs.for_plan(bisection.plan_of(version, 1).runs, a.first.settings.launcher.name)
            except envs.Unresolvable as error:  # no build of it for this Python: its neighbour is measured instead
                search.add(Point(version, side=UNBUILT, why=str(error).splitlines()[0]))
                print(f"bisect {shown(search, version)}: {UNBUILT}; the search goes on beside it")
                continue
            status = bisection.measure([version], argv)
    except (BisectError, envs.EnvError) as error:
        raise Stop("the bisect stopped", error) from error
    finally:
        save(search, bisection.folder, a.kept, a.source)
    return status


def folder_conflict(folder, settings: dict) -> str:
    """Why the bisect cannot use `folder`; '' where it can.

    It may hold a sweep's runs, or another bisect.
    A bisect that measured no point holds nothing to keep.
    Its ends' runs all failed, as on a mistyped setting.
    Its good end as the reference (1.00x by definition) is no measurement.
    """
    from perfsweep import records
    from perfsweep.analysis.bisection.store import RECORD

    name = "sweep_name=NAME: a folder of its own for this bisect"
    if (folder / records.SWEEP).is_file():
        return f"{folder} holds a sweep's runs, not a bisect's points; {name}"
    recorded = records.read_json(folder / RECORD) if (folder / RECORD).is_file() else None
    placed = any(not point.get("reference") for point in (recorded or {}).get("points") or [])
    if placed and {key: recorded.get(key) for key in settings} != settings:
        other = f"{recorded.get('package')} {recorded.get('good')}..{recorded.get('bad')}"
        return (
            f"{folder} holds another bisect ({other}, its overrides {recorded.get('overrides')}, looks at "
            f"{recorded.get('looks')} runs); the same command as its goes on with it, or {name}"
        )
    return ""
