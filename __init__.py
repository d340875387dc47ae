"""perfsweep: sweeps of PyTorch training-step timings, recorded to disk and W&B.

The repository's top-level folders are this package's stages (perfsweep.conf, perfsweep.train, ...).
So perfsweep imports under its one name.
A user's own `train.py` or `conf/` never shadows it.
Its messages name the command the user ran (user_command): `perfsweep`, or `python launch.py`.
"""

import os
import shlex
import sys
from pathlib import Path

COMMAND = "PERFSWEEP_COMMAND"  # how the user ran perfsweep: launch.main sets it for the jobs it starts


def typed_command() -> str:
    """How this process was started: `python launch.py` as the script's path was typed, else `perfsweep`.

    `perfsweep` is the installed command (pyproject's console script).
    """
    script = sys.argv[0] if sys.argv else ""
    return f"python {shlex.quote(script)}" if Path(script).name == "launch.py" else "perfsweep"


def user_command() -> str:
    """The command the user ran perfsweep with, to name in advice: f"{user_command()} resume SWEEP_DIR".

    A launch's jobs are processes of their own: they read it from the environment that launch.main set.
    """
    return os.environ.get(COMMAND) or typed_command()
