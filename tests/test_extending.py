"""Adding an input type takes two files, its registered class and its yaml (docs/extending.md): one registered
while the tests run shows in --help, in the validation messages and in the table."""

import pytest
import torch

from perfsweep import launch
from perfsweep.sweeps.compose import CONF_DIR
from perfsweep.sweeps.plan import PlanError, build_plan
from perfsweep.train.inputs import INPUT_TYPES, InputType
from tests.helpers import TINY

NAME = "marked_by_a_test"


class MarkedTensor(torch.Tensor):
    """A pass-through subclass of a test's own."""


class Marked(InputType):
    def wrap(self, x: torch.Tensor) -> torch.Tensor:
        return x.as_subclass(MarkedTensor)


@pytest.fixture
def marked(monkeypatch):
    """The two files of an input type: its class, registered, and its yaml in conf/input_type/."""
    path = CONF_DIR / "input_type" / f"{NAME}.yaml"
    path.write_text(f"# a pass-through subclass a test registers\nname: {NAME}\n")
    monkeypatch.setitem(INPUT_TYPES, NAME, Marked)
    try:
        yield NAME
    finally:
        path.unlink()


@pytest.mark.slow
def test_a_new_input_type_is_in_help_validation_and_the_table(marked, tmp_path, capsys):
    assert launch.main(["--help"]) == 0
    (groups,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("input_type: ")]
    assert groups == "input_type: " + ", ".join(sorted(INPUT_TYPES))
    with pytest.raises(PlanError) as error:
        build_plan(["input_type=nosuch"])
    assert f"\t{marked}\n" in str(error.value), "the unknown value's message lists the new type"

    args = [*TINY, f"input_type=tensor,{marked}", "memory_format=contiguous", "launcher=debug", "tracker.mode=disabled"]
    assert launch.main([*args, f"runs_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert f"| {marked} " in out and "| MarkedTensor " in out and "1.00x" in out
