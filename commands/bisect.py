"""`perfsweep bisect`: the first release of a package between good and bad that shows the sweep's change."""

import argparse
import sys
from pathlib import Path

from perfsweep import user_command
from perfsweep.commands.launching import MULTIRUN
from perfsweep.commands.until_decided import launch_until_decided


def one_metric(plan, good: str) -> tuple[str | None, str]:
    """What a bisect of this sweep follows: (the release each point's step time is taken over, for one
    configuration, or None for two that are one against its baseline; the metric in words). BisectError for a
    sweep with any other configurations."""
    from perfsweep.analysis.bisect import BisectError

    specs = list(plan.runs)
    if len(specs) == 1:
        return good, f"a point's step time over {good[:12]}'s, the two side by side in one sweep"
    baseline = specs[0].config.workload.baseline
    if len(specs) == 2 and baseline.axis:
        a, b = specs
        differ = {k for k in {*a.axes, *b.axes} if a.axes.get(k) != b.axes.get(k)}
        values = [spec.axes.get(baseline.axis) for spec in specs]
        if differ == {baseline.axis} and baseline.value in values:
            other = next(v for v in values if v != baseline.value)
            return None, f"within each point, the step time of {other} over its baseline's ({baseline.value})"
    differ = sorted({k for spec in specs for k, v in spec.axes.items() if v != specs[0].axes.get(k)})
    shown = "; ".join(" ".join(f"{k}={spec.axes.get(k, '-')}" for k in differ) for spec in specs)
    two = f"two, one of them {baseline.axis}={baseline.value} (the workload's baseline) and one other {baseline.axis}"
    raise BisectError(
        f"a bisect follows one metric, and this sweep has {len(specs)} configurations a release ({shown}); narrow it "
        f"to one configuration (its step time against the good release's) or to {two if baseline.axis else 'one'}"
    )


def pinned(package: str, version: str) -> str:
    """The override that asks for `version` of `package`: torch=V, or +env.packages.NAME=V."""
    return f"torch={version}" if package == "torch" else f"+env.packages.{package}={version}"


class Bisection:
    """The points of a bisect, each a sweep in the bisect's folder, placed on a side as their runs come in."""

    def __init__(self, search, package: str, folder, kept: list[str], reference: str | None):
        self.search, self.package, self.folder, self.kept, self.reference = search, package, folder, kept, reference
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
        import dataclasses

        from perfsweep import records
        from perfsweep.analysis.bisect import UNBUILT, BisectError, Point, values

        version = plan.sweep_dir.name.removeprefix(f"{self.package}-")
        measured = records.load_sweep(plan.sweep_dir, [spec.name for spec in plan.runs])
        done = [r for r in measured if r.state == records.DONE]
        if not done:  # nothing to place it by, and more runs would end as these did
            said = next((why for r in measured if (why := r.status.why_not_done(200))), "no error recorded")
            if self.search.subjects and version not in (self.search.good, self.search.bad):
                self.search.add(Point(version, side=UNBUILT, why=f"its runs fail: {said}", sweep=plan.sweep_dir.name))
                return
            raise BisectError(
                f"{self.package} {version}: none of its {len(measured)} runs is done ({said}); "
                f"`{user_command()} status {plan.sweep_dir}` says why, and the bisect again goes on from its records"
            )
        found = values(done, self.package, self.reference, self.search.level)
        self.search.add(dataclasses.replace(found.get(version, Point(version)), sweep=plan.sweep_dir.name))

    def decided(self) -> bool:
        from perfsweep.analysis.bisect import UNDETERMINED

        return all(self.search.points[v].side != UNDETERMINED for v in self.versions)

    def out_of_time(self) -> bool:
        return False

    def measure(self, versions: list[str], looks: list[int], argv: list[str]) -> int:
        """Place the releases, looking after each of the schedule's rounds; the exit status of a launch."""
        self.versions = versions
        status = launch_until_decided(self, looks, argv, quiet_envs=True)
        if status not in (0, 1):
            return status
        for version in versions:
            point = self.search.points[version]
            said = f"{point.side}: {point.why}" if point.why else point.side
            print(f"bisect {self.search.shown(version)}: {point.interval()}: {said}")
        return 0


