"""A sweep's results side by side with the published figures it reproduces (sweeps/published/<sweep>.yaml).

    python -m analysis published SWEEP_DIR

Each published comparison names two configurations by their axes or config values (`of` and `over`), the
time it compares (`metric`: a phase, phases joined by +, or step) and what the source published:
both times (`published: {of, over, unit}`), a speed-up (a number, or a [low, high] range), or only
a direction (slower, faster, same). Our hardware differs from theirs, so the verdict compares
speed-ups (median time of `over` / median time of `of`, with a bootstrap 95% interval over steps;
with replicates (repeats=N), each run counts once and the interval is across runs):

    reproduced     our interval reaches the published speed-up (or goes beyond it, the same way)
    smaller        the same direction, but our interval lies between no effect and the published figure
    absent         our interval includes 1.0: no effect seen
    reversed       our interval lies on the other side of 1.0
    contradicted   the source saw no effect (same); ours is outside +-5%
A figure the source does not give (a table lost as an image) is stored as none and shown as such.
"""

from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from analysis import machines, stats
from analysis.render import Column, View
from records import DONE, FAILED, RunRecord, load_sweep

PUBLISHED_DIR = Path(__file__).resolve().parent.parent / "sweeps" / "published"
SAME = 0.05  # a speed-up within 5% of 1.0 counts as no effect
HEADER = ["comparison", "time", "published of / over", "published speed-up", "ours of / over", "ours [95% CI]"]
NOT_RUN = "not run in this sweep"
SPEEDUP = "speed-up: median time of `over` / median time of `of` (below 1: `of` is slower)"


def published_for(sweep: str) -> dict[str, Any] | None:
    path = PUBLISHED_DIR / f"{sweep}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path)) if path.is_file() else None


def matches(axes: dict[str, str], fields: dict[str, Any], selector: dict[str, Any]) -> bool:
    """Whether a run with these axes and (flattened) config fields is the one `selector` names."""
    return all(str(axes.get(k, fields.get(k))) == str(v) for k, v in selector.items())


def pick(runs: list[RunRecord], selector: dict[str, Any]) -> list[RunRecord]:
    """The done runs `selector` names: one configuration's replicates; an error if it names several configurations."""
    found = [r for r in runs if r.state == DONE and matches(r.axes, r.fields, selector)]
    configurations = {
        repr(sorted((k, repr(v)) for k, v in r.fields.items() if k not in stats.NOT_CONFIGURATION)) for r in found
    }
    if len(configurations) > 1:
        raise ValueError(
            f"{selector} matches {len(found)} runs of several configurations: {', '.join(r.name for r in found)}"
        )
    return found


def step_times(run: RunRecord, metric: str) -> np.ndarray:
    """Per measured step, the sum of the metric's phases (ms)."""
    columns = [f"{phase}_ms" for phase in metric.split("+")]
    return sum(np.asarray(values, dtype=float) for values in run.steps(columns).values())


def times(run: RunRecord, item: dict[str, Any]) -> np.ndarray:
    """Per measured step, the comparison's time (ms); per sample where it compares per sample (`per_sample`:
    runs whose batches differ, as timm's tables' do)."""
    values = step_times(run, item.get("metric", "step"))
    return values / run.batch if item.get("per_sample") else values


def published_speedup(item: dict[str, Any]) -> tuple[float, float] | None:
    """The published speed-up as a (low, high) range, or None when only a direction (or nothing) is given."""
    if item.get("speedup") is not None:
        value = item["speedup"]
        return (float(value[0]), float(value[1])) if isinstance(value, list) else (float(value), float(value))
    times = item.get("published") or {}
    if times.get("of") and times.get("over"):
        value = times["over"] / times["of"]
        return value, value
    return None


def direction(item: dict[str, Any]) -> str | None:
    span = published_speedup(item)
    if span is None:
        return item.get("direction")
    if 1 - SAME <= span[0] and span[1] <= 1 + SAME:
        return "same"
    return "faster" if span[0] > 1 else "slower"


