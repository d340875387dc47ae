"""The views users ask for, one module each.

sweep_views is what the terminal prints after a launch and the report shows.
It is the table, then replicates and ranks, then the explanations (explain=true), then the published figures.
"""

from pathlib import Path

from perfsweep.analysis.groups import compared_as_asked
from perfsweep.analysis.render import View
from perfsweep.analysis.views import explain, published, published_models, ranks, replicates, table
from perfsweep.records import load_sweep


def sweep_views(
    sweep_dir: Path,
    names: list[str] | None = None,
    vs: str | None = None,
    stranded: dict[str, tuple[str, str]] | None = None,
) -> list[View]:
    """The table of the sweep's runs, then the views below it.

    `names` picks runs; `vs` compares along another axis (groups.compared_along).
    `stranded` names the unfinished runs that no job will finish (table.flags).
    """
    runs = load_sweep(sweep_dir, names)
    compared = compared_as_asked(runs, vs)
    views = [table.table_view(sweep_dir, compared, stranded)]
    if any("replicate" in r.axes for r in runs):
        views.append(replicates.view(sweep_dir, runs=compared))
    across = ranks.view(sweep_dir, names)
    shown = explain.views(sweep_dir, compared) + published_views(sweep_dir, names)
    return views + ([across] if across else []) + shown


def published_views(sweep_dir: Path, names: list[str] | None = None) -> list[View]:
    """The sweep's runs beside the published figures it reproduces: its comparisons, or a table of many models.

    `names` picks runs, as the table above them does: a launch's own, in a folder that holds others.
    """
    side_by_side = published.view(sweep_dir, names)
    return ([side_by_side] if side_by_side else []) + published_models.views(sweep_dir, names)