def commits_between(repo: Path, good: str, bad: str, allow_dirty: bool) -> tuple[list[str], dict[str, str]]:
    """The commits from `good` to `bad` (good first) along bad's first parents, and each one's subject.

    Raises:
        BisectError: not a repository, a commit it lacks, good not an ancestor of bad, uncommitted changes.
    """
    from perfsweep.analysis.bisect import BisectError
    from perfsweep.records.code import commit_of, git

    if git(repo, "rev-parse", "--git-dir") is None:
        raise BisectError(f"--repo {repo}: not a git repository")
    found = {}
    for which, rev in (("good", good), ("bad", bad)):
        commit = commit_of(repo, f"{rev}^{{commit}}")
        if commit is None:
            raise BisectError(f"{which}={rev}: not a commit of {repo}")
        found[which] = str(commit["commit"])
    if found["good"] == found["bad"]:
        raise BisectError(f"good and bad are the same commit ({found['good'][:12]}): nothing to bisect")
    if git(repo, "merge-base", "--is-ancestor", found["good"], found["bad"]) is None:
        raise BisectError(f"good={good} is not an ancestor of bad={bad} in {repo}: a bisect walks from good to bad")
    changed = git(repo, "status", "--porcelain", "--untracked-files=no")
    if changed and not allow_dirty:
        raise BisectError(
            f"{repo} has uncommitted changes ({len(changed.splitlines())} files): a bisect measures commits, not the "
            "working tree; commit or stash them, or --allow-dirty"
        )
    walk = ["--first-parent", "--ancestry-path", "--reverse", "--format=%H%x00%s", f"{found['good']}..{found['bad']}"]
    lines = [line.split("\0", 1) for line in (git(repo, "log", *walk) or "").splitlines()]
    subjects = {found["good"]: str(commit_of(repo, found["good"])["subject"])} | dict(lines)
    return list(subjects), subjects


def project_name(repo: Path, commit: str) -> str:
    """The package the repository builds at `commit`: its pyproject.toml's [project] name."""
    import tomllib

    from perfsweep.analysis.bisect import BisectError
    from perfsweep.records.code import git

    text = git(repo, "show", f"{commit}:pyproject.toml")
    try:
        return str(tomllib.loads(text or "")["project"]["name"])
    except (tomllib.TOMLDecodeError, KeyError) as error:
        raise BisectError(
            f"{repo} at {commit[:12]} has no pyproject.toml with a [project] name: --package NAME names its package"
        ) from error


