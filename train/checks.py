"""Checks that a config can run here, before anything is submitted; each problem names the value and the choices."""

import dataclasses
import functools

import torch

from conf.schema import PrecisionConf, RunConf
from train import fastai_parts, precision
from train.build import ALGORITHMS, LOSSES, MEMORY_FORMATS, MODEL_SOURCES, OPTIMIZERS, resolve_device
from train.functions import FUNCTIONS
from train.inputs import INPUT_TYPES

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
POSITIVE = ("data_batches", "model.batch_size", "model.image_size", "model.num_classes", "model.in_chans")
WORKLOADS = ("train_step", *sorted(FUNCTIONS))


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


def _train_step(cfg: RunConf) -> list[str]:
    """What a training step's axes need: a known model, memory format, input type, loss and optimizer."""
    found = list(_model(cfg.model.source, cfg.model.name))
    found += _choice("memory_format", cfg.memory_format.name, list(MEMORY_FORMATS))
    found += _choice("input_type", cfg.input_type.name, sorted(INPUT_TYPES))
    found += _choice("loss", cfg.loss.name, list(LOSSES))
    found += _choice("optim", cfg.optim.name, list(OPTIMIZERS))
    found += _choice("optim.algorithm", cfg.optim.algorithm, ALGORITHMS)
    if cfg.input_type.name in INPUT_TYPES and INPUT_TYPES[cfg.input_type.name].needs_fastai:
        found += fastai_parts.missing(f"input_type={cfg.input_type.name}")
    for group in ("loss", "optim"):
        if getattr(cfg, group).name == "fastai":
            found += fastai_parts.missing(f"{group}=fastai")
    for key in POSITIVE:
        value = functools.reduce(getattr, key.split("."), cfg)
        if value <= 0:
            found.append(f"{key}={value} must be positive")
    return found


def problems(cfg: RunConf, on_this_host: bool = True) -> list[str]:
    """Everything wrong with `cfg`; the device checks only when the run will execute on this host."""
    name = cfg.workload.name
    if name == "train_step":
        found = _train_step(cfg)
    elif name in FUNCTIONS:
        found = FUNCTIONS[name].problems(cfg.workload, cfg.compile)
        if cfg.memory_format.name != "contiguous":
            found.append(
                f"memory_format={cfg.memory_format.name} needs a 4-D (image) input; workload={name} has none "
                "(use memory_format=contiguous)"
            )
    else:
        found = _choice("workload", name, WORKLOADS)
    if cfg.steps <= 0:
        found.append(f"steps={cfg.steps} must be positive")
    if cfg.compile.enabled:
        found += _choice("compile.mode", cfg.compile.mode, COMPILE_MODES)
        if cfg.warmup_steps < 2:
            found.append(
                f"warmup_steps={cfg.warmup_steps}: compiled runs need 2+ warm-up steps "
                "to keep compilation out of the measurement"
            )
    if cfg.warmup_steps < 0:
        found.append(f"warmup_steps={cfg.warmup_steps} must be 0 or more")
    if on_this_host:
        found += _device(cfg.device, dataclasses.astuple(cfg.precision))
    return found
