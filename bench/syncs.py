"""Host-device syncs inside perfsweep's measured loop: the harness must add none.

    python bench/syncs.py [OVERRIDE ...]      (needs CUDA)

For every run the overrides give (default: ResNet50, 224 px, batch 64, channels_last, each input type
x amp_bf16 and amp_fp16), warms the run up, then runs its timed loop (the steps and StepClock's CUDA
events, nothing else) under torch.cuda.set_sync_debug_mode("error") and prints whether a synchronizing
call was made, and which. amp_fp16 is expected to sync once a step (GradScaler's inf check); any other
sync is the harness's or the model's and is printed with its place.
"""

import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweeps.plan import build_plan  # noqa: E402
from train.build import configure_backends  # noqa: E402
from train.step import make_workload, run_window, timed_steps  # noqa: E402
from train.timing import StepClock  # noqa: E402

DEFAULTS = [
    "model=resnet50",
    "model.image_size=224",
    "model.batch_size=64",
    "memory_format=channels_last",
    "input_type=tensor,subclass,subclass_notf,tensorbase,cast",
    "precision=amp_bf16,amp_fp16",
    "steps=5",
    "warmup_steps=3",
    "device=cuda",
]


def first_sync(trainer, cfg) -> str | None:
    """None if the timed loop made no synchronizing call; else where the first one was made."""
    device = torch.device(cfg.device)
    clock = StepClock(device, cfg.steps)
    torch.cuda.synchronize(device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        timed_steps(trainer, cfg.warmup_steps, cfg.steps, clock)
        return None
    except RuntimeError as error:
        if "synchroniz" not in str(error):
            raise
        frames = traceback.extract_tb(error.__traceback__)
        return f"{str(error).splitlines()[0]} at {frames[-1].filename}:{frames[-1].lineno}"
    finally:
        torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize(device)


def main() -> None:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (torch.cuda.set_sync_debug_mode); nothing measured")
        return
    for spec in build_plan([*DEFAULTS, *sys.argv[1:]]).runs:
        cfg = spec.config
        configure_backends(cfg)
        trainer = make_workload(cfg, torch.device(cfg.device))
        run_window(trainer, 0, cfg.warmup_steps, torch.device(cfg.device))
        found = first_sync(trainer, cfg)
        expected = " (expected: GradScaler)" if found and cfg.precision.grad_scaler else ""
        print(f"{spec.name:<60} {'no sync' if found is None else 'SYNC ' + found}{expected}")
        del trainer
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
