"""GPU truth: every GPU path of perfsweep checked, one stage per command, with its tables kept.

    scripts/gpu-check STAGE [--out PARENT] [--limit S] [--resume] [--step NAME ...] [--dry-run]
    STAGE: tests, seeds, bench, dist, state, compile, timm, or all (in that order: the order a lent GPU runs them)

tests    pytest -m gpu in one process.
         Then the run, timing, syncs and functions tests, their runs on the GPU.
seeds    sweep=subclass_gpu, subclass_slowdown, sampler_nonzero, nested_tensor and subclass_followups.
         Each runs at its published (GPU) sizes; steps are trimmed to fit, sizes never.
         Each gives its table and its published side-by-side table.
bench    bench.overhead --synced on a tensor and a subclass.
         Its run: ResNet50, 224 px, batch 64, amp_bf16, channels_last.
         Then bench.syncs over every input type x amp_bf16/amp_fp16.
dist     sweep=dist_scaling: ResNet50 and ViT-B/16 under DDP and FSDP, NCCL, a GPU a rank.
         It runs at 1 rank and every world size up to the machine's GPUs, a run each, steps trimmed.
         Then bench.syncs on a DDP and an FSDP step, beside one process.
state    sweep=subclass_gpu (ResNet50, a Tensor against its subclasses) with its GPU's state read at each block:
         SM clock, NVML's clock-event reasons, power and energy, and explain=true (each run's operators).
         Then its table (J/sample, samples/J, each difference by operator) and `runs`, a host line a run.
compile  The compile modes (eager, default, reduce-overhead, max-autotune) over sweep=subclass_gpu.
         Each is one step, into one sweep folder; then their table, side by side.
timm     timm's memory-format tables: sweep=timm_train_memory_format and timm_infer_memory_format.
         20 models each, contiguous and channels_last, amp fp16, steps trimmed.
         Their tables stand beside timm's.

A stage runs its steps as commands, one after another.
Each step's output is kept in DIR/<step>.txt.
After every step the stage writes DIR/summary.json.
It holds the GPU, driver, torch/CUDA/cuDNN versions and perfsweep's commit.
It holds each step's command and seconds, and whether it passed.
A failed step's row has the last line of its error.
DIR/summary.md, its table for a reader, is rendered from it.
Each step's pass or fail is a Verdict record; its row's text is rendered from that.
A sweep whose only failed runs failed on known torch issues passed (train/known_issues.py).
Its row names them.

A stage stops at --limit seconds: by default 540, inside a lent GPU's 10 minutes a command.
A step still running then is ended, with all it started.
The steps after it are written down as not run.
A table of the runs before it still runs, up to 30 s more.
--resume keeps the steps that DIR's summary.json says passed, and runs the others.
It runs a table again, and a sweep whose runs' records are not all there.
--step NAME runs only the named steps; each other one is written down as not asked for.
So max-autotune's compile can run alone, with the whole limit to time kernels.

DIR is PARENT/<stage>. PARENT is results/<gpu>-torch<version> by default (printed).
After every step, the runs' records are packed into DIR/runs.tar.gz (gpu/handover.py).
What Inductor timed is packed into DIR/autotune.tar.gz.
So a stage cut short on one machine goes on on the next.
--resume unpacks the records: its finished runs are not run again.
Any run of the stage unpacks the timings: a max-autotune compile goes on from the kernels it timed.

It needs what a GPU machine has: torch, torchvision, timm, numpy, pyarrow, matplotlib.
For the rest it needs the wheels of ../shared/gpu/wheels.sh.
A torch older than perfsweep needs is reported.

--dry-run plans every stage on any machine, and runs nothing.
It composes and checks each sweep with device=cuda.
The checks that need the device itself are left to the real run.
It prints each step's command line and a time estimate per stage.
"""

import argparse
import dataclasses
import functools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from perfsweep import records
from perfsweep.gpu import handover
from perfsweep.records.code import code_version
from perfsweep.sweeps.plan import Plan, PlanError, build_plan
from perfsweep.train.parallel import measured_steps, probe_steps

