"""Loading and summarising a large sweep, in seconds.

    python -m perfsweep.bench.analysis_scale [--runs 1000] [--steps 1000] [--repeats 3]

It reads N runs x M steps of records.
It computes every run's per-phase statistics:
- the median and its 95% interval;
- the IQR and p5/p95;
- outliers and the noise flag.

First it writes a synthetic sweep into a temporary folder (not timed).
The sweep is in perfsweep's record format: config, status, summary and steps.parquet per run.
Then it times three things, each the median over repeats:
- load: the run records;
- summarise: each run's steps.parquet read, with statistics of its 4 phases and step;
- the table of the whole sweep.
"""

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from perfsweep import records
from perfsweep.analysis.views.runs import run_stats
from perfsweep.analysis.views.table import table_view
from perfsweep.bench import command
from perfsweep.records import lifecycle, load_sweep

PHASES = ["data", "forward", "backward", "optimizer"]


def write_sweep(root: Path, runs: int, steps: int) -> Path:
    rng = np.random.default_rng(0)
    sweep = root / "large"
    for i in range(runs):
        folder = sweep / f"run-{i:05d}"
        folder.mkdir(parents=True)
        times = {f"{p}_ms": rng.lognormal(1.0, 0.05, steps) for p in PHASES}
        times["step_ms"] = sum(times.values())
        columns = {**times, "step": np.arange(steps), "warmup": np.zeros(steps, bool), "loss": np.ones(steps)}
        records.write_steps(
            folder / records.STEPS, [dict(zip(columns, v, strict=True)) for v in zip(*columns.values(), strict=True)]
        )
        axes = {"input_type": "tensor" if i % 2 == 0 else "subclass", "seed": str(i // 2)}
        config = {"input_type": {"name": axes["input_type"]}, "seed": i // 2}
        baseline = {"axis": "input_type", "value": "tensor"}
        records.write_json(
            folder / records.CONFIG,
            {"run_id": str(i), "name": folder.name, "axes": axes, "baseline": baseline, "config": config},
        )
        medians = {k: float(np.median(v)) for k, v in times.items()}
        records.write_json(
            folder / records.SUMMARY, {"phases": PHASES, "median_ms": medians, "steps_per_s": 1000 / medians["step_ms"]}
        )
        lifecycle.finish(folder)
    return sweep


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("analysis_scale", __doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.dry_run:
        command.would(f"loading and summarising {args.runs} runs x {args.steps} steps, {args.repeats} times")
        return
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write_sweep(Path(tmp), args.runs, args.steps)
        seconds: dict[str, list[float]] = {"load": [], "summarise": [], "table": []}
        for _ in range(args.repeats):
            start = time.perf_counter()
            runs = load_sweep(sweep)
            seconds["load"].append(time.perf_counter() - start)
            start = time.perf_counter()
            stats = [run_stats(r) for r in runs]
            seconds["summarise"].append(time.perf_counter() - start)
            start = time.perf_counter()
            table = table_view(sweep, runs).rows
            seconds["table"].append(time.perf_counter() - start)
        assert len(stats) == len(table) == args.runs
    print(f"{args.runs} runs x {args.steps} steps, median of {args.repeats}")
    for stage, values in seconds.items():
        print(f"{stage:<10} {statistics.median(values):.2f} s")
    print(f"{'total':<10} {sum(statistics.median(v) for v in seconds.values()):.2f} s")


if __name__ == "__main__":
    main()
