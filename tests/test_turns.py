"""Warm jobs of several environments whose runs take turns (launcher/turns.py): the launcher's side, with files
alone, and a warm job's side, forking real children."""

import dataclasses
import subprocess
import threading

import pytest

from perfsweep import records
from perfsweep.launcher import turns
from perfsweep.launcher.run_job import RunJob, Runner
from perfsweep.launcher.warm import fork_runs
from perfsweep.sweeps.plan import build_plan
from tests.helpers import FAST, record_done, wait_for

ORDER = ["a0", "b0", "a1", "b1"]  # job A's runs and job B's, A B A B


def given(order: list[turns.Turn]) -> list[bool]:
    return [turn.go.exists() for turn in order]


def test_the_launcher_gives_the_first_turn_once_every_job_is_warm_then_those_after_jobs_that_ended(tmp_path):
    order = turns.fresh(tmp_path, ORDER)
    launcher = turns.Turns(ORDER, order)
    a, b = order[0], order[1]  # each job's first run
    turns.warm(a).touch()
    launcher.give(set(), alive=[a, b])
    assert given(order) == [False] * 4, "job B still imports: no run is measured beside it"
    turns.warm(b).touch()
    launcher.give(set(), alive=[a, b])
    assert given(order) == [True, False, False, False]
    launcher.give(set(), alive=[a, b])
    assert given(order) == [True, False, False, False], "a0's job is alive: it gives b0's turn once a0 has ended"
    order[0].then.touch()  # job A: a0's process ended
    launcher.give({"b0", "b1"}, alive=[a])  # job B died with b0 and b1
    assert given(order) == [True, True, True, False], "a1, then b1 once job A has ended"
    launcher.give({"b0", "b1", "a0", "a1"}, alive=[])
    assert given(order) == [True] * 4


def test_a_launch_of_an_earlier_launchs_folder_starts_with_no_turn_given(tmp_path):
    (tmp_path / turns.FOLDER).mkdir()
    (tmp_path / turns.FOLDER / "a0").touch()
    assert given(turns.fresh(tmp_path, ORDER)) == [False] * 4


def test_a_job_waiting_for_a_turn_gives_up_once_its_launcher_is_gone(tmp_path):
    order = turns.fresh(tmp_path, ORDER)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / turns.FOLDER / turns.LAUNCHER).write_text(str(gone.pid))
    with pytest.raises(KeyboardInterrupt, match="the launcher that gives this job's turns is gone"):
        turns.next_turn(order[2:])


def test_a_warm_job_forks_its_runs_only_in_their_turns_and_gives_the_next_its_own(tmp_path):
    """Job A holds a0 and a1; a thread stands in for job B and its run b0, which comes between them."""
    plan = build_plan([*FAST, "seed=0,1,2", f"runs_dir={tmp_path}"])
    a0, b0, a1 = (RunJob(spec, tmp_path / spec.name, "id", 1) for spec in plan.runs)
    order = turns.fresh(tmp_path, ORDER)
    a0, a1 = (dataclasses.replace(run, turn=order[i]) for run, i in ((a0, 0), (a1, 2)))
    order[0].go.touch()  # the launcher's first turn
    seen = {}

    def job_b() -> None:
        wait_for(order[1].go.exists, "b0's turn, from job A", timeout=60)
        seen["a0"], seen["a1"] = records.read_status(a0.run_dir).state, a1.run_dir.exists()
        record_done(b0.spec, b0.run_dir, "id", {})
        order[1].then.touch()

    other = threading.Thread(target=job_b)
    other.start()
    states = fork_runs(Runner(record_done), [a0, a1], 1, (), {})
    other.join()
    assert seen == {"a0": records.DONE, "a1": False}, "b0's turn came once a0 had ended, and before a1 started"
    assert states == {a0.spec.name: records.DONE, a1.spec.name: records.DONE}
    assert turns.warm(order[0]).exists(), "job A said it was warm"
    assert not order[3].go.exists(), "after its last run, job A leaves b1's turn to the launcher, once it has ended"
