"""Options that installed packages add to perfsweep's groups, by entry points.

A package declares its options in its pyproject.toml:

    [project.entry-points."perfsweep.input_types"]
    metaimage = "imagelib.tensors:MetaImage"

Once the package is installed, `input_type=metaimage` is an option like perfsweep's own.
It is the group's default option with that `_target_` and name, and --help lists it.
The groups are perfsweep.models, perfsweep.input_types and perfsweep.workloads.
A workload takes the training step's declaration: what it reads, its axes, its baseline.
Entry points are read from the packages' metadata, never imported here.
"""

import dataclasses
import importlib.metadata

from hydra.core.config_store import ConfigStore

from perfsweep.conf.import_paths import named_node

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
        return named_node(self.group, default, self.name, self.target)


def _distribution(entry_point: importlib.metadata.EntryPoint) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an unnamed package"


def plugins() -> tuple[list[Plugin], list[str]]:
    """Every option that installed packages declare.

    Returns:
        The options, and the problems: a name two packages declare in one group.
    """
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


_REGISTERED: set[tuple[str, str]] = set()  # (group, name) this process put into the ConfigStore


def register(found: list[Plugin], defaults: dict[str, dict], taken: set[tuple[str, str]]) -> None:
    """Put each plugin's option into Hydra's ConfigStore, where composition and --help find it.

    They replace those put there before: packages come and go.

    Args:
        defaults: each group's default option, as a dict.
        taken: the (group, name) of perfsweep's own options; a plugin does not replace them (that is refused).
    """
    store = ConfigStore.instance()
    for group, name in _REGISTERED:
        store.repo.get(group, {}).pop(f"{name}.yaml", None)
    _REGISTERED.clear()
    for plugin in found:
        if (plugin.group, plugin.name) not in taken:
            store.store(group=plugin.group, name=plugin.name, node=plugin.node(defaults[plugin.group]))
            _REGISTERED.add((plugin.group, plugin.name))
