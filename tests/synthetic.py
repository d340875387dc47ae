"""Synthetic sweeps of known truth, made in memory as the views read them, to calibrate the views' statistics.

Each configuration has a true step time. Each run (one process) draws its own offset from it (log-normal,
`run_sd`), and with probability `bimodal` lands in a slower mode (another cuDNN algorithm, +15%). Its steps follow
an AR(1) process in log time (`rho`, `step_sd`) and still decay from a warm-up (`warmup`, the first measured
step's excess, falling by half every two steps). Runs are interleaved in rounds, as a sweep with repeats runs
them. The step splits into forward, backward and optimizer in fixed shares, each with its own noise.

A paired sweep (pairing=auto) runs each round of a row group's sides in one process: they share its offset, and each
side adds its own small one (`side_sd`).
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

from perfsweep import records
from perfsweep.records import lifecycle
from perfsweep.records.host import HostBlock, HostState
from perfsweep.records.run import PairedSummary, RunRecord, Summary
from perfsweep.records.status import DONE, Status
from perfsweep.records.sweep import Baseline

PHASES = ("forward", "backward", "optimizer")
SHARES = (0.3, 0.6, 0.1)


@dataclasses.dataclass(frozen=True)
class Noise:
    run_sd: float = 0.02  # sd of a run's log offset: the spread between processes
    step_sd: float = 0.03  # sd of a step's log time within a run
    rho: float = 0.3  # lag-1 autocorrelation of consecutive steps
    warmup: float = 0.05  # the first measured step's excess over the run's level
    bimodal: float = 0.05  # the chance that a run lands in a mode 15% slower
    steps: int = 10
    side_sd: float = 0.01  # sd of a side's log offset within a process its comparison's sides share


def run_steps(
    level_ms, noise: Noise, rng: np.random.Generator, process: float | None = None, runs: tuple[int, ...] = ()
) -> np.ndarray:
    """One run's measured step times (ms); `process` is the offset of a process it shares with other sides.

    `runs` is the shape of an array of runs drawn at once (level_ms broadcast to it), their steps the last axis.
    """
    own = rng.normal(0, noise.run_sd, runs) if process is None else process + rng.normal(0, noise.side_sd, runs)
    offset = own + np.where(rng.random(runs) < noise.bimodal, math.log(1.15), 0.0)
    shocks = rng.normal(0, noise.step_sd * math.sqrt(1 - noise.rho**2), (*runs, noise.steps))
    shocks[..., 0] = rng.normal(0, noise.step_sd, runs)  # the first step drawn from the stationary spread
    ar = lfilter([1.0], [1.0, -noise.rho], shocks)  # ar[t] = rho ar[t-1] + shocks[t], along the steps
    decay = noise.warmup * 0.5 ** (np.arange(noise.steps) / 2)
    return np.expand_dims(level_ms, -1) * np.exp(offset[..., None] + ar) * (1 + decay)


def record(name: str, axes: dict[str, str], step_ms: np.ndarray, replicate: int, position: int, rng) -> RunRecord:
    """A done run's records, as load_run would give them, with its steps in memory."""
    measured = {"step_ms": step_ms}
    for phase, share in zip(PHASES, SHARES, strict=True):
        measured[f"{phase}_ms"] = step_ms * share * np.exp(rng.normal(0, 0.01, len(step_ms)))
    fields = {f"{axis}.name": value for axis, value in axes.items()}
    fields |= {"sweep": "synthetic", "replicate": replicate, "seed": replicate, "order": "interleaved"}
    fields |= {"steps": len(step_ms), "model.batch_size": 16}
    started = f"2026-01-01T00:{position // 60:02d}:{position % 60:02d}+00:00"
    return RunRecord(
        path=None,  # type: ignore[arg-type]  # in memory: nothing is read from a folder
        name=f"{name}-replicate={replicate}",
        run_id=f"{name}-{replicate}",
        axes={**axes, "replicate": str(replicate)},
        axis_order=[*axes, "replicate"],
        named_axes=list(axes),
        baseline=Baseline("input_type", "tensor"),
        fields=fields,
        status=Status(state=DONE, started_at=started),
        summary=summary_of(measured),
        env={"cpu": "synthetic", "packages": {"torch": "synthetic"}},
        measured=measured,
    )


def summary_of(measured: dict[str, np.ndarray]) -> Summary:
    """A run's summary of these measured steps, as a run writes it."""
    medians = dict(zip(measured, map(float, np.median(np.stack(list(measured.values())), axis=1)), strict=True))
    return Summary(median_ms=medians, phases=PHASES, workload="model_train", steps=len(measured["step_ms"]))


def sweep(
    levels: dict[tuple[str, str], float], runs: int, noise: Noise, rng: np.random.Generator, paired: bool = False
) -> list[RunRecord]:
    """A sweep's done runs: `levels` maps (input_type, memory_format) to its true step time (ms); each
    configuration runs `runs` times, interleaved in rounds. `paired`: each round of a memory format's input types
    shares one process."""
    found = []
    for replicate in range(runs):
        processes: dict[str, float] = {}
        for (input_type, memory_format), level in levels.items():
            axes = {"input_type": input_type, "memory_format": memory_format}
            process = processes.setdefault(memory_format, rng.normal(0, noise.run_sd)) if paired else None
            steps = run_steps(level, noise, rng, process)
            found.append(record(f"{input_type}-{memory_format}", axes, steps, replicate, len(found), rng))
        if paired:
            found[-len(levels) :] = sides_of(found[-len(levels) :])
    return found


