"""Hydra overrides -> one typed Config per run, fast enough for grids of thousands of runs.

Composing every run with Hydra costs tens of milliseconds.
But each axis of perfsweep is a config group whose option files only fill their own node.
For example, model/resnet50.yaml fills `model`.
And most of a grid varies plain values (seed=range(0,100), optim.lr=...).
So Hydra composes the base config once, and again only where a config file or an installed package changed.
A chosen option's node is its group's schema node merged with the option's file.
That is how Hydra composes such a file.
A run's config is the base with its options' nodes put in and its plain values set.
OmegaConf validates and converts each distinct value once, against the node it lands in.
That is how Hydra itself applies a value override (OmegaConf.update).
A key added to a dict field is a plain value too.
An example is +env.packages.numpy=2.2.6: a package version as an axis.
Hydra composes in full a run with anything else:

- another added key, or a deleted one;
- an option file with its own defaults list or package;
- an interpolation.

Both ways give the same Config (tested).

The user's config dirs (hydra.searchpath, which --config-dir sets) hold options of the groups beside perfsweep's own.
Such a file may give its `_target_` the constructor's arguments beside it, as Hydra's instantiate takes them.
Those that are no setting of the group go to its `kwargs` (with_kwargs), in either way of composing.
A group's value can be an import path (model=mylib.models.SmallCNN).
It is then the group's default option with that `_target_`, named by the path's last part.
So is `KEY._target_=PATH` set without a name.

Why the fast path stays, measured with `python -m perfsweep.bench.plan_scale --runs 1000 --hydra 1000`.
The machine was a 2-core AMD EPYC VM with Python 3.11.
Hydra alone composed 1,000 runs in 93 and 97 s (two tries), about 15 minutes for 10,000.
This module planned them in 0.15 s, and 10,000 in 0.53 s.
Those times include build_plan, composition and run specs.
"""

import copy
import dataclasses
import functools
import hashlib
import itertools
import re
import tempfile
import typing
from collections import OrderedDict
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from perfsweep.conf import plugins
from perfsweep.conf.import_paths import TARGET_GROUPS, label_of, named_node
from perfsweep.conf.schema import Config, ModelConf, WorkloadConf
from perfsweep.records.code import import_path_state
from perfsweep.sweeps.keys import did_you_mean

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
GROUPS = frozenset(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "__pycache__") | {"hydra"}
_PLAIN = (bool, int, float, str, type(None))
SEARCHPATH = "hydra.searchpath"


@dataclasses.dataclass(frozen=True)
class Setting:
    """One override of one run."""

    text: str  # as Hydra reads it: "model.image_size=64"
    key: str  # the dotted key it sets
    value: Any  # its parsed value
    plain: bool  # Hydra sets it with OmegaConf.update, no composition (an added one: where it can add)
    added: bool = False  # +key=value: Hydra adds the key, and refuses one that is there


def parsed_overrides(overrides: list[str]) -> list[Override]:
    """Hydra's reading of each override, as OverridesParser.parse_overrides gives it.

    Each distinct text is parsed once (Hydra's grammar takes milliseconds an override).
    Each caller gets its own copies.
    What one changes reaches no other.
    """
    return [copy.deepcopy(_parsed(text)) for text in overrides]


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Override:
    (override,) = OverridesParser.create().parse_overrides([text])
    return override


def _setting(override: Override, text: str, value: Any) -> Setting:
    plain = (
        override.type in (OverrideType.CHANGE, OverrideType.ADD)
        and override.package is None
        and override.key_or_group not in GROUPS
        and isinstance(value, _PLAIN)
        and not (isinstance(value, str) and "${" in value)
    )
    added = override.type == OverrideType.ADD
    return Setting(f"{override.get_key_element()}={text}", override.key_or_group, value, plain, added)