ROOT = Path(__file__).resolve().parent.parent
# Costs on one H100 80GB HBM3 (torch 2.11), from its GPU runs (results/nvidia-h100-80gb-hbm3-torch2.11.0/), for the
# estimates of a dry run: a job's start (Python, torch, CUDA, on an image that compiles Python from source each time:
# subclass_gpu's 12 runs took 108 s, their runs 78 s), a run's own (its fork, CUDA context and what it counts after its
# window: 1 to 1.5 s), more for a model's (cuDNN timing its convolutions in the warm-up: 13 s, the median of 28 of
# timm's models, from 1 s for a ViT to 40 s for GhostNet; an inference, forward only, a third of that by guess) where
# its shapes are new to the machine, and 3 s where a run before it had them (ResNet50's runs took 20 s, then 10 s), a
# torch.compile of a training step by mode (max-autotune's first took 520 s of kernel timing on one machine and 326 s
# more on the next; once Inductor's cache held it, 86 s), and of a function, and one measured step.
START_S, RUN_S, MODEL_RUN_S, SEEN_MODEL_RUN_S = 20.0, 1.5, 15.0, 3.0
TRAIN_STEP_S, CALL_S, COMPILE_FUNCTION_S = 0.03, 0.01, 8.0
COMPILE_TRAIN_S = {None: 55.0, "default": 55.0, "reduce-overhead": 55.0, "max-autotune": 850.0}
COMPILED_AGAIN_S = {"max-autotune": 90.0}  # a step whose kernels a run before it timed
# The seed sweeps' steps, trimmed (sizes stay as published), and their runs packed into one job per sweep: ~100 runs
# would spend minutes starting Python, torch and CUDA one by one. Even so the seeds stage took 15 minutes on one H100,
# most of it the runs' own costs, not their steps: two commands (the second with --resume). The warm-up stays as
# published: with 10 steps, a fifth of the runs there still sped up through their measured steps (NOISY).
TRIMMED = {"steps": 30, "warmup_steps": 20}
PACKED = "launcher.runs_per_job=64"
BUDGET_S = 8 * 60  # what one stage may take
# where a stage stops its steps: inside a lent GPU's 10 minutes a command, with its summary written
STAGE_LIMIT_S = 9 * 60
TABLE_AFTER_LIMIT_S = 30  # what a table of the runs before it may still take once the stage's limit is spent
# the three headline tables first: a stage cut short by --limit still has them, and --resume runs the rest
SEED_SWEEPS = ("subclass_gpu", "subclass_slowdown", "sampler_nonzero", "nested_tensor", "subclass_followups")
TIMM_SWEEPS = ("timm_train_memory_format", "timm_infer_memory_format")
# The compile modes, the one that compiles longest (it benchmarks kernels) last: a stage cut short by --limit keeps
# the modes before it. --step compile-max_autotune gives that one a whole limit to time its kernels, which a later
# run of the stage reuses (gpu/handover.py), so that all four modes can run on one machine, side by side.
COMPILE_MODES = ("eager", "default", "reduce_overhead", "max_autotune")
COMPILE_SWEEP = "compile_modes"
STATE_SWEEP, VIEWS = "gpu_state", ("table", "runs")
# What perfsweep uses of torch that older versions lack: attribute path -> the torch that has it.
NEEDS = {
    "torch.backends.cuda.matmul.fp32_precision": "2.9",
    "torch.compiler.set_stance": "2.6",  # FLOPs are counted with compiled code forced eager
    "torch.cuda.set_sync_debug_mode": "1.10",
}
BENCH_RUN = ["model=resnet50", "model.image_size=224", "model.batch_size=64", "precision=amp_bf16"]
BENCH_RUN += ["memory_format=channels_last", "device=cuda"]


@dataclasses.dataclass(frozen=True)
class Step:
    """One command of a stage, and the sweep it launches (to plan and estimate it without running)."""

    name: str
    command: list[str]
    sweep: list[str] | None = None  # the overrides of the sweep it launches
    estimate_s: float = 60.0  # for a step that launches no sweep
    # the output whose last line says why it failed: pytest's is its summary on stdout ("4 failed, 53 passed"),
    # and its stderr's last line may be a plugin's warning
    says: str = "stderr"
    # a table of the runs the steps before it left (no GPU): it runs even when the stage's limit is spent, so that a
    # stage cut short still tables what it finished
    tables: bool = False


