"""Model sets: one value that names many models, `model.name=timm:resnet*,convnext_t*`, expanded when the plan is
made into one value per model (a sweep over them), from timm's `list_models` patterns.

A pattern's pretrained tag is ignored (`resnet50.a1_in1k` is `resnet50`); a pattern that matches nothing is
a problem naming the nearest names. The set sets model.source=timm for its runs.
"""

import difflib

PREFIX = "timm:"


def expand_model_sets(overrides: list[str]) -> tuple[list[str], list[str]]:
    """`overrides` with each model set replaced by the models it names; and the problems (patterns that match
    nothing)."""
    expanded, problems = [], []
    for override in overrides:
        key, _, value = override.partition("=")
        value = value.strip("'\"")
        if key.lstrip("+~") != "model.name" or not value.startswith(PREFIX):
            expanded.append(override)
            continue
        import timm

        names: dict[str, None] = {}
        for pattern in (p.strip().split(".")[0] for p in value.removeprefix(PREFIX).split(",") if p.strip()):
            found = timm.list_models(pattern)
            if not found:
                near = difflib.get_close_matches(pattern.replace("*", ""), timm.list_models(), n=5, cutoff=0.5)
                hint = f"; nearest names: {', '.join(near)}" if near else ""
                problems.append(f"model.name pattern {pattern!r} matches no timm model{hint}")
            names.update(dict.fromkeys(found))
        if names:
            expanded += ["model.source=timm", f"model.name={','.join(names)}"]
    return expanded, problems
