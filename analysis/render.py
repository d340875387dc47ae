"""Views of a sweep as data, and the one renderer that turns a view into terminal text, CSV, JSON, LaTeX or HTML.

A view holds:

- a title, and lines above its table;
- the table's columns: a header, and how to make each row's cell from one item, as text and as data;
- its items: runs, configurations or comparisons;
- lines below: notes that explain it, and flags that warn;
- what every row shares, as fields its data end with (`shared`).

Every command and the HTML report render the same views.
So the report shows what the terminal shows.
CSV and JSON give the data: numbers as numbers, a figure's interval and word in columns of their own.
"""

import csv
import dataclasses
import functools
import html
import io
import json
import math
import numbers
import re
import unicodedata
from collections.abc import Callable
from typing import Any

FORMATS = ("markdown", "latex", "csv", "json")  # what `render` writes; markdown is the terminal's


@dataclasses.dataclass(frozen=True)
class Column:
    """A column of a view's table.

    As data, a column is one value an item, or a record of `parts`, each part a column of its own.
    A part's column is headed by the column's header and the part's name: `vs tensor low`.
    The part named "" is headed by the header alone.
    """

    header: str
    cell: Callable[[Any], str]  # item -> the text of its cell
    value: Callable[[Any], Any] | None = None  # item -> a number or text, None where unknown; a dict by part
    parts: tuple[str, ...] = ()

    @property
    def fields(self) -> list[str]:
        return [f"{self.header} {part}".rstrip() for part in self.parts] or [self.header]

    def data(self, item: Any) -> list[Any]:
        """The item's values in this column's fields; its cell's text where the column gives no value."""
        if self.value is None:
            return [str(self.cell(item))]
        found = self.value(item)
        values = [found.get(part) for part in self.parts] if self.parts else [found]
        return [plain(v) for v in values]


def plain(value: Any) -> Any:
    """A value as CSV and JSON write it: a number as Python's own (numpy's too), one that is not finite as None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(value) if math.isfinite(value) else None


@dataclasses.dataclass
class View:
    title: str  # the report's heading for it
    above: list[str]  # what every row shares, where the figures come from
    columns: list[Column]
    items: list[Any]  # one row each
    notes: list[str] = dataclasses.field(default_factory=list)  # below the table: how to read it
    flags: list[str] = dataclasses.field(default_factory=list)  # below the notes: FAILED, NOISY, DRIFT...
    empty: str = ""  # said instead of the table when it has no rows
    shared: dict[str, str] = dataclasses.field(default_factory=dict)  # what every row shares, as data's fields

    @property
    def header(self) -> list[str]:
        return [c.header for c in self.columns]

    @functools.cached_property
    def rows(self) -> list[list[str]]:
        return [[str(c.cell(item)) for c in self.columns] for item in self.items]

    @property
    def fields(self) -> list[str]:
        """The header of its data: a column for each value, and for each part of a record.

        What every row shares comes last.
        """
        return [field for c in self.columns for field in c.fields] + list(self.shared)

    @functools.cached_property
    def records(self) -> list[list[Any]]:
        """Its rows as data, in `fields`' order."""
        shared = list(self.shared.values())
        return [[value for c in self.columns for value in c.data(item)] + shared for item in self.items]


def figure(value: float | None) -> str:
    """A time or rate to three significant digits, or '-' where there is none.

    From 1000 to a million it is a whole number (1650, not 1.65e+03): a second's step reads as one.
    """
    if value is None:
        return "-"
    return f"{value:.0f}" if 999.5 <= abs(value) < 999_999.5 else f"{value:.3g}"


def writable(value: str, form: str, where: str) -> str:
    """The value, where `form` can hold it; else an error that names it and where it is.

    Raises:
        ValueError: the value holds a control character (a line break would split a row).
    """
    bad = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise ValueError(f"cannot write {value!r} ({where}) as {form}: it holds the control character {bad!r}")
    return value


