"""The host's state over measured blocks: read from this machine's /proc, from files of other shapes, and in a run
beside a busy neighbour, then named by the views' flags."""

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from perfsweep.analysis.render import text
from perfsweep.analysis.statistics.host_flags import NOTHING_SEEN, OTHERS, figures, seen, taken, within
from perfsweep.analysis.statistics.steps import noise, phase_stats
from perfsweep.analysis.views import runs
from perfsweep.analysis.views.table import flags
from perfsweep.records import HostBlock, HostState, Summary, load_sweep
from perfsweep.train.host_state import HostReader
from tests import synthetic
from tests.helpers import MEASURED, run

# it spins until it has used `seconds` of CPU, so what it used is known however busy the machine is
BUSY_LOOP = "import time\nwhile time.process_time() < {seconds}: pass"


def busy_loop(seconds: float, cpus: set[int]) -> subprocess.Popen:
    """A Python loop that spins for `seconds` of CPU on `cpus`: a child of this process."""
    loop = subprocess.Popen([sys.executable, "-c", BUSY_LOOP.format(seconds=seconds)])
    os.sched_setaffinity(loop.pid, cpus)
    return loop


def neighbour(seconds: float, cpus: set[int]) -> int:
    """A busy loop that is no descendant of this process, as another user's is: its pid.

    A process started to start it ends at once, so the loop is left to init.
    """
    spin = BUSY_LOOP.format(seconds=seconds)
    started = f"subprocess.Popen([sys.executable, '-c', {spin!r}], stdout=subprocess.DEVNULL).pid"
    loop = f"import subprocess, sys; print({started})"
    pid = int(subprocess.run([sys.executable, "-c", loop], stdout=subprocess.PIPE, text=True, check=True).stdout)
    os.sched_setaffinity(pid, cpus)
    return pid


def wait_ended(pid: int) -> None:
    """Wait until a process that is not this one's child has ended (a zombie has)."""
    stat = Path(f"/proc/{pid}/stat")
    while stat.exists():
        with contextlib.suppress(OSError):
            if stat.read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                return
        time.sleep(0.02)


def wait_used(pid: int, seconds: float) -> None:
    """Wait until a process has used `seconds` of CPU (/proc's utime and stime)."""
    stat = Path(f"/proc/{pid}/stat")
    while sum(map(int, stat.read_text().rsplit(")", 1)[1].split()[11:13])) < seconds * os.sysconf("SC_CLK_TCK"):
        time.sleep(0.02)


def test_a_block_beside_a_busy_process_shows_its_cpu_as_others_and_every_figure_is_known_or_none():
    reader = HostReader()
    loop = neighbour(0.6, set(reader.cpus))
    start = reader.read()
    wait_ended(loop)
    block = reader.block(start, reader.read())
    figures = dataclasses.asdict(block)
    assert all(value is None or value >= 0 for value in figures.values()), figures
    assert block.cpus == len(os.sched_getaffinity(0)) and block.wall_s >= 0.5
    assert block.others_cpu_s > 0.3, figures  # the loop spun for 0.6 s less its start-up, beside other tests
    assert block.process_cpu_s < 0.1 and block.children_cpu_s < 0.05, figures  # this process waited, alone


def test_the_cpu_of_a_process_the_run_started_is_the_runs_own_not_a_neighbours():
    """A run's W&B service, DataLoader and compile workers are its children: what they use is named as theirs."""
    reader = HostReader()
    loop = busy_loop(0.6, set(reader.cpus))
    start = reader.read()
    wait_used(loop.pid, 0.3)
    block = reader.block(start, reader.read())
    loop.wait()
    figures = dataclasses.asdict(block)
    assert block.children_cpu_s > 0.15, figures  # 0.3 s of CPU, less what it used before the block began
    assert block.others_cpu_s == max(0.0, block.busy_s - block.process_cpu_s - block.children_cpu_s), figures
    taken = HostState.of([block]).competed()
    said = "its own child processes (W&B's service, DataLoader or compile workers) took "
    start = reader.read()
    busy_loop(0.4, set(reader.cpus)).wait()  # started and ended within the block, as an epoch's DataLoader workers
    ended = reader.block(start, reader.read())
    assert ended.children_cpu_s > 0.2, dataclasses.asdict(ended)
    # a grandchild that ends within the block under a child that lives on is not this process's to count
    spin = "import time\nend = time.time() + 0.8\nwhile time.time() < end: pass"  # by the clock: it ends in time
    waits = f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {spin!r}]); time.sleep(2)"
    parent = subprocess.Popen([sys.executable, "-c", waits])
    time.sleep(0.5)
    start = reader.read()
    busy_loop(0.3, set(reader.cpus)).wait()  # a child of this process, waited for within the block
    time.sleep(0.4)  # the grandchild ends
    both = reader.block(start, reader.read())
    parent.kill()
    parent.wait()
    assert both.children_cpu_s > 0.15, "the child waited for counts, whatever the grandchild had used before"
    assert any(x.startswith(said) for x in taken), taken


