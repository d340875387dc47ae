"""What the host showed during a run's measured blocks, in words a flag can carry (records/host.py).

A run recorded before its host was read has no host state: its flags say nothing of it.
"""

import operator
import statistics

from perfsweep.records import HostState, RunRecord, Summary
from perfsweep.records.host import OTHERS, STEAL
from perfsweep.records.words import counted

# A clock change from the first block's start to the last block's end that moves step times by as much.
CLOCK = 0.05
NOTHING_SEEN = "no neighbour, steal or throttling seen"
# What was taken of a run's CPUs, by its name in a line: its threshold, and its field of HostState.
TAKEN = (("others' CPU", OTHERS, "others_share"), ("steal", STEAL, "steal_share"))
# NVML's clock-event reasons that hold a GPU's clock below what its settings ask (train/gpu_state.py)
HELD = ("power cap", "hardware slowdown", "thermal slowdown (software)", "thermal slowdown (hardware)", "power brake")
GPU_OTHERS = "other processes on the GPU"  # the GPU setting (train/host_settings.py) that names them
# The share of a run's window that a power cap or a thermal slowdown held its GPU's clocks down, above which it says so
HELD_SHARE = 0.05


def seen(host: HostState) -> str:
    """What the host showed during the run's blocks; NOTHING_SEEN where nothing passed its threshold.

    Where nothing passed and some of it was not read, or not told by so short a window, that part is called unknown.

    Others' CPU and steal count only beyond /proc/stat's resolution over the window (`HostState.resolution`).
    """
    found, error = host.competed(), host.resolution or 0.0
    if error > OTHERS and not (host.others_share is not None and host.others_share - error > OTHERS):
        found.insert(
            0, f"its {host.wall_s:.2g} s window is too short for /proc/stat to tell others' CPU ({within(error)})"
        )
    if host.throttled:
        found.append(f"cgroup throttled {host.throttled} times ({host.throttled_s or 0:.2g} s)")
    start, end = host.mhz_start, host.mhz_end
    if _moved(start, end):
        found.append(f"CPU clock {start / 1e3:.1f} -> {end / 1e3:.1f} GHz")
    found += _gpu_seen(host)
    if found:
        return "; ".join(found)
    read = {
        "neighbour": host.others_share is not None,
        "steal": host.steal_share is not None and error <= STEAL,  # a window too short to tell steal tells none
        "throttling": host.throttled is not None,
    }
    if all(read.values()):
        return NOTHING_SEEN
    unseen, unknown = (
        [what for what, known in read.items() if known],
        [what for what, known in read.items() if not known],
    )
    return (f"no {_listed(unseen, 'or')} seen; " if unseen else "") + f"{_listed(unknown, 'and')} unknown"


def too_short(hosts: list[HostState]) -> str:
    """Why others' CPU is unknown for these hosts: windows too short for /proc/stat.

    It is "" where no window was so short.
    """
    short = [host.wall_s for host in hosts if (host.resolution or 0.0) > OTHERS]
    if not short:
        return ""
    return f"their windows ({min(short):.2g}-{max(short):.2g} s) are too short for /proc/stat to tell others' CPU"


def _listed(words: list[str], last: str) -> str:
    """'a', 'a or b', 'a, b or c'."""
    return f"{', '.join(words[:-1])} {last} {words[-1]}" if len(words) > 1 else words[0]


def _moved(start: float | None, end: float | None) -> bool:
    """Whether a clock moved from `start` to `end` by more than CLOCK; False where either is unknown."""
    return bool(start and end and abs(end - start) > CLOCK * start)


