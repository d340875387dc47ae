"""`perfsweep noise`: this machine's noise floor, measured before a sweep.

    perfsweep noise [--processes 10] [OVERRIDE ...]

It runs an A/A of one configuration: the default sweep's first (ResNet18, Tensor, contiguous), or the overrides'.
It runs it two ways, each in `--processes` processes, W&B off:

- paired: the configuration as both sides of each process (label=a,b made an axis, pairing=auto);
- apart: one process a run (pairing=process).

It prints each way's spread (between and within processes, and between the paired sides, as `replicates` names
them), and the smallest difference a sweep decides at 95% in 1 min, 10 min and 1 h of this machine's time.
That comes from the spread and from what a launch, a run and a step cost (Split.plan, as `replicates`).
A launch's cost before its first run and after its last (planning, its job's start-up) is paid once; a run's
cost beyond its steps holds its process's fork and end.
It names the settings that add noise, each read (train/host_settings.py) or seen during its runs, with its fix.
It keeps the floor in <runs_dir>/noise/<machine>.json, or a file of its overrides' (records/noise.py).
A launch on this machine names it.
"""

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path

from perfsweep.commands.launching import launch_plan, machine_here
from perfsweep.records import DONE, RunRecord, load_sweep, noise
from perfsweep.sweeps.keys import given_twice, override_key
from perfsweep.sweeps.plan import IN_THE_RUN, Plan, PlanError, build_plan
from perfsweep.train.host_settings import Setting, cpu_settings, gpu_settings

PROCESSES = 10  # a way's processes: under a minute in all on a 2-core CPU
ONE = ["input_type=tensor", "memory_format=contiguous"]  # the default sweep's first configuration
# One configuration as both sides of each process: an A/A whose sides share it (bench/calibration.py).
A_A_PAIRED = ["label=a,b", "+workload.axes.label=label", "workload.baseline.axis=label", "workload.baseline.value=a",
              "pairing=auto"]  # fmt: skip
# what the command sets itself (its processes run whole: no launch budget)
# what noise sets itself -> how
SET_HERE = {
    "repeats": "from --processes",
    "pairing": "both ways, paired and apart",
    "label": "to the A/A's two sides",
    "sweep": "to one configuration, its overrides'",
    "sweep_name": "to a folder of its own",
    "tracker.mode": "off",
    "launcher.budget_s": "off: every process runs",
}
EXIT_SHARED = 3  # measured, not kept: its runs shared the machine
TOO_SHORT = "its windows were too short for /proc/stat to tell"  # what else ran: unknown, and more steps tell
STEAL_FIX = "a dedicated host or instance: the hypervisor gives steal away, no setting of the guest stops it"


def processes(value: str) -> int:
    """--processes: 2 or more, since the spread between processes needs two."""
    try:
        found = int(value)
    except ValueError:
        found = 0
    if found < 2:
        raise argparse.ArgumentTypeError(f"{value}: a whole number of processes, 2 or more (default {PROCESSES})")
    return found


def add_command(subparsers) -> None:
    about = "this machine's noise floor: the difference a sweep decides in 1 min, 10 min, 1 h, and what adds noise"
    parser = subparsers.add_parser("noise", help=about, description=about)
    parser.add_argument(
        "--processes",
        type=processes,
        default=PROCESSES,
        metavar="N",
        help=f"processes each way, paired and apart (default {PROCESSES}: about a minute on a 2-core CPU)",
    )
    parser.add_argument(
        "overrides", nargs="*", help="the configuration: a launch's overrides (model=tiny_cnn steps=20); one only"
    )
    parser.set_defaults(handler=measure_noise)


def measure_noise(args: argparse.Namespace) -> int:
    for line in given_twice(args.overrides):
        print(f"perfsweep noise: warning: {line}", file=sys.stderr)
    try:
        plans = _planned(args.overrides, args.processes)
        _built(plans)
    except PlanError as error:
        # its one configuration is the user's words: the run's whole settings would show noise's own beside them
        said = [problem.split(IN_THE_RUN)[0] for problem in error.problems]
        print(f"perfsweep noise: nothing was run:\n{PlanError(said)}", file=sys.stderr)
        return 2
    started, walls = time.perf_counter(), {}
    for way, (plan, words) in plans.items():
        began = time.time()
        status = launch_plan(lambda plan=plan: plan, words, show=False)
        walls[way] = (began, time.time())
        if status != 0:
            print(
                f"perfsweep noise: the {way} runs did not all finish (exit {status}); see {plan.sweep_dir}",
                file=sys.stderr,
            )
            return status
    runs = {way: [r for r in load_sweep(plan.sweep_dir) if r.state == DONE] for way, (plan, _) in plans.items()}
    floor = _floor(args, plans["apart"][0], runs, walls)
    print(render(floor, time.perf_counter() - started))
    shared = [
        f"{s['name']} {s['state'].split(' (')[0]}" for s in floor.settings if s["noisy"] and noise.DURING in s["name"]
    ]
    if shared:  # the floor of a shared machine is that moment's, and may even look finer than the machine's own
        print(f"not written: {'; '.join(shared)}; the floor kept is the one before, if any. Measure it again alone")
        return EXIT_SHARED
    short = any(s["state"].startswith(TOO_SHORT) for s in floor.settings)
    why = "more steps a run (steps=N) give windows that tell" if short else "its runs' records hold no host figures"
    said = f"; what else ran on its host is unknown: {why}" if noise.host_unknown(floor) else ""
    runs_dir = Path(floor.folder).parent.parent
    replaced = _replaced(runs_dir, floor)  # read before the write replaces it
    print(f"written: {floor.write(runs_dir)}{said}{replaced}")
    return 0


