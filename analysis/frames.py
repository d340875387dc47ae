"""Sweeps' records as pandas DataFrames, for a notebook: a row per run, or a row per measured step.

    from perfsweep import notebook
    runs = notebook.runs("runs/default")           # a row per run
    steps = notebook.steps("runs/default")         # a row per measured step of every done run

A run's row holds its sweep, name, id and state, then its records flattened by pandas (`json_normalize`):
`axes.*` (each axis's value), `config.*` (the config it ran with), `summary.*` (each phase's median ms as
`summary.median_ms.step_ms`, samples/s, FLOPs, memory, the host's shares, the device's energy...), `machine.*` (CPU
or GPU, torch), `status.*` (when it started and finished, its job and host, its error), and `repro` (the command that
measures its configuration again) with `repro_code` (the commit it must run at, or that its code was dirty).
Per-step and per-block lists stay out of it: `steps` reads the step rows, with pyarrow.
A figure a run did not record is missing (NaN or None), never 0.
"""

from pathlib import Path
from typing import Any

from perfsweep.records import DONE, STEPS, RunRecord, load_sweep, read_steps

# Summary fields of a list per step, block or side: `steps` and the records hold them, not a row per run.
PER_STEP = ("paired", "host", "ranks", "neighbours", "clocks")
STATUS = ("started_at", "finished_at", "job_id", "host")  # where and when it ran


def runs(*sweeps: str | Path) -> Any:
    """A row per run of the sweeps (folders a launch wrote), in the order of their records."""
    import pandas as pd

    return pd.json_normalize([_record(Path(sweep), run) for sweep in sweeps for run in load_sweep(Path(sweep))])


def steps(*sweeps: str | Path) -> Any:
    """A row per measured step of each done run: the run's sweep, name and axes, then its step file's columns."""
    import pandas as pd

    frames = [
        read_steps(run.path / STEPS).to_pandas().assign(sweep=str(sweep), run=run.name, **_axes(run))
        for sweep in sweeps
        for run in load_sweep(Path(sweep))
        if run.state == DONE
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _record(sweep: Path, run: RunRecord) -> dict[str, Any]:
    summary = run.summary.to_json() if run.summary else {}
    status = run.status.to_json()
    return {
        "sweep": str(sweep),
        "run": run.name,
        "run_id": run.run_id,
        "state": run.state,
        "axes": run.axes,
        "config": run.fields,
        "summary": {key: value for key, value in summary.items() if key not in PER_STEP} | {"host": _host_shares(run)},
        "machine": run.machine if run.env else {},
        "status": {key: status.get(key) for key in STATUS} | {"error": _error(run)},
        "repro": run.repro.command if run.repro else None,
        "repro_code": run.repro.caveat() if run.repro else None,
    }


def _host_shares(run: RunRecord) -> dict[str, Any]:
    host = run.summary.host if run.summary else None
    if host is None:
        return {}
    return {
        "others_share": host.others_share,
        "steal_share": host.steal_share,
        "resolution": host.resolution,
        "energy_j": host.energy_j,
        "joules_per_sample": host.joules_per_sample(run.summary.samples_per_s),
        "gpu_sm_mhz_start": host.gpu_sm_mhz_start,
        "gpu_sm_mhz_end": host.gpu_sm_mhz_end,
    }


def _error(run: RunRecord) -> str | None:
    return run.status.error_line() or None


def _axes(run: RunRecord) -> dict[str, str]:
    return {f"axes.{axis}": value for axis, value in run.axes.items()}
