"""StepClock: one row per step, phases that add up to the step, device and host times apart, no syncs on CUDA."""

import time

import pytest
import torch

from perfsweep.sweeps.plan import build_plan
from perfsweep.train.step import TrainStep
from perfsweep.train.timing import StepClock
from perfsweep.train.window import make_workload, run_window, timed_steps

PHASES = TrainStep.phases


def run_steps(clock: StepClock, steps: int) -> None:
    """`steps` steps of 2 ms phases, marked as a training step marks them."""
    for _ in range(steps):
        clock.start()
        for _phase in PHASES:
            time.sleep(0.002)
            clock.mark()


def test_cpu_clock_rows_add_up():
    clock = StepClock(torch.device("cpu"), capacity=3, phases=PHASES)
    run_steps(clock, 3)
    rows = clock.rows()
    assert len(rows) == 3
    for row in rows:
        assert all(row[f"{p}_ms"] >= 2.0 for p in PHASES)
        assert row["step_ms"] == pytest.approx(sum(row[f"{p}_ms"] for p in PHASES))
        assert row["step_ms"] == row["step_host_ms"]
    assert clock.timer == "perf_counter"


def test_a_partly_marked_step_is_not_a_row():
    clock = StepClock(torch.device("cpu"), capacity=2, phases=PHASES)
    clock.start()
    for _phase in PHASES:
        clock.mark()
    clock.start()
    clock.mark()
    assert len(clock.rows()) == 1


def _cuda_trainer(precision: str):
    (spec,) = build_plan(
        [
            "model=test_resnet",
            "input_type=subclass",
            "memory_format=channels_last",
            f"precision={precision}",
            "device=cuda",
            "repeats=1",
        ]
    ).runs
    return make_workload(spec.config, torch.device("cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "amp_bf16"])
def test_cuda_window_adds_no_sync(precision):
    trainer = _cuda_trainer(precision)
    device = torch.device("cuda")
    run_window(trainer, 0, 2, device)
    clock = StepClock(device, 5, PHASES)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        losses = timed_steps(trainer, 2, 5, clock)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    rows = clock.rows()
    assert clock.timer == "cuda_event"
    assert len(rows) == len(losses) == 5
    for row in rows:
        assert all(row[f"{p}_ms"] > 0 and row[f"{p}_host_ms"] > 0 for p in (*PHASES, "step"))


@pytest.mark.gpu
def test_grad_scaler_is_the_only_sync():
    trainer = _cuda_trainer("amp_fp16")
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):
            timed_steps(trainer, 0, 2, StepClock(torch.device("cuda"), 2, PHASES))
    finally:
        torch.cuda.set_sync_debug_mode("default")


class FakeEvent:
    """Stands in for torch.cuda.Event (there is no GPU here): a device whose clock moves 7 ms between two events
    recorded one after the other, whatever the host's clock does."""

    recorded = 0

    def __init__(self, enable_timing: bool = False):
        assert enable_timing
        self.at = None

    def record(self) -> None:
        FakeEvent.recorded += 1
        self.at = 7.0 * FakeEvent.recorded

    def elapsed_time(self, end: "FakeEvent") -> float:
        return end.at - self.at


def test_on_cuda_phase_times_come_from_events_and_host_times_from_the_host(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    clock = StepClock(torch.device("cuda"), capacity=2, phases=PHASES)
    run_steps(clock, 2)
    assert clock.timer == "cuda_event"
    rows = clock.rows()
    assert len(rows) == 2
    for row in rows:
        assert [row[f"{p}_ms"] for p in PHASES] == [7.0] * len(PHASES) and row["step_ms"] == 7.0 * len(PHASES)
        assert all(row[f"{p}_host_ms"] >= 2.0 for p in PHASES), "host time: each phase slept 2 ms"