@dataclasses.dataclass(frozen=True)
class StepResult:
    """One step's row of a stage's summary: what came of its command, and how long it took."""

    name: str
    result: str  # "passed", "failed (3): <the last line of its error>", "not run: <why>", as summary.md shows it
    passed: bool
    seconds: float
    command: list[str]


@dataclasses.dataclass
class Summary:
    """What a stage's summary.json holds, summary.md's source: the machine it ran on and each step's row so far."""

    stage: str
    machine: dict[str, str]  # torch, cuda, cudnn, gpu and, where there is a GPU, driver (machine())
    torch: str  # this torch beside the one perfsweep pins (torch_report())
    missing: list[str]  # what perfsweep uses that this torch lacks
    perfsweep: str  # the commit it ran, "(with uncommitted changes)" where it had some
    steps: list[StepResult] = dataclasses.field(default_factory=list)


def python() -> list[str]:
    return [sys.executable]


def sweep_step(name: str, overrides: list[str], out: Path) -> Step:
    overrides = [*overrides, "device=cuda", "tracker.mode=disabled", f"runs_dir={out / 'runs'}"]
    return Step(name, [*python(), "launch.py", *overrides], sweep=overrides)


def gpu_tests_steps(out: Path) -> list[Step]:
    """The tests stage: pytest's GPU tests, then the tests whose runs run on the GPU."""
    device_tests = ["tests/test_run.py", "tests/test_timing.py", "tests/test_syncs.py", "tests/test_functions.py"]
    pytest, quiet = [*python(), "-m", "pytest"], ["-q", "-p", "no:cacheprovider"]
    return [
        # one process: the GPU tests fork, pin and count the GPU's processes (xdist's workers would share it)
        Step("pytest-gpu", [*pytest, "-m", "gpu", "-n0", *quiet], None, 60, says="stdout"),
        Step("pytest-cuda", [*pytest, *quiet, *device_tests], None, 90, says="stdout"),
    ]


def packed_sweep_steps(sweeps: tuple[str, ...], out: Path) -> list[Step]:
    """The seeds and timm stages: each sweep at its published sizes, steps trimmed, its runs packed into jobs."""
    trimmed = [f"{key}={value}" for key, value in TRIMMED.items()]
    return [sweep_step(name, [f"sweep={name}", *trimmed, PACKED], out) for name in sweeps]


def bench_steps(out: Path) -> list[Step]:
    """The bench stage: bench.overhead on a Tensor and a subclass, then bench.syncs over every input type."""
    from perfsweep.train import fastai_parts
    from perfsweep.train.catalog import INPUT_TYPES

    # fastai's own types where fastai is installed (a GPU machine's image has none)
    input_types = [n for n, kind in sorted(INPUT_TYPES.items()) if not kind.needs_fastai or fastai_parts.installed()]
    overhead = [
        Step(
            f"overhead-{kind}",
            [
                *python(),
                "-m",
                "perfsweep.bench.overhead",
                "--synced",
                "--rounds",
                "5",
                *BENCH_RUN,
                f"input_type={kind}",
            ],
            None,
            35,
        )
        for kind in ("tensor", "subclass")
    ]
    syncs = [
        *python(),
        "-m",
        "perfsweep.bench.syncs",
        "model=resnet50",
        "model.image_size=224",
        "model.batch_size=64",
        f"input_type={','.join(input_types)}",
        "precision=amp_bf16,amp_fp16",
    ]
    return [*overhead, Step("syncs", syncs, None, 30)]