def beyond_cpus(hosts: list[HostState]) -> list[str]:
    """What else the hosts showed, counted over the hosts that read it: throttling, a CPU clock that moved by over
    CLOCK, and the GPU (`seen`).

    For example: '4 of 6 runs: cgroup throttled', or '4 of the 5 runs that read it: ...' where one did not.
    Nothing where no host showed any.
    """
    read = {
        "cgroup throttled": [bool(h.throttled) for h in hosts if h.throttled is not None],
        f"CPU clock moved over {CLOCK:.0%}": [
            _moved(h.mhz_start, h.mhz_end) for h in hosts if h.mhz_start and h.mhz_end
        ],
        "GPU clock held or moved, or another process on the GPU": [
            bool(_gpu_seen(h)) for h in hosts if h.gpu_sm_mhz_start or h.gpu_reasons or h.gpu_settings
        ],
    }
    found = []
    for what, seen in read.items():
        if any(seen):
            of = f"{len(seen)} runs" if len(seen) == len(hosts) else f"the {len(seen)} runs that read it"
            found.append(f"{sum(seen)} of {of}: {what}")
    return found


def _gpu_seen(host: HostState) -> list[str]:
    """What the GPU showed: its SM clock moving, and why; a reason that held it; another process on it."""
    found, held = [], [reason for reason in host.gpu_reasons if reason in HELD]
    start, end = host.gpu_sm_mhz_start, host.gpu_sm_mhz_end
    why = f", reason: {', '.join(held)}" if held else ""
    if _moved(start, end):
        found.append(f"SM clock {start:.0f} -> {end:.0f} MHz{why}")
    elif held:
        found.append(f"GPU clock held by {', '.join(held)}")
    for cause, seconds in (("its power cap", host.gpu_power_held_s), ("a thermal slowdown", host.gpu_thermal_held_s)):
        if seconds is not None and host.wall_s > 0 and seconds > HELD_SHARE * host.wall_s:
            found.append(f"GPU held below its clocks by {cause} for {seconds / host.wall_s:.0%} of its window")
    others = [s["state"] for s in host.gpu_settings if s.get("name") == GPU_OTHERS and s.get("noisy")]
    found += [f"another process on the GPU: {state}" for state in others]
    return found


def within(resolution: float) -> str:
    """/proc/stat's resolution over a window, to two digits: 2.2% is past a 2% threshold, where 2% would not say."""
    percent = 100 * resolution
    return f"±{percent:.2g}%" if percent < 100 else f"±{percent:.0f}%"  # not ±1e+02%


def seen_in(summary: Summary | None) -> str | None:
    """What the host showed during a run (`seen`); None where its host was not read."""
    return seen(summary.host) if summary and summary.host else None


def figures(host: HostState) -> str:
    """The run's host figures, each one or `unknown`, for a line of its own."""

    def share(value: float | None) -> str:
        if value is None:
            return "unknown"
        shown = f"{min(max(value, 0.0), 1.0):.0%}"  # a tick's error may take the estimate past what a share can be
        return shown + (f" {within(host.resolution)}" if host.resolution else "")

    clock = f"{host.mhz_start:.0f} -> {host.mhz_end:.0f} MHz" if host.mhz_start and host.mhz_end else "unknown"
    throttled = "unknown" if host.throttled is None else f"{host.throttled} times"
    device = f"power {host.watts:.3g} W ({host.energy_source})" if host.watts is not None else "power unknown"
    if host.gpu_sm_mhz_start and host.gpu_sm_mhz_end:
        limit = f" of a {host.gpu_power_limit_w:.0f} W limit" if host.gpu_power_limit_w else ""
        device = f"SM clock {host.gpu_sm_mhz_start:.0f} -> {host.gpu_sm_mhz_end:.0f} MHz, {device}{limit}"
    return (
        f"others' CPU {share(host.others_share)}, steal {share(host.steal_share)}, cgroup throttled {throttled}, "
        f"CPU clock {clock}, {device}, over {counted(len(host.blocks), 'block')}, {host.wall_s:.3g} s in all"
    )


def shares(runs: list[RunRecord]) -> dict[str, float]:
    """What other processes and the hypervisor took of the runs' CPUs: the median over the runs whose windows
    resolved it, by name ("others' CPU", "steal"); absent where no run's did."""
    return {label: statistics.median(told) for label, told in _resolved(runs).items() if told}


