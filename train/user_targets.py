"""Code of the user's own that a run names by import path.

This module:

- finds it;
- checks its kind before anything is submitted;
- calls a batch factory once, for a batch of 2 on the CPU, where a run asks for channels_last: its inputs must hold an
  image;
- reports its errors with the user's frames.

A path is dotted (mylib.models.SmallCNN).
The longest prefix that imports is the module; the rest are attributes.
The launcher checks each path of a plan here.
It imports the user's modules to do so, as the runs will.
A run builds what the paths name where it runs.
"""

import functools
import importlib
import inspect
import os
import pkgutil
import reprlib
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from perfsweep.conf.import_paths import targets_of
from perfsweep.records.code import CODE_VERSION, PROJECT_ROOT, is_working_copy, module_place
from perfsweep.sweeps.keys import did_you_mean

PERFSWEEP = PROJECT_ROOT  # perfsweep's own code: never the user's frames


class TargetError(ValueError):
    """An import path that names nothing, or a thing of the wrong kind.

    Its message names the key, the path, and what is there.
    """


# The nearest of a user's own names: held to a closer match than the schema's keys.
_nearest = functools.partial(did_you_mean, cutoff=0.7)


def _public(module: Any) -> list[str]:
    """What a module (or class) defines: its public names, but the modules it imported; a package's modules too."""
    names = {n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)}
    names |= {m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))}
    return sorted(n for n in names if not n.startswith("_"))


