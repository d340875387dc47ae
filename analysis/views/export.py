"""A sweep's figures in the formats of the dashboards people already run.

    perfsweep export RUNS... --format pytorch-v3|bmf [--out FILE]

- pytorch-v3: a JSON list of records of the PyTorch OSS benchmark database's v3 schema (pytorch/test-infra's
  `oss_ci_benchmark_v3` table, which its upload-benchmark-results action fills).
  A record per configuration and metric: the step and each phase in ms, samples per second, and J/sample where read.
  Its `benchmark_values` hold one value per run (process), as its `statistic` says.
  A run across ranks adds its straggler index, exposed communication and bus bandwidth.
  Each has a value per run, its ranks together.
  Its benchmark's `extra_info` holds the table's flags of the configuration, where it has any.
  It holds the sweep's order effect too (`sweep_flags`), which moved every configuration.
  It also counts its done runs (`runs`).
  It counts all its runs too, done or not (`runs_planned`).
- bmf: Bencher Metric Format JSON, a benchmark per configuration (`<sweep file>/<each axis=value> <its size>`).
  BMF holds one value a benchmark.
  A compiled configuration whose runs ran eagerly (NOT COMPILED) is named so: its times start a series of their own.
  Two sweeps that give the same benchmark are refused.
  `latency` is the step time in nanoseconds, Bencher's unit, `throughput` samples per second, and
  `joules-per-sample` the energy, where read.
  Each phase is a measure of its own (`latency-forward`...).
  A run across ranks adds `straggler-index`, `latency-exposed-comm` and `bus-bandwidth-min` (GB/s).
  Each value is the geometric mean over the runs of each run's own value.
  Its bounds are the 95% t-interval across the runs, where there are two or more.

timm's columns are `table SWEEP --csv timm`.
Extra information is written as strings, as the v3 schema's maps hold them.
Figures are named by the sweep file, not the folder: a sweep per commit stays one series on the dashboard.
The commits, the code under test's and perfsweep's own, are in `dependencies` (pytorch-v3).
"""

import dataclasses
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from perfsweep.analysis.groups import MEASURING, UNSET, Configuration, configurations, labels, varying
from perfsweep.analysis.statistics import host_flags
from perfsweep.analysis.statistics.drift import order_effect
from perfsweep.analysis.statistics.variance import across_runs
from perfsweep.analysis.timeline import sweep_folders
from perfsweep.analysis.views import table
from perfsweep.analysis.views.table import joules_per_sample, ran_eagerly, stalled
from perfsweep.records import DONE, RunRecord, load_sweep

FORMATS = ("pytorch-v3", "bmf")
PER_PROCESS = ", a value per process"
PER_RUN = ", a value per run (its ranks together)"


@dataclasses.dataclass(frozen=True)
class Metric:
    """A figure of a configuration: each run's value, what it is, and its BMF measure."""

    unit: str
    values: list[float]  # each run's
    statistic: str  # what each run's value is, as the table computes it
    bmf: str  # Bencher's measure
    bmf_scale: float = 1.0  # into the measure's unit (latency: nanoseconds)


# A run across ranks' figures: summary.json's `ranks` field -> (metric, unit, statistic, BMF measure, BMF scale)
RANK_METRICS = {
    "straggler_index": (
        "straggler_index",
        "x",
        "each run's slowest rank's median step without gradient sync over its ranks' median" + PER_RUN,
        "straggler-index",
        1.0,
    ),
    "exposed_comm_ms": (
        "exposed_comm_ms",
        "ms",
        "each run's least over its ranks of the median backward with gradient sync less without" + PER_RUN,
        "latency-exposed-comm",
        1e6,
    ),
    "bus_gbps_min": (
        "bus_gbps_min",
        "GB/s",
        "each run's gradient reduction's bus bandwidth at least (nccl-tests' count, over the least median backward "
        "with gradient sync)" + PER_RUN,
        "bus-bandwidth-min",
        1.0,
    ),
}


def _series(run: RunRecord, sweep_dir: Path) -> str:
    """What names a sweep's figures on a dashboard: its sweep file, the same from one commit's sweep to the next.

    Its folder's name (commit-<sha> in CI) would start a new series at each commit.
    """
    return str(run.fields.get("sweep") or sweep_dir.name)


