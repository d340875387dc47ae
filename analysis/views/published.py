"""A sweep's results side by side with the published figures it reproduces (sweeps/published/<sweep>.yaml).

    python -m perfsweep.commands published SWEEP_DIR

Each published comparison names two configurations, `of` and `over`, by their axes or config values.
`metric` is the time it compares: a phase, phases joined by +, or step.
The source published one of three things:

- both times (`published: {of, over, unit}`);
- a speed-up (a number, or a [low, high] range);
- only a direction (slower, faster, same).

Our hardware differs from theirs, so the verdict compares speed-ups.
A speed-up is the time of `over` over the time of `of`.
Each time is the geometric mean of its runs' medians, each run counting once.
Where the two sides shared each process (pairing=auto), the speed-up is the geometric mean of each process's ratio.
It then need not equal the ratio of the times shown.
Its interval is across runs (analysis/statistics/speedup.py), at the level of the sweep's other views: 95%, or
repeats=auto's looks' level.
A comparison names the settings its figure was measured at (a size, a backend).
Where this sweep ran those otherwise, the row says what it ran, and gives no verdict.
A verdict needs two or more runs a side (repeats=N).
With one run a side, the interval is within-run.
The row then says `indicative (1 run)`, never a verdict.
With replicates, the verdicts are (analysis/statistics/verdict.py):

    reproduced     a speed-up or slow-down: our interval lies on the claimed side of 1.0, holds the published
                   figure, and lies within half and twice it, as a ratio and as an effect (in log); no effect
                   (same): our interval lies inside +-5% of 1.0
    smaller        the claimed direction, but our interval lies between no effect and the published figure
    larger         the claimed direction, and our interval lies wholly beyond the published figure
    absent         an effect was claimed; our interval lies inside +-5% of 1.0
    reversed       our interval lies on the other side of 1.0
    contradicted   no effect was claimed; our interval lies wholly outside +-5%
    undetermined   our interval is too wide to say: more runs (repeats=N) narrow it

A deciding word is followed by how our runs were not the published setting.
It is also followed by RUNS DISAGREE where a side's runs' medians span 1.5x or more.
The table flags them so too.
That is another kind of device than the source names (`device: gpu`), or a scale of the sweep.
It is also a value of the source's `setting` that our runs did not run at, typed or not.

A figure the source does not give is stored as none and shown as such.
A table lost as an image is one such case.
"""

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from perfsweep.analysis import machines
from perfsweep.analysis.groups import (
    UNSET,
    Configuration,
    configurations,
    environment_axes,
    in_order,
    pairing,
    varying,
)
from perfsweep.analysis.render import Column, View, figure
from perfsweep.analysis.statistics.rounds import rule_of
from perfsweep.analysis.statistics.speedup import LEVEL, Sample, percent, speedup
from perfsweep.analysis.statistics.verdict import DECIDED, published_speedup, verdict
from perfsweep.analysis.views.table import context, disagree
from perfsweep.records import DONE, FAILED, PUBLISHED, RunRecord, load_sweep, sweep_file_name
from perfsweep.records.words import counted

PUBLISHED_DIR = Path(__file__).resolve().parents[2] / "sweeps" / "published"
HEADER = ["comparison", "time", "published of / over", "published speed-up", "ours of / over"]
NOT_RUN = "not run in this sweep"
NOT_DECIDED = "not decided"  # a side names runs of several configurations: no one figure is ours
SIDES = ("of", "over")  # a comparison's two sides
SPEEDUP = (
    "speed-up: time of `over` / time of `of` (below 1: `of` is slower), the ratio of the times shown: each the "
    "geometric mean of its runs' median times; where the sides shared each process (pairing=auto), the geometric "
    "mean of each process's own ratio instead"
)


