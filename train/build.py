"""Builds what a run trains: model, optimizer, loss, synthetic batches.

It is the one place that constructs them.
"""

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch.utils._pytree import tree_map_only

from perfsweep.conf.schema import ModelConf, OptimConf, RunConf
from perfsweep.train import contract, fastai_parts, user_targets
from perfsweep.train import precision as prec
from perfsweep.train.inputs import InputType, get_input_type
from perfsweep.train.own_models import MODELS
from perfsweep.train.parallel import distributed
from perfsweep.train.workloads import compiled

MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


def _kwargs(model: ModelConf) -> dict[str, Any]:
    """model.kwargs, with any `_target_` inside them built, as Hydra's instantiate does.

    Such a `_target_` may be a layer's class or a partial.
    """
    from hydra.utils import instantiate

    return instantiate(dict(model.kwargs), _convert_="all") if model.kwargs else {}


def _timm(model: ModelConf) -> torch.nn.Module:
    import timm
    from timm.models import get_pretrained_cfg_value

    # A model built for one input size is built for the size asked.
    # Those are ViT, Swin, MLP-Mixer...: timm's fixed_input_size.
    sized = {"img_size": model.image_size} if get_pretrained_cfg_value(model.name, "fixed_input_size") else {}
    return timm.create_model(
        model.name, pretrained=False, num_classes=model.num_classes, in_chans=model.in_chans, **sized, **_kwargs(model)
    )


def _torchvision(model: ModelConf) -> torch.nn.Module:
    import torchvision

    if model.in_chans != 3:
        raise ValueError(f"torchvision models take 3 input channels; model.in_chans={model.in_chans}")
    return torchvision.models.get_model(model.name, weights=None, num_classes=model.num_classes, **_kwargs(model))


def _target(model: ModelConf) -> torch.nn.Module:
    """The user's model: model._target_ called with model.kwargs, by Hydra's instantiate.

    It also gets num_classes and in_chans where it takes them.
    """
    from hydra.utils import instantiate

    constructor = user_targets.locate("model._target_", model._target_)
    try:
        taken = inspect.signature(constructor).parameters
    except (TypeError, ValueError):  # a builtin or C extension without a signature
        taken = {}
    wide = any(p.kind == p.VAR_KEYWORD for p in taken.values())
    data = user_targets.SHAPED_BY_DATA
    shaped = {k: getattr(model, k) for k in data if k not in model.kwargs and (k in taken or wide)}
    built = instantiate({"_target_": model._target_, **shaped, **model.kwargs}, _convert_="all")
    if not isinstance(built, torch.nn.Module):
        raise TypeError(f"model._target_={model._target_} returned {type(built).__name__}, not a torch.nn.Module")
    return built


def _perfsweep(model: ModelConf) -> torch.nn.Module:
    return MODELS[model.name](num_classes=model.num_classes, in_chans=model.in_chans, **_kwargs(model))


def build_model(model: ModelConf) -> torch.nn.Module:
    """The run's model, on the CPU in float32, in training mode: the user's (model._target_), one of a library's or
    one of perfsweep's own."""
    if model._target_:
        return _target(model)
    return MODEL_SOURCES[model.source].build(model)


def _timm_names() -> list[str]:
    import timm

    return timm.list_models()


def _torchvision_names() -> list[str]:
    import torchvision

    return torchvision.models.list_models()


class ModelSource(NamedTuple):
    """Where models come from by name (model.source)."""

    build: Callable[[ModelConf], torch.nn.Module]
    names: Callable[[], list[str]]  # the names it knows
    library: str | None  # the package that lists them, whose release a listing is kept for; None: perfsweep's own


MODEL_SOURCES: dict[str, ModelSource] = {
    "timm": ModelSource(_timm, _timm_names, "timm"),
    "torchvision": ModelSource(_torchvision, _torchvision_names, "torchvision"),
    "perfsweep": ModelSource(_perfsweep, lambda: sorted(MODELS), None),
}


def _torch_optimizer(params, conf: OptimConf) -> torch.optim.Optimizer:
    if conf.algorithm == "adam":
        return torch.optim.Adam(params, lr=conf.lr, betas=(conf.momentum, 0.99))
    return torch.optim.SGD(params, lr=conf.lr, momentum=conf.momentum)


def _fastai_optimizer(params, conf: OptimConf):
    return fastai_parts.optimizer(params, conf.algorithm, conf.lr, conf.momentum)


OPTIMIZERS = {"torch": _torch_optimizer, "fastai": _fastai_optimizer}
ALGORITHMS = ("sgd", "adam")
LOSSES: dict[str, Callable[[], torch.nn.Module]] = {"torch": torch.nn.CrossEntropyLoss, "fastai": fastai_parts.loss}


# A batch: its inputs and its targets.
# The inputs are an image tensor; from model.inputs, a tensor, a tuple or a dict of them.
# The targets are a tensor, or None where the model returns its loss.
Batch = tuple[Any, Any]


