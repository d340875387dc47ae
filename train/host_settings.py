"""The machine's settings that add noise to step times, read from sysfs and NVML, each with the command that fixes it.

A setting that cannot be read is unknown, never assumed.
perfsweep reads them; it never changes one.
"""

import dataclasses
import os
from pathlib import Path

GOVERNOR_FIX = "sudo cpupower frequency-set -g performance"
TURBO_FIX = {
    "intel_pstate/no_turbo": "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo",
    "cpufreq/boost": "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost",
}
SMT_FIX = "echo off | sudo tee /sys/devices/system/cpu/smt/control (or taskset -c with one CPU a core)"


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: what was read, whether it adds noise (None: unknown), and the command that would fix it."""

    name: str
    state: str
    noisy: bool | None
    fix: str | None = None

    @property
    def line(self) -> str:
        if self.noisy is None:
            return f"{self.name}: unknown ({self.state})"
        return f"{self.name}: {self.state}" + (f"; fix: {self.fix}" if self.noisy and self.fix else "")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def governor(root: Path) -> Setting:
    """The CPU frequency governor of each CPU the process may use: `performance` adds no noise."""
    cpus = root / "sys/devices/system/cpu"
    found = {cpu: _read(cpus / f"cpu{cpu}/cpufreq/scaling_governor") for cpu in sorted(os.sched_getaffinity(0))}
    values = {value for value in found.values() if value is not None}
    name = "CPU frequency governor"
    if not values:
        return Setting(name, f"no {cpus}/cpu*/cpufreq/scaling_governor", None)
    return Setting(name, ", ".join(sorted(values)), values != {"performance"}, GOVERNOR_FIX)


def turbo(root: Path) -> Setting:
    """Turbo (boost): on, the clock follows the temperature and the load of the other cores."""
    cpus = root / "sys/devices/system/cpu"
    for place, fix in TURBO_FIX.items():
        value = _read(cpus / place)
        if value is not None:
            on = value == ("0" if place.endswith("no_turbo") else "1")
            return Setting("turbo", f"{'on' if on else 'off'} ({cpus / place} is {value})", on, fix)
    return Setting("turbo", f"neither {' nor '.join(str(cpus / p) for p in TURBO_FIX)}", None)


def smt(root: Path) -> Setting:
    """Whether two of the CPUs the process may use are SMT siblings: one core's threads share its units."""
    cpus, mine = root / "sys/devices/system/cpu", sorted(os.sched_getaffinity(0))
    siblings = {cpu: _read(cpus / f"cpu{cpu}/topology/thread_siblings_list") for cpu in mine}
    if any(value is None for value in siblings.values()):
        return Setting("SMT siblings shared", f"no {cpus}/cpu*/topology/thread_siblings_list", None)
    shared = sorted({value for value in siblings.values() if sum(_listed(value, cpu) for cpu in mine) > 1})
    state = (
        f"CPUs {'; '.join(shared)} share a core" if shared else f"none of CPUs {','.join(map(str, mine))} share a core"
    )
    return Setting("SMT siblings shared", state, bool(shared), SMT_FIX)


def _listed(cpu_list: str, cpu: int) -> bool:
    """Whether `cpu` is in a sysfs CPU list ('0,4' or '0-1')."""
    for part in cpu_list.split(","):
        low, _, high = part.partition("-")
        if int(low) <= cpu <= int(high or low):
            return True
    return False


def cpu_settings(root: Path = Path("/")) -> list[Setting]:
    """The CPU's settings, read under `root` (a fake sysfs in tests)."""
    return [governor(root), turbo(root), smt(root)]


def gpu_settings(index: int = 0) -> list[Setting]:
    """The settings of GPU `index` (NVML's numbering) that `nvml_settings` reads; [] without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return []
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as error:  # NVML's driver library missing, or no such GPU: each setting is unknown
        return [Setting(name, f"NVML: {error}", None) for name in GPU_SETTINGS]
    return nvml_settings(pynvml, handle)


GPU_SETTINGS = ("GPU clocks locked", "GPU persistence mode", "other processes on the GPU")


def nvml_settings(nvml, handle) -> list[Setting]:
    """The GPU's clocks, persistence mode and other processes on it, through `nvml` (the pynvml module)."""
    return [_clocks(nvml, handle), _persistence(nvml, handle), _others(nvml, handle)]


def _clocks(nvml, handle) -> Setting:
    """Locked when the SM's application clock is set above its default; a clock that boosts moves step times."""
    name = GPU_SETTINGS[0]
    try:
        now = nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM)
        default = nvml.nvmlDeviceGetDefaultApplicationsClock(handle, nvml.NVML_CLOCK_SM)
        top = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
    except Exception as error:
        return Setting(name, f"NVML: {error}", None)
    locked = now != default
    state = f"SM application clock {now} MHz, default {default}, max {top}"
    return Setting(name, f"{'yes' if locked else 'no'}: {state}", not locked, f"sudo nvidia-smi -lgc {top},{top}")


def _persistence(nvml, handle) -> Setting:
    name = GPU_SETTINGS[1]
    try:
        on = nvml.nvmlDeviceGetPersistenceMode(handle) == nvml.NVML_FEATURE_ENABLED
    except Exception as error:
        return Setting(name, f"NVML: {error}", None)
    return Setting(name, "on" if on else "off", not on, "sudo nvidia-smi -pm 1")


def _others(nvml, handle) -> Setting:
    name = GPU_SETTINGS[2]
    try:
        found = nvml.nvmlDeviceGetComputeRunningProcesses(handle) + nvml.nvmlDeviceGetGraphicsRunningProcesses(handle)
    except Exception as error:
        return Setting(name, f"NVML: {error}", None)
    pids = sorted({p.pid for p in found} - {os.getpid()})
    state = f"pids {', '.join(map(str, pids))}" if pids else "none"
    return Setting(name, state, bool(pids), "stop them, or run on another GPU (nvidia-smi lists them)")


def gpu_name(index: int = 0) -> str | None:
    """The GPU's name through NVML, without starting CUDA; None without one."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
    except Exception:  # no driver or no GPU
        return None
