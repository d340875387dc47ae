"""A sweep's runs in the columns of timm's benchmark result files, to diff perfsweep's figures against timm's.

    python -m perfsweep.commands table SWEEP_DIR --csv timm

timm's `benchmark.py` writes `results/benchmark-{infer,train}-*.csv` (huggingface/pytorch-image-models).
It writes one row per model, fastest first.
The headers here are read from two of its files:
`benchmark-infer-fp32-nchw-pt240-cpu-i7_12700h-dynamo.csv` and `benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv`.

- Step times are median milliseconds per step.
- Parameter counts are in millions.
- GMACs are per sample: FLOPs / 2, counted by perfsweep (train/flops.py).
- Both have 2 decimals, as timm's; a tiny model's, which would read 0.00, have 2 significant digits.
- Activations (`infer_macts`) are not counted here and stay empty.

timm writes a file per setting (precision, memory format...).
Where a sweep's runs differ in more than the model, the settings that differ follow timm's columns.
Each gets one column, so that every row names its run.
"""

from pathlib import Path

from perfsweep.analysis.groups import MEASURING, UNSET, varying
from perfsweep.analysis.render import Column, View
from perfsweep.records import DONE, RunRecord, load_sweep

HEADERS = {
    "infer_step": [
        "model", "infer_img_size", "infer_samples_per_sec", "infer_step_time", "infer_batch_size", "param_count",
        "infer_gmacs", "infer_macts",
    ],
    "train_step": ["model", "train_samples_per_sec", "train_step_time", "train_batch_size", "train_img_size",
                   "param_count"],
}  # fmt: skip


def _hundredths(value: float) -> str:
    """`value` to 2 decimals, as timm writes it.

    Below 0.005, which would read 0.00, it keeps 2 significant digits.
    """
    return f"{value:.2f}" if abs(value) >= 0.005 else f"{value:.2g}"


def _gmacs(run: RunRecord) -> str:
    flops = run.summary.flops_per_step
    return _hundredths(flops / 2 / 1e9 / run.batch) if flops else ""


CELLS = {
    "model": lambda r: str(r.fields["model.name"]),
    "img_size": lambda r: str(r.fields["model.image_size"]),
    "samples_per_sec": lambda r: f"{r.summary.samples_per_s:.2f}",
    "step_time": lambda r: f"{r.summary.median('step'):.3f}",
    "batch_size": lambda r: str(r.batch),
    "param_count": lambda r: _hundredths(r.summary.params / 1e6) if r.summary.params else "",
    "gmacs": _gmacs,
    "macts": lambda r: "",
}
PER_MODEL = ("model", "model.image_size", "model.batch_size", *MEASURING)  # what timm's own columns tell


def setting_columns(runs: list[RunRecord]) -> list[Column]:
    """A column for each axis and setting, besides the model's, whose values differ between the runs.

    A file of timm's has a row per run, so the replicate and seed get columns too where they differ.
    """
    axes, fields = varying(runs)
    fields += [f for f in ("replicate", "seed") if len({repr(r.fields.get(f)) for r in runs}) > 1]
    columns = [Column(a, lambda r, a=a: r.axis(a)) for a in axes if a not in PER_MODEL]
    return columns + [Column(f, lambda r, f=f: str(r.fields.get(f, UNSET))) for f in fields if f not in PER_MODEL]


def timm_view(sweep_dir: Path) -> View:
    """The sweep's done model runs as timm's CSV rows; ValueError unless they are all of one model workload."""
    runs = [r for r in load_sweep(sweep_dir) if r.state == DONE and r.summary]
    kinds = sorted({r.summary.workload for r in runs})
    if len(kinds) != 1 or kinds[0] not in HEADERS:
        raise ValueError(
            f"{sweep_dir}: timm's CSV holds the runs of one model workload (one of: {', '.join(HEADERS)}); "
            f"this sweep's done runs are of: {', '.join(kinds) or 'none'}"
        )
    columns = [Column(h, CELLS[h.removeprefix(kinds[0].split("_")[0] + "_")]) for h in HEADERS[kinds[0]]]
    columns += setting_columns(runs)
    fastest = sorted(runs, key=lambda r: -r.summary.samples_per_s)
    return View(title=f"timm {kinds[0]}", above=[], columns=columns, items=fastest)