@dataclasses.dataclass
class Trainer:
    """Everything a training step touches, built before timing starts."""

    model: torch.nn.Module
    loss_fn: torch.nn.Module
    optimizer: torch.optim.Optimizer
    zero_grad: Callable[[], None]
    scaler: torch.amp.GradScaler
    autocast: Callable[[], object]
    input_type: InputType
    memory_format: torch.memory_format
    batches: list[Batch]
    replica: torch.nn.Module  # the model as this rank holds it, before compile (itself where there are no ranks)
    origin: contract.Origin  # where the model and batches come from, as a broken contract names them
    images: bool = True  # the batches are perfsweep's images, not the user's (model.inputs)

    def to_model(self, x: Any) -> Any:
        """The data phase's work on a batch's inputs.

        It applies the memory format (of image tensors), then the input type.
        """
        if self.images:
            return self.input_type.before_model(self.input_type.wrap(x.contiguous(memory_format=self.memory_format)))
        return tree_map_only(torch.Tensor, self._leaf, x)

    def _leaf(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=self.memory_format) if x.dim() == 4 else x
        return self.input_type.before_model(self.input_type.wrap(x))

    def forward(self, x: Any) -> Any:
        """The model on a batch's inputs: model(x), model(*x) for a tuple, model(**x) for a dict.

        Raises:
            ContractError: where the model could not take the batch (floats into an Embedding).
        """
        try:
            if self.images or isinstance(x, torch.Tensor):
                return self.model(x)
            return self.model(**x) if isinstance(x, dict) else self.model(*x)
        except Exception as error:
            broken = None if contract.passes(error) else contract.forward_error(self.origin, error)
            if broken is None:
                raise
            raise broken from error

    def loss(self, out: Any, y: Any) -> torch.Tensor:
        """The loss of the model's output against the targets.

        With no targets, it is the loss the model returned.

        Raises:
            ContractError: where the output and the targets are not what the loss takes.
        """
        try:
            if self.images:
                return self.loss_fn(out, y)
            if y is None:
                return out if isinstance(out, torch.Tensor) else out["loss"] if isinstance(out, dict) else out.loss
            if out.dim() > 2 and out.dim() == y.dim() + 1:  # a prediction per position ([B, T, classes] against [B, T])
                return self.loss_fn(out.flatten(0, -2), y.flatten())
            return self.loss_fn(out, y)
        except Exception as error:
            if contract.passes(error):
                raise
            raise contract.loss_error(self.origin, out, y, error) from error


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def user_batches(cfg: RunConf, device: torch.device) -> list[Batch]:
    """The user's batches: model.inputs called (batch_size, device) once per batch, each checked.

    Their floating tensors are cast to the precision's dtype, where it casts the model's.
    """
    factory = user_targets.locate("model.inputs", cfg.model.inputs)
    dtype = prec.param_dtype(cfg.precision)
    batches = []
    for _ in range(cfg.data_batches):
        made = contract.checked_batch(factory(cfg.model.batch_size, device), factory, cfg.model.inputs)
        batches.append(tuple(tree_map_only(torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t, made)))
    return batches


def synthetic_batches(cfg: RunConf, device: torch.device) -> list[Batch]:
    """Random images and labels, made once on the device; or the user's batches (model.inputs).

    The images are contiguous, as a loader would hand them over.
    """
    if cfg.model.inputs:
        return user_batches(cfg, device)
    m = cfg.model
    shape = (m.batch_size, m.in_chans, m.image_size, m.image_size)
    dtype = prec.param_dtype(cfg.precision)
    return [
        (
            torch.randn(shape, device=device, dtype=dtype),
            torch.randint(0, m.num_classes, (m.batch_size,), device=device),
        )
        for _ in range(cfg.data_batches)
    ]


def allotted_cpus() -> int | None:
    """How many CPUs this run was given.

    - In a Slurm job: the job's, never more than this process may run on.
    - Else: those it may run on, where they are fewer than its host's (taskset's).

    What this process may run on can be its share among local runs at once.
    A launch inside a Slurm allocation gives such shares too.
    More threads than these CPUs oversubscribe them.
    Spinning OpenMP threads then slow a step down many times over.

    Returns:
        The count, or None where the run may use all its host's CPUs.
    """
    mine = len(os.sched_getaffinity(0))
    for variable in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        if os.environ.get(variable, "").isdigit():
            return min(int(os.environ[variable]), mine)
    return mine if mine < (os.cpu_count() or mine) else None


DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice, before any run set it


def configure_backends(cfg: RunConf) -> dict[str, object]:
    """Set the process-wide switches this run asks for, every one of them each run.

    Runs that share a job's process must not inherit each other's.

    Returns:
        The switches as they stand once set.
    """
    prec.set_tf32(cfg.precision)
    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    torch.set_num_threads(cfg.threads or allotted_cpus() or DEFAULT_THREADS)
    return prec.backend_flags()


def build(cfg: RunConf, device: torch.device) -> Trainer:
    memory_format = MEMORY_FORMATS[cfg.memory_format.name]
    dtype = prec.param_dtype(cfg.precision)
    # FSDP2 shards only contiguous parameters: its runs take the memory format through their inputs, whose
    # convolutions keep it in the activations
    params_format = torch.contiguous_format if cfg.dist.name == "fsdp" else memory_format
    built = build_model(cfg.model).to(device=device, dtype=dtype, memory_format=params_format).train()
    factory = user_targets.locate("model.inputs", cfg.model.inputs) if cfg.model.inputs else None
    origin = contract.Origin(built, factory, cfg.model.inputs, cfg.model.num_classes)
    model = distributed(built, cfg.dist, device)
    optimizer = OPTIMIZERS[cfg.optim.name](model.parameters(), cfg.optim)
    if cfg.optim.name == "torch":
        zero_grad = functools.partial(optimizer.zero_grad, set_to_none=True)
    else:  # fastai's zero_grad takes no arguments and zeroes the grads in place
        zero_grad = optimizer.zero_grad
    return Trainer(
        model=compiled(model, cfg.compile),
        loss_fn=LOSSES[cfg.loss.name](),
        optimizer=optimizer,
        zero_grad=zero_grad,
        scaler=prec.grad_scaler(cfg.precision, device),
        autocast=lambda: prec.autocast(cfg.precision, device),
        input_type=get_input_type(cfg.input_type),
        memory_format=memory_format,
        batches=synthetic_batches(cfg, device),
        replica=model,
        origin=origin,
        images=not cfg.model.inputs,
    )
