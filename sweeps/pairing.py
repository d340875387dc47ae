"""Which runs share a process: the sides of the sweep's comparisons, measured in alternating blocks (pairing=auto).

A run is compared along each axis it records a baseline for (its config's `baselines`, sweeps/baselines.py).
Its sides are the runs of one round that differ only in those axes, where a process can hold them side by side.
So the default sweep's six configurations share a process in each round: both memory formats, all three input types.
A side that sets process-wide state the other sides do not runs alone, with the reason.
Comparisons along other axes (a package version, a function's impl) are of runs in processes of their own.
Each side builds its own model and inputs from the same seed.
The launch says which runs are apart, and why.
"""

import collections
import dataclasses
import functools
from pathlib import Path

from perfsweep.conf.schema import Pairing
from perfsweep.records.words import counted
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


def paired_axes(config) -> list[str]:
    """The axes along which a run's comparisons can share its process: those it is compared along that one holds."""
    return [axis for axis in config.baselines if axis in PAIRABLE]


def apart_axes(config) -> list[str]:
    """The axes a run is compared along whose sides one process does not hold (a package version, an impl...)."""
    return [axis for axis in config.baselines if axis not in PAIRABLE]


def _comparison(spec: RunSpec) -> str:
    """What the run's sides share: every field it measures but those of the axes it is paired along.

    That is each axis's whole option (input_type, memory_format...), or the one setting it names (impl, label).
    A run compared along no axis a process holds shares it with the sides of the axes it is compared along:
    they are one comparison, each side in a process of its own.
    A run compared along no axis is a comparison of its own.
    """
    config = spec.config
    axes = paired_axes(config) or apart_axes(config)
    if not axes:
        return spec.run_id
    fields = run_fields(config)
    for axis in axes:
        node, _, leaf = config.workload.axes.get(axis, axis).partition(".")
        if node == "workload" and leaf:
            fields[node] = {k: v for k, v in fields[node].items() if k != leaf}
        else:
            fields.pop(node, None)
    return canonical_json(fields)


def _apart(sides: list[RunSpec]) -> str:
    """Why the sides of one comparison and round run in processes of their own; "" where they need not."""
    if len(sides) < 2:
        return ""
    config = sides[0].config
    if config.pairing == Pairing.process:
        return "pairing=process"
    if config.dist.name != "none":
        return f"a run across ranks (dist={config.dist.name}) has processes of its own"
    if not paired_axes(config):
        return _held_apart(apart_axes(config))
    return ""


def _process_wide(spec: RunSpec) -> tuple[str, str]:
    """The process-wide state this side sets under pairing=auto, and its description; ("", "") where none."""
    config = spec.config
    if config.pairing == Pairing.process:
        return "", ""
    axes = paired_axes(config)
    found = []
    if "precision" in axes and config.precision.tf32:
        found.append(
            ("tf32", f"precision={config.precision.name} sets the TF32 switches of the whole process (precision.tf32)")
        )
    if "input_type" in axes and config.input_type.name in FASTAI_INPUT_TYPES and not config.input_type._target_:
        found.append(("fastai", f"input_type={config.input_type.name} imports fastai, which patches torch itself"))
    if "compile" in axes and on_a_gpu(config) and config.compile.enabled and config.compile.mode in CUDA_GRAPHS:
        found.append(
            ("cudagraphs", f"compile={config.compile.name} records CUDA graphs in a memory pool the process shares")
        )
    return "+".join(state for state, _ in found), "; ".join(why for _, why in found)


# NVIDIA's device file, AMD's compute interface, WSL 2's (there for any GPU, CUDA or not: "may" run on a GPU)
GPU_FILES = ("/dev/nvidia0", "/dev/kfd", "/dev/dxg")


@functools.cache
def host_has_gpu() -> bool:
    """Whether this host has a GPU, by its device files: the planner does not import torch."""
    return any(Path(path).exists() for path in GPU_FILES)


def on_a_gpu(config) -> bool:
    """Whether the run may run on a GPU.

    device=auto is a GPU where there is one: on this host, for a local launch; on Slurm, maybe.
    """
    if config.device != "auto":
        return config.device != "cpu"
    return config.launcher.name == "slurm" or host_has_gpu()


def between_processes(runs: list[RunSpec]) -> list[str]:
    """The axes the sweep compares along whose sides one process does not hold, in order of first appearance."""
    return list(dict.fromkeys(axis for spec in runs for axis in apart_axes(spec.config)))


def _held_apart(axes: list[str]) -> str:
    return (
        f"its sides differ in {', '.join(axes)}, which one process does not hold side by side (only "
        f"{', '.join(PAIRABLE)})"
    )


def refusals(runs: list[RunSpec]) -> list[str]:
    """Under pairing=in_process, why the sides that cannot share a process cannot; [] where all can."""
    if not runs or runs[0].config.pairing != Pairing.in_process:
        return []
    apart: dict[str, list[str]] = {}
    for group in groups(runs):
        alone = len(group.runs) == 1 and paired_axes(group.runs[0].config)
        why = group.apart or ("no other side of its comparison can share its process" if alone else "")
        if why:
            apart.setdefault(why, []).extend(spec.name for spec in group.runs)
    return [
        f"pairing=in_process: {counted(len(names), 'run')} cannot share a process with their "
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
    processes = counted(len(paired), "process", "processes")
    parts = [f"{counted(sides, 'run')} as {processes} of a comparison's sides"] if paired else []
    apart: collections.Counter[str] = collections.Counter()
    for group in found:
        apart[group.apart] += len(group.runs) if group.apart else 0
    apart.pop("", None)
    parts += [f"{counted(count, 'run')} apart: {why}" for why, count in apart.items()]
    mixed = between_processes([spec for group in found if not group.apart for spec in group.runs])
    parts += [f"comparisons along {', '.join(mixed)} are between processes: {_held_apart(mixed)}"] if mixed else []
    alone = sum(len(group.runs) == 1 and not group.apart and not group.runs[0].config.baselines for group in found)
    parts += [f"{counted(alone, 'run')} compared along no axis, each in a process of its own"] if alone else []
    return f"pairing: {'; '.join(parts)}"
