"""A control workload with a planted step: products of two matrices.

From a release of a package on (`planted.package`, `planted.version`), it makes `planted.factor` times as many.
A bisect or a comparison across environments then has a change of known size and place to find.
It finds it before a cluster is spent on a real one.

impl=planted has the step.
impl=steady is its baseline: it does the same work in every environment.
So `workload.impl=steady,planted` is a comparison whose ratio changes at the planted release."""

import importlib.metadata

import torch
from packaging.version import InvalidVersion, Version

from perfsweep.train.functions.base import FunctionBench
from perfsweep.train.workloads import WORKLOADS


def installed(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@WORKLOADS.register("planted_step")
class PlantedStep(FunctionBench):
    impls = ("steady", "planted")

    @classmethod
    def problems(cls, cfg):
        issues = super().problems(cfg)
        planted = cfg.planted
        try:
            Version(planted.version or "0")
        except InvalidVersion:
            issues.append(f"planted.version={planted.version!r} is not a release number (e.g. 2.2.4; '': none)")
        if not planted.factor > 0:
            issues.append(f"planted.factor={planted.factor} must be above 0")
        return issues

    def inputs(self, conf, device):
        # b's rows each sum to 1, so a product keeps a's row sums, however many products a call makes.
        # Its values then neither overflow nor vanish into subnormal floats (a CPU computes those many times slower).
        b = torch.rand(conf.size, conf.size, device=device)
        return torch.rand(conf.size, conf.size, device=device), b / b.sum(dim=1, keepdim=True)

    @property
    def slowed(self) -> bool:
        planted, found = self.cfg.planted, installed(self.cfg.planted.package)
        if self.conf.impl != "planted" or not planted.version or found is None:
            return False
        return Version(found) >= Version(planted.version)

    def function(self, impl):
        calls = max(1, round(self.conf.units * (self.cfg.planted.factor if self.slowed else 1)))

        def products(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            for _ in range(calls):
                a = torch.mm(a, b)
            return a

        return products
