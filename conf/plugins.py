"""Options that installed packages add to perfsweep's groups, by entry points.

A package declares, in its pyproject.toml,

    [project.entry-points."perfsweep.input_types"]
    metaimage = "imagelib.tensors:MetaImage"

and once it is installed `input_type=metaimage` is an option like perfsweep's own: the group's default option with
that `_target_` and name, listed by --help. The groups are perfsweep.models, perfsweep.input_types and
perfsweep.workloads (a workload takes the training step's declaration: what it reads, its axes, its baseline).
Entry points are read from the packages' metadata, never imported here.
"""

import dataclasses
import importlib.metadata

from hydra.core.config_store import ConfigStore

ENTRY_POINT_GROUPS = {
    "model": "perfsweep.models",
    "input_type": "perfsweep.input_types",
    "workload": "perfsweep.workloads",
}


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One option an installed package adds: its group, name, import path, and the package that declares it."""

    group: str
    name: str
    target: str
    distribution: str

    def node(self, default: dict) -> dict:
        """Its config node: the group's default option's (`default`) with its name and _target_."""
        return {**default, "name": self.name, "_target_": self.target}


def _distribution(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an unnamed package"


def plugins() -> tuple[list[Plugin], list[str]]:
    """Every option that installed packages declare, and the problems: a name two packages declare in one group."""
    found: dict[tuple[str, str], Plugin] = {}
    problems = []
    declared = importlib.metadata.entry_points()
    for group, entry_group in ENTRY_POINT_GROUPS.items():
        for entry_point in declared.select(group=entry_group):
            target = entry_point.value.replace(":", ".").replace(" ", "")
            plugin = Plugin(group, entry_point.name, target, _distribution(entry_point))
            first = found.setdefault((group, plugin.name), plugin)
            if first != plugin and first.target != plugin.target:
                problems.append(
                    f"{group} {plugin.name!r} is declared twice, by {first.distribution} ({first.target}) and by "
                    f"{plugin.distribution} ({plugin.target}) (entry points {entry_group}); uninstall one"
                )
    return list(found.values()), problems


def register(found: list[Plugin], defaults: dict[str, dict]) -> None:
    """Put each plugin's option into Hydra's ConfigStore, where composition and --help find it; `defaults`: each
    group's default option, as a dict."""
    store = ConfigStore.instance()
    for plugin in found:
        store.store(group=plugin.group, name=plugin.name, node=plugin.node(defaults[plugin.group]))
