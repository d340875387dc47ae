"""Which value of each axis a sweep compares the axis's other values with: the axis's baseline.

A sweep answers a question along each axis it varies that has a baseline.
`precision=fp32,amp_bf16` asks how much faster amp_bf16 is than fp32.
`memory_format=contiguous,channels_last` asks the same of channels_last.
The planner writes each run's baselines into its config (`baselines`), so that every view reads them from the records.

An axis's baseline is the first of these that the sweep runs:

1. the value the sweep sets (`+baselines.precision=amp_bf16`); one it does not run is refused;
2. the workload's declared baseline, for its own axis (input_type=tensor, impl=loop...);
3. the axis's natural baseline (conf/schema.py `NATURAL_BASELINES`: fp32, contiguous, tensor, eager...);
4. the value the sweep lists first (a package version, an axis of the user's own).

Axes whose values are other work are not compared: a model, a problem size, ranks (`NOT_COMPARED`).
Nor are two workloads, unless one is the plain training step or the sweep names one (`+baselines.workload=...`):
two function benchmarks are two problems, not two ways to solve one.
"""

import dataclasses

from perfsweep.conf.schema import NATURAL_BASELINES, NOT_COMPARED, Config
from perfsweep.sweeps.spec import RunSpec


def axis_value(spec: RunSpec, axis: str) -> str | None:
    """The run's value of `axis`; a workload that does not declare its own axis is known by its name."""
    if axis == "workload":
        return spec.axes.get(axis, spec.config.workload.name)
    return spec.axes.get(axis)


def comparable(spec: RunSpec) -> list[str]:
    """The run's axes that a speed-up compares along: all but other work (a model, a size, ranks, a replicate)."""
    sizes = set(spec.config.workload.sizes)
    return [axis for axis in spec.axes if axis not in NOT_COMPARED and axis not in sizes]


def preferred(config: Config, axis: str) -> str | None:
    """The baseline the workload declares for `axis`, else the axis's natural one; None where neither is."""
    declared = config.workload.baseline
    return declared.value if declared.axis == axis and declared.value else NATURAL_BASELINES.get(axis)


def with_baselines(configs: list[Config]) -> tuple[list[Config], list[str]]:
    """Each run's config with its baselines: the axes the sweep varies, each with the value compared with.

    Returns:
        The configs, and the problems: a baseline set for an axis the sweep does not vary, or a value it does not run.
    """
    specs = [RunSpec(config=config, sweep_name="") for config in configs]
    # (workload, axis) -> the axis's values among that workload's runs, in the order the sweep lists them;
    # the workload axis's own values are the whole sweep's, under workload "*"
    listed: dict[tuple[str, str], list[str]] = {}
    for spec in specs:
        for axis in {*comparable(spec), "workload"}:
            value = axis_value(spec, axis)
            key = ("*" if axis == "workload" else spec.config.workload.name, axis)
            if value is not None and value not in listed.setdefault(key, []):
                listed[key].append(value)
    varied = {key: values for key, values in listed.items() if len(values) > 1}
    problems = _unrun(configs, {axis: values for (_, axis), values in varied.items()})
    shared: dict[tuple, dict[str, str]] = {}  # one dict per distinct baselines: runs share it, as they share nodes
    found = []
    for spec in specs:
        config = spec.config
        chosen = {}
        for axis in comparable(spec):
            values = varied.get(("*" if axis == "workload" else config.workload.name, axis))
            if values:
                want = config.baselines.get(axis) or preferred(config, axis)
                if want in values:
                    chosen[axis] = want
                elif axis != "workload":
                    chosen[axis] = values[0]
        chosen = shared.setdefault(tuple(chosen.items()), chosen)
        found.append(config if chosen == config.baselines else dataclasses.replace(config, baselines=chosen))
    return found, problems


def _unrun(configs: list[Config], varied: dict[str, list[str]]) -> list[str]:
    """The baselines a sweep sets that it cannot compare with: an axis it does not vary, a value it does not run."""
    problems = []
    for axis, value in dict.fromkeys(item for config in configs for item in config.baselines.items()):
        if axis not in varied:
            axes = ", ".join(sorted(varied)) or "none"
            problems.append(
                f"baselines.{axis}={value}: this sweep does not compare along {axis}; the axes it varies that have a "
                f"baseline: {axes}"
            )
        elif value not in varied[axis]:
            problems.append(
                f"baselines.{axis}={value}: no run of this sweep has {axis}={value}; its values: "
                f"{', '.join(varied[axis])}"
            )
    return problems
