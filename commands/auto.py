"""repeats=auto: launch a sweep's rounds until every comparison is decided, or a cap is reached.

The looks follow a schedule of runs per configuration (analysis/statistics/rounds.py).
One count goes over all their runs, up to the cap, with the time the rest would take (launcher/progress.py).
"""

import sys
import time

from perfsweep import records
from perfsweep.analysis import groups
from perfsweep.analysis.statistics import rounds
from perfsweep.commands.launching import said
from perfsweep.commands.until_decided import launch_until_decided
from perfsweep.commands.views import show_sweep
from perfsweep.conf.schema import AutoConf
from perfsweep.launcher.progress import UpToCap
from perfsweep.launcher.run_states import stranded
from perfsweep.records import AUTO
from perfsweep.sweeps.plan import Plan, PlanError, build_plan


class RoundClock:
    """What a round costs, measured over the looks so far, and whether the next look would end past the cap."""

    def __init__(self, cap_s: float, now: float):
        self.cap_s, self.began, self.look_began = cap_s, now, now
        self.launched, self.spent_s, self.round_s = 0.0, 0.0, 0.0

    def look_starts(self, now: float) -> None:
        self.look_began = now

    def look_ends(self, launched: float, now: float) -> None:
        """A look ended that ran `launched` rounds: its configurations' runs done in it, over the configurations.

        A look of rounds done before runs none. A round's cost is the looks' seconds over the rounds they ran.
        """
        self.spent_s += now - self.look_began
        self.launched += launched
        if self.launched > 0:
            self.round_s = self.spent_s / self.launched

    def would_pass(self, rounds: int, now: float) -> bool:
        """Whether `rounds` more rounds, at the rounds' cost so far, would end past the cap."""
        return now - self.began + rounds * self.round_s > self.cap_s


class Rounds:
    """The rounds of one sweep, looked at after each launch."""

    def __init__(self, base: list[str], first: Plan, looks: list[int]):
        self.base, self.auto, self.looks = base, first.settings.auto, looks
        self.began = time.monotonic()
        self.clock = RoundClock(60 * self.auto.max_minutes, self.began)
        self.plan, self.done, self.last = first, [], None
        self.stopped = ""  # why the looks stopped short of their cap, where something stopped them
        self.cap = build_plan([*base, f"repeats={looks[-1]}"], partial=True)
        self.progress = UpToCap(ends_at=self.began + 60 * self.auto.max_minutes)

    def plans(self, runs: int) -> list[Plan]:
        """The look's plan; the count then expects at most the runs the cap leaves undone."""
        self.clock.look_starts(time.monotonic())
        plan = build_plan([*self.base, f"repeats={runs}"], partial=True)
        self.done_before = sum(records.is_done(plan.sweep_dir / spec.name) for spec in plan.runs)
        left = sum(not records.is_done(self.cap.sweep_dir / spec.name) for spec in self.cap.runs)
        self.progress.expect(left, len(plan.runs) - self.done_before)
        return [plan]

    def looked(self, plan: Plan, runs: int) -> None:
        names = [spec.name for spec in plan.runs]
        self.plan, self.runs = plan, runs
        every = records.load_sweep(plan.sweep_dir, names)
        self.done = [r for r in every if r.state == records.DONE]
        configurations = len(plan.runs) / runs
        self.clock.look_ends((len(self.done) - self.done_before) / configurations, time.monotonic())
        unmeasured = tuple(groups.unmeasured(every))
        self.last = rounds.look(self.done, runs, self.auto.half_width, len(self.looks), unmeasured)
        print(self.last.line())

    def decided(self) -> bool:
        return self.last.met

    def out_of_time(self) -> bool:
        """Whether the next look's rounds, at what a round has cost, would end past auto.max_minutes."""
        return self.clock.would_pass(self.looks[self.looks.index(self.runs) + 1] - self.runs, time.monotonic())

    def stop(self, why: str) -> None:
        self.stopped = why

    def capped(self) -> str:
        """What stopped the rounds short of a decision."""
        if self.runs != self.looks[-1]:
            following = self.looks[self.looks.index(self.runs) + 1]
            return (
                f"{self.auto.max_minutes:g} min (auto.max_minutes): the look at {following} runs a configuration "
                f"would have ended past it, at {self.clock.round_s:.1f} s a round"
            )
        return f"{self.auto.max_runs} runs per configuration (auto.max_runs)"


