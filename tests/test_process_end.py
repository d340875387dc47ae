"""A command's or a job's end without Python's teardown: its exit status, its exit handlers run once, its output
flushed, its threads stopped as Python stops them, and no module's objects freed."""

import os
import subprocess
import sys

import pytest
import submitit

from perfsweep.launcher.process_end import in_own_job_process
from tests.helpers import ROOT

# An object freed only by Python's teardown says so; an exit handler says it ran. A thread pool left running holds
# threads that are not daemons: Python's end stops them first (concurrent.futures' own exit hook), then joins them.
SCRIPT = """
import atexit, concurrent.futures, sys
from perfsweep.launcher import process_end

class Freed:
    def __del__(self):
        print("freed", flush=True)

kept = Freed()
pool = concurrent.futures.ThreadPoolExecutor(2)
pool.submit(print, "pooled", flush=True).result()
atexit.register(print, "handler ran", flush=True)
print("unflushed output", end="")
{ending}
"""


def ended(ending: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(ending=ending)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_python_s_own_end_frees_the_modules_objects():
    """The premise: what end_at_exit leaves out."""
    done = ended("sys.exit(3)")
    assert done.returncode == 3 and done.stdout.count("handler ran") == 1 and "freed" in done.stdout


def test_an_end_armed_last_keeps_the_status_runs_each_handler_once_and_frees_nothing():
    done = ended("process_end.end_at_exit(3)\nprint(' then the rest of main', end='')\nsys.exit(3)")
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("pooled\nunflushed output then the rest of main")
    assert done.stdout.count("handler ran") == 1 and "freed" not in done.stdout


def test_an_exception_after_the_end_was_armed_ends_the_process_with_status_1():
    done = ended("process_end.end_at_exit(0)\nraise RuntimeError('after all')")
    assert done.returncode == 1 and "RuntimeError: after all" in done.stderr
    assert done.stdout.count("handler ran") == 1 and "freed" not in done.stdout


@pytest.mark.slow
def test_a_submitit_job_s_own_process_is_one_and_a_job_run_in_the_launcher_is_not(tmp_path, monkeypatch):
    """The debug executor runs a job in the launcher's process, which must end as Python ends it."""
    local = submitit.LocalExecutor(folder=tmp_path / "local")
    assert local.submit(in_own_job_process).result() is True
    monkeypatch.setitem(os.environ, "SUBMITIT_FOLDER", str(tmp_path))  # as a job's environment has it
    debug = submitit.DebugExecutor(folder=tmp_path / "debug")
    assert debug.submit(in_own_job_process).result() is False
