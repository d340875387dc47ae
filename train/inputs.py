"""Input-tensor types: how a batch is wrapped before it reaches the model.

Each type is a registered class with two hooks: `wrap` (part of the data phase,
where a data pipeline would hand over its tensor type) and `before_model` (the
last thing before the forward pass). A type of the user's own is named by
import path (input_type._target_: a Tensor subclass, or a function that wraps a
tensor); perfsweep's are registered with `@register("name")` and a yaml file in
conf/input_type/ (docs/extending.md).
"""

import inspect
from typing import Any

import torch

from perfsweep.conf.schema import InputTypeConf
from perfsweep.train import fastai_parts, user_targets
from perfsweep.train.registry import Registry

INPUT_TYPES: Registry[type["InputType"]] = Registry("input type")
register = INPUT_TYPES.register


def get_input_type(conf: InputTypeConf | str) -> "InputType":
    """The input type a run's config names: the user's (input_type._target_), else a registered one by name."""
    if isinstance(conf, str):
        return INPUT_TYPES[conf]()
    if conf._target_:
        return TargetInput(user_targets.locate("input_type._target_", conf._target_))
    return INPUT_TYPES[conf.name]()


class SubClassedTensor(torch.Tensor):
    """A pass-through subclass: nothing but a new type (seed 000)."""


class SubClassedTensorNoTF(torch.Tensor):
    """A pass-through subclass whose results are plain Tensors: no re-wrapping of outputs."""

    __torch_function__ = torch._C._disabled_torch_function_impl


class TensorBase(torch.Tensor):
    """A subclass that carries metadata through torch ops, after fastai's TensorBase.

    `__torch_function__` re-wraps every result (the default behaviour) and copies
    the metadata of the first TensorBase argument onto each TensorBase result.
    """

    def __new__(cls, data: torch.Tensor, **meta: Any) -> "TensorBase":
        result = data.as_subclass(cls)
        result.__dict__.update(meta)
        return result

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        source = next((a for a in _leaves(args, kwargs) if isinstance(a, TensorBase) and a.__dict__), None)
        if source is not None:
            for out in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(out, TensorBase) and out is not source:
                    out.__dict__.update(source.__dict__)
        return result


def _leaves(args: tuple, kwargs: dict | None):
    for arg in (*args, *(kwargs or {}).values()):
        if isinstance(arg, (tuple, list)):
            yield from arg
        else:
            yield arg


class InputType:
    """What an input type does to a batch: `wrap` it (in the data phase), then `before_model` (the last thing
    before the forward pass). Registered as <name>, a class is named after it: tensor -> TensorInput."""

    needs_fastai = False

    def wrap(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def before_model(self, x: torch.Tensor) -> torch.Tensor:
        return x


class TargetInput(InputType):
    """The user's own type: a Tensor subclass the batch is cast to (as_subclass), or a function that wraps it."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.subclass = inspect.isclass(target) and issubclass(target, torch.Tensor)

    def wrap(self, x: torch.Tensor) -> torch.Tensor:
        return x.as_subclass(self.target) if self.subclass else self.target(x)


@register("tensor")
class TensorInput(InputType):
    """A plain torch.Tensor batch: the baseline."""


@register("subclass")
class SubclassInput(InputType):
    """A pass-through torch.Tensor subclass."""

    def wrap(self, x: torch.Tensor) -> torch.Tensor:
        return x.as_subclass(SubClassedTensor)


@register("subclass_notf")
class SubclassNotfInput(InputType):
    """A subclass with __torch_function__ disabled."""

    def wrap(self, x: torch.Tensor) -> torch.Tensor:
        return x.as_subclass(SubClassedTensorNoTF)


@register("tensorbase")
class TensorbaseInput(InputType):
    """A subclass that keeps metadata across ops, as fastai's TensorBase does."""

    def wrap(self, x: torch.Tensor) -> torch.Tensor:
        return TensorBase(x, source="synthetic")


@register("cast")
class CastInput(TensorbaseInput):
    """The fix: keep the subclass through the data pipeline, cast it away before the model."""

    def before_model(self, x: torch.Tensor) -> torch.Tensor:
        return x.as_subclass(torch.Tensor)


class FastaiInput(InputType):
    """A batch as a fastai data pipeline hands it over: fastai's own tensor type (needs fastai)."""

    needs_fastai = True
    fastai_type = "TensorImage"

    def __init__(self) -> None:
        self.cls = fastai_parts.tensor_type(self.fastai_type)

    def wrap(self, x: torch.Tensor) -> torch.Tensor:
        return self.cls(x)


@register("tensorimage")
class TensorimageInput(FastaiInput):
    """fastai's TensorImage."""


@register("fastai_tensorbase")
class FastaiTensorbaseInput(FastaiInput):
    """fastai's TensorBase."""

    fastai_type = "TensorBase"