def _done(sweep_dir: Path) -> tuple[list[RunRecord], list[str], dict[str, int]]:
    """The sweep's done runs, and the fields that vary among all its runs, done or not.

    A configuration whose runs failed then leaves the others' names as they are.
    Each run's name gives its configuration's count of runs.
    That count holds runs done or not.
    """
    every = load_sweep(sweep_dir)
    planned = {r.name: len(c.runs) for c in configurations(every) for r in c.runs} if every else {}
    return [r for r in every if r.state == DONE and r.summary], varying(every)[1], planned


def _metrics(config: Configuration) -> dict[str, Metric]:
    """A configuration's figures by name.

    They are the step's and each phase's median ms, samples/s, and J/sample where read.
    A run across ranks adds its straggler index, exposed communication and bus bandwidth.
    Each is there where every run has it.
    """
    first = config.first.summary
    per = PER_RUN if first.ranks else PER_PROCESS
    found = {
        f"{phase}_ms": Metric(
            "ms",
            [r.summary.median(phase) for r in config.runs],
            "each run's median over its measured steps" + per,
            "latency" if phase == "step" else f"latency-{phase}",
            1e6,
        )
        for phase in ("step", *first.phases)
        if all(r.summary.median(phase) is not None for r in config.runs)
    }
    rates = [r.summary.samples_per_s for r in config.runs]
    if all(rates):
        whole = "each run's samples over its whole measured window (stalls included)" + per
        found["samples_per_s"] = Metric("samples/s", rates, whole, "throughput")
    energy = [joules_per_sample(r) for r in config.runs]
    if all(energy):
        per_sample = "each run's energy over its measured window per sample" + per
        found["joules_per_sample"] = Metric("J/sample", energy, per_sample, "joules-per-sample")
    for field, (name, unit, statistic, measure, scale) in RANK_METRICS.items():
        values = [getattr(r.summary.ranks, field) if r.summary.ranks else None for r in config.runs]
        if all(value is not None for value in values):
            found[name] = Metric(unit, values, statistic, measure, scale)
    return found


def _named(run: RunRecord, fields: list[str]) -> list[str]:
    """The fields that name a configuration.

    They are its model's batch and input size.
    A workload names them where it reads a model.
    Then come the arguments of the user's model or step.
    Those are model.kwargs and workload.kwargs that no axis shows.
    Then comes its workload, where that is a registered one other than the training step and no axis names it.
    Then come `fields`: those its sweep varies.
    A workload that reads no model (a function benchmark) has no size.
    Sweeps of one sweep file at two batch sizes, two widths of a model, or training and inference, are two series.
    So are two settings of a step's own argument.
    Each sweep holds those constant all the same.
    """
    named = []
    if run.reads_model:
        size = ("model.batch_size", "model.inputs" if run.fields.get("model.inputs") else "model.image_size")
        named = [field for field in size if run.fields.get(field) is not None]
    shown = {v for k, v in run.fields.items() if k.startswith("workload.axes.") and isinstance(v, str)}
    named += sorted(key for key in run.fields if key.startswith(table.OWN_KWARGS) and key not in shown | set(fields))
    registered = not run.fields.get("workload._target_")
    if registered and run.fields.get("workload.name") not in (None, "train_step") and "workload" not in run.axes:
        named.append("workload.name")
    return named + [field for field in fields if field not in named]


def _runner(run: RunRecord) -> dict[str, Any]:
    env = run.env or {}
    gpu = env.get("gpu") or {}
    return {
        "name": str(env.get("hostname", "")),
        "type": "cuda" if gpu else "cpu",
        "cpu_info": str(env.get("cpu", "")),
        "cpu_count": env.get("cpu_count") or 0,
        "gpu_info": str(gpu.get("name", "")),
        "gpu_count": 1 if gpu else 0,
        "avail_gpu_mem_in_gb": gpu.get("memory_gib") or 0,
    }


