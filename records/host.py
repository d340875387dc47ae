"""The host's state over a run's measured blocks: summary.json's `host`.

train/host_state.py reads the host, and train/gpu_state.py the GPU, at each block's boundaries, outside the timed
region.
A figure the machine cannot give is None, never 0.
"""

import dataclasses
import math
from typing import Any

from perfsweep.records.files import known_fields

# Other processes' CPU time, as a share of the run's own, above which the CPU packages' energy is theirs too.
SHARED_ENERGY = 0.10
# Other processes' share of the run's CPUs above which they competed with it for them.
OTHERS = 0.10
RESOLVED = 0.05  # a share's resolution past which it is said with it
# Steal above which a hypervisor gave a noticeable part of the run's CPUs to other guests.
STEAL = 0.02


@dataclasses.dataclass(frozen=True)
class GpuBlock:
    """The GPU over one measured block, through NVML: its clocks and why they were held, its power and energy."""

    sm_mhz_start: float | None = None
    sm_mhz_end: float | None = None
    memory_mhz_start: float | None = None
    memory_mhz_end: float | None = None
    reasons: list[str] = dataclasses.field(default_factory=list)  # the clock-event reasons in force at either end
    power_w_start: float | None = None
    power_w_end: float | None = None
    power_limit_w: float | None = None  # the limit NVML enforces
    temperature_c_start: float | None = None
    temperature_c_end: float | None = None
    energy_j: float | None = None
    energy_source: str | None = None  # "NVML energy counter", or "NVML power x time" where the GPU has no counter
    power_held_s: float | None = None  # the block's time the GPU was held below its clocks by its power cap
    thermal_held_s: float | None = None  # ... by a thermal slowdown


@dataclasses.dataclass(frozen=True)
class HostBlock:
    """The host over one measured block of steps, between the synchronizes that bound it."""

    wall_s: float
    cpus: int  # the CPUs the run's process may use (its affinity)
    process_cpu_s: float  # this process's CPU time, user and system, every thread
    busy_s: float | None = None  # the busy time of the run's CPUs (/proc/stat), every process's
    others_cpu_s: float | None = None  # busy_s less the process's, its children's and its ranks', at least 0
    # The CPU time of the processes the run started (its W&B service, DataLoader or compile workers), where /proc
    # lists them; None where it does not, and others' CPU then holds it
    children_cpu_s: float | None = 0.0
    # The run's other ranks' CPU time on these CPUs (dist=...); None where their blocks do not line up with these
    ranks_cpu_s: float | None = 0.0
    tick_s: float | None = None  # /proc/stat's unit: others' CPU and steal are within a tick a CPU
    steal_s: float | None = None  # the run's CPUs' time a hypervisor gave to other guests
    throttled: int | None = None  # periods the run's cgroup was throttled (cpu.stat's nr_throttled)
    throttled_s: float | None = None  # the time it was throttled
    mhz_start: float | None = None  # the run's CPUs' mean clock (cpufreq's scaling_cur_freq)
    mhz_end: float | None = None
    cpu_energy_j: float | None = None  # the CPU packages' energy (RAPL), every process's
    # The machine's CPUs, whose energy RAPL's counters hold; None where RAPL or /proc/stat was not read
    machine_cpus: int | None = None
    gpu: GpuBlock | None = None  # a run on a GPU: the GPU over the block

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HostBlock":
        gpu = GpuBlock(**known_fields(GpuBlock, data["gpu"])) if data.get("gpu") else None
        return cls(**{**known_fields(cls, data), "gpu": gpu})


def _total(values: list[float | None]) -> float | None:
    """The sum, or None where a block could not tell."""
    return None if not values or any(v is None for v in values) else sum(values)


def _two_sd(variances: list[float | None]) -> float | None:
    total = _total(variances)
    return None if total is None else 2 * math.sqrt(total)


