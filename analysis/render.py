"""Views of a sweep as data, and the one renderer that turns a view into terminal text, CSV or HTML.

A view holds:

- a title, and lines above its table;
- the table's columns: a header, and how to make each row's cell from one item;
- its items: runs, configurations or comparisons;
- lines below: notes that explain it, and flags that warn.

Every command and the HTML report render the same views.
So the report shows what the terminal shows.
"""

import csv
import dataclasses
import functools
import html
import io
import re
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Any], str]  # item -> the text of its cell


@dataclasses.dataclass
class View:
    title: str  # the report's heading for it
    above: list[str]  # what every row shares, where the figures come from
    columns: list[Column]
    items: list[Any]  # one row each
    notes: list[str] = dataclasses.field(default_factory=list)  # below the table: how to read it
    flags: list[str] = dataclasses.field(default_factory=list)  # below the notes: FAILED, NOISY, DRIFT...
    empty: str = ""  # said instead of the table when it has no rows

    @property
    def header(self) -> list[str]:
        return [c.header for c in self.columns]

    @functools.cached_property
    def rows(self) -> list[list[str]]:
        return [[str(c.cell(item)) for c in self.columns] for item in self.items]


def figure(value: float | None) -> str:
    """A time or rate to three significant digits, or '-' where there is none."""
    return f"{value:.3g}" if value is not None else "-"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def text(view: View) -> str:
    """The view for a terminal: lines above, the table as markdown, notes, flags."""
    table = [markdown(view.header, view.rows)] if view.rows else ([view.empty] if view.empty else [])
    return "\n".join([*view.above, *table, *view.notes, *view.flags])


def as_csv(view: View) -> str:
    out = io.StringIO()
    csv.writer(out).writerows([view.header, *view.rows])
    return out.getvalue()


# A figure and its interval (0.938x [0.921, 0.954]): the report keeps them together.
INTERVAL = re.compile(r"(?P<figure>\S+ )?(?P<interval>\[[^\[\]]*\])")


def html_cell(text: str) -> str:
    """A cell's text as HTML, each figure and its interval in a span of class `interval`, the interval unbroken.

    A page that shows the span as an inline block (the report) wraps `0.938x [0.921, 0.954] slower` in a narrow
    column before its word first, then between the figure and its interval, never inside the interval.
    """

    def kept(found: re.Match) -> str:
        return f"<span class=interval>{found['figure'] or ''}{found['interval'].replace(' ', '&nbsp;')}</span>"

    return INTERVAL.sub(kept, html.escape(text))


def html_section(view: View) -> str:
    """The view as a section of an HTML page."""
    esc = html.escape
    parts = [f"<h2>{esc(view.title)}</h2>", *(f"<p class=context>{esc(line)}</p>" for line in view.above)]
    if view.rows:
        head = "".join(f"<th>{esc(h)}</th>" for h in view.header)
        body = "".join("<tr>" + "".join(f"<td>{html_cell(c)}</td>" for c in row) + "</tr>" for row in view.rows)
        parts.append(f"<table><tr>{head}</tr>{body}</table>")
    elif view.empty:
        parts.append(f"<p>{esc(view.empty)}</p>")
    parts += [f"<p class=context>{esc(line)}</p>" for line in view.notes]
    parts += [f"<p class=flag>{esc(line)}</p>" for line in view.flags]
    return "".join(parts)
