"""Time to submit and complete a CPU job array on the local Slurm cluster.

It compares one run per job with K runs per job.

    python -m perfsweep.bench.slurm_packing [--runs 16] [--packs 1 4] [--repeats 3] [--parallelism 2]

It starts the cluster with scripts/slurm-local.
For each runs_per_job value, it launches a sweep of tiny runs with launcher.wait=true.
The runs are timm's test_resnet, 3 steps each; the values are interleaved.
The time is the whole launch: plan, submit, run, follow.
It prints its median per value, and its ratio to runs_per_job=1.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfsweep.bench import command

ROOT = Path(__file__).resolve().parent.parent


def grid(runs: int) -> list[str]:
    """Overrides for `runs` distinct runs: one per seed."""
    return ["input_type=tensor", f"seed={','.join(map(str, range(runs)))}"]


def launch_once(runs: int, per_job: int, parallelism: int, env: dict) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            sys.executable,
            str(ROOT / "launch.py"),
            "launcher=slurm",
            "launcher.wait=true",
            f"launcher.runs_per_job={per_job}",
            f"launcher.parallelism={parallelism}",
            "model=test_resnet",
            "steps=3",
            "warmup_steps=1",
            "memory_format=contiguous",
            *grid(runs),
            f"runs_dir={tmp}",
        ]
        start = time.perf_counter()
        done = subprocess.run(args, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"launch failed:\n{done.stdout}\n{done.stderr}")
        return seconds


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("slurm_packing", __doc__)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--packs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args(argv)
    if args.dry_run:
        packs = ", ".join(f"runs_per_job={per_job}" for per_job in args.packs)
        command.would(f"{args.runs} runs on the local Slurm cluster at {packs}, {args.repeats} times each")
        return
    subprocess.run(["bash", str(ROOT / "scripts" / "slurm-local"), "up"], check=True)
    conf = subprocess.run(["bash", str(ROOT / "scripts" / "slurm-local"), "env"], capture_output=True, text=True)
    env = {**os.environ, "SLURM_CONF": conf.stdout.strip().split("=", 1)[1]}
    times: dict[int, list[float]] = {k: [] for k in args.packs}
    for _ in range(args.repeats):
        for per_job in args.packs:
            times[per_job].append(launch_once(args.runs, per_job, args.parallelism, env))
    base = statistics.median(times[args.packs[0]])
    print(f"{args.runs} runs (test_resnet, 3 steps), {args.parallelism} jobs at a time, median of {args.repeats}")
    for per_job, seconds in times.items():
        med = statistics.median(seconds)
        print(
            f"runs_per_job={per_job}: {med:.1f} s ({med / args.runs:.2f} s a run), "
            f"{med / base:.2f}x of runs_per_job={args.packs[0]}  [all: {', '.join(f'{s:.1f}' for s in seconds)}]"
        )


if __name__ == "__main__":
    main()