def dist_steps(out: Path) -> list[Step]:
    """The dist stage: runs across ranks with NCCL at every world size the machine's GPUs give (one at least), then
    the syncs a DDP and an FSDP step add to one process's."""
    gpus = gpu_count()
    sizes = ",".join(str(n) for n in (1, 2, 4, 8) if n == 1 or n <= gpus)
    # one run a configuration, steps trimmed: that NCCL runs, and what each world size measures, not a verdict
    scaling = ["sweep=dist_scaling", f"dist.world_size={sizes}", f"launcher.gpus_per_node={max(1, gpus)}"]
    scaling += ["repeats=1", "steps=10", "warmup_steps=5"]
    syncs = [
        *python(),
        "-m",
        "perfsweep.bench.syncs",
        *BENCH_RUN,
        "input_type=tensor",
        "dist=ddp,fsdp",
        "dist.world_size=1",
    ]
    return [sweep_step("dist-scaling", scaling, out), Step("dist-syncs", syncs, None, 60)]


def gpu_count() -> int:
    """The GPUs this machine has (NVML's count: no CUDA context in this process); 0 without torch or CUDA."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def compile_steps(out: Path) -> list[Step]:
    """The compile stage: each mode a step of its own into one sweep folder, then their table side by side."""
    # on a plain Tensor (each compile of ResNet50's step takes about a minute on an H100: four input types would
    # take four times as long; subclass_followups compiles the subclass)
    compiled = ["sweep=subclass_gpu", "input_type=tensor", f"sweep_name={COMPILE_SWEEP}"]
    compiled += [f"{k}={v}" for k, v in TRIMMED.items()]
    modes = [sweep_step(f"compile-{mode}", [*compiled, f"compile={mode}"], out) for mode in COMPILE_MODES]
    table = [*python(), "launch.py", "table", str(out / "runs" / COMPILE_SWEEP), "--vs", "compile=eager"]
    return [*modes, Step("compile-table", table, None, 10, tables=True)]


def state_steps(out: Path) -> list[Step]:
    """The state stage: the seeds' ResNet50 comparisons (sweep=subclass_gpu) with their GPU's state a block, their
    energy and their operators: then the table (J/sample, samples/J, each difference by operator) and each run's host
    line (SM clock, power, NVML's reasons)."""
    sweep = ["sweep=subclass_gpu", f"sweep_name={STATE_SWEEP}", *(f"{k}={v}" for k, v in TRIMMED.items()), PACKED]
    sweep.append("explain=true")  # explain's CUDA side, on the seed whose differences it should account for
    folder = str(out / "runs" / STATE_SWEEP)
    views = [Step(f"state-{view}", [*python(), "launch.py", view, folder], None, 10, tables=True) for view in VIEWS]
    return [sweep_step("state-sweep", sweep, out), *views]


# Each stage's steps, given the stage's folder, in the order a lent GPU's half hour runs them.
STAGE_STEPS: dict[str, Callable[[Path], list[Step]]] = {
    "tests": gpu_tests_steps,
    "seeds": functools.partial(packed_sweep_steps, SEED_SWEEPS),
    "bench": bench_steps,
    "dist": dist_steps,
    "state": state_steps,
    "compile": compile_steps,
    "timm": functools.partial(packed_sweep_steps, TIMM_SWEEPS),
}
STAGES = tuple(STAGE_STEPS)


def stage_steps(stage: str, out: Path) -> list[Step]:
    """The commands of a stage, in order."""
    return STAGE_STEPS[stage](out)


def estimate(plan: Plan) -> float:
    """Seconds the plan's runs take, roughly (START_S and the other constants above)."""
    seconds = START_S * -(-len(plan.runs) // plan.settings.launcher.runs_per_job)
    seen, timed = set(), set()  # the models' shapes and the compiled steps of the runs before
    for spec in plan.runs:
        cfg = spec.config
        trains = cfg.workload.name == "train_step"
        seconds += RUN_S
        if "model" in cfg.workload.reads:
            shapes = repr((cfg.workload.name, cfg.model, cfg.memory_format, cfg.precision))
            seconds += SEEN_MODEL_RUN_S if shapes in seen else MODEL_RUN_S if trains else MODEL_RUN_S / 3
            seen.add(shapes)
        steps = measured_steps(cfg) + probe_steps(cfg) + cfg.warmup_steps  # DDP's steps without sync, FSDP's probe
        seconds += steps * (TRAIN_STEP_S if trains else CALL_S)
        if cfg.compile.enabled and not trains:
            seconds += COMPILE_FUNCTION_S
        elif cfg.compile.enabled:
            compiled = repr((cfg.model, cfg.memory_format, cfg.precision, cfg.compile.mode))
            first = COMPILE_TRAIN_S.get(cfg.compile.mode, 55.0)
            seconds += COMPILED_AGAIN_S.get(cfg.compile.mode, first) if compiled in timed else first
            timed.add(compiled)
    return seconds


def plan_step(step: Step) -> tuple[float, list[str]]:
    """A step's estimate, and what stops its sweep (composed and checked with device=cuda, not run)."""
    if step.sweep is None:
        return step.estimate_s, []
    from perfsweep.launcher.validate import validate
    from perfsweep.train.checks import problems

    try:
        plan = build_plan(step.sweep)
    except PlanError as error:
        return 0.0, error.problems
    issues = validate(plan, lambda cfg, _here: problems(cfg, on_this_host=False))
    return estimate(plan), [f"{len(plan.runs)} runs"] + issues


def torch_report() -> tuple[str, list[str]]:
    """This machine's torch beside the pinned one, and what perfsweep uses that it lacks."""
    import torch

    pinned = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    line = f"torch {torch.__version__} (perfsweep pins {pinned.group(1) if pinned else '?'})"
    missing = []
    for path, since in NEEDS.items():
        target = torch
        for part in path.split(".")[1:]:
            target = getattr(target, part, None)
        if target is None:
            missing.append(f"{path} is missing: it needs torch {since}+")
    return line, missing


def machine() -> dict[str, str]:
    import torch

    machine_info = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "cudnn": "-", "gpu": "no CUDA GPU"}
    if torch.cuda.is_available():
        machine_info["gpu"] = torch.cuda.get_device_name()
        machine_info["cudnn"] = str(torch.backends.cudnn.version())
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True)
        machine_info["driver"] = smi.stdout.decode(errors="replace").strip() or "?"
    return machine_info


