"""Counts as words: 1 run, 2 runs.

Every stage prints counts, so this sits at the floor with the records.
"""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun in its number: counted(1, "run") is "1 run"; `plural` where it is not noun + "s"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def listed(items: list[str], most: int = 5) -> str:
    """The first `most` items, comma-separated, and how many more there are."""
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more
