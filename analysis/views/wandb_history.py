"""A history in W&B: a history-level run with each configuration's points, table and plot; the Report's content.

`log_history` logs the run into the history's --out folder, offline (none where the newest runs' tracker is
disabled); `history --wandb` uploads it.
The run has job type "history" and an id of its own (history-<digest of its points and folder>).
Its x-axis is `point`: a point's place in the history, oldest first.
Each configuration logs <slug>/ms, <slug>/low and <slug>/high at its points.
Its summary holds its newest point's: a newest point of one run has no interval there (null).
Its table is <slug>/points, and its plot <slug>/plot.
`report_content` is the W&B Report's content: a section per configuration, as report.py builds and outlines it.
W&B is a view: a failure here is returned as a warning, never raised.
"""

import hashlib
from pathlib import Path
from typing import Any

from perfsweep.analysis.render import View
from perfsweep.analysis.statistics.variance import across_runs
from perfsweep.analysis.timeline import History
from perfsweep.analysis.views import wandb_online
from perfsweep.analysis.views.history import Series, centre, host_lines, machine_lines
from perfsweep.analysis.views.wandb_sweep import tracker_of, view_run
from perfsweep.conf.schema import TrackerConf


def tracker_conf(found: History) -> TrackerConf:
    """The tracker settings of the newest point's runs."""
    return tracker_of(found.points[-1].runs[-1])


def run_id(found: History, out: Path) -> str:
    """The history run's id: the same points written into the same folder log the same run again."""
    named = "\n".join([str(out.resolve()), *(p.label for p in found.points)])
    return f"history-{hashlib.sha1(named.encode()).hexdigest()[:10]}"


def point_rows(made: list[Series], found: History) -> list[dict[str, float]]:
    """What each point logs: its place, and each configuration's time and interval there (where it has one)."""
    places = {id(point): index for index, point in enumerate(found.points)}
    rows = [{"point": index} for index in range(len(found.points))]
    for series in made:
        for row in series.rows:
            logged = rows[places[id(row.point)]]
            logged[f"{series.slug}/ms"] = centre(row)
            if len(row.times) >= 2:
                _, logged[f"{series.slug}/low"], logged[f"{series.slug}/high"] = across_runs(row.times)
    return rows


def unreplicated(made: list[Series]) -> dict[str, None]:
    """The summary's interval of each configuration whose newest point has one run: none, not an older point's."""
    return {f"{s.slug}/{end}": None for s in made if len(s.rows[-1].times) < 2 for end in ("low", "high")}


def log_history(
    made: list[Series], views: list[View], found: History, out: Path, conf: TrackerConf, said: list[str]
) -> list[str]:
    """Log the history run into `out`, with the plots `out` holds (views.history.write).

    Its summary holds each configuration's flag and machine, and the history's own lines (`said`) as `gate`.

    Returns:
        Warnings where it could not be logged or W&B failed.
    """
    if conf.mode == "disabled":
        return []
    conf = wandb_online.kept_offline(conf)  # online, a history logged again would add to the last one
    identifier = run_id(found, out)
    try:
        import wandb

        run = view_run(conf, out, identifier, "history", group="history", name=f"history-{found.points[-1].label}")
        run.define_metric("point")
        run.define_metric("*", step_metric="point")
        for row in point_rows(made, found):
            run.log(row)
        for series, shown in zip(made, views, strict=True):
            logged: dict[str, Any] = {f"{series.slug}/points": wandb.Table(columns=shown.header, data=shown.rows)}
            plot = out / f"history-{series.slug}.png"
            if plot.is_file():
                logged[f"{series.slug}/plot"] = wandb.Image(str(plot))
            run.log(logged)
        run.summary.update({s.slug: s.flag or "no regression flagged" for s in made})
        machine = {s.slug: machine_lines(s) + host_lines(s) for s in made}
        run.summary.update({f"{slug}/machine": "; ".join(lines) for slug, lines in machine.items() if lines})
        run.summary.update(unreplicated(made) | ({"gate": "; ".join(said)} if said else {}))
        run.finish()
    except Exception as error:  # W&B is a view of the records: its failure loses nothing
        return [f"wandb history run failed: {type(error).__name__}: {error}"]
    return []


def offline_run(out: Path, found: History) -> list[Path]:
    """The history run's offline files in `out`, for `wandb sync`."""
    return sorted((out / "wandb").glob(f"offline-run-*-{run_id(found, out)}"))


def report_content(
    made: list[Series], views: list[View], found: History, out: Path, conf: TrackerConf, said: list[str]
) -> dict:
    """The W&B Report of the history: its own lines (`said`); per configuration, what its view says, and its panels.

    The panels are the configuration's time with its interval over the points, and its table of points.
    They read the history run alone.
    """
    runs = {"project": conf.project, "entity": conf.entity, "filters": f"Metric('ID') == '{run_id(found, out)}'"}
    blocks: list[dict[str, Any]] = [
        {"type": "h1", "text": f"History: {len(found.points)} points to {found.points[-1].label}"},
        {"type": "p", "text": f"Points ordered {found.order}; `point` is a point's place, oldest first."},
        *({"type": "p", "text": line} for line in said),
    ]
    for series, shown in zip(made, views, strict=True):
        lines = "; ".join([*shown.above[1:], *shown.notes, *shown.flags])
        panels = [
            {"type": "line", "x": "point", "y": [f"{series.slug}/{part}" for part in ("ms", "low", "high")]},
            {"type": "table", "table": f"{series.slug}/points"},
        ]
        blocks += [
            {"type": "h2", "text": series.label},
            {"type": "p", "text": lines},
            {"type": "panel_grid", "runset": runs, "panels": panels},
        ]
    return {
        "project": conf.project,
        "entity": conf.entity,
        "title": f"perfsweep history to {found.points[-1].label}",
        "description": f"Each configuration's step time over {len(found.points)} points, with its change points.",
        "blocks": blocks,
    }
