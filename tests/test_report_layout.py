"""The HTML report as its reader sees it: laid out by Chromium in a 1400 px wide window, its tables fit the page and
every cell shows all of its text; the plots' labels wrap beside axes of a set width, and the legend covers no bar."""

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.groups import configurations, labels, speedups
from perfsweep.analysis.views import plots
from tests import synthetic
from tests.helpers import launch_here, write_run

PAGE_WIDTH = 1400  # px: the window's width, its vertical scrollbar included
# Chromium as it runs here: headless, as root, with no network to reach and nothing to sync
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Appended to the page: what the browser laid out, written into the page, which --dump-dom prints.
MEASURE = """<script>
const body = document.body, style = getComputedStyle(body);
const column = body.getBoundingClientRect().right - parseFloat(style.paddingRight);
const tables = [...document.querySelectorAll("table")].map(table => ({
  header: [...table.rows[0].cells].map(cell => cell.textContent),
  right: table.getBoundingClientRect().right,
  font_px: parseFloat(getComputedStyle(table.rows[1].cells[0]).fontSize),
  cut: [...table.querySelectorAll("td, th")].filter(cell => cell.scrollWidth > cell.clientWidth)
    .map(cell => cell.textContent),
}));
const measured = document.createElement("pre");
measured.id = "measured";
measured.textContent = JSON.stringify({
  window: document.documentElement.clientWidth, page: document.documentElement.scrollWidth, column, tables,
});
body.appendChild(measured);
</script>"""


def chromium() -> str:
    """Debian's chromium; the test is skipped without it, except in CI, where scripts/install test installs it."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("no chromium in CI: `bash scripts/install test` installs Debian's chromium")
    pytest.skip("needs Debian's chromium to lay the report out (`bash scripts/install test` installs it)")


def laid_out(page: str, tmp_path) -> dict:
    """What Chromium lays out of the HTML `page` in a window PAGE_WIDTH px wide."""
    measured = tmp_path / "measured.html"
    measured.write_text(page.replace("</body>", f"{MEASURE}</body>"))
    window = f"--window-size={PAGE_WIDTH},1000"
    command = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}", window, "--dump-dom"]
    dom = subprocess.run([*command, measured.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="measured">([^<]*)</pre>', dom.stdout)
    assert found, f"chromium laid out nothing (exit {dom.returncode}): {dom.stderr[-2000:]}"
    return json.loads(html.unescape(found[1]))


@pytest.mark.slow
def test_the_reports_tables_fit_a_1400_px_page_in_chromium(paired_sweep, tmp_path):
    """The default sweep's shape, at a tiny size: two axes, each compared with its baseline, two runs a
    configuration. Its table has a speed-up column per axis, beside the output type."""
    sweep = Path(shutil.copytree(paired_sweep, tmp_path / "default"))  # the report is written into the sweep folder
    shown = launch_here("report", str(sweep))
    assert shown.returncode == 0, shown.stderr
    layout = laid_out((sweep / records.REPORT).read_text(), tmp_path)
    main = layout["tables"][0]
    assert [h for h in main["header"] if h.startswith("vs ")] == ["vs contiguous", "vs tensor"]
    assert "output type" in main["header"]
    assert layout["page"] <= layout["window"], f"the page scrolls sideways: {layout['page']} px in {PAGE_WIDTH}"
    # a run's noise decides how long its cells are: a flag cell that cannot break at a space must still fit
    unbroken = (
        "RUNS\u00a0DISAGREE\u00a01.234x;\u00a0NOISY\u00a02/2;\u00a0NOT\u00a0STEADY\u00a01/2;\u00a0STALLED\u00a01/2"
    )
    crowded = laid_out((sweep / records.REPORT).read_text().replace("</td></tr>", f"{unbroken}</td></tr>", 1), tmp_path)
    for table in [*layout["tables"], crowded["tables"][0]]:
        assert table["right"] <= layout["column"] + 0.5, f"a table sticks out of the text's column: {table}"
        assert table["cut"] == [], "every cell shows all of its text"
        assert table["font_px"] >= 12, "a table's text stays readable"


def test_plot_labels_wrap_beside_axes_of_a_set_width_and_the_legend_covers_no_bar(tmp_path):
    sweep = tmp_path / "default"
    word = "examples.imagelib.tensors.MetaImageWithProvenanceAndALongName"  # one word: it cannot wrap
    for memory_format in ("contiguous", "channels_last"):
        for n, input_type in enumerate(("tensor", "a metadata-keeping subclass with a long descriptive name", word)):
            write_run(sweep, f"{memory_format}-{n}", input_type, memory_format, 400 - 30 * n)
    configs = configurations(records.load_sweep(sweep))
    fig = plots.fit(plots.phases_figure(configs, labels(configs)))
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    axes = ax.get_window_extent(renderer)
    assert axes.width / fig.dpi >= plots.AXES_WIDTH - 0.01, "long labels do not squeeze the axes"
    for label in ax.get_yticklabels():
        box = label.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= axes.x0, f"{label.get_text()!r} lies beside the axes, within the figure"
        lines = label.get_text().split("\n")
        assert all(len(line) <= plots.LABEL_CHARS or " " not in line for line in lines), "labels wrap at spaces"
    assert any(word in label.get_text() for label in ax.get_yticklabels())
    legend = ax.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(axes), "the legend lies outside the axes: it covers no bar"
    assert legend.y1 <= fig.bbox.y1 and legend.x1 <= fig.bbox.x1, "the legend lies within the figure"


def test_each_plots_title_says_what_ran_and_lies_within_the_figure(tmp_path):
    """A plot is shared on its own: its numbers need their settings, machine and date, as the line above the table
    gives them, and its title must not run off the image."""
    rng = np.random.default_rng(0)
    runs = synthetic.sweep(synthetic.grid(formats=("contiguous", "channels_last")), 3, synthetic.Noise(), rng)
    configs = configurations(runs)
    figures = [
        plots.fit(plots.phases_figure(configs, labels(configs))),
        plots.fit(plots.speedups_figure(speedups(runs, 0.95), labels(configs), 0.95, 0.05)),
    ]
    (mark,) = figures[0].axes[0].get_lines()
    order = sorted(configs, key=lambda c: c.median("step"))
    assert list(mark.get_xdata()) == [c.median("step") for c in order], "the step's own median beside its phases"
    for fig in figures:
        title = fig._suptitle
        said = "\nCPU synthetic (? threads) | torch synthetic | timer ? | runs one at a time | on 2026-01-01"
        assert title.get_text().endswith(said), title.get_text()
        box = title.get_window_extent(fig.canvas.get_renderer())
        assert 0 <= box.x0 and box.x1 <= fig.get_figwidth() * fig.dpi, "the title lies within the figure"
