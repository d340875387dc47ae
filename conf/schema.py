"""Typed schema of a perfsweep config, registered in Hydra's ConfigStore.

Every axis is a config group under conf/ whose yaml files are validated against
the dataclass of that group; a wrong type in any field fails at composition with
the field's full key, and so does a value outside a closed set (the enums below), naming the ones allowed.

Code of the user's own comes in by import path: a `_target_` (a model, an input type, a workload) and
`model.inputs`, each built where the run runs (train/user_targets.py). Such a field is part of a run's identity only
once it is set (IDENTITY_WHEN_SET): adding such a field to the schema changes no run's id.
"""

import dataclasses
import enum
import re
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

IDENTITY_WHEN_SET = {"identity_when_set": True}  # a field left out of a run's identity while at its default


def _unset(default: Any, factory: Any = None) -> Any:
    """A field that counts in a run's identity only once set (IDENTITY_WHEN_SET)."""
    if factory is not None:
        return field(default_factory=factory, metadata=IDENTITY_WHEN_SET)
    return field(default=default, metadata=IDENTITY_WHEN_SET)


def _closed_set(name: str, values: str) -> type[enum.StrEnum]:
    """An enum of the allowed values of a setting, each member the string it names (it compares equal to it)."""
    return enum.StrEnum(name, values.split(), module=__name__)


MemoryFormat = _closed_set("MemoryFormat", "contiguous channels_last")  # of the model (not under FSDP) and its input
# the submitit executor: a process per job here, every run in the launcher's process, or Slurm
LauncherName = _closed_set("LauncherName", "local debug slurm")
# how each run gets its own process: forked from a warm job, or a new interpreter per job
Isolation = _closed_set("Isolation", "fork spawn")
TrackerMode = _closed_set("TrackerMode", "offline online disabled")  # W&B's mode
# the order runs run in: interleaved (A B C A B C), shuffled (seeded) or grouped (A A B B C C)
Order = _closed_set("Order", "interleaved shuffled grouped")
# Where the sides of a comparison run (sweeps/pairing.py):
# - auto: one process per round where they can share it, else a process each;
# - in_process: one process per round, and a sweep whose sides cannot share one is refused;
# - process: each side in a process of its own.
Pairing = _closed_set("Pairing", "auto in_process process")
# one run across ranks: none (one process), DDP, or FSDP2 (fully_shard); their process-group backend
DistName = _closed_set("DistName", "none ddp fsdp")
DistBackend = _closed_set("DistBackend", "auto gloo nccl")


@dataclass
class ModelConf:
    name: str = "resnet18"  # the model's name in its source (timm, torchvision, perfsweep); with a _target_, its label
    source: str = "torchvision"  # who builds it by name: "timm", "torchvision" or "perfsweep" (not with a _target_)
    # A model of your own, built with Hydra's instantiate.
    # It is the import path of an nn.Module class, or of a function that returns one (mylib.models.Net).
    # "": the model `name` of `source`.
    _target_: str = _unset("")
    # Keyword arguments of the model's constructor: +model.kwargs.width=64.
    # The constructor is yours, timm's create_model or torchvision's get_model.
    # num_classes and in_chans go to a _target_ that takes arguments of those names.
    kwargs: dict[str, Any] = _unset(None, dict)
    # The import path of your batch factory, called (batch_size, device) -> (inputs, targets).
    # inputs: a tensor, a tuple (model(*inputs)) or a dict (model(**inputs)).
    # targets: for the loss, or None where the model returns its loss.
    # "": random images of image_size and in_chans, and class labels below num_classes.
    inputs: str = _unset("")
    image_size: int = 224  # square input images, pixels per side
    batch_size: int = 64  # samples per step
    batch_size_retry: bool = False  # on out-of-memory, retry with a smaller batch (recorded; changes what is measured)
    num_classes: int = 1000  # classifier outputs (no pretrained weights are loaded)
    in_chans: int = 3  # image channels


