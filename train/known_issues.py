"""Failures that are torch's, not the run's: each known upstream issue, the runs it stops, and how to tell.

A run that fails on one records the issue's address beside its error (RunError.known).
Its table, its published side-by-side row and scripts/gpu-check then say "known".
They do not leave a reader to debug torch.
"""

import dataclasses
from collections.abc import Callable

from perfsweep.conf.schema import RunConf


@dataclasses.dataclass(frozen=True)
class KnownIssue:
    address: str  # where it is reported
    message: str  # in the error's message
    applies: Callable[[RunConf], bool]  # the runs it can stop


def _compiled_pass_through_subclass(cfg: RunConf) -> bool:
    return cfg.compile.enabled and cfg.input_type.name in ("subclass", "subclass_notf")


KNOWN_ISSUES = (
    # torch.compile (Inductor, aot_eager) given a Tensor subclass without __torch_dispatch__.
    # Seen on torch 2.11 and 2.13-2.14 on a CPU; the issue reports it on CUDA too.
    # Not seen on an H100 with torch 2.11 and Inductor.
    # That compiled the subclass runs of subclass_followups (results/nvidia-h100-80gb-hbm3-torch2.11.0/).
    KnownIssue("pytorch/pytorch#193932", "Multiple dispatch failed for", _compiled_pass_through_subclass),
)


def known_issue(cfg: RunConf, error: BaseException) -> str | None:
    """The address of the known issue `error` is, for a run of `cfg`.

    None if it is none of them.
    """
    for issue in KNOWN_ISSUES:
        if issue.message in str(error) and issue.applies(cfg):
            return issue.address
    return None