def _import(module: str) -> Any:
    """The module, or None where it does not exist.

    An error raised while importing it is the user's, and propagates.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is not None and (module == error.name or module.startswith(f"{error.name}.")):
            return None  # the module (or a package above it) is not there, rather than something it imports
        raise


def locate(key: str, path: str) -> Any:
    """The object that `path` names.

    Raises:
        TargetError: where it names nothing; it names `key`, the path and what was found.
    """
    parts = path.split(".")
    if not path or not all(part.isidentifier() for part in parts):
        raise TargetError(f"{key}={path!r} is not an import path: dotted names, as in mylib.models.SmallCNN")
    module, found = None, 0
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        try:
            module = _import(name)
        except Exception as error:
            raised = user_error(error, roots([name])) or error
            raise TargetError(f"{key}={path}: importing {name} raised {type(raised).__name__}: {raised}") from error
        if module is not None:
            found = end
            break
    if module is None:
        return _no_module(key, path)
    target = module
    for depth, attribute in enumerate(parts[found:], start=found):
        if not hasattr(target, attribute):
            owner = ".".join(parts[:depth])
            names = _public(target)
            listed = f" (it has: {', '.join(names[:12])}{', ...' if len(names) > 12 else ''})" if names else ""
            raise TargetError(
                f"{key}={path}: {owner} has no attribute {attribute!r}{_nearest(attribute, names)}{listed}"
            )
        target = getattr(target, attribute)
    return target


def _no_module(key: str, path: str) -> Any:
    top = path.split(".")[0]
    yours = [Path.cwd(), *(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    near = sorted({p.stem for d in yours if d.is_dir() for p in d.iterdir() if p.suffix in ("", ".py")})
    by_name = f". A timm model runs by its name: model.name={top} model.source=timm" if _timm_model(key, top) else ""
    raise TargetError(
        f"{key}={path}: no module named {top!r} can be imported here{_nearest(top, near)} (code of your own is "
        f"imported from the launch's working directory, PYTHONPATH or an installed package){by_name}"
    )


def _timm_model(key: str, name: str) -> bool:
    """Whether `name` is a model's path whose first part is a timm model's name.

    An example is resnet50.a1_in1k: the model and its weights.
    """
    if key != "model._target_":
        return False
    import timm

    return name in timm.list_models()


def _kind(thing: Any) -> str:
    if inspect.ismodule(thing):
        return f"the module {thing.__name__}"
    if inspect.isclass(thing):
        return f"the class {thing.__module__}.{thing.__qualname__}"
    if callable(thing):
        return f"the function {getattr(thing, '__qualname__', thing)}"
    name = type(thing).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name} ({reprlib.repr(thing)})"


def _model(thing: Any) -> str:
    if inspect.isclass(thing) and not issubclass(thing, torch.nn.Module):
        return "an nn.Module class, or a function that returns a model"
    return "" if callable(thing) else "an nn.Module class, or a function that returns a model"


def _batches(thing: Any) -> str:
    return (
        "" if callable(thing) and not inspect.isclass(thing) else "a function (batch_size, device) -> (inputs, targets)"
    )


def _input_type(thing: Any) -> str:
    expected = "a torch.Tensor subclass, or a function that takes the batch tensor and returns one"
    if inspect.isclass(thing):
        return "" if issubclass(thing, torch.Tensor) and thing is not torch.Tensor else expected
    return "" if callable(thing) else expected


def _workload(thing: Any) -> str:
    expected = "a class with `phases` (its phases' names) and `step(index, clock)` (docs/your-code.md)"
    if not inspect.isclass(thing):
        return expected
    if not callable(getattr(thing, "step", None)):
        return f"{expected}; it has no step method"
    try:
        inspect.signature(thing).bind("cfg", "device")
    except TypeError as error:
        built = f"built as {thing.__name__}(cfg, device)"
        return f"{expected}, {built}; its __init__{inspect.signature(thing)} is not: {error}"
    except ValueError:  # a signature inspect cannot read (a class of C): its build says what is wrong
        pass
    phases = getattr(thing, "phases", None)
    if not isinstance(phases, (tuple, list)) or not phases or not all(isinstance(p, str) and p for p in phases):
        return f"{expected}; its phases are {phases!r}, not a list of names"
    if len(set(phases)) != len(phases) or "step" in phases:
        return f"{expected}; its phases {list(phases)} must be distinct and other than 'step' (the whole step)"
    counts = getattr(thing, "counts_flops", True)
    if not isinstance(counts, bool):
        return f"{expected}; its counts_flops is {counts!r}, not True or False"
    return ""


# key -> what must be at its path ("" where it is right, else what was expected)
KINDS: dict[str, Callable[[Any], str]] = {
    "model._target_": _model,
    "model.inputs": _batches,
    "input_type._target_": _input_type,
    "workload._target_": _workload,
}


def problems(config: Any) -> list[str]:
    """What is wrong with the import paths of `config`.

    That is each one that does not import, or names the wrong kind.
    """
    found = []
    for key, path in targets_of(config).items():
        try:
            thing = locate(key, path)
        except TargetError as error:
            found.append(str(error))
            continue
        wrong = KINDS.get(key, lambda _: "")(thing)
        if wrong:
            found.append(f"{key}={path} is {_kind(thing)}; expected {wrong}")
        elif key == "model._target_":
            found += _argument_problems(key, path, thing, config.model.kwargs)
        elif (
            key == "model.inputs"
            and config.memory_format.name == "channels_last"
            and "memory_format" in config.workload.reads
        ):
            found += _channels_last(path, thing)
    return found


@functools.cache
def _sample_inputs(factory: Callable) -> list[torch.Tensor] | None:
    """The tensors of the inputs the user's batch factory makes for a batch of 2 on the CPU, made once per factory.

    None where the factory raises or returns no (inputs, targets): its run says what is wrong.
    """
    try:
        made = factory(2, torch.device("cpu"))
    except Exception:  # the run calls it again, and reports what it raised with the user's frames
        return None
    if not (isinstance(made, tuple | list) and len(made) == 2):
        return None
    return [leaf for leaf in tree_leaves(made[0]) if isinstance(leaf, torch.Tensor)]


def _channels_last(path: str, factory: Callable) -> list[str]:
    """channels_last on the factory's inputs where they hold no image (a 4-D floating tensor): it changes nothing."""
    inputs = _sample_inputs(factory)
    if inputs is None or any(t.dim() == 4 and t.is_floating_point() for t in inputs):
        return []
    made = ", ".join(f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}" for t in inputs) or "no tensor"
    return [
        f"memory_format=channels_last with model.inputs={path}: its inputs ({made} for a batch of 2) hold no image, "
        "a 4-D floating tensor [N, C, H, W], so channels_last changes nothing of them; use memory_format=contiguous"
    ]


SHAPED_BY_DATA = ("num_classes", "in_chans")  # passed to a _target_ that takes them: the synthetic batch has them


