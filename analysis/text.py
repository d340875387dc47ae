"""Plain-text tables for the terminal."""


def markdown(header: list[str], table: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, table)])
