"""Seed 002's batching and fusion examples: Python loops against broadcasting, and a chain of multiplies
run eagerly, scripted with TorchScript, or compiled (the compile axis).

pairwise_sum_prod: sum of x_i * x_j over a vector of `size` elements.
pairwise_distance: squared distances between `size` and 2 x `size` points of `features` dimensions
(the seed's 100 x 10 against 200 x 10).
square_chain: x = x * x five times over `size` elements.
"""

import torch

from perfsweep.train.functions.base import FunctionBench
from perfsweep.train.workloads import WORKLOADS


def pairwise_sum_prod_loop(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[0]
    s = 0
    for i in range(n):
        for j in range(n):
            s += x[i] * x[j]
    return s


def pairwise_sum_prod_broadcast(x: torch.Tensor) -> torch.Tensor:
    return torch.sum(x[:, None] * x[None, :])


def pairwise_distance_loop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    squares = torch.zeros((a.shape[0], b.shape[0]), device=a.device)
    for i in range(squares.shape[0]):
        for j in range(squares.shape[1]):
            diff = a[i, :] - b[j, :]
            squares[i, j] = torch.sum(diff**2.0)
    return squares


def pairwise_distance_broadcast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    diff = a[:, None, :] - b[None, :, :]
    return torch.sum(diff**2.0, dim=2)


def square_chain(x: torch.Tensor) -> torch.Tensor:
    for _ in range(5):
        x = x * x
    return x


LOOPS_NOT_COMPILABLE = {"loop": "the Python loop unrolls into size^2 graph nodes; compile the broadcast impl"}


@WORKLOADS.register("pairwise_sum_prod")
class PairwiseSumProd(FunctionBench):
    impls = ("loop", "broadcast")
    not_compilable = LOOPS_NOT_COMPILABLE

    def inputs(self, conf, device):
        return (torch.rand(conf.size, device=device),)

    def function(self, impl):
        return {"loop": pairwise_sum_prod_loop, "broadcast": pairwise_sum_prod_broadcast}[impl]


@WORKLOADS.register("pairwise_distance")
class PairwiseDistance(FunctionBench):
    impls = ("loop", "broadcast")
    not_compilable = LOOPS_NOT_COMPILABLE

    def inputs(self, conf, device):
        return torch.rand(conf.size, conf.features, device=device), torch.rand(
            2 * conf.size, conf.features, device=device
        )

    def function(self, impl):
        return {"loop": pairwise_distance_loop, "broadcast": pairwise_distance_broadcast}[impl]


@WORKLOADS.register("square_chain")
class SquareChain(FunctionBench):
    impls = ("eager", "script")
    not_compilable = {"script": "a TorchScript function is compiled by TorchScript; compile the eager impl"}

    def inputs(self, conf, device):
        return (torch.rand(conf.size, device=device),)

    def function(self, impl):
        if impl == "script":
            # TorchScript fuses on CPU only when asked (the seed's torch._C._jit_override_can_fuse_on_cpu(True)),
            # and only in a build with LLVM; PyPI's wheels have none, so there the scripted chain runs unfused.
            torch._C._jit_override_can_fuse_on_cpu(torch._C._llvm_enabled())
            return torch.jit.script(square_chain)
        return square_chain
