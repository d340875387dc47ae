"""Sweep file + Hydra overrides -> a validated, de-duplicated list of RunSpecs.

A sweep file (sweeps/<name>.yaml) holds one of two things:

- `params` in the form of Hydra's `hydra.sweeper.params`: axis -> value, comma-separated values or a list;
- `grids`, a list of such params whose runs the sweep runs together.

Grids serve sweeps that are not one product, e.g. different impls per workload.
`scales` names smaller sizes of the sweep (`scale=cpu`, `scale=smoke`).
A scale's params apply after every grid's (or one per grid, as a list).
The command line's overrides come last.
So they narrow, widen or replace any axis.
Hydra composes every run's config before anything runs.
All composition errors are reported together.

The user's config dirs (hydra.searchpath, which --config-dir sets) add to perfsweep's own.
They add sweep files (DIR/sweeps/*.yaml) and group options (DIR/model/*.yaml...).
A name that both have is refused, never shadowed.
"""

import dataclasses
import importlib.util
import logging
import random
import re
from pathlib import Path

from hydra.errors import OverrideParseException
from hydra.utils import get_object

from perfsweep import records
from perfsweep.conf.import_paths import TARGET_GROUPS
from perfsweep.conf.schema import (
    AS_ON_A_CPU,
    READ_BY_EVERY_WORKLOAD,
    RUN_FIELDS,
    BaselineConf,
    Config,
    PrecisionConf,
    WorkloadConf,
)
from perfsweep.records import sweep_file_name
from perfsweep.records.code import repository
from perfsweep.records.repro import config_files
from perfsweep.sweeps import compose, keys, pairing, rerun
from perfsweep.sweeps.baselines import with_baselines
from perfsweep.sweeps.compose import CONF_DIR, GROUPS, SEARCHPATH, Setting
from perfsweep.sweeps.declared import declaration_problems, size_problems, unrun_baselines
from perfsweep.sweeps.model_sets import expand_model_sets, with_default_sizes
from perfsweep.sweeps.spec import RunSpec, naming_keys, safe_name
from perfsweep.sweeps.spec import setting as value_of

SWEEPS_DIR = Path(__file__).resolve().parent
# Settings of the sweep as a whole: one value for every run.
SWEEP_WIDE = (
    "launcher", "tracker", "sweep", "sweep_name", "runs_dir", "scale", "profile", "explain", "repeats", "auto", "order",
    "pairing", "blocks", "code",
)  # fmt: skip


class PlanError(ValueError):
    """The sweep cannot be planned; `problems` lists every reason found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(f"- {p}" for p in problems))


@dataclasses.dataclass(frozen=True)
class Plan:
    """The runs of one sweep and where their records go."""

    sweep_dir: Path
    runs: tuple[RunSpec, ...]
    origins: dict[str, str] = dataclasses.field(default_factory=dict)  # config key -> what set it
    problems: tuple[str, ...] = ()  # runs that did not compose (a partial build_plan)
    published: Path | None = None  # a config dir's published figures of the sweep, which its records keep
    notices: tuple[str, ...] = ()  # what the planner says before anything runs: a value or an axis that gave way
    unset_origin: str = "a default"  # what set a key that no override and no sweep file set

    def origin(self, key: str) -> str:
        """What set the value of config key `key`: the command line, a sweep file, a default, the launch resumed."""
        return self.origins.get(key, self.unset_origin)

    def explain(self, problem: str) -> str:
        """`problem`, with where the value it names was set (the command line, a sweep file, a default)."""
        return explain(problem, self.origins)

    @property
    def settings(self) -> Config:
        """The sweep-wide settings (launcher, tracker...), equal in every run."""
        return self.runs[0].config


def available_sweeps(dirs: tuple[Path, ...] = ()) -> list[str]:
    return sorted({p.stem for folder in (SWEEPS_DIR, *(d / "sweeps" for d in dirs)) for p in folder.glob("*.yaml")})


def sweep_path(name: str, dirs: tuple[Path, ...] = ()) -> Path:
    """The sweep file of sweep `name`: perfsweep's (sweeps/), or a config dir's (DIR/sweeps/)."""
    file = f"{sweep_file_name(name)}.yaml"
    found = [folder / file for folder in (SWEEPS_DIR, *(d / "sweeps" for d in dirs)) if (folder / file).is_file()]
    return found[0] if found else SWEEPS_DIR / file


def published_file(name: str, dirs: tuple[Path, ...]) -> Path | None:
    """The published figures of a config dir's sweep, if it has them.

    They sit in DIR/sweeps/published/<name>.yaml, beside its sweep file.
    perfsweep's own sweeps keep theirs in sweeps/published/.
    """
    sweep = sweep_path(name, dirs)
    figures = sweep.parent / "published" / sweep.name
    return figures if sweep.parent != SWEEPS_DIR and figures.is_file() else None


def shown_path(path: Path) -> str:
    """A config file as a message names it: sweeps/x.yaml for perfsweep's own, else its path."""
    root = SWEEPS_DIR.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _folder(entry: str) -> Path:
    """A search path entry's folder.

    The entry is file://PATH, pkg://package.folder (found without importing it), or PATH.
    """
    if entry.startswith("pkg://"):
        top, *inner = entry.removeprefix("pkg://").split(".")
        spec = importlib.util.find_spec(top)
        places = list(spec.submodule_search_locations or []) if spec else []
        return Path(places[0], *inner) if places else Path(entry)
    return Path(entry.removeprefix("file://")).expanduser().resolve()


def config_dirs(overrides: list[str]) -> tuple[tuple[Path, ...], list[str]]:
    """Splits the user's config dirs that `overrides` put on the search path (hydra.searchpath=[...]) from the rest.

    Raises PlanError for a dir that is not a folder.
    It also raises one for a dir that names a sweep or an option perfsweep has.

    Returns:
        The config dirs, and the other overrides.
    """
    entries = [o for o in compose.parsed_overrides(overrides) if o.get_key_element().lstrip("+") == SEARCHPATH]
    rest = [o for o in overrides if o.split("=", 1)[0].lstrip("+") != SEARCHPATH]
    value = entries[-1].value() if entries else []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlanError([f"{SEARCHPATH}={value}: a list of folders, {SEARCHPATH}=[file:///path/to/conf]"])
    dirs = tuple(_folder(entry) for entry in value)
    problems = [f"{SEARCHPATH}: {d} is not a folder (--config-dir DIR names one)" for d in dirs if not d.is_dir()]
    problems += _claimed_twice(tuple(d for d in dirs if d.is_dir()))
    if problems:
        raise PlanError(problems)
    return dirs, rest