def _replaced(runs_dir: Path, floor: noise.NoiseFloor) -> str:
    """'; it replaces the floor of 2026-12-02 08:02, ...': the floor of the same configuration measured before.

    Two floors far apart say the machine's noise moves between them.
    """
    path = noise.floor_path(runs_dir, floor.machine, floor.overrides)
    try:
        before = noise.NoiseFloor.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return ""
    ways = ", ".join(
        f"{way} {noise.decided(getattr(before, way), 60)} -> {noise.decided(getattr(floor, way), 60)}"
        for way in noise.WAYS
    )
    return f"; it replaces the floor of {before.measured[:16].replace('T', ' ')} (in 1 min: {ways})"


def _planned(overrides: list[str], count: int) -> dict[str, tuple[Plan, list[str]]]:
    """The paired and the apart sweep with their overrides, each checked as a launch checks it, in a folder of
    their own.

    Raises:
        PlanError: naming each problem, before anything runs.
    """
    from perfsweep.launcher.validate import validate
    from perfsweep.train.checks import problems as run_problems

    ours = [o for o in overrides if override_key(o) in SET_HERE]
    if ours:
        keys = [override_key(o) for o in ours]
        how = "; ".join(f"{key} {SET_HERE[key]}" for key in keys)
        raise PlanError([f"perfsweep noise sets {' and '.join(keys)} itself ({how}): leave {' '.join(ours)} out"])
    given = [o for o in overrides if not o.startswith("runs_dir=")]
    runs_dir = next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("runs_dir=")), None)
    base = [*ONE, *given, "tracker.mode=disabled", f"repeats={count}", "launcher.budget_s=null"]
    apart = build_plan([*base, "pairing=process", *([f"runs_dir={runs_dir}"] if runs_dir else [])])
    if len(apart.runs) != count:
        raise PlanError([f"the overrides give {len(apart.runs) // count} configurations; noise measures one"])
    kind = noise.machine_kind(*machine_here(apart), noise.torch_version())
    folder = Path(apart.settings.runs_dir) / noise.FOLDER / f"{kind}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    plans = {}
    for way, words in (("paired", A_A_PAIRED), ("apart", ["pairing=process"])):
        words = [*base, *words, f"runs_dir={folder}", f"sweep_name={way}"]
        plans[way] = build_plan(words), words
        if problems := validate(plans[way][0], run_problems):
            raise PlanError(problems)
    return plans


def _built(plans: dict[str, tuple[Plan, list[str]]]) -> None:
    """Build the environments the ways' runs need (torch=VERSION), before either way is timed: a launch's cost is
    what every launch pays, and a build is paid once.

    Raises:
        PlanError: where one cannot be built.
    """
    from perfsweep.launcher import envs

    for plan, _ in plans.values():
        try:
            envs.for_plan(plan.runs, plan.settings.launcher.name, print)
        except envs.EnvError as error:
            raise PlanError([str(error)]) from error


def _floor(
    args: argparse.Namespace, apart: Plan, runs: dict[str, list[RunRecord]], walls: dict[str, tuple[float, float]]
) -> noise.NoiseFloor:
    first = runs["apart"][0]
    every = runs["paired"] + runs["apart"]
    return noise.NoiseFloor(
        machine=noise.machine_kind(first.device, bool((first.env or {}).get("gpu")), first.torch_version),
        device=first.device,
        torch=first.torch_version,
        measured=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        overrides=list(args.overrides),
        processes=args.processes,
        folder=str(apart.sweep_dir.parent),
        paired=_spread(runs["paired"], walls["paired"], paired=True),
        apart=_spread(runs["apart"], walls["apart"], paired=False),
        settings=[dataclasses.asdict(s) for s in [*cpu_settings(), *_seen(every), *_gpu(apart)]],
    )


def _gpu(plan: Plan) -> list[Setting]:
    return gpu_settings() if plan.settings.device != "cpu" else []