def default_out(stage: str) -> Path:
    machine_info = machine()
    gpu = re.sub(r"[^A-Za-z0-9]+", "-", machine_info["gpu"]).strip("-").lower()
    return ROOT / "results" / f"{gpu}-torch{machine_info['torch'].split('+')[0]}" / stage


def dry_run(stages: list[str]) -> int:
    torch_line, missing = torch_report()
    print(torch_line, *(f"  {m}" for m in missing), sep="\n")
    blocked, so_far = len(missing), 0.0
    for stage in stages:
        out = Path("results") / "GPU-torchVERSION" / stage
        planned = [(step, *plan_step(step)) for step in stage_steps(stage, out)]
        total = sum(seconds for _, seconds, _ in planned)
        so_far += total
        over = f"; over the {BUDGET_S // 60:.0f}-minute budget by this estimate" if total > BUDGET_S else ""
        print(
            f"\nstage {stage}: about {total / 60:.1f} min, {so_far / 60:.1f} min with the stages before it "
            f"(rough: gpu/check.py's constants{over})"
        )
        for step, seconds, notes in planned:
            print(f"  {step.name} (~{seconds:.0f} s): {shlex.join(step.command)}")
            for note in notes:
                print(f"    {note}")
            blocked += sum(not note.endswith(" runs") for note in notes)
    if "seeds" in stages or "timm" in stages:
        print(f"\nseed and timm sweeps' steps trimmed to {TRIMMED} (sizes as published)")
    print(f"\n{'nothing stops the stages' if not blocked else f'{blocked} problems stop them'}; nothing was run")
    return 1 if blocked else 0


