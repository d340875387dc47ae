"""FLOPs of one step and the device's peak, for achieved TFLOP/s and model FLOP utilization (MFU).

torch's FlopCounterMode counts the FLOPs over one step after the measured window.
Compiled code runs eagerly for it, so the counter sees the ops a compiled graph would fuse.
It counts what a peak is quoted for:

- matmuls
- convolutions
- attention, forward, and backward for training

The peak comes from lightning-fabric's table of GPUs (`utilities.throughput.get_available_flops`).
It holds dense peaks per dtype, from the vendors' datasheets: H100, A100, V100, T4, L4, RTX 3090/4090 and more.
The Hopper parts it gets wrong come from HOPPER_DENSE instead.
The peak is None where unknown, which every CPU is.
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

# Hopper parts whose peak lightning-fabric 2.6.6 gets wrong:
# - its H200 and H100 NVL entries are the datasheets' "with sparsity" figures, twice the dense peak
#   (Lightning-AI/pytorch-lightning#21677; #21743 fixes it on master, in no release up to 2.6.6);
# - 'NVIDIA H200', the name torch reports for an H200 SXM, matches none of its entries.
# Dense peaks per GPU, keyed by a part of the device's name; the first that matches wins.
# From NVIDIA's H200 and H100 NVL datasheets: tensor cores at half the sparse figure, float32 on the CUDA cores.
_NVL = {torch.float32: 60e12, "tfloat32": 417.5e12, torch.bfloat16: 835.5e12, torch.float16: 835.5e12}  # both NVLs
HOPPER_DENSE: dict[str, dict[torch.dtype | str, float]] = {
    "h200 nvl": _NVL,
    "h200": {torch.float32: 67e12, "tfloat32": 494.5e12, torch.bfloat16: 989.5e12, torch.float16: 989.5e12},
    "h100 nvl": _NVL,
}


def count_flops(step: Callable[[], Any]) -> int | None:
    """The FLOPs `step` performs.

    None where the counter cannot follow it, as with a workload of exotic tensors.
    """
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with (
            warnings.catch_warnings(),
            torch.compiler.set_stance("force_eager"),
            FlopCounterMode(display=False) as counter,
        ):
            # The counter's module hooks are global, so a compiled model warns that they fire once more for its wrapper.
            # That moves a per-module count, not the total read here.
            warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
            step()
    except Exception:  # counting is beside the measurement: it must never fail the run
        return None
    return counter.get_total_flops()


PEAK_TABLES = ("lightning_fabric.utilities.throughput", "lightning.fabric.utilities.throughput")


def peak_table_module() -> list[str]:
    """The module that holds lightning-fabric's table of GPU peaks here, found without importing it.

    requirements.txt has lightning-fabric; a GPU image may have only the `lightning` bundle.

    Returns:
        The module's name in a list of one, or an empty list where neither package is there.
    """
    return [name for name in PEAK_TABLES if importlib.util.find_spec(name.split(".")[0])][:1]


def peak_table() -> Callable[[torch.device, Any], int | None] | None:
    """lightning-fabric's lookup of a GPU's peak.

    Importing it takes a fresh process half a second of a CPU.
    A job that forks its runs imports it once.

    Returns:
        The lookup, or None where neither lightning-fabric nor the `lightning` bundle is there (or it is broken).
    """
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
