"""The ranks' results combined into the run's records: pure functions of the results.

The run's steps are one rank's synced window steps, which every view reads as any run's.
That rank is the straggler, the rank the others wait for: its own steps, without sync, are the slowest.
FSDP has no straggler: its run's rank is the one with the slowest synced steps.
ranks.parquet keeps every rank's steps.

Synced steps wait for the slowest rank in their collectives.
So they hide which rank is slowest.
The straggler index is taken over DDP's steps without sync, where no rank waits for another.
It is the slowest rank's median own step over the ranks' median.
Every FSDP step all-gathers its parameters, so FSDP has no straggler index.

A rank's exposed communication is its median backward with sync less without.
The run's is the least over its ranks.
The straggler waits for no one, so its difference is the reduction alone.
"""

import dataclasses
import functools
from collections.abc import Iterator
from statistics import median
from typing import Any

from perfsweep.records import RankSummary
from perfsweep.records.host import HostBlock
from perfsweep.train.ranks.measure import RankResult
from perfsweep.train.window import Window


@dataclasses.dataclass(frozen=True)
class Ranks:
    """A run's ranks' results, combined."""

    results: tuple[RankResult, ...]  # by rank
    wrapper: str  # dist.name: ddp or fsdp

    def medians(self, with_sync: bool = True) -> list[float] | None:
        """Each rank's median window step (ms), with gradient sync or without it.

        Returns:
            None where a rank has no such step.
        """
        steps = [result.window_steps(with_sync) for result in self.results]
        if not all(steps):
            return None
        return [median(row["step_ms"] for row in rows) for rows in steps]

    @functools.cached_property
    def run_rank(self) -> RankResult:
        """The rank whose steps are the run's.

        It is the straggler, with the slowest own steps; else the slowest synced.
        """
        medians = self.medians(with_sync=False) or self.medians()
        return self.results[medians.index(max(medians))]

    def window(self) -> Window:
        """The run's rank's synced steps, as the run's window, with the host over its blocks (`host`).

        Its seconds are those steps' own: device time on CUDA.
        """
        rows = self.run_rank.window_steps()
        window = self.run_rank.window
        seconds = sum(row["step_ms"] for row in rows) / 1e3
        return Window(rows, seconds, window.timer, window.ended_at, self.host())

    def host(self) -> list[HostBlock]:
        """The run's rank's host over its window's blocks, with and without sync.

        Its other ranks on the same host and CPUs are the run's own work, not other processes (`beside`).
        On GPUs each rank reads its own GPU: a block's GPU energy is then every rank's, where every rank read it
        over as many blocks (else unknown). The CPU packages' energy (RAPL) is every process's already.
        """
        mine = self.run_rank.window.host
        every = [result.window.host for result in self.results]
        combined = []
        for index, block in enumerate(mine):
            block = self.beside(block, index)
            if block.gpu is None:
                combined.append(block)
                continue
            gpus = [blocks[index].gpu if len(blocks) == len(mine) else None for blocks in every]
            energies = [gpu.energy_j if gpu else None for gpu in gpus]
            energy = None if None in energies else sum(energies)
            summed = f"{block.gpu.energy_source}, {len(gpus)} GPUs' sum"
            source = None if energy is None else block.gpu.energy_source if len(gpus) == 1 else summed
            combined.append(
                dataclasses.replace(block, gpu=dataclasses.replace(block.gpu, energy_j=energy, energy_source=source))
            )
        return combined

    def beside(self, block: HostBlock, index: int) -> HostBlock:
        """The run's rank's block `index` with its other ranks' CPU time on its CPUs taken out of others'.

        A rank on the same host counts in part.
        That part is the share of its CPUs that are the run's rank's too.
        Its block `index` covers the same steps.
        Blocks with gradient sync start and end within a collective's wait of the run's rank's.
        Blocks without it do not wait: theirs line up as closely as the ranks' speeds allow.
        A rank's blocks may not be as many.
        They then do not line up, and others' CPU is unknown.
        """
        me, ranks_cpu_s = self.run_rank, 0.0
        for result in self.results:
            shared = len(result.cpus & me.cpus) / len(result.cpus) if result.cpus else 0.0
            if result is me or result.node != me.node or not shared:
                continue
            if len(result.window.host) != len(me.window.host):
                ranks_cpu_s = None
                break
            theirs = result.window.host[index]
            ranks_cpu_s += shared * (theirs.process_cpu_s + (theirs.children_cpu_s or 0.0))
        others = None
        if block.busy_s is not None and ranks_cpu_s is not None:
            own = block.process_cpu_s + (block.children_cpu_s or 0.0)
            others = max(0.0, block.busy_s - own - ranks_cpu_s)
        return dataclasses.replace(block, ranks_cpu_s=ranks_cpu_s, others_cpu_s=others)

    def summary(self) -> RankSummary:
        """How the ranks compare: summary.json's `ranks`.

        The straggler needs steps that wait for no rank: DDP's without sync, on 2 ranks or more.
        The exposed communication needs steps without sync to compare with.
        """
        medians, own = self.medians(), self.medians(with_sync=False)
        found: dict[str, Any] = {}
        if own is not None and len(own) > 1:  # one rank waits for no one
            found |= {
                "own_step_ms": own,
                "straggler_rank": self.run_rank.rank,
                "straggler_index": max(own) / median(own),
            }
        compared = [_compared(result) for result in self.results]
        if all(rows[False] for rows in compared):
            exposed = min(max(0.0, _backward(rows[True]) - _backward(rows[False])) for rows in compared)
            found |= {"exposed_comm_ms": exposed, "exposed_comm_share": exposed / max(medians)}
        found |= self.threads()
        return RankSummary(world_size=len(self.results), step_ms=medians, **found, **self.bus_bandwidth(compared))

    def threads(self) -> dict[str, Any]:
        """Each rank's CPU threads, and the most its ranks used together on one node.

        Nothing where a rank's are unknown.
        """
        threads = [result.threads for result in self.results]
        if None in threads:
            return {}
        nodes: dict[str, int] = {}
        for result in self.results:
            nodes[result.node] = nodes.get(result.node, 0) + result.threads
        return {"threads": threads, "node_threads": max(nodes.values())}

    def bus_bandwidth(self, compared: list[dict[bool, list[dict[str, Any]]]]) -> dict[str, Any]:
        """The gradients' reduction: its bytes a rank a step, and its bus bandwidth at least.

        The bandwidth is counted as nccl-tests counts it.
        DDP's all-reduce moves bytes x 2(n-1)/n; FSDP's reduce-scatter moves bytes x (n-1)/n.
        The reduction runs within backward with sync, on every rank.
        It starts once backward has made a bucket's or a unit's gradients.
        Backward ends when every one is reduced.
        So its time is at most the least of the ranks' median backward with sync.
        Those are taken in the steps that measure the exposed communication.
        The bandwidth is thus a lower bound, loose where backward hides much of it.

        Args:
            compared: each rank's steps that measure exposed communication, by gradient sync.

        Returns:
            comm_bytes_per_step and bus_gbps_min; nothing for one rank, which reduces with no one.
        """
        ranks, grad_bytes = len(self.results), self.run_rank.grad_bytes
        if ranks < 2:
            return {}
        backward_s = min(_backward(rows[True]) for rows in compared) / 1e3
        moved = (2 if self.wrapper == "ddp" else 1) * (ranks - 1) / ranks
        return {"comm_bytes_per_step": grad_bytes, "bus_gbps_min": grad_bytes * moved / backward_s / 1e9}

    def workload_summary(self, steps_per_s: float) -> dict[str, Any]:
        """The training step's summary fields; samples/s counts all ranks together."""
        fields = dict(self.run_rank.workload)
        fields["samples_per_s"] = fields["samples_per_s"] * steps_per_s * len(self.results)
        return fields

    def series(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What W&B gets of the run, step by step.

        Each row is the run's own, with every rank's columns beside it.
        They are named rank<N>/<column>: phase times, gradient sync and the probe flag.
        The steps without sync and FSDP's probe are among them.
        """
        by_step = {int(row["step"]): dict(row) for row in rows}
        for result in self.results:
            rank = f"rank{result.rank}/"
            for _, probe, row in _every_step(result):
                entry = by_step.setdefault(int(row["step"]), {"step": row["step"]})
                entry |= {rank + key: value for key, value in row.items() if key.endswith("_ms") or key == "grad_sync"}
                entry[rank + "probe"] = probe
        return [by_step[step] for step in sorted(by_step)]

    def every_step(self) -> list[dict[str, Any]]:
        """ranks.parquet's rows: every rank's steps, each with its rank and its warm-up and probe flags."""
        return [
            {**row, "rank": result.rank, "warmup": warmup, "probe": probe}
            for result in self.results
            for warmup, probe, row in _every_step(result)
        ]


def _compared(result: RankResult) -> dict[bool, list[dict[str, Any]]]:
    """A rank's steps that measure its exposed communication, by gradient sync.

    They are FSDP's probe after its window, else the window.
    DDP's window alternates; without dist.exposed_comm, every step syncs.
    """
    rows = (result.probe or result.window).rows
    return {on: [row for row in rows if row["grad_sync"] == on] for on in (True, False)}


def _every_step(result: RankResult) -> Iterator[tuple[bool, bool, dict[str, Any]]]:
    """A rank's steps in order, each with whether it is a warm-up step and whether a probe step."""
    for warmup, probe, window in (
        (True, False, result.warmup),
        (False, False, result.window),
        (False, True, result.probe),
    ):
        for row in window.rows if window else []:
            yield warmup, probe, row


def _backward(rows: list[dict[str, Any]]) -> float:
    return median(row["backward_ms"] for row in rows)