def visible(value: str) -> str:
    """The value with each control character as its escape (`\\x07`), which a terminal shows as written."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) == "Cc" else c for c in value)


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table; a bar in a cell is escaped, and a control character shows as its escape."""

    def escaped(cells: list[str]) -> list[str]:
        return [visible(c).replace("|", r"\|") for c in cells]

    header, rows = escaped(header), [escaped(row) for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def text(view: View) -> str:
    """The view for a terminal: lines above, the table as markdown, notes, flags."""
    table = [markdown(view.header, view.rows)] if view.rows else ([view.empty] if view.empty else [])
    return "\n".join([*view.above, *table, *view.notes, *view.flags])


def as_csv(view: View) -> str:
    """The view's table as data: a figure, its interval's bounds and its word in columns of their own.

    An unknown is an empty cell.
    """
    out = io.StringIO()
    csv.writer(out).writerows([view.fields, *view.records])  # the csv module writes None as an empty cell
    return out.getvalue()


def as_json(view: View) -> str:
    """The view as one JSON object: its lines, and its rows as objects by field; an unknown is null."""
    rows = [dict(zip(view.fields, row, strict=True)) for row in view.records]
    shown = {"title": view.title, "above": view.above, "fields": view.fields, "rows": rows}
    return json.dumps(shown | {"notes": view.notes, "flags": view.flags}, indent=1, allow_nan=False, default=str) + "\n"


# What LaTeX reads as commands, or sets as other glyphs in its default fonts (< > |), as text to set.
LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\u00b1": r"\ensuremath{\pm}",
}


def latex_text(value: str, where: str) -> str:
    """The value as LaTeX text that pdflatex sets as it reads.

    Raises:
        ValueError: a control character, or a character beyond ASCII that LaTeX's default fonts lack.
    """
    writable(value, "LaTeX", where)
    beyond = next((c for c in value if ord(c) > 126 and c not in LATEX), None)
    if beyond is not None:
        raise ValueError(f"cannot write {value!r} ({where}) as LaTeX: {beyond!r} is not in LaTeX's default fonts")
    text = "".join(LATEX.get(c, c) for c in value)
    # A cell that starts a row after \\ must not start with what \\ would read as its own: [ or *.
    return "{}" + text if text.startswith(("[", "*")) else text


def as_latex(view: View) -> str:
    """The view as a LaTeX table that compiles with booktabs: its title the caption, its lines notes below it.

    Columns whose values are all numbers (or unknown) are set to the right.
    """

    def row(cells: list[str], where: str) -> str:
        named = zip(cells, view.header, strict=True)
        return " & ".join(latex_text(c, f"{where}, column {h!r}") for c, h in named) + r" \\"

    parts = [r"\begin{table}", r"\centering", rf"\caption{{{latex_text(view.title, 'the title')}}}"]
    if view.rows:
        numeric = [
            c.value is not None and not c.parts and all(isinstance(c.value(i), int | float | None) for i in view.items)
            for c in view.columns
        ]
        align = "".join("r" if n else "l" for n in numeric)
        parts += [rf"\begin{{tabular}}{{{align}}}", r"\toprule", row(view.header, "the header")]
        parts.append(r"\midrule")
        parts += [row(cells, f"row {n}") for n, cells in enumerate(view.rows, 1)]
        parts += [r"\bottomrule", r"\end{tabular}"]
    elif view.empty:
        parts.append(latex_text(view.empty, "the line said for no rows"))
    if lines := [*view.above, *view.notes, *view.flags]:
        parts.append(r"\par\smallskip\footnotesize")
        parts += [latex_text(line, "a line around the table") + r"\par" for line in lines]
    return "\n".join([*parts, r"\end{table}"]) + "\n"


def render(view: View, form: str) -> str:
    """The view in one of FORMATS, ending in a newline."""
    writers = {"markdown": lambda v: text(v) + "\n", "latex": as_latex, "csv": as_csv, "json": as_json}
    if form not in writers:
        raise ValueError(f"no format {form!r}: one of {', '.join(FORMATS)}")
    return writers[form](view)


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
