"""What a run times, one step at a time, and the measured loop around it.

A workload has `phases` and `step(index, clock)`, which runs one step with a clock mark at the end
of each phase and returns a device value to read after the window (a loss) or None. TrainStep is
the training step; function benchmarks (train/functions/) are the others.
"""

import dataclasses
import time
from typing import Protocol

import torch

from conf.schema import RunConf
from train.build import Trainer, build
from train.functions import FUNCTIONS
from train.timing import PHASES, StepClock, synchronize


class Workload(Protocol):
    phases: tuple[str, ...]

    def step(self, index: int, clock: StepClock) -> torch.Tensor | None: ...


class TrainStep:
    """data -> forward (with loss) -> backward -> optimizer (step, scaler update, zero_grad)."""

    phases = PHASES

    def __init__(self, trainer: Trainer):
        self.t = trainer
        self.output_type: type | None = None

    def step(self, index: int, clock: StepClock) -> torch.Tensor:
        t = self.t
        clock.start()
        x, y = t.batches[index % len(t.batches)]
        x = t.input_type.before_model(t.input_type.wrap(x.contiguous(memory_format=t.memory_format)))
        clock.mark()
        with t.autocast():
            out = t.model(x)
            loss = t.loss_fn(out, y)
        clock.mark()
        t.scaler.scale(loss).backward()
        clock.mark()
        t.scaler.step(t.optimizer)
        t.scaler.update()
        t.zero_grad()
        clock.mark()
        self.output_type = type(out)
        return loss.detach()


def make_workload(cfg: RunConf, device: torch.device) -> Workload:
    if cfg.workload.name == "train_step":
        return TrainStep(build(cfg, device))
    torch.manual_seed(cfg.seed)
    return FUNCTIONS[cfg.workload.name](cfg.workload, device, cfg.compile)


@dataclasses.dataclass
class Window:
    """What a run of consecutive steps measured."""

    rows: list[dict[str, float]]
    seconds: float
    timer: str
    ended_at: float  # wall-clock time (time.time()) when the window's last step had finished on the device


def timed_steps(work: Workload, first: int, steps: int, clock: StepClock) -> list[torch.Tensor | None]:
    """The measured loop itself: steps and clock marks, no reads of device values."""
    return [work.step(index, clock) for index in range(first, first + steps)]


def run_window(work: Workload, first: int, steps: int, device: torch.device) -> Window:
    """Run `steps` steps with one synchronize before and one after, nothing in between."""
    clock = StepClock(device, steps, work.phases)
    synchronize(device)
    start = time.perf_counter()
    values = timed_steps(work, first, steps, clock)
    synchronize(device)
    seconds, ended_at = time.perf_counter() - start, time.time()
    rows = clock.rows()
    for index, row in enumerate(rows, start=first):
        row["step"] = index
    read = [(row, v) for row, v in zip(rows, values, strict=True) if v is not None]
    if read:
        losses = torch.stack([v.as_subclass(torch.Tensor).float() for _, v in read]).tolist()
        for (row, _), loss in zip(read, losses, strict=True):
            row["loss"] = loss
    return Window(rows, seconds, clock.timer, ended_at)
