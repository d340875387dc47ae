"""A published table of many models (timm's benchmark result files) beside our runs of the same models.

    python -m perfsweep.commands published SWEEP_DIR

sweeps/published/<sweep>.yaml holds the published rows under `models`:

    models:
      metric: forward                 # the time compared: a phase, phases joined by +, or step
      reference: resnet18             # the model each model's throughput is divided by
      channels_last: {of: nhwc, over: nchw}   # optional: two tables that differ in memory format only
      tables:
        nchw:
          file: results/benchmark-...csv     # its path in huggingface/pytorch-image-models
          commit: 7479d451...                # the commit it was read at
          runs: {memory_format: contiguous}  # which of our runs stand for this table
          csv: |                             # its rows as the file has them (a header, then one per model)
            model,infer_img_size,infer_samples_per_sec,...

Our hardware differs from theirs.
So what is compared is what transfers across hardware:

    rank order         Spearman's rho between their samples/s and ours over the models both have, with a
                       bootstrap 95% interval over models and each model's runs: reproduced when the
                       interval's low end is above 0.8, not reproduced when its high end is 0.8 or below,
                       else undetermined; indicative where a model has one run
    relative to the reference   each model's samples/s over the reference model's in the same table: a
                       speed-up, with the verdicts of analysis/views/published.py
    channels-last speed-up      each model's NHWC samples/s over its NCHW samples/s: the same verdicts

Throughput is per sample.
timm's batch sizes differ from model to model and from table to table.
"""

import csv
import dataclasses
import io
from pathlib import Path
from typing import Any

import numpy as np

from perfsweep.analysis.render import Column, View
from perfsweep.analysis.statistics.bootstrap import rank_correlation
from perfsweep.analysis.statistics.rounds import rule_of
from perfsweep.analysis.statistics.speedup import geometric_mean, percent
from perfsweep.analysis.views import published
from perfsweep.records import DONE, RunRecord, load_sweep

RHO_REPRODUCED = 0.8  # the low end of rho's interval above this: the rank order is reproduced
FEWEST_MODELS = 4  # a rank correlation needs at least this many models run
CHANNELS_LAST = "speed-up: channels-last samples/s over contiguous (below 1: channels-last is slower)"


def read_table(table: dict[str, Any]) -> list[dict[str, str]]:
    """A stored table's rows, as csv.DictReader reads timm's file."""
    return list(csv.DictReader(io.StringIO(table["csv"])))


def samples_per_s(table: dict[str, Any]) -> dict[str, float]:
    """Model -> published samples/s (the `*_samples_per_sec` column), in the table's order."""
    rows = read_table(table)
    column = next(c for c in rows[0] if c.endswith("_samples_per_sec"))
    return {row["model"]: float(row[column]) for row in rows}


def image_sizes(table: dict[str, Any]) -> dict[str, int]:
    """Model -> the input size it was published at (the `*_img_size` column)."""
    rows = read_table(table)
    column = next(c for c in rows[0] if c.endswith("_img_size"))
    return {row["model"]: int(row[column]) for row in rows}


def other_sizes(runs: list[RunRecord], models: dict[str, Any]) -> list[str]:
    """The models our runs ran at other input sizes than timm's.

    Each reads 'resnet18 at 96 px (theirs 224)'.
    """
    theirs: dict[str, set[int]] = {}
    for table in models["tables"].values():
        for model, size in image_sizes(table).items():
            theirs.setdefault(model, set()).add(size)
    ours: dict[str, set[str]] = {}
    for run in (r for r in runs if r.state == DONE and "model.image_size" in r.fields):
        ours.setdefault(str(run.fields.get("model.name")), set()).add(str(run.fields.get("model.image_size")))
    return [
        f"{model} at {','.join(sorted(sizes))} px (theirs {','.join(map(str, sorted(theirs[model])))})"
        for model, sizes in ours.items()
        if model in theirs and sizes != set(map(str, theirs[model]))
    ]


def _side(model: str, table: dict[str, Any]) -> dict[str, Any]:
    return {"model.name": model, **(table.get("runs") or {})}


def _item(label: str, metric: str, of: dict, over: dict, rate_of: float, rate_over: float) -> dict[str, Any]:
    """A comparison of analysis/views/published.py, per sample, from two published throughputs."""
    published_times = {"of": 1000 / rate_of, "over": 1000 / rate_over, "unit": "ms/sample"}
    return {"label": label, "metric": metric, "per_sample": True, "of": of, "over": over, "published": published_times}