def _argument_problems(key: str, path: str, thing: Any, kwargs: dict) -> list[str]:
    """The arguments a constructor refuses, and those it needs.

    It refuses those its signature does not name.
    A **kwargs takes any.
    It needs those without a default.
    The run passes SHAPED_BY_DATA itself.
    """
    try:
        parameters = inspect.signature(thing).parameters
    except (TypeError, ValueError):  # a builtin or C extension without a signature
        return []
    prefix = key.rsplit(".", 1)[0]
    given = {*kwargs, *SHAPED_BY_DATA}
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)  # _args_ fill the others
    found = [
        f"{prefix}.kwargs.{name}: {path} needs argument {name!r}, which no {prefix}.kwargs gives: "
        f"+{prefix}.kwargs.{name}=VALUE"
        for name, p in parameters.items()
        if p.default is p.empty and p.kind in by_name and name not in given and "_args_" not in kwargs
    ]
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return found
    taken = [name for name, p in parameters.items() if p.kind in by_name]
    return found + [
        f"{prefix}.kwargs.{name}: {path} takes no argument {name!r}{_nearest(name, taken)} (its "
        f"arguments: {', '.join(taken) or 'none'})"
        for name in kwargs
        if name not in taken and name != "_args_"
    ]


def roots(paths: list[str]) -> tuple[Path, ...]:
    """The folders (or files) of the user's code.

    - where the top-level modules of import paths are, for those that are working copies;
    - in a launch's snapshot, the snapshot's folder.

    Installed packages, such as torch.nn.GELU's, are not the user's code.
    A snapshot's folder holds the launch's working directory's modules beside perfsweep's.
    """
    found = [PERFSWEEP.parent] if (PERFSWEEP / CODE_VERSION).is_file() else []
    for top in sorted({path.split(".")[0] for path in paths}):
        place = module_place(top)
        if place is not None and is_working_copy(place):
            found.append(place)
    return tuple(found)


def _theirs(frame: traceback.FrameSummary, code: tuple[Path, ...]) -> bool:
    path = Path(frame.filename).resolve()
    return any(path.is_relative_to(root) for root in code) and not path.is_relative_to(PERFSWEEP)


def _users_frames(error: BaseException, code: tuple[Path, ...]) -> list[traceback.FrameSummary]:
    """The frames of the error's traceback from the first one in the user's code on.

    `code` is the user's code, as `roots` finds it.
    """
    frames = traceback.extract_tb(error.__traceback__)
    first = next((i for i, frame in enumerate(frames) if _theirs(frame, code)), None)
    return [] if first is None else frames[first:]


def user_error(error: BaseException, code: tuple[Path, ...]) -> BaseException | None:
    """The user's own exception.

    It is `error` where its traceback passes through the user's code (`code`, as `roots` finds it).
    Otherwise it is the one Hydra's instantiate wrapped in its own.
    None where perfsweep's error is not the user's.
    """
    while error is not None:
        if _users_frames(error, code):
            return error
        if not type(error).__module__.startswith("hydra."):
            return None
        error = error.__cause__


def unwrapped(error: BaseException) -> BaseException:
    """The error Hydra's instantiate wrapped, where it did.

    A user reads it as the cause.
    """
    while type(error).__module__.startswith("hydra.") and error.__cause__ is not None:
        error = error.__cause__
    return error


def user_traceback(error: BaseException, code: tuple[Path, ...]) -> str:
    """The traceback of the user's error from their first frame on.

    It shows what their code did, not perfsweep's calls.
    """
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(_users_frames(error, code))]
    return "".join(lines + traceback.format_exception_only(type(error), error))


DISPATCH_HOOKS = ("__torch_function__", "__torch_dispatch__")  # a tensor type's hooks: every torch call passes them


def where(error: BaseException, code: tuple[Path, ...]) -> str:
    """The last frame of the user's code an error passed through: function, file and line.

    Where that is a tensor type's hook (DISPATCH_HOOKS), the call that reached it comes first.
    The hook only passed the call on.
    """
    frames = [f for f in _users_frames(error, code) if _theirs(f, code)]
    calls = [f for f in frames if f.name not in DISPATCH_HOOKS]
    if frames[-1].name in DISPATCH_HOOKS and calls:
        return f"{_place(calls[-1])}, through {_place(frames[-1])}"
    return _place(frames[-1])


def _place(frame: traceback.FrameSummary) -> str:
    return f"{frame.name} ({Path(frame.filename).name}:{frame.lineno})"
