"""The seed-000-style table of a sweep: one row per run, medians per phase, throughput, ratio to the baseline run.

python -m analysis.table SWEEP_DIR [--csv]
"""

import argparse
import csv
import io
import sys
from pathlib import Path

from analysis import published, stats
from analysis.load import RunRecord, load_sweep
from analysis.summary import measured_steps, noise, phase_stats
from analysis.text import markdown
from sweeps.spec import FUNCTION_AXES, TRAIN_AXES

ORDER = list(dict.fromkeys([*FUNCTION_AXES, *TRAIN_AXES]))  # records store axes with sorted keys
AXIS_FIELDS = {*TRAIN_AXES.values(), *FUNCTION_AXES.values(), "compile.enabled", "compile.mode", "replicate"}


def axis(run: RunRecord, name: str) -> str:
    return run.axes.get(name, "-")


def varying(runs: list[RunRecord]) -> tuple[list[str], list[str]]:
    """Axis names and other config fields whose values differ between runs."""
    seen = {a for r in runs for a in r.axes}
    names = [a for a in ORDER if a in seen] + sorted(seen.difference(ORDER))
    axes = [a for a in names if len({axis(r, a) for r in runs}) > 1]
    in_axes = {f"workload.{a}" for a in axes}
    fields = sorted(
        k
        for k in runs[0].fields
        if k not in AXIS_FIELDS and k not in in_axes and len({repr(r.fields.get(k)) for r in runs}) > 1
    )
    return axes, fields


# How long a run measures, not what: runs that differ only in these are still compared.
MEASURING = ("steps", "warmup_steps")


def group_key(run: RunRecord, axes: list[str], fields: list[str]) -> tuple:
    """The run's row group: everything that varies except the axis it is compared along and how long it measured."""
    compared = run.baseline["axis"]
    return tuple(axis(run, a) for a in axes if a != compared) + tuple(
        repr(run.fields.get(f)) for f in fields if f not in MEASURING
    )


def is_baseline(run: RunRecord) -> bool:
    return axis(run, run.baseline["axis"]) == run.baseline["value"]


def phase_columns(runs: list[RunRecord]) -> list[str]:
    """The phases of every workload in the sweep, in order of first appearance, then the whole step."""
    phases = dict.fromkeys(p for r in runs for p in r.summary.get("phases", ()))
    return [*phases, "step"]


def rows(runs: list[RunRecord]) -> tuple[list[str], list[list[str]]]:
    """Header and rows (done runs only), each group's baseline first; the ratio is the speed-up over the group's
    baseline (its median step time / this run's) with a bootstrap 95% interval over steps."""
    done = [r for r in runs if r.state == "done" and r.summary]
    if not done:
        return [], []
    axes, fields = varying(runs)
    phases = phase_columns(done)
    baselines = {group_key(r, axes, fields): r for r in done if is_baseline(r)}
    values = sorted({r.baseline["value"] for r in done})
    trains = any("samples_per_s" in r.summary for r in done)
    syncs = any(r.summary.get("host_syncs_per_step") is not None for r in done)
    # With CUDA events the phase columns are device time; the host's time to issue a step goes beside them
    # (well under the device's: the GPU sets the pace).
    events = any(r.summary.get("timer") == "cuda_event" for r in done)
    header = [*axes, *fields, *(f"{p} ms" for p in phases), *(["step host ms"] if events else [])]
    header += ["samples/s"] if trains else []
    header += ["syncs/step"] if syncs else []
    header += [f"vs {values[0]}" if len(values) == 1 else "vs baseline", *(["output type"] if trains else [])]
    order = sorted(done, key=lambda r: (group_key(r, axes, fields), not is_baseline(r), tuple(r.axes.values())))
    table = []
    steps = {r.name: measured_steps(r.path, ["step_ms"])["step_ms"] for r in done}
    for run in order:
        base = baselines.get(group_key(run, axes, fields))
        if base is run:
            ratio = "1.00x"
        else:
            ratio = str(stats.speedup(steps[run.name], steps[base.name])) if base else "-"
        medians = run.summary["median_ms"]
        samples = [f"{run.summary['samples_per_s']:.1f}" if "samples_per_s" in run.summary else "-"]
        table.append(
            [
                *(axis(run, a) for a in axes),
                *(str(run.fields.get(f)) for f in fields),
                *(f"{medians[f'{p}_ms']:.3g}" if f"{p}_ms" in medians else "-" for p in phases),
                *([f"{medians['step_host_ms']:.3g}" if "step_host_ms" in medians else "-"] if events else []),
                *(samples if trains else []),
                *([str(run.summary.get("host_syncs_per_step", "-"))] if syncs else []),
                ratio,
                *([run.summary.get("output_type", "-")] if trains else []),
            ]
        )
    return header, table


def noisy(run: RunRecord) -> list[str]:
    """Why a done run's step times are too spread to trust (analysis/summary.py), if they are."""
    steps = measured_steps(run.path, ["step_ms"])["step_ms"]
    return noise(steps, phase_stats(steps))


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


def context(runs: list[RunRecord]) -> str:
    """What every row shares: the constant axes, the device and the software."""
    axes, _ = varying(runs)
    fixed = " ".join(f"{a}={axis(runs[0], a)}" for a in ORDER if a in runs[0].axes and a not in axes)
    env = next((r.env for r in runs if r.env), {}) or {}
    device = (env.get("gpu") or {}).get(
        "name"
    ) or f"CPU {env.get('cpu', '?')} ({env.get('torch_threads', '?')} threads)"
    timer = next((r.summary["timer"] for r in runs if r.summary), "?")
    torch_version = (env.get("packages") or {}).get("torch", "?")
    at_once = sorted({r.status.get("parallelism", 1) for r in runs})
    return (
        f"{fixed} | {device} | torch {torch_version} | timer {timer} | {'/'.join(map(str, at_once))} run(s) "
        "at a time | medians over measured steps; samples/s over the whole window (stalls included); "
        "vs: speed-up over the baseline of the same row group [95% CI]"
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
    parts += [f"FAILED {r.name}: {r.error_line()}" for r in failed]
    parts += [f"{r.state.upper()} {r.name}" for r in pending]
    parts += [f"NOISY {r.name}: {reason}" for r in runs if r.state == "done" for reason in noisy(r)]
    parts += [
        f"SHARED GPU {r.name}: other processes on its GPU: {', '.join(shared)}"
        for r in runs
        if (shared := shared_gpu(r))
    ]
    return "\n".join(parts)


def views(sweep_dir: Path) -> list[str]:
    """What else the sweep's records say, below the table: across replicates, beside the published figures."""
    from analysis import replicates  # (it builds on this module)

    runs = load_sweep(sweep_dir)
    found = [replicates.render(sweep_dir)] if any("replicate" in r.axes for r in runs) else []
    side_by_side = published.render(sweep_dir)
    return found + ([side_by_side] if side_by_side else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.table", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--csv", action="store_true", help="CSV to stdout instead of a markdown table")
    args = parser.parse_args(argv)
    try:
        print(render(args.sweep_dir, as_csv=args.csv))
        if not args.csv:
            for extra in views(args.sweep_dir):
                print(f"\n{extra}")
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
