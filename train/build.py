"""Builds what a run trains: model, optimizer, loss, synthetic batches. The one place that constructs them."""

import dataclasses
import functools
import os
from collections.abc import Callable

import torch

from perfsweep.conf.schema import ModelConf, OptimConf, RunConf
from perfsweep.train import fastai_parts
from perfsweep.train import precision as prec
from perfsweep.train.inputs import InputType, get_input_type
from perfsweep.train.parallel import distributed
from perfsweep.train.workloads import compiled

MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


def _timm(model: ModelConf) -> torch.nn.Module:
    import timm
    from timm.models import get_pretrained_cfg_value

    # a model built for one input size (ViT, Swin, MLP-Mixer: timm's fixed_input_size) is built for the size asked
    sized = {"img_size": model.image_size} if get_pretrained_cfg_value(model.name, "fixed_input_size") else {}
    return timm.create_model(
        model.name, pretrained=False, num_classes=model.num_classes, in_chans=model.in_chans, **sized
    )


def _torchvision(model: ModelConf) -> torch.nn.Module:
    import torchvision

    if model.in_chans != 3:
        raise ValueError(f"torchvision models take 3 input channels; model.in_chans={model.in_chans}")
    return torchvision.models.get_model(model.name, weights=None, num_classes=model.num_classes)


def _timm_names() -> list[str]:
    import timm

    return timm.list_models()


def _torchvision_names() -> list[str]:
    import torchvision

    return torchvision.models.list_models()


# source -> (constructor, the names it knows)
MODEL_SOURCES: dict[str, tuple[Callable[[ModelConf], torch.nn.Module], Callable[[], list[str]]]] = {
    "timm": (_timm, _timm_names),
    "torchvision": (_torchvision, _torchvision_names),
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
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    replica: torch.nn.Module  # the model as this rank holds it, before compile (itself where there are no ranks)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def synthetic_batches(cfg: RunConf, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Random images and labels, made once on the device (contiguous, as a loader would hand them over)."""
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
    """The CPUs this run was given: a Slurm job's, and never more than this process may run on (its share among
    local runs at once, which a launch inside a Slurm allocation also gives); else those it may run on where they
    are fewer than its host's (taskset's). More threads than that oversubscribe them, and spinning OpenMP threads
    then slow a step down many times over."""
    mine = len(os.sched_getaffinity(0))
    for variable in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        if os.environ.get(variable, "").isdigit():
            return min(int(os.environ[variable]), mine)
    return mine if mine < (os.cpu_count() or mine) else None


DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice, before any run set it


def configure_backends(cfg: RunConf) -> dict[str, object]:
    """Set the process-wide switches this run asks for, every one of them each run (runs that share a job's
    process must not inherit each other's); returns them as they now stand."""
    prec.set_tf32(cfg.precision)
    torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    torch.set_num_threads(cfg.threads or allotted_cpus() or DEFAULT_THREADS)
    return prec.backend_flags()


def build(cfg: RunConf, device: torch.device) -> Trainer:
    memory_format = MEMORY_FORMATS[cfg.memory_format.name]
    constructor, _ = MODEL_SOURCES[cfg.model.source]
    dtype = prec.param_dtype(cfg.precision)
    model = constructor(cfg.model).to(device=device, dtype=dtype, memory_format=memory_format).train()
    model = distributed(model, cfg.dist, device)
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
        input_type=get_input_type(cfg.input_type.name),
        memory_format=memory_format,
        batches=synthetic_batches(cfg, device),
        replica=model,
    )