def _taken(share: float, error: float) -> str:
    """'40%'; '100% (±78%)' where /proc/stat's ticks leave it that wide: a short window's ticks may pass 100%."""
    return f"{min(share, 1.0):.0%}" + (f" (±{error:.0%})" if error > RESOLVED else "")


def _share(seconds: float | None, cpu_s: float) -> float | None:
    return seconds / cpu_s if seconds is not None and cpu_s > 0 else None


@dataclasses.dataclass(frozen=True)
class HostState:
    """The host over a run's measured blocks, each one and all together.

    A total is None where a block could not tell it.
    Others' CPU is the blocks' busy time less the run's.
    That is its process's and its children's.
    Its other ranks' on the same CPUs are the run's too.
    A block's own figure, cut at 0, would count its ticks' error one way only.
    A share is of the blocks' wall time x the CPUs the run may use.
    `resolution` is two standard deviations of others' and steal's shares from /proc/stat's ticks.
    A block starts and ends anywhere within a tick, so each CPU's count errs by tick/sqrt(6) a block.
    """

    blocks: list[HostBlock]
    wall_s: float
    process_cpu_s: float
    ranks_cpu_s: float | None = 0.0  # the run's other ranks' CPU time on its CPUs
    children_cpu_s: float | None = 0.0  # the CPU time of the processes it started, where /proc lists them
    others_cpu_s: float | None = None
    others_share: float | None = None  # of the run's CPUs: what other processes took of them
    steal_share: float | None = None
    resolution: float | None = None
    throttled: int | None = None
    throttled_s: float | None = None
    mhz_start: float | None = None  # at the first block's start
    mhz_end: float | None = None  # at the last block's end
    # The device's energy over the blocks: the GPU's on a GPU, else the CPU packages'; None where unknown
    energy_j: float | None = None
    energy_source: str | None = None
    gpu_sm_mhz_start: float | None = None  # at the first block's start
    gpu_sm_mhz_end: float | None = None  # at the last block's end
    gpu_reasons: list[str] = dataclasses.field(default_factory=list)  # every clock-event reason seen at a boundary
    gpu_power_limit_w: float | None = None
    gpu_power_held_s: float | None = None  # over the blocks: the time the power cap held the GPU's clocks down
    gpu_thermal_held_s: float | None = None
    # The GPU's settings that add noise, read once a run: each {name, state, noisy, fix} (train/host_settings.py)
    gpu_settings: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def energy_shared(self) -> str:
        """Why the CPU packages' energy (RAPL) holds other processes' too.

        "" where it is the run's alone, or a GPU's.
        The packages' counters are every process's.
        They are the run's where it may use every CPU of the machine.
        Other processes' CPU time beside it must also be under SHARED_ENERGY of the run's.
        Others' CPU time counts only beyond /proc/stat's resolution.
        A check whose figures the run lacks is not made.
        """
        if self.energy_source != "RAPL":
            return ""
        fewer = next((b for b in self.blocks if b.machine_cpus and b.cpus < b.machine_cpus), None)
        if fewer:
            return f"the run's process may use {fewer.cpus} of the machine's {fewer.machine_cpus} CPUs"
        capacity = sum(b.wall_s * b.cpus for b in self.blocks)
        beyond_ticks = None if self.others_cpu_s is None else self.others_cpu_s - (self.resolution or 0.0) * capacity
        own = self.process_cpu_s + (self.ranks_cpu_s or 0.0) + (self.children_cpu_s or 0.0)
        if beyond_ticks is not None and beyond_ticks > SHARED_ENERGY * own:
            return f"other processes used over {SHARED_ENERGY:.0%} of the run's CPU time beside it"
        return ""

    def competed(self) -> list[str]:
        """What took the run's CPUs beyond /proc/stat's resolution.

        Others, steal and its own children may; [] where nothing did."""
        error, found = self.resolution or 0.0, []
        if self.others_share is not None and self.others_share - error > OTHERS:
            found.append(f"other processes took {_taken(self.others_share, error)} of its CPUs during its window")
        if self.steal_share is not None and self.steal_share - error > STEAL:
            found.append(f"steal {_taken(self.steal_share, error)} of its window")
        helpers = _share(self.children_cpu_s, sum(b.wall_s * b.cpus for b in self.blocks))
        if helpers is not None and helpers - error > OTHERS:
            found.append(
                f"its own child processes (W&B's service, DataLoader or compile workers) took {_taken(helpers, error)} "
                "of its CPUs during its window"
            )
        return found

    @property
    def watts(self) -> float | None:
        """The device's mean power over the blocks."""
        return self.energy_j / self.wall_s if self.energy_j is not None and self.wall_s > 0 else None

    def joules_per_sample(self, samples_per_s: float | None) -> float | None:
        """The device's energy per sample over the blocks, at the run's throughput.

        None where either is unknown.
        None too where the energy holds other processes' (`energy_shared`).
        """
        watts = None if self.energy_shared else self.watts
        return watts / samples_per_s if watts is not None and samples_per_s else None

    @classmethod
    def of(cls, blocks: list[HostBlock]) -> "HostState":
        wall = sum(b.wall_s for b in blocks)
        cpu_s = sum(b.wall_s * b.cpus for b in blocks)
        busy, own = _total([b.busy_s for b in blocks]), sum(b.process_cpu_s for b in blocks)
        ranks = _total([b.ranks_cpu_s for b in blocks]) if blocks else 0.0
        children = _total([b.children_cpu_s for b in blocks]) if blocks else 0.0
        helpers = sum(b.children_cpu_s or 0.0 for b in blocks)  # unlisted children stay in others' CPU
        others = None if busy is None or ranks is None else max(0.0, busy - own - ranks - helpers)
        throttled = _total([b.throttled for b in blocks])
        return cls(
            blocks=list(blocks),
            wall_s=wall,
            process_cpu_s=own,
            ranks_cpu_s=ranks,
            children_cpu_s=children,
            others_cpu_s=others,
            others_share=_share(others, cpu_s),
            steal_share=_share(_total([b.steal_s for b in blocks]), cpu_s),
            resolution=_share(_two_sd([b.tick_s**2 * b.cpus / 6 if b.tick_s else None for b in blocks]), cpu_s),
            throttled=None if throttled is None else int(throttled),
            throttled_s=_total([b.throttled_s for b in blocks]),
            mhz_start=blocks[0].mhz_start if blocks else None,
            mhz_end=blocks[-1].mhz_end if blocks else None,
            **_energy(blocks),
            **_gpu(blocks),
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HostState":
        blocks = [HostBlock.from_json(block) for block in data.get("blocks", [])]
        return cls(**{**known_fields(cls, data), "blocks": blocks})


def _energy(blocks: list[HostBlock]) -> dict[str, Any]:
    """The device's energy over the blocks and where it comes from: the GPU's where it ran on one."""
    gpus = [b.gpu for b in blocks if b.gpu is not None]
    if gpus and len(gpus) == len(blocks):
        energy = _total([g.energy_j for g in gpus])
        sources = sorted({g.energy_source for g in gpus if g.energy_source})
        return {"energy_j": energy, "energy_source": ", ".join(sources) if energy is not None else None}
    energy = _total([b.cpu_energy_j for b in blocks]) if not gpus else None
    return {"energy_j": energy, "energy_source": "RAPL" if energy is not None else None}


def _gpu(blocks: list[HostBlock]) -> dict[str, Any]:
    gpus = [b.gpu for b in blocks if b.gpu is not None]
    if not gpus:
        return {}
    return {
        "gpu_sm_mhz_start": gpus[0].sm_mhz_start,
        "gpu_sm_mhz_end": gpus[-1].sm_mhz_end,
        "gpu_reasons": sorted({reason for g in gpus for reason in g.reasons}),
        "gpu_power_limit_w": gpus[-1].power_limit_w,
        "gpu_power_held_s": _total([g.power_held_s for g in gpus]),
        "gpu_thermal_held_s": _total([g.thermal_held_s for g in gpus]),
    }