def bisect(args: argparse.Namespace) -> int:
    """Measure the releases between --good and --bad, or the commits of --git GOOD BAD, midpoint by midpoint.

    The search is analysis/bisect.py's.
    A commit's code is built and installed into an environment of its own (launcher/envs.py).

    The endpoints go first, then each midpoint.
    Each point runs repeats=auto's rounds, or a fixed repeats, until it is placed on a side.
    Each point is saved to bisect.json as it is placed.
    """
    from perfsweep.analysis.bisect import RECORD, UNBUILT, BisectError, Point, Search, between, level
    from perfsweep.analysis.render import text
    from perfsweep.analysis.statistics import rounds
    from perfsweep.launcher import envs
    from perfsweep.records import AUTO
    from perfsweep.records.code import repository
    from perfsweep.sweeps.plan import PlanError, build_plan

    overrides = [o for o in args.overrides if o not in MULTIRUN]
    fixed = [o.partition("=")[2] for o in overrides if o.startswith("repeats=") and o != AUTO]
    base = [o for o in overrides if not o.startswith("repeats=")]
    try:
        if args.git and (args.good or args.bad):
            raise BisectError("--git GOOD BAD names the commits; --good and --bad name releases: one or the other")
        if args.git:
            repo = (args.repo or repository(Path.cwd()) or Path.cwd()).resolve()
            releases, subjects = commits_between(repo, *args.git, args.allow_dirty)
            good, bad, package = releases[0], releases[-1], (args.package or project_name(repo, releases[-1]))
            base.append(f"env.repo={repo}")
        elif not (args.good and args.bad):
            raise BisectError("--good and --bad name two releases of --package; --git GOOD BAD two commits")
        else:
            good, bad, package, subjects = args.good, args.bad, args.package or "torch", {}
        package = package.lower()
        key = pinned(package, "").lstrip("+").removesuffix("=")  # torch, env.packages.NAME
        if any(o.lstrip("+").partition("=")[0] == key for o in overrides):
            raise BisectError(f"{key}: the bisect sets it to each point itself; leave it out of the overrides")
        if fixed and not (fixed[-1].isdigit() and int(fixed[-1]) >= 2):
            raise BisectError(f"repeats={fixed[-1]}: a point is placed across runs: 2 or more a side, or repeats=auto")
        first = build_plan([*base, pinned(package, good), "repeats=1"])
        reference, metric = one_metric(first, good)
        looks = [int(fixed[-1])] if fixed else rounds.schedule(first.settings.auto.max_runs)
        if not args.git:
            listed = envs.available(package, first.settings.env.index_url)
            if not listed:
                raise BisectError(
                    f"the package index lists no releases of {package} for this Python (pip index versions)"
                )
            releases = between(listed, good, bad)
    except PlanError as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    except BisectError as error:
        print(f"perfsweep: nothing was run:\n- {error}", file=sys.stderr)
        return 2
    folder, launcher = first.sweep_dir, first.settings.launcher.name
    # a point's sweep is followed to its end before it is looked at, on Slurm too
    kept = [o for o in base if o.lstrip("+").partition("=")[0] not in ("runs_dir", "sweep_name", "launcher.wait")]
    settings = {"package": package, "good": good, "bad": bad, "overrides": kept, "looks": looks}
    if conflict := folder_conflict(folder, settings):
        print(f"perfsweep: nothing was run:\n- {conflict}", file=sys.stderr)
        return 2
    search = Search(package, releases, metric, level(len(looks), len(releases)), subjects=subjects)
    bisection = Bisection(search, package, folder, kept, reference)
    print(f"bisect {package}: {len(releases)} {search.unit}s from {good} (good) to {bad} (bad)")
    ends = [v for v in (good, bad) if v != reference]
    try:  # both ends built before anything runs
        for version in ends:
            envs.for_plan(bisection.plan_of(version, 1).runs, launcher)
    except envs.EnvError as error:
        print(f"perfsweep: nothing was run:\n- {error}", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if reference:
            search.add(Point(reference, 1.0, 1.0, 1.0, reference=True))
        status = bisection.measure(ends, looks, args.argv)
        while status == 0 and (version := search.next()) is not None:
            search.save(folder, kept, looks)
            try:
                envs.for_plan(bisection.plan_of(version, 1).runs, launcher)
            except envs.Unresolvable as error:  # no build of it for this Python: its neighbour is measured instead
                search.add(Point(version, side=UNBUILT, why=str(error).splitlines()[0]))
                print(f"bisect {package} {version}: {UNBUILT}; the search goes on beside it")
                continue
            status = bisection.measure([version], looks, args.argv)
    except (BisectError, envs.EnvError) as error:
        print(f"perfsweep: the bisect stopped:\n- {error}", file=sys.stderr)
        return 2
    finally:
        search.save(folder, kept, looks)
    if status:
        return status
    print(text(search.view()))
    print(f"records: {(folder / RECORD).resolve()}")
    return 0 if search.first_bad() else 1


def folder_conflict(folder, settings: dict) -> str:
    """Why the bisect cannot use `folder` ('' where it can): it holds a sweep's runs, or another bisect."""
    from perfsweep import records
    from perfsweep.analysis.bisect import RECORD

    name = "sweep_name=NAME: a folder of its own for this bisect"
    if (folder / records.SWEEP).is_file():
        return f"{folder} holds a sweep's runs, not a bisect's points; {name}"
    recorded = records.read_json(folder / RECORD) if (folder / RECORD).is_file() else None
    if recorded and {key: recorded.get(key) for key in settings} != settings:
        other = f"{recorded.get('package')} {recorded.get('good')}..{recorded.get('bad')}"
        return (
            f"{folder} holds another bisect ({other}, its overrides {recorded.get('overrides')}, looks at "
            f"{recorded.get('looks')} runs); the same command as its goes on with it, or {name}"
        )
    return ""