def _dependencies(run: RunRecord) -> dict[str, dict[str, str]]:
    packages = (run.env or {}).get("packages") or {}
    found = {"pytorch": {"repo": "pytorch/pytorch", "version": str(packages.get("torch", ""))}}
    tested, ci = run.status.code_under_test or {}, run.status.ci or {}
    if tested.get("commit"):
        found["code_under_test"] = {
            "repo": str(named if (named := _ci_named(tested, ci)) else tested.get("repository", "")),
            "branch": str(ci.get("branch") or "") if _ci_named(tested, ci) or not ci.get("repository") else "",
            "sha": str(tested["commit"]),
            "version": "dirty" if tested.get("dirty") else "",
        }
    own = (run.env or {}).get("code") or {}
    if own.get("commit"):  # perfsweep's own code: its timer, its harness, and the model where perfsweep's measured
        found["perfsweep"] = {
            "repo": "perfsweep",
            "sha": str(own["commit"]),
            "version": "dirty" if own.get("dirty") else "",
        }
    return found


def _ci_named(tested: dict[str, Any], ci: dict[str, Any]) -> str:
    """The repository under test as its CI names it.

    That name is the same on every runner.
    It is '' where the CI checked out another repository.
    A URL's scheme, host, credentials and .git go.
    """
    named = str(ci.get("repository") or "").rstrip("/")
    if not named or ci.get("commit") not in (None, tested.get("commit")):
        return ""
    if "://" in named:  # https://user:token@host/group/name.git
        named = named.split("://", 1)[1].split("/", 1)[-1]
    elif "@" in named and ":" in named:  # git@host:group/name.git
        named = named.split(":", 1)[1]
    return named.removesuffix(".git")


def pytorch_v3(sweep_dir: Path) -> list[dict[str, Any]]:
    runs, fields, planned = _done(sweep_dir)
    if not runs:
        return []
    found = []
    configs = configurations(runs)
    names = benchmarks(configs, fields)
    measured = [field for field in fields if field not in MEASURING]
    drifted = order_effect(configs)  # a sweep's own flag: every configuration's times moved with their place
    for config in configs:
        fields_of = config.first.fields
        compiled = fields_of.get("compile.enabled") and fields_of.get("compile.mode")
        eager_after_all = _uncompiled(config)
        reads = fields_of.get("workload.reads")  # None: a record older than the field, of a model's step
        benchmark = {
            "name": f"perfsweep {_series(config.first, sweep_dir)}",
            "mode": "training"
            if "backward" in config.first.summary.phases or "optim" in (reads or [])
            else "inference",
            "dtype": str(fields_of.get("precision.name", "")) if reads is None or "precision" in reads else "",
            "extra_info": {
                "configuration": names[config.key],
                "runs": str(len(config.runs)),
                "runs_planned": str(planned.get(config.first.name, len(config.runs))),  # the done and the others
                # the sweep's folder and when its last run ended: what tells one sweep of a sweep file from another
                "sweep_folder": sweep_dir.name,
                "finished_at": max(str(r.status.finished_at or "") for r in config.runs),
            }
            | _state(config)
            | ({"sweep_flags": "; ".join(drifted)} if drifted else {}),
        }
        model = {
            **_model_named(fields_of, reads, str(config.first.summary.workload)),
            "backend": f"compile:{compiled}{eager_after_all}" if compiled else "eager",
            "origins": ["perfsweep"],
            # its axes, its size and the settings its sweep varied: a dashboard's series keep them apart
            "extra_info": {axis: str(value) for axis, value in config.first.axes.items() if axis != "replicate"}
            | {field: str(fields_of.get(field, UNSET)) for field in _named(config.first, measured)},
        }
        for name, metric in _metrics(config).items():
            extra = {"unit": metric.unit, "statistic": metric.statistic}
            extra |= _stalls(config) if metric.unit == "samples/s" else {}
            found.append(
                {
                    "benchmark": benchmark,
                    "model": model,
                    "metric": {"name": name, "benchmark_values": metric.values, "extra_info": extra},
                    "runners": [_runner(config.first)],
                    "dependencies": _dependencies(config.first),
                }
            )
    return found


def _uncompiled(config: Configuration) -> str:
    """' NOT COMPILED' where a compiled configuration's runs ran eagerly (table.ran_eagerly); else ''."""
    return " NOT COMPILED" if any(ran_eagerly(run) for run in config.runs) else ""


