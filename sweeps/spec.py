"""RunSpec: one planned run, frozen, with an id derived from what it measures."""

import dataclasses
import functools
import hashlib
import json
import re
from typing import Any

from conf.schema import RUN_FIELDS, Config

# The axis label of each group: the column and tag a run is known by.
AXES = {
    "model": "model.name",
    "memory_format": "memory_format.name",
    "precision": "precision.name",
    "input_type": "input_type.name",
    "compile": "compile.name",
}
BASELINE_INPUT_TYPE = "tensor"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts to one dict with dotted keys ({"model": {"name": x}} -> {"model.name": x})."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def run_fields(config: Config) -> dict[str, Any]:
    """The fields that define what a run measures (no launcher, tracker or sweep settings)."""
    values = {name: getattr(config, name) for name in RUN_FIELDS}
    return {name: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for name, v in values.items()}


def safe_name(text: str) -> str:
    """A file name made of `text` that cannot leave its folder (no separators, no leading dot)."""
    return _UNSAFE.sub("_", text).lstrip(".") or "_"


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its resolved config, a stable id and a readable folder name."""

    config: Config
    sweep_name: str

    @functools.cached_property
    def run_id(self) -> str:
        canonical = json.dumps(run_fields(self.config), sort_keys=True, default=str)
        return hashlib.sha1(canonical.encode()).hexdigest()[:12]

    @functools.cached_property
    def axes(self) -> dict[str, str]:
        flat = flatten(run_fields(self.config))
        return {axis: str(flat[key]) for axis, key in AXES.items()}

    @property
    def name(self) -> str:
        return safe_name("-".join([*self.axes.values(), self.run_id[:8]]))

    def record(self) -> dict[str, Any]:
        """What a run folder's config.json holds."""
        return {"run_id": self.run_id, "name": self.name, "axes": self.axes, "config": dataclasses.asdict(self.config)}
