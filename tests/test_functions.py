"""Function benchmarks compute what their seeds compute, each implementation alike, and reject bad settings."""

import pytest
import torch

from perfsweep.conf.schema import Config
from perfsweep.sweeps.plan import build_plan
from perfsweep.train.functions.batching import (
    pairwise_distance_broadcast,
    pairwise_distance_loop,
    pairwise_sum_prod_broadcast,
    pairwise_sum_prod_loop,
    square_chain,
)
from perfsweep.train.functions.nested import Nested
from perfsweep.train.functions.sampler import nonzero_sample_batch, static_sample
from perfsweep.train.timing import NoClock
from perfsweep.train.workloads import WORKLOADS

EAGER, COMPILED = ["compile=eager"], ["compile=default", "compile.backend=aot_eager"]


def config(name: str, compiled: list[str], **settings) -> Config:
    """The run config of workload `name` as the real conf/ composes it (its declaration included)."""
    overrides = [f"workload={name}", "memory_format=contiguous", "repeats=1", *compiled]
    (spec,) = build_plan([*overrides, *(f"workload.{k}={v}" for k, v in settings.items())]).runs
    return spec.config


@pytest.mark.parametrize("sample", [nonzero_sample_batch, static_sample])
@pytest.mark.parametrize("batch", [1, 3])
def test_samplers_keep_a_tenth_half_of_each_label_rows_of_the_input(sample, batch):
    torch.manual_seed(0)
    shape = (1000,) if batch == 1 else (batch, 1000)
    inputs, labels = torch.randn(*shape, 16), torch.randint(0, 2, shape)
    picked, picked_labels = sample(inputs, labels, 100)
    assert picked.shape == (*shape[:-1], 100, 16) and picked_labels.shape == (*shape[:-1], 100)
    for problem in range(batch):
        x, y = (inputs, labels) if batch == 1 else (inputs[problem], labels[problem])
        got, got_labels = (picked, picked_labels) if batch == 1 else (picked[problem], picked_labels[problem])
        assert int(got_labels.sum()) == 50
        rows = (got[:, None, :] == x[None, :, :]).all(-1)  # each picked sample is a row of the input...
        assert rows.any(-1).all()
        index = rows.float().argmax(-1)
        assert torch.equal(y[index], got_labels)  # ...with its own label
        assert len(set(index.tolist())) == 100  # and none is picked twice


def test_static_sampler_fills_from_the_other_label_when_one_is_short():
    labels = torch.zeros(1000, dtype=torch.int64)
    labels[:10] = 1
    _, picked_labels = static_sample(torch.randn(1000, 16), labels, 100)
    _, reference = nonzero_sample_batch(torch.randn(1000, 16), labels, 100)
    assert int(picked_labels.sum()) == int(reference.sum()) == 10


def test_loops_and_broadcasts_agree():
    x, a, b = torch.rand(30, dtype=torch.float64), torch.rand(10, 4), torch.rand(20, 4)
    assert torch.allclose(pairwise_sum_prod_loop(x), pairwise_sum_prod_broadcast(x))
    assert torch.allclose(pairwise_distance_loop(a, b), pairwise_distance_broadcast(a, b), atol=1e-6)
    assert torch.allclose(pairwise_distance_broadcast(a, b), torch.cdist(a, b) ** 2, atol=1e-5)


def test_square_chain_scripted_and_compiled_agree_with_eager():
    x = torch.rand(1000)
    for compiled, impl in ((EAGER, "script"), (COMPILED, "eager")):
        bench = WORKLOADS["square_chain"](config("square_chain", compiled, impl=impl, size=1000), "cpu")
        assert torch.allclose(bench.fn(x), square_chain(x))
    assert torch.allclose(square_chain(x), x**32)


@pytest.mark.slow
def test_nested_cpp_and_python_compute_the_same_program():
    losses = {}
    for impl, compiled in (("cpp", EAGER), ("python", EAGER), ("python", COMPILED)):
        torch.manual_seed(0)
        bench = Nested(config("nested", compiled, impl=impl, size=128, units=2), torch.device("cpu"))
        losses[impl, compiled[0]] = [float(bench.step(i, NoClock())) for i in range(3)]
        assert all(p.grad is None for p in bench.model.parameters()), "grads are cleared inside the timed step"
    values = list(losses.values())
    assert values[1] == pytest.approx(values[0], rel=1e-4) and values[2] == pytest.approx(values[0], rel=1e-4)


@pytest.mark.parametrize(
    ("name", "conf", "compiled", "message"),
    [
        ("sampler", {"impl": "fast"}, EAGER, "workload.impl='fast' is not one of sampler's: nonzero, static"),
        ("sampler", {"impl": "static", "size": 10}, EAGER, "workload.size=10: the sampler needs 20+"),
        ("pairwise_distance", {"impl": "loop"}, COMPILED, "workload.impl=loop with compile=default"),
        ("square_chain", {"impl": "script"}, COMPILED, "compile the eager impl"),
        ("nested", {"impl": "cpp"}, COMPILED, "does not take the C++ (strided) NestedTensor"),
        ("nested", {"impl": "python", "size": 100}, EAGER, "workload.size=100 must be a multiple of 64"),
        ("nested", {"impl": "python", "units": 0}, EAGER, "workload.units=0 must be positive"),
    ],
)
def test_bad_settings_name_the_value_and_the_choices(name, conf, compiled, message):
    problems = WORKLOADS[name].problems(config(name, compiled, **conf))
    assert any(message in p for p in problems), problems


def test_a_planted_step_computes_normal_floats_however_many_products_it_makes():
    """A planted call's values stay where a CPU computes at full speed (not subnormal, not zero, not infinite), so
    that planted.factor=N is N times the work and no more."""
    (spec,) = build_plan(
        ["workload=planted_step", "planted.version=0.1", "planted.factor=40", "device=cpu", "repeats=1"]
    ).runs
    bench = WORKLOADS["planted_step"](spec.config, torch.device("cpu"))
    assert bench.slowed, "the planted release is installed: the call makes 40 x 8 products"
    out = bench.fn(*bench.args)
    assert torch.isfinite(out).all() and (out.abs() >= torch.finfo(out.dtype).tiny).all()
