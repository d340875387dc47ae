"""One run across ranks (dist=ddp, dist=fsdp) on the CPU with gloo: two real ranks started by torch's elastic
launcher from the run's process, each rank's steps recorded, the communication backward did not hide and the
straggler found, and a rank that hangs or dies failing the run in bounded time."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import pytest
from pytest import approx

from perfsweep.analysis.render import figure
from perfsweep.analysis.views.plots import write_plots
from perfsweep.analysis.views.report import wandb_report_content
from perfsweep.records import RANKS, STEPS, load_sweep, read_steps
from tests import golden
from tests.helpers import ROOT, launch_here, wandb_records, write_run

TWO_RANKS = [
    "model=tiny_cnn",
    "memory_format=contiguous",
    "input_type=tensor",
    "device=cpu",
    "dist.world_size=2",
    "steps=10",
    "warmup_steps=2",
    "repeats=1",
    "tracker.mode=disabled",
]


def assert_exposed_comm_from_the_ranks_steps(run) -> None:
    """The run's exposed communication and bus bandwidth are what its recorded steps give. In the steps that compare
    them (FSDP's probe, DDP's window), each rank's median backward with gradient sync minus without; the least
    over the ranks is exposed. The least median backward with sync bounds the reduction's time: its bus bandwidth
    at least is the bytes it moved over that. Whether exposed is above zero is a timing figure (the dist bench's),
    not this test's: under load, a few steps' medians can come out either way."""
    rows = [row for row in read_steps(run.path / RANKS).to_pylist() if not row["warmup"]]
    compared = [row for row in rows if row["probe"]] or rows
    ranks = range(run.summary.ranks.world_size)
    backward = {
        (rank, on): median(r["backward_ms"] for r in compared if r["rank"] == rank and r["grad_sync"] == on)
        for rank in ranks
        for on in (True, False)
    }
    exposed = min(max(0.0, backward[rank, True] - backward[rank, False]) for rank in ranks)
    assert run.summary.ranks.exposed_comm_ms == approx(exposed)
    assert run.summary.ranks.exposed_comm_share == approx(exposed / max(run.summary.ranks.step_ms))
    assert run.summary.ranks.exposed_comm_share < 1
    moved = (2 if run.axes["dist"] == "ddp" else 1) * (len(ranks) - 1) / len(ranks)
    least_s = min(backward[rank, True] for rank in ranks) / 1e3
    assert run.summary.ranks.bus_gbps_min == approx(run.summary.ranks.comm_bytes_per_step * moved / least_s / 1e9)


@pytest.mark.slow
def test_a_ddp_run_records_every_rank_the_hidden_communication_and_the_straggler(tmp_path):
    """Rank 1 sleeps 50 ms a step: the others wait for it in their collectives, and its own steps show it."""
    args = ["dist=ddp", "dist.delay_rank=1", "dist.delay_ms=50", "tracker.mode=offline"]
    result = launch_here(*TWO_RANKS, *args, f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = load_sweep(tmp_path / "default")
    assert run.axes["dist"] == "ddp" and run.axes["world_size"] == "2"
    summary, across = run.summary, run.summary.ranks
    assert across.world_size == 2 and len(across.step_ms) == 2 and summary.steps == 10
    assert_exposed_comm_from_the_ranks_steps(run)
    assert across.straggler_rank == 1 and across.straggler_index > 1
    assert across.comm_bytes_per_step == 4 * summary.params, "every fp32 gradient reduced each step"
    assert summary.host and summary.host.blocks, "the host over the straggler's window"
    fast, slow = across.own_step_ms
    # (by how much is a timing figure: under CI's load rank 0's own steps took 120 ms, and 50 ms more showed as 25)
    assert slow > fast, "rank 1's own steps carry its 50 ms"
    ranks = read_steps(run.path / RANKS).to_pylist()
    measured = [row for row in ranks if not row["warmup"]]
    assert {row["rank"] for row in measured} == {0, 1}
    for rank in (0, 1):
        mine = [row["grad_sync"] for row in measured if row["rank"] == rank]
        assert len(mine) == 20 and 0 < sum(mine) < 20, "blocks with gradient sync and without it, on each rank"
    logged = [r["history"]["item"] for r in wandb_records(run.path) if r["type"] == "history"]
    assert len(logged) == 2 + 20, "one W&B run, a row a step: the warm-up and both kinds of measured steps"
    warm = [row for row in logged if row.get("warmup")]
    assert len(warm) == 2 and all("warmup/rank0/step_ms" in row and "rank0/step_ms" not in row for row in warm)
    without_sync = [row for row in logged if "step_ms" not in row and not row.get("warmup")]
    assert len(without_sync) == 10 and all(not row["rank0/grad_sync"] for row in without_sync)
    # (the first step of a block without sync still waits for the peers: its forward broadcasts buffers)
    fast, slow = (median(row[f"rank{rank}/step_ms"] for row in without_sync) for rank in (0, 1))
    assert slow > fast, "rank 1's W&B series carries its 50 ms"
    content = wandb_report_content("default", "default-ab12cd34", "perfsweep", None, list(summary.phases), ranks=2)
    blocks = content["blocks"]
    (grid,) = [b for a, b in zip(blocks, blocks[1:], strict=False) if a.get("text") == "Step time by rank"]
    panels = grid["panels"]
    assert panels and all(set(panel["y"]) <= set(logged[-1]) for panel in panels), "the W&B Report plots what is logged"
    assert (tmp_path / "default" / "plots" / "ranks.png") in write_plots(tmp_path / "default")
    header = next(line for line in result.stdout.splitlines() if line.startswith("| runs | data ms"))
    ranks_view = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in result.stdout.split("the ranks of its runs across ranks")[1].splitlines()[1:7]
    ]
    assert ranks_view[0][:5] == ["configuration", "runs", "rank", "grad sync", "data ms"]
    assert [row[2:4] for row in ranks_view[2:]] == [["0", "yes"], ["0", "no"], ["1", "yes"], ["1", "no"]], "each rank"
    shown = launch_here("runs", str(tmp_path / "default")).stdout
    for rank in ("rank 0", "rank 0 without sync", "rank 1", "rank 1 without sync"):
        assert re.search(rf"\| {run.name} {rank} +\| step ", shown), "the runs view: each rank, with sync and without"
    columns = r"\| threads a rank \| straggler +\| exposed comm ms \| exposed comm \| bus GB/s at least \|"
    assert re.search(columns, header)
    row = next(line for line in result.stdout.splitlines() if line.startswith("| 1 ") and " rank 1 |" in line)
    assert f"{figure(across.straggler_index)} rank 1" in row, "the straggler's index and which rank it is"
    threads = max(1, len(os.sched_getaffinity(0)) // 2)
    assert across.threads == [threads, threads] and run.threads == str(2 * threads), "the ranks' threads, together"


@pytest.mark.slow
def test_fsdp_over_world_sizes_gives_the_scaling_efficiency_against_one_rank(tmp_path):
    channels_last = [o.replace("=contiguous", "=channels_last") for o in TWO_RANKS]  # FSDP2 shards no strided weights
    result = launch_here(*channels_last, "dist=fsdp", "dist.world_size=1,2", "steps=5", f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    runs = load_sweep(tmp_path / "default")
    assert sorted(run.summary.ranks.world_size for run in runs) == [1, 2] and {run.axes["dist"] for run in runs} == {
        "fsdp"
    }
    assert all(r.summary.ranks.straggler_index is None for r in runs), (
        "every FSDP step all-gathers: none waits for none"
    )
    (two,) = [r for r in runs if r.summary.ranks.world_size == 2]
    assert_exposed_comm_from_the_ranks_steps(two)
    assert two.summary.ranks.comm_bytes_per_step == 4 * two.summary.params
    for run in runs:
        rows = [row for row in read_steps(run.path / RANKS).to_pylist() if not row["warmup"]]
        assert len(rows) == run.summary.ranks.world_size * (5 + 10), "a window of 5 steps, then a probe of 10"
        assert all(row["grad_sync"] for row in rows if not row["probe"]), "the window syncs every step"
        probe = [row["grad_sync"] for row in rows if row["probe"] and row["rank"] == 0]
        assert probe == [True] * 5 + [False] * 5, "a block with sync, then one without"
        assert [row["step"] for row in read_steps(run.path / STEPS).to_pylist()] == list(range(2 + 5))
    table = launch_here("table", str(tmp_path / "default"), "--vs", "world_size=1").stdout.splitlines()
    header = next(line for line in table if line.startswith("| world_size |"))
    assert "| vs world_size=1 " in header and "dist.world_size" not in header, "the speed-up over one rank"
    assert any("over fewer ranks, a step's speed-up is the scaling efficiency" in line for line in table), table


@pytest.mark.slow
def test_a_rank_that_hangs_fails_the_run_within_the_collectives_timeout(tmp_path):
    """Rank 1 sleeps a minute in each step; rank 0 waits for it in a collective no more than 2 s."""
    args = ["dist=ddp", "dist.delay_rank=1", "dist.delay_ms=60000", "dist.timeout_s=2", "warmup_steps=0"]
    began = time.monotonic()
    result = launch_here(*TWO_RANKS, *args, f"runs_dir={tmp_path}")
    assert result.returncode == 1 and time.monotonic() - began < 50, "failed, not waited for"
    (run,) = load_sweep(tmp_path / "default")
    assert run.state == "failed" and run.status.error.type == "RankFailed"
    said = run.status.error.message
    assert said.startswith("rank 0 of 2 failed (exit code 1): ") and said.endswith("/0/error.json"), said


def rank_process(rank: int, under: Path) -> int | None:
    """The pid of rank `rank` of a run under `under`, if it is running: the process whose output goes to that
    rank's log (the elastic agent sets RANK inside the process, after its environment is read into /proc)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            output = os.readlink(f"/proc/{pid}/fd/1")
        except OSError:
            continue
        if output.startswith(str(under)) and output.endswith(f"/attempt_0/{rank}/stdout.log"):
            return int(pid)
    return None


@pytest.mark.slow
def test_a_killed_rank_fails_the_run_with_its_error(tmp_path):
    args = ["dist=ddp", "dist.delay_rank=1", "dist.delay_ms=500", "steps=20", "launcher.wait=true"]  # 20 s
    command = [sys.executable, str(ROOT / "launch.py"), *TWO_RANKS, *args, f"runs_dir={tmp_path}"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while (pid := rank_process(1, tmp_path)) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pid, "rank 1 started"
        time.sleep(1.0)  # inside its steps
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        assert process.wait(timeout=60) == 1 and time.monotonic() - killed < 30, "well before dist.timeout_s (120)"
    finally:
        if process.poll() is None:
            process.kill()
    (run,) = load_sweep(tmp_path / "default")
    # the first failure the elastic agent sees is rank 1 killed, or rank 0 whose peer closed its connection: either
    # way rank 1 is named first, the rank without an error of its own
    assert run.state == "failed" and run.status.error.type == "RankFailed"
    said = run.status.error.message
    killed = r"rank 1 of 2 failed \(killed by SIGKILL\): .*; its output: .*/1/stderr.log"
    peer = r"rank 1 of 2 ended first, with no error of its own: .*SIGKILL.*; its output: .*/1/stderr.log\. Then rank 0 "
    assert re.match(killed, said) or re.match(peer + r".*; its error: .*/0/error.json", said), said


def test_a_failure_names_first_a_rank_that_left_no_error_only_where_its_peer_lost_it(tmp_path):
    """Rank 1 was SIGKILLed: rank 0's connection to it closed, and rank 1 left no error.json.
    Rank 1 ran out of memory: rank 0, stopped by the agent, left no error.json either, and is not to blame."""
    import json

    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    from perfsweep.sweeps.plan import build_plan
    from perfsweep.train.ranks.start import RANK_LOGS, failure_text

    (spec,) = build_plan([*TWO_RANKS, "dist=ddp"]).runs
    attempt = tmp_path / RANK_LOGS / "perfsweep-1_x" / "attempt_0"

    def failed(rank: int, message: str) -> ProcessFailure:
        (attempt / str(rank)).mkdir(parents=True)
        error = attempt / str(rank) / "error.json"
        error.write_text(json.dumps({"message": {"message": message, "extraInfo": {"timestamp": "1"}}}))
        return ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=1, error_file=str(error))

    closed = failed(0, "RuntimeError: [gloo/pair.cc:561] Connection closed by peer [127.0.0.1]:46313")
    (attempt / "1").mkdir()
    said = failure_text(0, closed, spec, tmp_path)
    assert said.startswith("rank 1 of 2 ended first, with no error of its own: a signal it cannot catch killed it")
    assert said.endswith(f"Then rank 0 of 2 failed (exit code 1): {closed.message['message']}; its error: "
                         f"{attempt / '0' / 'error.json'}")  # fmt: skip
    shutil.rmtree(attempt)
    (attempt / "0").mkdir(parents=True)
    oom = failed(1, "torch.OutOfMemoryError: CUDA out of memory")
    said = failure_text(1, oom, spec, tmp_path)
    assert said == f"rank 1 of 2 failed (exit code 1): {oom.message['message']}; its error: {oom.error_file}"


def test_what_cannot_run_across_ranks_is_refused_before_anything_runs(tmp_path):
    args = [
        "dist=ddp",
        "dist.backend=nccl",
        "dist.reshard_after_forward=false",
        "steps=3",
        "profile=true",
        "explain=true",
        "launcher=debug",
        "launcher.nodes=2",
    ]
    result = launch_here(*TWO_RANKS, *args, f"runs_dir={tmp_path}")
    assert result.returncode == 2 and not any(tmp_path.iterdir())
    golden.says("a run across ranks that cannot run", result.stderr, {tmp_path: "<runs>"})


def test_more_ranks_on_a_cpu_than_its_cpus_are_refused(tmp_path):
    """Six ranks on two CPUs took turns: their exposed communication was the wait, and the host line blamed others."""
    more = len(os.sched_getaffinity(0)) + 1
    result = launch_here(*TWO_RANKS, "dist=ddp", f"dist.world_size={more}", f"runs_dir={tmp_path}")
    said = f"dist.world_size={more} on a CPU: a rank needs a CPU of its own, and this run may use {more - 1}"
    assert result.returncode == 2 and said in result.stderr and not any(tmp_path.iterdir()), result.stderr


def test_more_threads_on_a_cpu_than_its_cpus_are_refused_and_nccl_there_wherever_it_runs():
    """Two ranks of 2 threads each on 2 CPUs took turns, as more ranks than CPUs do.
    NCCL on device=cpu fails on any node: a Slurm launch, checked away from its node, refuses it too."""
    from perfsweep.sweeps.plan import build_plan
    from perfsweep.train.checks import problems

    def config(*args: str):
        (spec,) = build_plan([*TWO_RANKS, "dist=ddp", *args]).runs
        return spec.config

    cpus = len(os.sched_getaffinity(0))
    if cpus < 2:
        pytest.skip("two ranks need two CPUs here")
    assert not problems(config(f"threads={cpus // 2}"))
    crowded = config(f"threads={cpus}")
    said = f"dist.world_size=2 with threads={cpus} on a CPU: {2 * cpus} threads on the {cpus} CPUs this run may use"
    assert any(said in problem for problem in problems(crowded)), problems(crowded)
    assert not problems(crowded, on_this_host=False), "its node's CPUs are its node's to count"
    assert not problems(crowded, ranks_here=False), "ranks that are Slurm tasks each have CPUs of their own"
    (elsewhere,) = problems(config("dist.backend=nccl"), on_this_host=False)
    assert elsewhere.startswith("dist.backend=nccl needs ranks on GPUs, and this run's are on a CPU (device=cpu)")
    on_gpus = config("dist.backend=nccl", "device=auto")
    assert not problems(on_gpus, on_this_host=False), "device=auto takes a node's GPUs there"


def test_a_run_across_ranks_has_its_ranks_threads_which_its_world_size_chose_not_its_machine(tmp_path):
    """Two ranks of 1 thread on one node ran with 2 threads there, as one process of 2 threads does; its process, a
    Slurm task of 1 CPU, had 1. Two Slurm tasks of 2 CPUs each had 4 on their node. Either way the world size chose
    the threads: a sweep over world sizes on one kind of machine is not MIXED MACHINES."""
    import dataclasses

    from perfsweep.analysis import machines
    from perfsweep.train.ranks.combine import Ranks

    def placed(rank: int, node: str, threads: int | None):
        return dataclasses.replace(rank_result(rank, 30.0, 10.0), node=node, threads=threads)

    two = Ranks((placed(0, "n1", 1), placed(1, "n1", 1)), "ddp").summary()
    assert (two.threads, two.node_threads) == ([1, 1], 2)
    nodes = Ranks((placed(0, "n1", 2), placed(1, "n2", 2), placed(2, "n2", 2)), "ddp").summary()
    assert (nodes.threads, nodes.node_threads) == ([2, 2, 2], 4), "the most on one node"
    unknown = Ranks((placed(0, "n1", 1), placed(1, "n1", None)), "ddp").summary()
    assert unknown.threads is None and unknown.node_threads is None
    tasks = Ranks((placed(0, "n1", 2), placed(1, "n1", 2)), "ddp").summary()
    for name, rate in (("one", 100.0), ("ranks", 90.0), ("tasks", 80.0), ("other", 70.0)):
        write_run(tmp_path, name, "tensor", "contiguous", rate)
    runs = {run.name: run for run in load_sweep(tmp_path)}
    env = {"cpu": "AMD EPYC", "packages": {"torch": "2.14.1"}}
    one = dataclasses.replace(runs["one"], env=env | {"torch_threads": 2})
    ranks, tasks = (
        dataclasses.replace(runs[name], env=env | {"torch_threads": 1}, summary=dataclasses.replace(
            runs[name].summary, ranks=summary))
        for name, summary in (("ranks", two), ("tasks", tasks))
    )  # fmt: skip
    assert (ranks.threads, tasks.threads) == ("2", "4") and "threads" in ranks.asked and "threads" not in one.asked
    assert machines.elsewhere([one, ranks, tasks]) == []
    other = dataclasses.replace(runs["other"], env=env | {"cpu": "Intel Xeon", "torch_threads": 2})
    (mixed,) = machines.elsewhere([one, ranks, tasks, other])
    assert mixed.startswith("MIXED MACHINES other: CPU Intel Xeon"), "the CPU still tells machines apart"


def test_a_function_benchmark_across_ranks_is_refused(tmp_path):
    result = launch_here("workload=sampler", "dist=ddp", "repeats=1", f"runs_dir={tmp_path}")
    assert result.returncode == 2 and "dist=ddp with workload=sampler: it runs in one process" in result.stderr


def test_a_rank_s_threads_are_its_task_s_cpus_only_where_the_ranks_are_slurm_tasks(monkeypatch):
    from perfsweep.conf.schema import DistConf, RunConf
    from perfsweep.train.ranks.measure import cpus_of_rank

    cfg = RunConf(dist=DistConf(name="ddp", world_size=2))
    mine = len(os.sched_getaffinity(0))
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "64")  # a launch inside a Slurm allocation inherits these
    assert cpus_of_rank(cfg, as_task=False) == max(1, mine // 2), "ranks started here share this process's CPUs"
    assert cpus_of_rank(cfg, as_task=True) == mine, "a task's CPUs, never more than it may run on"
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert cpus_of_rank(cfg, as_task=True) == 1


def test_without_exposed_comm_every_step_syncs_and_the_window_is_all():
    from perfsweep.sweeps.plan import build_plan
    from perfsweep.train.parallel import measured_steps, probe_steps, problems, synced

    for wrapper in ("ddp", "fsdp"):
        (spec,) = build_plan([*TWO_RANKS, f"dist={wrapper}", "steps=3", "dist.exposed_comm=false"]).runs
        cfg = spec.config
        assert problems(cfg) == [], "steps need not be a multiple of dist.sync_block"
        assert (measured_steps(cfg), probe_steps(cfg)) == (3, 0)
        assert all(synced(index, cfg) for index in range(cfg.warmup_steps + 3))
        (spec,) = build_plan([*TWO_RANKS, f"dist={wrapper}"]).runs
        assert [synced(index, spec.config) for index in range(2)] == [wrapper == "fsdp", True], "the warm-up"


def rank_result(rank: int, synced_ms: float, own_ms: float | None, probe: bool = False, grad_bytes: int = 1000):
    """A rank's result made up: 4 window steps, in blocks of 2 with gradient sync and (DDP) without.

    A step's backward is half of it. With `probe` (FSDP) the window syncs every step, and the blocks follow it.
    """
    from perfsweep.train.ranks.measure import RankResult
    from perfsweep.train.window import Window

    def row(step: int, sync: bool, ms: float) -> dict:
        return {"step": step, "step_ms": ms, "backward_ms": ms / 2, "grad_sync": sync}

    blocks = [row(2 + i, i < 2, synced_ms if i < 2 else own_ms) for i in range(4)] if own_ms is not None else []
    steps = [row(2 + i, True, synced_ms) for i in range(4)] if probe or own_ms is None else blocks
    probed = Window([{**r, "step": r["step"] + 4} for r in blocks], 0.1, "perf_counter", 2.0) if probe else None
    warmup = Window([row(i, True, 99.0) for i in range(2)], 0.2, "perf_counter", 1.0)
    window = Window(steps, sum(r["step_ms"] for r in steps) / 1e3, "perf_counter", 2.0)
    workload = {"samples_per_s": 8.0, "output_type": "Tensor"}
    return RankResult(rank, warmup, window, probed, 100.0 + rank, (10.0, "process_max_rss"), grad_bytes, workload)


def test_ddp_ranks_combine_into_the_straggler_s_steps_and_the_exposed_communication():
    from perfsweep.train.ranks.combine import Ranks

    ranks = Ranks((rank_result(0, 30.0, 10.0), rank_result(1, 30.0, 20.0), rank_result(2, 31.0, 12.0)), "ddp")
    assert ranks.run_rank.rank == 1, "the straggler: the slowest steps without sync, not the slowest synced"
    summary = ranks.summary()
    assert (summary.world_size, summary.step_ms, summary.own_step_ms) == (3, [30.0, 30.0, 31.0], [10.0, 20.0, 12.0])
    assert summary.straggler_rank == 1 and summary.straggler_index == approx(20.0 / 12.0)
    # each rank's backward with sync less without (halves of its steps); the least over the ranks
    assert summary.exposed_comm_ms == approx(min(15.0 - 5.0, 15.0 - 10.0, 15.5 - 6.0))
    assert summary.exposed_comm_share == approx(5.0 / 31.0)
    moved = 2 * 2 / 3  # an all-reduce over 3 ranks
    assert summary.comm_bytes_per_step == 1000 and summary.bus_gbps_min == approx(1000 * moved / 0.015 / 1e9)
    window = ranks.window()
    assert [row["step"] for row in window.rows] == [2, 3] and window.seconds == approx(0.060)
    assert ranks.workload_summary(2.0)["samples_per_s"] == 8.0 * 2.0 * 3, "samples/s: every rank's"
    rows = ranks.every_step()
    assert len(rows) == 3 * (2 + 4) and {row["rank"] for row in rows} == {0, 1, 2}
    assert sum(row["warmup"] for row in rows) == 6 and not any(row["probe"] for row in rows)
    series = ranks.series([{"step": 2, "step_ms": 30.0}])
    assert [row["step"] for row in series] == [0, 1, 2, 3, 4, 5]
    assert series[2]["step_ms"] == 30.0 and series[4]["rank1/step_ms"] == 20.0 and not series[4]["rank1/grad_sync"]


def test_fsdp_ranks_have_no_straggler_and_take_the_exposed_communication_from_the_probe():
    from perfsweep.train.ranks.combine import Ranks

    ranks = Ranks((rank_result(0, 30.0, 10.0, probe=True), rank_result(1, 34.0, 14.0, probe=True)), "fsdp")
    assert ranks.run_rank.rank == 1, "no steps without sync in the window: the slowest synced rank"
    summary = ranks.summary()
    assert summary.own_step_ms is None and summary.straggler_rank is None and summary.straggler_index is None
    assert summary.exposed_comm_ms == approx(min(15.0 - 5.0, 17.0 - 7.0))
    assert summary.bus_gbps_min == approx(1000 * (1 / 2) / 0.015 / 1e9), "a reduce-scatter over 2 ranks"
    assert [row["probe"] for row in ranks.every_step() if row["rank"] == 0] == [False] * 6 + [True] * 4


def test_ranks_without_steps_without_sync_give_no_exposed_communication_and_one_rank_no_bandwidth():
    from perfsweep.train.ranks.combine import Ranks

    summary = Ranks((rank_result(0, 30.0, None), rank_result(1, 32.0, None)), "ddp").summary()
    assert summary.exposed_comm_ms is None and summary.straggler_index is None and summary.bus_gbps_min is not None
    one = Ranks((rank_result(0, 30.0, 10.0),), "ddp").summary()
    assert one.world_size == 1 and one.comm_bytes_per_step is None and one.bus_gbps_min is None
    assert one.straggler_index is None and one.straggler_rank is None, "one rank waits for no one"


def test_the_run_s_other_ranks_on_its_cpus_are_its_own_work_not_other_processes():
    """Two ranks forked on 2 CPUs: rank 0's block saw 1.9 CPU-s busy, 0.6 its own and 0.8 rank 1's.
    Other processes took 0.5 of it, not 1.3. A rank on another host, or on other CPUs, is none of it."""
    import dataclasses

    from perfsweep.records.host import HostBlock, HostState
    from perfsweep.train.ranks.combine import Ranks

    def placed(rank: int, own_ms: float, cpu_s: float, node: str = "n1", cpus=frozenset({0, 1}), blocks: int = 1):
        result = rank_result(rank, 30.0, own_ms)
        host = [HostBlock(1.0, 2, cpu_s, busy_s=1.9, others_cpu_s=1.9 - cpu_s) for _ in range(blocks)]
        return dataclasses.replace(
            result, window=dataclasses.replace(result.window, host=host), node=node, cpus=frozenset(cpus)
        )

    def others(*results) -> list[float | None]:
        return [block.others_cpu_s for block in Ranks(results, "ddp").window().host]

    assert others(placed(0, 20.0, 0.6), placed(1, 10.0, 0.8)) == [approx(0.5)], "the straggler, rank 0, less rank 1"
    assert HostState.of(
        Ranks((placed(0, 20.0, 0.6), placed(1, 10.0, 0.8)), "ddp").window().host
    ).others_share == approx(0.25)
    assert others(placed(0, 20.0, 0.6), placed(1, 10.0, 0.8, node="n2")) == [approx(1.3)], "another host's CPUs"
    assert others(placed(0, 20.0, 0.6, cpus={0}), placed(1, 10.0, 0.8, cpus={1})) == [approx(1.3)], "its own CPU"
    assert others(placed(0, 20.0, 0.6), placed(1, 10.0, 0.8, cpus={1, 2})) == [approx(0.9)], "half on the run's CPUs"
    assert others(placed(0, 20.0, 0.6), placed(1, 10.0, 0.8, blocks=2)) == [None], "blocks that do not line up"
