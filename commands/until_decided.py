"""Launch, look, decide: the loop that repeats=auto and bisect share.

A sequential design launches its plans at each look of a schedule.
After each launch it reads the plan's records.
After each look it says whether it is decided.
"""

from typing import TYPE_CHECKING, Protocol

from perfsweep.commands.launching import launch_plan
from perfsweep.launcher.run_states import cannot_start, run_states

if TYPE_CHECKING:
    from perfsweep.launcher.progress import Progress
    from perfsweep.sweeps.plan import Plan


class SequentialDesign(Protocol):
    """What the loop launches and reads: repeats=auto's rounds, or a bisect's points."""

    def plans(self, runs: int) -> list["Plan"]:
        """The plans to launch at a look, with `runs` runs per configuration."""

    def looked(self, plan: "Plan", runs: int) -> None:
        """Read a plan's records once its launch has ended."""

    def decided(self) -> bool:
        """Whether the design needs no more looks."""

    def out_of_time(self) -> bool:
        """Whether to stop before the next look."""

    def stop(self, why: str) -> None:
        """The loop stops before the next look, for `why`."""


def launch_until_decided(
    design: SequentialDesign,
    looks: list[int],
    argv: list[str],
    quiet_envs: bool = False,
    progress: "Progress | None" = None,
    pinned: dict | None = None,
) -> int:
    """Launch each look's plans until the design is decided or the looks run out.

    Every look runs the code of the first: an edit meanwhile changes none of them.

    Args:
        design: what to launch and how to read it.
        looks: the runs per configuration at each look, in order.
        argv: the command's words, kept in each sweep's manifest.
        quiet_envs: the environments were built and reported before.
        progress: one count over every look's runs; by default, each launch counts its own.
        pinned: the code of the command's earlier launches (launcher/submit.py `launch`); by default, this call's.

    Returns:
        0, or 1 where a run failed; or the exit status of a launch that could not run.
    """
    failed = False
    pinned = {} if pinned is None else pinned  # every look runs the code the first one took
    for runs in looks:
        launched = design.plans(runs)
        for plan in launched:
            status = launch_plan(
                lambda plan=plan: plan, argv, show=False, quiet_envs=quiet_envs, progress=progress, pinned=pinned
            )
            if status not in (0, 1):
                return status
            failed = failed or status == 1
            design.looked(plan, runs)
        if design.decided() or (runs != looks[-1] and design.out_of_time()):
            break
        if runs != looks[-1] and (why := cannot_go_on(launched)):
            design.stop(why)
            break
    return int(failed)


def cannot_go_on(plans: list["Plan"]) -> str:
    """Why no later look may be launched; '' where nothing stops it.

    Runs of these plans may be queued in jobs that can never start.
    A later look would queue more of them.
    """
    stuck, reasons = 0, set()
    for plan in plans:
        names = {spec.name for spec in plan.runs}
        rows = [row for row in run_states(plan.sweep_dir) if row.run in names]
        waiting = cannot_start(rows)
        stuck += len(waiting)
        reasons |= {row.job_waits for row in rows if row.run in waiting}
    if not stuck:
        return ""
    are = "is" if stuck == 1 else "are"
    why = ", ".join(sorted(reasons))
    return (
        f"{stuck} of its runs {are} queued in jobs that cannot start ({why}), and a later look would queue more of them"
    )
