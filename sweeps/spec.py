"""RunSpec: one planned run, frozen, with an id derived from what it measures."""

import dataclasses
import functools
import hashlib
import json
import re
import weakref
from typing import Any

from perfsweep.conf.schema import DECLARATION, IDENTITY_WHEN_SET, READ_BY_EVERY_WORKLOAD, RUN_FIELDS, Config

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")


def run_fields(config: Config) -> dict[str, Any]:
    """The fields that define what a run measures: those its workload reads.

    Launcher, tracker and sweep settings are left out.
    So is the workload's declaration, which is not a setting.
    """
    reads = config.workload.reads
    names = [name for name in RUN_FIELDS if name in READ_BY_EVERY_WORKLOAD or name in reads]
    fields = {name: _identity_value(getattr(config, name)) for name in names}
    fields = {name: value for name, value in fields.items() if name not in unset(config)}
    if "env" in fields:
        fields["env"] = config.env.packages  # its cache and index are where it is built from, not what it is
    return fields


def unset(config: Config) -> set[str]:
    """Run fields left out of a run's identity at what a run was before they existed.

    So earlier sweeps' runs are found again.
    They are perfsweep's own environment (torch=current, no env.packages) and one process (dist=none).
    """
    return ({*ENV_FIELDS} if not env_axes(config) else set()) | ({"dist"} if config.dist.name == "none" else set())


def _identity_names(node: Any) -> tuple[str, ...]:
    """The fields of a config node that count in a run's identity.

    A workload's declaration does not count.
    Nor does a field of IDENTITY_WHEN_SET at its default.
    """
    return tuple(
        f.name
        for f in sorted(dataclasses.fields(node), key=lambda f: f.name)
        if f.name not in DECLARATION and not (f.metadata == IDENTITY_WHEN_SET and getattr(node, f.name) == _default(f))
    )


def _default(field: dataclasses.Field) -> Any:
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def _identity_value(value: Any) -> Any:
    """A run field's value as its identity counts it (for a node: the fields _identity_names gives)."""
    if not dataclasses.is_dataclass(value):
        return value
    whole = dataclasses.asdict(value)
    return {name: whole[name] for name in _identity_names(value)}


_NODE_JSON: dict[tuple[int, str], str] = {}  # (id of a config node, which of its fields) -> JSON, while it lives
_LEAVES = {True: "true", False: "false", None: "null"}


def _cached(node: Any, which: str, serialise) -> str:
    key = (id(node), which)
    if key not in _NODE_JSON:
        _NODE_JSON[key] = serialise()
        weakref.finalize(node, _NODE_JSON.pop, key, None)
    return _NODE_JSON[key]


@functools.lru_cache(maxsize=4096)
def _string_json(text: str) -> str:
    return json.dumps(text)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(sorted(f.name for f in dataclasses.fields(cls)))


def _fields_json(node: Any, names: tuple[str, ...]) -> str:
    return "{" + ", ".join(f"{_string_json(n)}: {canonical_json(getattr(node, n))}" for n in names) + "}"


class _Json(str):
    """Text that is JSON already."""


