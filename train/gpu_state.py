"""The GPU's state at a measured block's boundaries, through NVML (nvidia-ml-py): its clocks and why they are held,
its power, temperature and energy.

It is read where train/host_state.py reads the host: after the block's synchronizes, outside the timed region.
A reading is a handful of NVML queries, tens of microseconds each.
Energy comes from NVML's energy counter (Volta and newer), as Zeus measures a window.
Where the GPU has none, it is the block's mean power (at its two ends) times its wall time.
The two ends follow a synchronize, so the GPU is idle there: that fallback is mostly idle power.
So are the clock-event reasons read there; NVML's violation counters (power and thermal) count the time within the
block that the GPU was held below its clocks.
The GPU's settings that add noise (clocks not locked, persistence mode off, other processes) are read once a run.

A figure NVML does not give is None; a GPU without NVML is read as none at all.
"""

import functools
import time
from typing import Any, NamedTuple

import torch

from perfsweep.records.host import GpuBlock
from perfsweep.train.env import gpu_uuid
from perfsweep.train.host_settings import Setting, nvml_settings

# NVML's clock-event (throttle) reasons (nvml.h: nvmlClocksEventReason*), by bit; GpuIdle (0x1) is no event.
REASONS = {
    0x2: "applications clocks setting",
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "thermal slowdown (software)",
    0x40: "thermal slowdown (hardware)",
    0x80: "power brake",
    0x100: "display clock setting",
}
COUNTER, INTEGRATED = "NVML energy counter", "NVML power x time"


class GpuReading(NamedTuple):
    """The GPU at one boundary; None where NVML cannot tell."""

    wall: float  # perf_counter
    sm_mhz: float | None
    memory_mhz: float | None
    reasons: int | None  # the clock-event reasons' bits
    power_w: float | None
    temperature_c: float | None
    energy_mj: float | None  # NVML's counter since the driver loaded
    power_held_ns: float | None  # NVML's violation counter of the power policy: time held below its clocks
    thermal_held_ns: float | None


def reasons_named(bits: int | None) -> tuple[str, ...]:
    """The clock-event reasons in `bits`, by name; idle is none."""
    return tuple(name for bit, name in REASONS.items() if bits and bits & bit)


class GpuReader:
    """Reads one GPU through `nvml` (the pynvml module) and its `handle`."""

    def __init__(self, nvml: Any, handle: Any):
        self.nvml, self.handle = nvml, handle

    def settings(self) -> list[Setting]:
        """The GPU's settings that add noise, read now: a run reads them once, after its window."""
        return nvml_settings(self.nvml, self.handle)

    def _ask(self, name: str, *args: Any, scale: float = 1.0) -> float | None:
        try:
            return float(getattr(self.nvml, name)(self.handle, *args)) * scale
        except Exception:  # an NVML error (not supported, lost), or a query this driver's NVML lacks
            return None

    def _reasons(self) -> int | None:
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            found = self._ask(name)
            if found is not None:
                return int(found)
        return None

    def read(self) -> GpuReading:
        nvml = self.nvml
        return GpuReading(
            wall=time.perf_counter(),
            sm_mhz=self._ask("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            memory_mhz=self._ask("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            reasons=self._reasons(),
            power_w=self._ask("nvmlDeviceGetPowerUsage", scale=1e-3),
            temperature_c=self._ask("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU),
            energy_mj=self._ask("nvmlDeviceGetTotalEnergyConsumption"),
            power_held_ns=self._held(nvml.NVML_PERF_POLICY_POWER),
            thermal_held_ns=self._held(nvml.NVML_PERF_POLICY_THERMAL),
        )

    def _held(self, policy: int) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetViolationStatus(self.handle, policy).violationTime)
        except Exception:  # not supported on this GPU, or a query this driver's NVML lacks
            return None

    def block(self, start: GpuReading, end: GpuReading) -> GpuBlock:
        """The GPU over the block between two readings."""
        energy, source = None, None
        if start.energy_mj is not None and end.energy_mj is not None:
            energy, source = (end.energy_mj - start.energy_mj) / 1e3, COUNTER
        elif start.power_w is not None and end.power_w is not None:
            energy, source = (start.power_w + end.power_w) / 2 * (end.wall - start.wall), INTEGRATED
        return GpuBlock(
            sm_mhz_start=start.sm_mhz,
            sm_mhz_end=end.sm_mhz,
            memory_mhz_start=start.memory_mhz,
            memory_mhz_end=end.memory_mhz,
            reasons=list(dict.fromkeys(reasons_named(start.reasons) + reasons_named(end.reasons))),
            power_w_start=start.power_w,
            power_w_end=end.power_w,
            power_limit_w=self._ask("nvmlDeviceGetEnforcedPowerLimit", scale=1e-3),
            temperature_c_start=start.temperature_c,
            temperature_c_end=end.temperature_c,
            energy_j=energy,
            energy_source=source,
            power_held_s=_seconds_between(start.power_held_ns, end.power_held_ns),
            thermal_held_s=_seconds_between(start.thermal_held_ns, end.thermal_held_ns),
        )


def _seconds_between(start_ns: float | None, end_ns: float | None) -> float | None:
    return (end_ns - start_ns) / 1e9 if start_ns is not None and end_ns is not None else None


def here(device: torch.device) -> GpuReader | None:
    """A reader of the run's GPU, its handle found once a process; None on a CPU, or where NVML cannot reach it."""
    return _reader(gpu_uuid(device)) if device.type == "cuda" else None


@functools.cache
def _reader(uuid: str) -> GpuReader | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return GpuReader(pynvml, pynvml.nvmlDeviceGetHandleByUUID(uuid))
    except Exception:  # no driver library, no such GPU
        return None
