"""The sides of a comparison measured in one process, in alternating blocks of steps (pairing=auto).

Each side builds its own workload from the same seed: the same weights and data, in a copy of its own.
The sides warm up first, one after another.
Then each side's measured steps run in blocks.
The blocks run in rounds: each round runs every side once (block_order).
Two sides alternate an order with its reverse (A B, B A, ...): each runs first in half the rounds.
Three or more take a random order each round, no side twice in a row, so none finds the caches warmer.
The order is drawn from the run's seed, so each process has its own.
Each block is a window: one synchronize before it, one after, nothing inside.
Between blocks the process-wide switches are read: a side that changed them fails the run, naming them.
"""

import random
from typing import Any

import torch

from perfsweep.train import precision
from perfsweep.train.window import Window, run_window
from perfsweep.train.workloads import Workload


class PairingError(RuntimeError):
    """The sides of a comparison cannot share their process: one changed what the others would see, or ran out of
    memory beside them."""


def block_order(sides: int, blocks: int, seed: int) -> list[int]:
    """Which side runs each block: `blocks` rounds, each runs every side once, in an order drawn from `seed`.

    Two sides alternate a seeded order with its reverse (A B, B A, ...).
    Each side then runs first in half the rounds, and follows itself as often as the other does.
    Three or more sides take a seeded shuffle each round, no side twice in a row.
    A reverse would leave a middle side never following itself, while the outer ones do.
    """
    rng, order = random.Random(seed), []
    first = list(range(sides))
    rng.shuffle(first)
    for block in range(blocks):
        if sides <= 2:
            round_ = first if block % 2 == 0 else first[::-1]
        else:
            round_ = list(range(sides))
            rng.shuffle(round_)
            if order and round_[0] == order[-1]:
                round_[0], round_[-1] = round_[-1], round_[0]
        order += round_
    return order


def block_sizes(steps: int, blocks: int) -> list[int]:
    """`steps` split into at most `blocks` blocks, none empty, the larger first."""
    count = max(1, min(blocks, steps))
    return [steps // count + (index < steps % count) for index in range(count)]


def process_switches() -> dict[str, Any]:
    """The process-wide state one side could set and the others would see."""
    return {
        **precision.backend_flags(),
        "threads": torch.get_num_threads(),
        "grad_enabled": torch.is_grad_enabled(),
        "autocast_cpu": torch.is_autocast_enabled("cpu"),
        "autocast_cuda": torch.is_autocast_enabled("cuda"),
        "cudnn_enabled": torch.backends.cudnn.enabled,
        "mkldnn_enabled": torch.backends.mkldnn.enabled,
        "flash_sdp": torch.backends.cuda.flash_sdp_enabled(),
        "mem_efficient_sdp": torch.backends.cuda.mem_efficient_sdp_enabled(),
        "math_sdp": torch.backends.cuda.math_sdp_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def changed(before: dict[str, Any], after: dict[str, Any]) -> str:
    return ", ".join(
        f"{key} from {before[key]!r} to {after.get(key)!r}" for key in before if before[key] != after.get(key)
    )


def refuse_changed_switches(expected: dict[str, Any], name: str) -> None:
    """Raise PairingError, naming side `name`, where the process-wide switches are no longer `expected`."""
    now = process_switches()
    if now != expected:
        raise PairingError(
            f"side {name} changed process-wide state ({changed(expected, now)}): its sides cannot share a process; "
            "pairing=process runs each alone"
        )


def measure_blocks(
    works: list[Workload], names: list[str], order: list[int], sizes: list[int], first: int, device: torch.device
) -> list[Window]:
    """Each side's measured window, its steps run in blocks that alternate with the other sides'.

    Args:
        works: each side's workload, warmed up.
        names: each side's run name, for errors.
        order: which side runs each block (block_order).
        sizes: the steps of each of a side's blocks (block_sizes).
        first: the index of each side's first measured step (after its warm-up).

    Returns:
        Each side's window: its blocks' rows in order, their seconds summed, when its last block ended, the host
        over each of its blocks.

    Raises:
        PairingError: a side's block changed the process-wide switches.
    """
    rows: list[list[dict]] = [[] for _ in works]
    seconds, ended, timers = [0.0] * len(works), [0.0] * len(works), [""] * len(works)
    hosts: list[list] = [[] for _ in works]
    taken = [0] * len(works)  # blocks each side has run
    switches = process_switches()
    for side in order:
        block = run_window(works[side], first + sum(sizes[: taken[side]]), sizes[taken[side]], device)
        taken[side] += 1
        rows[side] += block.rows
        seconds[side] += block.seconds
        ended[side], timers[side] = block.ended_at, block.timer
        hosts[side] += block.host
        refuse_changed_switches(switches, names[side])
    return [Window(*window) for window in zip(rows, seconds, timers, ended, hosts, strict=True)]