def sides_of(round_runs: list[RunRecord]) -> list[RunRecord]:
    """One round's runs, each marked a side of the process its memory format's runs shared."""
    marked = []
    for run in round_runs:
        sides = [other.name for other in round_runs if other.axes["memory_format"] == run.axes["memory_format"]]
        process = f"{run.axes['memory_format']}-{run.fields.get('replicate')}"
        paired = PairedSummary(sides=sides, side=sides.index(run.name), blocks=[], block_steps=[], process=process)
        marked.append(dataclasses.replace(run, summary=dataclasses.replace(run.summary, paired=paired)))
    return marked


def grid(slowdown: dict[str, float] | None = None, formats: tuple[str, ...] = ("contiguous",)) -> dict:
    """The default sweep's configurations at 50 ms, each input type slowed by its factor in `slowdown`."""
    slowdown = slowdown or {}
    return {(t, f): 50.0 * slowdown.get(t, 1.0) for t in ("tensor", "subclass", "tensorbase") for f in formats}


def write(runs: list[RunRecord], sweep_dir: Path) -> Path:
    """The runs' records in a sweep folder, as a run writes them, for the commands that read a folder."""
    for run in runs:
        config: dict = {}
        for key, value in run.fields.items():
            *parents, last = key.split(".")
            node = config
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        run_dir = sweep_dir / run.name
        run_dir.mkdir(parents=True)
        record = {"run_id": run.run_id, "name": run.name, "axes": run.axes, "axis_order": run.axis_order}
        record |= {"named_axes": run.named_axes, "baseline": dataclasses.asdict(run.baseline), "config": config}
        record |= {"repro": list(run.repro.words)} if run.repro else {}
        records.write_json(run_dir / records.CONFIG, record)
        steps = [dict(zip(run.measured, values, strict=True)) for values in zip(*run.measured.values(), strict=True)]
        records.write_steps(
            run_dir / records.STEPS, [row | {"step": i, "warmup": False} for i, row in enumerate(steps)]
        )
        summary = run.summary
        medians = {"phases": list(summary.phases), "median_ms": summary.median_ms, "steps": summary.steps}
        records.write_json(run_dir / records.SUMMARY, medians | {"workload": summary.workload})
        lifecycle.finish(run_dir, code=run.status.code, code_under_test=run.status.code_under_test)
    return sweep_dir


def beside(runs: list[RunRecord], others_cpu_s: float, block_s: float = 1.0) -> list[RunRecord]:
    """The runs with a host state of 10 blocks of `block_s` on 2 CPUs, in each of which other processes took
    `others_cpu_s` a second. Blocks of 1 s are long enough for /proc/stat's ticks to tell; blocks of 0.01 s are not."""
    own, others = 1.2 * block_s, others_cpu_s * block_s
    block = HostBlock(wall_s=block_s, cpus=2, process_cpu_s=own, busy_s=own + others, tick_s=0.01, steal_s=0.0)
    host = HostState.of([block] * 10)
    return [dataclasses.replace(run, summary=dataclasses.replace(run.summary, host=host)) for run in runs]


def timed(runs: list[RunRecord], ms: float, rng: np.random.Generator) -> list[RunRecord]:
    """The runs, each with the machine's fixed workload timed after its window at about `ms`, 0.5% apart."""
    workload = "matmul 384x384 float32 on cpu, 2 threads, fastest of 21"
    return [
        dataclasses.replace(
            run,
            summary=dataclasses.replace(run.summary, reference={"workload": workload, "ms": ms * rng.normal(1, 0.005)}),
        )
        for run in runs
    ]


SUBCLASS_VS_TENSOR = {"label": "subclass vs Tensor", "of": {"input_type": "subclass"}, "over": {"input_type": "tensor"}}


def publish(sweep_dir: Path, comparisons: list[dict]) -> None:
    """A CPU's published figures of these comparisons, kept in the sweep's folder as a launch keeps a config dir's."""
    source = {"title": "t", "device": "cpu", "hardware": "h", "software": "s", "source": "x"}
    records.write_json(sweep_dir / records.PUBLISHED, source | {"comparisons": comparisons})


def published_sweep(folder: Path, noise: Noise, seed: int) -> Path:
    """Three runs a configuration, the subclass's 30% slower, beside a CPU's published 0.77x of it: its folder."""
    runs = sweep(grid({"subclass": 1.3}), 3, noise, np.random.default_rng(seed))
    sweep_dir = write(runs, folder)
    publish(sweep_dir, [SUBCLASS_VS_TENSOR | {"speedup": 0.77}])
    return sweep_dir


def with_code(runs: list[RunRecord], files: str) -> list[RunRecord]:
    """The runs, each recording the code under test's files: `files` twelve times, as their hash."""
    return [dataclasses.replace(r, status=dataclasses.replace(r.status, code={"mylib": files * 12})) for r in runs]