def published_for(sweep: str, sweep_dir: Path | None = None) -> dict[str, Any] | None:
    """The published figures of the sweep named `sweep` (or its earlier name), if it has any.

    Those its folder keeps come first: a config dir's, copied at launch.
    Else perfsweep's own.
    """
    kept = Path(sweep_dir) / PUBLISHED if sweep_dir is not None else None
    path = kept if kept is not None and kept.is_file() else PUBLISHED_DIR / f"{sweep_file_name(sweep)}.yaml"
    return OmegaConf.to_container(OmegaConf.load(path)) if path.is_file() else None


def matches(axes: dict[str, str], fields: dict[str, Any], selector: dict[str, Any]) -> bool:
    """Whether a run with these axes and (flattened) config fields is the one `selector` names."""
    return all(str(axes.get(k, fields.get(k))) == str(v) for k, v in selector.items())


class Ambiguous(ValueError):
    """A comparison's side names runs of several configurations: what parts them."""


def pick(runs: list[RunRecord], selector: dict[str, Any]) -> Configuration | None:
    """The done replicates of the configuration `selector` names; None if it names none.

    Raises:
        Ambiguous: it names several, with the settings that part them.
    """
    matched = [r for r in runs if r.state == DONE and matches(r.axes, r.fields, selector)]
    found = configurations(matched)
    if len(found) > 1:
        axes, fields = varying(matched)
        values = {key: {str(r.axis(key)) for r in matched} for key in axes}
        values |= {key: {str(r.fields.get(key, UNSET)) for r in matched} for key in fields}
        parts = [f"{key} ({', '.join(sorted(found, key=in_order))})" for key, found in values.items()]
        raise Ambiguous(f"{len(found)} configurations match {selector}, parted by {'; '.join(parts)}")
    return found[0] if found else None


def sample(config: Configuration, item: dict[str, Any]) -> Sample:
    """Each run's measured steps of the comparison's time, in ms.

    A time is the sum of its metric's phases.
    With `per_sample` it is per sample: for runs whose batches differ, as timm's tables' do.
    """
    columns = tuple(f"{phase}_ms" for phase in item.get("metric", "step").split("+"))
    return config.sample(columns, per_sample=bool(item.get("per_sample")))


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
    return f"{figure(span[0])}x" if span[0] == span[1] else f"{figure(span[0])}-{figure(span[1])}x"


def ran_otherwise(runs: list[RunRecord], item: dict[str, Any]) -> str:
    """The settings of a comparison's sides that this sweep ran at other values only, as `size=100 (ran 10)`.

    A setting counts where runs, done or failed, match every other setting of that side.
    Where no setting does (a side of several settings this sweep ran otherwise), each that no run ran counts.
    """
    found, alone = [], []
    measured = [r for r in runs if r.state in (DONE, FAILED)]
    for side in SIDES:
        for key, wanted in item[side].items():
            option = key.removesuffix(".name")
            # an option's other settings follow from it: another option is not held to them
            dropped = f"{option}." if "." not in option else key
            rest = {k: v for k, v in item[side].items() if k != key and not k.startswith(dropped)}
            ran = _ran([r for r in measured if matches(r.axes, _read(r), rest)], key)
            if ran and str(wanted) not in ran:
                found.append(f"{key}={wanted} (ran {', '.join(ran)})")
            ran = _ran(measured, key)
            if ran and str(wanted) not in ran:
                alone.append(f"{key}={wanted} (ran {', '.join(ran)})")
    return "; ".join(dict.fromkeys(found or alone))


def _ran(runs: list[RunRecord], key: str) -> list[str]:
    """The values of `key` these runs ran at, in order."""
    values = (r.axes.get(key, _read(r).get(key)) for r in runs)
    return sorted({str(value) for value in values if value is not None}, key=in_order)


def _read(run: RunRecord) -> dict[str, Any]:
    """The run's fields, without the compiler settings of a run that compiled nothing: it did not run at them."""
    if run.fields.get("compile.enabled", True):
        return run.fields
    return {k: v for k, v in run.fields.items() if not k.startswith("compile.") or k == "compile.name"}


