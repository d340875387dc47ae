"""The contract between a training step and the user's model and batch factory (train/contract.py): each way to break
it fails its run with one line in the user's terms, then the user's frames. Runs are real runs of a tiny model of
this file's own, in this process (launcher=debug)."""

import sys

import pytest

from perfsweep import records
from tests import golden
from tests.helpers import SMALL, launch_here

MODELS = '''
import torch
from torch import nn


class TwoHeads(nn.Module):
    """Tags a token each, and returns its hidden states beside the logits."""

    def __init__(self, vocab: int = 50, tags: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.out = nn.Linear(8, tags)

    def forward(self, tokens):
        hidden = self.embed(tokens)
        return self.out(hidden), hidden


class Tagger(TwoHeads):
    def forward(self, tokens):
        return self.out(self.embed(tokens))


class Unreduced(TwoHeads):
    """Returns a loss per token, not their mean."""

    def forward(self, tokens):
        return self.out(self.embed(tokens)).logsumexp(-1)


def tokens(batch_size, device):
    made = torch.randint(0, 50, (batch_size, 6), device=device)
    return made, torch.randint(0, 4, (batch_size, 6), device=device)


def half_the_targets(batch_size, device):
    made = torch.randint(0, 50, (batch_size, 6), device=device)
    return made, torch.randint(0, 4, (batch_size // 2, 6), device=device)


def no_targets(batch_size, device):
    return torch.randint(0, 50, (batch_size, 6), device=device), None


def a_dict(batch_size, device):
    return {"tokens": torch.randint(0, 50, (batch_size, 6), device=device)}
'''

ONE_RUN = ["launcher=debug", "memory_format=contiguous", "input_type=tensor"]  # of the default sweep's axes


@pytest.fixture
def models(tmp_path, monkeypatch):
    """MODELS as the user's module `contract_models`, importable here; forgotten by the import system afterwards."""
    folder = tmp_path / "user"
    folder.mkdir()
    source = folder / "contract_models.py"
    source.write_text(MODELS)
    monkeypatch.syspath_prepend(str(folder))
    yield source
    sys.modules.pop("contract_models", None)


def line_of(text: str) -> int:
    """The line of MODELS that holds `text`."""
    return next(number for number, line in enumerate(MODELS.splitlines(), 1) if text in line)


def failed_run(tmp_path, *args: str) -> records.RunError:
    """The error of the one run that `args` launch (small, in this process), which must fail."""
    result = launch_here(*SMALL, *args, *ONE_RUN, f"runs_dir={tmp_path / 'runs'}")
    assert result.returncode == 1, result.stdout + result.stderr
    (status,) = [records.read_status(p.parent) for p in (tmp_path / "runs").glob("*/*/status.json")]
    assert status.state == "failed" and status.error.type == "ContractError", status.error
    assert len(status.error.message.splitlines()) == 1, "one line"
    assert status.error.line(200) in result.stderr, "the launch says it as the status does"
    return status.error


def test_a_model_that_returns_a_tuple_is_told_what_a_step_needs(models, tmp_path):
    error = failed_run(tmp_path, "model=contract_models.TwoHeads", "model.inputs=contract_models.tokens")
    golden.says("contract: a model that returns a tuple", error.message)
    forward = line_of("def forward(self, tokens):")
    assert error.traceback.splitlines()[1] == f'  File "{models}", line {forward}, in TwoHeads.forward'
    assert f'File "{models}", line {line_of("def tokens")}, in tokens' in error.traceback


def test_targets_of_another_batch_size_are_named_with_the_factory_that_made_them(models, tmp_path):
    error = failed_run(tmp_path, "model=contract_models.Tagger", "model.inputs=contract_models.half_the_targets")
    golden.says("contract: targets of another batch size", error.message)
    assert f"(contract_models.py:{line_of('def half_the_targets')})" in error.message


def test_a_model_of_tokens_given_images_is_told_it_needs_a_batch_factory(models, tmp_path):
    error = failed_run(tmp_path, "model=contract_models.Tagger", "model.image_size=8", "model.batch_size=2")
    golden.says("contract: a model of tokens given images", error.message)
    embedded = line_of("return self.out(self.embed(tokens))")
    assert f'File "{models}", line {embedded}, in forward' in error.traceback, "the user's frame that raised"
    assert error.traceback.rstrip().endswith("(while checking arguments for embedding)"), "then torch's error"


def test_a_model_whose_loss_is_not_one_number_is_told_so(models, tmp_path):
    error = failed_run(tmp_path, "model=contract_models.Unreduced", "model.inputs=contract_models.no_targets")
    golden.says("contract: a loss of more than one element", error.message)


def test_a_factory_that_returns_no_pair_is_refused_when_the_batches_are_made(models, tmp_path):
    error = failed_run(tmp_path, "model=contract_models.Tagger", "model.inputs=contract_models.a_dict")
    golden.says("contract: a factory that returns a dict", error.message)
    assert error.traceback.splitlines()[1] == f'  File "{models}", line {line_of("def a_dict")}, in a_dict'


def test_a_model_that_keeps_the_contract_trains(models, tmp_path):
    args = ["model=contract_models.Tagger", "model.inputs=contract_models.tokens"]
    result = launch_here(*SMALL, *args, *ONE_RUN, f"runs_dir={tmp_path / 'runs'}")
    assert result.returncode == 0, result.stdout + result.stderr
