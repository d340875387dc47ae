"""launcher.runs.Slots: what may start next on this host, and where, for the warm job's forks and the launcher's
jobs alike."""

import os

from launcher.runs import Place, Slots, cpu_shares


def test_slots_hold_parallelism_and_pin_one_run_per_free_gpu():
    pinned = Slots(parallelism=3, gpus=[0, 1])
    assert pinned.open(0) and pinned.take() == Place(gpu=0) and pinned.take() == Place(gpu=1)
    assert not pinned.open(2), "two GPUs: a third run waits, whatever the parallelism"
    pinned.release(Place(gpu=0))
    assert pinned.open(1) and pinned.take() == Place(gpu=0)


def test_slots_without_gpus_hold_parallelism_alone():
    unpinned = Slots(parallelism=2)
    assert unpinned.open(1) and unpinned.take() == Place() and not unpinned.open(2)
    unpinned.release(Place())  # a run that had no GPU gives none back: still two at a time
    assert unpinned.open(1) and not unpinned.open(2)


def test_runs_at_once_share_the_cpus_a_disjoint_share_each(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6})  # a 7-CPU host's
    assert cpu_shares(1) == [], "one run at a time has every CPU"
    assert cpu_shares(2) == [(0, 1, 2), (3, 4, 5, 6)]
    assert cpu_shares(3) == [(0, 1), (2, 3), (4, 5, 6)]
    assert cpu_shares(9) == [(0,), (0,), (1,), (2,), (3,), (3,), (4,), (5,), (6,)], "more runs than CPUs: one each"
    slots = Slots(parallelism=2, gpus=[0, 1], share_cpus=True)
    first, second = slots.take(), slots.take()
    assert (first, second) == (Place(0, (0, 1, 2)), Place(1, (3, 4, 5, 6)))
    slots.release(first)
    assert slots.take() == first, "the next run gets the share the run that ended had"
    assert Slots(parallelism=2).take().cpus is None, "without share_cpus: every CPU"
