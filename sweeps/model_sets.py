"""Model sets and default sizes, resolved when the plan is made.

A model set is one value that names many models: `model.name=timm:resnet*,convnext_t*`.
Its patterns are timm's `list_models` patterns.
It becomes one value per model: a sweep over them, with model.source=timm.
A pattern's pretrained tag is ignored (`resnet50.a1_in1k` is `resnet50`).
A pattern that matches nothing is a problem naming the nearest names.

`model.image_size=default` is each model's own default input size, as timm's benchmark tables use.
That is timm's pretrained config (`input_size`), or torchvision's default weights' crop size.
It is resolved per run.
So the run's records (and its identity) hold the size it ran at.
"""

import dataclasses
import difflib

from perfsweep.conf.schema import Config

PREFIX = "timm:"
# What `model.image_size=default` composes to, until the run's model gives its size: -1, as "auto" often is.
DEFAULT_SIZE = -1


def expand_model_sets(overrides: list[str]) -> tuple[list[str], list[str]]:
    """Replaces each model set in `overrides` by the models it names.

    Returns:
        The overrides, and the problems (patterns that match nothing).
    """
    expanded, problems = [], []
    for override in overrides:
        key, _, value = override.partition("=")
        value = value.strip("'\"")
        if key.lstrip("+~") == "model.image_size":
            sizes = [str(DEFAULT_SIZE) if v.strip() == "default" else v for v in value.split(",")]
            expanded.append(f"{key}={','.join(sizes)}")
            continue
        if key.lstrip("+~") != "model.name" or not value.startswith(PREFIX):
            expanded.append(override)
            continue
        import timm

        names: dict[str, None] = {}
        for pattern in (p.strip().split(".")[0] for p in value.removeprefix(PREFIX).split(",") if p.strip()):
            matched = timm.list_models(pattern)
            if not matched:
                problems.append(f"model.name pattern {pattern!r} matches no timm model{nearest(pattern, 'timm')}")
            names.update(dict.fromkeys(matched))
        if names:
            expanded += ["model.source=timm", f"model.name={','.join(names)}"]
    return expanded, problems


def library_models(source: str) -> list[str]:
    """The names of a model library's models (timm, torchvision); none for another source."""
    if source == "timm":
        import timm

        return timm.list_models()
    if source == "torchvision":
        import torchvision

        return torchvision.models.list_models()
    return []


def is_model(source: str, name: str) -> bool:
    """Whether `name` is a model of its library; True for another source, whose own check names it."""
    return source not in ("timm", "torchvision") or name in library_models(source)


def nearest(name: str, source: str) -> str:
    """'; nearest names: a, b' of the library's models nearest `name` (a pattern's * left out); '' for none."""
    near = difflib.get_close_matches(name.replace("*", ""), library_models(source), n=5, cutoff=0.5)
    return f"; nearest names: {', '.join(near)}" if near else ""


def default_image_size(source: str, name: str) -> int | None:
    """The model's own input size (pixels per side), where its library gives one."""
    try:
        if source == "timm":
            from timm.models import get_pretrained_cfg_value

            size = get_pretrained_cfg_value(name, "input_size")
            return int(size[-1]) if size else None
        if source == "torchvision":
            import torchvision

            return int(torchvision.models.get_model_weights(name).DEFAULT.transforms.keywords.get("crop_size", 224))
    except (ValueError, KeyError, AttributeError, RuntimeError):  # an unknown model: its own check names it
        return None
    return None


def with_default_sizes(configs: list[Config]) -> tuple[list[Config], list[str]]:
    """Resolves model.image_size=default in each config to its model's size.

    Returns:
        The configs, and the problems (no size known).
    """
    resolved, problems = [], []
    for config in configs:
        model = config.model
        if model.image_size != DEFAULT_SIZE:
            resolved.append(config)
            continue
        size = default_image_size(model.source, model.name)
        if size is None and not is_model(model.source, model.name):
            near = nearest(model.name, model.source)
            problems.append(f"model.name={model.name!r} is not a {model.source} model{near}")
            continue
        if size is None:
            problems.append(
                f"model.image_size=default: {model.source} model {model.name!r} has no default input size; "
                "set model.image_size=N"
            )
            continue
        resolved.append(dataclasses.replace(config, model=dataclasses.replace(model, image_size=size)))
    return resolved, problems