def _claimed_twice(dirs: tuple[Path, ...]) -> list[str]:
    """Names given twice among sweep files and group options.

        A config dir's or an installed package's (entry points) may take a name of perfsweep's.
    It may also take the name of an earlier dir's or package's.
        Two packages may declare one name.
    """
    seen: dict[tuple[str, str], str] = {}
    found, problems = compose.installed_plugins()
    for sweeps, groups in [(SWEEPS_DIR, CONF_DIR), *((d / "sweeps", d) for d in dirs)]:
        own = [("sweeps", shown_path(p), p.stem) for p in sweeps.glob("*.yaml")]
        own += [(group, shown_path(p), p.stem) for group in sorted(GROUPS) for p in (groups / group).glob("*.yaml")]
        own += [(p.group, f"{p.distribution}'s entry point", p.name) for p in found if sweeps == SWEEPS_DIR]
        for group, where, name in sorted(own, key=lambda item: "entry point" in item[1]):
            first = seen.setdefault((group, name), where)
            if first != where:
                what = "sweep" if group == "sweeps" else f"{group} option"
                problems.append(f"{where}: {what} {name!r} is already {first}; give yours a name of its own")
    return problems


def _as_overrides(params: dict | None) -> list[str]:
    """A sweep file's params as overrides.

    A list value is swept, as its items joined by commas would be.
    """
    items = (params or {}).items()
    return [f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}" for key, value in items]


def _config_dir_hint(name: str, given: bool) -> str:
    """Where a sweep file of that name lies in or below this folder: the config dir a launch would need.

    Where none does, a launch that gave no config dir hears that a sweep of one's own needs one.
    """
    here = Path.cwd()
    found = sorted([*here.glob(f"sweeps/{name}.yaml"), *here.glob(f"*/sweeps/{name}.yaml")])
    if found:
        folder = found[0].parent.parent.relative_to(here)
        return f"; {found[0].relative_to(here)} is one: launch with --config-dir {folder}"
    return "" if given else f"; a sweep file of yours is found with --config-dir DIR (DIR/sweeps/{name}.yaml)"


def sweep_grids(name: str, scale: str = "full", dirs: tuple[Path, ...] = ()) -> list[list[str]]:
    """The overrides of each grid that sweep file `name` stands for, at `scale`."""
    path = sweep_path(name, dirs)
    if safe_name(name) != name or not path.is_file():
        close = keys.did_you_mean(name, available_sweeps(dirs))
        close = close or (_config_dir_hint(name, given=bool(dirs)) if safe_name(name) == name else "")
        raise PlanError(
            [f"unknown sweep {name!r} (sweep={name}){close}; available: {', '.join(available_sweeps(dirs))}"]
        )
    sweep = compose.file_content(path)
    grids = sweep.get("grids") or [sweep.get("params") or {}]
    scales = sweep.get("scales") or {}
    if scale == "full":
        return [_as_overrides(grid) for grid in grids]
    if scale not in scales:
        allowed = ", ".join(["full", *scales])
        raise PlanError([f"scale={scale!r} is not a scale of sweep {name}; its scales: {allowed}"])
    narrowed = scales[scale] if isinstance(scales[scale], list) else [scales[scale]] * len(grids)
    if len(narrowed) != len(grids):
        where = shown_path(path)
        raise PlanError([f"{where}: scale {scale} lists {len(narrowed)} params for {len(grids)} grids"])
    return [_as_overrides(grid) + _as_overrides(extra) for grid, extra in zip(grids, narrowed, strict=True)]


def unscaled(overrides: list[str], dirs: tuple[Path, ...] = ()) -> list[str]:
    """The overrides, with scale=NAME made scale=full where the sweep file's scale NAME sets nothing.

    A seed that runs on a CPU as published has such a scale (scale=cpu).
    Its runs are the published setting.
    """
    scale = _chosen(overrides, "scale", Config.scale)
    path = sweep_path(_chosen(overrides, "sweep", Config.sweep), dirs)
    if scale == "full" or not path.is_file():
        return overrides
    params = (compose.file_content(path).get("scales") or {}).get(scale)
    if params is None or any(params if isinstance(params, list) else [params]):  # unknown (refused later), or sets
        return overrides
    return [o for o in overrides if keys.override_key(o) != "scale"] + ["scale=full"]


def _chosen(overrides: list[str], key: str, default: str) -> str:
    chosen = [o for o in compose.parsed_overrides(overrides) if o.get_key_element() == key]
    if any(o.is_sweep_override() for o in chosen):
        raise PlanError([f"{key}= takes one value; run them one at a time"])
    return chosen[-1].value() if chosen else default


COMMAND_LINE = "the command line"


def origins(overrides: list[str], dirs: tuple[Path, ...] = ()) -> dict[str, str]:
    """Which source set each key: the sweep file, its scale, or the command line (the last one wins)."""
    name = _chosen(overrides, "sweep", Config.sweep)
    scale = _chosen(overrides, "scale", Config.scale)
    source_of: dict[str, str] = {}
    path = sweep_path(name, dirs)
    shown = shown_path(path)
    sweep = compose.file_content(path) if path.is_file() else {}
    for grid in sweep.get("grids") or [sweep.get("params") or {}]:
        source_of.update({keys.override_key(o): shown for o in _as_overrides(grid)})
    extra = (sweep.get("scales") or {}).get(scale) or {}
    for params in extra if isinstance(extra, list) else [extra]:
        source_of.update({keys.override_key(o): f"{shown} scale {scale}" for o in _as_overrides(params)})
    source_of.update({keys.override_key(o): COMMAND_LINE for o in overrides})
    return source_of


_NAMED_KEY = re.compile(r"^\+{0,2}([A-Za-z_][\w.]*)=|Could not find '(\w+)/|merging override ([\w.]+)=")