def expand(overrides: list[str]) -> list[list[Setting]]:
    """Hydra overrides, sweeps included (a,b / range(..)), -> the settings of each run of the grid.

    A later override of the same key replaces an earlier one, as in Hydra's basic sweeper.
    """
    axes: OrderedDict[str, list[Setting]] = OrderedDict()
    for override in parsed_overrides(overrides):
        key = override.get_key_element()
        if override.is_sweep_override():
            if not override.is_discrete_sweep():
                raise ValueError(f"{key}: a {override.value_type.name} sweep has no list of values to run")
            pairs = zip(override.sweep_string_iterator(), override.sweep_iterator(), strict=True)
            axes[key] = [_setting(override, text, value) for text, value in pairs]
        else:
            _one_option(override)
            axes[key] = [_setting(override, override.get_value_element_as_str(), override.value())]
    return [list(run) for run in itertools.product(*axes.values())]


def _one_option(override: Override) -> None:
    """Refuse a list of a group's options (precision=[a,b]): Hydra would merge them into one run, named by the last.

    Raises:
        ValueError: naming the list, and the sweep of its items that was likely meant.
    """
    value = override.value()
    if override.key_or_group in GROUPS and override.package is None and isinstance(value, list):
        key, items = override.get_key_element(), ",".join(map(str, value))
        raise ValueError(
            f"{key}={override.get_value_element_as_str()}: a list chooses several {key} options for one run, "
            f"merged into one; to sweep them, {key}={items}"
        )


