"""compare's and history's verdicts as a comment for a pull request: a headline, counts, what changed.

    perfsweep compare A B --format markdown [--only-changes]
    perfsweep history RUNS... --format markdown [--only-changes]

The headline names the largest flagged change of the step; else it says the steps stayed within the noise, or
that some were undetermined; and whether a final loss changed.
It names first the configurations that compiled in A and ran eagerly in B.
Then the counts of the compared configurations, by what their step did:

- slower, faster: flagged (REGRESSION, improvement, and their possible kinds), as compare's gate flags them;
- same: not flagged, and the step's interval lies within the threshold of 1.00x;
- undetermined: neither; more runs on each side narrow the interval.
  One whose interval reaches a slowdown past the threshold is flagged UNDETERMINED.

A table of the configurations flagged follows, with A's and B's step, B's speed-up and its interval, and the flag.
A slower one whose sweeps both ran with explain=true lists its three largest operator differences below it.
The commands that measure each of them again as B ran it follow, folded, with the commit B's code was at.
The other configurations are folded below them.
Then come what the sweeps differ in (settings, code, machines, hosts), the losses that changed, and the
configurations without a match.
The command's exit status comes last (`gate`).
Where no configuration matched, the comment says so, with what parts the sweeps.

history's comment heads with its first confirmed regression, else its first possible one, else says there is none.
It counts the configurations regressed, possibly regressed and not flagged, tables the flagged ones' points, and
folds the others'.
"""

import math

from perfsweep.analysis.render import View, figure, markdown
from perfsweep.analysis.statistics.speedup import percent
from perfsweep.analysis.statistics.verdict import SLOWER, UNDETERMINED, reaches
from perfsweep.analysis.views.compare import (
    FAILED_IN_B,
    MACHINE_MOVED,
    MOVED_TOGETHER,
    NOT_COMPILED_IN_B,
    NOT_DONE,
    SHARED_HOST,
    UNMATCHED,
    Line,
    counted_kinds,
    kind,
    kinds,
    possible,
    unconfirmed,
    undetermined_way,
)
from perfsweep.analysis.views.history import Series
from perfsweep.records.redact import redact_text

COLUMNS = ("configuration", "A ms", "B ms", "B speed-up [95%]", "flag")


def changed(view: View) -> bool:
    """Whether the comparison flagged anything: a change of the step or a phase, a loss, a configuration unmatched.

    A line left UNDETERMINED is no change.
    It comes with nothing changed too.
    SHARED HOST, MACHINE MOVED and MOVED TOGETHER say what flagged lines may show: with no change flagged, they
    qualify none.
    Runs not done in compared configurations are no change either (a launch's budget left them), but B's failed ones.
    """
    qualifiers = (SHARED_HOST, MACHINE_MOVED, MOVED_TOGETHER)
    standing = [
        flag
        for flag in view.flags
        if not flag.startswith(qualifiers) and (NOT_DONE not in flag or flag.startswith(FAILED_IN_B))
    ]
    return bool(standing) or any(line.flag and not unconfirmed(line) for line in view.items)


def comment(view: View, threshold: float) -> str:
    """The comparison (compare.compare's view) as a pull request's comment, in GitHub's markdown."""
    steps = [line for line in view.items if line.phase == "step"]
    if not steps:
        return "\n\n".join(["### perfsweep: nothing compared", *_quoted([*view.above, view.empty, *view.flags])]) + "\n"
    counts = kinds(steps, threshold)
    moved = sorted((line for line in steps if line.flag), key=_largest)
    losses = any(line.flag for line in view.items if line.phase == "final loss")
    shared = any(flag.startswith(SHARED_HOST) for flag in view.flags)
    eager = tuple(line.configuration for line in view.items if line.flag == NOT_COMPILED_IN_B)
    unmatched = [flag.split(": ")[1] for flag in view.flags if flag.startswith(f"{UNMATCHED}: ")]
    parts = [
        f"### perfsweep: {headline(moved, counts[UNDETERMINED], losses, shared, eager)}"
        + "".join(f"; {said} ({UNMATCHED})" for said in unmatched),
        counted_kinds(steps, threshold, lambda said: f"**{said}**"),
    ]
    if moved:
        parts.append(_table(moved))
        parts += [_operators(line) for line in moved if line.operators and kind(line, threshold) == SLOWER]
        parts += [_commands(moved)] if any(line.repro for line in moved) else []
    rest = [line for line in steps if not line.flag]
    if rest:
        folded = f"<summary>{len(rest)} without a flagged change</summary>"
        parts.append(f"<details>{folded}\n\n{_table(rest)}\n\n</details>")
    others = [line for line in view.items if line.phase != "step" and line.flag]
    said = [*view.above, *(f"{line.configuration} {line.phase}: {line.flag}" for line in others)]
    parts += _quoted([redact_text(line) for line in said])  # the sweeps' folders, with home as ~
    parts += _quoted(view.flags)
    return "\n\n".join(parts) + "\n"


def gate(status: int, command: str) -> str:
    """The comment's last line: the command's exit status, which a CI job acts on, so a reader need not see its
    log."""
    return f"exit status {status} (`perfsweep {command} --help` says what each status flags)"