def explain(problem: str, origins: dict[str, str]) -> str:
    """Adds what set it to a problem that starts with KEY=VALUE.

    That includes a problem that names a group option Hydra could not find.
    """
    match = _NAMED_KEY.search(problem)
    if not match:
        return problem
    key = next(g for g in match.groups() if g)
    group = key.split(".")[0]
    source = origins.get(key) or (f"{origins[group]}, choosing {group}" if group in origins else "the defaults (conf/)")
    if origins.get(group) == COMMAND_LINE != origins.get(key, COMMAND_LINE):  # the command line chose the group
        source += f", with {group} set by {COMMAND_LINE}"
    first, *rest = problem.split("\n", 1)
    return "\n".join([f"{first} [set by {source}]", *rest])


def expand(overrides: list[str], dirs: tuple[Path, ...] = ()) -> list[list[Setting]]:
    """The settings of each run.

    They come from each grid of the sweep file at its scale, then the command line's overrides.
    """
    try:
        name = _chosen(overrides, "sweep", Config.sweep)
        scale = _chosen(overrides, "scale", Config.scale)
        return [run for grid in sweep_grids(name, scale, dirs) for run in compose.expand(_models(grid + overrides))]
    except PlanError:
        raise
    except Exception as error:  # Hydra's parser errors name the bad override
        raise PlanError([f"{error}"]) from error


# The run fields a step may read beyond those every workload reads: a step's `reads` names some of them.
STEP_FIELDS = tuple(name for name in RUN_FIELDS if name not in READ_BY_EVERY_WORKLOAD)
OWN_CODE = ("model._target_", "model.inputs", "workload._target_")  # the keys that name code of the user's own


@dataclasses.dataclass
class Ranked:
    """The runs' settings once ranked (`ranked`), and what the ranking says before anything runs."""

    runs: list[list[Setting]]
    notices: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    won: dict[str, str] = dataclasses.field(default_factory=dict)  # key -> the option file of the user's that set it
    # (a typed key, the option file's value it meets) -> the key's typed values: said once all runs are ranked
    typed_over: dict[tuple[str, str], dict[str, None]] = dataclasses.field(default_factory=dict)
    # (a preset's key, its value, its file) -> (each sweep file's key that replaced it, where it was set) -> its values
    presets_over: dict[tuple[str, str, str], dict[tuple[str, str], dict[str, None]]] = dataclasses.field(
        default_factory=dict
    )

    def note_typed_over(self) -> None:
        """Say each option file's value that the command line's values leave out.

        Where one of them is the file's value, nothing is left out.
        """
        for (key, theirs), values in self.typed_over.items():
            if theirs.split(" (", 1)[0] not in (f"{key}={value}" for value in values):
                self.notices.append(f"{key}={','.join(values)} (the command line) runs, not {theirs}")

    def note_presets_over(self) -> None:
        """Say each preset's value that a sweep file's params replace in every run.

        Where a run keeps the preset's value, nothing is left out.
        """
        for (key, value, path), params in self.presets_over.items():
            if any(s.key == key and str(s.value) == value for run in self.runs for s in run):
                continue
            where = ", ".join(f"{param}={','.join(values)} ({source})" for (param, source), values in params.items())
            self.notices.append(
                f"{where} {'runs' if len(params) == 1 else 'run'}, not {key}={value} ({path}): a sweep file's params "
                f"come before perfsweep's presets; type {key}={value} to run the preset's"
            )


def ranked(runs: list[list[Setting]], typed: set[str], dirs: tuple[Path, ...], sources: dict[str, str]) -> Ranked:
    """Each run's settings by precedence.

    The command line comes first (`typed`: the keys it sets).
    An option file of the user's comes next (DIR/model/mine.yaml), then the sweep file's params.
    perfsweep's own options and defaults (conf/) come last.
    So a sweep file's param gives way to a value that an option file of the user's sets.
    Without sweep=, the default sweep's axes give way to a model or step of the user's own.
    They ask about perfsweep's model.
    A step named by its import path reads what its class declares (`reads`).
    """
    options = compose.Options(dirs, compose.installed_plugins()[0])
    question = {} if "sweep" in typed else _axes_of(Config.sweep, dirs)
    found = Ranked([])
    own: dict[str, None] = {}
    theirs: dict[str, None] = {}  # perfsweep's own models beside the user's: they keep the question's axes
    left_out = False
    for run in runs:
        kept = _by_files(run, typed, options, sources, found) if dirs else run  # (option files of the user's)
        _note_presets_given_way(kept, typed, options, sources, found)
        if question and (code := _own_code(kept, options)):
            own[code] = None
            kept = [s for s in kept if s.key not in question or s.key in typed]
        elif question:
            theirs |= {str(s.value): None for s in kept if s.key == "model"}
        found.runs.append(kept + _declared_reads(kept, typed, options, found))
        left_out = left_out or len(kept) < len(run)
    if left_out:  # (runs that differed in what gave way are one run now)
        found.runs = list({tuple(s.text for s in run): run for run in found.runs}.values())
    found.note_typed_over()
    found.note_presets_over()
    axes = [key for key in question if key not in typed]
    if own and axes:
        defaults = compose.default_options()
        found.notices.append(
            f"{', '.join(own)} {'are' if len(own) > 1 else 'is'} yours: {'their' if len(own) > 1 else 'its'} runs "
            f"leave out the default sweep's axes {' and '.join(question[k] for k in axes)} "
            f"({shown_path(sweep_path(Config.sweep, dirs))}), its question about perfsweep's own model. They run at "
            f"{', '.join(f'{k}={defaults[k]}' for k in axes if k in defaults)}; an axis you type is swept"
            + (f"; {', '.join(theirs)}, not yours, {'keep' if len(theirs) > 1 else 'keeps'} them" if theirs else "")
        )
    found.notices, found.problems = list(dict.fromkeys(found.notices)), list(dict.fromkeys(found.problems))
    return found


def _axes_of(sweep: str, dirs: tuple[Path, ...]) -> dict[str, str]:
    """The axes of sweep file `sweep`: each param with several values, as an override, by its key."""
    return {
        override.key_or_group: text
        for grid in sweep_grids(sweep, "full", dirs)
        for text in grid
        for override in compose.parsed_overrides([text])
        if override.is_sweep_override()
    }


def _named_option(setting: Setting) -> bool:
    """A setting that chooses a group's option by its name (model=resnet50); composition refuses any other value."""
    return compose.is_choice(setting) and isinstance(setting.value, str)