@dataclass
class MemoryFormatConf:
    name: MemoryFormat = MemoryFormat.contiguous


@dataclass
class PrecisionConf:
    name: str = "fp32"  # the label of this precision setting
    autocast_dtype: str | None = None  # "float16" or "bfloat16" to run under autocast
    tf32: bool = False  # allow TF32 tensor cores for matmul and cuDNN convolutions
    param_dtype: str | None = None  # "float16" or "bfloat16": cast the model and inputs (pure half precision)
    grad_scaler: bool = False  # scale the loss with GradScaler (one host sync per step)


@dataclass
class InputTypeConf:
    name: str = "tensor"  # a type registered in train/inputs.py; with a _target_, its label
    # A type of your own, by import path. It is one of:
    # - a torch.Tensor subclass: the batch is as_subclass'd to it in the data phase;
    # - a function that takes the batch tensor and returns the tensor the model gets.
    # "": by `name`.
    _target_: str = _unset("")


@dataclass
class CompileConf:
    name: str = "eager"  # the label of this compile setting
    enabled: bool = False  # wrap the model in torch.compile
    mode: str | None = None  # torch.compile mode: default, reduce-overhead, max-autotune...
    backend: str = "inductor"  # torch.compile backend
    fullgraph: bool = False  # fail on graph breaks instead of falling back to eager


# Modes whose CUDA graphs a run on a CPU cannot record, each with the mode Inductor compiles it as there
AS_ON_A_CPU = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


@dataclass
class OptimConf:
    name: str = "torch"  # whose optimizer: "torch" (torch.optim) or "fastai" (fastai.optimizer, needs fastai)
    algorithm: str = "sgd"  # "sgd" or "adam"
    lr: float = 0.01  # learning rate
    momentum: float = 0.9  # SGD momentum (Adam: beta1)


@dataclass
class LossConf:
    name: str = "torch"  # "torch" (nn.CrossEntropyLoss) or "fastai" (CrossEntropyLossFlat, needs fastai)


@dataclass
class BaselineConf:
    axis: str = ""  # the workload's own axis, whose values it is compared along first (input_type, impl...)
    value: str = ""  # the value of the run it is compared with (tensor, the first impl...)


# The value of an axis that its other values are compared with, where a sweep varies the axis and runs it.
# The workload's declared baseline comes first for its axis; a sweep's `baselines` come before both.
NATURAL_BASELINES = {
    "input_type": "tensor", "memory_format": "contiguous", "precision": "fp32", "compile": "eager",
    "loss": "torch", "optim": "torch", "workload": "train_step",
}  # fmt: skip
# Axes whose values are other work, not another way to do the same work: never compared by a speed-up.
# A model, a problem size (a workload's `sizes`), ranks and a replicate are such axes.
NOT_COMPARED = ("model", "dist", "world_size", "replicate")
# Settings whose values do a step's same work another way: `--vs threads=1` compares them, as an axis.
SAME_WORK = ("threads", "cudnn_benchmark")
# Settings whose values do the same work a sample in batches of another size: `--vs model.batch_size=8` compares
# their time per sample, as an axis.
PER_SAMPLE = ("model.batch_size",)


