"""A command's or a job's end without Python's teardown: its exit status, its exit handlers run once, its output
flushed, its threads stopped as Python stops them, and no module's objects freed; Python's own end where the
process ends otherwise than planned."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import submitit

from perfsweep.launcher.jobs import RunPack
from perfsweep.launcher.process_end import in_own_job_process
from tests.helpers import ROOT

# An object freed only by Python's teardown says so; an exit handler says it ran (on stderr, leaving stdout's buffer
# to the end). A thread pool left running holds threads that are not daemons: Python's end stops them first
# (concurrent.futures' own exit hook), then joins them.
SCRIPT = """
import atexit, concurrent.futures, sys
from perfsweep.launcher import process_end

class Freed:
    def __del__(self):
        print("freed", flush=True)

kept = Freed()
pool = concurrent.futures.ThreadPoolExecutor(2)
pool.submit(print, "pooled", flush=True).result()
atexit.register(print, "handler ran", file=sys.stderr)
print("unflushed output", end="")
{ending}
"""
FREED = "class Freed:\n    def __del__(self):\n        print('freed', flush=True)\n\n\nkept = Freed()\n"


def buffered() -> dict[str, str]:
    """This environment, with Python's standard streams buffered as they are by default."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def ended(ending: str) -> subprocess.CompletedProcess:
    script = SCRIPT.format(ending=ending)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, env=buffered()
    )


def test_python_s_own_end_frees_the_modules_objects():
    """The premise: what end_at_exit leaves out."""
    done = ended("sys.exit(3)")
    assert done.returncode == 3 and done.stderr.count("handler ran") == 1 and "freed" in done.stdout


def test_an_end_armed_last_keeps_the_status_runs_each_handler_once_and_frees_nothing():
    done = ended("process_end.end_at_exit(3)\nprint(' then the rest of main', end='')\nsys.exit(3)")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "pooled\nunflushed output then the rest of main"
    assert done.stderr.count("handler ran") == 1


@pytest.mark.parametrize(
    ("after", "status"),
    [
        ("raise RuntimeError('after all')", 1),  # Python's status for an exception
        ("atexit.register(print, 'registered after', file=sys.stderr)\nsys.exit(4)", 4),  # run once, not twice
    ],
)
def test_a_process_that_ends_otherwise_than_planned_ends_as_python_ends_it(after, status):
    done = ended(f"process_end.end_at_exit(0)\n{after}")
    assert done.returncode == status, done.stderr
    assert done.stderr.count("handler ran") == 1 and done.stderr.count("registered after") == (1 if status == 4 else 0)
    assert "freed" in done.stdout


def test_the_command_ends_without_the_teardown(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(FREED)  # an object of a module the command imports
    env = buffered() | {"PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "launch.py", "envs", "--dir", str(tmp_path / "envs")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "0 environments" in done.stdout and "freed" not in done.stdout


@pytest.mark.slow
def test_a_job_s_own_process_ends_without_the_teardown_and_a_job_run_in_the_launcher_does_not(tmp_path, monkeypatch):
    """The debug executor runs a job in the launcher's process, which must end as Python ends it."""

    class NoRuns(RunPack):  # defined here, sent to the job whole: a job of no runs
        def _run(self, runs):
            scope = {}
            exec(FREED, scope)  # an object that only Python's teardown frees, kept by the job's main module
            sys.modules["__main__"].kept = scope["kept"]
            return {}

    local = submitit.LocalExecutor(folder=tmp_path / "local")
    job = local.submit(NoRuns(runner=None), [])
    assert job.result() == {}
    job.wait()
    assert "freed" not in Path(job.paths.stdout).read_text()
    assert local.submit(in_own_job_process).result() is True
    monkeypatch.setitem(os.environ, "SUBMITIT_FOLDER", str(tmp_path))  # as a job's environment has it
    debug = submitit.DebugExecutor(folder=tmp_path / "debug")
    assert debug.submit(in_own_job_process).result() is False
