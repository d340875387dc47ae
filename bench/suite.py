"""Where the test suite's time goes: each test's wall and CPU seconds, its child processes' included.

    python -m perfsweep.bench.suite [--top 20] [--out FILE] [-- PYTEST_ARGS ...]

It runs README's test command (`python -m pytest`, with its workers and markers), or pytest with the arguments given.
This module is also the pytest plugin that times each test (`-p perfsweep.bench.suite`), in every worker.
A test's time runs from its setup to its teardown, so a fixture's cost falls on the first test that uses it.
Its CPU seconds are the worker's own and those of the processes it waited for (`os.times`): launches, jobs, Slurm's.
Other tests that run on the other workers meanwhile count on theirs, not on this one.

It prints the suite's wall time, the tests' summed wall and CPU time, and the `--top` slowest tests by wall time.
Then it sums them by test file, the unit a worker takes (`--dist loadfile`), and by worker, with when each finished.
Last comes the busy time over the suite of the CPUs it may use (/proc/stat), beside pytest's processes' CPU time.
The rest ran outside pytest's tree: Slurm's jobs, W&B's services, and anything else on those CPUs.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMES = "PERFSWEEP_SUITE_TIMES"  # the folder each worker writes its tests' times into


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Time one test, its setup and teardown included, where the suite bench asked for it."""
    folder = os.environ.get(TIMES)
    began, cpu, clock = time.perf_counter(), os.times(), time.time()
    yield
    if not folder:
        return
    ended = os.times()
    row = {
        "test": item.nodeid,
        "wall_s": time.perf_counter() - began,
        # max: the differences of sums of floats can come out a hair below zero, which prints as -0.0
        "cpu_s": max(0.0, ended.user + ended.system - cpu.user - cpu.system),
        "children_cpu_s": max(
            0.0, ended.children_user + ended.children_system - cpu.children_user - cpu.children_system
        ),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "began": clock,
    }
    worker = row["worker"]
    with open(Path(folder) / f"{worker}.jsonl", "a") as out:
        out.write(json.dumps(row) + "\n")


def collected(folder: Path) -> list[dict]:
    """Every timed test's row, from each worker's file."""
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


class Machine(NamedTuple):
    """The CPUs the bench may use, their busy seconds over the suite (None without /proc/stat), and pytest's CPU."""

    cpus: int
    busy_s: float | None
    pytest_cpu_s: float


def report(rows: list[dict], wall_s: float, top: int, machine: Machine | None = None) -> list[str]:
    """The suite's totals, its `top` slowest tests by wall time, its slowest files, and each worker's sums.

    Then the CPUs' busy time, where it was read.
    """
    cpu = sum(r["cpu_s"] + r["children_cpu_s"] for r in rows)
    lines = [
        f"suite: {wall_s:.0f} s wall for {len(rows)} tests; their wall times sum to "
        f"{sum(r['wall_s'] for r in rows):.0f} s, their CPU times to {cpu:.0f} s (children included)",
        f"the {min(top, len(rows))} slowest tests by wall time (s):",
        f"{'wall':>7} {'cpu':>7} {'children':>9}  test",
    ]
    slowest = sorted(rows, key=lambda r: r["wall_s"], reverse=True)[:top]
    lines += [f"{r['wall_s']:7.1f} {r['cpu_s']:7.1f} {r['children_cpu_s']:9.1f}  {r['test']}" for r in slowest]
    files = _summed(rows, lambda r: r["test"].split("::")[0])
    lines += [f"the {min(top, len(files))} slowest test files, summed (s):", f"{'wall':>7} {'cpu':>7}  file"]
    lines += [f"{wall:7.1f} {cpu:7.1f}  {name}" for name, (wall, cpu, _) in files[:top]]
    start = min((r["began"] for r in rows), default=0.0)  # no test ran: a collection error, a -k that picked none
    lines += ["by worker: tests' summed wall and CPU (s), and when its last test ended (s after the first began):"]
    lines += [
        f"{wall:7.1f} {cpu:7.1f} {last - start:7.0f}  {name}"
        for name, (wall, cpu, last) in sorted(_summed(rows, lambda r: r["worker"]))
    ]
    if machine and machine.busy_s is not None:
        capacity = wall_s * machine.cpus
        lines.append(
            f"machine: the {machine.cpus} CPUs it may use were busy {machine.busy_s:.1f} s of {capacity:.1f} "
            f"({machine.busy_s / capacity:.0%}); pytest and the processes it waited for used "
            f"{machine.pytest_cpu_s:.1f} s; outside them {max(0.0, machine.busy_s - machine.pytest_cpu_s):.1f} s "
            "(Slurm's jobs, W&B's services, anything else on those CPUs)"
        )
    return lines


def _summed(rows: list[dict], key) -> list[tuple[str, tuple[float, float, float]]]:
    """Rows summed by `key`: wall, CPU (children included) and the latest end, the largest wall first."""
    sums: dict[str, list[float]] = {}
    for r in rows:
        total = sums.setdefault(key(r), [0.0, 0.0, 0.0])
        total[0] += r["wall_s"]
        total[1] += r["cpu_s"] + r["children_cpu_s"]
        total[2] = max(total[2], r["began"] + r["wall_s"])
    return sorted(((name, tuple(t)) for name, t in sums.items()), key=lambda item: item[1][0], reverse=True)


def main(argv: list[str] | None = None) -> int:
    # here, not above: as a plugin, this module loads before the suite's conftest
    from perfsweep.bench import command
    from perfsweep.train.host_state import HostReader

    found = command.parser("suite", __doc__)
    found.add_argument("--top", type=int, default=20, help="how many of the slowest tests to list")
    found.add_argument("--out", type=Path, help="also write every test's row here (JSON lines)")
    found.add_argument("pytest_args", nargs="*", help="pytest's arguments (after --); none: README's test command")
    args = found.parse_args(argv)
    pytest_cmd = [sys.executable, "-m", "pytest", "-p", "perfsweep.bench.suite", *args.pytest_args]
    if args.dry_run:
        print(f"dry run: would run {' '.join(pytest_cmd[1:])} in {ROOT}, then list its {args.top} slowest tests")
        return 0
    host = HostReader()
    with tempfile.TemporaryDirectory() as folder:
        began, before, times = time.perf_counter(), host.read(), os.times()
        # an xdist worker's name is its own pytest's: not one this command was started in (the suite's own tests)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")} | {TIMES: folder}
        status = subprocess.run(pytest_cmd, cwd=ROOT, env=env).returncode
        wall, after, ended = time.perf_counter() - began, host.read(), os.times()
        rows = collected(Path(folder))
    busy = None if before.busy is None or after.busy is None else after.busy - before.busy
    waited = ended.children_user + ended.children_system - times.children_user - times.children_system
    if args.out:
        args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print("\n".join(report(rows, wall, args.top, Machine(len(host.cpus), busy, waited))))
    return status


if __name__ == "__main__" and (status := main()):
    sys.exit(status)  # pytest's own: a failed test fails the bench's command too
