"""launcher.slots.Slots: what may start next on this host, and where, for the warm job's forks and the launcher's
jobs alike."""

import os

from perfsweep.launcher.slots import Place, Slots, cpu_shares
from perfsweep.train.build import allotted_cpus


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


def test_runs_at_once_share_the_cpus_a_disjoint_share_each_of_one_size(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6})  # a 7-CPU host's
    assert cpu_shares(1) == [], "one run at a time has every CPU"
    assert cpu_shares(2) == [(0, 1, 2), (3, 4, 5)], "the same CPUs each: the one left over is left unused"
    assert cpu_shares(3) == [(0, 1), (2, 3), (4, 5)]
    assert cpu_shares(9) == [(0,), (1,), (2,), (3,), (4,), (5,), (6,), (0,), (1,)], "more runs than CPUs: one each"
    slots = Slots(parallelism=2, gpus=[0, 1], share_cpus=True)
    first, second = slots.take(), slots.take()
    assert (first, second) == (Place(0, (0, 1, 2)), Place(1, (3, 4, 5)))
    slots.release(first)
    assert slots.take() == first, "the next run gets the share the run that ended had"
    assert Slots(parallelism=2).take().cpus is None, "without share_cpus: every CPU"
    one_gpu = Slots(parallelism=4, gpus=[0], share_cpus=True)
    assert one_gpu.take() == Place(0, None), "one GPU: one run at a time, on every CPU"


def test_a_runs_threads_are_the_cpus_it_may_run_on_where_fewer_than_its_hosts_or_slurms(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    for variable in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert allotted_cpus() is None, "every CPU: torch's own choice"
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5})  # a share among local runs at once
    assert allotted_cpus() == 2
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "8")  # a local launch inside a Slurm allocation
    assert allotted_cpus() == 2, "the share, not the allocation"
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    assert allotted_cpus() == 3, "a Slurm task's CPUs"