def _resolved(runs: list[RunRecord]) -> dict[str, list[float]]:
    """Each share of TAKEN, from the runs whose windows resolved it below its threshold, by name."""
    hosts = [run.summary.host for run in runs if run.summary and run.summary.host]
    found = {}
    for label, threshold, field in TAKEN:
        of = operator.attrgetter(field)
        found[label] = [of(host) for host in hosts if of(host) is not None and (host.resolution or 0.0) < threshold]
    return found


def quiet(run: RunRecord) -> bool:
    """Whether the run's window told that neither others nor steal took its CPUs past their thresholds.

    A window too short to tell is not quiet: its share is unknown.
    """
    host = run.summary.host if run.summary else None
    return host is not None and all(
        (host.resolution or 0.0) < threshold and (share := getattr(host, field)) is not None and share <= threshold
        for _, threshold, field in TAKEN
    )


def _over(told: list[float], runs: list[RunRecord]) -> str:
    return "its runs" if len(told) == len(runs) else f"the {len(told)} of its {len(runs)} runs whose windows told"


def median_over(runs: list[RunRecord], label: str) -> str:
    """What a share's median rests on: 'its runs', or 'the 1 of its 6 runs whose windows told'."""
    return _over(_resolved(runs)[label], runs)


def passed(runs: list[RunRecord], label: str, threshold: float) -> str:
    """The runs whose share passed: 'above 10% in 2 of its 6 runs (up to 40%)'.

    It is '' where none did.
    """
    told = _resolved(runs)[label]
    if not (high := [share for share in told if share > threshold]):
        return ""
    of = "" if len(told) == len(runs) else f" whose windows told, of {len(runs)}"
    return f"above {threshold:.0%} in {len(high)} of its {len(told)} runs{of} (up to {max(high):.0%})"


def taken(runs: list[RunRecord]) -> str:
    """What other processes and steal took of the runs' CPUs, where above what adds noise: "others' CPU 36%, the
    median over its runs"; "no neighbour or steal seen" where neither was; "" where no run's window told.

    Where only some runs' windows told a share, it says how many did.
    Where no median passed its threshold but some runs did, it counts them: a neighbour that came and went.
    Where neither passed its threshold and the two rest on different runs, each is said apart, or called unknown.
    """
    resolved = _resolved(runs)
    if not any(resolved.values()):
        return ""

    def over(told: list[float]) -> str:
        return _over(told, runs)

    found = {
        label: statistics.median(told)
        for label, threshold, _ in TAKEN
        if (told := resolved[label]) and statistics.median(told) > threshold
    }
    if found:
        if len({len(resolved[label]) for label in found}) == 1:  # the shares rest on the same runs: one phrase
            shares = ", ".join(f"{label} {share:.0%}" for label, share in found.items())
            return f"{shares}, the median over {over(resolved[next(iter(found))])}"
        return "; ".join(
            f"{label} {share:.0%}, the median over {over(resolved[label])}" for label, share in found.items()
        )
    some = [f"{label} {said}" for label, threshold, _ in TAKEN if (said := passed(runs, label, threshold))]
    if some:
        return "; ".join(some)
    others, steal = resolved["others' CPU"], resolved["steal"]
    if len(others) == len(steal):
        return "no neighbour or steal seen" + ("" if len(others) == len(runs) else f" in {over(others)}")
    unknown = {label: f"{label} {_told(None, runs, field)}" for label, _, field in TAKEN}
    neighbour = f"no neighbour seen in {over(others)}" if others else unknown["others' CPU"]
    return f"{neighbour}; " + (f"no steal seen in {over(steal)}" if steal else unknown["steal"])