def _overlap(key: str, other: str) -> bool:
    """Whether two dotted keys set the same value: one is the other, or holds it (model.kwargs, model.kwargs.width)."""
    return key == other or key.startswith(f"{other}.") or other.startswith(f"{key}.")


def _by_files(
    run: list[Setting], typed: set[str], options: compose.Options, sources: dict[str, str], found: Ranked
) -> list[Setting]:
    """The run's settings without a sweep file's param that an option file of the user's sets: the file's value runs.

    A value of the command line runs over the file's.
    Each value of such a file that another replaced, or that replaced another, is a notice.
    """
    files = {
        key: (value, shown_path(path))
        for s in run
        if _named_option(s) and (path := options.own_file(s.key, s.value))
        for key, value in options.values(s.key, s.value).items()
    }
    kept = []
    for s in run:
        clash = next(((k, v, where) for k, (v, where) in files.items() if _overlap(s.key, k)), None)
        if compose.is_choice(s) or clash is None or (clash[1] == s.value and s.key not in typed):
            kept.append(s)
            continue
        key, value, where = clash
        if s.key in typed:
            found.typed_over.setdefault((s.key, f"{key}={value} ({where})"), {})[s.text.split("=", 1)[1]] = None
            kept.append(s)
        else:
            found.notices.append(
                f"{key}={value} ({where}) runs, not {s.text} ({sources.get(s.key, 'the sweep file')}): an option file "
                "of yours comes before a sweep file's params"
            )
            found.won[s.key] = where
    return kept


def _note_presets_given_way(
    run: list[Setting], typed: set[str], options: compose.Options, sources: dict[str, str], found: Ranked
) -> None:
    """Note each value of a preset the user chose that a sweep file's param replaces in `run` (`presets_over`).

    The command line chose the preset (model=tiny_cnn).
    A value the user did not type runs instead of the preset's.
    A preset that the sweep file chose gives way without a word.
    The file's author set both.
    """
    for choice in run:
        path = options.file(choice.key, choice.value) if _named_option(choice) and choice.key in typed else None
        if path is None or options.own_file(choice.key, choice.value) is not None:
            continue
        for key, value in options.values(choice.key, choice.value).items():
            for s in run:
                if s.key not in typed and not compose.is_choice(s) and _overlap(s.key, key) and s.value != value:
                    replaced = found.presets_over.setdefault((key, str(value), shown_path(path)), {})
                    values = replaced.setdefault((s.key, sources.get(s.key, "the sweep file")), {})
                    values[s.text.split("=", 1)[1]] = None


def _own_code(run: list[Setting], options: compose.Options) -> str:
    """The import path of the model, batch factory or step of the user's own that the run names; "" where none."""
    for s in run:
        if s.key in OWN_CODE and s.value:
            return str(s.value)
        if s.key in ("model", "workload") and _named_option(s):
            plugin = options.plugin(s.key, s.value)
            named = [str(v) for k, v in options.values(s.key, s.value).items() if k in OWN_CODE and v]
            path = s.value if options.is_target(s) else plugin.target if plugin else next(iter(named), "")
            if path:
                return str(path)
    return ""


def _declared_reads(run: list[Setting], typed: set[str], options: compose.Options, found: Ranked) -> list[Setting]:
    """`workload.reads` as the run's step declares it on its class (`reads`).

    The step is named by its path, or by the `_target_` of a workload yaml of the user's.
    [] where the class declares none.
    [] too where the command line or the user's workload yaml declares what the step reads.
    """
    chosen = next((s for s in run if s.key == "workload" and _named_option(s)), None)
    own = options.values("workload", chosen.value) if chosen and options.own_file("workload", chosen.value) else {}
    if "workload.reads" in typed or "workload.reads" in own:
        return []
    path = next((str(s.value) for s in run if s.key == "workload._target_"), str(own.get("workload._target_", "")))
    if chosen and not path:
        plugin = options.plugin("workload", chosen.value)
        path = plugin.target if plugin else str(chosen.value) if options.is_target(chosen) else ""
    reads = _step_reads(path) if path else None
    if reads is None:
        return []
    if isinstance(reads, str) or not isinstance(reads, tuple | list) or not all(r in STEP_FIELDS for r in reads):
        found.problems.append(
            f"the step {path} declares reads = {reads!r}; a step's reads is a tuple of the run fields it reads, of "
            f"{', '.join(STEP_FIELDS)}: reads = ('model',)"
        )
        return []
    return compose.expand([f"workload.reads=[{','.join(reads)}]"])[0]


def _step_reads(path: str) -> object:
    """The `reads` of the step class at `path`, imported as its run imports it; None where it declares none.

    A path that does not import declares nothing here: the launch's checks say what is wrong with it.
    """
    quiet = logging.getLogger("hydra.utils")  # get_object logs its error before it raises it
    was, quiet.disabled = quiet.disabled, True
    try:
        step = get_object(path)
    except Exception:  # the user's module raised: the launch's checks report it with the user's frames
        return None
    finally:
        quiet.disabled = was
    return getattr(step, "reads", None)


def reading(configs: list[Config]) -> list[Config]:
    """Each config with its workload's axes cut to the run fields it reads.

    A run is neither named nor compared by a field it does not read.
    """
    cut: dict[int, WorkloadConf] = {}  # (runs share their workload's node: each node is cut once)
    found = []
    for config in configs:
        if id(config.workload) not in cut:
            cut[id(config.workload)] = _cut(config.workload)
        workload = cut[id(config.workload)]
        found.append(config if workload is config.workload else dataclasses.replace(config, workload=workload))
    return found


def _cut(workload: WorkloadConf) -> WorkloadConf:
    """The workload without its axes of fields it does not read, nor a baseline along one."""
    fields = {axis: key.split(".")[0] for axis, key in workload.axes.items()}
    unread = [axis for axis, field in fields.items() if field in STEP_FIELDS and field not in workload.reads]
    if not unread:
        return workload
    axes = {axis: key for axis, key in workload.axes.items() if axis not in unread}
    baseline = BaselineConf() if workload.baseline.axis in unread else workload.baseline
    return dataclasses.replace(workload, axes=axes, baseline=baseline)


