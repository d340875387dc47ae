"""What a training step takes from the user's model and batch factory, and how a run says they did not give it.

- The batch factory (model.inputs) returns (inputs, targets).
  The inputs are a tensor, a tuple or a dict of them; the targets are a tensor, or None.
- With targets, the model returns a tensor of logits: (N, C) against class indices (N,), or (N, T, C) against (N, T).
- With no targets, the model returns its loss: a tensor of one element, a dict with "loss", or an output with `.loss`.

The factory's batches are checked when they are made, before anything is timed.
The model's output is looked at only once the loss, the backward or the model itself has failed.
So a step that keeps the contract pays nothing for it, and no check reads a device value.
The failure becomes a ContractError: one line in the user's terms (shapes, types, the file and line of the model's
forward or of the factory), then the user's frames.
"""

import dataclasses
import inspect
import traceback
from pathlib import Path
from typing import Any

import torch

from perfsweep.train import user_targets

RETURNS = "a training step needs a tensor of logits, or the loss where model.inputs gives no targets"
A_LOSS = "the step needs the loss, one element (a tensor, a dict's 'loss' or an output's .loss)"
BATCH = "(inputs, targets): inputs a tensor, tuple or dict of tensors, targets a tensor or None"


class ContractError(Exception):
    """A model or batch factory of the user's that does not give what the step takes.

    Its message is one line. `frames` are the places in the user's code it names.
    """

    def __init__(self, message: str, frames: list[traceback.FrameSummary]):
        super().__init__(message)
        self.frames = [frame for frame in frames if frame is not None]

    def traceback(self, code: tuple[Path, ...]) -> str:
        """The line, then the places it names, then the frames of the user's code the error it stands for raised in.

        `code` is the user's code, as user_targets.roots finds it.
        """
        lines = [f"{type(self).__name__}: {self}\n", *traceback.format_list(self.frames)]
        cause = self.__cause__
        if cause is not None and user_targets.user_error(cause, code) is cause:
            lines += ["\n", user_targets.user_traceback(cause, code)]
        return "".join(lines)


def place(function: Any) -> traceback.FrameSummary | None:
    """Where a function is defined, as a frame: its file, the line of its def, its name (None: not Python's)."""
    code = getattr(inspect.unwrap(function), "__code__", None) if callable(function) else None
    return traceback.FrameSummary(code.co_filename, code.co_firstlineno, code.co_qualname) if code else None


def shown(function: Any) -> str:
    """A function's file and line as a message gives them: the path from its top-level package (mylib/models.py:12)."""
    frame = place(function)
    if frame is None:
        return ""
    path = Path(frame.filename)
    depth = getattr(inspect.unwrap(function), "__module__", "").count(".") + 1 + (path.stem == "__init__")
    return f" ({'/'.join(path.parts[-depth:])}:{frame.lineno})"


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a run's model and batches come from, as the contract's messages name them."""

    model: torch.nn.Module  # as built, before it is wrapped across ranks or compiled
    factory: Any  # the batch factory (model.inputs), None for perfsweep's images
    factory_path: str  # model.inputs
    num_classes: int  # perfsweep's labels are below it

    @property
    def model_name(self) -> str:
        """The model's class and where its forward is: imagelib.models.Tagger (imagelib/models.py:36)."""
        cls = type(self.model)
        return f"{cls.__module__}.{cls.__qualname__}{shown(cls.forward)}"

    @property
    def factory_name(self) -> str:
        return f"{self.factory_path}{shown(self.factory)}"

    def frames(self) -> list[traceback.FrameSummary]:
        """The model's forward and the factory, where they are Python code."""
        return [place(type(self.model).forward), place(self.factory)]


def describe(value: Any) -> str:
    """What a value is, as a message names it: a tensor of shape (16, 8), a tuple of 2, a dict of 'loss', 'logits'..."""
    if isinstance(value, torch.Tensor):
        return f"a {'float ' if value.is_floating_point() else ''}tensor of shape {tuple(value.shape)}"
    if value is None:
        return "None"
    kind = type(value).__name__
    if isinstance(value, dict):
        keys = ", ".join(repr(key) for key in list(value)[:6])
        return f"a {kind} of {keys}" if keys else f"an empty {kind}"
    if type(value) in (tuple, list):
        return f"a {kind} of {len(value)}"
    if isinstance(value, tuple | list):  # a named tuple
        return f"a {kind} (a {'tuple' if isinstance(value, tuple) else 'list'} of {len(value)})"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def checked_batch(made: Any, factory: Any, path: str) -> tuple[Any, Any]:
    """A batch that the factory at `path` (model.inputs) made, as the step takes it.

    Raises:
        ContractError: where it is not (inputs, targets) of the kinds the step takes.
    """
    said, frames = f"model.inputs={path}{shown(factory)}", [place(factory)]
    if not (isinstance(made, tuple | list) and len(made) == 2):
        raise ContractError(f"{said} returned {describe(made)}; a batch factory returns {BATCH}", frames)
    inputs, labels = made
    if not isinstance(inputs, torch.Tensor | tuple | list | dict):
        raise ContractError(f"{said} gave inputs that are {describe(inputs)}; it returns {BATCH}", frames)
    if not (labels is None or isinstance(labels, torch.Tensor)):
        raise ContractError(f"{said} gave targets that are {describe(labels)}; it returns {BATCH}", frames)
    return inputs, labels