@dataclass
class WorkloadConf:
    """What a run times: a training step, or one call of a function benchmark (train/functions/).

    Its yaml (conf/workload/<name>.yaml) sets its settings and declares what the planner needs to know
    of it (DECLARATION): the fields it reads, its axes and its baseline. Its code is a class registered
    under the same name in train/workloads.py (phases, checks, the step itself).
    """

    name: str = "train_step"  # a registered workload: train_step or a function benchmark; with a _target_, its label
    # A step of your own: the import path of a class with `phases` and `step(index, clock)` (docs/your-code.md).
    _target_: str = _unset("")
    kwargs: dict[str, Any] = _unset(None, dict)  # settings of your step's own, read from cfg.workload.kwargs
    impl: str = "default"  # the function's implementation compared (loop, broadcast, nonzero, static...)
    size: int = 1000  # the function's problem size (samples, points, elements per row: see its docstring)
    batch: int = 1  # independent problems per call
    features: int = 16  # feature dimension
    units: int = 1  # repeated units of a program (nested benchmark)
    cast_to_tensor: bool = _unset(True)  # fastai_step: fastai's CastToTensor callback in the Learner (its default)
    # Declared by the workload's yaml, not set per run (and not part of a run's identity):
    reads: list[str] = field(default_factory=list)  # run fields it reads beyond READ_BY_EVERY_WORKLOAD
    axes: dict[str, str] = field(default_factory=dict)  # axis -> config key: named by value, in this order
    sizes: list[str] = field(default_factory=list)  # workload fields that are axes too, shown as field=value
    baseline: BaselineConf = field(default_factory=BaselineConf)


DECLARATION = ("reads", "axes", "sizes", "baseline")


CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # a control character: a newline, a tab...
UNLIMITED_MIN = 60 * 24 * 365  # a local warm job's own limit: none that a sweep reaches


