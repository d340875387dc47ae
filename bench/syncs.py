"""Host-device syncs inside perfsweep's measured loop: the harness must add none.

    python -m bench.syncs [OVERRIDE ...]

For every run the overrides give (default: ResNet50, 224 px, batch 64, channels_last, each input type
x amp_bf16 and amp_fp16), warms the run up, then runs its timed loop (the steps and StepClock's marks,
nothing else) and prints what in it would make the host wait for the GPU, with places and counts per step:
- on CUDA, the synchronizing calls torch.cuda.set_sync_debug_mode("warn") reports (train.syncs);
- without CUDA, the host reads found by train.syncs.HostReads (`.item()`, `bool(t)`, `nonzero`, ...,
  each a sync when the tensor is on a GPU).
amp_fp16 is expected to sync once a step (GradScaler's inf check); anything else is the harness's or
the model's.
"""

import sys
from collections import Counter

import torch

from sweeps.plan import build_plan
from train.build import configure_backends
from train.syncs import HostReads, host_sync_places
from train.timing import StepClock
from train.window import make_workload, run_window, timed_steps

DEFAULTS = [
    "model=resnet50",
    "model.image_size=224",
    "model.batch_size=64",
    "memory_format=channels_last",
    "input_type=tensor,subclass,subclass_notf,tensorbase,cast",
    "precision=amp_bf16,amp_fp16",
    "steps=5",
    "warmup_steps=3",
]


def per_step(kind: str, counts: Counter[str], steps: int, none: str) -> str:
    return "; ".join(f"{kind} {place} ({n / steps:g} per step)" for place, n in counts.items()) or none


def device_syncs(trainer, cfg, device: torch.device) -> str:
    """'no sync', or each place in the timed loop that made the host wait for the GPU, with its count per step."""
    clock = StepClock(device, cfg.steps, trainer.phases)
    places = host_sync_places(lambda: timed_steps(trainer, cfg.warmup_steps, cfg.steps, clock), device)
    return per_step("SYNC", places, cfg.steps, "no sync")


def host_reads(trainer, cfg, device: torch.device) -> str:
    """'no host read', or each host read the timed loop made, with its count per step."""
    with HostReads() as reads:
        timed_steps(trainer, cfg.warmup_steps, cfg.steps, StepClock(device, cfg.steps, trainer.phases))
    return per_step("HOST READ", Counter(reads.calls), cfg.steps, "no host read")


def main() -> None:
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    check = device_syncs if cuda else host_reads
    print(
        "CUDA: syncs per step, as set_sync_debug_mode('warn') reports them"
        if cuda
        else "no CUDA GPU: host reads in the timed loop (each a sync on a GPU), not syncs themselves"
    )
    for spec in build_plan([*DEFAULTS, f"device={device.type}", *sys.argv[1:]]).runs:
        cfg = spec.config
        configure_backends(cfg)
        trainer = make_workload(cfg, device)
        run_window(trainer, 0, cfg.warmup_steps, device)
        summary = check(trainer, cfg, device)
        places = summary.split("; ")
        expected = " (expected: GradScaler)" if all("grad_scaler.py" in p for p in places) else ""
        print(f"{spec.name:<60} {summary}{expected}")
        del trainer
        if cuda:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