def run_step(step: Step, seconds_left: float, env: dict[str, str]) -> tuple[int | None, str, str]:
    """Run one step in its own process group, with `env` added to this one's; (returncode or None if out of time,
    stdout, stderr)."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    process = subprocess.Popen(step.command, cwd=ROOT, start_new_session=True, env={**os.environ, **env}, **pipes)
    try:
        stdout, stderr = process.communicate(timeout=max(seconds_left, 1))
        return process.returncode, stdout, stderr
    except subprocess.TimeoutExpired:  # a hung step ends with all it started (a launch's jobs too)
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return None, stdout, stderr


def failed_runs(step: Step) -> tuple[list[str], list[str]]:
    """The failed runs of a step's sweep: the known issues they failed on (train/known_issues.py), one per run,
    and the names of the others."""
    sweep_dir = build_plan(step.sweep).sweep_dir
    if not sweep_dir.is_dir():  # the launch ended before its first run
        return [], []
    failed = [run for run in records.load_sweep(sweep_dir) if run.state == records.FAILED]
    known = [run.status.error.known for run in failed if run.status.error and run.status.error.known]
    return known, [run.name for run in failed if not (run.status.error and run.status.error.known)]


def run_stage(
    stage: str, out: Path, limit_s: float = STAGE_LIMIT_S, resume: bool = False, only: list[str] | None = None
) -> int:
    handover.unpack_timings(out)
    if resume:
        handover.unpack_records(out)
    steps = stage_steps(stage, out)
    kept = passed_before(out) if resume else {}
    kept = {step.name: kept[step.name] for step in steps if step.name in kept and stands(step)}
    return run_steps(stage, steps, out, limit_s, kept, only)


def stands(step: Step) -> bool:
    """Whether a step that passed before stands without running again: not a table (it tables the runs there now),
    and not a sweep with a run whose records are not there (its row would stand for runs no table can show)."""
    if step.tables:
        return False
    if step.sweep is None:
        return True
    ended, planned = runs_ended(step)
    return ended == planned


def runs_ended(step: Step) -> tuple[int, int]:
    """How many of a sweep step's planned runs have ended (their records say so), and how many it plans."""
    plan = build_plan(step.sweep)
    there = {run.name: run.state for run in records.load_sweep(plan.sweep_dir)} if plan.sweep_dir.is_dir() else {}
    return sum(there.get(spec.name) in records.FINAL for spec in plan.runs), len(plan.runs)


def passed_before(out: Path) -> dict[str, StepResult]:
    """The rows of the steps that passed when the stage last ran into `out`, by step name, from its summary.json (a
    folder with only a summary.md, from a gpu-check before summary.json, counts as none passed)."""
    summary = read_summary(out)
    return {step.name: step for step in summary.steps if step.passed} if summary else {}


def run_steps(
    stage: str,
    steps: list[Step],
    out: Path,
    limit_s: float,
    kept: dict[str, StepResult] | None = None,
    only: list[str] | None = None,
) -> int:
    """Run a stage's steps within limit_s (but those `kept`: their rows from an earlier run; and, given `only`, just
    the steps it names), keep their output, and write its summary after every step (a stage cut off from outside
    still leaves what it finished)."""
    out.mkdir(parents=True, exist_ok=True)
    kept = kept or {}
    summary = stage_summary(stage)
    failed, stage_started = 0, time.monotonic()
    for step in steps:
        said = ""
        if step.name in kept:
            row, said = kept[step.name], "passed before (--resume keeps it)"
        elif only is not None and step.name not in only:
            row = StepResult(step.name, "not run: not asked for (--step)", False, 0.0, step.command)
        else:
            verdict, seconds = run_and_judge(step, out, limit_s - (time.monotonic() - stage_started), limit_s)
            failed += not verdict.passed
            row = StepResult(step.name, verdict.render(), verdict.passed, seconds, step.command)
            said = f"{row.result} ({seconds:.0f} s)"
        summary.steps.append(row)
        write_summary(out, summary)
        if said:
            print(f"{step.name}: {said}", flush=True)
    print(f"{stage}: {out / 'summary.md'}")
    return 1 if failed else 0


def stage_summary(stage: str) -> Summary:
    """A stage's summary before its first step: this machine, its torch and perfsweep's commit."""
    torch_line, missing = torch_report()
    version = code_version()
    commit = f"{version.get('commit') or 'unknown'}{' (with uncommitted changes)' if version.get('dirty') else ''}"
    return Summary(stage, machine(), torch_line, missing, commit)