def relative_items(models: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(table, model, comparison) of each model's throughput against the reference model's, table by table."""
    reference, items = models["reference"], []
    for name, table in models["tables"].items():
        rates = samples_per_s(table)
        for model in (m for m in rates if m != reference and reference in rates):
            of, over = _side(model, table), _side(reference, table)
            label = f"{model} / {reference} ({name})"
            items.append((name, model, _item(label, models["metric"], of, over, rates[model], rates[reference])))
    return items


def channels_last_items(models: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(model, comparison) of each model's channels-last table against its contiguous one."""
    pair = models.get("channels_last")
    if not pair:
        return []
    tables = models["tables"]
    faster, slower = samples_per_s(tables[pair["of"]]), samples_per_s(tables[pair["over"]])
    return [
        (
            model,
            _item(
                f"{model}, {pair['of']} vs {pair['over']}",
                models["metric"],
                _side(model, tables[pair["of"]]),
                _side(model, tables[pair["over"]]),
                faster[model],
                slower[model],
            ),
        )  # fmt: skip
        for model in faster
        if model in slower
    ]


def comparisons(source: dict[str, Any]) -> list[dict[str, Any]]:
    """Every comparison a models source makes (none for a source without `models`)."""
    models = source.get("models")
    if not models:
        return []
    return [item for _, _, item in relative_items(models)] + [item for _, item in channels_last_items(models)]


def our_samples_per_s(runs: list[RunRecord], selector: dict[str, Any], metric: str) -> float | None:
    """Samples/s of the runs `selector` names: the geometric mean over them, as every column's."""
    rates = runs_samples_per_s(runs, selector, metric)
    return None if rates is None else geometric_mean(rates)


def runs_samples_per_s(runs: list[RunRecord], selector: dict[str, Any], metric: str) -> np.ndarray | None:
    """Each named run's samples/s, from its median time per sample."""
    picked = published.pick(runs, selector)
    if picked is None:
        return None
    return 1000 / published.sample(picked, {"metric": metric, "per_sample": True}).medians


def rank_order(runs: list[RunRecord], models: dict[str, Any], name: str, otherwise: str = "") -> list[str]:
    """One row of the rank-order view: the table, how many models both sides have, rho, the verdict.

    `otherwise` (published.unlike) follows a verdict of another setting than the published one.
    """
    table = models["tables"][name]
    try:
        pairs = [
            (theirs, ours)
            for model, theirs in samples_per_s(table).items()
            if (ours := runs_samples_per_s(runs, _side(model, table), models["metric"])) is not None
        ]
    except published.Ambiguous as error:  # a folder holding two launches of other settings
        return [name, "-", "-", f"not decided: {error}"]
    count = f"{len(pairs)} of {len(samples_per_s(table))}"
    if len(pairs) < FEWEST_MODELS:
        return [name, count, "-", f"too few models run for a rank order (fewer than {FEWEST_MODELS})"]
    rho = rank_correlation([theirs for theirs, _ in pairs], [ours for _, ours in pairs])
    alone = sum(len(ours) < 2 for _, ours in pairs)
    if alone:  # a model's one run holds none of its run-to-run noise
        verdict = f"indicative ({alone} of {len(pairs)} models with 1 run)"
    elif rho.low > RHO_REPRODUCED:
        verdict = "reproduced"
    elif rho.high <= RHO_REPRODUCED:
        verdict = f"not reproduced (high end {rho.high:.2f} <= 0.8)"
    else:  # it holds 0.8: the runs neither bear the order out nor rule it out
        verdict = f"undetermined (low end {rho.low:.2f} <= 0.8)"
    verdict += f" ({otherwise})" if otherwise else ""
    return [name, count, f"{rho.value:.2f} [{rho.low:.2f}, {rho.high:.2f}]", verdict]


def _side_by_side(
    runs: list[RunRecord], item: dict[str, Any], level: float, otherwise: str = ""
) -> tuple[list[float | None], list[str]]:
    """One comparison's row.

    - our samples/s of its two sides (of, over);
    - its published speed-up, and ours with its interval;
    - ours over the published one: the size of the difference;
    - the verdict.
    """
    row = published.compare(runs, item, level, otherwise)
    ran = row[-2] != "-"
    ours = [our_samples_per_s(runs, item[side], item["metric"]) if ran else None for side in ("of", "over")]
    claimed = item["published"]["over"] / item["published"]["of"]
    size = f"{ours[0] / ours[1] / claimed:.2f}" if ran else "-"
    return ours, [row[3], row[5], size, row[6]]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _not_run(rows: list[list[str]]) -> tuple[list[list[str]], list[str]]:
    """The rows of comparisons this sweep ran.

    The others are left out and named in a note: a smaller scale runs a few of the table's models.
    """
    missing = list(dict.fromkeys(row[0] for row in rows if row[-1].startswith(published.NOT_RUN)))
    note = [f"not run in this sweep ({len(missing)}): {', '.join(missing)}"] if missing else []
    return [row for row in rows if not row[-1].startswith(published.NOT_RUN)], note


def _columns(headers: list[str]) -> list[Column]:
    return [Column(header, lambda row, i=i: row[i]) for i, header in enumerate(headers)]


def views(sweep_dir: Path, names: list[str] | None = None) -> list[View]:
    """The published views of many models, beside timm's.

    - the rank order;
    - each model relative to the reference;
    - each model's channels-last speed-up, for a memory-format pair.

    None where the sweep's published source has no `models`.
    `names` picks runs; all by default.
    A folder of launches at several scales, or an environment axis, gets the views of each, named by it.
    """
    runs = load_sweep(sweep_dir, names)
    source = published.published_for(str(runs[0].fields.get("sweep")), sweep_dir) if runs else None
    if not source or not source.get("models"):
        return []
    return [
        dataclasses.replace(shown, title=f"{shown.title}, {where}" if where else shown.title)
        for where, of_setting in published.by_setting(runs).items()
        for shown in _views(sweep_dir, source, of_setting)
    ]


def _views(sweep_dir: Path, source: dict[str, Any], runs: list[RunRecord]) -> list[View]:
    """The views of these runs, of one environment and scale."""
    models, metric = source["models"], source["models"]["metric"]
    level = rule_of(sweep_dir, runs).level
    interval = f"ours [{percent(level)}]"
    otherwise = published.unlike(source, runs)
    above = [
        f"{source['title']} | published: {source['hardware']}, {source['software']} | ours: "
        f"{published.our_setting(source, runs)}",
        f"source: {source['source']}",
        f"time compared: {metric}, per sample",
    ]
    if sizes := other_sizes(runs, models):
        shown = ", ".join(sizes[:5]) + (f" and {len(sizes) - 5} more" if len(sizes) > 5 else "")
        above.append(f"ours ran other input sizes than theirs: {shown}")
        otherwise = otherwise if published.scaled(runs) else "; ".join(filter(None, [otherwise, "not their sizes"]))
    notes = [f"note: {n}" for n in source.get("notes", [])]
    ranks = View(
        f"Beside the published figures: {source['title']}, rank order",
        above,
        _columns(["table", "models run", "Spearman's rho [95% CI]", "verdict"]),
        [rank_order(runs, models, name, otherwise) for name in models["tables"]],
        notes=[f"rho: their samples/s against ours over the models both have; reproduced when the interval's "
               f"low end is above {RHO_REPRODUCED}", *notes],
    )  # fmt: skip
    reference = models["reference"]
    relative = []
    for name, model, item in relative_items(models):
        ours, judged = _side_by_side(runs, item, level, otherwise)
        relative.append([model, name, _rate(samples_per_s(models["tables"][name])[model]), _rate(ours[0]), *judged])
    relative, missing = _not_run(relative)
    ratio_views = [
        View(
            f"Throughput relative to {reference}",
            [f"each model's samples/s over {reference}'s in the same table"],
            _columns(["model", "table", "published samples/s", "ours", "published ratio", interval,
                      "ours / published", "verdict"]),
            relative,
            notes=[published.SPEEDUP.replace("`over`", reference).replace("`of`", "the model"), *missing],
        ),
    ]  # fmt: skip
    pair = models.get("channels_last")
    if pair:
        rows = []
        for model, item in channels_last_items(models):
            ours, judged = _side_by_side(runs, item, level, otherwise)
            rates = [samples_per_s(models["tables"][t])[model] for t in (pair["over"], pair["of"])]
            rows.append([model, " / ".join(map(_rate, rates)), " / ".join(map(_rate, ours[::-1])), *judged])
        rows, missing = _not_run(rows)
        ratio_views.append(
            View(
                f"Channels-last speed-up ({pair['of']} over {pair['over']})",
                ["samples/s of each model in the contiguous (NCHW) and the channels-last (NHWC) table"],
                _columns(["model", f"published {pair['over']} / {pair['of']} samples/s", "ours samples/s",
                          "published speed-up", interval, "ours / published", "verdict"]),
                rows,
                notes=[CHANNELS_LAST, *missing],
            )
        )  # fmt: skip
    return [ranks, *ratio_views]