RULE = ("max_runs", "half_width")  # what a sweep's looks spend their error by: the cap's looks and the margin
RULE_WORDS = tuple(f"auto.{key}=" for key in RULE)


def rule_changed(first: Plan) -> str:
    """Why the folder's earlier looks forbid this launch's rule; '' where they had the same, or there were none.

    Each look's interval is at a level its schedule set, so the error spent adds up to 5% over the cap's looks.
    Looks again under another cap or margin would spend it again: raised until it decides, it decides wrongly.
    """
    manifest = records.read_manifest(first.sweep_dir) or {}
    launches = [launch.get("argv") or [] for launch in manifest.get("launches") or []]
    now = {key: getattr(first.settings.auto, key) for key in RULE}
    for argv in (argv for argv in launches if AUTO in argv):
        typed = dict(word.removeprefix("auto.").split("=", 1) for word in argv if word.startswith(RULE_WORDS))
        then = {key: type(now[key])(typed.get(key, getattr(AutoConf(), key))) for key in RULE}
        if then != now:
            was = " ".join(f"auto.{key}={then[key]:g}" for key in RULE)
            return (
                f"{first.sweep_dir} holds looks of {AUTO} with {was}: another cap or margin spends their error again; "
                f"the same command goes on with them, or sweep_name=NAME starts a sweep of its own"
            )
    return ""


def launch_rounds(overrides: list[str], argv: list[str]) -> int:
    """Launch the sweep's rounds until decided; then print its views and what stayed undecided."""
    base = [o for o in overrides if o != AUTO]
    try:
        first = build_plan([*base, "repeats=1"], partial=True)
    except PlanError as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    if changed := rule_changed(first):
        print(f"perfsweep: nothing was run:\n- {changed}", file=sys.stderr)
        return 2
    said(first)
    if not any(spec.config.baselines for spec in first.runs):
        print(
            f"perfsweep: nothing was run:\n- {AUTO} runs rounds until the sweep's comparisons are decided, and this "
            "sweep makes none: no axis of it has a baseline and another value. repeats=N runs N rounds; "
            "`table --vs SETTING=VALUE` then compares a setting of the same work (threads)",
            file=sys.stderr,
        )
        return 2
    launcher = first.settings.launcher
    if not (launcher.wait or (launcher.wait is None and launcher.name != "slurm")):
        print(
            f"perfsweep: nothing was run:\n- {AUTO} looks at each round's records before the next: it needs "
            "launcher.wait=true (on Slurm, the launch follows each round's array)",
            file=sys.stderr,
        )
        return 2
    if launcher.budget_s is not None:  # each look is a launch: a budget of its own would leave rounds unrun
        where = first.origin("launcher.budget_s")
        print(
            f"perfsweep: {AUTO} stops at auto.max_minutes ({first.settings.auto.max_minutes:g} min), between its "
            f"looks: launcher.budget_s={launcher.budget_s:g} ({where}) is off for its rounds",
            file=sys.stderr,
        )
        base = [*base, "launcher.budget_s=null"]
    search = Rounds(base, first, rounds.schedule(first.settings.auto.max_runs))
    status = launch_until_decided(search, search.looks, argv, progress=search.progress)
    if status not in (0, 1):
        return status
    plan = search.plan
    left = stranded(plan.sweep_dir) if status else None  # what status would say of the runs not done
    names = [spec.name for spec in plan.runs]
    show_sweep(plan.sweep_dir, names, plan.settings.tracker, after=summary(search), stranded=left)
    return status


def summary(search: Rounds) -> list[str]:
    minutes = (time.monotonic() - search.began) / 60
    return rounds.summary(search.last, len(search.done), minutes, search.stopped or f"cap reached: {search.capped()}")