@dataclass
class LauncherConf:
    name: LauncherName = LauncherName.local
    parallelism: int = 1  # jobs at once (Slurm: the array's %N); on one machine, concurrent runs distort timings
    # On this host (local, debug): each run's time limit, from its start.
    # A run that reaches it is stopped and recorded failed (RunTimeout); the sweep goes on.
    # Slurm: the job's --time, in whole minutes, for a pack of runs_per_job runs.
    # A process that measures a comparison's sides (pairing=auto or in_process) has this limit for each side.
    # It is the cluster's limit: submitit requeues a job that reaches it.
    timeout_min: float = 60
    timeout_retries: int = 0  # times a run that reached timeout_min runs again (Slurm: its job is requeued)
    gpus_per_node: int | None = None  # GPUs per job; None: 1 if this host has one (local), none (Slurm)
    gpus: list[int] | None = None  # local: the GPUs runs use, one run per GPU at a time; None: the first, if any
    runs_per_job: int = 1  # runs one after another in one job: one Python/torch start-up for K runs
    # How each run gets its own process:
    # - fork: the job imports torch & co once and forks a child per run (local: one job for the sweep);
    # - spawn: a new interpreter per job;
    # - None: fork where the platform has it (Linux).
    isolation: Isolation | None = None
    wait: bool | None = None  # follow the sweep until it ends; None: yes for local/debug, no for Slurm
    lock: bool = True  # one launcher at a time per sweep folder (false: for a filesystem without working flock)
    poll_s: float | None = None  # seconds between looks at the runs while following; None: 0.5 here, 5 on Slurm
    # The launch's wall time, in seconds from its start (planning included): no process (or job) starts that would end
    # past it, at what those before took, and a process still measuring when it runs out is stopped. The runs stopped
    # or not started stay pending. It bounds no Slurm launch. None: no budget.
    budget_s: float | None = None
    # Slurm only
    partition: str | None = None  # --partition
    account: str | None = None  # --account
    qos: str | None = None  # --qos
    cpus_per_task: int | None = None  # --cpus-per-task
    mem_gb: int | None = None  # --mem, in GB
    constraint: str | None = None  # --constraint
    exclusive: bool = False  # --exclusive: no other job on the node while a run measures
    max_array_size: int | None = None  # split arrays above this; None: the cluster's MaxArraySize
    setup: list[str] = field(default_factory=list)  # shell lines before the job runs (module load...)
    sbatch_extra: dict[str, Any] = field(default_factory=dict)  # more #SBATCH options, {option: value}
    srun_args: list[str] = field(default_factory=list)  # more srun arguments
    nodes: int = 1  # a run across ranks (dist=ddp/fsdp): its nodes, dist.world_size tasks (ranks) on each

    def problems(self) -> list[str]:
        """What is wrong with these values, wherever the jobs run."""
        problems = self.control_characters()
        for key in ("parallelism", "runs_per_job"):
            if getattr(self, key) < 1:
                problems.append(f"launcher.{key}={getattr(self, key)} must be 1 or more")
        for key in ("max_array_size", "cpus_per_task", "mem_gb"):
            if getattr(self, key) is not None and getattr(self, key) < 1:
                problems.append(f"launcher.{key}={getattr(self, key)} must be 1 or more (or null: the cluster's)")
        if self.gpus_per_node is not None and self.gpus_per_node < 0:
            problems.append(
                f"launcher.gpus_per_node={self.gpus_per_node} must be 0 or more (or null: see conf/schema.py)"
            )
        if not 0 < self.timeout_min <= UNLIMITED_MIN:  # NaN included
            problems.append(
                f"launcher.timeout_min={self.timeout_min:g} must be positive and at most {UNLIMITED_MIN} (a year), "
                "in minutes (0.5 is 30 s)"
            )
        if self.timeout_retries < 0:
            problems.append(f"launcher.timeout_retries={self.timeout_retries} must be 0 or more")
        if self.gpus is not None and (
            self.name != "local" or len(set(self.gpus)) != len(self.gpus) or min(self.gpus, default=0) < 0
        ):
            problems.append(
                f"launcher.gpus={self.gpus} must list distinct GPU indices (0, 1...) for launcher=local, e.g. "
                "launcher.gpus=[0,1]"
            )
        if self.budget_s is not None and not self.budget_s > 0:  # NaN included
            problems.append(f"launcher.budget_s={self.budget_s} must be positive, in seconds (or null: no budget)")
        if self.poll_s is not None and self.poll_s <= 0:
            problems.append(f"launcher.poll_s={self.poll_s} must be positive (or null: 0.5 s here, 5 s on Slurm)")
        return problems

    def control_characters(self) -> list[str]:
        """Strings with a control character.

        A newline in a Slurm option would end the #SBATCH block.
        sbatch would run the rest as a shell command, and ignore the options after it.
        """
        texts = {f"launcher.{f.name}": getattr(self, f.name) for f in dataclasses.fields(self)}
        texts |= {f"launcher.setup[{i}]": line for i, line in enumerate(self.setup)}
        texts |= {f"launcher.srun_args[{i}]": arg for i, arg in enumerate(self.srun_args)}
        for key, value in self.sbatch_extra.items():
            texts |= {f"launcher.sbatch_extra key {key!r}": key, f"launcher.sbatch_extra.{key}": value}
        return [
            f"{where}={text!r} holds a control character (a newline, a tab...): launcher settings take none"
            for where, text in texts.items()
            if isinstance(text, str) and CONTROL.search(text)
        ]


@dataclass
class TrackerConf:
    mode: TrackerMode = TrackerMode.offline
    project: str = "perfsweep"  # W&B project
    entity: str | None = None  # W&B entity (user or team); None: the key's default
    system_metrics: bool = False  # W&B's sampler of system metrics runs beside the timed loop
    timeout_s: float = 120.0  # a run waits this long for W&B after it is done, then leaves it behind

    def problems(self) -> list[str]:
        """What would stop W&B working here: a bad timeout, or no key where W&B is online."""
        from perfsweep.conf.tracking import has_wandb_key

        if self.timeout_s <= 0:
            return [f"tracker.timeout_s={self.timeout_s} must be positive: how long a done run waits for W&B"]
        if self.mode == "online" and not has_wandb_key():
            return [
                "tracker.mode=online needs a W&B API key (run `wandb login` or set WANDB_API_KEY); "
                "tracker.mode=offline records locally and `wandb sync` uploads later"
            ]
        return []


