"""Starting a run's ranks, each a process in the run's process group.

On this host, the run's own process starts `dist.world_size` ranks.
It uses torch's elastic launch API, as torchrun does.
Each rank is a process of its own, with RANK, LOCAL_RANK and WORLD_SIZE set.
On a CPU the ranks are forked; on a GPU each is a new interpreter.
They meet on a free local port, and none is restarted.
Each rank's output goes to the run's folder, in ranks/.

On Slurm, the ranks are the tasks of the run's job, started by srun.
There are dist.world_size tasks a node, on launcher.nodes nodes.
submitit's TorchDistributedEnvironment sets their rendezvous.
Each task's log is its output.
The first task, rank 0, is the run's process.
It gathers the other ranks' results and records the run.

No run waits on its ranks forever.
A rank that fails ends the others: the elastic agent stops them at once.
A collective waiting more than dist.timeout_s fails its rank (a peer died or hangs).
The agent takes over this process's signal handlers while the ranks run.
They are given back after.
A signal the agent caught interrupts the run, as one caught here would.
"""

import contextlib
import datetime
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import torch

from perfsweep.sweeps.spec import RunSpec
from perfsweep.train.parallel import local_rank
from perfsweep.train.ranks.measure import RankResult, measure_rank

RANK_LOGS = "ranks"  # in the run's folder: each rank's output, as the elastic agent writes it
# What a rank's collectives say when a peer's process is gone (gloo, NCCL)
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "remote process exited")
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # what the agent handles while it runs


class RankFailed(RuntimeError):
    """A rank of the run failed: which, how, and where its output is."""


def backend(cfg, device: torch.device) -> str:
    return str(cfg.dist.backend) if cfg.dist.backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")


def rank_device(cfg) -> torch.device:
    if cfg.device == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank())


@contextlib.contextmanager
def process_group(cfg):
    """This process as a rank of the run, on its device, which it yields.

    The rendezvous is in the environment: RANK, WORLD_SIZE, MASTER_ADDR...
    Its collectives fail after dist.timeout_s.
    """
    device = rank_device(cfg)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=cfg.dist.timeout_s)
    torch.distributed.init_process_group(backend(cfg, device), timeout=timeout)
    try:
        yield device
    finally:
        torch.distributed.destroy_process_group()


def rank_main(spec: RunSpec, gather: bool = False) -> RankResult | list[RankResult] | None:
    """One rank: its windows measured, for the run's process. A rank writes nothing.

    Args:
        spec: the run.
        gather: the ranks are a job's tasks; every rank's result goes to rank 0.

    Returns:
        This rank's result. With `gather`, rank 0 returns every rank's, by rank.
        The other ranks then return None.
    """
    cfg = spec.config
    with process_group(cfg) as device:
        result = measure_rank(cfg, device, as_task=gather)
        if not gather:
            return result
        rank, every = torch.distributed.get_rank(), [None] * torch.distributed.get_world_size()
        torch.distributed.gather_object(result, every if rank == 0 else None, dst=0)
        return every if rank == 0 else None


def task_rank(spec: RunSpec) -> None:
    """A rank that is a task of the run's Slurm job, other than the first.

    It is measured, and its result sent to rank 0.
    """
    rank_main(spec, gather=True)


def task_ranks(spec: RunSpec, launch: dict[str, Any]) -> list[RankResult]:
    """Rank 0 of a run whose ranks are its Slurm job's tasks: every rank's result.

    srun starts each task; submitit's TorchDistributedEnvironment sets the rendezvous.

    Raises:
        RankFailed: this rank's collectives failed. A peer died or stopped answering.
            Its task's log says why.
    """
    try:
        return rank_main(spec, gather=True)
    except Exception as error:  # a peer's connection closed, a collective past dist.timeout_s
        said = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        job, own = launch.get("job_id"), launch.get("log")
        folder = Path(own).parent if own else Path("the job's folder")
        raise RankFailed(
            f"rank 0 of {launch['tasks']} failed ({type(error).__name__}): {said}; its output: {own}; each other "
            f"rank's is its task's log, {folder}/{job}_<rank>_log.err"
        ) from error


