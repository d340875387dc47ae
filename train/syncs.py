"""Host-device syncs in a loop: counted by CUDA itself on a GPU, and found by their cause on any device.

On CUDA, `host_sync_places` counts the waits that `torch.cuda.set_sync_debug_mode` reports, by place.
A CPU has no device to wait for, so there `HostReads` finds the causes instead.
The causes are tensor calls that hand a value to the host: `.item()`, `bool(t)`, `torch.nonzero`, `.cpu()`, ...
Each of them waits for the GPU when the tensor lives on one.
`HostReads` sees calls made from Python: eager code, optimizers, GradScaler.
It does not see one by one the ops inside a compiled graph or autograd's C++ backward pass.
"""

import sys
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from perfsweep.train.timing import synchronize

# Tensor calls whose result the host needs before it can go on: a value, or an output size that depends on values.
READS = frozenset(
    {
        "item", "tolist", "numpy", "__array__", "cpu",
        "__bool__", "__int__", "__float__", "__complex__", "__format__", "__repr__", "is_nonzero",
        "equal", "allclose",
        "nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
    }
)  # fmt: skip
_TORCH = str(Path(torch.__file__).parent)
_PACKAGES = str(Path(_TORCH).parent)
# as imported (frames name files so, also through a link) and as resolved
_PROJECT = tuple(dict.fromkeys(str(p.parent.parent) for p in (Path(__file__).absolute(), Path(__file__).resolve())))
_DISPATCH = {str(Path(_TORCH, name)) for name in ("overrides.py", "_tensor.py")}  # how a call reaches the mode


def host_sync_places(call: Callable[[], object], device: torch.device) -> Counter[str] | None:
    """Where `call` makes the host wait for the device, and how many times at each place.

    CUDA's sync debug mode reports them.
    A place is the Python line that called the synchronizing op, as in `torch/amp/grad_scaler.py:371`.
    None on a CPU, where there is no device to wait for.
    """
    if device.type != "cuda":
        return None
    synchronize(device)
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    synchronize(device)
    return sync_places(caught)


# What CUDA's sync debug mode warns at each synchronizing call (c10/cuda/CUDAFunctions.cpp). Its first use in a
# process also warns "Synchronization debug mode is a prototype feature and does not yet detect all synchronizing
# operations": a notice, not a sync.
SYNC_WARNING = "called a synchronizing CUDA operation"


def sync_places(caught: list[warnings.WarningMessage]) -> Counter[str]:
    """The places of the sync warnings among `caught`, counted."""
    return Counter(_short(w.filename, w.lineno) for w in caught if SYNC_WARNING in str(w.message))


def count_host_syncs(call: Callable[[], object], device: torch.device) -> int | None:
    """How many times `call` makes the host wait for the device; None on a CPU."""
    places = host_sync_places(call, device)
    return None if places is None else sum(places.values())


def _copies_to_host(args: tuple, kwargs: dict) -> bool:
    """Whether a `Tensor.to(device, dtype, non_blocking, copy)` call is a blocking copy to the CPU."""
    device = kwargs.get("device", args[1] if len(args) > 1 else None)
    if not isinstance(device, str | torch.device) or torch.device(device).type != "cpu":
        return False
    return not kwargs.get("non_blocking", args[3] if len(args) > 3 else False)


def _short(path: str, line: int) -> str:
    """A place as `torch/amp/grad_scaler.py:371` or `train/step.py:47`, not as a long absolute path."""
    for root in (_PACKAGES, *_PROJECT):
        if path.startswith(root + "/"):
            return f"{path[len(root) + 1 :]}:{line}"
    return f"{path}:{line}"


def _where(depth: int) -> str:
    """The innermost caller outside torch, and the torch frame it called into, if any.

    `depth` frames up from here is the first frame that may be the caller's (0: here, 1: the mode's handler).
    """
    frame, inside = sys._getframe(depth), None
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_TORCH):
            here = _short(name, frame.f_lineno)
            return f"{inside}, called from {here}" if inside else here
        if inside is None and name.startswith(_TORCH) and name not in _DISPATCH:
            inside = _short(name, frame.f_lineno)
        frame = frame.f_back
    return inside or "?"


class HostReads(TorchFunctionMode):
    """While active, records every tensor call that hands a value to the host.

    Each is recorded as "name at file:line".
    """

    caller_depth = 2  # frames from _where up to the call's: _where, then this __torch_function__

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []  # "name at file:line", one per call

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in READS or (name == "to" and _copies_to_host(args, kwargs)):
            self.calls.append(f"{name} at {_where(self.caller_depth)}")
        return func(*args, **kwargs)