def _spread(runs: list[RunRecord], wall: tuple[float, float], paired: bool) -> noise.Spread | None:
    """One way's spread, and the smallest difference it decides in each budget; None without two runs or costs.

    `wall` is when the way's launch began and ended.
    What a launch costs before its first run starts and after its last ends (planning, its job's start-up) is paid
    once: a budget pays it first.
    A run's cost beyond its steps is its share of the time from the first run's start to the last one's end, less
    its steps: its process's fork and end are in it, which no run records.
    """
    from perfsweep.analysis.groups import configurations
    from perfsweep.analysis.statistics.variance import costs, sides_split, split

    configs = configurations(runs)
    own = split(configs[0].sample())
    sides = sides_split(configs[1].sample(), configs[0].sample()) if paired and len(configs) == 2 else None
    recorded = costs(runs)
    if own is None or recorded is None:
        return None
    step_s = recorded[1]
    first, last = _span(runs) or wall
    fixed_s = max(0.0, first - wall[0]) + max(0.0, wall[1] - last)
    cost = (max(recorded[0], (last - first) / len(runs) - own.steps * step_s), step_s)
    planned = (sides or own).at_most()  # what the processes measured cannot rule out
    return noise.Spread(
        runs=len(runs),
        between=own.between,
        within=own.within,
        between_sides=None if sides is None else sides.between,
        run_cost_s=cost[0],
        step_s=cost[1],
        fixed_s=fixed_s,
        floors={
            str(budget): planned.decided_in(budget - fixed_s, *cost) if budget > fixed_s else None
            for budget in noise.BUDGETS_S
        },
    )


def _span(runs: list[RunRecord]) -> tuple[float, float] | None:
    """When the first of the runs started and the last one ended (epoch seconds); None where a record lacks it."""
    started = [r.status.started_at for r in runs]
    ended = [r.status.finished_at for r in runs]
    if not all(started) or not all(ended):
        return None
    return min(map(_epoch, started)), max(map(_epoch, ended))


def _epoch(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp).timestamp()


def _seen(runs: list[RunRecord]) -> list[Setting]:
    """Steal and other processes' CPU during the runs' windows, as their host records show them.

    Each adds noise where any run's passed its threshold.
    """
    from perfsweep.analysis.statistics.host_flags import TAKEN, median_over, passed, shares, within

    told = shares(runs)
    hosts = [r.summary.host for r in runs if r.summary and r.summary.host]
    resolutions = [host.resolution for host in hosts if host.resolution]
    found = []
    for label, threshold, _ in TAKEN:
        name = f"{label}{noise.DURING}"
        if label in told:
            median = f"{told[label]:.0%} (median over {median_over(runs, label)}; above {threshold:.0%} adds noise)"
            some = passed(runs, label, threshold)  # a neighbour that came and went is in the floor too
            state = (
                f"{some}; median {median.replace('(median over', '(over')}"
                if some and told[label] <= threshold
                else median
            )
            fix = STEAL_FIX if label == "steal" else others_fix(runs)
            found.append(Setting(name, state, bool(some), fix))
        elif resolutions:
            state = f"{TOO_SHORT}: {within(min(resolutions))}"
            found.append(Setting(name, state, None))
        else:
            found.append(Setting(name, "its runs' records hold no host figures", None))
    return found


def others_fix(runs: list[RunRecord]) -> str:
    """Stop the other processes; or, where this process may use CPUs beyond the runs' threads, the commands that
    give the runs CPUs of their own. Where it may not, the runs would measure another thread count."""
    stop = "stop them (`top -o %CPU` lists them)"
    threads = max((int(run.threads) for run in runs if run.threads.isdigit()), default=0)
    cpus = sorted(os.sched_getaffinity(0))
    if not threads:
        return f"{stop}; the runs' thread count is unknown, so no CPUs of their own can be named"
    if len(cpus) <= threads:
        return f"{stop}: the {len(cpus)} CPUs here leave none beyond the runs' {threads} threads to give them"
    theirs, rest = ",".join(map(str, cpus[:threads])), ",".join(map(str, cpus[threads:]))
    return (
        f"{stop}, or give the runs CPUs of their own: `taskset -c {theirs}` before the command, and each other "
        f"process the rest (`taskset -acp {rest} PID`)"
    )


def render(floor: noise.NoiseFloor, wall_s: float) -> str:
    lines = [
        f"perfsweep noise: {floor.device}, torch {floor.torch}; {floor.processes} processes paired and "
        f"{floor.processes} apart ({wall_s:.0f} s); runs in {floor.folder}",
        "spread of log step time (as replicates names it):",
    ]
    for way in noise.WAYS:
        spread = getattr(floor, way)
        if spread is None:
            lines.append(f"  {way}: unknown (fewer than two runs, or no timing in their records)")
            continue
        sides = "" if spread.between_sides is None else f", between sides {spread.between_sides:.1%}"
        lines.append(
            f"  {way}: between {spread.between:.1%}, within {spread.within:.1%}{sides}; a launch costs "
            f"{spread.fixed_s:.1f} s before and after its runs, a run {spread.run_cost_s:.2f} s beyond its steps, a "
            f"step {spread.step_s:.3f} s ({spread.runs} runs)"
        )
    lines.append(
        "smallest difference a sweep decides at 95% (Kalibera and Jones's plan for the spread above, the spread "
        "between processes at the upper bound of its 95% interval):"
    )
    for budget, name in noise.BUDGETS.items():
        ways = [f"{way} {noise.decided(getattr(floor, way), budget)}" for way in noise.WAYS]
        lines.append(f"  in {name} of this machine: {', '.join(ways)}")
    lines.append("settings that add noise:")
    lines += [f"  {Setting(**setting).line}" for setting in floor.settings]
    return "\n".join(lines)
