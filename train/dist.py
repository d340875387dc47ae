"""One run across ranks (dist=ddp, dist=fsdp): its ranks started, measured and combined.

On this host the run's own process starts `dist.world_size` ranks with torch's elastic launch API (what torchrun
uses): each a process of its own (forked on a CPU, a new interpreter on a GPU) with RANK, LOCAL_RANK and
WORLD_SIZE set, a rendezvous on a free local port, none restarted, and its output in the run's folder (ranks/).
On Slurm the ranks are the tasks of the run's job (dist.world_size a node, on launcher.nodes nodes), started by
srun; submitit's TorchDistributedEnvironment sets their rendezvous, each task's log is its output, and the first
task, rank 0, is the run's process: it gathers the others' steps and records the run.
Each rank builds the training step with its model distributed (train/parallel.py), warms up, and times its
window as a single process does, reading nothing back inside it. A DDP rank's window is 2 x `steps` steps in
alternating blocks of dist.sync_block steps with gradient sync and without it (no_sync()): the same work and
shapes, so its backward with sync less its backward without is the communication backward did not hide,
measured rather than guessed. An FSDP rank's window syncs every step, and its blocks with and without sync (its
gradient sync switched off) follow in a probe of 2 x `steps` steps after it: FSDP2's steps without sync keep every
unit's unsharded gradients until the next step with it, which the window's peak memory would count, and leave the
optimizer nothing to step. Its backward without sync is the same work less the reduce-scatter and the copy into its
input (and plus the sum of each block's gradients), so the difference is the reduce-scatter backward did not hide;
the parameters' all-gathers run in both and are not in it. dist.exposed_comm=false leaves out the steps without
sync (and with them DDP's straggler index): the window alone.

The run's steps are one rank's synced window steps, which every view reads as any run's: the straggler's, the rank
the others wait for (its own steps, without sync, are the slowest), or for FSDP the rank with the slowest synced
steps; ranks.parquet keeps every rank's steps. Synced steps wait for the slowest rank in their collectives, so
they hide which one it is: the straggler index (the slowest rank's median own step over the ranks' median) is
taken over DDP's steps without sync, where a rank waits for none. FSDP has no such steps (each all-gathers its
parameters), so no straggler index. The exposed communication is the least over the ranks: the straggler waits
for no one, so its difference is the reduction alone.

A rank that fails ends the others (the elastic agent stops them as soon as one exits with an error), and a
collective that waits more than dist.timeout_s fails the rank waiting in it (a rank that died or hangs), so no
run waits on its ranks forever. The agent takes over this process's signal handlers while the ranks run; they
are given back after, and a signal it caught interrupts the run as one caught here would.
"""

import contextlib
import dataclasses
import datetime
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from statistics import median
from typing import Any

import torch

from perfsweep import records
from perfsweep.sweeps.spec import RunSpec
from perfsweep.train.build import configure_backends
from perfsweep.train.parallel import local_rank, measured_steps, probe_steps, rank_threads, synced
from perfsweep.train.window import Window, make_workload, peak_memory_mib, run_window

LOGS = "ranks"  # in the run's folder: each rank's output, as the elastic agent writes it
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # what the agent handles while it runs


class RankFailed(RuntimeError):
    """A rank of the run failed: which, how, and where its output is."""


def backend(cfg, device: torch.device) -> str:
    return str(cfg.dist.backend) if cfg.dist.backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")


def rank_device(cfg) -> torch.device:
    if cfg.device == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank())


def cpus_of_rank(cfg, as_task: bool) -> int:
    """The CPU threads a rank may use: `threads` if the run sets them; else, for a rank that is a Slurm task, the
    CPUs given to it (or its node's shared among the node's ranks); else this process's CPUs shared among the
    ranks it starts. Never more than the CPUs this process may run on."""
    mine = len(os.sched_getaffinity(0))
    if cfg.threads is not None or not as_task:
        return rank_threads(cfg, mine)
    given, node = os.environ.get("SLURM_CPUS_PER_TASK", ""), os.environ.get("SLURM_CPUS_ON_NODE", "")
    cpus = int(given) if given.isdigit() else rank_threads(cfg, int(node)) if node.isdigit() else mine
    return max(1, min(cpus, mine))


def rank_main(spec: RunSpec, gather: bool = False) -> Any:
    """One rank: its windows measured, returned to the run's process (nothing is written by a rank). With
    `gather` (the ranks are a job's tasks) every rank's result goes to rank 0, which returns them all, by rank;
    the others return None."""
    cfg = spec.config
    with process_group(cfg) as device:
        result = measure_rank(cfg, device, as_task=gather)
        if not gather:
            return result
        rank, every = torch.distributed.get_rank(), [None] * torch.distributed.get_world_size()
        torch.distributed.gather_object(result, every if rank == 0 else None, dst=0)
        return every if rank == 0 else None


@contextlib.contextmanager
def process_group(cfg):
    """This process as a rank of the run (its rendezvous in the environment: RANK, WORLD_SIZE, MASTER_ADDR...),
    on its device, which it yields; its collectives fail after dist.timeout_s."""
    device = rank_device(cfg)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=cfg.dist.timeout_s)
    torch.distributed.init_process_group(backend(cfg, device), timeout=timeout)
    try:
        yield device
    finally:
        torch.distributed.destroy_process_group()