def _state(config: Configuration) -> dict[str, str]:
    """What the table flags of its runs, for a dashboard that shows none of its flags.

    `host` is what other processes and steal took of their CPUs (host_flags.taken).
    Where their windows were too short to tell, it says so: unknown is not none.
    `flags` is the table's flags column (table.row_flags): 'NOISY 2/4; STALLED 1/4'.
    Each is left out where there is nothing to say.
    """
    hosts = [r.summary.host for r in config.runs if r.summary and r.summary.host]
    host = host_flags.taken(config.runs) or (f"unknown: {short}" if (short := host_flags.too_short(hosts)) else "")
    flags = table.row_flags(config)
    return ({"host": host} if host else {}) | ({"flags": flags} if flags else {})


def _stalls(config: Configuration) -> dict[str, str]:
    """How many of its runs stalled, by the table's test (STALLED): their samples/s counts the stall.

    It reads each run's steps, as the table does.
    """
    count = sum(bool(stalled(run)) for run in config.runs if run.summary)
    return {"stalled": f"{count} of {len(config.runs)} runs: their samples/s counts the stall"} if count else {}


def _model_named(fields: dict[str, Any], reads: list[str] | None, workload: str) -> dict[str, str]:
    """The record's model name and type.

    They are the model's, where the workload reads one.
    A model of the user's own is its import path.
    Its `source` keeps the default, which builds nothing.
    A workload that reads no model is named by itself.
    """
    if reads is None or "model" in reads:
        return {
            "name": str(fields.get("model.name", workload)),
            "type": str(fields.get("model._target_") or fields.get("model.source", "")),
        }
    return {"name": workload, "type": str(fields.get("workload._target_") or "function")}


def _measure(values: list[float], scale: float) -> dict[str, float]:
    """The geometric mean over runs, with its interval across them.

    Where a run's value is 0, the median alone.
    """
    if min(values) <= 0:  # no exposed communication: backward hid it all
        return {"value": statistics.median(values) * scale}
    value, low, high = across_runs(np.array(values))
    measure = {"value": value * scale}
    if not math.isnan(low):
        measure |= {"lower_value": low * scale, "upper_value": high * scale}
    return measure


def bmf(sweep_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    runs, fields, _ = _done(sweep_dir)
    if not runs:
        return {}
    configs = configurations(runs)
    names = benchmarks(configs, fields)
    found = {}
    for config in configs:
        measures = {metric.bmf: _measure(metric.values, metric.bmf_scale) for metric in _metrics(config).values()}
        # eager times under a compiled configuration's name would join its series: they get a series of their own
        found[f"{_series(config.first, sweep_dir)}/{names[config.key]}{_uncompiled(config)}"] = measures
    return found


def benchmarks(configs: list[Configuration], fields: list[str]) -> dict[tuple, str]:
    """Each configuration's name in BMF.

    It is every axis's value, then what _named gives: its size and what else it holds constant, then the fields its
    sweep varies (`fields`).

    A name of what varies alone would change as the sweep grows, and match another model's in another sweep.
    A run records the axes its workload reads alone.
    Configurations apart only in how long they measured are named by that too.
    """
    short = labels(configs)

    def name(config: Configuration, kept: list[str]) -> str:
        run = config.first
        parts = [f"{a}={run.axis(a)}" for a in run.axis_order if a != "replicate" and run.axis(a) != "-"]
        return " ".join([*parts, *(f"{f}={run.fields.get(f, UNSET)}" for f in kept)]) or short[config.key]

    names = {c.key: name(c, _named(c.first, [f for f in fields if f not in MEASURING])) for c in configs}
    if len(set(names.values())) < len(names):
        names = {c.key: name(c, _named(c.first, fields)) for c in configs}
    return names


def export(paths: list[Path], form: str) -> Any:
    """The sweeps under `paths` in format `form`: pytorch-v3's records, or BMF's benchmarks, of them all."""
    if form not in FORMATS:
        raise ValueError(f"--format {form}: not a format; the formats: {', '.join(FORMATS)}")
    folders = sweep_folders(paths)
    if form == "pytorch-v3":
        return [record for folder in folders for record in pytorch_v3(folder)]
    found, named_by = {}, {}
    for folder in folders:
        for name, measures in bmf(folder).items():
            if name in found:
                raise ValueError(
                    f"--format bmf: {named_by[name]} and {folder} both give benchmark {name}, and a BMF report holds "
                    "one value a benchmark: export each sweep to a report of its own"
                )
            found[name], named_by[name] = measures, folder
    return found