def passes(error: Exception) -> bool:
    """Errors that are not the contract's: the device's (out of memory, where a smaller batch may follow; CUDA's)."""
    device = isinstance(error, torch.OutOfMemoryError) or type(error).__name__ == "AcceleratorError"
    return device or "CUDA error" in str(error)


def loss_error(origin: Origin, out: Any, labels: Any, error: Exception) -> ContractError:
    """Why the loss could not be taken of the model's output and the batch's targets."""
    frames = origin.frames()
    if labels is None:
        return ContractError(f"model {origin.model_name} returned {describe(out)} with no targets: {A_LOSS}", frames)
    if not isinstance(out, torch.Tensor):
        return ContractError(f"model {origin.model_name} returned {describe(out)}; {RETURNS}", frames)
    logits = f"logits of shape {tuple(out.shape)}"
    if origin.factory is None:
        got = (
            f"the loss got {logits} from model {origin.model_name} and perfsweep's labels of shape "
            f"{tuple(labels.shape)}"
        )
    else:
        got = f"the loss got {logits} and targets of shape {tuple(labels.shape)} from {origin.factory_name}"
    return ContractError(f"{got}: {_why(out, labels, origin, error)}", frames)


def _why(out: torch.Tensor, labels: torch.Tensor, origin: Origin, error: Exception) -> str:
    """What the logits and targets must be, for the way they differ; else what the loss said."""
    pairs = "(N, C) against class indices (N,), or (N, T, C) against (N, T)"
    if labels.is_floating_point():
        if labels.shape != out.shape:
            return "float targets are class probabilities of the logits' shape; class indices are integers (torch.long)"
    elif out.dim() != labels.dim() + 1:
        return f"the logits have one dimension more than the class indices: {pairs}"
    elif out.shape[0] != labels.shape[0]:
        return f"their batch sizes differ, {out.shape[0]} and {labels.shape[0]}"
    elif out.shape[:-1] != labels.shape:
        return f"the logits but their last dimension (the classes) must have the targets' shape: {pairs}"
    elif labels.dtype != torch.long:
        return f"class indices are torch.long, not {str(labels.dtype).removeprefix('torch.')}"
    elif origin.factory is None:  # perfsweep's labels are below model.num_classes
        return (
            f"the logits' last dimension must be model.num_classes={origin.num_classes} (the model's constructor gets "
            "num_classes where it takes it)"
        )
    else:
        return f"the class indices must be below {out.shape[-1]}, the logits' last dimension"
    return str(error).strip().splitlines()[0]


def not_a_loss(origin: Origin, loss: Any) -> ContractError:
    """A model that returned something of more than one element as the loss of a batch without targets."""
    return ContractError(
        f"model {origin.model_name} returned {describe(loss)} with no targets: {A_LOSS}", origin.frames()
    )


def forward_error(origin: Origin, error: Exception) -> ContractError | None:
    """Why the model failed on a batch, where the batch is what it could not take: floats into an Embedding.

    That is the error of a model of tokens given perfsweep's images, which probably needs a batch factory.

    Returns:
        None where the error is another.
    """
    embedding, given = _embedding_given(error)
    if embedding is None or not isinstance(given, torch.Tensor) or not given.is_floating_point():
        return None
    names = {id(module): name for name, module in origin.model.named_modules()}
    layer = f"its {type(embedding).__name__} {names.get(id(embedding), '')}".rstrip()
    if origin.factory is None:
        return ContractError(
            f"model {origin.model_name} got float images of shape {tuple(given.shape)}, and {layer} takes integer "
            "indices: it probably needs model.inputs=PATH, a batch factory (docs/your-code.md)",
            origin.frames(),
        )
    return ContractError(
        f"model {origin.model_name} got {describe(given)} from {origin.factory_name}, and {layer} takes integer "
        "indices (torch.long)",
        origin.frames(),
    )


def _embedding_given(error: Exception) -> tuple[torch.nn.Module | None, Any]:
    """The Embedding whose forward the error was raised in, and what it was given."""
    frame = error.__traceback__
    while frame is not None:
        local = frame.tb_frame.f_locals
        module = local.get("self")
        if frame.tb_frame.f_code.co_name == "forward" and isinstance(
            module, torch.nn.Embedding | torch.nn.EmbeddingBag
        ):
            return module, local.get("input")
        frame = frame.tb_next
    return None, None
