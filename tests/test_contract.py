"""The contract between a training step and the user's model and batch factory (train/contract.py): each way to break
it fails its run with one line in the user's terms, then the user's frames; and a model yaml in Hydra's convention,
arguments beside `_target_`, composes, while a schema error reads as perfsweep's own. Runs are real runs of a tiny
model of this file's own, in this process (launcher=debug)."""

import dataclasses
import math
import sys

import pytest

from perfsweep import records
from perfsweep.sweeps import compose
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
    (run_dir,) = [p.parent for p in (tmp_path / "runs").glob("*/*/status.json")]
    assert records.read_status(run_dir).state == records.DONE
    losses = [row["loss"] for row in records.read_steps(run_dir / records.STEPS).to_pylist()]
    assert len(losses) == 4, "a warm-up step, then 3 measured"
    assert all(math.isfinite(loss) for loss in losses), losses


def config_dir(tmp_path, files: dict[str, str]):
    """A config dir of the user's with `files` (its path -> its text)."""
    for name, text in files.items():
        (tmp_path / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / name).write_text(text)
    return tmp_path / "conf"


ARGUMENTS_BESIDE = {
    "model/lm.yaml": "_target_: contract_models.Tagger\nvocab: 64\ntags: 4\nbatch_size: 4\n",
    # a defaults list: Hydra composes it in full, the file it extends with its arguments moved too
    "model/wide.yaml": "defaults:\n  - lm\n  - _self_\n_target_: contract_models.Tagger\ndim: 16\n",
    "workload/mine.yaml": "_target_: mylib.steps.Step\nname: mine\nmax_norm: 0.5\n",
}


def test_a_model_yaml_with_its_arguments_beside_its_target_trains_with_them(models, tmp_path):
    conf = config_dir(tmp_path, ARGUMENTS_BESIDE)
    args = ["--config-dir", str(conf), "model=lm", "model.inputs=contract_models.tokens"]
    result = launch_here(*SMALL, *args, *ONE_RUN, f"runs_dir={tmp_path / 'runs'}")
    assert result.returncode == 0, result.stdout + result.stderr
    (config,) = [records.read_json(p)["config"] for p in (tmp_path / "runs").glob("*/*/config.json")]
    assert config["model"]["kwargs"] == {"vocab": 64, "tags": 4} and config["model"]["batch_size"] == 4


def test_arguments_beside_a_target_compose_the_same_both_ways(tmp_path):
    conf = config_dir(tmp_path, ARGUMENTS_BESIDE)
    runs = compose.expand(["model=lm,wide", "workload=mine"])
    fast, fast_errors = compose.compose_all(runs, dirs=(conf,))
    slow, slow_errors = compose.compose_all(runs, reuse=False, dirs=(conf,))
    assert fast_errors == slow_errors == {}
    assert [dataclasses.asdict(c) for c in fast] == [dataclasses.asdict(c) for c in slow]
    assert [c.model.kwargs for c in fast] == [{"vocab": 64, "tags": 4}, {"vocab": 64, "tags": 4, "dim": 16}]
    assert fast[0].workload.kwargs == {"max_norm": 0.5}


def test_hydras_cfg_flag_shows_a_model_yaml_with_its_arguments_beside_its_target_as_a_launch_composes_it(tmp_path):
    conf = config_dir(tmp_path, ARGUMENTS_BESIDE)
    shown = launch_here("--config-dir", str(conf), "model=lm", "--cfg", "job")
    assert shown.returncode == 0 and "full_key" not in shown.stderr, shown.stdout + shown.stderr
    model = shown.stdout[shown.stdout.index("model:") : shown.stdout.index("memory_format:")]
    assert "kwargs:\n    vocab: 64\n    tags: 4\n" in model and "batch_size: 4" in model


SCHEMA_ERRORS = {
    "model/timm_extra.yaml": "name: vit_tiny_patch16_224\nsource: timm\ndrop_rate: 0.1\n",
    "model/twice.yaml": "_target_: contract_models.Tagger\nvocab: 64\nkwargs: {vocab: 32}\n",
    "model/typo.yaml": "_target_: contract_models.Tagger\nbatch_size: four\n",
}


@pytest.mark.parametrize("option", ["timm_extra", "twice"])
def test_a_key_the_model_schema_has_not_is_refused_as_perfsweep_words_it(models, tmp_path, option):
    conf = config_dir(tmp_path, SCHEMA_ERRORS)
    result = launch_here(*SMALL, "--config-dir", str(conf), f"model={option}", f"runs_dir={tmp_path / 'runs'}")
    assert result.returncode == 2 and "full_key" not in result.stderr, result.stderr
    problem = result.stderr.splitlines()[1]  # the run it is in follows
    golden.says(f"refused: a model yaml's key the schema has not ({option})", problem, {tmp_path: "<tmp>"})


@pytest.mark.parametrize("both_ways", [True, False])
def test_a_value_of_the_wrong_type_in_a_yaml_is_refused_as_key_equals_value(tmp_path, both_ways):
    conf = config_dir(tmp_path, SCHEMA_ERRORS)
    _, errors = compose.compose_all(compose.expand(["model=typo"]), reuse=both_ways, dirs=(conf,))
    assert list(errors) == ["model.batch_size=four: Value 'four' of type 'str' could not be converted to Integer"]
