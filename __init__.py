"""perfsweep: sweeps of PyTorch training-step timings, recorded to disk and W&B.

The repository's top-level folders are this package's stages (perfsweep.conf, perfsweep.train, ...).
So perfsweep imports under its one name.
A user's own `train.py` or `conf/` never shadows it.
Its messages name the command the user ran (user_command): `perfsweep`, or `python launch.py`.
Where a shell would run another python or perfsweep, they name the running one's path.
"""

import os
import shlex
import shutil
import sys
from pathlib import Path

COMMAND = "PERFSWEEP_COMMAND"  # how the user ran perfsweep: launch.main sets it for the jobs it starts


def typed_command() -> str:
    """How this process was started: `python launch.py` as the script's path was typed, else `perfsweep`.

    `perfsweep` is the installed command (pyproject's console script).
    A shell's `python` may run another program (a venv not activated).
    The running one is then named by its path.
    """
    script = sys.argv[0] if sys.argv else ""
    if Path(script).name == "launch.py":
        python = "python" if _runs("python", sys.executable) else shlex.quote(sys.executable)
        return f"{python} {shlex.quote(script)}"
    if Path(script).name == "perfsweep" and not _runs("perfsweep", script):
        return shlex.quote(os.path.abspath(script))
    return "perfsweep"


def _runs(name: str, program: str) -> bool:
    """Whether `name`, typed in a shell here, runs `program`.

    It must be the same file in the same folder.
    A venv's python links to the system's.
    """
    found = shutil.which(name)
    if found is None or os.path.dirname(os.path.abspath(found)) != os.path.dirname(os.path.abspath(program)):
        return False
    return os.path.samefile(found, program)


def user_command() -> str:
    """The command the user ran perfsweep with, to name in advice: f"{user_command()} resume SWEEP_DIR".

    A launch's jobs are processes of their own: they read it from the environment that launch.main set.
    """
    return os.environ.get(COMMAND) or typed_command()
