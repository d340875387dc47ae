"""repeats=auto: launch a sweep's rounds until every comparison is decided, or a cap is reached.

The looks follow a schedule of runs per configuration (analysis/statistics/rounds.py).
One count goes over all their runs, up to the cap, with the time the rest would take (launcher/progress.py).
"""

import sys
import time

from perfsweep import records
from perfsweep.analysis.statistics import rounds
from perfsweep.commands.launching import said
from perfsweep.commands.until_decided import launch_until_decided
from perfsweep.commands.views import show_sweep
from perfsweep.launcher.progress import UpToCap
from perfsweep.records import AUTO
from perfsweep.sweeps.plan import Plan, PlanError, build_plan


class Rounds:
    """The rounds of one sweep, looked at after each launch."""

    def __init__(self, base: list[str], first: Plan, looks: list[int]):
        self.base, self.auto, self.looks = base, first.settings.auto, looks
        self.began = time.monotonic()
        self.plan, self.done, self.last = first, [], None
        self.cap = build_plan([*base, f"repeats={looks[-1]}"], partial=True)
        self.progress = UpToCap()

    def plans(self, runs: int) -> list[Plan]:
        """The look's plan; the count then expects at most the runs the cap leaves undone."""
        self.progress.expect(sum(not records.is_done(self.cap.sweep_dir / spec.name) for spec in self.cap.runs))
        return [build_plan([*self.base, f"repeats={runs}"], partial=True)]

    def looked(self, plan: Plan, runs: int) -> None:
        names = [spec.name for spec in plan.runs]
        self.plan, self.runs = plan, runs
        self.done = [r for r in records.load_sweep(plan.sweep_dir, names) if r.state == records.DONE]
        self.last = rounds.look(self.done, runs, self.auto.half_width, len(self.looks))
        print(self.last.line())

    def decided(self) -> bool:
        return self.last.met

    def out_of_time(self) -> bool:
        return time.monotonic() - self.began > 60 * self.auto.max_minutes

    def capped(self) -> str:
        """What stopped the rounds short of a decision."""
        if self.runs != self.looks[-1]:
            return f"{self.auto.max_minutes:g} min (auto.max_minutes)"
        return f"{self.auto.max_runs} runs per configuration (auto.max_runs)"


def launch_rounds(overrides: list[str], argv: list[str]) -> int:
    """Launch the sweep's rounds until decided; then print its views and what stayed undecided."""
    base = [o for o in overrides if o != AUTO]
    try:
        first = build_plan([*base, "repeats=1"], partial=True)
    except PlanError as error:
        print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
        return 2
    said(first)
    launcher = first.settings.launcher
    if not (launcher.wait or (launcher.wait is None and launcher.name != "slurm")):
        print(
            f"perfsweep: nothing was run:\n- {AUTO} looks at each round's records before the next: it needs "
            "launcher.wait=true (on Slurm, the launch follows each round's array)",
            file=sys.stderr,
        )
        return 2
    search = Rounds(base, first, rounds.schedule(first.settings.auto.max_runs))
    status = launch_until_decided(search, search.looks, argv, progress=search.progress)
    if status not in (0, 1):
        return status
    plan = search.plan
    show_sweep(plan.sweep_dir, [spec.name for spec in plan.runs], plan.settings.tracker, after=summary(search))
    return status


def summary(search: Rounds) -> list[str]:
    minutes = (time.monotonic() - search.began) / 60
    return rounds.summary(search.last, len(search.done), minutes, search.capped())
