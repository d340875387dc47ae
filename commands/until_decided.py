"""Launch, look, decide: the loop that repeats=auto and bisect share.

A sequential design launches its plans at each look of a schedule.
After each launch it reads the plan's records.
After each look it says whether it is decided.
"""

from typing import TYPE_CHECKING, Protocol

from perfsweep.commands.launching import launch_plan

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
        for plan in design.plans(runs):
            status = launch_plan(
                lambda plan=plan: plan, argv, show=False, quiet_envs=quiet_envs, progress=progress, pinned=pinned
            )
            if status not in (0, 1):
                return status
            failed = failed or status == 1
            design.looked(plan, runs)
        if design.decided() or (runs != looks[-1] and design.out_of_time()):
            break
    return int(failed)