def test_files_of_other_shapes_give_unknowns(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/stat").write_text("cpu  100 0 50 900\ncpu0 100 0 50 900\n")  # an old kernel's: no steal
    old = HostReader(root=tmp_path, cpus={0})
    reading = old.read()
    assert (reading.busy, reading.steal, reading.throttled, reading.mhz) == (150 * old.tick, None, None, None)
    block = old.block(reading, old.read())
    assert (block.steal_s, block.throttled, block.throttled_s, block.mhz_start) == (None, None, None, None)
    assert HostReader(root=tmp_path, cpus={0, 1}).read().busy is None  # no line for cpu1
    assert HostReader(root=tmp_path / "nothing", cpus={0}).read()[2:9] == (None,) * 7

    (tmp_path / "proc/self/cgroup").write_text("0::/job\n")
    (tmp_path / "sys/fs/cgroup/job").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cpu.stat").write_text("usage_usec 10\n")  # the root's: no throttling kept
    (tmp_path / "sys/fs/cgroup/job/cpu.stat").write_text("usage_usec 10\nnr_throttled 3\nthrottled_usec 500000\n")
    assert HostReader(root=tmp_path, cpus={0}).read()[4:6] == (3, 0.5)


@pytest.mark.slow
def test_a_run_beside_a_busy_loop_on_its_cpus_records_it_and_its_flags_name_it(tiny_plan):
    plan = tiny_plan("input_type=tensor", "memory_format=contiguous", "steps=300")
    loop = neighbour(60, os.sched_getaffinity(0))
    try:
        run_dir, summary = run(plan)
    finally:
        os.kill(loop, signal.SIGKILL)
    host = summary.host
    assert len(host.blocks) == 1 and host.others_share - host.resolution > OTHERS, host
    assert Summary.from_json(summary.to_json()).host == host
    (done,) = load_sweep(plan.sweep_dir)
    assert done.summary.host == host
    shown = text(runs.view(plan.sweep_dir))
    assert f"host during {run_dir.name}: others' CPU {host.others_share:.0%}" in shown, shown
    said = [line for line in flags([done], plan.sweep_dir) if line.startswith(("NOISY", "NOT STEADY"))]
    assert all("host: other processes took" in line for line in said), said


def test_flags_name_what_the_host_showed_and_say_nothing_new_without_it():
    steps = np.array([10.0, 14, 9, 13, 10, 15, 9, 14, 10, 13, 9, 15])  # spread without a trend
    stats = phase_stats(steps, interval=False)
    (guessed,) = noise(steps, stats)
    assert guessed.endswith("steps spread without a trend or outliers (a shared or throttling machine?)")
    quiet = HostState.of([HostBlock(wall_s=1.0, cpus=2, process_cpu_s=1.9, busy_s=1.92, steal_s=0.0, throttled=0)])
    assert noise(steps, stats, seen(quiet)) == [guessed.replace(" (a shared or throttling machine?)", "") + "; host: "
                                                + NOTHING_SEEN]  # fmt: skip
    # what was not read, or not told by so short a window, is not said to be unseen
    no_cgroup = dataclasses.replace(quiet, throttled=None)
    assert seen(no_cgroup) == "no neighbour or steal seen; throttling unknown"
    short = dataclasses.replace(quiet, resolution=0.05)  # tells others' CPU (10%), not steal (2%)
    assert seen(short) == "no neighbour or throttling seen; steal unknown"
    unread = HostState.of([HostBlock(wall_s=1.0, cpus=2, process_cpu_s=1.9)])  # no /proc/stat, no cgroup
    assert seen(unread) == "neighbour, steal and throttling unknown"
    busy = HostBlock(wall_s=1.0, cpus=2, process_cpu_s=1.0, busy_s=1.96, steal_s=0.28, throttled=12,
                     throttled_s=0.3, mhz_start=3000.0, mhz_end=2200.0)  # fmt: skip
    assert seen(HostState.of([busy])) == (
        "other processes took 48% of its CPUs during its window; steal 14% of its window; "
        "cgroup throttled 12 times (0.3 s); CPU clock 3.0 -> 2.2 GHz"
    )
    short = HostState.of([dataclasses.replace(busy, wall_s=0.05, busy_s=1.02, tick_s=0.01)])
    assert seen(short).startswith("its 0.05 s window is too short for /proc/stat to tell others' CPU (±12%); ")
    past = dataclasses.replace(HostState.of([busy]), steal_share=0.0, resolution=0.0219)  # just past steal's 2%
    assert "steal 0% ±2.2%" in figures(past), "the resolution that makes steal unknown is not shown as 2%"
    ticked_past = dataclasses.replace(HostState.of([busy]), others_share=1.33, resolution=0.88)
    assert "others' CPU 100% ±88%" in figures(ticked_past), "no share is more than the whole"
    blocks = HostState.of([HostBlock(wall_s=0.04, cpus=2, process_cpu_s=0.04, busy_s=0.05)] * 10)
    assert figures(blocks).endswith(", over 10 blocks, 0.4 s in all"), figures(blocks)
    ticked = [
        HostBlock(wall_s=0.001, cpus=2, process_cpu_s=0.002, busy_s=busy_s) for busy_s in (0.0, 0.0, 0.01, 0.0, 0.0)
    ]
    assert HostState.of(ticked).others_cpu_s == 0.0  # a tick in one block of five: the process's own time
    unknown = HostState.of([HostBlock(wall_s=1.0, cpus=2, process_cpu_s=1.0), busy])
    assert (unknown.others_share, unknown.steal_share, unknown.throttled) == (None, None, None)
    assert Summary.from_json({**MEASURED, "phases": [], "median_ms": {"step_ms": 1.0}}).host is None


def test_what_the_host_took_of_a_budgeted_launch_s_runs_is_said_in_a_few_words():
    """The budget's line says which machine state slowed the launch: a neighbour, steal, or neither."""

    def run(others: float | None, steal: float | None = 0.0, resolution: float = 0.01):
        host = HostState([], 1.0, 1.0, others_share=others, steal_share=steal, resolution=resolution)
        return SimpleNamespace(summary=SimpleNamespace(host=host))

    assert taken([run(0.36), run(0.39), run(0.34)]) == "others' CPU 36%, the median over its runs"
    assert taken([run(0.01), run(0.02)]) == "no neighbour or steal seen"
    short = run(0.0, 0.0, resolution=0.5)  # a window too short for /proc/stat to tell either
    said = "others' CPU 38%, the median over the 2 of its 3 runs whose windows told"
    assert taken([run(0.36), run(0.39), short]) == said, "a median of two runs is not the sweep's"
    assert taken([run(0.01), short]) == "no neighbour or steal seen in the 1 of its 2 runs whose windows told"
    steal = "steal 5%, the median over the 1 of its 2 runs whose windows told"
    mixed = [run(0.4, 0.05), run(0.4, 0.0, resolution=0.05)]  # the second resolves others' CPU, not steal
    assert taken(mixed) == f"others' CPU 40%, the median over its runs; {steal}"
    quiet = [run(0.01, None), run(0.0, 0.0, resolution=0.05)]  # no steal read; a window too short for steal
    too_short = "unknown (no window of theirs was long enough for /proc/stat to tell)"
    assert taken(quiet) == f"no neighbour seen in its runs; steal {too_short}", "steal not told is not steal unseen"
    assert taken([run(0.01), run(0.0, 0.0, resolution=0.05)]) == (
        "no neighbour seen in its runs; no steal seen in the 1 of its 2 runs whose windows told"
    )
    assert taken([run(None, None)]) == "", "no window told: nothing said"
    came_and_went = [run(0.01), run(0.51), run(0.0), run(0.2), run(0.02)]  # its median run had none
    said = "others' CPU above 10% in 2 of its 5 runs (up to 51%)"
    assert taken(came_and_went) == said, "a neighbour that came and went is not 'no neighbour'"
    told = "others' CPU above 10% in 2 of its 5 runs whose windows told, of 6 (up to 51%)"
    assert taken([*came_and_went, short]) == told, "a window too short to tell is counted apart"


def test_an_order_effect_says_what_the_host_showed_in_each_half_of_the_sweep():
    """A neighbour through the earlier half of a sweep, gone for the later: its runs were slower, and the flag says
    so. Where the halves did not differ, it says what the whole sweep showed; without a host, nothing."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, rho=0.0, warmup=0.0, bimodal=0.0, steps=20)
    runs = synthetic.sweep(synthetic.grid(), 6, steady, np.random.default_rng(8))
    # each run 1% faster than the one before it: the earlier ones shared their CPUs
    faster = [
        dataclasses.replace(run, measured={c: v * 0.99**i for c, v in run.measured.items()})
        for i, run in enumerate(runs)
    ]

    def hosted(others: list[float] | None) -> list:
        return [
            dataclasses.replace(
                run,
                summary=dataclasses.replace(
                    synthetic.summary_of(run.measured),
                    host=None
                    if others is None
                    else HostState([], 1.0, 1.0, others_share=share, steal_share=0.0, resolution=0.01),
                ),
            )
            for run, share in zip(faster, others or [0.0] * len(faster), strict=True)
        ]

    def order_flag(found) -> str:
        (flag,) = [f for f in flags(found, "sweep") if f.startswith("ORDER EFFECT")]
        return flag

    half = len(faster) // 2
    neighbour = order_flag(hosted([0.4] * half + [0.0] * (len(faster) - half)))
    assert "later half -" in neighbour
    assert neighbour.endswith("; host: others' CPU earlier half 40%, later half 0% (medians over their runs)")
    assert order_flag(hosted([0.0] * len(faster))).endswith("; host: no neighbour or steal seen")
    assert "host:" not in order_flag(hosted(None))
    # the later half's windows too short for /proc/stat: the neighbour of the earlier half is named beside an unknown
    mixed = hosted([0.4] * half + [0.0] * (len(faster) - half))
    short = [dataclasses.replace(run.summary.host, resolution=0.5) for run in mixed[half:]]
    mixed[half:] = [
        dataclasses.replace(r, summary=dataclasses.replace(r.summary, host=h))
        for r, h in zip(mixed[half:], short, strict=True)
    ]
    unknown = "unknown (no window of theirs was long enough for /proc/stat to tell)"
    assert order_flag(mixed).endswith(
        f"; host: others' CPU earlier half 40%, later half {unknown} (medians over their runs)"
    )


def test_more_noisy_runs_than_three_are_said_in_one_line_with_what_the_host_showed():
    """Each noisy run's own line is in `runs`; the table names how many, their spreads, and the host over them."""
    noisy = synthetic.Noise(run_sd=0.01, step_sd=0.4, rho=0.0, warmup=0.0, bimodal=0.0, steps=20)
    runs = synthetic.sweep(synthetic.grid(), 2, noisy, np.random.default_rng(3))  # 6 runs, every one noisy

    steady = synthetic.sweep(synthetic.grid(), 3, synthetic.Noise(step_sd=0.001), np.random.default_rng(4))[-1:]

    def hosted(host: HostState | None, count: int) -> list:
        """`count` noisy runs and a steady one, each with `host`."""
        return [
            dataclasses.replace(run, summary=dataclasses.replace(synthetic.summary_of(run.measured), host=host))
            for run in [*runs[:count], *steady]
        ]

    def noisy_lines(found) -> list[str]:
        return [f for f in flags(found, "runs/s") if f.startswith("NOISY")]

    beside = HostState([], 1.0, 1.0, others_share=0.4, resolution=0.01)
    (line,) = noisy_lines(hosted(beside, 6))
    shape = r"NOISY 6 of 7 runs: robust CV ([\d.]+)%-([\d.]+)% > 10%; host: (.*); each run's reasons: `(.*)`"
    said = re.fullmatch(shape, line)
    assert said and 10 < float(said[1]) <= float(said[2]), line
    assert said.group(3, 4) == ("others' CPU 40%, the median over its runs", "perfsweep runs runs/s")
    short = HostState([], 0.03, 0.03, others_share=0.0, resolution=0.5)
    (line,) = noisy_lines(hosted(short, 6))
    assert "; host: their windows (0.03-0.03 s) are too short for /proc/stat to tell others' CPU; " in line
    (line,) = noisy_lines(hosted(None, 6))
    assert "host:" not in line
    unread = HostState([], 1.0, 1.0)  # no /proc/stat: neither others' CPU nor the resolution is known
    (line,) = noisy_lines(hosted(unread, 6))
    assert "host:" not in line, "nothing known of the host, nothing said"
    assert len(noisy_lines(hosted(beside, 4))) == 1, "four noisy runs: one line"
    assert len(noisy_lines(hosted(beside, 3))) == 3, "three noisy runs: a line each, with its reasons"
    throttled = dataclasses.replace(beside, throttled=12, throttled_s=0.3, mhz_start=3000.0, mhz_end=2400.0)
    (line,) = noisy_lines(hosted(throttled, 6))
    said = (
        "others' CPU 40%, the median over its runs; 6 of 6 runs: cgroup throttled; 6 of 6 runs: CPU clock moved over 5%"
    )
    assert f"; host: {said}; each run's reasons: " in line, line
    held = dataclasses.replace(beside, gpu_reasons=["power cap"])  # as NVML gives it on a GPU, none here
    (line,) = noisy_lines(hosted(held, 6))
    assert "; 6 of 6 runs: GPU clock held or moved, or another process on the GPU; " in line, line


def test_a_run_s_end_line_in_the_launch_says_what_took_its_cpus(tmp_path):
    """A launch beside a neighbour said nothing of it until its table: each done run's line now says it."""
    from perfsweep import records
    from perfsweep.launcher.submit import _detail
    from tests.helpers import write_run

    write_run(tmp_path, "beside", "tensor", "contiguous", 100.0)
    write_run(tmp_path, "alone", "tensor", "contiguous", 100.0)
    busy = HostState.of([HostBlock(1.0, 2, 1.0, busy_s=1.96, others_cpu_s=0.96, steal_s=0.28, tick_s=0.01)])
    summary = records.read_json(tmp_path / "beside" / records.SUMMARY)
    records.write_json(tmp_path / "beside" / records.SUMMARY, summary | {"host": dataclasses.asdict(busy)})
    said = _detail(tmp_path / "beside", records.read_status(tmp_path / "beside"))
    assert said.endswith("; host: other processes took 48% of its CPUs during its window; steal 14% of its window"), (
        said
    )
    assert "host" not in _detail(tmp_path / "alone", records.read_status(tmp_path / "alone")), "nothing read: no word"


def test_a_resolution_is_said_in_plain_percent_however_wide():
    """A window of a few milliseconds resolves /proc/stat's ticks to more than 100%: said so, not as ±1e+02%."""
    assert (within(0.022), within(0.78), within(1.04), within(3.2)) == ("±2.2%", "±78%", "±104%", "±320%")


def test_a_share_past_its_window_s_resolution_is_said_with_it_and_never_past_100_percent():
    """A 0.02 s window's ticks read 108% with ±78%: the run's end line says both, as `runs` does."""
    wide = HostState([], 0.02, 0.02, others_share=1.08, steal_share=0.0, resolution=0.78)
    assert wide.competed() == ["other processes took 100% (±78%) of its CPUs during its window"]
    narrow = HostState([], 2.0, 2.0, others_share=0.4, steal_share=0.0, resolution=0.01)
    assert narrow.competed() == ["other processes took 40% of its CPUs during its window"]
