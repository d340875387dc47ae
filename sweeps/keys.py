"""The keys of overrides, checked against the schema before anything is composed.

A key that is not in the schema is refused, never ignored.
The refusal names the keys that are there and the nearest one.
`+` adds a key only inside a dict field (model.kwargs, env.packages...), where what it adds is read.
Hydra's own settings (hydra.*) are refused but hydra.searchpath: perfsweep composes its runs and writes its records
itself, so Hydra's output folders, logging and launchers never come into play.
"""

import dataclasses
import difflib
import functools
import typing
from typing import Any

from perfsweep.conf.schema import Config

# where a key added with + that is not in the schema belongs, for the nodes that have a dict of the user's own
ADDED_BELONGS = {
    "model": "a keyword argument of the model's constructor goes in model.kwargs: +model.kwargs.{leaf}={value}",
    "workload": "a setting of a step of your own goes in workload.kwargs: +workload.kwargs.{leaf}={value}",
}


# what does in perfsweep what a Hydra setting does in a Hydra app
HYDRA_INSTEAD = {
    "hydra.run.dir": "runs_dir={value} puts a sweep's records in {value}/<sweep_name>",
    "hydra.sweep.dir": "runs_dir={value} puts a sweep's records in {value}/<sweep_name>",
    "hydra.sweep.subdir": "each run's records go in a folder named by its run id",
    "hydra.job.name": "sweep_name={value} names the sweep's folder",
    "hydra.job.chdir": "runs never change directory; runs_dir is relative to the working directory",
    "hydra.sweeper.params": "a sweep is a sweep file's params or KEY=a,b on the command line",
    "hydra/launcher": "launcher=local, launcher=slurm or launcher=debug chooses how runs start",
    "hydra/sweeper": "a sweep is a sweep file's params or KEY=a,b on the command line",
}


def hydra_problem(key: str, value: Any, shown: str) -> str:
    """Why a Hydra setting (hydra.*, hydra/GROUP) does nothing here, and what does; "" for hydra.searchpath."""
    if key == "hydra.searchpath":
        return ""
    instead = next((v for k, v in HYDRA_INSTEAD.items() if key == k or key.startswith(k + ".")), "")
    hint = f"; {instead.format(value=value)}" if instead else ""
    return (
        f"{shown}: perfsweep reads one Hydra setting, hydra.searchpath (which --config-dir sets); "
        f"it composes runs and writes records itself{hint}"
    )


def override_key(override: str) -> str:
    """The key an override sets: `+model.kwargs.width=32` sets model.kwargs.width."""
    return override.split("=", 1)[0].lstrip("+~")


def given_twice(overrides: list[str]) -> list[str]:
    """A line for each key these overrides set more than once: the last one is what runs, and may be a slip."""
    words: dict[str, list[str]] = {}
    for word in overrides:
        if "=" in word:
            words.setdefault(override_key(word), []).append(word)
    return [
        f"{key} given {len(given)} times ({' '.join(given)}): the last, {given[-1]}, is what runs"
        for key, given in words.items()
        if len(given) > 1
    ]


@functools.cache
def _hints(node: type) -> dict[str, Any]:
    return typing.get_type_hints(node)


def _is_dict(annotation: Any) -> bool:
    return typing.get_origin(annotation) is dict or annotation is dict


def _node_type(annotation: Any) -> Any:
    """The dataclass a field holds, if it holds one (an Optional one included)."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if dataclasses.is_dataclass(candidate):
            return candidate
    return None


HELD = 3  # the fewest letters typed that a name holding them is suggested for: not 'a' for 'abc'


def did_you_mean(name: str, names: list[str], cutoff: float = 0.6) -> str:
    """'; did you mean amp_bf16?': the one name that holds what was typed, else the closest by difflib; '' if none.

    A name that holds it comes first: bf16 is amp_bf16 sooner than fp16, one letter away.
    """
    holding = [n for n in names if len(name) >= HELD and name.lower() in n.lower()]
    close = holding if len(holding) == 1 else difflib.get_close_matches(name, names, n=1, cutoff=cutoff)
    return f"; did you mean {close[0]}?" if close else ""


def problem(text: str) -> str:
    """What is wrong with the key of override `text` (KEY=VALUE, +KEY=VALUE, ++KEY=VALUE), or ""."""
    written, _, value = text.partition("=")
    if written.startswith("~"):
        return ""
    added = written.startswith("+") and not written.startswith("++")
    return key_problem(written.lstrip("+"), value, added, shown=text)


def _nested(node: type, leaf: str) -> str:
    """'; did you mean model.batch_size?': the one key a level down named `leaf`, where there is one; else ''."""
    found = [
        f"{field.name}.{leaf}"
        for field in dataclasses.fields(node)
        if (child := _node_type(_hints(node)[field.name])) is not None
        and leaf in {f.name for f in dataclasses.fields(child)}
    ]
    return f"; did you mean {found[0]}?" if len(found) == 1 else ""


def key_problem(key: str, value: Any, added: bool, shown: str = "") -> str:
    """What is wrong with override key `key`.

    Returns:
        The problem, or "" where the schema has the key or `+` adds it inside a dict field.
    """
    shown = shown or f"{'+' if added else ''}{key}={value}"
    key = key.split("@")[0]  # KEY@PACKAGE: Hydra's
    if key.split(".")[0].split("/")[0] == "hydra":  # hydra.run.dir, hydra/job_logging=...
        return hydra_problem(key, value, shown)
    node: Any = Config
    parts = key.split(".")
    for depth, part in enumerate(parts):
        fields = {f.name: f for f in dataclasses.fields(node)}
        where = ".".join(parts[:depth])
        if part not in fields:
            listed = ", ".join(sorted(fields))
            belongs = ADDED_BELONGS.get(where, "") if added and depth == len(parts) - 1 else ""
            hint = f"; {belongs.format(leaf=part, value=value)}" if belongs else ""
            near = (_nested(node, part) if depth == 0 else "") or did_you_mean(part, list(fields))
            return (
                f"{shown}: {'the config' if not where else where} has no key {part!r}{near}{hint} (its keys: {listed})"
            )
        annotation = _hints(node)[part]
        if _is_dict(annotation):
            return ""  # below it, the keys are the dict's own
        node = _node_type(annotation)
        if node is None:
            if depth < len(parts) - 1:
                return f"{shown}: {'.'.join(parts[: depth + 1])} is a value, not a node with keys"
            break
    if added:
        return (
            f"{shown}: {key} is a setting already; {key}={value} sets it (+ adds a key that is not there, "
            "and only inside a dict such as model.kwargs)"
        )
    return ""
