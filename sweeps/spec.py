"""RunSpec: one planned run, frozen, with an id derived from what it measures."""

import dataclasses
import functools
import hashlib
import json
import re
from typing import Any

from conf.schema import RUN_FIELDS, Config
from train.functions.registry import FUNCTIONS

# The axes a run is known by (its columns, tags and folder name), by workload: axis -> config key.
TRAIN_AXES = {
    "model": "model.name",
    "memory_format": "memory_format.name",
    "precision": "precision.name",
    "input_type": "input_type.name",
    "compile": "compile.name",
    "loss": "loss.name",
    "optim": "optim.name",
}
FUNCTION_AXES = {"workload": "workload.name", "impl": "workload.impl", "compile": "compile.name"}
# A training step is compared with the same step on a plain Tensor; a function with its first impl.
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


# What a function benchmark does not read: left out of its identity, so a sweep's train axes do not multiply it.
NOT_IN_FUNCTIONS = ("model", "memory_format", "precision", "input_type", "loss", "optim", "data_batches")


def run_fields(config: Config) -> dict[str, Any]:
    """The fields that define what a run measures (no launcher, tracker or sweep settings)."""
    names = RUN_FIELDS if config.workload.name == "train_step" else [n for n in RUN_FIELDS if n not in NOT_IN_FUNCTIONS]
    values = {name: getattr(config, name) for name in names}
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
        replicate = {"replicate": str(self.config.replicate)} if self.config.repeats > 1 else {}
        if self.config.workload.name == "train_step":
            return {**{axis: str(flat[key]) for axis, key in TRAIN_AXES.items()}, **replicate}
        bench = FUNCTIONS.get(self.config.workload.name)
        sized = {f: str(flat[f"workload.{f}"]) for f in (bench.uses if bench else ())}
        return {**{axis: str(flat[key]) for axis, key in FUNCTION_AXES.items()}, **sized, **replicate}

    @property
    def baseline(self) -> dict[str, str]:
        """The axis this run is compared along and the value of the run it is compared with."""
        if self.config.workload.name == "train_step":
            return {"axis": "input_type", "value": BASELINE_INPUT_TYPE}
        bench = FUNCTIONS.get(self.config.workload.name)
        return {"axis": "impl", "value": bench.impls[0] if bench else ""}

    @property
    def name(self) -> str:
        named = {**TRAIN_AXES, **FUNCTION_AXES}
        parts = [value if axis in named else f"{axis}={value}" for axis, value in self.axes.items()]
        return safe_name("-".join([*parts, self.run_id[:8]]))

    def record(self) -> dict[str, Any]:
        """What a run folder's config.json holds."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "axes": self.axes,
            "baseline": self.baseline,
            "config": dataclasses.asdict(self.config),
        }
