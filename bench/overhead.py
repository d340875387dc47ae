"""The harness's cost: throughput of perfsweep's timed loop against the same loop with no clock.

    python -m perfsweep.bench.overhead [--rounds 10] [OVERRIDE ...]
    python -m perfsweep.bench.overhead model=resnet50 model.image_size=224 model.batch_size=64 precision=amp_bf16 \\
        memory_format=channels_last input_type=subclass device=cuda

The overrides (as for launch.py; default: timm's test_resnet, plain Tensor, contiguous) must name one
run. After its warm-up, windows of `steps` steps alternate A B, B A, A B...: A is the bare loop (the
same steps with a clock that does nothing), B is perfsweep's (StepClock: perf_counter at every phase
boundary, and a CUDA event on a GPU). Each window has one synchronize before and one after. Prints
samples/s of each (median, IQR) and the ratio B/A within each round (median, IQR).

--synced adds a third loop C, in rounds A B C, B C A, C A B...: perfsweep's clock with a synchronize at every phase
boundary, as timm's `benchmark.py --detail` times phases: what such a harness costs (a GPU's
queue drains at each boundary; on a CPU it changes nothing).
"""

import statistics
import time

from perfsweep.bench import command
from perfsweep.train.build import configure_backends, resolve_device
from perfsweep.train.timing import NoClock, StepClock, synchronize
from perfsweep.train.window import make_workload, run_window, timed_steps

# one run, in this process: the rounds interleave the loops, so replicates (repeats) would measure nothing more
DEFAULTS = [
    "model=test_resnet",
    "input_type=tensor",
    "memory_format=contiguous",
    "steps=30",
    "warmup_steps=5",
    "repeats=1",
]


def window(trainer, device, first: int, steps: int, clock) -> float:
    synchronize(device)
    start = time.perf_counter()
    timed_steps(trainer, first, steps, clock)
    synchronize(device)
    return time.perf_counter() - start


class SyncedClock(StepClock):
    """StepClock with a synchronize before each boundary: phases timed the way that changes them."""

    def __init__(self, device, capacity: int, phases: tuple[str, ...]):
        super().__init__(device, capacity, phases)
        self.device = device

    def mark(self) -> None:
        synchronize(self.device)
        super().mark()


def rotated(names: list[str], index: int) -> list[str]:
    """Round `index`'s order: each loop takes each place in turn, so that none always follows the same one (a GPU
    that has just run the synced loop, idle at every boundary, runs the next loop cooler and at a higher clock)."""
    shift = index % len(names)
    return names[shift:] + names[:shift]


def spread(values: list[float]) -> str:
    q1, q2, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return f"{q2:.4g} [IQR {q1:.4g} - {q3:.4g}]"


def measured(overrides: list[str]):
    """The one run the defaults and `overrides` name; SystemExit where they name several."""
    runs = command.checked([*DEFAULTS, *overrides]).runs
    if len(runs) != 1:
        raise SystemExit(f"the overrides name {len(runs)} runs; name one (pin every swept axis)")
    return runs[0]


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("overhead", __doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--synced", action="store_true", help="add a loop that synchronizes at each boundary")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    spec = measured(args.overrides)
    cfg = spec.config
    if args.dry_run:
        loops = "bare, perfsweep" + (", synced" if args.synced else "")
        command.would(f"{spec.name}: {args.rounds} rounds of {cfg.steps} steps of each loop ({loops})")
        return
    device = resolve_device(cfg.device)
    configure_backends(cfg)
    trainer = make_workload(cfg, device)
    run_window(trainer, 0, cfg.warmup_steps, device)
    clocks = {"bare": NoClock, "perfsweep": lambda: StepClock(device, cfg.steps, trainer.phases)}
    if args.synced:
        clocks["synced"] = lambda: SyncedClock(device, cfg.steps, trainer.phases)
    samples = {name: [] for name in clocks}
    first, names = cfg.warmup_steps, list(clocks)
    for index in range(args.rounds):
        for name in rotated(names, index):
            seconds = window(trainer, device, first, cfg.steps, clocks[name]())
            samples[name].append(cfg.steps * cfg.model.batch_size / seconds)
            first += cfg.steps
    orders = ", ".join(" ".join("ABC"[names.index(n)] for n in rotated(names, i)) for i in range(len(names)))
    print(f"{spec.name} on {device}, {args.rounds} rounds of {cfg.steps} steps, in turn {orders}")
    for name, values in samples.items():
        print(f"{name:<10} samples/s {spread(values)}")
    for name in list(clocks)[1:]:
        ratios = [b / a for a, b in zip(samples["bare"], samples[name], strict=True)]
        print(f"{name}/bare throughput {spread(ratios)}")


if __name__ == "__main__":
    main()
