"""Whether a run's place in the sweep moved its time.

Which runs' clocks drifted off the sweep's median.
"""

import math
import statistics

import numpy as np

from perfsweep.analysis.groups import Configuration
from perfsweep.analysis.statistics.distributions import spearman
from perfsweep.analysis.statistics.host_flags import differ, seen_in, taken
from perfsweep.records import RunRecord

ORDER_SIGNIFICANCE = 0.01


def _place(run) -> tuple[str, float, int]:
    """Where a run stands in the sweep's order: its start (to the second), its window's end, its round.

    Runs of a second are told apart by when their windows ended, never by their times.
    """
    return run.status.started_at or "", run.summary.window_ended_at or 0.0, int(run.fields.get("replicate") or 0)


def order_effect(configs: list[Configuration]) -> list[str]:
    """A flag where a run's time goes with its place in the sweep.

    Each replicated configuration's runs are taken relative to their own geometric mean.
    These are tested against the order the runs started in (Spearman's test at 1%).
    The flag ends with what the host showed.
    Where the halves differed in others' CPU or steal, it names both; else it says what the whole sweep showed.
    """
    replicated = [c for c in configs if len(c.runs) >= 2]
    placed = sorted(
        ((_place(r), float(np.log(m) - np.mean(np.log(ms))), r) for c in replicated
         for ms in [[r.summary.median("step") for r in c.runs]] for r, m in zip(c.runs, ms, strict=True)),
        key=lambda placed: placed[0],
    )  # fmt: skip
    if len(placed) < 6 or len(replicated) < 2:
        return []
    offsets = np.array([p[1] for p in placed])
    rho, p = spearman(np.arange(len(placed)), offsets)
    if not p < ORDER_SIGNIFICANCE:
        return []
    half = len(offsets) // 2
    moved = math.exp(float(np.median(offsets[half:]) - np.median(offsets[:half]))) - 1
    earlier, later = [entry[2] for entry in placed[:half]], [entry[2] for entry in placed[half:]]
    host = differ(earlier, later, ("earlier half", "later half")) or taken(earlier + later)
    return [
        f"ORDER EFFECT: a run's step time goes with its place in the sweep (Spearman {rho:+.2f} over {len(placed)} "
        f"runs, p={p:.2g}): the later half {moved:+.1%} against the earlier, each run beside its own "
        "configuration's; order=interleaved (the default) spreads such drift over every configuration"
        + (f"; host: {host}" if host else "")
    ]


def drift(runs: list[RunRecord], tolerance: float = 0.1) -> list[str]:
    """Runs whose clock at start or end is off the sweep's median by more than 10%.

    The clock is the GPU's SM clock, else the CPU's MHz.
    A run whose host was read says what it showed.
    """
    clocks = {r.name: r.summary.clocks for r in runs if r.summary and r.summary.clocks}
    hosts = {r.name: f"; host: {host}" for r in runs if (host := seen_in(r.summary)) is not None}
    values = [v for c in clocks.values() for v in (c.get("start", {}).get("mhz"), c.get("end", {}).get("mhz")) if v]
    if not values:
        return []
    middle = statistics.median(values)
    flags = []
    for name, c in clocks.items():
        for when in ("start", "end"):
            mhz = (c.get(when) or {}).get("mhz")
            if mhz and abs(mhz - middle) > tolerance * middle:
                flags.append(
                    f"DRIFT {name}: {c[when]['source']} {mhz:.0f} MHz at its {when}, sweep median {middle:.0f}"
                    f"{hosts.get(name, '')}"
                )
    return flags
