"""Precision settings: autocast dtype, TF32 and loss scaling, and what a device can run."""

import contextlib

import torch

from perfsweep.conf.schema import PrecisionConf

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def unsupported(precision: PrecisionConf, device: torch.device) -> str | None:
    """Why `device` cannot run `precision`, or None if it can."""
    for key in ("autocast_dtype", "param_dtype"):
        value = getattr(precision, key)
        if value is not None and value not in DTYPES:
            return f"precision {precision.name}: {key}={value!r} is not one of {sorted(DTYPES)}"
    if device.type == "cpu":
        if precision.tf32:
            return (
                f"precision {precision.name} needs TF32 tensor cores "
                "(an NVIDIA GPU, compute capability 8.0+); the device is a CPU"
            )
        return None
    if device.type != "cuda":
        return f"precision {precision.name} is not supported on device type {device.type!r}"
    major, minor = torch.cuda.get_device_capability(device)
    name = torch.cuda.get_device_name(device)
    if precision.tf32 and major < 8:
        return f"precision {precision.name} needs compute capability 8.0+; {name} has {major}.{minor}"
    if "bfloat16" in (precision.autocast_dtype, precision.param_dtype) and not torch.cuda.is_bf16_supported():
        return (
            f"precision {precision.name} needs bfloat16 support; {name} (compute capability {major}.{minor}) has none"
        )
    return None


def set_tf32(precision: PrecisionConf) -> None:
    """TF32 is a process-wide switch: set it explicitly, since PyTorch's default allows it in cuDNN convolutions.

    Through both of torch's APIs, the legacy flags first: torch 2.9+ raises on a legacy getter whose flag
    disagrees with the fp32_precision API's (the new API alone leaves `cudnn.allow_tf32` True, and
    `get_float32_matmul_precision()` at odds with a TF32 matmul), and torch's own code still reads them
    (Inductor's max-autotune: its autotune cache, and torch 2.11's benchmark subprocess). cuDNN's own
    fp32_precision too: Inductor's Triton convolutions read it, not the conv one.
    """
    torch.backends.cuda.matmul.allow_tf32 = precision.tf32
    torch.backends.cudnn.allow_tf32 = precision.tf32
    mode = "tf32" if precision.tf32 else "ieee"
    torch.backends.cuda.matmul.fp32_precision = mode
    torch.backends.cudnn.fp32_precision = mode
    torch.backends.cudnn.conv.fp32_precision = mode
    torch.backends.cudnn.rnn.fp32_precision = mode


def backend_flags() -> dict[str, object]:
    """The process-wide switches that change what a step computes or how fast."""
    return {
        "matmul_fp32_precision": torch.backends.cuda.matmul.fp32_precision,
        "cudnn_conv_fp32_precision": torch.backends.cudnn.conv.fp32_precision,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
    }


def autocast(precision: PrecisionConf, device: torch.device) -> contextlib.AbstractContextManager:
    if precision.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=DTYPES[precision.autocast_dtype])


def param_dtype(precision: PrecisionConf) -> torch.dtype:
    """The dtype of the model's weights and inputs: float32 unless the precision casts them."""
    return DTYPES[precision.param_dtype] if precision.param_dtype else torch.float32


def grad_scaler(precision: PrecisionConf, device: torch.device) -> torch.amp.GradScaler:
    """A GradScaler, disabled (a no-op) unless the precision asks for loss scaling."""
    return torch.amp.GradScaler(device.type, enabled=precision.grad_scaler)
