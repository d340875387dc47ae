"""fastai's own parts, for runs that compare them with torch's: its tensor types, loss and optimizer.

fastai is optional (requirements-fastai.txt). Nothing here imports it until a run asks for one of
its parts; `missing(what)` is the problem a config that needs it reports when it is not installed.
"""

import importlib.util
from collections.abc import Iterable

import torch

# The fastai module each part imports, by the run field that asks for it.
MODULES = {"input_type": "fastai.torch_core", "loss": "fastai.losses", "optim": "fastai.optimizer"}


def installed() -> bool:
    return importlib.util.find_spec("fastai") is not None


def missing(what: str) -> list[str]:
    if installed():
        return []
    return [f"{what} needs fastai, which is not installed: pip install -r requirements-fastai.txt"]


def tensor_type(name: str) -> type[torch.Tensor]:
    """fastai.torch_core.TensorImage or TensorBase."""
    from fastai import torch_core

    return getattr(torch_core, name)


def loss() -> torch.nn.Module:
    """CrossEntropyLossFlat: flattens, and casts the model's output to TensorBase (as a fastai Learner's loss does)."""
    from fastai.losses import CrossEntropyLossFlat

    return CrossEntropyLossFlat()


def optimizer(params: Iterable[torch.nn.Parameter], algorithm: str, lr: float, momentum: float):
    """fastai.optimizer.SGD or Adam; a GradScaler steps it through its `param_groups` (as fastai does)."""
    from fastai import optimizer as fastai_optimizer

    constructor = {"sgd": fastai_optimizer.SGD, "adam": fastai_optimizer.Adam}[algorithm]
    return constructor(list(params), lr=lr, mom=momentum)
