"""launcher.runs.Slots: what may start next on this host, for the warm job's forks and the launcher's jobs alike."""

from launcher.runs import Slots


def test_slots_hold_parallelism_and_pin_one_run_per_free_gpu():
    pinned = Slots(parallelism=3, gpus=[0, 1])
    assert pinned.open(0) and pinned.take() == 0 and pinned.take() == 1
    assert not pinned.open(2), "two GPUs: a third run waits, whatever the parallelism"
    pinned.release(0)
    assert pinned.open(1) and pinned.take() == 0


def test_slots_without_gpus_hold_parallelism_alone():
    unpinned = Slots(parallelism=2)
    assert unpinned.open(1) and unpinned.take() is None and not unpinned.open(2)
    unpinned.release(None)  # a run that had no GPU gives none back: still two at a time
    assert unpinned.open(1) and not unpinned.open(2)
