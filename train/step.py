"""The model's step as workloads, and their checks.

- training: data -> forward with loss -> backward -> optimizer;
- inference: data -> forward, in eval mode under torch.inference_mode.
"""

import contextlib
import difflib
import functools
import json
import os
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from perfsweep.conf.schema import RunConf
from perfsweep.train import contract, fastai_parts, parallel
from perfsweep.train.build import ALGORITHMS, LOSSES, MODEL_SOURCES, OPTIMIZERS, build
from perfsweep.train.inputs import INPUT_TYPES
from perfsweep.train.parallel import delay_s, synced, without_sync
from perfsweep.train.registry import choice
from perfsweep.train.timing import StepClock
from perfsweep.train.workloads import WORKLOADS, Workload

POSITIVE = ("data_batches", "model.batch_size", "model.image_size", "model.num_classes", "model.in_chans")


def _names_cache() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "perfsweep" / "model-names"


@functools.cache
def _model_names(source: str) -> frozenset[str]:
    """The models a source knows by name.

    A library's are listed once per release of it, and kept on disk.
    So a launch that checks a model's name does not import the library (timm imports torch._dynamo: seconds).
    perfsweep's own are those its registry holds now.
    """
    found = MODEL_SOURCES[source]
    try:
        version = metadata.version(found.library) if found.library else ""
    except metadata.PackageNotFoundError:
        version = ""
    if not version or "dev" in version or "+" in version:  # a build of its source may change under one version
        return frozenset(found.names())
    listed = _names_cache() / f"{found.library}-{version}.json"
    try:
        return frozenset(json.loads(listed.read_text()))
    except (OSError, ValueError):
        pass
    names = frozenset(found.names())
    with contextlib.suppress(OSError):  # not kept: listed again next time
        listed.parent.mkdir(parents=True, exist_ok=True)
        partial = listed.with_name(f".{listed.name}.{os.getpid()}")
        partial.write_text(json.dumps(sorted(names)))
        os.replace(partial, listed)
    return names


@functools.cache
def model_problems(source: str, name: str) -> tuple[str, ...]:
    if source not in MODEL_SOURCES:
        return tuple(choice("model.source", source, sorted(MODEL_SOURCES)))
    if name not in _model_names(source):
        names = sorted(_model_names(source))
        close = (
            difflib.get_close_matches(name, names, n=8, cutoff=0.75) or [n for n in names if n.startswith(name[:4])][:8]
        )
        hint = f"; similar: {', '.join(close)}" if close else ""
        return (f"model.name={name!r} is not a {source} model{hint} (the other source: model.source)",)
    return ()


def model_problems_of(cfg: RunConf) -> list[str]:
    """What both model workloads check.

    - a known model, memory format and input type;
    - fastai, where they need it;
    - positive sizes.

    The user's model and input type (a _target_) are checked with the other import paths.
    """
    problems = [] if cfg.model._target_ else list(model_problems(cfg.model.source, cfg.model.name))
    if not cfg.input_type._target_:
        problems += choice("input_type", cfg.input_type.name, sorted(INPUT_TYPES))
    if (
        not cfg.input_type._target_
        and cfg.input_type.name in INPUT_TYPES
        and INPUT_TYPES[cfg.input_type.name].needs_fastai
    ):
        problems += fastai_parts.missing(f"input_type={cfg.input_type.name}")
    return problems + size_problems(cfg)


def size_problems(cfg: RunConf) -> list[str]:
    """Sizes below 1: wrong whoever builds the model, a step of the user's own included."""
    values = {key: functools.reduce(getattr, key.split("."), cfg) for key in POSITIVE}
    return [f"{key}={value} must be positive" for key, value in values.items() if value <= 0]


@WORKLOADS.register("train_step")
class TrainStep(Workload):
    """data -> forward (with loss) -> backward -> optimizer (step, scaler update, zero_grad)."""

    phases = ("data", "forward", "backward", "optimizer")

    @classmethod
    def problems(cls, cfg: RunConf) -> list[str]:
        """What the training step checks: those of model_problems_of, plus a known loss and optimizer.

        fastai is checked where the loss or optimizer needs it.
        """
        issues = model_problems_of(cfg) + parallel.problems(cfg)
        issues += choice("loss", cfg.loss.name, list(LOSSES))
        issues += choice("optim", cfg.optim.name, list(OPTIMIZERS))
        issues += choice("optim.algorithm", cfg.optim.algorithm, ALGORITHMS)
        for group in ("loss", "optim"):
            if getattr(cfg, group).name == "fastai":
                issues += fastai_parts.missing(f"{group}=fastai")
        return issues

    def __init__(self, cfg: RunConf, device: torch.device):
        super().__init__(cfg, device)
        self.trainer = build(cfg, device)
        self.output_type: type | None = None
        self.delay_s = delay_s(cfg.dist)
        self.across_ranks = cfg.dist.name != "none"  # whose steps may go without gradient sync

    def step(self, index: int, clock: StepClock) -> torch.Tensor:
        t = self.trainer
        clock.start()
        x, y = t.batches[index % len(t.batches)]
        x = t.to_model(x)
        if self.delay_s:
            time.sleep(self.delay_s)
        clock.mark()
        sync = not self.across_ranks or synced(index, self.cfg)
        if sync:
            out, loss = self.forward_backward(x, y, clock)
        else:
            with without_sync(t.replica, self.cfg.dist):
                out, loss = self.forward_backward(x, y, clock)
        if sync or self.cfg.dist.name == "ddp":  # FSDP2 without sync leaves the optimizer no gradients to step
            t.scaler.step(t.optimizer)
            t.scaler.update()
        t.zero_grad()
        clock.mark()
        self.output_type = type(out)
        return loss.detach()

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor, clock: StepClock) -> tuple[Any, torch.Tensor]:
        t = self.trainer
        with t.autocast():
            out = t.forward(x)
            loss = t.loss(out, y)
        clock.mark()
        try:
            t.scaler.scale(loss).backward()
        except RuntimeError as error:  # a model's own loss of more than one element has no implicit gradient
            if y is None and isinstance(loss, torch.Tensor) and loss.numel() != 1:
                raise contract.not_a_loss(t.origin, loss) from error
            raise
        clock.mark()
        return out, loss

    def summary(self, steps_per_s: float) -> dict[str, Any]:
        output = self.output_type.__name__ if self.output_type else ""
        params = sum(p.numel() for p in self.trainer.model.parameters())
        batch = self.cfg.model.batch_size
        return {"samples_per_s": steps_per_s * batch, "output_type": output, "params": params, "batch_size": batch}


@WORKLOADS.register("infer_step")
class InferStep(TrainStep):
    """data -> forward, as a served model runs.

    The model is in eval mode, under torch.inference_mode (no autograd record).
    It has the same model, memory format, precision, input type and compile axes as the training step.
    """

    phases = ("data", "forward")

    @classmethod
    def problems(cls, cfg: RunConf) -> list[str]:
        return model_problems_of(cfg)

    def __init__(self, cfg: RunConf, device: torch.device):
        super().__init__(cfg, device)
        self.trainer.model.eval()

    def step(self, index: int, clock: StepClock) -> None:
        t = self.trainer
        clock.start()
        x, _ = t.batches[index % len(t.batches)]
        x = t.to_model(x)
        clock.mark()
        with torch.inference_mode(), t.autocast():
            out = t.forward(x)
        clock.mark()
        self.output_type = type(out)
        return None
