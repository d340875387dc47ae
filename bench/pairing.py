"""Does sharing a process bias a comparison? Paired runs against runs apart, side by side.

    python -m perfsweep.bench.pairing [--repeats 6] [OVERRIDE ...]

It launches the default sweep (narrowed or widened by the overrides) twice, as a user does, W&B off:
- paired: pairing=auto, each round of a comparison's sides in one process;
- apart: pairing=process, each run in a process of its own.
The two launches run one after the other, in a random order.

It prints each comparison's speed-up from each launch, with its 95% interval.
`paired/apart` is their ratio, with an interval from both launches' standard errors.
Where that interval holds 1, the two agree.
It then prints each side's step time, paired over apart (Welch's interval across runs).
A side slower when paired is one that the other side's state slows.
"""

import math
import random
import tempfile
from pathlib import Path

from perfsweep import records
from perfsweep.analysis.groups import configurations, labels, speedups
from perfsweep.analysis.statistics.speedup import Speedup, figures, speedup, t_interval
from perfsweep.bench import command

MODES = {"paired": "pairing=auto", "apart": "pairing=process"}


def ratio_of(paired: Speedup, apart: Speedup) -> str:
    """paired / apart, with the t-interval from both standard errors (the smaller degrees of freedom)."""
    if not (paired.replicated and apart.replicated and math.isfinite(paired.se) and math.isfinite(apart.se)):
        return "unknown: a side is not replicated"
    diff = math.log(paired.value) - math.log(apart.value)
    low, high, _ = t_interval(diff, math.hypot(paired.se, apart.se), min(paired.df, apart.df), 0.95)
    value, low_s, high_s = figures(math.exp(diff), low, high, apart=1.0)
    return f"{value}x [{low_s}, {high_s}] {'agree' if low <= 1 <= high else 'DIFFER'}"


def compared(runs: dict[str, list[records.RunRecord]]) -> list[tuple[str, ...]]:
    """A row per comparison: its speed-up paired, apart, and their ratio; `runs` are each mode's done runs."""
    found = {mode: speedups(done) for mode, done in runs.items()}
    names = {mode: labels(configurations(done)) for mode, done in runs.items()}
    apart = {(names["apart"][v.config.key], names["apart"][v.base.key]): s for v, s in found["apart"]}
    rows = []
    for versus, paired in found["paired"]:
        key = (names["paired"][versus.config.key], names["paired"][versus.base.key])
        if (other := apart.get(key)) is not None:
            rows.append((f"{key[0]} vs {key[1]}", str(paired), str(other), ratio_of(paired, other)))
    return rows


def sides(runs: dict[str, list[records.RunRecord]]) -> list[tuple[str, ...]]:
    """A row per configuration: its step time paired over apart (above 1: slower paired)."""
    configs = {mode: configurations(done) for mode, done in runs.items()}
    names = labels(configs["paired"])
    apart = {labels(configs["apart"])[c.key]: c for c in configs["apart"]}
    rows = []
    for config in configs["paired"]:
        if (other := apart.get(names[config.key])) is not None:
            rows.append((names[config.key], str(speedup(other.sample(), config.sample()))))  # paired / apart time
    return rows


def aligned(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("pairing", __doc__)
    parser.add_argument("--repeats", type=int, default=6, help="runs of each configuration in each launch")
    parser.add_argument("overrides", nargs="*", help="overrides of the default sweep (model.image_size=64...)")
    args = parser.parse_args(argv)
    shared = [*args.overrides, f"repeats={args.repeats}", "tracker.mode=disabled"]
    planned = {mode: len(command.checked([*shared, setting]).runs) for mode, setting in MODES.items()}
    order = random.sample(list(MODES), len(MODES))
    if args.dry_run:
        command.would(f"the default sweep's {planned['paired']} runs paired and apart, in the order {', '.join(order)}")
        return
    with tempfile.TemporaryDirectory(prefix="perfsweep-pairing-") as tmp:
        walls = {}
        for mode in order:
            _, walls[mode] = command.launched([*shared, MODES[mode]], Path(tmp), mode)
        sweeps = {mode: Path(tmp) / mode for mode in MODES}
        _, machine = command.machine(sweeps["paired"])
        runs = {
            mode: [r for r in records.load_sweep(sweep) if r.state == records.DONE] for mode, sweep in sweeps.items()
        }
        overrides = f" {' '.join(args.overrides)}" if args.overrides else ""
        print(
            f"pairing bias: {machine['device']}, torch {machine.get('torch')}, the default sweep{overrides} at "
            f"repeats={args.repeats}; launched {', then '.join(order)} "
            f"({', '.join(f'{mode} {walls[mode]:.0f} s' for mode in order)})"
        )
        print(aligned([("comparison", "paired", "apart", "paired/apart"), *compared(runs)]))
        print(aligned([("step time", "paired / apart [95% CI across runs]"), *sides(runs)]))


if __name__ == "__main__":
    main()
