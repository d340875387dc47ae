"""perfsweep from Python, for a notebook: launch a sweep, then read its records as pandas DataFrames.

    from perfsweep import notebook
    folder = notebook.launch("model=tiny_cnn", "input_type=tensor,subclass", "repeats=2", "tracker.mode=disabled")
    runs = notebook.runs(folder)      # a row per run: its axes, config, figures, machine and state
    steps = notebook.steps(folder)    # a row per step of each done run

docs/analysis.md ("In a notebook") shows an analysis with them.
"""

from pathlib import Path

from perfsweep.analysis.frames import runs, steps

__all__ = ["LaunchFailed", "launch", "runs", "steps"]


class LaunchFailed(RuntimeError):
    """A launch that exited with another status than 0: its status, and the folder of what it recorded, if any."""

    def __init__(self, status: int, folder: Path | None, words: tuple[str, ...]):
        where = f"what it recorded is in {folder}" if folder else "nothing was recorded"
        super().__init__(f"perfsweep {' '.join(words)} exited {status}; {where}")
        self.status, self.folder = status, folder


def launch(*overrides: str) -> Path:
    """Launch a sweep as `perfsweep OVERRIDES...` would from this process's working directory; its folder.

    It prints what the command prints.

    Raises:
        LaunchFailed: where the launch exited with another status than 0 (a run failed, a value was refused...).
    """
    from perfsweep.launch import main
    from perfsweep.sweeps.plan import PlanError, build_plan

    status = main(list(overrides))
    try:
        folder = build_plan(list(overrides), partial=True).sweep_dir
    except PlanError:
        folder = None
    if status != 0 or folder is None:
        raise LaunchFailed(status, folder, overrides)
    return folder
