"""RunSpec: one planned run, frozen, with an id derived from what it measures."""

import dataclasses
import functools
import hashlib
import json
import re
from typing import Any

from conf.schema import DECLARATION, READ_BY_EVERY_WORKLOAD, RUN_FIELDS, Config
from records import json_line

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")


def as_dict(value: Any) -> Any:
    """A config's dataclasses as plain dicts (dataclasses.asdict without its deep copies: leaves are immutable)."""
    if dataclasses.is_dataclass(value):
        return {f.name: as_dict(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [as_dict(v) for v in value]
    if isinstance(value, dict):
        return {k: as_dict(v) for k, v in value.items()}
    return value


def run_fields(config: Config) -> dict[str, Any]:
    """The fields that define what a run measures: those its workload reads (no launcher, tracker or sweep
    settings, and not the workload's declaration, which is not a setting)."""
    reads = config.workload.reads
    fields = {
        name: as_dict(getattr(config, name)) for name in RUN_FIELDS if name in READ_BY_EVERY_WORKLOAD or name in reads
    }
    fields["workload"] = {k: v for k, v in fields["workload"].items() if k not in DECLARATION}
    return fields


def safe_name(text: str) -> str:
    """A file name made of `text` that cannot leave its folder (no separators, no leading dot)."""
    return _UNSAFE.sub("_", text).lstrip(".") or "_"


def _lookup(config: Config, key: str) -> Any:
    return functools.reduce(getattr, key.split("."), config)


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
        """The axes the run is known by (its columns, tags and folder name), as its workload declares them."""
        workload = self.config.workload
        named = {axis: str(_lookup(self.config, key)) for axis, key in workload.axes.items()}
        sized = {field: str(getattr(workload, field)) for field in workload.sizes}
        replicate = {"replicate": str(self.config.replicate)} if self.config.repeats > 1 else {}
        return {**named, **sized, **replicate}

    @property
    def baseline(self) -> dict[str, str]:
        """The axis this run is compared along and the value of the run it is compared with."""
        return dataclasses.asdict(self.config.workload.baseline)

    @functools.cached_property
    def name(self) -> str:
        named = self.config.workload.axes
        parts = [value if axis in named else f"{axis}={value}" for axis, value in self.axes.items()]
        return safe_name("-".join([*parts, self.run_id[:8]]))

    def record(self) -> dict[str, Any]:
        """What a run folder's config.json holds (and its line of the sweep's runs.jsonl)."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "axes": self.axes,
            "axis_order": list(self.axes),
            "named_axes": list(self.config.workload.axes),
            "baseline": self.baseline,
            "config": as_dict(self.config),
        }

    def record_line(self) -> str:
        """The record as one JSON line."""
        return json_line(self.record())