def write_summary(out: Path, summary: Summary) -> None:
    """out/summary.json, the record, and out/summary.md rendered from it."""
    records.atomic_write(out / "summary.json", json.dumps(dataclasses.asdict(summary), indent=2).encode())
    records.atomic_write(out / "summary.md", render_summary(summary).encode())


def read_summary(out: Path) -> Summary | None:
    """The summary.json a stage wrote into `out`; None where there is none."""
    path = out / "summary.json"
    if not path.is_file():
        return None
    fields = json.loads(path.read_text())
    steps = [StepResult(**step) for step in fields.pop("steps")]
    return Summary(**fields, steps=steps)


def render_summary(summary: Summary) -> str:
    """summary.md: the machine as a list, then a row per step."""
    lines = [f"# gpu-check {summary.stage}", "", *(f"- {k}: {v}" for k, v in summary.machine.items())]
    lines += [f"- {summary.torch}", f"- perfsweep: {summary.perfsweep}", *(f"- {m}" for m in summary.missing)]
    lines += ["", "| step | result | seconds | command |", "|---|---|---|---|"]
    lines += [f"| {s.name} | {s.result} | {s.seconds:.0f} | `{shlex.join(s.command)}` |" for s in summary.steps]
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What came of one step, as a record; its row's text is rendered from it."""

    passed: bool
    # How far the step got: "not run" (the stage's time was spent), "stopped" (at its limit) or "exited"
    stage: str
    reason: str = ""  # the last line of what says why it failed (step.says)
    exit_code: int | None = None  # None where it did not exit on its own
    limit_s: float = 0.0  # the stage's limit
    runs_ended: tuple[int, int] | None = None  # a stopped sweep's ended runs, and its planned runs
    known_issues: tuple[str, ...] = ()  # a sweep's failed runs' known torch issues, one per run
    flags: dict[str, int] = dataclasses.field(default_factory=dict)  # the runs its tables flag, by flag
    timings: str = ""  # what Inductor timed, kept for the next run of the stage

    def render(self) -> str:
        """The step's row in summary.md: passed, failed or not run, then why."""
        if self.stage == "not run":
            return f"not run: the stage's {self.limit_s:.0f} s were spent"
        if self.stage == "stopped":
            progress = " after {} of its {} runs".format(*self.runs_ended) if self.runs_ended else ""
            text = f"failed: stopped at the stage's {self.limit_s:.0f} s limit{progress}"
            text += f"; {self.reason}" if self.reason else ""
        elif self.passed and self.known_issues:
            known = ", ".join(sorted(set(self.known_issues)))
            text = f"passed; {len(self.known_issues)} runs failed on known issues ({known})"
        elif self.passed:
            text = "passed"
        else:
            text = f"failed ({self.exit_code}): {self.reason}"
        counted = [f"{count} {flag}" for flag, count in self.flags.items() if count]
        text += f"; flagged: {', '.join(counted)}" if counted else ""
        return text + (f"; {self.timings}" if self.timings else "")


def run_and_judge(step: Step, out: Path, seconds_left: float, limit_s: float) -> tuple[Verdict, float]:
    """Run one step, keep its output and pack what it leaves.

    A table runs even once the stage's time is spent.

    Returns:
        The step's verdict, and the seconds it took.
    """
    started = time.monotonic()
    if step.tables:
        seconds_left = max(seconds_left, TABLE_AFTER_LIMIT_S)
    if seconds_left <= 0:
        stdout = stderr = ""
        verdict = Verdict(passed=False, stage="not run", limit_s=limit_s)
    else:
        code, stdout, stderr = run_step(step, seconds_left, handover.inductor_env(out))
        verdict = step_verdict(step, code, stdout if step.says == "stdout" else stderr, limit_s)
        timed = handover.autotuned(out) if code is None else ""  # what the next run of the stage goes on from
        verdict = dataclasses.replace(verdict, flags=flag_counts(stdout), timings=timed)
        handover.pack(out)  # a step not run left nothing new to pack
    (out / f"{step.name}.txt").write_text(f"$ {shlex.join(step.command)}\n{stdout}\n{stderr}")
    return verdict, time.monotonic() - started


