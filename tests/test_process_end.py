"""A command's or a job's end without Python's teardown: its exit status, its exit handlers run once, its output
flushed, and no module's objects freed."""

import subprocess
import sys

from perfsweep.launcher.process_end import in_own_job_process
from tests.helpers import ROOT

# An object freed only by Python's teardown says so; an exit handler says it ran.
SCRIPT = """
import atexit, sys
from perfsweep.launcher import process_end

class Freed:
    def __del__(self):
        print("freed", flush=True)

kept = Freed()
atexit.register(print, "handler ran", flush=True)
print("unflushed output", end="")
{ending}
"""


def ended(ending: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(ending=ending)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_python_s_own_end_frees_the_modules_objects():
    """The premise: what end_now leaves out."""
    done = ended("sys.exit(3)")
    assert done.returncode == 3 and done.stdout.count("handler ran") == 1 and "freed" in done.stdout


def test_end_now_keeps_the_status_runs_each_handler_once_and_frees_nothing():
    done = ended("process_end.end_now(3)")
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("unflushed output") and done.stdout.count("handler ran") == 1
    assert "freed" not in done.stdout


def test_a_process_armed_to_end_now_at_exit_ends_so_once_its_main_code_returns():
    done = ended("process_end.end_now_at_exit()\nprint(' then the rest of main', end='')")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("unflushed output then the rest of main")
    assert done.stdout.count("handler ran") == 1 and "freed" not in done.stdout


def test_only_a_process_started_for_a_job_is_one():
    """The debug launcher runs jobs in the launcher's own process, which must end as Python ends it."""
    assert not in_own_job_process()
