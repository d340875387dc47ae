"""One rank's measurement: its warm-up, its measured window and FSDP's probe.

A rank builds the training step with its model distributed (train/parallel.py).
It warms up and times its window as one process does.
It reads nothing back inside the window, and writes nothing.
Each step is marked with gradient sync or without it (`grad_sync`).

A DDP window is 2 x `steps` steps, in blocks of dist.sync_block steps.
Blocks with gradient sync and without it (no_sync()) alternate.
Both do the same work on the same shapes.
So backward with sync less backward without is measured, not guessed.
It is the communication backward did not hide.

An FSDP window syncs every step.
Its blocks with sync and without follow the window, in a probe of 2 x `steps` steps.
FSDP2's steps without sync keep every unit's unsharded gradients until the next synced step.
In the window, its peak memory would count them.
They also leave the optimizer nothing to step.
Backward without sync lacks the reduce-scatter and the copy into its input.
It adds the sum of each block's gradients.
So the difference is the reduce-scatter backward did not hide.
The parameters' all-gathers run in both, so they are not in it.

dist.exposed_comm=false leaves out the steps without sync: the window alone.
Without them, DDP has no straggler index either.
"""

import dataclasses
import os
import socket
import time
from typing import Any

import torch

from perfsweep.train.build import configure_backends
from perfsweep.train.parallel import measured_steps, probe_steps, rank_threads, synced
from perfsweep.train.window import Window, make_workload, peak_memory_mib, run_window


@dataclasses.dataclass(frozen=True)
class RankResult:
    """What one rank measured, as the run's process receives it."""

    rank: int
    warmup: Window
    window: Window  # its measured steps: with gradient sync and (DDP) without
    probe: Window | None  # FSDP's steps after its window, with sync and without; None for DDP
    first_step: float  # unix time just before it built its workload
    memory: tuple[float, str]  # the window's peak memory (MiB), and what kind of peak it is
    grad_bytes: int  # the bytes of gradients it reduces a step
    workload: dict[str, Any]  # the workload's summary fields at one step a second
    node: str = ""  # the host it ran on
    cpus: frozenset[int] = frozenset()  # the CPUs it may use there (its affinity); empty where unknown
    threads: int | None = None  # torch's CPU threads in it; None where unknown

    def window_steps(self, with_sync: bool = True) -> list[dict[str, Any]]:
        """The window's steps with gradient sync, or those without it."""
        return [row for row in self.window.rows if row["grad_sync"] == with_sync]


def cpus_of_rank(cfg, as_task: bool) -> int:
    """The CPU threads a rank may use.

    A run that sets `threads` gets them.
    A rank that is a Slurm task gets the CPUs given to its task.
    Failing that, it shares its node's CPUs with the node's other ranks.
    Ranks this process starts share this process's CPUs.
    A rank never gets more CPUs than this process may run on.

    Args:
        cfg: the run's config.
        as_task: whether the rank is a task of the run's Slurm job.
    """
    mine = len(os.sched_getaffinity(0))
    if cfg.threads is not None or not as_task:
        return rank_threads(cfg, mine)
    given, node = os.environ.get("SLURM_CPUS_PER_TASK", ""), os.environ.get("SLURM_CPUS_ON_NODE", "")
    cpus = int(given) if given.isdigit() else rank_threads(cfg, int(node)) if node.isdigit() else mine
    return max(1, min(cpus, mine))


def measure_rank(cfg, device: torch.device, as_task: bool) -> RankResult:
    """This rank's warm-up, measured window and (FSDP) probe.

    Args:
        cfg: the run's config.
        device: this rank's device; the process group is already started.
        as_task: whether the rank is a task of the run's Slurm job.
    """
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
    trained = [p for p in work.trainer.model.parameters() if p.requires_grad]
    return RankResult(
        rank=torch.distributed.get_rank(),
        warmup=warmup,
        window=window,
        probe=probe,
        first_step=first_step,
        memory=memory,
        grad_bytes=sum(p.numel() * p.element_size() for p in trained),
        workload=work.summary(1.0),  # at one step a second: the run scales samples/s
        node=socket.gethostname(),
        cpus=frozenset(os.sched_getaffinity(0)),
        threads=torch.get_num_threads(),
    )
