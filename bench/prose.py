"""How long perfsweep's sentences are, in its docstrings and its Markdown.

    python -m perfsweep.bench.prose [--files N] [PATH ...]

Docstrings are those of modules, classes and functions (ast), outside tests/ and examples/.
Markdown is README.md and docs/*.md, without code blocks, tables and headings.
Indented lines and Args:/Returns: sections are left out: they are code or lists.
A sentence ends at ". ", "? ", "! " or ": " before a capital or a backtick, and at a blank line.
A list item is a sentence of its own.
Words are what whitespace separates.
It prints each kind's sentences and their median and 90th percentile of words.
--files N also lists the N files with the longest median sentence.
"""

import ast
import re
import statistics
from pathlib import Path

from perfsweep.bench import command

ROOT = Path(__file__).resolve().parent.parent
SKIP = {"tests", "examples", "results", ".venv", ".git", "build", "runs", "outputs", "multirun"}
SECTIONS = re.compile(r"^\s*(Args|Arguments|Returns|Raises|Yields|Attributes|Example|Examples):\s*$")
END = re.compile(r"(?<=[.?!])\s+|(?<=:)\s+(?=[A-Z`])")
ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")


def paragraphs(text: str, markdown: bool) -> list[str]:
    """The prose of `text`, one string per paragraph or list item."""
    found, current, fenced, skipping = [], [], False, False
    for line in text.splitlines():
        stripped = line.strip()
        if markdown and stripped.startswith("```"):
            fenced = not fenced
            continue
        if SECTIONS.match(line):
            skipping = True
        code = fenced or (markdown and (stripped.startswith(("|", "#")))) or line.startswith("    ")
        if not stripped or code or skipping or ITEM.match(line):
            found.append(" ".join(current))
            current = []
            if not stripped:
                skipping = False
            if ITEM.match(line) and not code and not skipping:
                current = [ITEM.sub("", line).strip()]
            continue
        current.append(stripped)
    found.append(" ".join(current))
    return [p for p in found if p]


def sentences(text: str, markdown: bool = False) -> list[str]:
    return [s for p in paragraphs(text, markdown) for s in END.split(p) if s.strip()]


def docstrings(path: Path) -> list[str]:
    nodes = ast.walk(ast.parse(path.read_text()))
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [doc for node in nodes if isinstance(node, kinds) and (doc := ast.get_docstring(node))]


def python_files(paths: list[Path]) -> list[Path]:
    files = [f for p in paths for f in ([p] if p.is_file() else p.rglob("*.py"))]
    return sorted(f for f in files if f.suffix == ".py" and not SKIP & set(f.relative_to(ROOT).parts))


def words(found: list[str]) -> list[int]:
    return [len(s.split()) for s in found]


def line(kind: str, counts: list[int]) -> str:
    if not counts:
        return f"{kind}: no sentences"
    p90 = statistics.quantiles(counts, n=10)[-1] if len(counts) > 1 else counts[0]
    return f"{kind}: {len(counts)} sentences, median {statistics.median(counts):g} words, 90th percentile {p90:g}"


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("prose", __doc__)
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the whole package)")
    parser.add_argument("--files", type=int, default=0, help="list the N files with the longest median sentence")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or [ROOT]
    if args.dry_run:
        command.would(f"the sentences of {len(python_files(paths))} Python files' docstrings")
        return
    per_file = {f: words([s for doc in docstrings(f) for s in sentences(doc)]) for f in python_files(paths)}
    print(line("docstrings", [n for counts in per_file.values() for n in counts]))
    if not args.paths:
        pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        print(line("markdown", [n for page in pages for n in words(sentences(page.read_text(), markdown=True))]))
    ranked = sorted(((statistics.median(c), f) for f, c in per_file.items() if c), reverse=True)
    for median, file in ranked[: args.files]:
        print(f"  {median:5g}  {file.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
