"""FLOPs of one step and the device's peak, for achieved TFLOP/s and model FLOP utilization (MFU).

FLOPs are counted by torch's FlopCounterMode over one step after the measured window (compiled code runs
eagerly for it: the counter sees the ops a compiled graph would fuse): matmuls, convolutions and attention
(forward, and backward for training), which is what a peak is quoted for. The peak is lightning-fabric's
table of GPUs (`utilities.throughput.get_available_flops`: dense peaks of H100, A100, V100, T4, L4,
RTX 3090/4090 and more, per dtype, from their vendors' datasheets), but for the Hopper parts it gets wrong
(HOPPER_DENSE); None where unknown, which every CPU is.
"""

import importlib
import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

import torch

# The dtype a precision's matmuls run in, as lightning-fabric's table names it.
PEAK_DTYPES: dict[str, torch.dtype | str] = {
    "fp32": torch.float32,  # TF32 where the run allowed it (lightning checks the matmul precision)
    "tf32": "tfloat32",
    "fp16": torch.float16,
    "amp_fp16": torch.float16,
    "amp_bf16": torch.bfloat16,
}

# Hopper parts whose peak lightning-fabric 2.6.6 gets wrong: the H200 and H100 NVL entries are the datasheets'
# "with sparsity" figures, twice the dense peak (Lightning-AI/pytorch-lightning#21677, fixed on its master by
# #21743, in no release yet), and 'NVIDIA H200', the name torch reports for an H200 SXM, matches none of them.
# Dense peaks per GPU, by a part of the device's name (the first that matches), from NVIDIA's H200 and H100 NVL
# datasheets: tensor cores at half the sparse figure, float32 on the CUDA cores.
_NVL = {torch.float32: 60e12, "tfloat32": 417.5e12, torch.bfloat16: 835.5e12, torch.float16: 835.5e12}  # both NVLs
HOPPER_DENSE: dict[str, dict[torch.dtype | str, float]] = {
    "h200 nvl": _NVL,
    "h200": {torch.float32: 67e12, "tfloat32": 494.5e12, torch.bfloat16: 989.5e12, torch.float16: 989.5e12},
    "h100 nvl": _NVL,
}


def count_flops(step: Callable[[], Any]) -> int | None:
    """The FLOPs `step` performs; None where the counter cannot follow it (a workload of exotic tensors)."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with (
            warnings.catch_warnings(),
            torch.compiler.set_stance("force_eager"),
            FlopCounterMode(display=False) as counter,
        ):
            # The counter's module hooks are global, so a compiled model warns that they fire once more for its
            # wrapper: that moves a per-module count, not the total read here.
            warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
            step()
    except Exception:  # counting is beside the measurement: it must never fail the run
        return None
    return counter.get_total_flops()


PEAK_TABLES = ("lightning_fabric.utilities.throughput", "lightning.fabric.utilities.throughput")


def peak_table_module() -> list[str]:
    """The module that holds lightning-fabric's table of GPU peaks here (requirements.txt has lightning-fabric; a
    GPU image may have only the `lightning` bundle), found without importing it: none where neither is there."""
    return [name for name in PEAK_TABLES if importlib.util.find_spec(name.split(".")[0])][:1]


def peak_table() -> Callable[[torch.device, Any], int | None] | None:
    """lightning-fabric's lookup of a GPU's peak (importing it takes a fresh process half a second of a CPU: a job
    that forks its runs imports it once); None where neither lightning-fabric nor the `lightning` bundle is there."""
    modules = peak_table_module()
    try:
        return importlib.import_module(modules[0]).get_available_flops if modules else None
    except ImportError:  # there, but broken (built for another torch): no peak, not a failed run
        return None


def peak_flops(device: torch.device, precision: str) -> float | None:
    """The device's dense peak FLOP/s for the precision's dtype, if known."""
    if device.type != "cuda":
        return None
    dtype = PEAK_DTYPES.get(precision, torch.float32)
    name = torch.cuda.get_device_name(device).lower()
    hopper = next((peaks for part, peaks in HOPPER_DENSE.items() if part in name), None)
    if hopper is not None:
        return hopper.get(dtype)
    get_available_flops = peak_table()
    if get_available_flops is None:
        return None
    with warnings.catch_warnings():  # an unknown GPU is said by the table's "unknown", not a warning
        warnings.simplefilter("ignore")
        peak = get_available_flops(device, dtype)
    return float(peak) if peak else None
