"""Checks that a run's config can run here, before anything is submitted.

Each problem names the value and the choices.
The workload's own checks come from its class (train/workloads.py).
"""

import dataclasses
import functools

import torch

from perfsweep.conf.schema import PrecisionConf, RunConf
from perfsweep.train import precision, user_targets
from perfsweep.train.build import resolve_device
from perfsweep.train.catalog import WORKLOADS, workload_class
from perfsweep.train.parallel import device_problems
from perfsweep.train.registry import choice
from perfsweep.train.step import size_problems

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@functools.cache
def _device(name: str, precision_fields: tuple) -> tuple[str, ...]:
    """What stops a precision (its fields) on device `name` here.

    The answer depends on this host only, so it is cached.
    """
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


@functools.cache
def _backend(name: str) -> tuple[str, ...]:
    """What stops torch.compile backend `name`: one perfsweep's torch has not registered (entry points included).

    Inductor, the default, is always there; another is looked up in torch._dynamo (1 s of a CPU, once).
    """
    if name == "inductor":
        return ()
    from torch._dynamo import list_backends

    every = list_backends(exclude_tags=())  # the debug and experimental ones too: a user may mean one
    if name in every:
        return ()
    debugging = [b for b in ("aot_eager", "eager") if b in every]
    listed = ", ".join(list_backends())
    return (
        f"compile.backend={name!r} is not a backend of perfsweep's torch; its backends: {listed}, and for debugging "
        f"{', '.join(debugging)} (torch._dynamo.list_backends(exclude_tags=()) lists every one)",
    )


def problems(cfg: RunConf, on_this_host: bool = True, ranks_here: bool = True) -> list[str]:
    """Everything wrong with `cfg`.

    The device is checked only when the run will execute on this host.
    Its ranks are checked against this process's CPUs and GPUs where they share them (`ranks_here`).
    Ranks that are Slurm tasks each have their own.
    What stops ranks anywhere is checked always (NCCL on a CPU).
    The import paths of the user's code are imported here, as the run will import them.
    """
    name = cfg.workload.name
    issues = user_targets.problems(cfg)
    if issues:
        return issues  # what the rest checks is built from them
    if cfg.workload._target_ or name in WORKLOADS:
        issues = workload_class(cfg.workload).problems(cfg)
    else:
        issues = choice("workload", name, sorted(WORKLOADS))
    if cfg.workload._target_ and "model" in cfg.workload.reads:
        issues = size_problems(cfg) + issues  # a step of the user's may build its model itself, but not at size 0
    if cfg.steps <= 0:
        issues.append(f"steps={cfg.steps} must be positive")
    if cfg.dist.name != "none" and "dist" not in cfg.workload.reads:
        issues.append(
            f"dist={cfg.dist.name} with workload={name}: it runs in one process; the training step "
            "(workload=train_step) is what runs across ranks"
        )
    if cfg.compile.enabled:
        issues += choice("compile.mode", cfg.compile.mode, COMPILE_MODES)
        if cfg.torch == "current" and not cfg.env.packages:  # another environment's torch has backends of its own
            issues += list(_backend(cfg.compile.backend))
        if cfg.warmup_steps < 2:
            issues.append(
                f"warmup_steps={cfg.warmup_steps}: compiled runs need 2+ warm-up steps "
                "to keep compilation out of the measurement"
            )
    if cfg.warmup_steps < 0:
        issues.append(f"warmup_steps={cfg.warmup_steps} must be 0 or more")
    if cfg.threads is not None and cfg.threads < 1:
        issues.append(
            f"threads={cfg.threads} must be 1 or more (or null: the CPUs Slurm allotted, else torch's default)"
        )
    if on_this_host:
        issues += _device(cfg.device, dataclasses.astuple(cfg.precision))
    return issues + device_problems(cfg, here=on_this_host and ranks_here)
