"""The environment a run measured in: versions, device, host, code revision, scheduler ids."""

import json
import os
import platform
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import torch
from packaging.utils import canonicalize_name

from perfsweep.conf.import_paths import modules_of
from perfsweep.conf.schema import commit_pins
from perfsweep.records.code import (
    PROJECT_ROOT,
    code_identity,
    code_version,
    installed_distributions,
    module_place,
    user_code_record,
)
from perfsweep.records.noise import cpu_model

PACKAGES = ("torch", "torchvision", "timm", "wandb", "submitit", "hydra-core", "numpy")


def command_output(*cmd: str) -> str | None:
    """A command's output (nvidia-smi...), with bytes that are not UTF-8 replaced.

    None if the command cannot run or fails.
    """
    try:
        out = subprocess.run(cmd, capture_output=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.decode(errors="replace").strip()


def process_started_at() -> float | None:
    """When this process started, from /proc: unix time, to a clock tick (10 ms).

    /proc counts the start on the boot clock, so this reads the boot clock too.
    /proc/stat's boot time is in whole seconds.
    It would put every start up to a second early.
    """
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        return None
    return time.time() - age


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def parse_compute_apps(text: str, gpu_uuid: str, own: set[int]) -> list[dict[str, object]]:
    """Rows of nvidia-smi's list of compute apps on the GPU `gpu_uuid`, other than the processes `own`.

    `text` is the output of:

        nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits
    """
    apps = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 4 or not parts[0].endswith(gpu_uuid) or not parts[1].isdigit() or int(parts[1]) in own:
            continue
        apps.append({"pid": int(parts[1]), "name": parts[2], "used_mib": int(parts[3]) if parts[3].isdigit() else None})
    return apps


def lineage(pid: int) -> set[int]:
    """`pid` and the processes it descends from, read from /proc.

    For a run, those are its job and its launcher.
    The launcher's device checks make a CUDA context.
    That context is no work beside the run.
    """
    pids: set[int] = set()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])  # after "(comm)": state, ppid
        except (OSError, IndexError, ValueError):
            break
    return pids


def gpu_uuid(device: torch.device) -> str:
    """The GPU's UUID as nvidia-smi and NVML write it (`GPU-...`).

    Unlike an index, it names the same GPU whatever CUDA_VISIBLE_DEVICES renumbers.
    Slurm sets CUDA_VISIBLE_DEVICES on a shared node.
    """
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def neighbours(device: torch.device) -> dict[str, object]:
    """Other work beside the run: processes on its GPU, and the host's load.

    The processes are None where nvidia-smi cannot tell.
    """
    processes = None
    if device.type == "cuda":
        apps = command_output(
            "nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv,noheader,nounits"
        )
        if apps is not None:
            processes = parse_compute_apps(apps, gpu_uuid(device), lineage(os.getpid()))
    return {"gpu_processes": processes, "loadavg": list(os.getloadavg())}


def built_environment() -> dict[str, object] | None:
    """What the environment perfsweep built for this run holds (launcher/envs.py).

    It holds what it was asked for, what it resolved to, and its folder.
    None in perfsweep's own environment.
    """
    record = Path(sys.prefix) / "perfsweep-env.json"
    try:
        return {**json.loads(record.read_text()), "path": sys.prefix}
    except (OSError, ValueError):
        return None


def environment(device: torch.device) -> dict[str, object]:
    env: dict[str, object] = {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus": sorted(os.sched_getaffinity(0)),  # those the run could use: its share, with local runs at once
        "torch_threads": torch.get_num_threads(),
        "packages": {p: _version(p) for p in PACKAGES},
        "environment": built_environment(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device": str(device),
        "code": {"path": str(PROJECT_ROOT), **code_version()},
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # the physical GPU(s) the run could see
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env["gpu"] = {
            "name": props.name,
            "uuid": gpu_uuid(device),  # names the physical GPU, whatever CUDA_VISIBLE_DEVICES renumbers
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "driver": (command_output("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") or "").split(
                "\n"
            )[0]
            or None,
        }
    return env


def user_code(config) -> dict[str, dict[str, object]]:
    """The user's code a run imported, by top-level module.

    Each module's entry holds:

    - where it was copied from;
    - its version and git commit, where there are ones;
    - where the run imported it from;
    - the files of it that are imported.

    The copy, version and commit are as the launch's snapshot recorded them, else as they are now.
    """
    recorded = user_code_record()
    found = {}
    for top in sorted(modules_of(config)):
        modules = [m for name, m in list(sys.modules.items()) if name == top or name.startswith(f"{top}.")]
        files = sorted({m.__file__ for m in modules if getattr(m, "__file__", None)})
        place = module_place(top)
        identity = recorded.get(top) or code_identity(top)
        found[top] = {**identity, "imported_from": str(place) if place else None, "files": files}
    return found


def imported_elsewhere(packages: dict[str, str]) -> str:
    """Why this run would not import the commit its environment installs ('' where it would).

    `packages` are the run's env.packages.
    A folder on PYTHONPATH comes before the environment's packages: a working copy there would be measured.
    """

    pins = {canonicalize_name(name): commit for name, commit in commit_pins(packages).items()}
    if not pins:
        return ""
    prefix = Path(sys.prefix).resolve()
    for top, names in installed_distributions().items():
        pinned = next((pins[canonicalize_name(n)] for n in names if canonicalize_name(n) in pins), None)
        place = module_place(top) if pinned else None
        if place is not None and not place.is_relative_to(prefix):
            return (
                f"{top} would be imported from {place}, not from this run's environment, which installs commit "
                f"{pinned[:12]} of it ({prefix}): take that folder off PYTHONPATH"
            )
    return ""


def clocks(device: torch.device) -> dict[str, object]:
    """The device's clock now.

    On a GPU, it is the SM clock and temperature, through NVML (nvidia-ml-py, a requirement).
    Without NVML's driver library, or on a CPU run, it is the host's mean core frequency (/proc/cpuinfo).
    A run records it as its window begins (after its warm-up) and after its window.
    """
    if device.type == "cuda":
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByUUID(gpu_uuid(device))
            return {
                "source": "gpu_sm_clock",
                "mhz": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                "temperature_c": float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
            }
        except Exception:  # no NVML here: fall back to the host's clock
            pass
    try:
        mhz = [
            float(line.split(":")[1])
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("cpu MHz")
        ]
    except OSError:
        mhz = []
    return {"source": "cpu_mhz", "mhz": sum(mhz) / len(mhz) if mhz else None, "temperature_c": None}
