"""Seconds to expand, validate and write the plan of a large grid (no run is started).

    python -m perfsweep.bench.plan_scale [--runs 10000] [--repeats 3] [--hydra N]

The grid is 5 models x 5 input types x 2 precisions x 2 compile modes.
It has as many seeds as --runs needs, and is cut to --runs.

It prints the median over --repeats of each step:
- expanding and composing every run's config (build_plan).
- checking them (validate).
- importing timm and torchvision once, to list model names.
  It is timed apart, on the first repeat.
- writing the sweep folder's manifest and each run's config record.
  A launch writes these before it submits.
- `status` of that sweep, in this process.
- the command `perfsweep status SWEEP_DIR`, a new process with its start included.

--hydra N also composes the grid's first N runs the plain way, once.
The plain way is each run by Hydra in full.
sweeps/compose.py's fast path must equal it.
The figure shows what the fast path saves.
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfsweep.bench import command
from perfsweep.launcher import sweepdir
from perfsweep.launcher.run_states import EXIT_NOT_DONE, render
from perfsweep.launcher.validate import validate
from perfsweep.sweeps import compose
from perfsweep.sweeps.plan import Plan, build_plan
from perfsweep.train.checks import problems as run_problems

AXES = [
    "model=resnet18,resnet50,convnext_tiny,timm_resnet50,test_resnet",
    "input_type=tensor,subclass,tensorbase,cast,subclass_notf",
    "precision=fp32,amp_bf16",
    "compile=eager,default",
    "memory_format=contiguous",
]
PER_SEED = 5 * 5 * 2 * 2


def write_plan(plan: Plan) -> None:
    sweepdir.open_sweep(plan, ["bench"])
    sweepdir.mark_pending(plan, list(plan.runs))


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("plan_scale", __doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hydra", type=int, default=0, metavar="N", help="compose N runs by Hydra in full too")
    args = parser.parse_args(argv)
    seeds = max(1, args.runs // PER_SEED)
    overrides = [*AXES, f"seed=range(0,{seeds})", "repeats=1"]  # one run per configuration: --runs of them
    if args.dry_run:
        hydra = f", and {args.hydra} runs composed by Hydra in full" if args.hydra else ""
        command.would(f"planning, checking and writing {args.runs} runs, {args.repeats} times{hydra}")
        return
    first_check = None
    times: dict[str, list[float]] = {"plan": [], "validate": [], "write": [], "status": [], "status command": []}
    for _ in range(args.repeats):
        seconds, plan = timed(build_plan, overrides)
        times["plan"].append(seconds)
        seconds, problems = timed(validate, plan, run_problems)
        assert not problems, problems
        if first_check is None:
            first_check = seconds
            seconds, _ = timed(validate, plan, run_problems)
        times["validate"].append(seconds)
        with tempfile.TemporaryDirectory() as tmp:
            sweep_dir = Path(tmp) / "sweep"
            seconds, _ = timed(write_plan, Plan(sweep_dir=sweep_dir, runs=plan.runs))
            times["write"].append(seconds)
            seconds, (shown, _) = timed(render, sweep_dir)
            assert f"{len(plan.runs)} runs, {len(plan.runs)} pending" in shown
            times["status"].append(seconds)
            status = [sys.executable, "-m", "launch", "status", str(sweep_dir)]
            seconds, done = timed(subprocess.run, status, capture_output=True)
            assert done.returncode == EXIT_NOT_DONE, done.stderr  # its runs are pending
            times["status command"].append(seconds)
    print(f"{len(plan.runs)} runs, median of {args.repeats}")
    for stage, values in times.items():
        print(f"{stage:<14} {statistics.median(values):6.2f} s   [{', '.join(f'{v:.2f}' for v in values)}]")
        if stage == "write":
            total = sum(statistics.median(times[s]) for s in ("plan", "validate", "write"))
            print(
                f"{'total':<14} {total:6.2f} s   (plan + validate + write; + {first_check - times['validate'][0]:.2f}"
                " s once, importing timm and torchvision to list models)"
            )
    if args.hydra:
        runs = compose.expand(overrides)[: args.hydra]
        seconds, (configs, errors) = timed(compose.compose_all, runs, reuse=False)
        assert len(configs) == len(runs) and not errors, errors
        print(f"{'hydra':<14} {seconds:6.2f} s   ({len(runs)} runs, each composed by Hydra in full, once)")


if __name__ == "__main__":
    main()
