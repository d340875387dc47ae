"""Function benchmarks: workloads that time calls of a function rather than a training step.

A benchmark is a Workload registered under its name.
It names the implementations it has (`impls`) and the phases of one call.
Its yaml names the baseline.
Its yaml's `sizes` are the WorkloadConf fields it reads.
It is built once per run, and makes its inputs on the device before timing starts.
`step` runs one call, with its phases marked on the clock.
It reads nothing back from the device.
"""

from collections.abc import Callable
from typing import Any, ClassVar

import torch

from perfsweep.conf.schema import RunConf
from perfsweep.train.workloads import Workload, compiled


class FunctionBench(Workload):
    impls: ClassVar[tuple[str, ...]]
    not_compilable: ClassVar[dict[str, str]] = {}  # impl -> why torch.compile cannot take it
    # Most do elementwise and indexing ops, which the FLOP counter does not count (docs/measurement.md)
    counts_flops = False

    def __init__(self, cfg: RunConf, device: torch.device):
        super().__init__(cfg, device)
        self.conf = cfg.workload
        self.args = self.inputs(cfg.workload, device)
        self.fn = compiled(self.function(cfg.workload.impl), cfg.compile)

    @classmethod
    def problems(cls, cfg: RunConf) -> list[str]:
        conf, compile_conf = cfg.workload, cfg.compile
        issues = []
        if conf.impl not in cls.impls:
            issues.append(f"workload.impl={conf.impl!r} is not one of {conf.name}'s: {', '.join(cls.impls)}")
        elif compile_conf.enabled and conf.impl in cls.not_compilable:
            issues.append(
                f"workload.impl={conf.impl} with compile={compile_conf.name}: {cls.not_compilable[conf.impl]}"
            )
        issues += [f"workload.{f}={getattr(conf, f)} must be positive" for f in conf.sizes if getattr(conf, f) <= 0]
        if cfg.memory_format.name != "contiguous":
            issues.append(
                f"memory_format={cfg.memory_format.name} needs a 4-D (image) input; workload={conf.name} has none "
                "(use memory_format=contiguous)"
            )
        return issues

    def inputs(self, conf, device: torch.device) -> tuple[Any, ...]:
        raise NotImplementedError

    def function(self, impl: str) -> Callable[..., Any]:
        raise NotImplementedError

    def step(self, index: int, clock) -> torch.Tensor | None:
        """One timed call.

        Returns:
            What the run reads back after its window; nothing by default.
        """
        clock.start()
        self.fn(*self.args)
        clock.mark()
        return None
