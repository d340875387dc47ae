"""Input types: what reaches the model, and whether the subclass spreads through it."""

import pytest
import torch

from perfsweep.train.catalog import INPUT_TYPES, WORKLOADS
from perfsweep.train.inputs import SubClassedTensor, TensorBase, get_input_type
from tests.helpers import input_types, output_type

# What some input types hand the model, and what its output then is (every type is checked below by rule).
KNOWN = {
    "tensor": ("Tensor", "Tensor"),
    "subclass": ("SubClassedTensor", "SubClassedTensor"),
    "subclass_notf": ("SubClassedTensorNoTF", "Tensor"),
    "tensorbase": ("TensorBase", "TensorBase"),
    "cast": ("Tensor", "Tensor"),
}


@pytest.mark.parametrize("name", input_types())
def test_a_subclass_spreads_through_a_network_when_it_rewraps_results(name):
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(2))
    kind = get_input_type(name)
    x = kind.before_model(kind.wrap(torch.randn(2, 3, 8, 8)))
    out = net(x)
    assert type(out).__name__ == output_type(name)
    assert (type(x).__name__, type(out).__name__) == KNOWN.get(name, (type(x).__name__, output_type(name)))


def test_tensorbase_metadata_survives_ops():
    x = TensorBase(torch.randn(2, 3, 4, 4), source="camera", scale=0.5)
    for y in (
        x * 2,
        x.contiguous(memory_format=torch.channels_last),
        torch.relu(x),
        torch.cat([x, x]),
        torch.nn.functional.conv2d(x, torch.randn(1, 3, 1, 1)),
    ):
        assert isinstance(y, TensorBase)
        assert (y.source, y.scale) == ("camera", 0.5)
    first, second = x.chunk(2)
    assert first.source == second.source == "camera"


def test_cast_removes_the_subclass_and_keeps_the_values():
    kind = get_input_type("cast")
    x = torch.randn(2, 3, 4, 4)
    wrapped = kind.wrap(x)
    assert isinstance(wrapped, TensorBase)
    cast = kind.before_model(wrapped)
    assert type(cast) is torch.Tensor and torch.equal(cast, x)


def test_subclass_is_a_pass_through():
    x = torch.randn(3)
    y = get_input_type("subclass").wrap(x)
    assert type(y) is SubClassedTensor and torch.equal(y.as_subclass(torch.Tensor), x)


def test_unknown_input_type_names_the_registered_ones():
    with pytest.raises(ValueError, match="unknown input type .nope.; registered: cast, fastai_tensorbase, subclass"):
        get_input_type("nope")


def _camel(key: str) -> str:
    return "".join(part.capitalize() for part in key.split("_"))


def test_each_registered_class_is_named_after_its_key():
    """tensorbase -> TensorbaseInput, train_step -> TrainStep: a config's name finds its class by reading."""
    assert {key: cls.__name__ for key, cls in INPUT_TYPES.items()} == {k: f"{_camel(k)}Input" for k in INPUT_TYPES}
    assert {key: cls.__name__ for key, cls in WORKLOADS.items()} == {k: _camel(k) for k in WORKLOADS}