def start_method(cfg) -> str:
    """How the ranks start: fork on a CPU, spawn on a GPU.

    Forked ranks start with this process's imports, torch's among them.
    So they start in a fraction of a second.
    A forked process must not inherit a GPU's CUDA state.
    """
    return "fork" if rank_device(cfg).type == "cpu" and "fork" in multiprocessing.get_all_start_methods() else "spawn"


def launch_config(cfg, logs: Path):
    """How torch's elastic launcher starts the run's ranks on this host.

    It starts dist.world_size ranks and restarts none.
    They meet on a free local port, as torchrun --standalone does.
    Each rank's output goes to `logs`.
    """
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.launcher.api import LaunchConfig

    return LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=cfg.dist.world_size,
        run_id=f"perfsweep-{os.getpid()}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=0.1,
        start_method=start_method(cfg),
        logs_specs=DefaultLogsSpecs(log_dir=str(logs), redirects=Std.ALL),
    )


def run_ranks(spec: RunSpec, run_dir: Path) -> list[RankResult]:
    """Start the run's ranks on this host and wait for them.

    Returns:
        Each rank's result, by rank.

    Raises:
        RankFailed: a rank failed.
    """
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    handlers = {number: signal.getsignal(number) for number in HANDLED}
    try:
        results = elastic_launch(launch_config(spec.config, run_dir / RANK_LOGS), rank_main)(spec)
    except ChildFailedError as error:
        # the first failure the agent saw: a rank killed by a signal, or a peer of it failing in a collective
        rank, failure = error.get_first_failure()
        raise RankFailed(failure_text(rank, failure, spec, run_dir)) from None
    except SignalException as caught:  # the agent's handler: an interrupt, as this process's own would be
        raise KeyboardInterrupt(f"signal {caught.sigval.name} while its ranks ran") from None
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    return [results[rank] for rank in sorted(results)]


def failure_text(rank: int, failure, spec: RunSpec, run_dir: Path) -> str:
    """Which rank failed first, how, and where its error is.

    The agent reports the first failure it sees.
    That may be a peer of the rank that ended first: its connection closed (PEER_GONE).
    A rank killed by a signal it cannot catch leaves no error.json (SIGKILL, the out-of-memory killer).
    A rank without one is then named first.
    Ranks the agent stopped after a failure may leave none either.
    So only a peer's failure looks for such a rank.
    """
    ranks, attempt = spec.config.dist.world_size, next((run_dir / RANK_LOGS).glob("*/attempt_*"), None)
    said = failure.message.get("message", "") if isinstance(failure.message, dict) else str(failure.message)
    how = f"killed by {failure.signal_name()}" if failure.exitcode < 0 else f"exit code {failure.exitcode}"
    error = Path(failure.error_file)
    where = f"its error: {error}" if error.is_file() else f"its output: {_rank_log(attempt, failure.local_rank)}"
    reported = f"rank {rank} of {ranks} failed ({how}): {said.strip()}; {where}"
    if attempt is None or not any(words in said for words in PEER_GONE):
        return reported
    killed = [r for r in range(ranks) if r != failure.local_rank and not (attempt / str(r) / "error.json").is_file()]
    if not killed:
        return reported
    return (
        f"rank {', '.join(map(str, killed))} of {ranks} ended first, with no error of its own: a signal it cannot "
        f"catch killed it (SIGKILL; the out-of-memory killer sends it, as `dmesg` says); its output: "
        f"{_rank_log(attempt, killed[0])}. Then {reported}"
    )


def _rank_log(attempt: Path | None, local_rank: int) -> Path | None:
    return attempt / str(local_rank) / "stderr.log" if attempt else None