@dataclass
class CostConf:
    per_hour: float | None = None  # the machine's price an hour; the table adds a cost per million samples

    def problems(self) -> list[str]:
        if self.per_hour is not None and not 0 < self.per_hour < float("inf"):
            return [
                f"cost.per_hour={self.per_hour} must be a positive, finite number: the machine's price an hour "
                "(2.5), or null"
            ]
        return []


@dataclass
class AutoConf:
    """repeats=auto: round after round until every comparison of the sweep is decided, or a cap is reached."""

    half_width: float = 0.02  # decided: an interval that excludes 1.00x, or lies within -+half_width of it (same)
    max_runs: int = 10  # the cap on runs per configuration (the last look)
    max_minutes: float = 30.0  # the cap on the sweep's wall time: no look starts whose rounds would end past it


COMMIT = re.compile(r"^[0-9a-f]{40}$")  # a package pin of this form names a commit of env.repo, not a release


def commit_pins(packages: dict[str, Any]) -> dict[str, str]:
    """The pins of `packages` (env.packages) that name a commit of env.repo: package -> commit."""
    return {name: str(version) for name, version in packages.items() if COMMIT.match(str(version))}


@dataclass
class EnvConf:
    """The packages a run's environment holds beyond `torch` (launcher/envs.py builds and caches it)."""

    packages: dict[str, str] = field(default_factory=dict)  # more pins, {name: version}: numpy=2.3.5, timm=1.0.20
    dir: str | None = None  # the environments' cache; None: ~/.cache/perfsweep/envs (a shared filesystem on Slurm)
    index_url: str | None = None  # the package index to build from (a nightly index); None: uv's default
    # Your repository, where a pin names one of its commits (40 hex digits) in place of a release:
    # env.repo=PATH +env.packages.mylib=<commit>. That commit's code is built and installed (bisect --git).
    repo: str | None = _unset(None)


@dataclass
class DistConf:
    """A training step across ranks (train/ranks/): each rank a process, started by torch's elastic launcher
    from the run's own process (launcher=local), or a task of the run's Slurm job (launcher=slurm, on
    launcher.nodes nodes). dist=none, the default, is one process, as a run has always been."""

    name: DistName = DistName.none
    world_size: int = 1  # ranks per node (launcher=slurm: launcher.nodes of them)
    backend: DistBackend = DistBackend.auto  # auto: nccl on CUDA, gloo on a CPU
    timeout_s: float = 120.0  # a collective that waits longer fails the run (a rank that died or hangs)
    # Time steps without gradient sync beside steps with it, in blocks of sync_block steps each.
    # Their backward's difference is the communication it did not hide.
    # DDP times it in its window.
    # FSDP times it in a probe after the window, which holds a whole model's unsharded gradients.
    # exposed_comm=false where those do not fit.
    exposed_comm: bool = True
    sync_block: int = 5
    # DDP's own
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = False
    static_graph: bool = False
    # FSDP's own
    reshard_after_forward: bool = True
    # A straggler drill: this rank sleeps delay_ms in each step's data phase (a straggler of known size to find)
    delay_rank: int | None = None
    delay_ms: float = 0.0


@dataclass
class PlantedConf:
    """workload=planted_step's planted change: its step does `factor` times the work where the run's environment
    holds `package` at release `version` or later (a known step for bisect and compare to find)."""

    package: str = "numpy"
    version: str = ""  # the first release with the change; "": no change planted
    factor: float = 2.0


