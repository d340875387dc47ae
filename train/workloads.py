"""Workloads: what a run times, one step at a time, as registered plugins.

A workload is a class registered under its name in WORKLOADS, and a yaml in conf/workload/.
The yaml holds its settings and what the planner knows of it: the run fields it reads, its axes and baseline.
The class declares its phases and its checks.
It is built once per run, before timing starts.
Its `step(index, clock)` runs one step, with a clock mark at the end of each phase.
The step returns a device value to read after the window (a loss), or None.

The training step (train/step.py) is one workload; the function benchmarks (train/functions/) are the others.
A step of the user's own follows the same protocol, and is named by import path (workload._target_).
`user_workload` makes it one.
"""

from typing import Any, ClassVar

import torch

from perfsweep.conf.schema import CompileConf, RunConf
from perfsweep.records.run import STEP_SUMMARY
from perfsweep.train import user_targets
from perfsweep.train.compiled_graphs import watch_recompiles
from perfsweep.train.registry import Registry
from perfsweep.train.timing import StepClock

WORKLOADS: Registry[type["Workload"]] = Registry("workload")


def compiled(fn: Any, conf: CompileConf) -> Any:
    """`fn` (a model or a function) compiled as the run's compile settings say.

    Where they say not to compile, `fn` is returned as it is.
    """
    if not conf.enabled:
        return fn
    watch_recompiles(1)
    return torch.compile(fn, mode=conf.mode, backend=conf.backend, fullgraph=conf.fullgraph)


class Workload:
    phases: ClassVar[tuple[str, ...]] = ("call",)
    # Whether a run counts its FLOPs (train/flops.py): where the counter counts its work (matmuls, convolutions,
    # attention). Counting costs one more step under the counter and, in a process, an import of torch._dynamo.
    counts_flops: ClassVar[bool] = True

    @classmethod
    def problems(cls, cfg: RunConf) -> list[str]:
        """What is wrong with `cfg` for this workload, each naming the value and the choices."""
        return []

    def __init__(self, cfg: RunConf, device: torch.device):
        self.cfg = cfg

    def step(self, index: int, clock: StepClock) -> torch.Tensor | None:
        raise NotImplementedError

    def summary(self, steps_per_s: float) -> dict[str, Any]:
        """What the workload adds to the run's summary.

        A training step adds samples/s and the output's type.
        """
        return {}


def user_workload(path: str) -> type[Workload]:
    """The user's step class at import path `path` as a workload.

    It keeps the class's:

    - phases;
    - checks: a `problems(cfg)` of its own, if any;
    - `summary(steps_per_s)`, else samples/s at model.batch_size;
    - `counts_flops`, where it says False: its runs count no FLOPs, and its job imports no torch._dynamo for that.

    The measured loop calls its own `step`, with nothing in between.
    """
    target = user_targets.locate("workload._target_", path)

    class UserStep(Workload):
        phases = tuple(target.phases)
        counts_flops = getattr(target, "counts_flops", True)  # a bool: user_targets checks it
        __qualname__ = f"UserStep[{path}]"

        @classmethod
        def problems(cls, cfg: RunConf) -> list[str]:
            own = getattr(target, "problems", None)
            return list(own(cfg)) if callable(own) else []

        def __init__(self, cfg: RunConf, device: torch.device):
            super().__init__(cfg, device)
            self.user = target(cfg, device)
            self.step = self.user.step

        def summary(self, steps_per_s: float) -> dict[str, Any]:
            own = getattr(self.user, "summary", None)
            if callable(own):
                found = dict(own(steps_per_s))
                if unknown := sorted(set(found) - set(STEP_SUMMARY)):
                    raise TypeError(
                        f"{type(self.user).__module__}.{type(self.user).__qualname__}.summary returned "
                        f"{', '.join(map(repr, unknown))}: a step's summary gives only {', '.join(STEP_SUMMARY)} "
                        "(docs/your-code.md)"
                    )
                return found
            if "model" not in self.cfg.workload.reads:  # no batch of the model's: its samples are unknown
                return {}
            batch = self.cfg.model.batch_size
            return {"samples_per_s": steps_per_s * batch, "batch_size": batch}

    return UserStep
