"""Which machine a table's runs ran on, and the runs that ran on another one.

A ratio between two runs is side by side only on the same kind of machine and software.
RunRecord.machine holds both: GPU and driver, or CPU and threads; torch, CUDA, cuDNN.
Runs of one table can land on different machines.
A sweep resumed elsewhere does it, as does a Slurm array over a partition of mixed nodes.
The table names the machine most of its runs had.
It flags each run that had another (MIXED MACHINES), with what differed.
"""

from collections import Counter

from perfsweep.records import DONE, RunRecord


def _key(run: RunRecord) -> tuple[tuple[str, str], ...]:
    return tuple(run.machine.items())


def _measured(runs: list[RunRecord]) -> list[RunRecord]:
    """The done runs with an env record: the runs a table shows, and where they were measured."""
    return [r for r in runs if r.state == DONE and r.env]


def usual(runs: list[RunRecord]) -> RunRecord | None:
    """A done run on the machine most done runs had: the first such run of the most common machine."""
    known = _measured(runs)
    if not known:
        return None
    most, _ = Counter(_key(r) for r in known).most_common(1)[0]
    return next(r for r in known if _key(r) == most)


def elsewhere(runs: list[RunRecord]) -> list[str]:
    """A line for each done run whose machine differs from the usual one.

    For example: 'MIXED MACHINES name: torch 2.14.1, CUDA 12.8 (the table's other 3 runs: torch 2.11.0, CUDA 13.0)'.
    """
    main = usual(runs)
    if main is None:
        return []
    known = _measured(runs)
    on_main = sum(_key(r) == _key(main) for r in known)
    mixed = []
    for run in known:
        if _key(run) == _key(main):
            continue
        differ = differences(main.machine, run.machine)
        theirs = ", ".join(f"{label} {b}" for label, (_, b) in differ.items())
        usually = ", ".join(f"{label} {a}" for label, (a, _) in differ.items())
        mixed.append(f"MIXED MACHINES {run.name}: {theirs} (the table's other {on_main} runs: {usually})")
    return mixed


def differences(a: dict[str, str], b: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The labels of two machines (RunRecord.machine) whose values differ: label -> (a's, b's)."""
    return {label: (a.get(label, "?"), b.get(label, "?")) for label in {**a, **b} if a.get(label) != b.get(label)}
