"""Where a sweep's wall time goes, spawn against fork, as a user launches it.

    python -m perfsweep.bench.startup [--repeats 3] [--sweeps six,default]

launcher.isolation=spawn starts a new interpreter per run.
fork forks a child per run from one warm job.

The sweeps:
- `six`: six function-benchmark runs of a few milliseconds each (workload=square_chain size=8, two steps);
- `default`: the default sweep, as README.md launches it.

Its figures are of the runs that ran: the default's launch budget may leave some pending.

Each is launched as the command `perfsweep ...`, so its own start-up counts.
W&B is off.
Spawn and fork are interleaved, --repeats times each.

It prints, per sweep and mode, the medians of:
- wall time;
- per-run start-up: from its process's start (or the previous run's end in that process) to its first step;
- efficiency: the measured windows' total / wall.
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfsweep.bench import command
from perfsweep.records import load_sweep

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = {
    "six": ["workload=square_chain", "workload.size=8", "seed=range(0,6)", "steps=2", "warmup_steps=1", "repeats=1"],
    "default": [],
}
MODES = ("spawn", "fork")


def launch_once(args: list[str], mode: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, str(ROOT / "launch.py"), *args, "tracker.mode=disabled"]
        command += [f"launcher.isolation={mode}", f"runs_dir={tmp}"]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        timings = [run.status.timing for run in load_sweep(Path(tmp) / "default") if run.status.timing]
    if done.returncode not in (0, 1) or not timings:  # 1: a run failed, or the budget left a configuration undone
        said = f"startup: the launch of `{' '.join(args)}` exited {done.returncode}, {len(timings)} of its runs ran"
        raise SystemExit(f"{said}:\n{done.stderr[-2000:]}")
    return {
        "wall_s": wall,
        "startup_s": statistics.median(t["startup_s"] for t in timings),
        "efficiency": sum(t["window_s"] for t in timings) / wall,
    }


def _median(results: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("startup", __doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sweeps", default=",".join(SWEEPS))
    args = parser.parse_args(argv)
    names = args.sweeps.split(",")
    if unknown := [name for name in names if name not in SWEEPS]:
        parser.error(f"--sweeps: no sweep {', '.join(unknown)}; the sweeps are {', '.join(SWEEPS)}")
    if args.dry_run:
        command.would(f"the sweeps {', '.join(names)}, {args.repeats} launches each with spawn and with fork")
        return
    print(f"median of {args.repeats}, spawn and fork interleaved; W&B off")
    print(f"{'sweep':<8} {'isolation':<9} {'wall s':>7} {'start-up s/run':>15} {'efficiency':>10}   wall s each")
    for name in names:
        by_mode: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
        for _ in range(args.repeats):
            for mode in MODES:
                by_mode[mode].append(launch_once(SWEEPS[name], mode))
        for mode, results in by_mode.items():
            wall, startup, share = (_median(results, k) for k in ("wall_s", "startup_s", "efficiency"))
            each = ", ".join(f"{r['wall_s']:.1f}" for r in results)
            print(f"{name:<8} {mode:<9} {wall:7.1f} {startup:15.2f} {share:10.0%}   [{each}]")
        spawn, fork = (_median(by_mode[m], "wall_s") for m in MODES)
        print(f"{name:<8} fork/spawn wall time: {fork / spawn:.2f}")


if __name__ == "__main__":
    main()
