"""Host reads in the measured loop: found with their places, and none added by the harness.

On a CPU there is no device to wait for, so these tests check the causes of syncs (train.syncs.HostReads);
the CUDA sync counts themselves are checked by the `gpu` tests here and in test_timing.py and test_run.py.
"""

import inspect
import os
import subprocess
import sys
import warnings

import pytest
import torch

from perfsweep.sweeps.plan import build_plan
from perfsweep.train import fastai_parts
from perfsweep.train.inputs import INPUT_TYPES
from perfsweep.train.syncs import SYNC_WARNING, HostReads, count_host_syncs, host_sync_places, sync_places
from perfsweep.train.timing import StepClock
from perfsweep.train.window import make_workload, run_window, timed_steps
from tests.helpers import ROOT

CPU = torch.device("cpu")


def reads_in_timed_steps(*overrides: str, steps: int = 2) -> list[str]:
    """The host reads in `steps` timed steps of the one run the overrides name (later ones win), after a warm-up."""
    pinned = [
        "model=tiny_cnn",
        "model.image_size=32",
        "model.batch_size=4",
        "input_type=tensor",
        "memory_format=contiguous",
        "repeats=1",
    ]
    (spec,) = build_plan([*pinned, *overrides]).runs
    work = make_workload(spec.config, CPU)
    run_window(work, 0, 1, CPU)
    with HostReads() as reads:
        timed_steps(work, 1, steps, StepClock(CPU, steps, work.phases))
    return reads.calls


def test_each_host_read_is_named_with_its_place():
    x = torch.randn(4)
    line = inspect.currentframe().f_lineno
    with HostReads() as reads:
        x[0].item()
        bool(x.sum() > 0)
        torch.nonzero(x)
        x.to("cpu")
        x.to(device="cpu", non_blocking=True)  # does not wait
        x.to(torch.float16)  # no copy to the host
        torch.relu(x * 2)
    here = "tests/test_syncs.py"
    assert reads.calls == [
        f"item at {here}:{line + 2}",
        f"__bool__ at {here}:{line + 3}",
        f"nonzero at {here}:{line + 4}",
        f"to at {here}:{line + 5}",
    ]


@pytest.mark.slow
def test_a_place_is_named_within_the_project_also_when_imported_through_a_link(tmp_path):
    """A GPU image may put perfsweep on the path as a link to its checkout; frames name files by that path."""
    (tmp_path / "perfsweep").symlink_to(ROOT, target_is_directory=True)
    code = "from perfsweep.train import syncs; print(syncs._short(syncs.__file__, 7))"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    shown = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert shown.stdout.strip() == "train/syncs.py:7", shown.stdout + shown.stderr


@pytest.mark.gpu
def test_each_device_sync_is_counted_at_its_place():
    x = torch.randn(4, device="cuda")
    line = inspect.currentframe().f_lineno

    def call():
        for _ in range(3):
            x[0].item()
            torch.relu(x * 2)
        torch.nonzero(x)

    item, nonzero = (f"tests/test_syncs.py:{line + n}" for n in (4, 6))
    places = host_sync_places(call, x.device)
    assert set(places) == {item, nonzero} and places[item] == 3, places
    assert count_host_syncs(call, x.device) == sum(places.values())
    assert count_host_syncs(lambda: torch.relu(x), x.device) == 0


def test_only_sync_warnings_count_not_the_debug_modes_own_notice():
    def caught(message: str, line: int) -> warnings.WarningMessage:
        return warnings.WarningMessage(UserWarning(message), UserWarning, "/x/train/step.py", line)

    notice = "Synchronization debug mode is a prototype feature and does not yet detect all synchronizing operations"
    found = [caught(notice, 1), caught(SYNC_WARNING, 2), caught(SYNC_WARNING, 2), caught(SYNC_WARNING, 3)]
    assert sync_places(found) == {"/x/train/step.py:2": 2, "/x/train/step.py:3": 1}


def test_a_cpu_has_no_device_syncs_to_count():
    assert host_sync_places(lambda: torch.ones(3).nonzero(), CPU) is None
    assert count_host_syncs(lambda: torch.ones(3).nonzero(), CPU) is None


@pytest.mark.parametrize("precision", ["fp32", "amp_bf16"])
@pytest.mark.parametrize("input_type", sorted(INPUT_TYPES))
def test_the_timed_training_step_reads_nothing_on_the_host(input_type, precision):
    if INPUT_TYPES[input_type].needs_fastai and not fastai_parts.installed():
        pytest.skip("fastai is not installed (requirements-fastai.txt)")
    found = reads_in_timed_steps(f"input_type={input_type}", f"precision={precision}", "memory_format=channels_last")
    assert found == []


def test_fastai_loss_and_optimizer_read_nothing_on_the_host():
    if not fastai_parts.installed():
        pytest.skip("fastai is not installed (requirements-fastai.txt)")
    assert reads_in_timed_steps("input_type=tensorimage", "loss=fastai", "optim=fastai") == []


@pytest.mark.slow
def test_grad_scaler_inf_check_is_the_one_read_of_an_fp16_step():
    found = reads_in_timed_steps("precision=amp_fp16", steps=3)
    assert len(found) == 3 and len(set(found)) == 1
    assert found[0].startswith("item at torch/amp/grad_scaler.py:") and ", called from train/step.py:" in found[0]


def test_the_nonzero_sampler_reads_per_problem_and_the_static_one_never():
    sampler = ["workload=sampler", "workload.size=200", "workload.batch=3"]
    nonzero = reads_in_timed_steps(*sampler, "workload.impl=nonzero")
    assert len(nonzero) == 2 * 3 * 2  # two nonzero calls per problem, 3 problems a step, 2 steps
    assert all(r.startswith("nonzero at train/functions/sampler.py:") for r in nonzero)
    assert reads_in_timed_steps(*sampler, "workload.impl=static") == []