@dataclass
class RunConf:
    """What one run measures: its identity is derived from these fields."""

    model: ModelConf = field(default_factory=ModelConf)
    memory_format: MemoryFormatConf = field(default_factory=MemoryFormatConf)
    precision: PrecisionConf = field(default_factory=PrecisionConf)
    input_type: InputTypeConf = field(default_factory=InputTypeConf)
    compile: CompileConf = field(default_factory=CompileConf)
    optim: OptimConf = field(default_factory=OptimConf)
    loss: LossConf = field(default_factory=LossConf)
    workload: WorkloadConf = field(default_factory=WorkloadConf)
    steps: int = 30  # measured steps
    warmup_steps: int = 5  # steps run first, recorded, flagged and left out of summaries
    seed: int = 0  # seeds the model's weights and the synthetic data
    device: str = "auto"  # "auto" (cuda if available, else cpu), "cpu", "cuda" or "cuda:N"
    data_batches: int = 4  # synthetic batches made before timing and cycled through
    cudnn_benchmark: bool = True  # let cuDNN time its convolution algorithms during warm-up
    threads: int | None = None  # torch's CPU threads; None: the CPUs Slurm allotted the job, else torch's default
    replicate: int = 0  # which replicate of its configuration this run is (set by `repeats`; seed + replicate)
    label: str = ""  # a free tag, e.g. for the runs of one grid of a sweep file (published comparisons select by it)
    torch: str = "current"  # the torch release the run measures (its environment is built); current: perfsweep's own
    env: EnvConf = field(default_factory=EnvConf)
    planted: PlantedConf = field(default_factory=PlantedConf)  # read by workload=planted_step alone
    dist: DistConf = field(default_factory=DistConf)  # read by the training step


@dataclass
class Config(RunConf):
    """The whole config: a run's fields plus where and how the sweep runs."""

    launcher: LauncherConf = field(default_factory=LauncherConf)
    tracker: TrackerConf = field(default_factory=TrackerConf)
    cost: CostConf = field(default_factory=CostConf)
    sweep: str = "default"  # the sweep file sweeps/<sweep>.yaml whose params are swept
    sweep_name: str | None = None  # the sweep's folder under runs_dir; None: the sweep's name
    runs_dir: str = "runs"  # where sweep folders go, relative to the working directory
    scale: str = "full"  # the sweep file's size: "full" (its params) or one of its `scales` (cpu, smoke...)
    # Runs of each configuration, each with its own seed (seed + replicate), in rounds.
    # pairing says which runs of a round share a process.
    # repeats=auto on the command line runs rounds until the sweep's comparisons are decided.
    # auto.* sets the target and the caps.
    repeats: int = 3
    auto: AutoConf = field(default_factory=AutoConf)
    order: Order = Order.interleaved
    # auto: the sides of a comparison share a process per round, in alternating blocks of steps (sweeps/pairing.py).
    # in_process: the same, and sides that cannot share one are refused. process: each side in a process of its own.
    pairing: Pairing = Pairing.auto
    blocks: int = 10  # a paired side's measured steps, in at most this many blocks
    profile: bool = False  # after the measured window, a torch.profiler trace of 3 steps (records and W&B artifact)
    # After the measured window, a profiled one: each operator's calls and self time per step, and each phase's
    # memory (ops.json); the sweep's views explain each decided difference by them (train/op_breakdown.py).
    explain: bool = False
    # A folder of the code under test: each run records its repository's commit, which `history` orders runs by.
    # None: the repository of your code the runs import, else of the launch's working directory.
    code: str | None = None
    # Each axis the sweep varies -> the value its other values are compared with (+baselines.precision=amp_bf16).
    # The planner fills in the rest (sweeps/baselines.py): the workload's baseline, else NATURAL_BASELINES, else
    # the value listed first. A run's entries are its own: a sweep of two workloads compares each along its own.
    baselines: dict[str, str] = field(default_factory=dict)


RUN_FIELDS = tuple(RunConf.__dataclass_fields__)
# What every workload reads.
# The other run fields (model, precision...) count only for a workload whose `reads` names them.
# So a sweep's training axes do not multiply a function benchmark's runs.
READ_BY_EVERY_WORKLOAD = (
    "compile", "workload", "steps", "warmup_steps", "seed", "device", "cudnn_benchmark", "threads", "replicate",
    "label", "torch", "env",
)  # fmt: skip

ConfigStore.instance().store(name="perfsweep_schema", node=Config)
