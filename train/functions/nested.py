"""Seed 003's NestedTensor program: `units` repetitions of sin -> cos -> Linear(64, 64), forward and backward.

The input has three components of 20, 30 and 40 rows of `size` elements each: the seed's [[20, 30, 40], 2^k].
Each row is laid out as size/64 rows of 64, so one 64 x 64 Linear serves every size.
The seed's own program is not published.

- impl cpp: the C++ NestedTensor (layout=torch.strided).
- impl python: the Python-subclass one (layout=torch.jagged), which the compile axis can compile.

The output is reduced to a scalar for backward.
That is values().sum() for jagged, and the components' sums for strided.
"""

import torch

from perfsweep.train.functions.base import FunctionBench
from perfsweep.train.workloads import WORKLOADS

LENGTHS = (20, 30, 40)
WIDTH = 64
LAYOUTS = {"cpp": torch.strided, "python": torch.jagged}


class Units(torch.nn.Module):
    def __init__(self, units: int):
        super().__init__()
        self.linears = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(units))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for linear in self.linears:
            x = linear(torch.cos(torch.sin(x)))
        if x.layout == torch.jagged:
            return x.values().sum()
        return sum(component.sum() for component in x.unbind())


@WORKLOADS.register("nested")
class Nested(FunctionBench):
    impls = ("cpp", "python")
    phases = ("forward", "backward")
    not_compilable = {"cpp": "torch.compile does not take the C++ (strided) NestedTensor; compile impl=python"}

    @classmethod
    def problems(cls, cfg):
        issues, conf = super().problems(cfg), cfg.workload
        if conf.size % WIDTH:
            issues.append(f"workload.size={conf.size} must be a multiple of {WIDTH} (rows are split into {WIDTH}s)")
        return issues

    def __init__(self, cfg, device):
        self.model = Units(cfg.workload.units).to(device)
        super().__init__(cfg, device)

    def inputs(self, conf, device):
        rows = conf.size // WIDTH
        components = [torch.randn(n * rows, WIDTH, device=device) for n in LENGTHS]
        return (torch.nested.nested_tensor(components, layout=LAYOUTS[self.conf.impl]),)

    def function(self, impl):
        return self.model

    def step(self, index, clock):
        clock.start()
        loss = self.fn(*self.args)
        clock.mark()
        loss.backward()
        self.model.zero_grad(set_to_none=True)
        clock.mark()
        return loss.detach()
