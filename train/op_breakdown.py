"""What a run's step does, by operator, counted after its measured window (explain=true).

A profiled window runs `STEPS` steps after one warm-up step, under torch.profiler, with each phase marked.
It never overlaps the measured window: profiling changes what it measures.
The profiler's own aggregation (`key_averages`) gives each operator's calls and self time, per step.
A phase's self time is the time in it that no operator accounts for: Python between the operators.
A phase's memory is its peak allocated on CUDA (the caching allocator's counters, reset as it begins): all the
process holds, the other sides' of a paired process too.
On a CPU it is what the profiler saw the phase allocate net of what it freed.
On CUDA the operators' rows hold their host time, and the kernels' rows (and copies') their device time.
One more step, under a TorchFunctionMode, counts the torch calls made with a tensor subclass among their types.
Each of those goes through the subclass's `__torch_function__` in Python.
The same step finds the calls that hand a value to the host (train/syncs.py): each is a host-device sync on a GPU.
Under torch.compile that step is not run, and Dynamo's counters give the graph breaks and the graphs compiled.
They are the process's: in a paired process, every side's together.
The Chrome trace is kept beside the record, for Perfetto.
"""

import dataclasses
from collections import Counter
from pathlib import Path

import torch

from perfsweep.records import DynamoCounts, OperatorTimes, Ops, PhaseFigures
from perfsweep.train.syncs import HostReads
from perfsweep.train.timing import NoClock, synchronize
from perfsweep.train.workloads import Workload

STEPS = 3  # profiled steps, after one warm-up step
PHASE = "phase:"  # the prefix of a phase's range in the trace


class PhaseRanges:
    """A clock that marks each phase as a profiler range, and reads its peak memory on CUDA."""

    def __init__(self, phases: tuple[str, ...], device: torch.device):
        self.phases, self.cuda = phases, device.type == "cuda"
        self.peaks: dict[str, list[float]] = {phase: [] for phase in phases}
        self._open: torch.profiler.record_function | None = None
        self._next = 0

    def start(self) -> None:
        self._next = 0
        self._begin()

    def mark(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None
        if self.cuda:  # host-side counters: no sync
            self.peaks[self.phases[self._next]].append(torch.cuda.max_memory_allocated() / 2**20)
        self._next += 1
        if self._next < len(self.phases):
            self._begin()

    def _begin(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self._open = torch.profiler.record_function(PHASE + self.phases[self._next])
        self._open.__enter__()


class SubclassCalls(HostReads):
    """While active, counts torch calls by the tensor subclasses among their types, and records host reads."""

    caller_depth = 3  # _where, HostReads.__torch_function__, then this one's

    def __init__(self) -> None:
        super().__init__()
        self.by_type: Counter[str] = Counter()
        self.total = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.total += 1
        for kind in {t for t in types if _dispatches(t)}:
            self.by_type[kind.__qualname__] += 1
        return super().__torch_function__(func, types, args, kwargs)


def _dispatches(kind: type) -> bool:
    """Whether `kind` is a tensor subclass with a __torch_function__ of its own or Tensor's (not disabled)."""
    handler = getattr(kind.__torch_function__, "__func__", kind.__torch_function__)
    return kind is not torch.Tensor and handler is not torch._C._disabled_torch_function_impl


def _on_host(event) -> bool:
    return event.device_type == torch.autograd.DeviceType.CPU


def operators(averages, steps: int) -> dict[str, OperatorTimes]:
    """Each operator's calls and self host time, and each kernel's calls and device time (us), per step.

    The profiler's key_averages holds both.
    A host operator's device time is its kernels', which are rows of their own: it is not counted twice.
    A range marked on the host shows again on the device (a user annotation there): that copy is left out.
    """
    found = {}
    for event in averages:
        if event.key.startswith((PHASE, "ProfilerStep")) or (event.is_user_annotation and not _on_host(event)):
            continue
        host = _on_host(event)
        found[event.key] = OperatorTimes(
            calls=event.count / steps,
            self_cpu_us=event.self_cpu_time_total / steps if host else 0.0,
            self_device_us=0.0 if host else event.self_device_time_total / steps,
        )
    return found


def phase_figures(averages, ranges: PhaseRanges, steps: int) -> dict[str, PhaseFigures]:
    """Each phase's time (us per step), the part of it outside operators, and its memory (MiB)."""
    by_key = {event.key: event for event in averages if _on_host(event)}
    found = {}
    for phase in ranges.phases:
        event = by_key.get(PHASE + phase)
        if event is None:
            continue
        peaks = ranges.peaks[phase]
        found[phase] = PhaseFigures(
            cpu_us=event.cpu_time_total / steps,
            outside_operators_us=event.self_cpu_time_total / steps,
            peak_allocated_mib=max(peaks) if peaks else None,
            net_allocated_mib=event.cpu_memory_usage / steps / 2**20 if not ranges.cuda else None,
        )
    return found


def dynamo_counts() -> DynamoCounts | None:
    """Dynamo's graph breaks and compiled graphs in this process; None where nothing was compiled."""
    import sys

    if "torch._dynamo" not in sys.modules:
        return None
    from torch._dynamo.utils import counters

    graphs = counters["stats"].get("unique_graphs", 0)
    if not graphs:
        return None
    return DynamoCounts(graph_breaks=sum(counters["graph_break"].values()), unique_graphs=graphs)


def explain_steps(work: Workload, first: int, device: torch.device, trace: Path) -> Ops:
    """Profile `STEPS` steps from step `first` (after one warm-up step), then count one more; the ops record.

    The Chrome trace goes to `trace`.
    A compiled step is not counted under the TorchFunctionMode: the mode would make Dynamo compile it again, and
    its calls would be those of tracing, not of running.
    """
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    ranges = PhaseRanges(work.phases, device)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=STEPS, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=schedule, profile_memory=True) as profiler:
        for index in range(first, first + 1 + STEPS):
            work.step(index, ranges)
            profiler.step()
            if index == first:  # the warm-up step is not profiled: nor are its peaks kept
                ranges.peaks = {phase: [] for phase in work.phases}
    synchronize(device)
    profiler.export_chrome_trace(str(trace))
    averages = profiler.key_averages()
    found = Ops(
        steps=STEPS,
        device=device.type,
        operators=operators(averages, STEPS),
        phases=phase_figures(averages, ranges, STEPS),
        dynamo=dynamo_counts(),
    )
    if work.cfg.compile.enabled:
        return found
    counted = SubclassCalls()
    with counted:
        work.step(first + 1 + STEPS, NoClock())
    synchronize(device)
    return dataclasses.replace(
        found,
        torch_calls=counted.total,
        subclass_calls=dict(counted.by_type),
        host_reads=dict(Counter(call.split(" at ")[0] for call in counted.calls)),
        host_read_places=dict(Counter(counted.calls)),
    )