def _set(config: Any, key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    for part in parents:
        config = config[part] if isinstance(config, dict) else getattr(config, part)
    if isinstance(config, dict):
        config[leaf] = value
    else:
        setattr(config, leaf, value)


def _simple_file(path: Path) -> bool:
    """An option file that only fills its group's node: no defaults list, no package of its own."""
    stat = path.stat()
    return _simple_text(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _simple_text(path: Path, mtime_ns: int, size: int) -> bool:
    text = path.read_text()
    return "@package" not in text and not any(line.startswith("defaults:") for line in text.splitlines())


def is_choice(setting: Setting) -> bool:
    """A setting that chooses a group's option (model=resnet50), not a value in its node."""
    return setting.key in GROUPS and setting.text == f"{setting.key}={setting.value}"


def is_import_path(value: Any) -> bool:
    """A group's value that names code by import path (mylib.models.SmallCNN), not one of its option files."""
    return isinstance(value, str) and "." in value and all(part.isidentifier() for part in value.split("."))


def file_content(path: Path) -> Any:
    """A yaml file's content, as plain dicts and lists, read again only where the file changed."""
    stat = path.stat()
    return copy.deepcopy(_read_yaml(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=1024)
def _read_yaml(path: Path, mtime_ns: int, size: int) -> Any:
    return OmegaConf.to_container(OmegaConf.load(path))


def default_options() -> dict[str, str]:
    """Each group's default option, as config.yaml's defaults list chooses it."""
    listed = file_content(CONF_DIR / "config.yaml")["defaults"]
    return {group: option for entry in listed if isinstance(entry, dict) for group, option in entry.items()}


def installed_plugins() -> tuple[list[plugins.Plugin], list[str]]:
    """Registers the options installed packages declare (conf/plugins.py) where Hydra finds them.

    Returns:
        The options, and the problems (a name declared twice).
    """
    found, problems = _declared(import_path_state())
    chosen = default_options()
    defaults = {g: file_content(CONF_DIR / g / f"{chosen[g]}.yaml") for g in TARGET_GROUPS}
    own = {(g, p.stem) for g in TARGET_GROUPS for p in (CONF_DIR / g).glob("*.yaml")}
    plugins.register(found, defaults, own)
    return list(found), list(problems)


@functools.lru_cache(maxsize=4)
def _declared(state: tuple) -> tuple[list[plugins.Plugin], list[str]]:
    """The installed packages' options (plugins.plugins()), read again only where the import path changed."""
    return plugins.plugins()


def option_file(group: str, option: Any, dirs: tuple[Path, ...]) -> Path | None:
    """The yaml of a group's option: perfsweep's own (conf/), else the first config dir's that has it."""
    for folder in (CONF_DIR, *dirs):
        path = folder / group / f"{option}.yaml"
        if isinstance(option, str) and path.is_file():
            return path
    return None


def file_values(path: Path, group: str) -> dict[str, Any]:
    """What an option file sets, by dotted key (model.batch_size: 8).

    Its keys are its group's, or the root's where it is `@package _global_`.
    A constructor's argument beside `_target_` is under `kwargs` (with_kwargs).
    Its defaults list sets nothing itself.
    """
    content = OmegaConf.to_container(with_kwargs(group, OmegaConf.create(file_content(path)))) or {}
    content.pop("defaults", None)
    return _flat(content, "" if "@package _global_" in path.read_text() else group)


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    return {
        key: leaf for name, inner in value.items() for key, leaf in _flat(inner, f"{prefix}.{name}".lstrip(".")).items()
    }


class Options:
    """Where one composition's group options come from.

    They come from files (perfsweep's conf/, the user's config dirs), installed packages and import paths.
    Each lookup is made once.
    """

    def __init__(self, dirs: tuple[Path, ...], found: list[plugins.Plugin]):
        self.dirs = dirs
        self.plugins = {(plugin.group, plugin.name): plugin for plugin in found}
        self.files: dict[tuple[str, Any], Path | None] = {}
        self.owned: dict[tuple[str, Any], Path | None] = {}
        self.set_by_file: dict[tuple[str, Any], dict[str, Any]] = {}

    def file(self, group: str, option: Any) -> Path | None:
        if (group, option) not in self.files:
            self.files[group, option] = option_file(group, option, self.dirs)
        return self.files[group, option]

    def plugin(self, group: str, option: Any) -> plugins.Plugin | None:
        return self.plugins.get((group, option))

    def own_file(self, group: str, option: Any) -> Path | None:
        """The option's file where it is one of the user's config dirs', not perfsweep's conf/."""
        if (group, option) not in self.owned:
            path = self.file(group, option)
            self.owned[group, option] = path if path is not None and not path.is_relative_to(CONF_DIR) else None
        return self.owned[group, option]

    def values(self, group: str, option: Any) -> dict[str, Any]:
        """What the option's file sets, by dotted key; {} for an option that is no file."""
        if (group, option) not in self.set_by_file:
            path = self.file(group, option)
            self.set_by_file[group, option] = file_values(path, group) if path is not None else {}
        return self.set_by_file[group, option]

    def unnamed_target(self, group: str, option: Any) -> bool:
        """An option file that names code of the user's (`_target_`) and no `name`: its runs are named by the option.

        Else they would carry the schema's default name, a model they never built.
        """
        values = self.values(group, option)
        return group in TARGET_GROUPS and f"{group}._target_" in values and f"{group}.name" not in values

    def simple(self, group: str, option: Any) -> bool:
        """An option that only fills its group's node: an installed package's, or a simple file."""
        path = self.file(group, option)
        return self.plugin(group, option) is not None if path is None else _simple_file(path)

    def is_target(self, setting: Setting) -> bool:
        """A choice of model, input_type or workload that is an import path where no option has that name."""
        group, option = setting.key, setting.value
        return (
            is_choice(setting)
            and group in TARGET_GROUPS
            and is_import_path(option)
            and self.file(group, option) is None
            and self.plugin(group, option) is None
        )


def searchpath(dirs: tuple[Path, ...]) -> list[str]:
    """The override that puts the user's config dirs on Hydra's search path, after perfsweep's conf/."""
    return [f"{SEARCHPATH}=[{','.join(f'file://{d}' for d in dirs)}]"] if dirs else []


def _labelled(node: Any, group: str, keys: set[str]) -> Any:
    """A group's node whose `_target_` the run set (its settings' `keys`).

    Where the run set no name, the node is named by the path's last part.
    A workload is named by it too (a workload axis).
    """
    if group not in TARGET_GROUPS or f"{group}._target_" not in keys:
        return node
    named = named_node(group, dataclasses.asdict(node), node.name, node._target_)
    if f"{group}.name" not in keys:
        named["name"] = label_of(node._target_)
    return dataclasses.replace(node, **{k: v for k, v in named.items() if k in ("name", "axes")})


def _files_state(folders: tuple[Path, ...]) -> tuple[tuple[str, int, int], ...]:
    """Each yaml file in the config folders, with when it last changed and its size."""
    files = [p for folder in folders for p in sorted(folder.rglob("*.yaml"))]
    return tuple((str(p), stat.st_mtime_ns, stat.st_size) for p in files for stat in [p.stat()])


@functools.lru_cache(maxsize=8)
def _composed_base(dirs: tuple[Path, ...], files: tuple, found: tuple, path: tuple) -> tuple[DictConfig, bool]:
    """The base config as Hydra composes it (70 ms), and whether it has no interpolation.

    It is composed again where the config files (`files`), the installed packages' options (`found`) or the import
    path (`path`, where Hydra finds its plugins) changed.
    Files are told apart by their time and size: a rewrite of the same size within the clock's tick goes unseen.
    Callers copy it before they change it.
    """
    base = compose(config_name="config", overrides=searchpath(dirs))
    return base, "${" not in OmegaConf.to_yaml(base)


@functools.cache
def _schema() -> DictConfig:
    return OmegaConf.structured(Config)


class Composer:
    """Builds runs' configs from the base that Hydra composed once, and a node per chosen option."""

    def __init__(self, options: Options) -> None:
        self.sources = options
        files = _files_state((CONF_DIR, *options.dirs))
        base, self.fast = _composed_base(options.dirs, files, tuple(options.plugins.values()), import_path_state())
        self.base = copy.deepcopy(base)  # the runs' values are checked in it, which changes it
        self.schema = _schema()  # only read: OmegaConf.merge copies it
        self.base_config: Config = OmegaConf.to_object(self.base)
        self.options: dict[tuple[str, str], tuple[DictConfig, Any]] = {}
        self.values: dict[tuple[str, str, str], Any] = {}
        self.nodes: dict[tuple, Any] = {}

    def _option(self, group: str, option: str) -> tuple[DictConfig, Any]:
        """The group's node with a simple option chosen, as Hydra composes it.

        That is the schema's node merged with the option's file.
        The primary config sets nothing in a group.

        Returns:
            The node in a config of its own, to validate values against, and as its typed object.
        """
        if (group, option) not in self.options:
            node = OmegaConf.merge(self.schema[group], self._content(group, option))
            self.options[group, option] = (OmegaConf.create({group: node}), OmegaConf.to_object(node))
        return self.options[group, option]

    def _content(self, group: str, option: str) -> Any:
        """What an option sets.

        For a file, that is its content.
        For an installed package's option or an import path, it is the group's default option.
        Its name and _target_ are those of the package's option or the import path.
        """
        path = self.sources.file(group, option)
        if path is not None:
            content = with_kwargs(group, OmegaConf.create(file_content(path)))
            if self.sources.unnamed_target(group, option):
                content.name = option
            return content
        default = OmegaConf.to_container(self.base[group])
        plugin = self.sources.plugin(group, option)
        return plugin.node(default) if plugin else named_node(group, default, label_of(option), option)

    def _value(self, validator: DictConfig, choice: str, setting: Setting) -> Any:
        """The value as its field's type makes it, checked once per distinct value and node."""
        cache_key = (choice, setting.key, repr(setting.value))
        if cache_key not in self.values:
            try:
                OmegaConf.update(validator, setting.key, setting.value, merge=True, force_add=setting.added)
            except Exception as error:
                raise ValueError(f"Error merging override {setting.text}") from error  # Hydra's words
            parent, _, leaf = setting.key.rpartition(".")
            if OmegaConf.is_missing(OmegaConf.select(validator, parent) if parent else validator, leaf):
                raise ValueError(_missing([setting.key]))
            converted = OmegaConf.select(validator, setting.key)
            self.values[cache_key] = (
                OmegaConf.to_container(converted) if isinstance(converted, DictConfig) else converted
            )
        return self.values[cache_key]

    def can_build(self, run: list[Setting]) -> bool:
        return self.fast and all(
            (s.plain and (not s.added or self._new_in_a_dict(s.key)))
            or (is_choice(s) and (self.sources.simple(s.key, s.value) or self.sources.is_target(s)))
            for s in run
        )

    def _new_in_a_dict(self, key: str) -> bool:
        """Whether `key` names no value yet in a dict field of the base (env.packages), where Hydra adds it."""
        *parents, leaf = key.split(".")
        node: Any = self.base_config
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
        return isinstance(node, dict) and leaf not in node

    def _node(self, name: str, choice: str, settings: tuple[Setting, ...]) -> Any:
        """Field `name` of a run's config: its option's node (or the base's) with the run's plain values set.

        It is built once per distinct option and values, and shared by the runs that have them.
        Planned configs are values, never changed.
        So a grid of thousands of runs holds a few dozen nodes.
        """
        key = (name, choice, tuple((s.key, repr(s.value)) for s in settings))
        if key not in self.nodes:
            validator, node = self._option(name, choice) if choice else (self.base, getattr(self.base_config, name))
            holder = {name: copy.deepcopy(node) if settings else node}
            for setting in settings:
                _set(holder, setting.key, self._value(validator, choice, setting))
            self.nodes[key] = _labelled(holder[name], name, {s.key for s in settings})
        return self.nodes[key]

    def build(self, run: list[Setting]) -> Config:
        choices = {s.key: s.value for s in run if not s.plain}
        plain: dict[str, tuple[Setting, ...]] = {}
        for setting in run:
            if setting.plain:
                name = setting.key.split(".")[0]
                plain[name] = (*plain.get(name, ()), setting)
        config = copy.copy(self.base_config)  # its other fields are the base's nodes, shared
        for name in {*choices, *plain}:
            setattr(config, name, self._node(name, choices.get(name, ""), plain.get(name, ())))
        return config

    def compose(self, run: list[Setting]) -> Config:
        if self.can_build(run):
            return self.build(run)
        return composed_by_hydra(run, self.sources)


def hydra_overrides(run: list[Setting], options: Options) -> list[str]:
    """The run's overrides as Hydra takes them.

    An import path chosen for a group becomes its default option's _target_ and name.
    These are set first, before the values the run sets, as a choice is.
    """
    chosen = [s for s in run if options.is_target(s)]
    paths = [text for s in chosen for text in (f"{s.key}._target_={s.value}", f"{s.key}.name={label_of(s.value)}")]
    named = {s.key for s in run}
    paths += [
        f"{s.key}.name={s.value}"
        for s in run
        if is_choice(s) and f"{s.key}.name" not in named and options.unnamed_target(s.key, s.value)
    ]
    moved = converted(options.dirs)
    dirs = (moved, *options.dirs) if moved else options.dirs
    return searchpath(dirs) + paths + [s.text for s in run if s not in chosen]


def as_hydra_takes(overrides: list[str], dirs: tuple[Path, ...]) -> list[str]:
    """Overrides as Hydra's own flags take them (--cfg job).

    An import path chosen for a group becomes its _target_ and name.
    A sweep (a,b) is left as it is, for Hydra to say what it says of it.
    """
    try:
        runs = expand(overrides)
    except ValueError:  # a sweep with no list of values: Hydra says what it says of it
        return overrides
    if len(runs) != 1:
        return overrides
    return hydra_overrides(runs[0], Options(dirs, installed_plugins()[0]))


def composed_by_hydra(run: list[Setting], options: Options) -> Config:
    """The run's Config as Hydra composes it, checked once more against the schema.

    A value an interpolation gave (launcher.gpus=${steps}) is resolved only here, past Hydra's own check of its type.
    """
    overrides = hydra_overrides(run, options)
    composed = compose(config_name="config", overrides=overrides)
    missing = OmegaConf.missing_keys(composed)
    if missing:
        raise ValueError(_missing(sorted(missing)))
    config = OmegaConf.to_object(composed)
    OmegaConf.structured(config)
    keys = {s.key for s in run} | {f"{s.key}._target_" for s in run if options.is_target(s)}
    for group in TARGET_GROUPS:
        setattr(config, group, _labelled(getattr(config, group), group, keys))
    return config


def _missing(keys: list[str]) -> str:
    return f"{', '.join(f'{key}=???' for key in keys)}: ??? leaves a value missing; every run needs one"


def compose_all(
    runs: list[list[Setting]], reuse: bool = True, dirs: tuple[Path, ...] = ()
) -> tuple[list[Config], dict[str, str]]:
    """Every run's Config, and every distinct error with the first run that has it.

    `dirs` are the user's config dirs.
    `reuse=False` composes every run with Hydra from scratch (what the templates must equal).
    """
    configs, errors = [], {}
    options = Options(dirs, installed_plugins()[0])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="perfsweep"):
        composer = Composer(options)
        for run in runs:
            try:
                if reuse:
                    configs.append(composer.compose(run))
                else:
                    configs.append(composed_by_hydra(run, options))
            except Exception as error:
                errors.setdefault(_explain(error, run, options), " ".join(s.text for s in run))
    return configs, errors


def _explain(error: Exception, run: list[Setting], options: Options) -> str:
    """A composition error as perfsweep words its own: KEY=VALUE, where it was set, what is wrong and what to write."""
    schema = next((e for e in _chain(error) if isinstance(e, OmegaConfBaseException) and e.full_key), None)
    if schema is not None:
        return _schema_problem(schema, error, run, options)
    cause = error.__cause__
    text = f"{error}: {cause}" if cause and str(cause) not in str(error) else str(error)
    return text.split("\nConfig search path:")[0].strip()


# The groups whose option files may give a _target_'s arguments beside it, as Hydra's own convention does, and their
# schemas: the keys that are not settings of the group are the arguments.
KWARGS_SCHEMAS = {"model": ModelConf, "workload": WorkloadConf}
_OVERRIDE = re.compile(r"^Error merging override (.+)$", re.MULTILINE)  # Hydra's words, and the fast path's
_IN_FILE = re.compile(r"^In '(\w+)/([^']+)'", re.MULTILINE)  # Hydra's words for an error in an option file


def _chain(error: BaseException) -> list[BaseException]:
    """The error, then the ones it was raised from or while handling (Hydra raises its own over OmegaConf's)."""
    found = []
    while error is not None and error not in found:
        found.append(error)
        error = error.__cause__ or error.__context__
    return found


def _fields(schema: type) -> list[str]:
    return [f.name for f in dataclasses.fields(schema)]


def with_kwargs(group: str, content: Any) -> Any:
    """An option's content, where it gives a `_target_` its arguments beside it, with those under `kwargs`.

    Such a file is written as Hydra's instantiate takes it (`_target_: mylib.models.Net` and `width: 64`).
    A key that is one of the group's settings stays one.
    A key given both beside `_target_` and in `kwargs` stays where it is, for the schema to refuse.

    Returns:
        `content` itself where nothing moves.
    """
    schema = KWARGS_SCHEMAS.get(group)
    if schema is None or not isinstance(content, DictConfig) or not content.get("_target_"):
        return content
    raw = OmegaConf.to_container(content, resolve=False)
    settings = {*_fields(schema), "defaults"}
    moved = {key: value for key, value in raw.items() if key not in settings}
    given = raw.get("kwargs") or {}
    if not moved or not isinstance(given, dict) or any(key in given for key in moved):
        return content
    kept = {key: value for key, value in raw.items() if key in settings}
    return OmegaConf.create({**kept, "kwargs": {**given, **moved}})


@functools.cache
def scratch() -> tempfile.TemporaryDirectory:
    """This process's folder of option files written for Hydra, removed when the process ends."""
    return tempfile.TemporaryDirectory(prefix="perfsweep-options-")


def converted(dirs: tuple[Path, ...]) -> Path | None:
    """A folder of the user's option files that give a `_target_` its arguments beside it, those moved (with_kwargs).

    Hydra composes a file as it is, so it finds these first, in place of the files themselves.
    The fast path moves them as it reads each file: both ways give one Config.

    Returns:
        The folder, or None where no file of `dirs` has arguments to move.
    """
    found = {}
    for group in KWARGS_SCHEMAS:
        for path in sorted({p for folder in dirs for p in (folder / group).glob("*.yaml")}):
            if option_file(group, path.stem, dirs) != path or "@package" in path.read_text():
                continue  # another file of that name comes first; or its keys are not its group's
            content = OmegaConf.load(path)
            moved = with_kwargs(group, content)
            if moved is not content:
                found[group, path.stem] = OmegaConf.to_yaml(moved)
    if not found:
        return None
    folder = Path(scratch().name) / hashlib.sha1(repr(sorted(found.items())).encode()).hexdigest()[:12]
    for (group, name), text in found.items():
        (folder / group).mkdir(parents=True, exist_ok=True)
        (folder / group / f"{name}.yaml").write_text(text)
    return folder


# The values a key takes beyond its type's, which a refusal of its type would not name
TAKES = {"repeats": "repeats takes a whole number, 1 or more, or auto: rounds until its comparisons are decided"}


def _schema_problem(schema: OmegaConfBaseException, error: Exception, run: list[Setting], options: Options) -> str:
    """A value the schema refused, as KEY=VALUE: what is wrong (OmegaConf's sentence, without its key's lines)."""
    said = schema.msg.strip().splitlines()[0] + (f"; {TAKES[schema.full_key]}" if schema.full_key in TAKES else "")
    override = _OVERRIDE.search(str(error))
    if override:
        return f"{override.group(1)}: {said}"
    key = schema.full_key
    # a value checked once it was resolved, past the override that set it: its key is then its node's own
    setting = next((s for s in run if s.key == key), None) or next((s for s in run if s.key.endswith(f".{key}")), None)
    if setting is not None:
        return f"{setting.text}: {said}"
    group, _, leaf = key.partition(".")
    in_file = _IN_FILE.search(str(error))
    chosen = in_file.groups() if in_file else next(((s.key, s.value) for s in run if s.key == group), None)
    path = options.file(*chosen) if chosen else None
    content = OmegaConf.load(path) if path is not None and "@package" not in path.read_text() else None
    value = OmegaConf.select(content, leaf, default=None, throw_on_missing=False) if content is not None else None
    shown = f"{key}={_yaml(value)}" if value is not None else key
    node = typing.get_type_hints(Config).get(group)
    if isinstance(schema, ConfigKeyError) and dataclasses.is_dataclass(node):
        return f"{shown}{f' (in {path})' if path else ''}: {_no_such_key(group, leaf, value, content, _fields(node))}"
    return f"{shown}: {said}"


# what a key that is not a setting of the group may be instead (as sweeps/keys.py says of an override)
BELONGS = {
    "model": "a keyword argument of the model's constructor goes under kwargs",
    "workload": "a setting of a step of your own goes under kwargs",
}


def _no_such_key(group: str, leaf: str, value: Any, content: Any, fields: list[str]) -> str:
    """What is wrong with an option file's key that its group's schema has not, and what to write instead."""
    hint = did_you_mean(leaf, fields)
    given = content.get("kwargs") if content is not None else None
    if isinstance(given, DictConfig) and leaf in given:
        hint += "; it is in its kwargs too: give it once"
    elif group in BELONGS and "." not in leaf:
        hint += f"; {BELONGS[group]}: `kwargs: {{{leaf}: {_yaml(value)}}}`"
    return f"{group} has no key {leaf!r}{hint} (its keys: {', '.join(sorted(fields))})"


def _yaml(value: Any) -> str:
    """A value as a yaml file or an override writes it: 0.1, relu, [1, 2], {a: 1}."""
    plain = OmegaConf.to_container(value, resolve=False) if OmegaConf.is_config(value) else value
    if isinstance(plain, dict):
        return "{" + ", ".join(f"{key}: {_yaml(inner)}" for key, inner in plain.items()) + "}"
    if isinstance(plain, list):
        return "[" + ", ".join(_yaml(inner) for inner in plain) + "]"
    return "null" if plain is None else str(plain).lower() if isinstance(plain, bool) else str(plain)
