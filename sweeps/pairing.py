"""Which runs share a process: the sides of a comparison, measured in alternating blocks (pairing=auto).

A comparison's sides are the runs of one row group and one round.
They differ only in the workload's baseline axis (input_type=tensor,subclass...).
They share a process where that axis is one a process can hold side by side, and no side sets process-wide state.
Each side then builds its own model and inputs from the same seed.
Otherwise each side runs in a process of its own, as with pairing=process, and the launch says why.
"""

import collections
import dataclasses

from perfsweep.conf.schema import Pairing
from perfsweep.sweeps.spec import RunSpec, canonical_json, run_fields

# Axes whose sides a process holds at once, each side a model and inputs of its own.
# A label changes nothing a run computes: its sides are an A/A comparison (bench/calibration.py).
PAIRABLE = ("input_type", "memory_format", "precision", "compile", "label")
# The input types whose first use imports fastai, which patches torch for the whole process (train/inputs.py).
FASTAI_INPUT_TYPES = ("fastai_tensorbase", "tensorimage")
# torch.compile's modes that record CUDA graphs: their pool is the process's, and blocks of two sides would re-record.
CUDA_GRAPHS = ("reduce-overhead", "max-autotune")


@dataclasses.dataclass(frozen=True)
class Group:
    """The runs of one comparison in one round, and why they run apart ("" where they share a process)."""

    runs: tuple[RunSpec, ...]
    apart: str = ""

    @property
    def paired(self) -> bool:
        return len(self.runs) > 1 and not self.apart


def groups(runs: list[RunSpec]) -> list[Group]:
    """The runs by comparison and round, each group in the order of its first run.

    A side that sets process-wide state the other sides do not is a group of its own, with the reason.
    """
    by_key: dict[str, list[RunSpec]] = {}
    for spec in runs:
        by_key.setdefault(_comparison(spec), []).append(spec)
    found = []
    for sides in by_key.values():
        states = {spec.name: _process_wide(spec) for spec in sides}
        differ = len({state for state, _ in states.values()}) > 1
        alone = {name: why for name, (state, why) in states.items() if state} if differ else {}
        rest = [spec for spec in sides if spec.name not in alone]
        found += [Group(tuple(rest), _apart(rest))] if rest else []
        found += [Group((spec,), why) for spec in sides if (why := alone.get(spec.name))]
    return found


def _comparison(spec: RunSpec) -> str:
    """What the run's sides share: every field it measures but its baseline axis's.

    That is the axis's whole option (input_type, memory_format...), or the one workload setting it names (impl).
    A run whose baseline axis names no config key is a comparison of its own.
    """
    config = spec.config
    key = config.workload.axes.get(config.workload.baseline.axis, "")
    if not key:
        return spec.run_id
    node, _, leaf = key.partition(".")
    fields = {name: value for name, value in run_fields(config).items() if name != node}
    if node == "workload":
        fields[node] = {k: v for k, v in run_fields(config)[node].items() if k != leaf}
    return canonical_json(fields)


def _apart(sides: list[RunSpec]) -> str:
    """Why the sides of one comparison and round run in processes of their own; "" where they need not."""
    if len(sides) < 2:
        return ""
    config = sides[0].config
    axis = config.workload.baseline.axis
    if config.pairing == Pairing.process:
        return "pairing=process"
    if config.dist.name != "none":
        return f"a run across ranks (dist={config.dist.name}) has processes of its own"
    if axis not in PAIRABLE:
        return f"its sides differ in {axis}, which one process does not hold side by side (only {', '.join(PAIRABLE)})"
    return ""


def _process_wide(spec: RunSpec) -> tuple[str, str]:
    """The process-wide state this side sets under pairing=auto, and its description; ("", "") where none."""
    config = spec.config
    if config.pairing == Pairing.process:
        return "", ""
    axis = config.workload.baseline.axis
    if axis == "precision" and config.precision.tf32:
        return "tf32", f"precision={config.precision.name} sets the TF32 switches of the whole process (precision.tf32)"
    if axis == "input_type" and config.input_type.name in FASTAI_INPUT_TYPES and not config.input_type._target_:
        return "fastai", f"input_type={config.input_type.name} imports fastai, which patches torch itself"
    if axis == "compile" and config.device != "cpu" and config.compile.enabled and config.compile.mode in CUDA_GRAPHS:
        return "cudagraphs", f"compile={config.compile.name} records CUDA graphs in a memory pool the process shares"
    return "", ""


def refusals(runs: list[RunSpec]) -> list[str]:
    """Under pairing=in_process, why the sides that cannot share a process cannot; [] where all can."""
    if not runs or runs[0].config.pairing != Pairing.in_process:
        return []
    axis = runs[0].config.workload.baseline.axis
    compared = len({spec.axes.get(axis, "") for spec in runs}) > 1
    apart: dict[str, list[str]] = {}
    for group in groups(runs):
        alone = compared and len(group.runs) == 1
        why = group.apart or ("no other side of its comparison can share its process" if alone else "")
        if why:
            apart.setdefault(why, []).extend(spec.name for spec in group.runs)
    return [
        f"pairing=in_process: {len(names)} run{'s' if len(names) > 1 else ''} cannot share a process with their "
        f"comparison's other sides: {why} (first: {names[0]}); pairing=auto runs them apart"
        for why, names in apart.items()
    ]


def described(runs: list[RunSpec]) -> str:
    """How pairing=auto runs the sweep, in one line; "" under pairing=process.

    It says how many processes hold a comparison's sides, and why other runs have a process of their own.
    """
    if not runs or runs[0].config.pairing == Pairing.process:
        return ""
    found = groups(runs)
    paired = [group for group in found if group.paired]
    sides = sum(len(group.runs) for group in paired)
    processes = f"{len(paired)} process{'es' if len(paired) > 1 else ''}"
    parts = [f"{sides} runs as {processes} of a comparison's sides"] if paired else []
    apart: collections.Counter[str] = collections.Counter()
    for group in found:
        apart[group.apart] += len(group.runs) if group.apart else 0
    apart.pop("", None)
    parts += [f"{count} runs apart: {why}" for why, count in apart.items()]
    alone = sum(len(group.runs) == 1 and not group.apart for group in found)
    parts += [f"{alone} runs have no other side to share a process with"] if alone else []
    return f"pairing: {'; '.join(parts)}"
