"""A sweep's report: a self-contained HTML file, always, and a W&B Report with the same content when online.

    python launch.py report SWEEP_DIR [--wandb] [--out DIR]      (or python -m perfsweep.commands report SWEEP_DIR)

The HTML report is SWEEP_DIR/report.html, or DIR/report.html.
It holds the views the terminal prints (analysis/views/).
Those are the table with its flags, the replicates and the published figures.
Then come the commands that measure each configuration again, redacted.
It embeds the plots as PNG.
It is one file to mail or attach, readable offline.
`wandb_report_content` builds the W&B Report's content offline, as plain data: blocks, panels, run filters.
Only `save_wandb_report` talks to W&B.
wandb-workspaces needs a logged-in API even to build its objects.
"""

import base64
import datetime
import html
from pathlib import Path
from typing import Any

from perfsweep.analysis.render import html_section
from perfsweep.analysis.views import sweep_views
from perfsweep.analysis.views.plots import write_plots
from perfsweep.analysis.views.table import repro_view
from perfsweep.records import DONE, REPORT, atomic_write, load_sweep
from perfsweep.records.redact import redact_text

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1em; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.75em; margin: 0.5em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 3px 4px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; } .interval { display: inline-block; }
.context { color: #555; font-size: 0.9em; } pre { font-size: 0.8em; } .flag { color: #a00; }
img { max-width: 100%; margin: 0.5em 0; }
"""


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def html_report(sweep_dir: Path, out: Path | None = None, stranded: dict[str, tuple[str, str]] | None = None) -> Path:
    """Write OUT/report.html from the sweep's records, and its plots into OUT/plots/.

    OUT is the sweep folder unless given.
    `stranded` names the unfinished runs that no job will finish (table.flags).

    Returns:
        The report's path.
    """
    sweep_dir = Path(sweep_dir)
    runs = load_sweep(sweep_dir)
    done = any(r.state == DONE for r in runs)
    written = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    parts = [
        f"<h1>perfsweep: {html.escape(sweep_dir.name)}</h1>",
        f"<p class=context>written {written} UTC from {html.escape(str(sweep_dir.resolve()))}</p>",
        *(html_section(view) for view in sweep_views(sweep_dir, stranded=stranded)),
        *([html_section(repro_view(sweep_dir, runs, redacted=True))] if done else []),
    ]
    parts = [redact_text(part) for part in parts]  # a report is made to be shared: no secrets, home as ~
    if done:
        plots = {p.name: p for p in write_plots(sweep_dir, out)}
        for heading, name in [*PLOT_SECTIONS.items(), RANKS_SECTION]:
            if name in plots:
                parts += [f"<h2>{heading}</h2>", _image(plots[name])]
    page = f"<!doctype html><html><head><meta charset=utf-8><title>perfsweep {html.escape(sweep_dir.name)}</title>"
    page += f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    path = Path(out or sweep_dir) / REPORT
    atomic_write(path, page.encode())
    return path


# The report's sections after its table views, in order: heading -> the plot the HTML report shows there (the
# W&B Report shows them as panels, after its results: wandb_report_content).
PLOT_SECTIONS = {
    "Median time per phase": "phases.png",
    "Speed-up over the baseline": "speedups.png",
    "Step time, run by run": "runs.png",
}
EXPLAIN_SECTION = "Why it is slower, by operator"  # explain=true
PUBLISHED_SECTION = "Beside the published figures"  # a sweep that reproduces published figures
RANKS_SECTION = ("Step time by rank", "ranks.png")  # after them, for a sweep with runs across ranks


def wandb_report_content(
    sweep: str,
    group: str,
    project: str,
    entity: str | None,
    phases: list[str],
    ranks: int = 0,
    explained: bool = False,
    said: tuple[str, ...] = (),
    published: tuple[str, ...] = (),
) -> dict[str, Any]:
    """What the W&B Report holds, as plain data: title, description, and blocks.

    Blocks are headings, text, and panel grids of the sweep's runs, selected by their W&B `group`.
    `said` are the table's lines above and below it: the machine and settings, its notes, and the flags.
    A Report is shared on its own, so it says them as the HTML report does.
    They are the HTML report's sections, as W&B panels.
    A sweep run with explain=true (`explained`) gets the table of its ranked differences.
    A sweep that reproduces published figures gets their tables (`published`: their names), verdicts and all.
    A sweep whose runs have up to `ranks` ranks gets each rank's step and backward over the steps.
    Those come from its rank<N>/ series.
    """
    runs = {"project": project, "entity": entity, "filters": f"Metric('Group') == '{group}'"}
    timed = [*phases, "step"]
    panels = {
        "Results": [{"type": "table", "table": "results"}],
        "Median time per phase": [{"type": "bar", "metrics": [f"median_ms.{p}_ms" for p in timed]}],
        "Speed-up over the baseline": [{"type": "table", "table": "speedups"}],
        "Step time, run by run": [{"type": "line", "x": "step", "y": [f"{p}_ms"]} for p in timed],
    }
    if explained:
        panels[EXPLAIN_SECTION] = [{"type": "table", "table": "explain"}]
    if published:
        panels[PUBLISHED_SECTION] = [{"type": "table", "table": name} for name in published]
    if ranks:
        panels[RANKS_SECTION[0]] = [
            {"type": "line", "x": "step", "y": [f"rank{r}/{p}_ms" for r in range(ranks)]} for p in ("step", "backward")
        ]
    blocks: list[dict[str, Any]] = [
        {"type": "h1", "text": f"Sweep {sweep}"},
        {"type": "p", "text": "Per-step phase times of the sweep's runs, recorded by perfsweep."},
        *({"type": "p", "text": line} for line in said),
    ]
    for heading, grid in panels.items():
        blocks += [{"type": "h2", "text": heading}, {"type": "panel_grid", "runset": runs, "panels": grid}]
    return {
        "project": project,
        "entity": entity,
        "title": f"perfsweep: {sweep}",
        "description": f"Per-step phase times of the runs of sweep {sweep}, recorded by perfsweep.",
        "blocks": blocks,
    }


def outline(content: dict[str, Any]) -> str:
    """The W&B Report `content` describes, as lines: sections, panels, their metrics, the runs' filter."""
    entity = content["entity"] or "<the key's default entity>"
    where = f"{entity}/{content['project']}"
    lines = [f"W&B Report {content['title']!r} in {where}"]
    for block in content["blocks"]:
        if block["type"] in ("h1", "h2"):
            lines.append(f"{'#' if block['type'] == 'h1' else '##'} {block['text']}")
        elif block["type"] == "p":
            lines.append(block["text"])
        elif block["type"] == "panel_grid":
            lines.append(f"  runs: {block['runset']['filters']}")
            for panel in block["panels"]:
                if panel["type"] == "table":
                    lines.append(f"  table panel: {panel['table']} (a wandb.Table the runs shown logged)")
                elif panel["type"] == "bar":
                    lines.append(f"  bar chart: {', '.join(panel['metrics'])}")
                else:
                    lines.append(f"  line chart: {', '.join(panel['y'])} over {panel['x']}")
    return "\n".join(lines)


def build_wandb_report(content: dict[str, Any]):
    """The W&B Report `content` describes, as wandb_workspaces objects, built offline: nothing is sent.

    Its entity must be known.
    analysis.views.wandb_online.resolve_entity asks the server for the key's default.
    """
    import wandb_workspaces.reports.v2 as wr

    if not content["entity"]:
        raise ValueError("a W&B Report needs an entity: set tracker.entity=NAME (your W&B user or team)")

    def panel(spec: dict[str, Any]):
        if spec["type"] == "table":
            return wr.WeavePanelSummaryTable(table_name=spec["table"])
        if spec["type"] == "bar":
            return wr.BarPlot(title="median ms", metrics=spec["metrics"])
        return wr.LinePlot(x=spec["x"], y=spec["y"])

    def block(spec: dict[str, Any]):
        if spec["type"] == "h1":
            return wr.H1(spec["text"])
        if spec["type"] == "h2":
            return wr.H2(spec["text"])
        if spec["type"] == "p":
            return wr.P(spec["text"])
        return wr.PanelGrid(runsets=[wr.Runset(**spec["runset"])], panels=[panel(p) for p in spec["panels"]])

    return wr.Report(
        project=content["project"],
        entity=content["entity"],
        title=content["title"],
        description=content["description"],
        blocks=[block(b) for b in content["blocks"]],
    )


def save_wandb_report(content: dict[str, Any]) -> str:
    """Create the W&B Report `content` describes; returns its URL. Needs a W&B login and a reachable server."""
    report = build_wandb_report(content)
    report.save()
    return report.url
