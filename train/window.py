"""The measured loop: a window of steps with one synchronize before and one after, nothing in between."""

import dataclasses
import resource
import time
import traceback

import torch

from perfsweep.conf.schema import RunConf
from perfsweep.records.host import HostBlock
from perfsweep.train import gpu_state, host_state
from perfsweep.train.catalog import workload_class
from perfsweep.train.timing import StepClock, synchronize
from perfsweep.train.workloads import Workload


def peak_memory_mib(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10, "process_max_rss"


def make_workload(cfg: RunConf, device: torch.device) -> Workload:
    """The run's workload, built (model, inputs...) from a seeded generator before anything is timed."""
    torch.manual_seed(cfg.seed)
    return workload_class(cfg.workload)(cfg, device)


class PhaseMarksError(RuntimeError):
    """A step did not mark its start and the end of each of its phases once."""


@dataclasses.dataclass
class Window:
    """What a run of consecutive steps measured."""

    rows: list[dict[str, float]]
    seconds: float
    timer: str
    ended_at: float  # wall-clock time (time.time()) when the window's last step had finished on the device
    host: list[HostBlock] = dataclasses.field(default_factory=list)  # the host over each of its blocks


def timed_steps(work: Workload, first: int, steps: int, clock: StepClock) -> list[torch.Tensor | None]:
    """The measured loop itself: steps and clock marks, no reads of device values."""
    return [work.step(index, clock) for index in range(first, first + steps)]


def run_window(work: Workload, first: int, steps: int, device: torch.device) -> Window:
    """Run `steps` steps with one synchronize before and one after, nothing in between.

    The host's state, and the GPU's, are read after the first synchronize and after the last, outside the timed steps.
    """
    clock, host, gpu = StepClock(device, steps, work.phases), host_state.here(), gpu_state.here(device)
    synchronize(device)
    before, gpu_before = host.read(), gpu.read() if gpu else None
    start = time.perf_counter()
    try:
        values = timed_steps(work, first, steps, clock)
    except IndexError as error:  # a step that marks more often than it has phases runs out of marks
        last = traceback.extract_tb(error.__traceback__)[-1]
        if clock.full and (last.filename, last.name) == (StepClock.mark.__code__.co_filename, "mark"):
            raise PhaseMarksError(clock.miscounted(steps, overflowed=True)) from error
        raise
    synchronize(device)
    seconds, ended_at = time.perf_counter() - start, time.time()
    block = host.block(before, host.read())
    if gpu:
        block = dataclasses.replace(block, gpu=gpu.block(gpu_before, gpu.read()))
    if clock.miscounted(steps):
        raise PhaseMarksError(clock.miscounted(steps))
    rows = clock.rows()
    for index, row in enumerate(rows, start=first):
        row["step"] = index
    read = [(row, v) for row, v in zip(rows, values, strict=True) if v is not None]
    if read:
        losses = torch.stack([v.as_subclass(torch.Tensor).float() for _, v in read]).tolist()
        for (row, _), loss in zip(read, losses, strict=True):
            row["loss"] = loss
    return Window(rows, seconds, clock.timer, ended_at, [block])
