"""A run's records as typed values: its summary, its status, its config record, and its measured steps."""

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any, NotRequired

from typing_extensions import TypedDict  # pydantic validates typing's TypedDict only from Python 3.12

from perfsweep.records.files import (
    CONFIG,
    ENV,
    STATUS,
    STEPS,
    SUMMARY,
    RecordError,
    Unreadable,
    declare,
    flatten,
    known_fields,
    quarantine,
    read_record,
    read_steps,
)
from perfsweep.records.host import HostState
from perfsweep.records.repro import Repro, code_of
from perfsweep.records.status import DONE, RunError, Status, read_status
from perfsweep.records.sweep import Baseline, planned_runs


class GpuProcess(TypedDict):
    pid: int
    name: str
    used_mib: NotRequired[int | None]


class Neighbours(TypedDict, total=False):
    """Other work beside a run, at its start or end."""

    gpu_processes: list[GpuProcess] | None  # on its GPU; None where nvidia-smi cannot tell (and on a CPU)
    loadavg: list[float]


class Clock(TypedDict):
    """The device's clock at a run's start or end."""

    source: str  # gpu_sm_clock or cpu_mhz
    mhz: float | None
    temperature_c: NotRequired[float | None]


class Reference(TypedDict):
    """The machine's speed: a fixed workload timed after the run's window (train/reference.py)."""

    workload: str  # what was timed, where: "matmul 256x256 float32 on cpu, 2 threads"
    ms: float  # its shortest time of several


class Compiled(TypedDict):
    """What a compiled run's model ran as: counted in one step after its window (train/compiled_graphs.py)."""

    backend: str
    graphs_run: int | None  # Dynamo's graphs of one op or more that ran in that step; None where unknown
    graph_breaks: dict[str, int]  # Dynamo's graph breaks in its process, by reason's first line (a paired one's sides)


@dataclasses.dataclass(frozen=True)
class RankSummary:
    """How the ranks of a run across ranks compare: summary.json's `ranks`."""

    world_size: int
    step_ms: list[float]  # each rank's median step with gradient sync
    # DDP only: each rank's median step without sync (its own, waiting for no other)
    own_step_ms: list[float] | None = None
    straggler_rank: int | None = None  # DDP only: the rank the others wait for, the slowest without sync
    straggler_index: float | None = None  # DDP only: the slowest rank's median own step over the ranks' median
    # The communication backward did not hide: the least over the ranks of the median backward with gradient sync
    # less without it (DDP's window, FSDP's probe after its window); None without dist.exposed_comm
    exposed_comm_ms: float | None = None
    exposed_comm_share: float | None = None  # of the slowest rank's median synced step
    # On 2+ ranks: the gradient bytes a rank reduces a step, and the bus bandwidth that took at least. It is
    # counted as nccl-tests counts it: DDP's all-reduce moves bytes x 2(n-1)/n, FSDP's reduce-scatter bytes x
    # (n-1)/n; its time is bounded by backward's with sync
    comm_bytes_per_step: int | None = None
    bus_gbps_min: float | None = None
    threads: list[int] | None = None  # each rank's CPU threads (torch's)
    node_threads: int | None = None  # the most CPU threads the ranks used together on one node

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RankSummary":
        return cls(**known_fields(cls, data))

    @classmethod
    def from_flat(cls, data: dict[str, Any]) -> "RankSummary | None":
        """The rank fields of a summary.json written before `ranks` held them.

        Such a file holds them at its top level, as _FLAT_RANKS names them.

        Returns:
            None for a run in one process.
        """
        if data.get("world_size") is None:
            return None
        return cls(**{field: data[flat] for flat, field in _FLAT_RANKS.items() if flat in data})


@dataclasses.dataclass(frozen=True)
class PairedSummary:
    """How a run shared its process with the other sides of its comparison (pairing=auto): summary.json's `paired`."""

    sides: list[str]  # the run names of the process's sides
    side: int  # this run's place in `sides`
    blocks: list[int]  # which side ran each block of measured steps, in the order they ran
    block_steps: list[int]  # the steps of each of a side's blocks, in order
    process: str = ""  # the process's own id, the same on each of its sides

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PairedSummary":
        return cls(**known_fields(cls, data))


