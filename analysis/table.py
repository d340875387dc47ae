"""The seed-000-style table of a sweep: one row per run, medians per phase, samples/s, ratio to the plain Tensor.

python -m analysis.table SWEEP_DIR [--csv]
"""

import argparse
import csv
import io
import sys
from pathlib import Path

from analysis.load import RunRecord, load_sweep
from sweeps.spec import AXES, BASELINE_INPUT_TYPE

PHASE_COLUMNS = [
    ("data ms", "data_ms"),
    ("forward ms", "forward_ms"),
    ("backward ms", "backward_ms"),
    ("optimizer ms", "optimizer_ms"),
    ("step ms", "step_ms"),
]
RATIO = f"vs {BASELINE_INPUT_TYPE}"
IGNORED_FIELDS = {f"{axis}.name" for axis in AXES} | {"compile.enabled", "compile.mode"}


def varying(runs: list[RunRecord]) -> tuple[list[str], list[str]]:
    """Axis names and other config fields whose values differ between runs."""
    axes = [a for a in AXES if len({r.axes[a] for r in runs}) > 1]
    fields = sorted(
        k for k in runs[0].fields if k not in IGNORED_FIELDS and len({repr(r.fields.get(k)) for r in runs}) > 1
    )
    return axes, fields


def _key(run: RunRecord, axes: list[str], fields: list[str]) -> tuple:
    """The run's row group: everything that varies except the input type."""
    return tuple(run.axes[a] for a in axes if a != "input_type") + tuple(repr(run.fields.get(f)) for f in fields)


def rows(runs: list[RunRecord]) -> tuple[list[str], list[list[str]]]:
    """Header and rows (done runs only), each group's baseline first."""
    done = [r for r in runs if r.state == "done" and r.summary]
    if not done:
        return [], []
    axes, fields = varying(runs)
    baselines = {_key(r, axes, fields): r for r in done if r.axes["input_type"] == BASELINE_INPUT_TYPE}
    header = [*axes, *fields, *(c for c, _ in PHASE_COLUMNS), "samples/s", RATIO, "output type"]
    order = sorted(
        done, key=lambda r: (_key(r, axes, fields), r.axes["input_type"] != BASELINE_INPUT_TYPE, r.axes["input_type"])
    )
    table = []
    for run in order:
        base = baselines.get(_key(run, axes, fields))
        ratio = f"{run.summary['samples_per_s'] / base.summary['samples_per_s']:.2f}x" if base else "-"
        medians = run.summary["median_ms"]
        table.append(
            [
                *(run.axes[a] for a in axes),
                *(str(run.fields.get(f)) for f in fields),
                *(f"{medians[key]:.2f}" for _, key in PHASE_COLUMNS),
                f"{run.summary['samples_per_s']:.1f}",
                ratio,
                run.summary["output_type"],
            ]
        )
    return header, table


def shared_gpu(run: RunRecord) -> list[str]:
    """The other processes seen on a done run's GPU when it started or ended: its timings are suspect."""
    seen = (run.summary or {}).get("neighbours") or {}
    return sorted(
        {
            f"{p['name']} (pid {p['pid']}, {when})"
            for when, found in seen.items()
            for p in found.get("gpu_processes") or []
        }
    )


def markdown(header: list[str], table: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, table)])


def context(runs: list[RunRecord]) -> str:
    """What every row shares: the constant axes, the device and the software."""
    axes, _ = varying(runs)
    fixed = " ".join(f"{a}={runs[0].axes[a]}" for a in AXES if a not in axes)
    env = next((r.env for r in runs if r.env), {}) or {}
    device = (env.get("gpu") or {}).get(
        "name"
    ) or f"CPU {env.get('cpu', '?')} ({env.get('torch_threads', '?')} threads)"
    timer = next((r.summary["timer"] for r in runs if r.summary), "?")
    torch_version = (env.get("packages") or {}).get("torch", "?")
    at_once = sorted({r.status.get("parallelism", 1) for r in runs})
    return (
        f"{fixed} | {device} | torch {torch_version} | timer {timer} | {'/'.join(map(str, at_once))} run(s) "
        "at a time | medians over measured steps"
    )


def render(sweep_dir: Path, names: list[str] | None = None, as_csv: bool = False) -> str:
    runs = load_sweep(sweep_dir, names)
    header, table = rows(runs)
    failed = [r for r in runs if r.state == "failed"]
    pending = [r for r in runs if r.state not in ("done", "failed")]
    if as_csv:
        out = io.StringIO()
        csv.writer(out).writerows([header, *table])
        return out.getvalue()
    done = len(runs) - len(failed) - len(pending)
    parts = [f"{sweep_dir}: {len(runs)} runs, {done} done, {len(failed)} failed, {len(pending)} not finished"]
    if table:
        parts += [context(runs), markdown(header, table)]
    parts += [
        f"FAILED {r.name}: {r.status['error']['type']}: {r.status['error']['message'].splitlines()[0][:300]}"
        for r in failed
    ]
    parts += [f"{r.state.upper()} {r.name}" for r in pending]
    parts += [
        f"SHARED GPU {r.name}: other processes on its GPU: {', '.join(shared)}"
        for r in runs
        if (shared := shared_gpu(r))
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.table", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--csv", action="store_true", help="CSV to stdout instead of a markdown table")
    args = parser.parse_args(argv)
    try:
        print(render(args.sweep_dir, as_csv=args.csv))
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
