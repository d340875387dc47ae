"""Which machine a table's runs ran on, and the runs that ran on another one.

A ratio between two runs is side by side only on the same kind of machine and software.
RunRecord.machine holds both: GPU and driver, or CPU and threads; torch, CUDA, cuDNN.
What a run's config chose among them (RunRecord.asked: a torch version, threads) is configuration.
Two runs are compared in the labels neither chose.
The usual machine is the most common in the labels that no run chose.
Runs of one table can land on different machines.
A sweep resumed elsewhere does it, as does a Slurm array over a partition of mixed nodes.
The table names the machine most of its runs had.
It flags each run that had another (MIXED MACHINES), with what differed.
"""

from collections import Counter
from collections.abc import Collection

from perfsweep.records import DONE, RunRecord


def chosen(runs: list[RunRecord]) -> frozenset[str]:
    """The machine's labels that some of the runs' configs chose (RunRecord.asked)."""
    return frozenset().union(*(r.asked for r in runs))


def _key(run: RunRecord, asked: frozenset[str]) -> tuple[tuple[str, str], ...]:
    return tuple((label, value) for label, value in run.machine.items() if label not in asked)


def _measured(runs: list[RunRecord]) -> list[RunRecord]:
    """The done runs with an env record: the runs a table shows, and where they were measured."""
    return [r for r in runs if r.state == DONE and r.env]


def usual(runs: list[RunRecord]) -> RunRecord | None:
    """A done run on the machine most done runs had: the first such run of the most common machine."""
    known = _measured(runs)
    if not known:
        return None
    asked = chosen(known)
    most, _ = Counter(_key(r, asked) for r in known).most_common(1)[0]
    return next(r for r in known if _key(r, asked) == most)


def named(runs: list[RunRecord], leaving: Collection[str] = ()) -> str:
    """The machine most of the runs had, as a line: 'CPU AMD EPYC, threads 2, torch 2.14.1'.

    It leaves out the labels in `leaving` (those the runs' configs chose: chosen).
    It is '' where unknown.
    """
    main = usual(runs)
    return ", ".join(f"{k} {v}" for k, v in main.machine.items() if k not in leaving) if main else ""


def shared(a: list[RunRecord], b: list[RunRecord]) -> str:
    """What the machines most of A's and of B's runs had in common, in labels neither's configs chose.

    It is '' where either is unknown.
    """
    usual_a, usual_b = usual(a), usual(b)
    if usual_a is None or usual_b is None:
        return ""
    asked = chosen(a) | chosen(b)
    same = [(k, v) for k, v in usual_a.machine.items() if k not in asked and usual_b.machine.get(k) == v]
    return ", ".join(f"{label} {value}" for label, value in same)


def elsewhere(runs: list[RunRecord]) -> list[str]:
    """A line for each done run whose machine differs from the usual one, in labels neither run's config chose.

    For example: 'MIXED MACHINES name: torch 2.14.1, CUDA 12.8 (the table's other 3 runs: torch 2.11.0, CUDA 13.0)'.
    """
    main = usual(runs)
    if main is None:
        return []
    known = _measured(runs)
    differ_by_run = {run.name: differences(main.machine, run.machine, main.asked | run.asked) for run in known}
    on_main = sum(not differ for differ in differ_by_run.values())
    mixed = []
    for run in known:
        differ = differ_by_run[run.name]
        if not differ:
            continue
        theirs = ", ".join(f"{label} {b}" for label, (_, b) in differ.items())
        usually = ", ".join(f"{label} {a}" for label, (a, _) in differ.items())
        mixed.append(f"MIXED MACHINES {run.name}: {theirs} (the table's other {on_main} runs: {usually})")
    return mixed


def differences(a: dict[str, str], b: dict[str, str], asked: Collection[str] = ()) -> dict[str, tuple[str, str]]:
    """The labels of two machines (RunRecord.machine) whose values differ, but those `asked`: label -> (a's, b's)."""
    labels = [label for label in {**a, **b} if label not in asked]
    return {label: (a.get(label, "?"), b.get(label, "?")) for label in labels if a.get(label) != b.get(label)}