def step_verdict(step: Step, code: int | None, says: str, limit_s: float) -> Verdict:
    """Whether a step that ran passed, and why not.

    A sweep whose only failed runs are known torch issues passed.

    Args:
        step: the step.
        code: its exit code; None where it was stopped at the stage's limit.
        says: the output whose last line says why it failed (step.says).
        limit_s: the stage's limit.
    """
    last = next((line for line in reversed(says.splitlines()) if line.strip()), "")
    error = last[:200]
    if code == 0:
        return Verdict(passed=True, stage="exited", exit_code=0, limit_s=limit_s)
    if code is None:  # a sweep cut short says how far it got: its ended runs are kept for --resume
        ended = runs_ended(step) if step.sweep is not None else None
        return Verdict(passed=False, stage="stopped", reason=error, limit_s=limit_s, runs_ended=ended)
    if code == 1 and step.sweep is not None:
        known, others = failed_runs(step)
        if known and not others:
            return Verdict(True, "exited", error, code, limit_s, known_issues=tuple(known))
    unmeasured = last.endswith(" has no figures") or " without a done run, so without figures: " in last
    if code == 1 and step.tables and unmeasured:  # its sweep's step judged why it has no figures; its row says it
        return Verdict(True, "exited", error, code, limit_s)
    return Verdict(passed=False, stage="exited", reason=error, exit_code=code, limit_s=limit_s)


# what a sweep's table flags about a run (NO FIGURES: about a configuration)
FLAGS = ("SHARED GPU", "MIXED MACHINES", "DRIFT", "NOISY", "BATCH REDUCED", "STALLED", "NO FIGURES")


def flag_counts(stdout: str) -> dict[str, int]:
    """How many runs the step's tables flag, by flag.

    A line flags one run, or the runs it counts (`NOISY 5 of 12 runs: ...`).
    A GPU shared by another process would be the check's own doing.
    """

    def runs(line: str, flag: str) -> int:
        counted = re.match(rf"{flag} (\d+) of \d+ runs: ", line)
        return int(counted[1]) if counted else 1

    lines = stdout.splitlines()
    return {flag: sum(runs(line, flag) for line in lines if line.startswith(flag + " ")) for flag in FLAGS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=[*STAGES, "all"])
    parser.add_argument("--out", type=Path, help="where the tables go (default: results/<gpu>-torch<version>/)")
    parser.add_argument("--dry-run", action="store_true", help="plan and estimate every step; run nothing")
    parser.add_argument("--limit", type=float, default=STAGE_LIMIT_S, help="seconds a stage may run (default 540)")
    parser.add_argument("--resume", action="store_true", help="keep the steps that passed; run the rest")
    parser.add_argument("--step", action="extend", nargs="+", metavar="NAME", help="run only these steps")
    args = parser.parse_args(argv)
    stages = list(STAGES) if args.stage == "all" else [args.stage]
    if args.step and args.stage == "all":
        parser.error("--step names steps of one stage, not of all")
    names = [step.name for step in stage_steps(args.stage, Path("out"))] if args.step else []
    if unknown := sorted(set(args.step or ()) - set(names)):
        parser.error(f"--step {', '.join(unknown)}: not a step of {args.stage}; its steps: {', '.join(names)}")
    if args.dry_run:
        return dry_run(stages)
    if machine()["gpu"] == "no CUDA GPU":  # the GPU tests would all be skipped: a stage would pass on nothing
        print(
            "scripts/gpu-check: no CUDA GPU here; the stages need one (--dry-run plans them anywhere)", file=sys.stderr
        )
        return 2
    outs = [args.out / stage if args.out else default_out(stage) for stage in stages]
    runs = [run_stage(stage, out, args.limit, args.resume, args.step) for stage, out in zip(stages, outs, strict=True)]
    return max(runs)


if __name__ == "__main__":
    sys.exit(main())