def verdict(item: dict[str, Any], ours: stats.Interval) -> str:
    claim = direction(item)
    if claim is None:
        return "no published figure"
    if claim == "same":
        return "reproduced" if ours.low <= 1 + SAME and ours.high >= 1 - SAME else "contradicted"
    if not ours.excludes(1.0):
        return "absent"
    if (ours.value > 1) != (claim == "faster"):
        return "reversed"
    span = published_speedup(item)
    if span is None:
        return "reproduced"
    low, high = span
    between = ours.high < low if claim == "faster" else ours.low > high
    return "smaller" if between else "reproduced"


def _times(item: dict[str, Any]) -> str:
    times = item.get("published") or {}
    if not times.get("of") and not times.get("over"):
        return "none"
    unit = times.get("unit", "ms")
    return f"{times.get('of', '?')} / {times.get('over', '?')} {unit}"


def _speedup_text(item: dict[str, Any]) -> str:
    span = published_speedup(item)
    if span is None:
        return item.get("direction") or "none"
    return f"{span[0]:.3g}x" if span[0] == span[1] else f"{span[0]:.3g}-{span[1]:.3g}x"


def compare(runs: list[RunRecord], item: dict[str, Any]) -> list[str]:
    """One row: the comparison, the published figures, ours, and the verdict."""
    metric = item.get("metric", "step")
    row = [item["label"], metric, _times(item), _speedup_text(item)]
    if not item.get("of") or not item.get("over"):
        return [*row, "-", "-", "not run: " + (item.get("not_run") or "the setting is not reproducible")]
    of, over = pick(runs, item["of"]), pick(runs, item["over"])
    if not of or not over:
        failed = [
            r for r in runs if r.state == FAILED and any(matches(r.axes, r.fields, item[s]) for s in ("of", "over"))
        ]
        if failed:
            return [*row, "-", "-", f"run failed: {failed[0].error_line(limit=120)} ({failed[0].name})"]
        return [*row, "-", "-", NOT_RUN]
    a, b = [times(r, item) for r in of], [times(r, item) for r in over]
    unit = "ms/sample" if item.get("per_sample") else "ms"
    if len(a) > 1 and len(b) > 1:  # replicates: each run counts once, run-to-run variance in the interval
        medians_a, medians_b = np.array([np.median(x) for x in a]), np.array([np.median(x) for x in b])
        ours = stats.speedup_across_runs(medians_a, medians_b)
        figures = f"{medians_a.mean():.3g} / {medians_b.mean():.3g} {unit} ({len(a)} / {len(b)} runs)"
    else:
        ours = stats.speedup(np.concatenate(a), np.concatenate(b))
        figures = f"{np.median(np.concatenate(a)):.3g} / {np.median(np.concatenate(b)):.3g} {unit}"
    return [*row, figures, str(ours), verdict(item, ours)]


def our_setting(runs: list[RunRecord]) -> str:
    run = machines.usual(runs) or runs[0]
    others = len(machines.elsewhere(runs))
    elsewhere = f" ({others} runs elsewhere: MIXED MACHINES)" if others else ""
    return f"{run.device}, torch {run.torch_version}{elsewhere}"


def view(sweep_dir: Path) -> View | None:
    """The side-by-side view of the sweep in `sweep_dir`, or None if its sweep has no published figures."""
    runs = load_sweep(sweep_dir)
    if not runs or (source := published_for(str(runs[0].fields.get("sweep")))) is None or not source.get("comparisons"):
        return None  # a table of many models (no `comparisons`) is analysis/published_models.py's
    above = [
        f"{source['title']} | published: {source['hardware']}, {source['software']} | ours: {our_setting(runs)}",
        f"source: {source['source']}",
    ]
    columns = [Column(header, lambda row, i=i: row[i]) for i, header in enumerate([*HEADER, "verdict"])]
    rows = [compare(runs, item) for item in source["comparisons"]]
    notes = [SPEEDUP, *(f"- {item['label']}: {item['note']}" for item in source["comparisons"] if item.get("note"))]
    notes += [f"note: {n}" for n in source.get("notes", [])]
    return View(f"Beside the published figures: {source['title']}", above, columns, rows, notes=notes)
