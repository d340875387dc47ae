"""A workload's declaration, checked before its runs are named.

It is its axes, its sizes and its baseline.
A workload's yaml declares them (conf/schema.py `DECLARATION`).
The yaml is perfsweep's or the user's own.
A typo there would crash the naming of its runs.
Or it would compare its axis with another value than the one it names.
"""

import dataclasses
from typing import Any

from perfsweep.conf.schema import Config, WorkloadConf
from perfsweep.sweeps.keys import did_you_mean
from perfsweep.sweeps.spec import setting


def declaration_problems(configs: list[Config]) -> list[str]:
    """What each workload's declaration names that its runs have not.

    That is a key, a field or an axis.
    """
    seen: dict[str, list[str]] = {}
    for config in configs:
        workload = config.workload
        if workload.name not in seen:
            seen[workload.name] = _problems(config, workload)
    return [problem for found in seen.values() for problem in found]


def _problems(config: Config, workload: WorkloadConf) -> list[str]:
    where = f"workload {workload.name} declares"
    fields = [f.name for f in dataclasses.fields(WorkloadConf)]
    problems = []
    for axis, key in workload.axes.items():
        if (missing := _missing(config, key)) is not None:
            problems.append(f"{where} its axis {axis} as {key}, which its runs have not: no {missing}")
    for size in workload.sizes:
        if size not in fields:
            problems.append(f"{where} the size {size}, no field of a workload{did_you_mean(size, fields)}")
    axes = [*workload.axes, *workload.sizes]
    if workload.baseline.axis and workload.baseline.axis not in axes:
        problems.append(
            f"{where} its baseline along {workload.baseline.axis}, none of its axes "
            f"({', '.join(axes) or 'none'}){did_you_mean(workload.baseline.axis, axes)}"
        )
    return problems


def _missing(config: Config, key: str) -> str | None:
    """The part of `key` (workload.impl) that the config has not, with the nearest it has.

    None where it has all.
    """
    node: Any = config
    for part in key.split("."):
        if isinstance(node, dict):  # the arguments a workload's or a model's code is given (kwargs)
            names = list(node)
        else:
            names = [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []
        if part not in names:
            return f"{part!r}{did_you_mean(part, names)}"
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return None


def unrun_baselines(configs: list[Config], sources: dict[str, str], typed: str) -> tuple[list[str], list[str]]:
    """Where a workload's declared baseline is not run.

    It is a refusal where `typed` set it, else a notice.

    `typed` is the source of what the command line sets.
    Its axis is one the sweep varies.
    A narrowed sweep may not run a yaml's baseline.
    That baseline gives way: its axis's speed-ups are over another value (sweeps/baselines.py).
    A baseline the sweep sets (+baselines.AXIS=VALUE) is the sweep's choice.
    That goes unsaid.
    """
    said, refused = {}, {}
    for config in configs:
        declared = config.workload.baseline
        chosen = config.baselines.get(declared.axis)
        if not chosen or chosen == declared.value or f"baselines.{declared.axis}" in sources:
            continue
        if typed in (sources.get("workload.baseline.value"), sources.get("workload.baseline")):
            key = config.workload.axes.get(declared.axis, f"workload.{declared.axis}")
            ran = dict.fromkeys(str(setting(c, key)) for c in configs if c.workload.name == config.workload.name)
            refused[declared.axis] = (
                f"workload.baseline.value={declared.value}: no run of this sweep has {declared.axis}="
                f"{declared.value}; its values: {', '.join(ran)}{did_you_mean(str(declared.value), list(ran))}"
            )
        else:
            said[config.workload.name, declared.axis] = (
                f"workload {config.workload.name} declares its baseline {declared.axis}={declared.value}, which this "
                f"sweep does not run: its {declared.axis} speed-ups are over {chosen}, the first it lists"
            )
    return list(refused.values()), list(said.values())


def size_problems(configs: list[Config]) -> list[str]:
    """Each size a step of the user's own declares (workload.size) at 0 or less: a problem of no size.

    perfsweep's own workloads check their sizes themselves (train/checks.py).
    """
    said = {}
    for config in configs:
        workload = config.workload
        for field in workload.sizes if workload._target_ else ():
            value = getattr(workload, field, None)
            if isinstance(value, int | float) and not isinstance(value, bool) and value <= 0:
                said[field, value] = (
                    f"workload.{field}={value} must be 1 or more: workload {workload.name} declares {field} its "
                    "problem's size"
                )
    return list(said.values())
