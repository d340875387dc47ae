"""The ranks of a sweep's runs across ranks (dist=ddp, dist=fsdp): each rank's median phase times, with gradient
sync and without, over each configuration's runs (ranks.parquet). The table shows a run as its rank whose steps
are the run's; this view shows every rank beside it."""

from pathlib import Path

import numpy as np

from perfsweep.analysis.groups import Configuration, configurations, labels, ordered
from perfsweep.analysis.render import Column, View, figure
from perfsweep.analysis.statistics.speedup import geometric_mean
from perfsweep.records import DONE, RANKS, RunRecord, load_sweep, read_steps
from perfsweep.records.columns import numpy_of


def rank_steps(run: RunRecord) -> dict[tuple[int, bool, bool], dict[str, np.ndarray]]:
    """Each (rank, gradient sync, probe) of a run across ranks, in that order: its measured steps' times per phase
    (ms, the step's among them), the window's apart from FSDP's probe after it; empty for a run in one process."""
    if not (run.summary and run.summary.ranks and (run.path / RANKS).is_file()):
        return {}
    names = [f"{p}_ms" for p in (*run.summary.phases, "step")]
    table = read_steps(run.path / RANKS)
    columns = {c: numpy_of(table.column(c)) for c in [*names, "rank", "grad_sync", "warmup"]}
    measured = ~columns["warmup"]
    # (records from before the probe have no such column: none of their measured steps is one)
    probed = numpy_of(table.column("probe")) if "probe" in table.column_names else ~measured
    found = {}
    for rank in sorted(set(columns["rank"][measured].tolist())):
        for sync, probe in ((True, False), (False, False), (True, True), (False, True)):
            keep = measured & (columns["rank"] == rank) & (columns["grad_sync"] == sync) & (probed == probe)
            if keep.any():
                found[(rank, sync, probe)] = {name: columns[name][keep] for name in names}
    return found


def rank_medians(run: RunRecord) -> dict[tuple[int, bool, bool], dict[str, float]]:
    return {key: {n: float(np.median(times)) for n, times in steps.items()} for key, steps in rank_steps(run).items()}


def rows(config: Configuration) -> list[tuple[Configuration, int, bool, bool, dict[str, float | None]]]:
    """The configuration's rank rows: each phase's geometric mean over its runs of the rank's median."""
    per_run = [rank_medians(run) for run in config.runs]
    found = []
    for key in sorted({key for medians in per_run for key in medians}, key=lambda k: (k[0], k[2], not k[1])):
        names = next(medians[key] for medians in per_run if key in medians)
        means = {n: geometric_mean(m[key][n] for m in per_run if key in m) for n in names}
        found.append((config, *key, means))
    return found


def sync_label(sync: bool, probe: bool) -> str:
    return ("yes" if sync else "no") + (" (probe)" if probe else "")


def view(sweep_dir: Path, names: list[str] | None = None) -> View | None:
    """Every rank of the sweep's runs across ranks; None where it has none."""
    across = [run for run in load_sweep(sweep_dir, names) if run.state == DONE and rank_steps(run)]
    if not across:
        return None
    configs = ordered(configurations(across))
    label = labels(configs)
    phases = (*across[0].summary.phases, "step")
    columns = [
        Column("configuration", lambda row: label[row[0].key]),
        Column("runs", lambda row: str(len(row[0].runs))),
        Column("rank", lambda row: str(row[1])),
        Column("grad sync", lambda row: sync_label(row[2], row[3])),
        *[Column(f"{p} ms", lambda row, p=p: figure(row[4].get(f"{p}_ms"))) for p in phases],
    ]
    above = [
        f"{sweep_dir}: the ranks of its runs across ranks: each rank's median per phase, with gradient sync and "
        "without (DDP's blocks in its window; FSDP's in its probe after the window, where a step without sync leaves "
        "the optimizer nothing to step); over a configuration's runs, their geometric mean"
    ]
    items = [row for config in configs for row in rows(config)]
    return View("Ranks", above, columns, items, flags=[], empty="")
