"""Function benchmarks: workloads that time calls of a function rather than a training step.

A benchmark is a class registered under its workload name. It names the implementations it
compares (`impls`, the first is the baseline that ratios are taken against), the WorkloadConf
fields it reads (`uses`), and the phases of one call. Built once per run, it makes its inputs on
the device before timing starts; `step` runs one call with its phases marked on the clock, and
reads nothing back from the device.
"""

from collections.abc import Callable
from typing import Any, ClassVar

import torch

from conf.schema import CompileConf, WorkloadConf

FUNCTIONS: dict[str, type["FunctionBench"]] = {}


def register(name: str) -> Callable[[type["FunctionBench"]], type["FunctionBench"]]:
    def add(cls: type["FunctionBench"]) -> type["FunctionBench"]:
        FUNCTIONS[name] = cls
        return cls

    return add


class FunctionBench:
    impls: ClassVar[tuple[str, ...]]  # the first is the baseline
    uses: ClassVar[tuple[str, ...]] = ("size",)  # the WorkloadConf fields this benchmark reads
    phases: ClassVar[tuple[str, ...]] = ("call",)
    not_compilable: ClassVar[dict[str, str]] = {}  # impl -> why torch.compile cannot take it

    def __init__(self, conf: WorkloadConf, device: torch.device, compile_conf: CompileConf):
        self.conf = conf
        self.args = self.inputs(conf, device)
        fn = self.function(conf.impl)
        if compile_conf.enabled:
            fn = torch.compile(
                fn, mode=compile_conf.mode, backend=compile_conf.backend, fullgraph=compile_conf.fullgraph
            )
        self.fn = fn

    @classmethod
    def problems(cls, conf: WorkloadConf, compile_conf: CompileConf) -> list[str]:
        """What is wrong with `conf` for this benchmark, each naming the value and the choices."""
        found = []
        if conf.impl not in cls.impls:
            found.append(f"workload.impl={conf.impl!r} is not one of {conf.name}'s: {', '.join(cls.impls)}")
        elif compile_conf.enabled and conf.impl in cls.not_compilable:
            found.append(f"workload.impl={conf.impl} with compile={compile_conf.name}: {cls.not_compilable[conf.impl]}")
        found += [f"workload.{f}={getattr(conf, f)} must be positive" for f in cls.uses if getattr(conf, f) <= 0]
        return found

    def inputs(self, conf: WorkloadConf, device: torch.device) -> tuple[Any, ...]:
        raise NotImplementedError

    def function(self, impl: str) -> Callable[..., Any]:
        raise NotImplementedError

    def step(self, index: int, clock) -> torch.Tensor | None:
        """One timed call; returns what the run reads back after its window (nothing by default)."""
        clock.start()
        self.fn(*self.args)
        clock.mark()
        return None

    @property
    def baseline(self) -> str:
        return self.impls[0]