def differ(a: list[RunRecord], b: list[RunRecord], names: tuple[str, str] = ("A", "B")) -> str:
    """Where either set of runs shared their CPUs, or lost them to steal: 'steal A 0%, B 9% (medians over their
    runs)'.

    Where one set's share passed its threshold and the other's is unknown, the other is named unknown, with why.
    A neighbour seen on one side may be the whole difference.
    Neighbours on both sides may be too, where their shares differ by more than the threshold.
    The line is empty where neither is so.
    """
    told = (shares(a), shares(b))
    found, counted = [], []
    for label, threshold, field in TAKEN:
        values = [side.get(label) for side in told]
        known = [value for value in values if value is not None]
        if len(known) == 2 and max(known) <= threshold:
            if some := _some_runs(a, b, names, label, threshold):
                counted.append(some)
            continue
        if len(known) == 2 and min(known) > threshold and abs(known[0] - known[1]) <= threshold:
            continue  # the same load on both sides
        if not known or max(known) <= threshold:
            continue
        said = [f"{name} {_told(value, runs, field)}" for name, value, runs in zip(names, values, (a, b), strict=True)]
        found.append(f"{label} {', '.join(said)}")
    medians = [f"{', '.join(found)} (medians over their runs)"] if found else []
    return "; ".join(medians + counted)


def unread(a: list[RunRecord], b: list[RunRecord]) -> str:
    """Why what else ran beside either set of runs is unknown, where neither's windows told it; '' where one did."""
    if shares(a).get("others' CPU") is not None or shares(b).get("others' CPU") is not None:
        return ""
    short = too_short([run.summary.host for run in [*a, *b] if run.summary and run.summary.host])
    return f"what else ran on their hosts is unknown: {short}" if short else ""


def shared_side(a: list[RunRecord], b: list[RunRecord]) -> str | None:
    """ "A" or "B": the side whose runs' CPUs others or steal took, by their medians, where the other's were not.

    None where neither's or both's were, or where that is not known.
    """
    told = (shares(a), shares(b))
    shared = [False, False]
    for label, threshold, _ in TAKEN:
        values = [side.get(label) for side in told]
        over = [value is not None and value > threshold for value in values]
        if any(over) and None in values:  # one side's share passed, the other's is not known
            return None
        shared = [was or now for was, now in zip(shared, over, strict=True)]
    return "A" if shared == [True, False] else "B" if shared == [False, True] else None


SOME_RUNS = 0.25  # how far the sides' shares of runs above a threshold must differ to be named, medians below it


def _some_runs(a: list[RunRecord], b: list[RunRecord], names: tuple[str, str], label: str, threshold: float) -> str:
    """Where the shares of the sides' runs that passed the threshold differ by a quarter or more, each side's count.

    'others' CPU above 10% in A 0 of 16, B 9 of 20 (up to 61%) runs whose windows told it'.
    A neighbour that came and went takes some runs, not the median one.
    """
    told = [_resolved(runs)[label] for runs in (a, b)]
    over = [[value for value in values if value > threshold] for values in told]
    if not all(told):
        return ""
    shares = [len(high) / len(values) for values, high in zip(told, over, strict=True)]
    if abs(shares[0] - shares[1]) < SOME_RUNS:
        return ""
    sides = [
        f"{name} {len(high)} of {len(values)}{f' (up to {max(high):.0%})' if high else ''}"
        for name, values, high in zip(names, told, over, strict=True)
    ]
    return f"{label} above {threshold:.0%} in {', '.join(sides)} runs whose windows told it"


def _told(value: float | None, runs: list[RunRecord], field: str) -> str:
    """A share of the runs' CPUs ('40%'), or why it is unknown: too short a window, no /proc/stat, no host."""
    if value is not None:
        return f"{value:.0%}"
    hosts = [run.summary.host for run in runs if run.summary and run.summary.host]
    if any(getattr(host, field) is not None for host in hosts):
        return "unknown (no window of theirs was long enough for /proc/stat to tell)"
    if hosts:
        return "unknown (/proc/stat did not give it)"
    return "unknown (their host was not recorded)"