def unread(
    runs: list[list[Setting]], configs: list[Config], typed: set[str], sources: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The axes of run fields that no run of the sweep reads: their values would run as one configuration.

    A value the command line sets for such a field is run without it: that is said too.

    Returns:
        The problems (an axis the command line sweeps), and the notices (a sweep file's axis: its values run once;
        a typed value: its runs run as they would without it).
    """
    swept: dict[str, dict[str, None]] = {}
    for run in runs:
        for s in run:
            swept.setdefault(s.key, {})[s.text.split("=", 1)[1]] = None
    read = {field for config in configs for field in config.workload.reads}
    reads = {c.workload.name: ", ".join(c.workload.reads) or "only its own settings" for c in configs}
    steps = "; ".join(f"workload {name} reads {fields}" for name, fields in sorted(reads.items()))
    problems, unused = [], []
    left_out: dict[str, dict[str, str]] = {}  # where an axis was set -> its axes -> the field each sets
    for key, values in swept.items():
        field = key.split(".")[0]
        if field not in STEP_FIELDS or field in read:
            continue
        axis = f"{key}={','.join(values)}"
        if len(values) < 2:
            if key in typed:
                said = f"{axis} is read by no run of this sweep ({steps}): its runs run as they would without it"
                unused.append(explain(said, sources))
            continue
        if key in typed:
            problems.append(
                explain(
                    f"{axis}: no run of this sweep reads {field} ({steps}); its values would run as one "
                    "configuration. Leave it out, or sweep a workload that reads it (a step declares its `reads`)",
                    sources,
                )
            )
        else:
            left_out.setdefault(sources.get(key, "the sweep file"), {})[axis] = field
    notices = [
        f"{' and '.join(axes)} ({where}) {'is' if len(axes) == 1 else 'are'} left out: no run of this sweep reads "
        f"{' or '.join(dict.fromkeys(axes.values()))} ({steps})"
        for where, axes in left_out.items()
    ]
    return problems, notices + unused


def added_axes(specs: list[RunSpec], typed: set[str], sources: dict[str, str]) -> list[str]:
    """A notice where the command line sweeps an axis and a sweep file sweeps others beside it.

    Its runs are then the product of both: 12 configurations for `compile=eager,default` on the default sweep.
    An axis is the runs' (RunSpec.axes), as the table names them; a setting that is no axis (seed) is none.
    """
    first = [spec for spec in specs if spec.config.replicate == 0]
    values: dict[str, dict[str, None]] = {}
    keys: dict[str, str] = {}
    for spec in first:
        workload = spec.config.workload
        declared = {**workload.axes, **{field: f"workload.{field}" for field in workload.sizes}}
        declared |= {name: f"env.packages.{name}" for name in spec.config.env.packages}  # a package's version axis
        for axis, value in spec.axes.items():
            values.setdefault(axis, {})[value] = None
            keys.setdefault(axis, declared.get(axis, axis))

    def set_by_command(axis: str) -> bool:
        return bool(typed & {axis, keys[axis], keys[axis].split(".")[0]})

    swept = [axis for axis, found in values.items() if len(found) > 1 and axis != "replicate"]
    if not any(set_by_command(axis) for axis in swept):
        return []
    added: dict[str, list[str]] = {}
    for axis in (axis for axis in swept if not set_by_command(axis)):
        key = keys[axis]
        where = sources.get(key) or sources.get(key.split(".")[0]) or sources.get(axis) or "the sweep file"
        added.setdefault(where, []).append(f"{axis}={','.join(values[axis])}")
    return [
        f"{' and '.join(listed)} ({where}) {'is' if len(listed) == 1 else 'are'} swept beside the command line's "
        f"axes: {len(first)} configurations; one value of each runs fewer"
        for where, listed in added.items()
    ]


COMPILER_SETTINGS = ("compile.mode", "compile.backend", "compile.fullgraph")  # what torch.compile is given


def compile_settings_unread(
    configs: list[Config], overrides: list[str], sources: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The command line's compile.enabled, refused; and its compile settings that no run reads, noticed.

    compile.enabled is its option's: typed, it would compile a run labelled eager, or run eager one labelled default.
    An eager run reads no compile.mode, backend or fullgraph: typed where no run compiles, they go unused.
    That is a notice, not a refusal: a compiled sweep's command that measures one eager run again keeps them.

    Returns:
        The problems, and the notices.
    """
    compiling = sorted(p.stem for p in (CONF_DIR / "compile").glob("*.yaml") if p.stem != "eager")
    options = ", ".join(f"compile={name}" for name in compiling)
    names = ", ".join(dict.fromkeys(c.compile.name for c in configs))
    inert = bool(configs) and not any(c.compile.enabled for c in configs)
    problems, notices = [], []
    for override in overrides:
        key = keys.override_key(override)
        if key == "compile.enabled":
            said = f"{override}: a compile option sets it; compile=eager runs eager, and {options} compile"
            problems.append(explain(said, sources))
        elif key in COMPILER_SETTINGS and inert:
            notices.append(
                explain(
                    f"{override} is read by no run: none of this sweep compiles (compile={names}); an option that "
                    f"compiles reads it: {options}",
                    sources,
                )
            )
    return problems, notices


def typed_value(value: object) -> str:
    """A value as the command line types it: null, true, false, or as it is."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def precision_relabelled(configs: list[Config], dirs: tuple[Path, ...], sources: dict[str, str]) -> list[str]:
    """Each precision that runs otherwise than the option its name names: refused.

    A field typed beside an option (precision=fp32 precision.autocast_dtype=bfloat16) runs another precision.
    The table, a precision sweep's baseline and the exports would go by that name.
    A precision of the user's own has a name no option has (precision.name=NAME).
    """
    fields = [f.name for f in dataclasses.fields(PrecisionConf) if f.name != "name"]
    options = {
        path.stem: PrecisionConf(**{k: v for k, v in compose.file_content(path).items() if k in fields or k == "name"})
        for folder in (CONF_DIR, *dirs)
        for path in sorted((folder / "precision").glob("*.yaml"))
    }
    said = {}
    for config in configs:
        ran, named = config.precision, options.get(config.precision.name)
        if named is None or (differ := [f for f in fields if getattr(ran, f) != getattr(named, f)]) == []:
            continue
        typed = [f"precision.{f}={typed_value(getattr(ran, f))}" for f in differ]
        setting = [name for name, o in options.items() if all(getattr(o, f) == getattr(ran, f) for f in fields)]
        choose = f"choose precision={setting[0]}, which runs it, or name" if setting else "name"
        said[" ".join(typed), ran.name] = explain(
            f"{typed[0]}: precision={ran.name} sets it otherwise; {' '.join(typed)} would run another precision "
            f"under the name {ran.name}, which the table, a precision sweep's baseline and the exports go by. "
            f"{choose.capitalize()} your own precision (precision.name=NAME, a name no option has)",
            sources,
        )
    return list(said.values())


NAMED_GROUPS = ("model", "memory_format", "precision", "input_type", "compile", "loss", "optim")  # an option a name


def undeclared_axes(configs: list[Config]) -> list[str]:
    """A notice for each group the sweep varies that a workload reading it declares no axis for.

    Its runs are then neither named nor compared by that group (a workload yaml of the user's without `axes`).
    """
    notices = []
    for group in NAMED_GROUPS:
        values = dict.fromkeys(getattr(c, group).name for c in configs)
        if len(values) < 2:
            continue
        blind = {
            c.workload.name: None
            for c in configs
            if (group in c.workload.reads or group not in STEP_FIELDS)
            and not any(key.split(".")[0] == group for key in c.workload.axes.values())
        }
        notices += [
            f"{group}={','.join(map(str, values))} runs, but workload {name} declares no axis for {group}: its runs "
            f"are neither named nor compared by it. Its yaml's `axes` declares one, as conf/workload/train_step.yaml "
            f"does: axes: {{{group}: {group}.name}}"
            for name in blind
        ]
    return notices


def arguments_no_axis(specs: list[RunSpec]) -> list[str]:
    """A notice for each argument of a workload's code that tells its runs apart.

    Such an argument (workload.kwargs.X) is no axis.

    Its runs are named by it (naming_keys), not compared along it.
    """
    notices = []
    for key in (k for k in (specs[0].named_keys if specs else ()) if k.startswith("workload.kwargs.")):
        values = list(dict.fromkeys(str(value_of(spec.config, key)) for spec in specs))
        names = ", ".join(dict.fromkeys(spec.config.workload.name for spec in specs))
        axis = key.rsplit(".", 1)[1]
        notices.append(
            f"{key}={','.join(values)} runs, but workload {names} declares no axis for it: its runs are named by it, "
            f"not compared along it. Its yaml's `axes` and `baseline` compare them: axes: {{{axis}: {key}}}, "
            f"baseline: {{axis: {axis}, value: {values[0]}}}"
        )
    return notices


# What a compile mode that records CUDA graphs compiles as where there is no GPU: Inductor skips the graphs.


def graphs_on_a_cpu(configs: list[Config]) -> list[str]:
    """A notice for each compile mode whose CUDA graphs its runs on a CPU cannot record: it compiles as another."""
    modes = {
        c.compile.name: c.compile.mode
        for c in configs
        if c.compile.enabled and c.compile.mode in AS_ON_A_CPU and not pairing.on_a_gpu(c)
    }
    return [
        f"compile={name} runs on a CPU here: Inductor records no CUDA graphs on one, so mode {mode} compiles as "
        f"{AS_ON_A_CPU[mode]} does"
        for name, mode in modes.items()
    ]


def _models(overrides: list[str]) -> list[str]:
    """Model sets (model.name=timm:PATTERN,...) expanded into the models they name."""
    expanded, problems = expand_model_sets(overrides)
    if problems:
        raise PlanError(problems)
    return expanded


def compose_runs(
    runs: list[list[Setting]], sources: dict[str, str] | None = None, dirs: tuple[Path, ...] = ()
) -> tuple[list[Config], list[str]]:
    """Each run's typed config that composes.

    Returns:
        Those configs, and every distinct composition error with the run it is in.
    """
    configs, errors = compose.compose_all(runs, dirs=dirs)
    return configs, [
        f"{explain(message, sources or {})}{_hint(message)}{IN_THE_RUN}{run})" for message, run in errors.items()
    ]


IN_THE_RUN = "\n  (in the run: "  # what follows a composition error: its run's settings, as a sweep of many names it


_UNKNOWN_OPTION = re.compile(r"Could not find '(\w+)/([^']+)'")
_OUTSIDE_SET = re.compile(r"Invalid value '([^']+)', expected one of \[([^\]]*)\]")
_NOT_A_NUMBER = re.compile(r"^([\w.]+)=.*could not be converted to (Float|Integer)")
UNITS = {"_min": "minutes", "_s": "seconds", "_ms": "milliseconds", "_gb": "GB", "_mb": "MB"}  # by a key's ending


def _hint(message: str) -> str:
    """What to write instead, for the composition errors whose fix is not in Hydra's message.

    That is the nearest of the values allowed, and what else a model may be.
    """
    if "is not a ListConfig" in message:
        return " (a list is one value, in brackets: KEY=[a,b]; KEY=a,b sweeps a and b)"
    number = _NOT_A_NUMBER.search(message)
    unit = next((u for end, u in UNITS.items() if number and number.group(1).endswith(end)), None)
    if unit:  # 1:30:00 or 1h for launcher.timeout_min, as Slurm writes a time
        return f" ({number.group(1)} takes a number of {unit}: {number.group(1)}=90)"
    if number and " takes " not in message:  # a key whose own check says what it takes (repeats) says it once
        return f" ({number.group(1)} takes {'a whole number' if number.group(2) == 'Integer' else 'a number'})"
    outside = _OUTSIDE_SET.search(message)
    if outside:
        allowed = [value.strip() for value in outside.group(2).split(",")]
        return keys.did_you_mean(outside.group(1), allowed).replace(";", "\n ", 1)
    unknown = _UNKNOWN_OPTION.search(message)
    if not unknown:
        return ""
    group, name = unknown.groups()
    options = re.findall(r"^\t(\S+)$", message, re.M)
    hint = keys.did_you_mean(name, options).replace(";", "\n ", 1)
    if group == "model":
        hint += (
            f"\n  (those are presets; any timm or torchvision model runs by its name: model.name={name} "
            "model.source=timm, or model.source=torchvision; a model of your own by its import path: "
            "model=mypackage.models.MyNet)"
        )
    elif group in TARGET_GROUPS:
        hint += f"\n  (one of your own by its import path: {group}=mypackage.module.Name)"
    return hint


SHAPED = ("num_classes", "in_chans")  # model settings that shape the synthetic batch, and go to the constructor


def shaped_in_kwargs(configs: list[Config]) -> list[str]:
    """model.kwargs that would give the model another class or channel count than the batch has."""
    found = dict.fromkeys(
        (key, config.model.kwargs[key]) for config in configs for key in SHAPED if key in config.model.kwargs
    )
    return [
        f"model.kwargs.{key}={value}: set model.{key}={value} instead. It shapes the synthetic batch as well, and goes "
        "to the model's constructor where that takes an argument of its name"
        for key, value in found
    ]


def named_twice(configs: list[Config]) -> list[str]:
    """A name given to two things in one sweep.

        One example is a model of the user's and one of timm's.
    Another is two tensor types of one class name.
        The table shows them by name, so it would take them for one configuration.
    """
    problems = []
    for group in TARGET_GROUPS:
        things: dict[str, set[str]] = {}
        for config in configs:
            node = getattr(config, group)
            own = f"{node.source}'s {node.name}" if group == "model" else f"perfsweep's {node.name}"
            things.setdefault(node.name, set()).add(node._target_ or own)
        targets = {getattr(config, group)._target_ for config in configs}
        problems += [
            f"{group} {name!r} names {len(found)} things in this sweep: {', '.join(sorted(found))}. The table shows "
            f"them by name; give each a name of its own ({group}._target_=PATH {group}.name=NAME)"
            for name, found in things.items()
            if len(found) > 1 and found & targets  # (timm's and torchvision's are told apart by model.source)
        ]
    return problems


def code_problem(code: str | None) -> str:
    """Why `code=PATH` cannot name the code under test ('' where it can): it must be in a git repository."""
    if not code:
        return ""
    folder = Path(code).expanduser()
    if not folder.exists():
        return f"code={code}: no such file or folder; it names the code under test, a folder in a git repository"
    if repository(folder) is None:
        return f"code={code}: not in a git repository; the code under test is recorded by its commit"
    return ""


def _sweep_dir(config: Config) -> Path:
    name = config.sweep_name or config.sweep
    if safe_name(name) != name:
        raise PlanError([f"sweep_name={name!r} must be a plain folder name (letters, digits, _ . = -)"])
    return Path(config.runs_dir) / name


def replicated(configs: list[Config]) -> list[tuple[int, Config]]:
    """Each configuration `repeats` times (replicate r: seed + r), in the sweep's run order, with its index in
    `configs`.

    The orders are:

    - interleaved runs every configuration once before any runs twice (A B C A B C);
    - shuffled is a seeded random order;
    - grouped runs each configuration's replicates back to back.

    Interleaving spreads drift over time (clocks, heat, neighbours) over all configurations.
    So drift does not pose as an effect.
    """
    settings = configs[0]
    auto = settings.auto
    problems = [
        f"{key}={value} must be {bound}"
        for key, value, bound, good in [
            ("repeats", settings.repeats, "1 or more, or auto (rounds until decided)", settings.repeats >= 1),
            ("blocks", settings.blocks, "1 or more (a paired side's steps in that many blocks)", settings.blocks >= 1),
            ("auto.max_runs", auto.max_runs, "2 or more (repeats=auto compares runs)", auto.max_runs >= 2),
            ("auto.half_width", auto.half_width, "above 0 and below 1 (0.02: -+2%)", 0 < auto.half_width < 1),
            ("auto.max_minutes", auto.max_minutes, "above 0", auto.max_minutes > 0),
        ]
        if not good
    ]
    if problems:
        raise PlanError(problems)
    rounds = [
        [(i, dataclasses.replace(c, replicate=r, seed=c.seed + r) if r else c) for i, c in enumerate(configs)]
        for r in range(settings.repeats)
    ]
    # within a round, each environment's runs back to back: a job per environment and round, not per run
    rounds = [
        sorted(round_, key=lambda item: (item[1].torch, sorted(item[1].env.packages.items()))) for round_ in rounds
    ]
    if settings.order == "grouped":
        return [round_[i] for i in range(len(configs)) for round_ in rounds]
    ordered = [c for round_ in rounds for c in round_]
    if settings.order == "shuffled":
        random.Random(0).shuffle(ordered)
    return ordered


GRAMMAR = (
    "overrides are KEY=VALUE, KEY=a,b (a sweep), KEY=[a,b] (a list); quote a value with other characters: "
    "KEY='a b' (Hydra's override grammar: https://hydra.cc/docs/advanced/override_grammar/basic/)"
)


def unreadable_overrides(overrides: list[str]) -> list[str]:
    """Each override that Hydra's grammar cannot read, named with the parser's reason."""
    problems = []
    for override in overrides:
        try:
            compose.parsed_overrides([override])
        except OverrideParseException as error:
            problems.append(f"{override!r} cannot be read: {_parse_reason(override, error)}; {GRAMMAR}")
    return problems


_LEXER = "LexerNoViableAltException: "


def _parse_reason(override: str, error: OverrideParseException) -> str:
    """The parser's reason without its boilerplate; for a character the lexer stops at, which one."""
    lines = [line for line in str(error).splitlines() if line.strip() and not line.startswith(("See ", "Error pars"))]
    if lines and lines[0].startswith(_LEXER):
        caret = lines[-1]  # points under the character, in the first line
        at = len(caret) - len(caret.lstrip()) - len(_LEXER) if caret.strip() == "^" else -1
        where = f" ({override[at]!r}, character {at + 1})" if 0 <= at < len(override) else ""
        return f"a character its grammar does not take unquoted{where}"
    return " ".join(line.strip() for line in lines) or "Hydra's parser refused it"


def swept_whole(node: str, runs: list[list[Setting]]) -> str:
    """Why a setting of the whole sweep varies between its runs: the keys under it that take two values or more.

    A comma sweeps a value; a value that holds one (a list of Slurm partitions) is given whole in quotes.
    """
    values: dict[str, dict[str, None]] = {}
    for run in runs:
        for setting in run:
            if setting.key == node or setting.key.startswith(f"{node}."):
                values.setdefault(setting.key, {})[setting.text.split("=", 1)[1]] = None
    swept = {key: list(found) for key, found in values.items() if len(found) > 1}
    said = f"{node} is a setting of the whole sweep and cannot be swept"
    if not swept:
        return said
    named = "; ".join(f"{key}={','.join(found)}" for key, found in swept.items())
    said += f" ({named} sweeps it)"
    # a list in one string (Slurm's partitions, constraints): not an option's name, a number, a bool or quoted already
    words = [(k, v) for k, v in swept.items() if k != node and all(_plain_word(x) for x in v)]
    if not words:
        return said
    key, found = words[0]
    return f"{said}; a value that holds a comma is one value in quotes: '{key}=\"{','.join(found)}\"'"


def _plain_word(value: str) -> bool:
    """Whether an override's value is a bare word: no number, bool, null or quotes."""
    number = value.lstrip("+-").replace(".", "", 1).isdigit()
    return not number and value.lower() not in ("true", "false", "null") and not any(q in value for q in "\"'")


def budget_notice(launcher, sources: dict[str, str]) -> list[str]:
    """Where a budget typed on the command line bounds nothing: Slurm queues every job at once, and its queue decides
    when they run. A sweep file's budget (the default sweep's) is for a launch on this host: it goes unsaid."""
    if launcher.budget_s is None or launcher.name != "slurm" or sources.get("launcher.budget_s") != COMMAND_LINE:
        return []
    return [f"launcher.budget_s={launcher.budget_s:g} bounds no Slurm launch: its jobs are queued at once"]


def recorded_names(sweep_dir: Path, runs: dict[str, RunSpec]) -> dict[str, RunSpec]:
    """Each run under the name its sweep folder recorded for its id, where an earlier launch named it otherwise.

    A run's name carries the settings its plan sweeps that are no axis (naming_keys).
    A launch of fewer runs names them otherwise, and so did an older perfsweep.
    Their folders keep their names, so a launch again finds them done.
    """
    if not (sweep_dir / records.RUNS).is_file():
        return runs
    planned = records.planned_runs(sweep_dir, [])
    recorded = {row.get("run_id"): (name, tuple(row.get("named_keys") or ())) for name, row in planned.items()}
    found = {}
    for run_id, spec in runs.items():
        name, keys = recorded.get(run_id, (spec.name, spec.named_keys))
        named = dataclasses.replace(spec, named_keys=keys) if keys != spec.named_keys else spec
        found[run_id] = named if named.name == name else spec
    return found


def build_plan(overrides: list[str], partial: bool = False) -> Plan:
    """Expand, compose and de-duplicate the sweep that `overrides` describe.

    A run that does not compose raises PlanError.
    A `partial` plan keeps the runs that do, and carries the errors in `problems`.
    So they are reported with every other problem of the sweep.
    """
    unreadable = unreadable_overrides(overrides)
    if unreadable:
        raise PlanError(unreadable)
    dirs, overrides = config_dirs(_models(overrides))
    overrides = unscaled(overrides, dirs)
    sources = origins(overrides, dirs)
    typed = {keys.override_key(o) for o in overrides}
    runs = expand(overrides, dirs)
    texts = dict.fromkeys(setting.text for run in runs for setting in run)
    wrong = [problem for text in texts if (problem := keys.problem(text))]
    if wrong:
        raise PlanError([explain(problem, sources) for problem in wrong])
    ranking = ranked(runs, typed, dirs, sources)
    given = dict(sources)  # who set each key, before an option file of the user's won over a sweep file's
    sources |= ranking.won
    configs, errors = compose_runs(ranking.runs, sources, dirs)
    if declared := declaration_problems(configs):  # its runs could not be named
        raise PlanError(errors + declared)
    configs, unsized = with_default_sizes(configs)
    configs = reading(configs)
    # what the runs read is known where every run composed: a run that did not reads nothing, as far as it goes
    unread_axes, left_out = unread(ranking.runs, configs, typed, sources) if not errors else ([], [])
    errors += ranking.problems + unread_axes
    configs, unrun = with_baselines(configs)
    unset, unrun_notices = unrun_baselines(configs, sources, COMMAND_LINE)
    errors += unsized + named_twice(configs) + shaped_in_kwargs(configs) + unrun + size_problems(configs) + unset
    refused, unused = compile_settings_unread(configs, overrides, sources)
    errors += refused + precision_relabelled(configs, dirs, sources)
    if errors and (not partial or not configs):
        raise PlanError(errors)
    # (runs share the nodes they do not change: comparing identities first spares a repr of each)
    varying = [
        k
        for k in SWEEP_WIDE
        if len({id(getattr(c, k)) for c in configs}) > 1 and len({repr(getattr(c, k)) for c in configs}) > 1
    ]
    if varying:
        raise PlanError([swept_whole(k, ranking.runs) for k in varying])
    if problem := code_problem(configs[0].code):
        raise PlanError([problem])
    runs: dict[str, RunSpec] = {}
    sweep_dir = _sweep_dir(configs[0])
    # (a plan with errors is never launched; without, its configs are its ranked runs' in order)
    commands = [] if errors else rerun.commands(overrides, dirs, ranking.runs, configs, sweep_dir)
    files = config_files(dirs) if commands else ()
    for index, config in replicated(configs):
        repro = rerun.of_run(commands[index], config) if commands else ()
        spec = RunSpec(config=config, sweep_name=sweep_dir.name, repro=repro, repro_files=files)
        runs.setdefault(spec.run_id, spec)
    if named := naming_keys(list(runs.values()), rerun.swept(ranking.runs)):
        runs = {run_id: dataclasses.replace(spec, named_keys=named) for run_id, spec in runs.items()}
    runs = recorded_names(sweep_dir, runs)
    if refused := pairing.refusals(list(runs.values())):
        raise PlanError(refused)
    published = published_file(configs[0].sweep, dirs)
    notices = ranking.notices + left_out + added_axes(list(runs.values()), typed, given) + unused
    notices += undeclared_axes(configs) + arguments_no_axis(list(runs.values())) + graphs_on_a_cpu(configs)
    notices += unrun_notices
    notices = tuple(notices + budget_notice(configs[0].launcher, sources))
    return Plan(sweep_dir, tuple(runs.values()), sources, tuple(errors), published, notices)