def unlike(source: dict[str, Any], runs: list[RunRecord]) -> str:
    """How our runs were not the published setting, as a verdict's qualifier: 'ours on a CPU, theirs on a GPU;
    scale=smoke'; '' where nothing is known to differ.

    A device kind the source names (`device: gpu`) that ours is not, and a scale of the sweep other than full.
    Else the setting's keys that our runs ran otherwise: 'not their model.name'.
    """
    parts = []
    theirs = source.get("device")
    run = machines.usual(runs)
    ours = None if run is None else "gpu" if (run.env or {}).get("gpu") else "cpu"
    if theirs in ("cpu", "gpu") and ours and ours != theirs:
        parts.append(f"ours on a {ours.upper()}, theirs on a {theirs.upper()}")
    if scales := scaled(runs):
        parts.append(f"scale={scales}")
    elif otherwise := unlike_setting(source, runs):
        parts.append(f"not their {', '.join(otherwise)}")
    return "; ".join(parts)


def unlike_setting(source: dict[str, Any], runs: list[RunRecord]) -> dict[str, str]:
    """Each setting our done runs ran otherwise -> 'resnet18 (theirs resnet50)'.

    A key no run records is left out.
    Its value is unknown, not another.
    """
    done = [r for r in runs if r.state == DONE] or runs
    found = {}
    for key, theirs in (source.get("setting") or {}).items():
        ours = sorted({str(r.fields[key]) for r in done if key in r.fields}, key=in_order)
        if ours and ours != [str(theirs)]:
            found[key] = f"{','.join(ours)} (theirs {theirs})"
    return found


def scaled(runs: list[RunRecord]) -> str:
    """The sweep's scales other than full, as 'cpu,smoke'; '' at full scale."""
    return ",".join(sorted({_scale(r) for r in runs} - {"full"}))


def compare(runs: list[RunRecord], item: dict[str, Any], level: float = LEVEL, otherwise: str = "") -> list[str]:
    """One row: the comparison, the published figures, ours at `level`, and the verdict.

    `otherwise` (unlike) follows a verdict word: it is of another setting than the published figure's.
    """
    metric = item.get("metric", "step")
    row = [item["label"], metric, _times(item), _speedup_text(item)]
    if not item.get("of") or not item.get("over"):
        return [*row, "-", "-", "not run: " + (item.get("not_run") or "the setting is not reproducible")]
    try:
        of, over = pick(runs, item["of"]), pick(runs, item["over"])
    except Ambiguous as error:  # a folder holding two launches of other settings: no one figure is ours
        return [*row, "-", "-", f"{NOT_DECIDED}: {error}"]
    if not of or not over:  # the sides without a done run: failed, not finished, or never planned
        empty = [
            [r for r in runs if matches(r.axes, r.fields, item[s])]
            for s, got in zip(SIDES, (of, over), strict=True)
            if not got
        ]
        failed = [r for side in empty for r in side if r.state == FAILED]
        pending = [r for side in empty for r in side if r.state != DONE and r.state != FAILED]
        if failed:
            return [*row, "-", "-", f"run failed: {failed[0].error_line(limit=120)} ({failed[0].name})"]
        if all(empty) and pending:
            return [*row, "-", "-", f"not measured: {counted(len(pending), 'run')} not finished ({pending[0].state})"]
        ran = ran_otherwise(runs, item)
        return [*row, "-", "-", f"{NOT_RUN} at {ran}" if ran else NOT_RUN]
    a, b = sample(of, item), sample(over, item)
    unit = "ms/sample" if item.get("per_sample") else "ms"
    paired, basis = pairing(of, over)
    ours = speedup(a, b, paired=paired, level=level, basis=basis)
    figures = f"{figure(a.middle)} / {figure(b.middle)} {unit} ({a.runs} / {b.runs} runs)"
    word = verdict(item, ours)
    spans = [
        f"{side}'s span {figure(min(medians))}-{figure(max(medians))} ms"
        for side, config in zip(SIDES, (of, over), strict=True)
        if (medians := disagree(config.runs, item.get("metric", "step")))
    ]
    said = [*([f"RUNS DISAGREE: {', '.join(spans)}"] if spans else []), *([otherwise] if otherwise else [])]
    shown = ours.text(apart=published_speedup(item) or ())  # the digits that keep their figure out where it is
    return [*row, figures, shown, f"{word} ({'; '.join(said)})" if said and word in DECIDED else word]