def canonical_json(value: Any) -> str:
    """json.dumps(value, sort_keys=True, default=str), with each config node (dataclass) serialised once.

    The runs of a grid share the nodes they do not change (sweeps/compose.py).
    So a 10,000-run plan's records and ids serialise a few dozen nodes rather than 10,000 configs.
    Configs are values: a planned node is never changed.
    """
    kind = type(value)
    if kind is str:
        return _string_json(value)
    if kind is bool or value is None:
        return _LEAVES[value]
    if kind is int:
        return str(value)
    if kind is _Json:
        return value
    if hasattr(kind, "__dataclass_fields__"):
        return _cached(value, "all", lambda: _fields_json(value, _field_names(type(value))))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string_json(k)}: {canonical_json(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(canonical_json(v) for v in value) + "]"
    return json.dumps(value, default=str)


def _identity_node_json(value: Any) -> str:
    """canonical_json(_identity_value(value)), a node's cached."""
    if not dataclasses.is_dataclass(value):
        return canonical_json(value)
    return _cached(value, "identity", lambda: _fields_json(value, _identity_names(value)))


def _identity_json(config: Config) -> str:
    """canonical_json(run_fields(config)), built from the nodes' cached JSON."""
    names = sorted(name for name in RUN_FIELDS if name in READ_BY_EVERY_WORKLOAD or name in config.workload.reads)
    names = [name for name in names if name not in unset(config)]  # as run_fields
    parts = [
        canonical_json(config.env.packages) if name == "env" else _identity_node_json(getattr(config, name))
        for name in names
    ]
    return "{" + ", ".join(f"{_string_json(n)}: {p}" for n, p in zip(names, parts, strict=True)) + "}"


ENV_FIELDS = ("torch", "env")


def env_axes(config: Config) -> dict[str, str]:
    """The package versions a run asks for beyond perfsweep's own environment, as axes.

    Returns:
        torch first, then env.packages.
    """
    torch = {"torch": config.torch} if config.torch != "current" else {}
    return {**torch, **{name: str(version) for name, version in sorted(config.env.packages.items())}}


def dist_axes(config: Config) -> dict[str, str]:
    """How a run across ranks is known: how (ddp, fsdp) and how many ranks.

    One process is known by neither.
    """
    if config.dist.name == "none":
        return {}
    return {"dist": str(config.dist.name), "world_size": str(config.dist.world_size)}


def safe_name(text: str) -> str:
    """A file name made of `text` that cannot leave its folder (no separators, no leading dot)."""
    return _UNSAFE.sub("_", text).lstrip(".") or "_"


NO_SETTING = object()  # what `setting` gives for a key the config has not


def setting(config: Config, key: str) -> Any:
    """A dotted key's value in a run's config.

    It is read through dict nodes too (workload.kwargs.num_workers)."""
    node: Any = config
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif not isinstance(node, dict) and hasattr(node, part):
            node = getattr(node, part)
        else:
            return NO_SETTING
    return node


def _shown(value: Any) -> str:
    """A setting's value in a run's name; '-' where the run has none, as the views show an axis it lacks."""
    return "-" if value is NO_SETTING else str(value)


def naming_keys(specs: list["RunSpec"], swept: set[str]) -> tuple[str, ...]:
    """The swept settings that tell apart runs of the same axes.

    `model.batch_size=8,16` is one.

    Each is then named in every run's folder name.
    So flags and `runs` say which run they mean.
    A setting that is a node (a dict) is left out.
    So is one that some run lacks.
    """
    alike: dict[tuple[tuple[str, str], ...], list[RunSpec]] = {}
    for spec in specs:
        alike.setdefault(tuple(spec.axes.items()), []).append(spec)
    groups = [group for group in alike.values() if len(group) > 1]

    def names(key: str) -> bool:
        plain = all(isinstance(setting(spec.config, key), (str, int, float, bool)) for spec in specs)
        values = [[setting(spec.config, key) for spec in group] for group in groups]
        return plain and any(len(set(map(repr, found))) > 1 for found in values)

    return tuple(key for key in sorted(swept) if names(key))


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its resolved config, a stable id and a readable folder name."""

    config: Config
    sweep_name: str
    # The words of the command that measures this configuration again, after `perfsweep` (sweeps/rerun.py)
    repro: tuple[str, ...] = ()
    # Each file of its config dirs, by path, with its digest when planned: the command plans what they hold then
    repro_files: tuple[tuple[str, str], ...] = ()
    # Swept settings that are no axis (model.batch_size), named in the folder name as key=value (naming_keys)
    named_keys: tuple[str, ...] = ()

    @functools.cached_property
    def run_id(self) -> str:
        """A hash of what the run measures: the same grid planned again finds its runs."""
        return hashlib.sha1(_identity_json(self.config).encode()).hexdigest()[:12]

    @functools.cached_property
    def axes(self) -> dict[str, str]:
        """The axes the run is known by, as its workload declares them.

        They are its columns, tags and folder name.
        """
        workload = self.config.workload
        named = {axis: _shown(setting(self.config, key)) for axis, key in workload.axes.items()}
        sized = {field: str(getattr(workload, field)) for field in workload.sizes}
        replicate = {"replicate": str(self.config.replicate)} if self.config.repeats > 1 else {}
        return {**named, **env_axes(self.config), **dist_axes(self.config), **sized, **replicate}

    @property
    def baseline(self) -> dict[str, str]:
        """The axis this run is compared along and the value of the run it is compared with."""
        baseline = self.config.workload.baseline
        return {"axis": baseline.axis, "value": baseline.value}

    @functools.cached_property
    def name(self) -> str:
        named = self.config.workload.axes
        parts = [value if axis in named else f"{axis}={value}" for axis, value in self.axes.items()]
        parts += [f"{key}={setting(self.config, key)}" for key in self.named_keys]
        return safe_name("-".join([*parts, self.run_id[:8]]))

    def _record(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "name": self.name,
            "axes": self.axes,
            "axis_order": list(self.axes),
            "named_axes": list(self.config.workload.axes),
            "baseline": self.baseline,
            "config": self.config,
            **({"repro": list(self.repro)} if self.repro else {}),
            **({"repro_files": dict(self.repro_files)} if self.repro_files else {}),
            **({"named_keys": list(self.named_keys)} if self.named_keys else {}),
        }

    def record(self) -> dict[str, Any]:
        """What a run folder's config.json holds, and its line of the sweep's runs.jsonl."""
        return {**self._record(), "config": dataclasses.asdict(self.config)}

    def record_line(self) -> str:
        """The record as one JSON line, as records.json_line writes it."""
        record = self._record()
        record["config"] = _Json(_fields_json(self.config, _field_names(Config)))  # the run's own: not cached
        return canonical_json(record)
