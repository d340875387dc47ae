"""Checks that a config can run here, before anything is submitted; each problem names the value and the choices."""

import dataclasses
import functools

import torch

from conf.schema import PrecisionConf, RunConf
from train import precision
from train.build import MEMORY_FORMATS, MODEL_SOURCES, resolve_device
from train.inputs import INPUT_TYPES

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
POSITIVE = ("steps", "data_batches", "model.batch_size", "model.image_size", "model.num_classes", "model.in_chans")


@functools.cache
def _model_names(source: str) -> frozenset[str]:
    return frozenset(MODEL_SOURCES[source][1]())


def _choice(what: str, value: object, allowed) -> list[str]:
    if value in allowed:
        return []
    return [f"{what}={value!r} is not one of: {', '.join(str(a) for a in allowed)}"]


@functools.cache
def _model(source: str, name: str) -> tuple[str, ...]:
    if source not in MODEL_SOURCES:
        return tuple(_choice("model.source", source, sorted(MODEL_SOURCES)))
    if name not in _model_names(source):
        close = sorted(n for n in _model_names(source) if n.startswith(name[:4]))[:8]
        hint = f"; similar: {', '.join(close)}" if close else ""
        return (f"model.name={name!r} is not a {source} model{hint} (the other source: model.source)",)
    return ()


@functools.cache
def _device(name: str, precision_fields: tuple) -> tuple[str, ...]:
    """What stops a precision (its fields) on device `name` here (the answer depends on this host only)."""
    try:
        device = resolve_device(name)
    except RuntimeError as error:
        return (f"device={name!r}: {error}; use auto, cpu, cuda or cuda:N",)
    if device.type == "cuda" and not torch.cuda.is_available():
        return (f"device={name!r} but CUDA is not available here; use device=auto or cpu",)
    if device.type not in ("cpu", "cuda"):
        return (f"device={name!r}: only cpu and cuda devices are supported",)
    unsupported = precision.unsupported(PrecisionConf(*precision_fields), device)
    return (unsupported,) if unsupported else ()


def problems(cfg: RunConf, on_this_host: bool = True) -> list[str]:
    """Everything wrong with `cfg`; the device checks only when the run will execute on this host."""
    found = list(_model(cfg.model.source, cfg.model.name))
    found += _choice("memory_format", cfg.memory_format.name, list(MEMORY_FORMATS))
    found += _choice("input_type", cfg.input_type.name, sorted(INPUT_TYPES))
    if cfg.compile.enabled:
        found += _choice("compile.mode", cfg.compile.mode, COMPILE_MODES)
        if cfg.warmup_steps < 2:
            found.append(
                f"warmup_steps={cfg.warmup_steps}: compiled runs need 2+ warm-up steps "
                "to keep compilation out of the measurement"
            )
    for key in POSITIVE:
        value = functools.reduce(getattr, key.split("."), cfg)
        if value <= 0:
            found.append(f"{key}={value} must be positive")
    if cfg.warmup_steps < 0:
        found.append(f"warmup_steps={cfg.warmup_steps} must be 0 or more")
    if on_this_host:
        found += _device(cfg.device, dataclasses.astuple(cfg.precision))
    return found