def by_setting(runs: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """The runs of each environment and each scale, where package versions are an axis of the sweep or its folder
    holds launches at several scales.

    Returns {"": runs} where neither is so.
    A published comparison is made within each, its row named by it.
    """
    axes = environment_axes(runs)
    scales = len({_scale(run) for run in runs}) > 1
    found: dict[str, list[RunRecord]] = {}
    for run in runs:
        where = [f"{a}={run.axis(a)}" for a in axes] + ([f"scale={_scale(run)}"] if scales else [])
        found.setdefault(" ".join(where), []).append(run)
    return found


def _scale(run: RunRecord) -> str:
    """The scale the run's sweep was launched at: full where it names none."""
    return str(run.fields.get("scale", "full"))


def our_setting(source: dict[str, Any], runs: list[RunRecord]) -> str:
    run = machines.usual(runs) or runs[0]
    others = len(machines.elsewhere(runs))
    elsewhere = f" ({others} runs elsewhere: MIXED MACHINES)" if others else ""
    torch = "torch as an axis" if "torch" in environment_axes(runs) else f"torch {run.torch_version}"
    scales = f", scale={scales}" if (scales := scaled(runs)) else ""
    if len(every := sorted({_scale(r) for r in runs}, key=in_order)) > 1:
        scales = f", launches at scales {', '.join(every)} (a row for each)"
        if "full" in every:  # the full scale's rows are at the published setting
            return f"{run.device}, {torch}{elsewhere}{scales}"
    otherwise = [f"{key}={value}" for key, value in unlike_setting(source, runs).items()]
    unlike_theirs = f", not the published setting: {', '.join(otherwise)}" if otherwise else ""
    if scales and not unlike_theirs:
        unlike_theirs = ", not the published setting"
    return f"{run.device}, {torch}{elsewhere}{scales}{unlike_theirs}"


def view(sweep_dir: Path, names: list[str] | None = None) -> View | None:
    """The side-by-side view of the sweep in `sweep_dir` (its runs `names`, or all), or None if its sweep has no
    published figures."""
    runs = load_sweep(sweep_dir, names)
    source = published_for(str(runs[0].fields.get("sweep")), sweep_dir) if runs else None
    if source is None or not source.get("comparisons"):
        return None  # a table of many models (no `comparisons`) is analysis/views/published_models.py's
    above = [
        f"{source['title']} | published: {source['hardware']}, {source['software']} | "
        f"ours: {our_setting(source, runs)}",
        f"source: {source['source']}",
    ]
    rule = rule_of(sweep_dir, runs)
    if done := [r for r in runs if r.state == DONE and r.summary]:  # what ran, as the table's line above says it
        above.insert(1, f"ours ran: {context(runs, configurations(done), rule)}")
    level = rule.level
    headers = [*HEADER, f"ours [{percent(level)}]", "verdict"]
    columns = [Column(header, lambda row, i=i: row[i]) for i, header in enumerate(headers)]
    rows = [
        [f"{row[0]}, {where}" if where else row[0], *row[1:]]
        for item in source["comparisons"]
        for where, of_setting in by_setting(runs).items()
        for row in [compare(of_setting, item, level, unlike(source, of_setting))]
    ]
    notes = [SPEEDUP, *(f"- {item['label']}: {item['note']}" for item in source["comparisons"] if item.get("note"))]
    notes += [f"note: {n}" for n in source.get("notes", [])]
    return View(f"Beside the published figures: {source['title']}", above, columns, rows, notes=notes)
