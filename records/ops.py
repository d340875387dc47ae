"""A run's ops record (ops.json, explain=true): its step by operator, counted after its measured window.

train/op_breakdown.py makes it; analysis/views/explain.py ranks the differences between two configurations' records.
Where profiling failed, the record holds the error alone (`OpsFailed`), and the run's measurements are whole.
"""

import dataclasses
from pathlib import Path
from typing import Any

from perfsweep.records.files import OPS, Unreadable, declare, known_fields, read_record


@dataclasses.dataclass(frozen=True)
class OperatorTimes:
    """An operator's calls and self time per profiled step, or a kernel's (or copy's) on the device."""

    calls: float
    self_cpu_us: float  # an operator's host time outside the operators it calls; 0 for a kernel
    self_device_us: float  # a kernel's or copy's device time; 0 for an operator on the host


@dataclasses.dataclass(frozen=True)
class PhaseFigures:
    """A phase's host time per profiled step, the part of it outside operators, and its memory."""

    cpu_us: float
    outside_operators_us: float  # the time no operator accounts for: Python between them
    peak_allocated_mib: float | None = None  # CUDA's: the caching allocator's peak in the phase, all the process holds
    net_allocated_mib: float | None = None  # a CPU's: what the profiler saw the phase allocate net of what it freed


@dataclasses.dataclass(frozen=True)
class DynamoCounts:
    """Dynamo's counters in the run's process: in a paired process, every side's together."""

    graph_breaks: int
    unique_graphs: int


@dataclasses.dataclass(frozen=True)
class Ops:
    """What ops.json holds where the profiled window ran."""

    steps: int  # profiled steps, after one warm-up step
    device: str  # cuda or cpu
    operators: dict[str, OperatorTimes]  # by the profiler's name (aten::alias)
    phases: dict[str, PhaseFigures]  # by the workload's phase
    dynamo: DynamoCounts | None = None  # None where nothing was compiled
    # Counted in one more step; None under torch.compile, where that step is not run:
    torch_calls: int | None = None  # every torch call
    subclass_calls: dict[str, int] | None = None  # calls through a tensor subclass's __torch_function__, by its type
    host_reads: dict[str, int] | None = None  # calls that hand a value to the host, by the call
    host_read_places: dict[str, int] | None = None  # the same, by the call and where in the code it was made

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Ops":
        known = known_fields(cls, data)
        operators = {name: OperatorTimes(**known_fields(OperatorTimes, f)) for name, f in data["operators"].items()}
        phases = {name: PhaseFigures(**known_fields(PhaseFigures, f)) for name, f in data["phases"].items()}
        dynamo = DynamoCounts(**known_fields(DynamoCounts, data["dynamo"])) if data.get("dynamo") else None
        return cls(**{**known, "operators": operators, "phases": phases, "dynamo": dynamo})

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class OpsFailed:
    """What ops.json holds where the profiled window failed."""

    error: str  # the exception's type and message

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


declare(OPS, "ops record", Ops | OpsFailed)


def read_ops(run_dir: Path) -> Ops | OpsFailed | Unreadable | None:
    """The run's ops record; None where it has none (explain=false)."""
    record = read_record(Path(run_dir) / OPS)
    if record is None or isinstance(record, Unreadable):
        return record
    # it fits Ops or OpsFailed (declared); the writer writes an error only where profiling failed
    if isinstance(record.get("error"), str):
        return OpsFailed(record["error"])
    return Ops.from_json(record)
