"""One training step, its phases marked on a StepClock, and the measured loop around it."""

import dataclasses
import time

import torch

from train.build import Trainer
from train.timing import StepClock, synchronize


def train_step(t: Trainer, index: int, clock: StepClock) -> tuple[torch.Tensor, type]:
    """data -> forward (with loss) -> backward -> optimizer (step, scaler update, zero_grad)."""
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
    t.optimizer.zero_grad(set_to_none=True)
    clock.mark()
    return loss.detach(), type(out)


@dataclasses.dataclass
class Window:
    """What a run of consecutive steps measured."""

    rows: list[dict[str, float]]
    seconds: float
    output_type: str
    timer: str


def timed_steps(t: Trainer, first: int, steps: int, clock: StepClock) -> tuple[list[torch.Tensor], type | None]:
    """The measured loop itself: steps and clock marks, no reads of device values."""
    losses: list[torch.Tensor] = []
    output_type = None
    for index in range(first, first + steps):
        loss, output_type = train_step(t, index, clock)
        losses.append(loss)
    return losses, output_type


def run_window(t: Trainer, first: int, steps: int, device: torch.device) -> Window:
    """Run `steps` steps with one synchronize before and one after, nothing in between."""
    clock = StepClock(device, steps)
    synchronize(device)
    start = time.perf_counter()
    losses, output_type = timed_steps(t, first, steps, clock)
    synchronize(device)
    seconds = time.perf_counter() - start
    rows = clock.rows()
    values = torch.stack([loss.as_subclass(torch.Tensor).float() for loss in losses]).tolist() if losses else []
    for index, (row, value) in enumerate(zip(rows, values, strict=True), start=first):
        row.update(step=index, loss=value)
    return Window(rows, seconds, output_type.__name__ if output_type else "", clock.timer)
