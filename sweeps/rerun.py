"""Each planned run's command that measures its configuration again, alone (records/repro.py shows it).

A sweep's runs are the product of its swept keys: a sweep file's and the command line's.
A run's command keeps the overrides the sweep was planned with.
It sets each swept key to the run's own setting, as the planner composed the run.
So it plans that one configuration again.
It leaves out where the sweep's records went (runs_dir, sweep_name) and how many rounds it ran (repeats).
A folder it names (code, env.repo, env.dir) is made absolute, so that it runs from any folder.
It runs once (repeats=1), into a folder of its own (sweep_name=<the sweep's>-repro), under the working directory.
A replicate keeps its seed and its number: the run it plans has the same id.
"""

import functools
import json
import re
from pathlib import Path

from perfsweep.conf.schema import Config
from perfsweep.sweeps import spec
from perfsweep.sweeps.compose import GROUPS, Setting, default_options
from perfsweep.sweeps.keys import override_key

LEFT_OUT = ("repeats", "sweep_name", "runs_dir")  # the sweep's records and rounds, not what a run measures
FOLDERS = ("code", "env.repo", "env.dir")  # keys that name a folder, relative to the launch's working directory
PLAIN = re.compile(r"^[\w./:-]+$")  # a string that Hydra's grammar reads as itself, unquoted


def _absolute(override: str) -> str:
    """The override, where it names a folder by a plain relative path, with that folder's absolute path."""
    key, _, value = override.partition("=")
    plain = PLAIN.match(value) and not value.startswith(("/", "~")) and value != "null"
    if override_key(override) not in FOLDERS or not plain:
        return override
    return f"{key}={Path(value).resolve()}"


def swept(runs: list[list[Setting]]) -> set[str]:
    """The keys whose settings differ between the runs, or that some runs set and others do not."""
    texts: dict[str, set[str]] = {}
    for run in runs:
        for setting in run:
            texts.setdefault(setting.key, set()).add(setting.text)
    return {key for key, found in texts.items() if len(found) > 1 or any(key not in _keys(run) for run in runs)}


def _keys(run: list[Setting]) -> set[str]:
    return {setting.key for setting in run}


def commands(
    overrides: list[str], dirs: tuple[Path, ...], runs: list[list[Setting]], configs: list[Config], sweep_dir: Path
) -> list[tuple[str, ...]]:
    """The words of each run's command after `perfsweep`, in the order of `runs`.

    Args:
        overrides: the sweep's overrides, without its config dirs.
        dirs: its config dirs (--config-dir).
        runs: each run's settings, as the planner composed it.
        configs: each run's config, composed from them.
        sweep_dir: the sweep's folder, whose name the command's own folder takes.
    """
    keys = swept(runs)
    kept = [_absolute(o) for o in overrides if override_key(o) not in (*LEFT_OUT, *keys)]
    flags = [word for folder in dirs for word in ("--config-dir", str(folder))]
    after = ("repeats=1", f"sweep_name={sweep_dir.name}-repro")
    return [(*flags, *kept, *narrowed(run, config, keys), *after) for run, config in zip(runs, configs, strict=True)]


def narrowed(run: list[Setting], config: Config, keys: set[str]) -> list[str]:
    """The run's own setting of each swept key.

    A key that other runs set and this one does not takes the run's value: its group's default option, or the value
    its config holds.
    So no grid of a sweep file adds another run.
    """
    own = {setting.key: setting.text for setting in run if setting.key in keys}
    unset = {key: _default(key, config) for key in sorted(keys - own.keys())}
    return [*own.values(), *(f"{key}={value}" for key, value in unset.items() if value is not None)]


def _default(key: str, config: Config) -> str | None:
    """A key's value in a run that did not set it, as an override writes it; None where there is none to write."""
    if key in GROUPS:
        return _defaults().get(key)
    value = spec.setting(config, key)
    if value is spec.NO_SETTING:  # a key added to a dict (+env.packages.X) by other runs only
        return None
    if isinstance(value, str):
        return value if PLAIN.match(value) else "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return json.dumps(value, default=str)


@functools.cache
def _defaults() -> dict[str, str]:
    return default_options()


def of_run(words: tuple[str, ...], config: Config) -> tuple[str, ...]:
    """A run's words: its configuration's, and a replicate's seed and number."""
    if not config.replicate:
        return words
    return (*words, f"seed={config.seed}", f"replicate={config.replicate}")