def _largest(line: Line) -> tuple[int, float]:
    """The order of flagged lines.

    Confirmed changes come first, by size; then possible ones, by size.
    Then come the undetermined, by their interval's slow end.
    """
    if unconfirmed(line):
        return 2, line.speedup.low if math.isfinite(line.speedup.low) else math.inf
    return (1 if possible(line) else 0), -abs(math.log(line.speedup.value))


def headline(
    moved: list[Line], undetermined: int = 0, losses: bool = False, shared: bool = False, eager: tuple[str, ...] = ()
) -> str:
    """The largest flagged change of the step; else whether the step stayed within the noise or went undecided.

    A final loss that changed comes first: it fails the gate.
    Then come the configurations that compiled in A and ran eagerly in B (`eager`): they fail it too.

    `shared`: one sweep's host was shared and the other's not (compare's SHARED HOST).
    """
    if moved:
        line = moved[0]
        value = line.speedup.value
        way = f"{1 / value:.2f}x slower" if value < 1 else f"{value:.2f}x faster"
        said = f"{way} in {line.configuration} ({line.flag.replace(' (', ', ').removesuffix(')')})"
        if unconfirmed(line):
            reach = reaches(line.speedup) if math.isfinite(line.speedup.low) else "no time to compare"
            said = (
                f"a slowdown not ruled out in {line.configuration}: {reach} (B's speed-up {line.speedup}), "
                f"undetermined ({undetermined_way(shared)})"
            )
    elif undetermined:
        way = f"runs with their hosts to themselves narrow them: {SHARED_HOST}" if shared else "more runs narrow them"
        said = f"no change decided: {undetermined} undetermined ({way})"
    else:
        said = "no change beyond noise"
    uncompiled = f"not compiled in B: {', '.join(eager)}; " if eager else ""
    return ("a final loss changed; " if losses else "") + uncompiled + said  # each fails the gate, whatever the times


def _table(lines: list[Line]) -> str:
    rows = [[line.configuration, figure(line.a_ms), figure(line.b_ms), str(line.speedup), line.flag] for line in lines]
    return markdown(list(COLUMNS), rows)


def _operators(line: Line) -> str:
    """A slower configuration's largest operator differences, A to B (explain=true's records)."""
    listed = "\n".join(f"- `{operator}`" for operator in line.operators)
    return f"{line.configuration}, its largest operator differences (`perfsweep explain`):\n\n{listed}"


def _commands(lines: list[Line]) -> str:
    """Each line's command that measures B's configuration again, redacted (records/redact.py), folded."""
    shown = [(line.configuration, line.repro.redacted()) for line in lines if line.repro]
    block = "\n".join(f"# {name}: {repro.caveat()}\n{repro.command}" for name, repro in shown)
    summary = f"<summary>the command{'s' * (len(shown) > 1)} that measure{'s' * (len(shown) == 1)} it again (B's)"
    return f"<details>{summary}</summary>\n\n```bash\n{block}\n```\n\n</details>"


def _quoted(lines: list[str]) -> list[str]:
    """Lines of compare's, each a paragraph of its own, with markdown's table bars escaped."""
    return [line.replace("|", r"\|") for line in lines if line]


def history_comment(made: list[Series], shown: list[View], gaps: list[str]) -> str:
    """history's series and their views as a pull request's comment, in GitHub's markdown."""
    flagged = [(series, view) for series, view in zip(made, shown, strict=True) if series.flag]
    confirmed = [series for series, _ in flagged if series.flag.startswith("REGRESSION")]
    first = (confirmed or [series for series, _ in flagged] or [None])[0]
    headline = f"{first.label}: {first.flag}" if first else "no regression"
    lacking = [gap.removeprefix(f"{UNMATCHED}: ") for gap in gaps if gap.startswith(f"{UNMATCHED}: ")]
    headline += "".join(f"; {gap.partition(' not in it')[0]} not in it ({UNMATCHED})" for gap in lacking)
    threshold = made[0].threshold if made else None  # every series was judged by one (series_of)
    counts = (
        f"**{len(confirmed)} regressed**, {len(flagged) - len(confirmed)} possibly, {len(made) - len(flagged)} not "
        f"flagged, of {len(made)} configurations"
    ) + (f" (flagged: slower by more than {threshold:.3g}, {percent(threshold)})" if threshold is not None else "")
    parts = [f"### perfsweep history: {headline}", counts]
    parts += [f"#### {view.title}\n\n{_points(view)}" for _, view in flagged]
    rest = [view for series, view in zip(made, shown, strict=True) if not series.flag]
    if rest:
        tables = "\n\n".join(f"#### {view.title}\n\n{_points(view)}" for view in rest)
        parts.append(f"<details><summary>{len(rest)} not flagged</summary>\n\n{tables}\n\n</details>")
    parts += _quoted(gaps)
    return "\n\n".join(parts) + "\n"


def _points(view: View) -> str:
    return "\n\n".join([*_quoted(view.above), markdown(view.header, view.rows)])
