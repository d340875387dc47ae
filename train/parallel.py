"""A model as one rank of a run across ranks holds it (DDP's replica, FSDP2's shards), its checks, and which
steps synchronise gradients (the blocks without sync that train/ranks/measure.py measures exposed communication by)."""

import contextlib
import os

import torch

from perfsweep.conf.schema import DistConf, RunConf

FSDP_KNOBS = ("reshard_after_forward",)
DDP_KNOBS = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph")


def problems(cfg: RunConf) -> list[str]:
    """What stops the run's ranks, before anything is submitted: each naming the value and what would work."""
    conf, default = cfg.dist, DistConf()
    issues = [f"dist.{k}={getattr(conf, k)} must be {bound}" for k, bound, ok in _bounds(conf) if not ok]
    if conf.name == "none":
        if conf.world_size != 1:
            issues.append(f"dist.world_size={conf.world_size} needs ranks: dist=ddp or dist=fsdp (dist=none is one)")
        return issues
    if conf.exposed_comm and cfg.steps % conf.sync_block:
        issues.append(
            f"steps={cfg.steps} with dist.sync_block={conf.sync_block}: a run across ranks times blocks of "
            "dist.sync_block steps with gradient sync and as many without, steps of each: steps must be a multiple "
            "of dist.sync_block (or dist.exposed_comm=false: no steps without sync)"
        )
    issues += [
        f"{setting}=true with dist={conf.name}: a trace of a run across ranks is not supported yet"
        for setting in ("profile", "explain")
        if getattr(cfg, setting)
    ]
    mine, theirs = (DDP_KNOBS, FSDP_KNOBS) if conf.name == "ddp" else (FSDP_KNOBS, DDP_KNOBS)
    other = "fsdp" if conf.name == "ddp" else "ddp"
    issues += [
        f"dist.{knob}={getattr(conf, knob)} is a knob of dist={other}; dist={conf.name} takes {', '.join(mine)}"
        for knob in theirs
        if getattr(conf, knob) != getattr(default, knob)
    ]
    return issues


def device_problems(cfg: RunConf, here: bool = True) -> list[str]:
    """What stops the run's ranks on their devices.

    With `here`, its ranks run where this process does, and share what it sees.
    They are checked against the GPUs, or the CPUs, this process sees.
    Else only what stops them anywhere is checked: NCCL for ranks on a CPU (device=cpu).
    """
    conf = cfg.dist
    if conf.name == "none":
        return []
    on_gpu = cfg.device != "cpu" and (not here or torch.cuda.is_available())
    if conf.backend == "nccl" and not on_gpu:
        return [f"dist.backend=nccl needs ranks on GPUs, and this run's are on a CPU (device={cfg.device}); "
                "dist.backend=gloo (or auto) runs them there"]  # fmt: skip
    if not here:
        return []
    if on_gpu and conf.world_size > torch.cuda.device_count():
        return [
            f"dist.world_size={conf.world_size} on GPUs: a rank needs a GPU of its own, and this run is given "
            f"{torch.cuda.device_count()} (dist.world_size={torch.cuda.device_count()} or fewer, or device=cpu)"
        ]
    cpus = len(os.sched_getaffinity(0))
    if not on_gpu and conf.world_size > cpus:
        return [
            f"dist.world_size={conf.world_size} on a CPU: a rank needs a CPU of its own, and this run may use {cpus}; "
            f"more would wait for one another, and their times would be the wait (dist.world_size={cpus} or fewer)"
        ]
    if not on_gpu and cfg.threads and conf.world_size * cfg.threads > cpus:
        fits = cpus // conf.world_size
        return [
            f"dist.world_size={conf.world_size} with threads={cfg.threads} on a CPU: "
            f"{conf.world_size * cfg.threads} threads on the {cpus} CPUs this run may use would wait for one another; "
            f"threads={fits}{' or fewer' if fits > 1 else ''}, or threads=null (the ranks share the CPUs)"
        ]
    return []


