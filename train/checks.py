"""Checks that a config can run here, before anything is submitted; each problem names the value and the choices."""

import dataclasses
import functools

import torch

from conf.schema import RunConf
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


def _model(cfg: RunConf) -> list[str]:
    m = cfg.model
    if m.source not in MODEL_SOURCES:
        return _choice("model.source", m.source, sorted(MODEL_SOURCES))
    if m.name not in _model_names(m.source):
        close = sorted(n for n in _model_names(m.source) if n.startswith(m.name[:4]))[:8]
        hint = f"; similar: {', '.join(close)}" if close else ""
        return [f"model.name={m.name!r} is not a {m.source} model{hint} (the other source: model.source)"]
    return []


def _device(cfg: RunConf) -> tuple[list[str], torch.device | None]:
    try:
        device = resolve_device(cfg.device)
    except RuntimeError as error:
        return [f"device={cfg.device!r}: {error}; use auto, cpu, cuda or cuda:N"], None
    if device.type == "cuda" and not torch.cuda.is_available():
        return [f"device={cfg.device!r} but CUDA is not available here; use device=auto or cpu"], None
    if device.type not in ("cpu", "cuda"):
        return [f"device={cfg.device!r}: only cpu and cuda devices are supported"], None
    return [], device


def problems(cfg: RunConf, on_this_host: bool = True) -> list[str]:
    """Everything wrong with `cfg`; the device checks only when the run will execute on this host."""
    found = _model(cfg)
    found += _choice("memory_format", cfg.memory_format.name, list(MEMORY_FORMATS))
    found += _choice("input_type", cfg.input_type.name, sorted(INPUT_TYPES))
    if cfg.compile.enabled:
        found += _choice("compile.mode", cfg.compile.mode, COMPILE_MODES)
        if cfg.warmup_steps < 2:
            found.append(
                f"warmup_steps={cfg.warmup_steps}: compiled runs need 2+ warm-up steps "
                "to keep compilation out of the measurement"
            )
    flat = dataclasses.asdict(cfg)
    for key in POSITIVE:
        group, _, name = key.rpartition(".")
        value = flat[group][name] if group else flat[name]
        if value <= 0:
            found.append(f"{key}={value} must be positive")
    if cfg.warmup_steps < 0:
        found.append(f"warmup_steps={cfg.warmup_steps} must be 0 or more")
    if on_this_host:
        device_problems, device = _device(cfg)
        found += device_problems
        if device is not None:
            found += [p for p in [precision.unsupported(cfg.precision, device)] if p]
    return found
