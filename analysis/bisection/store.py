"""A bisect's record, bisect.json in its folder: the search as it stands, written as each point is placed.

`table` on the folder reads it back.
"""

import dataclasses
import math
from pathlib import Path

from perfsweep import records
from perfsweep.analysis.bisection.search import BisectSearch, Point
from perfsweep.analysis.bisection.view import outcome

RECORD = records.BISECT  # in the bisect's folder, beside its points' sweep folders


def record(search: BisectSearch, overrides: list[str], source: list[str]) -> dict:
    """What bisect.json holds: the search, the overrides of its points, and the folders its prior came from."""
    found = search.first_bad()
    return {
        "package": search.package,
        "from": source,
        "looks": search.looks,
        "fixed": search.fixed,
        "stopped": search.stopped,
        "good": search.good,
        "bad": search.bad,
        "overrides": overrides,
        "metric": search.metric,
        "level": search.level,
        "boundary": search.boundary,
        "releases": search.releases,
        **({"subjects": search.subjects} if search.subjects else {}),
        "points": [dataclasses.asdict(search.points[v]) for v in search.releases if v in search.points],
        "first_bad": found[1] if found else None,
        "last_good": found[0] if found else None,
        "outcome": outcome(search),
    }


def save(search: BisectSearch, folder: Path, overrides: list[str], source: list[str]) -> None:
    records.write_json(folder / RECORD, record(search, overrides, source))


def load(folder: Path) -> BisectSearch | None:
    """The search a bisect's folder records (None where the folder is not a bisect's)."""
    if not (folder / RECORD).is_file():
        return None
    found = records.read_json(folder / RECORD)
    search = BisectSearch(found["package"], found["releases"], found["metric"], found["level"])
    search.subjects = found.get("subjects", {})
    search.looks, search.fixed = found["looks"], found.get("fixed", False)
    search.stopped = found.get("stopped", "")
    for fields in found["points"]:  # JSON has no NaN: a figure not measured was written as null
        search.points[fields["version"]] = Point(**{k: math.nan if v is None else v for k, v in fields.items()})
    return search
