"""The seed-000-style table of a sweep: one row per run, medians per phase, throughput, ratio to the baseline run.

python -m analysis table SWEEP_DIR [--csv]
"""

from pathlib import Path

from analysis import machines, stats
from analysis.groups import axis_order, baselines, compared_along, group_key, phase_columns, varying
from analysis.render import Column, View
from analysis.summary import noise, phase_stats
from records import DONE, FAILED, FINAL, RunRecord, load_sweep


def _ms(value: float | None) -> str:
    return f"{value:.3g}" if value is not None else "-"


def speedup_column(runs: list[RunRecord]) -> Column:
    """The speed-up over the run's baseline (its median step time / this run's) with a bootstrap 95% interval
    over steps; 1.00x for a baseline, - where the group has none."""
    base_of = baselines(runs)
    values = sorted({r.baseline.value for r in runs})
    steps = {r.name: r.step_ms() for r in runs}

    def cell(run: RunRecord) -> str:
        base = base_of.get(run.name)
        if base is run:
            return "1.00x"
        return str(stats.speedup(steps[run.name], steps[base.name])) if base else "-"

    return Column(f"vs {values[0]}" if len(values) == 1 else "vs baseline", cell)


def columns(runs: list[RunRecord]) -> list[Column]:
    """The table's columns for these (done) runs: what varies, then the figures that any of them has."""
    axes, fields = varying(runs)
    summaries = [r.summary for r in runs]
    found = [Column(a, lambda r, a=a: r.axis(a)) for a in axes]
    found += [Column(f, lambda r, f=f: str(r.fields.get(f))) for f in fields]
    found += [Column(f"{p} ms", lambda r, p=p: _ms(r.summary.median(p))) for p in phase_columns(runs)]
    # With CUDA events the phase columns are device time; the host's time to issue a step goes beside them
    # (well under the device's: the GPU sets the pace).
    if any(s.uses_events for s in summaries):
        found.append(Column("step host ms", lambda r: _ms(r.summary.host_median("step"))))
    trains = any(s.samples_per_s is not None for s in summaries)
    if trains:
        found.append(
            Column("samples/s", lambda r: f"{r.summary.samples_per_s:.1f}" if r.summary.samples_per_s else "-")
        )
    if any(s.host_syncs_per_step is not None for s in summaries):
        found.append(Column("syncs/step", lambda r: str(r.summary.host_syncs_per_step)))
    if any(s.flops_per_step for s in summaries):  # achieved TFLOP/s, and the fraction of the GPU's peak (MFU)
        found.append(Column("TFLOP/s", lambda r: f"{r.summary.tflops_per_s:.3g}" if r.summary.tflops_per_s else "-"))
        found.append(Column("MFU", lambda r: f"{r.summary.mfu:.1%}" if r.summary.mfu else "unknown"))
    found.append(speedup_column(runs))
    if trains:
        found.append(Column("output type", lambda r: r.summary.output_type or "-"))
    return found


def ordered(runs: list[RunRecord]) -> list[RunRecord]:
    """Rows by group, each group's baseline first."""
    axes, fields = varying(runs)
    order = axis_order(runs)
    return sorted(
        runs,
        key=lambda r: (group_key(r, axes, fields), not r.is_baseline, tuple(r.axis(a) for a in order)),
    )


def noisy(run: RunRecord) -> list[str]:
    """Why a done run's step times are too spread to trust (analysis/summary.py), if they are."""
    steps = run.step_ms()
    return noise(steps, phase_stats(steps))


def context(runs: list[RunRecord]) -> str:
    """What every row shares: the constant axes, the device and the software."""
    axes, _ = varying(runs)
    fixed = " ".join(f"{a}={runs[0].axis(a)}" for a in axis_order(runs) if a in runs[0].axes and a not in axes)
    env_run = machines.usual(runs) or runs[0]
    on_gpu = bool((env_run.env or {}).get("gpu"))
    device = env_run.device if on_gpu else f"{env_run.device} ({env_run.threads} threads)"
    timer = next((r.summary.timer for r in runs if r.summary), "?")
    at_once = sorted({r.status.parallelism for r in runs})
    return (
        f"{fixed} | {device} | torch {env_run.torch_version} | timer {timer} | {'/'.join(map(str, at_once))} run(s) "
        "at a time | medians over measured steps; samples/s over the whole window (stalls included); "
        "vs: speed-up over the baseline of the same row group [95% CI]"
    )


def flags(runs: list[RunRecord]) -> list[str]:
    """The runs that failed or have not finished, and the done ones whose figures are suspect."""
    done = [r for r in runs if r.state == DONE]
    found = [f"FAILED {r.name}: {r.error_line()}" for r in runs if r.state == FAILED]
    found += [f"{r.state.upper()} {r.name}" for r in runs if r.state not in FINAL]
    found += [f"NOISY {r.name}: {reason}" for r in done for reason in noisy(r)]
    found += [
        f"NON-FINITE LOSS {r.name}: {r.summary.nonfinite_losses} of {r.summary.steps} measured steps' losses are "
        "NaN or infinite: the run did not train"
        for r in done
        if r.summary and r.summary.nonfinite_losses
    ]
    found += [
        f"BATCH REDUCED {r.name}: ran at batch {r.summary.batch_size}, not {r.fields['model.batch_size']} "
        "(out of memory; model.batch_size_retry)"
        for r in done
        if r.summary and r.summary.batch_size and r.fields.get("model.batch_size") not in (None, r.summary.batch_size)
    ]
    found += machines.elsewhere(runs)
    found += [
        f"SHARED GPU {r.name}: other processes on its GPU: {', '.join(shared)}"
        for r in done
        if r.summary and (shared := r.summary.gpu_neighbours())
    ]
    return found


def table_view(sweep_dir: Path, runs: list[RunRecord]) -> View:
    done = [r for r in runs if r.state == DONE and r.summary]
    failed = sum(r.state == FAILED for r in runs)
    pending = sum(r.state not in FINAL for r in runs)
    counts = (
        f"{sweep_dir}: {len(runs)} runs, {len(runs) - failed - pending} done, {failed} failed, {pending} not finished"
    )
    return View(
        title="Runs",
        above=[counts, *([context(runs)] if done else [])],
        columns=columns(done) if done else [],
        items=ordered(done) if done else [],
        flags=flags(runs),
        empty="",
    )


def view(sweep_dir: Path, names: list[str] | None = None, vs: str | None = None) -> View:
    """The table of the sweep's runs (or the named ones), compared along `vs` (groups.compared_along)."""
    return table_view(sweep_dir, compared_along(load_sweep(sweep_dir, names), vs))