def _bounds(conf: DistConf) -> list[tuple[str, str, bool]]:
    return [
        ("world_size", "1 or more", conf.world_size >= 1),
        ("timeout_s", "above 0", conf.timeout_s > 0),
        ("sync_block", "1 or more (steps a block)", conf.sync_block >= 1),
        ("bucket_cap_mb", "above 0", conf.bucket_cap_mb > 0),
        ("delay_ms", "0 or more", conf.delay_ms >= 0),
        ("delay_rank", f"a rank, 0 to {conf.world_size - 1}", conf.delay_rank in (None, *range(conf.world_size))),
    ]


def distributed(model: torch.nn.Module, conf: DistConf, device: torch.device) -> torch.nn.Module:
    """The model as this rank holds it; the model itself for dist=none. Called before its optimizer is built:
    FSDP2 replaces the parameters with their shards."""
    if conf.name == "ddp":
        return torch.nn.parallel.DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=conf.bucket_cap_mb,
            gradient_as_bucket_view=conf.gradient_as_bucket_view,
            static_graph=conf.static_graph,
        )
    if conf.name == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for child in model.children():  # each top-level block its own unit, then the rest
            if any(p.requires_grad for p in child.parameters()):
                fully_shard(child, reshard_after_forward=conf.reshard_after_forward)
        return fully_shard(model, reshard_after_forward=conf.reshard_after_forward)
    return model


def synced(index: int, cfg: RunConf) -> bool:
    """Whether step `index` synchronises gradients. With dist.exposed_comm, DDP's measured window and FSDP's probe
    (the steps after its window) are blocks of dist.sync_block steps with sync, then as many without, counted from
    their first step; DDP's warm-up alternates the two step by step, the last with sync. FSDP's warm-up and window
    sync every step: its steps without sync hold every unit's unsharded gradients until a later reduce-scatter,
    which the window's peak memory would count."""
    conf = cfg.dist
    if conf.name == "none" or not conf.exposed_comm:
        return True
    if index < cfg.warmup_steps:
        return conf.name == "fsdp" or (cfg.warmup_steps - 1 - index) % 2 == 0
    blocks_from = cfg.warmup_steps + (cfg.steps if conf.name == "fsdp" else 0)
    return index < blocks_from or ((index - blocks_from) // conf.sync_block) % 2 == 0


def measured_steps(cfg: RunConf) -> int:
    """The measured window's steps on each rank: `steps` with sync, and as many without for DDP."""
    return 2 * cfg.steps if cfg.dist.name == "ddp" and cfg.dist.exposed_comm else cfg.steps


def probe_steps(cfg: RunConf) -> int:
    """FSDP's probe after its window: `steps` steps with sync and as many without, in blocks (none for DDP, whose
    window has them, nor without dist.exposed_comm)."""
    return 2 * cfg.steps if cfg.dist.name == "fsdp" and cfg.dist.exposed_comm else 0


@contextlib.contextmanager
def without_sync(replica: torch.nn.Module, conf: DistConf):
    """A step whose backward reduces no gradients: DDP's no_sync() (the same work, without the all-reduce), or
    FSDP2's gradient sync switched off (no reduce-scatter: its gradients stay unsharded, summed, until the next
    step with sync) and on again after."""
    if conf.name == "ddp":
        with replica.no_sync():
            yield
        return
    replica.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        replica.set_requires_gradient_sync(True)


def delay_s(conf: DistConf) -> float:
    """The straggler drill's sleep for this rank each step (0: none)."""
    mine = conf.delay_rank is not None and conf.delay_rank == int(os.environ.get("RANK", -1))
    return conf.delay_ms / 1e3 if mine else 0.0


def rank_threads(cfg: RunConf, cpus: int) -> int:
    """Each rank's CPU threads: what the run asks for, else the node's CPUs shared among its ranks."""
    return cfg.threads or max(1, cpus // cfg.dist.world_size)


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))
