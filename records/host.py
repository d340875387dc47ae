"""The host's state over a run's measured blocks: summary.json's `host`.

train/host_state.py reads it at each block's boundaries, outside the timed region.
A figure the machine cannot give is None, never 0.
"""

import dataclasses
import math
from typing import Any

from perfsweep.records.files import known_fields


@dataclasses.dataclass(frozen=True)
class HostBlock:
    """The host over one measured block of steps, between the synchronizes that bound it."""

    wall_s: float
    cpus: int  # the CPUs the run's process may use (its affinity)
    process_cpu_s: float  # this process's CPU time, user and system, every thread
    busy_s: float | None = None  # the busy time of the run's CPUs (/proc/stat), every process's
    others_cpu_s: float | None = None  # busy_s less the process's, at least 0
    tick_s: float | None = None  # /proc/stat's unit: others' CPU and steal are within a tick a CPU
    steal_s: float | None = None  # the run's CPUs' time a hypervisor gave to other guests
    throttled: int | None = None  # periods the run's cgroup was throttled (cpu.stat's nr_throttled)
    throttled_s: float | None = None  # the time it was throttled
    mhz_start: float | None = None  # the run's CPUs' mean clock (cpufreq's scaling_cur_freq)
    mhz_end: float | None = None


def _total(values: list[float | None]) -> float | None:
    """The sum, or None where a block could not tell."""
    return None if not values or any(v is None for v in values) else sum(values)


def _two_sd(variances: list[float | None]) -> float | None:
    total = _total(variances)
    return None if total is None else 2 * math.sqrt(total)


def _share(seconds: float | None, cpu_s: float) -> float | None:
    return seconds / cpu_s if seconds is not None and cpu_s > 0 else None


@dataclasses.dataclass(frozen=True)
class HostState:
    """The host over a run's measured blocks, each one and all together.

    A total is None where a block could not tell it.
    Others' CPU is the blocks' busy time less the process's: a block's own figure, cut at 0, would count its ticks'
    error one way only.
    A share is of the blocks' wall time x the CPUs the run may use.
    `resolution` is two standard deviations of others' and steal's shares from /proc/stat's ticks.
    A block starts and ends anywhere within a tick, so each CPU's count errs by tick/sqrt(6) a block.
    """

    blocks: list[HostBlock]
    wall_s: float
    process_cpu_s: float
    others_cpu_s: float | None = None
    others_share: float | None = None  # of the run's CPUs: what other processes took of them
    steal_share: float | None = None
    resolution: float | None = None
    throttled: int | None = None
    throttled_s: float | None = None
    mhz_start: float | None = None  # at the first block's start
    mhz_end: float | None = None  # at the last block's end

    @classmethod
    def of(cls, blocks: list[HostBlock]) -> "HostState":
        wall = sum(b.wall_s for b in blocks)
        cpu_s = sum(b.wall_s * b.cpus for b in blocks)
        busy, own = _total([b.busy_s for b in blocks]), sum(b.process_cpu_s for b in blocks)
        others = None if busy is None else max(0.0, busy - own)
        throttled = _total([b.throttled for b in blocks])
        return cls(
            blocks=list(blocks),
            wall_s=wall,
            process_cpu_s=own,
            others_cpu_s=others,
            others_share=_share(others, cpu_s),
            steal_share=_share(_total([b.steal_s for b in blocks]), cpu_s),
            resolution=_share(_two_sd([b.tick_s**2 * b.cpus / 6 if b.tick_s else None for b in blocks]), cpu_s),
            throttled=None if throttled is None else int(throttled),
            throttled_s=_total([b.throttled_s for b in blocks]),
            mhz_start=blocks[0].mhz_start if blocks else None,
            mhz_end=blocks[-1].mhz_end if blocks else None,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HostState":
        blocks = [HostBlock(**known_fields(HostBlock, block)) for block in data.get("blocks", [])]
        return cls(**{**known_fields(cls, data), "blocks": blocks})