def measure_rank(cfg, device: torch.device, as_task: bool) -> dict[str, Any]:
    """This rank's warm-up, measured window and (FSDP) probe, each step marked with or without gradient sync."""
    configure_backends(cfg)
    torch.set_num_threads(cpus_of_rank(cfg, as_task))
    first_step = time.time()
    work = make_workload(cfg, device)
    warmup = run_window(work, 0, cfg.warmup_steps, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    window = run_window(work, cfg.warmup_steps, measured_steps(cfg), device)
    memory = peak_memory_mib(device)
    probe = None
    if probe_steps(cfg):  # after the window's peak memory is read: its steps without sync hold more
        probe = run_window(work, cfg.warmup_steps + measured_steps(cfg), probe_steps(cfg), device)
    for row in [*warmup.rows, *window.rows, *(probe.rows if probe else [])]:
        row["grad_sync"] = synced(int(row["step"]), cfg)
    return {
        "rank": torch.distributed.get_rank(),
        "warmup": warmup,
        "window": window,
        "probe": probe,
        "first_step": first_step,
        "memory": memory,
        "grad_bytes": sum(p.numel() * p.element_size() for p in work.trainer.model.parameters() if p.requires_grad),
        "workload": work.summary(1.0),  # its fields at one step a second: samples/s scaled by the run
    }


def task_rank(spec: RunSpec) -> None:
    """A rank that is a task of the run's Slurm job, other than the first: measured, its result sent to rank 0."""
    rank_main(spec, gather=True)


def task_ranks(spec: RunSpec, launch: dict[str, Any]) -> list[dict[str, Any]]:
    """Rank 0 of a run whose ranks are its Slurm job's tasks (each started by srun, the rendezvous set by
    submitit's TorchDistributedEnvironment): every rank's result. RankFailed if this rank's collectives failed:
    a peer that died or stopped answering (its task's log says why)."""
    try:
        return rank_main(spec, gather=True)
    except Exception as error:  # a peer's connection closed, a collective past dist.timeout_s
        said = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        job, own = launch.get("job_id"), launch.get("log")
        folder = Path(own).parent if own else Path("the job's folder")
        raise RankFailed(
            f"rank 0 of {launch['tasks']} failed ({type(error).__name__}): {said}; its output: {own}; each other "
            f"rank's is its task's log, {folder}/{job}_<rank>_log.err"
        ) from error


def start_method(cfg) -> str:
    """fork on a CPU: the ranks start with this process's imports (torch's among them) in a fraction of a second;
    spawn on a GPU, whose CUDA state a forked process must not inherit."""
    return "fork" if rank_device(cfg).type == "cpu" and "fork" in multiprocessing.get_all_start_methods() else "spawn"


def launch_config(cfg, logs: Path):
    """How torch's elastic launcher starts the run's ranks on this host: dist.world_size of them, a rendezvous on
    a free local port (as torchrun --standalone takes), none restarted, each one's output in `logs`."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig

    return LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=cfg.dist.world_size,
        run_id=f"perfsweep-{os.getpid()}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=0.1,
        start_method=start_method(cfg),
        logs_specs=DefaultLogsSpecs(log_dir=str(logs), redirects=Std.ALL),
    )


def run_ranks(spec: RunSpec, run_dir: Path) -> list[dict[str, Any]]:
    """Start the run's ranks and wait for them: each rank's result, by rank. RankFailed if one failed."""
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    handlers = {number: signal.getsignal(number) for number in HANDLED}
    try:
        results = elastic_launch(launch_config(spec.config, run_dir / LOGS), rank_main)(spec)
    except ChildFailedError as error:
        # the first failure the agent saw: a rank killed by a signal, or a peer of it failing in a collective
        rank, failure = error.get_first_failure()
        raise RankFailed(_failure(rank, failure, spec, run_dir)) from None
    except SignalException as caught:  # the agent's handler: an interrupt, as this process's own would be
        raise KeyboardInterrupt(f"signal {caught.sigval.name} while its ranks ran") from None
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    return [results[rank] for rank in sorted(results)]


def _failure(rank: int, failure, spec: RunSpec, run_dir: Path) -> str:
    log = next((run_dir / LOGS).glob(f"*/attempt_*/{failure.local_rank}/stderr.log"), None)
    said = failure.message.get("message", "") if isinstance(failure.message, dict) else str(failure.message)
    how = f"exit code {failure.exitcode}"
    return f"rank {rank} of {spec.config.dist.world_size} failed ({how}): {said.strip()}; its output: {log}"


@dataclasses.dataclass
class Ranks:
    """The ranks' results, combined: the run is one rank's synced steps (the straggler's, where there is one)."""

    results: list[dict[str, Any]]
    wrapper: str  # dist.name: ddp or fsdp

    def synced(self, result: dict[str, Any], on: bool = True) -> list[dict[str, Any]]:
        return [row for row in result["window"].rows if row["grad_sync"] == on]

    def medians(self, on: bool = True) -> list[float] | None:
        """Each rank's median step (ms): with gradient sync, or without it (None where no step ran without)."""
        if not all(self.synced(result, on) for result in self.results):
            return None
        return [median(row["step_ms"] for row in self.synced(result, on)) for result in self.results]

    @property
    def run_rank(self) -> dict[str, Any]:
        """The rank whose steps are the run's: the straggler (slowest own steps), else the slowest synced."""
        medians = self.medians(on=False) or self.medians()
        return self.results[medians.index(max(medians))]

    def window(self) -> Window:
        """The run's rank's synced steps as the run's window; its seconds, those steps' own (device time on CUDA)."""
        rows = self.synced(self.run_rank)
        window = self.run_rank["window"]
        return Window(rows, sum(row["step_ms"] for row in rows) / 1e3, window.timer, window.ended_at)

    def extra(self) -> dict[str, Any]:
        """The summary's fields of a run across ranks: the straggler where ranks have steps that wait for none
        (DDP's without sync), the exposed communication where they have steps without sync to compare with."""
        medians, own = self.medians(), self.medians(on=False)
        fields: dict[str, Any] = {"world_size": len(self.results), "rank_step_ms": medians}
        if own is not None:
            fields |= {
                "rank_own_step_ms": own,
                "straggler_rank": self.run_rank["rank"],
                "straggler_index": max(own) / median(own),
            }
        compared = [self.compared(result) for result in self.results]
        if all(rows[False] for rows in compared):
            exposed = min(max(0.0, _backward(rows[True]) - _backward(rows[False])) for rows in compared)
            fields |= {"exposed_comm_ms": exposed, "exposed_comm_share": exposed / max(medians)}
        return fields | self.bus_bandwidth(compared)

    def compared(self, result: dict[str, Any]) -> dict[bool, list[dict[str, Any]]]:
        """A rank's steps that measure its exposed communication, with gradient sync and without: DDP's window,
        whose blocks alternate, or FSDP's probe after its window (without dist.exposed_comm, its window's)."""
        rows = (result["probe"] or result["window"]).rows
        return {on: [row for row in rows if row["grad_sync"] == on] for on in (True, False)}

    def bus_bandwidth(self, compared: list[dict[bool, list[dict[str, Any]]]]) -> dict[str, Any]:
        """The gradients' reduction: its bytes a rank a step, and the bus bandwidth it took at least, as nccl-tests
        counts it: DDP's all-reduce moves bytes x 2(n-1)/n, FSDP's reduce-scatter bytes x (n-1)/n. It runs within
        backward with sync (it starts once backward has made a bucket's or unit's gradients, and backward ends when
        every one is reduced), on every rank: its time is at most the least of the ranks' median backward with
        sync (in the steps that measure the exposed communication), so that is a lower bound (loose where
        backward hides much of it)."""
        ranks, grad_bytes = len(self.results), self.run_rank["grad_bytes"]
        if ranks < 2:
            return {}
        backward_s = min(_backward(rows[True]) for rows in compared) / 1e3
        moved = (2 if self.wrapper == "ddp" else 1) * (ranks - 1) / ranks
        return {"comm_bytes_per_step": grad_bytes, "bus_gbps_min": grad_bytes * moved / backward_s / 1e9}

    def workload_summary(self, steps_per_s: float) -> dict[str, Any]:
        """The training step's fields, samples/s of all ranks together."""
        fields = dict(self.run_rank["workload"])
        fields["samples_per_s"] = fields["samples_per_s"] * steps_per_s * len(self.results)
        return fields

    def series(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What W&B gets of the run, step by step: its own rows, with every rank's phase times, gradient sync and
        probe flag beside them as rank<N>/<column> (the steps without sync among them, and FSDP's probe)."""
        by_step = {int(row["step"]): dict(row) for row in rows}
        for result in self.results:
            rank = f"rank{result['rank']}/"
            for _, probe, row in _steps(result):
                entry = by_step.setdefault(int(row["step"]), {"step": row["step"]})
                entry |= {rank + key: value for key, value in row.items() if key.endswith("_ms") or key == "grad_sync"}
                entry[rank + "probe"] = probe
        return [by_step[step] for step in sorted(by_step)]

    def write(self, run_dir: Path) -> None:
        """ranks.parquet: every rank's steps, each marked as the warm-up's, the window's or the probe's."""
        every = [
            {**row, "rank": result["rank"], "warmup": warmup, "probe": probe}
            for result in self.results
            for warmup, probe, row in _steps(result)
        ]
        records.write_steps(run_dir / records.RANKS, every)


def _steps(result: dict[str, Any]) -> Iterator[tuple[bool, bool, dict[str, Any]]]:
    """A rank's steps in order, each with whether it is a warm-up step and whether a step of FSDP's probe."""
    for warmup, probe, window in ((True, False, "warmup"), (False, False, "window"), (False, True, "probe")):
        for row in result[window].rows if result[window] else []:
            yield warmup, probe, row


def _backward(rows: list[dict[str, Any]]) -> float:
    return median(row["backward_ms"] for row in rows)
