"""The import paths a config names: the user's own code a run imports.

Those are a model, its batch factory, an input type and a workload.
They include any `_target_` inside their keyword arguments, which Hydra's instantiate builds too.
"""

from typing import Any

# config key -> what the path names there (what a run builds of it)
TARGET_KEYS = ("model._target_", "model.inputs", "input_type._target_", "workload._target_")
TARGET_GROUPS = ("model", "input_type", "workload")  # the groups whose node may name a _target_


def _nested(prefix: str, value: Any) -> dict[str, str]:
    """The `_target_`s inside keyword arguments (a layer's class, a partial), by their full keys."""
    found = {}
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "_target_" and isinstance(inner, str) and inner:
                found[f"{prefix}._target_"] = inner
            else:
                found |= _nested(f"{prefix}.{key}", inner)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found |= _nested(f"{prefix}[{index}]", inner)
    return found


def targets_of(config: Any) -> dict[str, str]:
    """Each import path `config` names, by its key (empty ones are not set)."""
    found = {}
    for key in TARGET_KEYS:
        group, field = key.split(".")
        path = getattr(getattr(config, group), field, "")
        if path:
            found[key] = path
    for group in ("model", "workload"):
        found |= _nested(f"{group}.kwargs", getattr(getattr(config, group), "kwargs", {}))
    return found


def modules_of(config: Any) -> set[str]:
    """The top-level modules of the user's code that `config` names (mylib for mylib.models.SmallCNN)."""
    return {path.split(".")[0] for path in targets_of(config).values()}


def label_of(path: str) -> str:
    """What a run with a `_target_` is called where no name is given: the path's last part (SmallCNN)."""
    return path.rsplit(".", 1)[-1]


def named_node(group: str, default: dict, name: str, target: str) -> dict:
    """The node of an option that names code of the user's own.

    It is the group's default option (`default`) with its name and _target_.
    A workload's runs are named by it, as function benchmarks' are (a `workload` axis).
    """
    node = {**default, "name": name, "_target_": target}
    if group == "workload":
        node["axes"] = {"workload": "workload.name", **(default.get("axes") or {})}
    return node