# A summary.json's top-level rank fields, before `ranks` held them -> RankSummary's fields.
_FLAT_RANKS = {
    "world_size": "world_size", "rank_step_ms": "step_ms", "rank_own_step_ms": "own_step_ms",
    "straggler_rank": "straggler_rank", "straggler_index": "straggler_index", "exposed_comm_ms": "exposed_comm_ms",
    "exposed_comm_share": "exposed_comm_share", "comm_bytes_per_step": "comm_bytes_per_step",
    "bus_gbps_min": "bus_gbps_min",
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Summary:
    """What summary.json holds: the measured window's medians per phase, throughput, memory, losses."""

    median_ms: dict[str, float]  # {phase}_ms (device time) and {phase}_host_ms (host time)
    phases: tuple[str, ...] = ()  # the workload's phases, in order ("step" is the whole step)
    workload: str = ""
    steps: int = 0
    steps_per_s: float | None = math.nan  # None where NaN (JSON has no NaN)
    window_s: float | None = math.nan
    window_ended_at: float | None = None  # unix time when the window's last step had finished on the device
    timer: str = "?"  # cuda_event or perf_counter
    peak_memory_mib: float | None = None
    peak_memory_kind: str = ""  # cuda_max_allocated or process_max_rss; _all_sides: a paired process's, every side's
    # explain=true: each phase's memory in the profiled window (train/op_breakdown.py), MiB; kind: cuda_peak_allocated
    # (the caching allocator's peak, all the process holds) or profiler_net_allocated (a CPU's: allocated less freed)
    phase_memory_mib: dict[str, float] | None = None
    phase_memory_kind: str = ""
    loss_first: float | None = None  # None where NaN or infinite (JSON has neither)
    loss_last: float | None = None
    nonfinite_losses: int | None = None  # measured steps whose loss was NaN or infinite (None: no loss)
    host_syncs_per_step: int | None = None  # counted on CUDA; None on a CPU
    flops_per_step: int | None = None  # counted in one step after the window (train/flops.py); None: not countable
    tflops_per_s: float | None = None  # flops_per_step / the median device step time
    peak_tflops: float | None = None  # the device's dense peak for the run's dtype, where known (never a CPU)
    neighbours: dict[str, Neighbours] = dataclasses.field(default_factory=dict)  # other work beside the run: start, end
    clocks: dict[str, Clock] = dataclasses.field(default_factory=dict)  # the device's clock: start, end
    reference: Reference | None = None  # the machine's speed after the window; None: not timed
    compiled: Compiled | None = None  # a compiled run's: what its model ran as; None where not compiled
    params: int | None = None  # a model step's: the model's parameters
    batch_size: int | None = None  # a model step's: the batch it ran at (below the asked one after an OOM retry)
    samples_per_s: float | None = None  # a training step's
    output_type: str | None = None  # a training step's: the type of the model's output
    # A run across ranks (dist=ddp/fsdp): how its ranks compare; None for a run in one process. Its figures above
    # are then one rank's synced window steps (the straggler's), and samples/s all ranks' together.
    ranks: RankSummary | None = None
    paired: PairedSummary | None = None  # a side of a paired run: the process it shared; None for a process of its own
    # The host over its measured blocks (records/host.py); None for a run across ranks, or recorded before it was read
    host: HostState | None = None

    def __post_init__(self) -> None:
        untimed = [f"{phase}_ms" for phase in (*self.phases, "step") if f"{phase}_ms" not in self.median_ms]
        if untimed:
            raise ValueError(f"median_ms has no {untimed[0]}: every phase it names, and the step, have a median")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Summary":
        """A summary from summary.json, its rank fields in `ranks` or, written before, at its top level."""
        known = known_fields(cls, data)
        ranks = RankSummary.from_json(data["ranks"]) if data.get("ranks") else RankSummary.from_flat(data)
        paired = PairedSummary.from_json(data["paired"]) if data.get("paired") else None
        host = HostState.from_json(data["host"]) if data.get("host") else None
        parts = {"ranks": ranks, "paired": paired, "host": host}
        return cls(**{**known, "phases": tuple(known.get("phases", ())), **parts})

    def to_json(self) -> dict[str, Any]:
        """summary.json's content; a training step's fields, `ranks`, `paired` and `host` where the run has them."""
        data = dataclasses.asdict(self)
        data["phases"] = list(self.phases)
        return {k: v for k, v in data.items() if v is not None or k not in (*STEP_SUMMARY, "ranks", "paired", "host")}

    def median(self, phase: str) -> float | None:
        """The median device time of `phase` (or "step") in ms."""
        return self.median_ms.get(f"{phase}_ms")

    def host_median(self, phase: str) -> float | None:
        """The median host time of `phase` (or "step") in ms: how long the host took to issue it."""
        return self.median_ms.get(f"{phase}_host_ms")

    @property
    def mfu(self) -> float | None:
        """Model FLOP utilization: achieved TFLOP/s over the device's peak; None where either is unknown."""
        return self.tflops_per_s / self.peak_tflops if self.tflops_per_s and self.peak_tflops else None

    @property
    def uses_events(self) -> bool:
        """Phase times are the device's (CUDA events), with host times apart."""
        return self.timer == "cuda_event"

    def gpu_neighbours(self) -> list[str]:
        """The other processes seen on the run's GPU when it started or ended: its timings are suspect."""
        return sorted(
            {
                f"{p['name']} (pid {p['pid']}, {when})"
                for when, seen in self.neighbours.items()
                for p in (seen or {}).get("gpu_processes") or []
            }
        )


STEP_SUMMARY = ("samples_per_s", "batch_size", "output_type", "params")  # left out of a function benchmark's


@dataclasses.dataclass(frozen=True)
class _SummaryFile(Summary):
    """summary.json's shape: a Summary, whose rank fields a file written before `ranks` holds at its top level."""

    world_size: int | None = None
    rank_step_ms: list[float] | None = None
    rank_own_step_ms: list[float] | None = None
    straggler_rank: int | None = None
    straggler_index: float | None = None
    exposed_comm_ms: float | None = None
    exposed_comm_share: float | None = None
    comm_bytes_per_step: int | None = None
    bus_gbps_min: float | None = None


class Gpu(TypedDict):
    name: str
    driver: NotRequired[str | None]


class Environment(TypedDict, total=False):
    """What env.json holds that readers take apart; the rest (host, versions, flags) is kept as it is."""

    gpu: Gpu | None  # absent on a CPU
    packages: dict[str, str | None]  # name -> version (None: not installed)


declare(SUMMARY, "summary", _SummaryFile)
declare(ENV, "environment record", Environment)


@dataclasses.dataclass
class RunRecord:
    """One run's records, as analysis reads them."""

    path: Path  # the run's folder
    name: str
    run_id: str
    axes: dict[str, str]
    axis_order: list[str]  # the axes in the order the workload declares them
    named_axes: list[str]  # axes shown by their value alone; the others (sizes, replicate) as axis=value
    baseline: Baseline
    fields: dict[str, Any]  # the run's config, flattened (model.batch_size, steps, ...)
    status: Status
    summary: Summary | None
    env: Environment | None
    # The axes it is compared along, each with the value of the run it is compared with (its config's `baselines`).
    # None for a run planned before runs recorded them: the analysis then takes its workload's and the natural ones.
    baselines: dict[str, str] | None = None
    repro: Repro | None = None  # the command that measures its configuration again; None: planned before runs had one
    # The measured steps by column, as they are read (from steps.parquet) or given (a sweep made in memory).
    measured: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def state(self) -> str:
        return self.status.state

    def error_line(self, limit: int = 300) -> str:
        return (self.status.error or RunError("?")).line(limit)

    def axis(self, name: str) -> str:
        """The run's value of axis `name`; "-" where it has none. Every run has a workload, declared as an axis
        or not (the training step's runs are named without it)."""
        if name == "workload" and name not in self.axes:
            return str(self.fields.get("workload.name", "-"))
        return self.axes.get(name, "-")

    def axis_label(self, name: str) -> str:
        """The axis's value as a run's name shows it: `resnet50`, or `size=1000` for a size."""
        named = name in self.named_axes or name == "workload"  # (the training step's runs do not declare it)
        return self.axis(name) if named else f"{name}={self.axis(name)}"

    def steps(self, columns: list[str]) -> dict[str, Any]:
        """The measured (not warm-up) steps, in order: column -> numpy array; each column read once (the table,
        its flags, the plots and the comparisons all want them)."""
        missing = [c for c in columns if c not in self.measured]
        if missing:
            from perfsweep.records.columns import numpy_of  # pyarrow: only where steps are read

            table = read_steps(self.path / STEPS).select([*missing, "warmup"])
            keep = ~numpy_of(table.column("warmup"))
            self.measured.update({c: numpy_of(table.column(c))[keep] for c in missing})
        return {c: self.measured[c] for c in columns}

    def step_ms(self) -> Any:
        """The measured steps' times (ms), in order."""
        return self.steps(["step_ms"])["step_ms"]

    @property
    def reads_model(self) -> bool:
        """Whether the run's step read a model's settings: its batch and input size are then the run's."""
        return "model" in self.axes or "model" in (self.fields.get("workload.reads") or ())

    @property
    def batch(self) -> int | None:
        """The batch a model run ran at (smaller than asked after an out-of-memory retry).

        None where the run records none.
        """
        return (self.summary and self.summary.batch_size) or self.fields.get("model.batch_size")

    @property
    def device(self) -> str:
        """The GPU's name, else the CPU's."""
        env = self.env or {}
        return (env.get("gpu") or {}).get("name") or f"CPU {env.get('cpu', '?')}"

    @property
    def threads(self) -> str:
        """The CPU threads the run's steps had on its machine.

        A run across ranks had its ranks' threads on one node, together.
        Its world size chose them (`asked`).
        Its process's own may be fewer or more.
        """
        ranks = self.summary.ranks if self.summary else None
        if ranks and ranks.node_threads:
            return str(ranks.node_threads)
        return str((self.env or {}).get("torch_threads", "?"))

    @property
    def torch_version(self) -> str:
        return str(((self.env or {}).get("packages") or {}).get("torch", "?"))

    @property
    def machine(self) -> dict[str, str]:
        """The machine the run's figures depend on, by label: the GPU with its driver, CUDA and cuDNN, else the CPU
        with torch's threads; and torch. Not the host: the nodes of one cluster are alike. `asked` names the labels
        that the run's config chose."""
        env = self.env or {}
        gpu = env.get("gpu") or {}
        if not gpu:
            return {"CPU": str(env.get("cpu", "?")), "threads": self.threads, "torch": self.torch_version}
        return {
            "GPU": str(gpu.get("name")),
            "driver": str(gpu.get("driver")),
            "torch": self.torch_version,
            "CUDA": str(env.get("cuda")),
            "cuDNN": str(env.get("cudnn")),
        }

    @property
    def asked(self) -> set[str]:
        """The machine's labels that the run's config chose, which are configuration, not machine.

        They are its torch where it asked for one (the `torch` axis), with the CUDA and cuDNN its build brings.
        They are its threads where it set them (`threads=`), or where it ran across ranks.
        Its world size then chose them.
        Its ranks share a host's CPUs, or each is a Slurm task with its own.
        """
        torch = {"torch", "CUDA", "cuDNN"} if self.fields.get("torch", "current") != "current" else set()
        ranks = self.summary is not None and self.summary.ranks is not None
        return torch | ({"threads"} if self.fields.get("threads") is not None or ranks else set())


def _files(recorded: Any) -> tuple[tuple[str, str], ...]:
    """config.json's `repro_files` as Repro holds them: nothing where the record has none."""
    return tuple((recorded or {}).items())


def _readable(path: Path) -> Any:
    record = read_record(path)
    if isinstance(record, Unreadable):
        raise RecordError(record)
    return record


# What a done run must be able to read; a run being planned has a config record in runs.jsonl instead.
DONE_RECORDS = (STATUS, CONFIG, ENV, SUMMARY, STEPS)


def unreadable_records(run_dir: Path) -> list[Unreadable]:
    """The records of a done run that cannot be read (or are missing); [] for a run that is not done."""
    status = read_status(run_dir)
    if status.unreadable:
        return [Unreadable(run_dir / STATUS, status.unreadable)]
    if status.state != DONE:
        return []
    contents = {name: read_record(run_dir / name) for name in DONE_RECORDS[1:]}
    broken = [
        value or Unreadable(run_dir / name, "missing")
        for name, value in contents.items()
        if value is None or isinstance(value, Unreadable)
    ]
    if broken:
        return broken
    untimed = _phases_untimed(run_dir, contents[SUMMARY], contents[STEPS])
    return [untimed] if untimed else []


def _phases_untimed(run_dir: Path, summary: dict[str, Any], steps: Any) -> Unreadable | None:
    """A done run's step file lacks the times of a phase its summary names: the views read them all."""
    columns = steps.schema_arrow.names
    missing = [phase for phase in summary.get("phases", []) if f"{phase}_ms" not in columns]
    if not missing:
        return None
    why = f"not a valid step file: no column {missing[0]}_ms, the times of the phase {missing[0]!r} of {SUMMARY}"
    return Unreadable(run_dir / STEPS, why)


def is_done(run_dir: Path, moved: list[str] | None = None) -> bool:
    """The run is done and every record of it can be read. Given `moved`, its unreadable records are moved
    aside (it will run again) and a line for each is added there (for a launcher, which holds the lock)."""
    broken = unreadable_records(run_dir)
    if moved is not None:
        for record in broken:
            aside = quarantine(record.path) if record.path.exists() else None
            moved.append(f"{record}: {f'moved aside to {aside.name}; ' if aside else ''}the run will run again")
    return not broken and read_status(run_dir).state == DONE


def load_run(run_dir: Path, planned: dict[str, Any] | None = None) -> RunRecord:
    """A run's records; `planned` (its line of runs.jsonl) stands in for config.json until the run starts.
    RecordError if one of them cannot be read."""
    status = read_status(run_dir)
    if status.unreadable:
        raise RecordError(Unreadable(run_dir / STATUS, status.unreadable))
    config = _readable(run_dir / CONFIG) or planned
    if config is None:
        raise RecordError(Unreadable(run_dir / CONFIG, "missing, and the run is not in runs.jsonl"))
    summary, steps = _readable(run_dir / SUMMARY), _readable(run_dir / STEPS)
    if status.state == DONE:  # a done run's measurements must be there, readable, and of every phase
        for name, record in ((STEPS, steps), (SUMMARY, summary)):
            if record is None:
                raise RecordError(Unreadable(run_dir / name, "missing"))
        untimed = _phases_untimed(run_dir, summary, steps)
        if untimed:
            raise RecordError(untimed)
    axes, env = config["axes"], _readable(run_dir / ENV)
    code = code_of(status.code_under_test, env, status.code)
    return RunRecord(
        path=run_dir,
        name=run_dir.name,
        run_id=config["run_id"],
        axes=axes,
        axis_order=config.get("axis_order") or sorted(axes),  # records written before the order was kept
        named_axes=config.get("named_axes") or [a for a in axes if a != "replicate"],
        baseline=Baseline(config["baseline"]["axis"], config["baseline"]["value"]),
        fields=flatten(config["config"]),
        status=status,
        summary=Summary.from_json(summary) if summary is not None else None,
        env=env,
        baselines=config["config"].get("baselines"),
        repro=Repro(tuple(config["repro"]), code, _files(config.get("repro_files"))) if config.get("repro") else None,
    )


_warned: set[tuple[Path, str]] = set()


def load_sweep(sweep_dir: Path, names: list[str] | None = None) -> list[RunRecord]:
    """Every run in `sweep_dir` (or the named ones); an unreadable run is skipped with a warning naming it."""
    import pyarrow as pa

    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"no sweep folder at {sweep_dir}")
    planned = planned_runs(sweep_dir)
    if names is None:
        names = sorted(set(planned) | {p.parent.name for p in sweep_dir.glob(f"*/{CONFIG}")})
    runs = []
    for run_dir in (sweep_dir / name for name in names):
        try:
            runs.append(load_run(run_dir, planned.get(run_dir.name)))
        except (RecordError, OSError, KeyError, TypeError, pa.ArrowException) as error:
            message = f"skipping run {run_dir.name}: {error}"
            if (run_dir, message) not in _warned:  # one warning per run, however many views load the sweep
                _warned.add((run_dir, message))
                warnings.warn(message, stacklevel=2)
    return runs
