"""Host-device syncs inside perfsweep's measured loop: the harness must add none.

    python -m perfsweep.bench.syncs [OVERRIDE ...]
    python -m perfsweep.bench.syncs dist=ddp dist.world_size=2 model=test_resnet device=cpu

It takes every run the overrides give.
The default is ResNet50, 224 px, batch 64, channels_last.
It covers each input type x amp_bf16 and amp_fp16.
Each run is warmed up, then runs its timed loop.
The loop is the steps and StepClock's marks, nothing else.
It prints what in that loop would make the host wait for the GPU.
Each place is printed with its count per step:
- on CUDA, the synchronizing calls that torch.cuda.set_sync_debug_mode("warn") reports (train.syncs);
- without CUDA, the host reads that train.syncs.HostReads finds (`.item()`, `bool(t)`, `nonzero`, ...).
  Each is a sync when the tensor is on a GPU.

amp_fp16 is expected to sync once a step: GradScaler's inf check.
Anything else is the harness's or the model's.

A run across ranks (dist=ddp, dist=fsdp) is counted on each of its ranks.
torch's elastic launcher starts them as a run's are on this host: new interpreters.
Every counted step has gradient sync.
Its counts stand beside the same step's in one process.
The line ends with what the wrapper adds a step.
That is its syncs, or its host reads without CUDA.
On a CPU the reduction itself waits inside gloo's C++, which no host read shows.
"""

import dataclasses
import tempfile
from collections import Counter
from pathlib import Path

import torch

from perfsweep.bench import command
from perfsweep.conf.schema import DistConf
from perfsweep.train.build import configure_backends
from perfsweep.train.ranks.measure import cpus_of_rank
from perfsweep.train.ranks.start import launch_config, process_group
from perfsweep.train.syncs import HostReads, host_sync_places
from perfsweep.train.timing import StepClock
from perfsweep.train.window import make_workload, run_window, timed_steps

DEFAULTS = [
    "model=resnet50",
    "model.image_size=224",
    "model.batch_size=64",
    "memory_format=channels_last",
    "input_type=tensor,subclass,subclass_notf,tensorbase,cast",
    "precision=amp_bf16,amp_fp16",
    "steps=5",
    "warmup_steps=3",
    "repeats=1",
]


def counted(trainer, cfg, device: torch.device) -> Counter[str]:
    """Each place in the timed loop that made the host wait, with its count over the loop's steps.

    On CUDA a place made the host wait for the GPU.
    Without CUDA it read a value to the host.
    """
    clock = StepClock(device, cfg.steps, trainer.phases)

    def loop() -> None:
        timed_steps(trainer, cfg.warmup_steps, cfg.steps, clock)

    if device.type == "cuda":
        return host_sync_places(loop, device)
    with HostReads() as reads:
        loop()
    return Counter(reads.calls)


def described(counts: Counter[str], steps: int, cuda: bool) -> str:
    kind, none = ("SYNC", "no sync") if cuda else ("HOST READ", "no host read")
    return "; ".join(f"{kind} {place} ({n / steps:g} per step)" for place, n in counts.items()) or none


def warmed(cfg, device: torch.device):
    configure_backends(cfg)
    trainer = make_workload(cfg, device)
    run_window(trainer, 0, cfg.warmup_steps, device)
    return trainer


def in_one_process(cfg, device: torch.device) -> Counter[str]:
    trainer = warmed(cfg, device)
    counts = counted(trainer, cfg, device)
    del trainer
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return counts


def rank_counts(cfg) -> Counter[str]:
    """One rank's counts, in the rank's own process, with a run's rank's threads."""
    with process_group(cfg) as device:
        trainer = warmed(cfg, device)
        torch.set_num_threads(cpus_of_rank(cfg, as_task=False))
        return counted(trainer, cfg, device)


def across_ranks(cfg) -> dict[int, Counter[str]]:
    """Each rank's counts, by rank.

    The ranks are started as a run's are.
    Every counted step syncs gradients: the steps make one block.
    """
    from torch.distributed.launcher.api import elastic_launch

    cfg = dataclasses.replace(cfg, dist=dataclasses.replace(cfg.dist, sync_block=cfg.steps))
    with tempfile.TemporaryDirectory() as logs:
        # new interpreters: this process has run steps, and a fork of its OpenMP threads would hang
        config = dataclasses.replace(launch_config(cfg, Path(logs)), start_method="spawn")
        return elastic_launch(config, rank_counts)(cfg)


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("syncs", __doc__)
    parser.add_argument("overrides", nargs="*", help="overrides of the runs to count (model=... dist=ddp ...)")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    runs = command.checked([*DEFAULTS, f"device={device.type}", *args.overrides]).runs
    if args.dry_run:
        command.would(f"the syncs of {len(runs)} runs on {device.type}: {', '.join(spec.name for spec in runs)}")
        return
    print(
        "CUDA: syncs per step, as set_sync_debug_mode('warn') reports them"
        if cuda
        else "no CUDA GPU: host reads in the timed loop (each a sync on a GPU), not syncs themselves"
    )
    for spec in runs:
        cfg = spec.config
        single = in_one_process(dataclasses.replace(cfg, dist=DistConf()), device)
        line = described(single, cfg.steps, cuda)
        if cfg.dist.name != "none":
            ranks = across_ranks(cfg)
            added = max(sum(counts.values()) for counts in ranks.values()) - sum(single.values())
            line = f"one process: {line} | " + " | ".join(
                f"rank {rank}: {described(counts, cfg.steps, cuda)}" for rank, counts in sorted(ranks.items())
            )
            line += f" | {cfg.dist.name} adds {added / cfg.steps:g} per step"
        places = line.split("; ")
        expected = " (expected: GradScaler)" if all("grad_scaler.py" in p for p in places) else ""
        print(f"{spec.name:<60} {line}{expected}")


if __name__ == "__main__":
    main()
