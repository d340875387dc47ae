"""What a compiled run's model ran as: Dynamo's graphs, or eager ops.

torch.compile falls back to eager code without a word.
An unsupported tensor subclass can break every graph.
A step then runs no compiled op at all.
Its figures are eager ones under a compiled run's name.
So one step after the window runs under the profiler.
It profiles the host only.
Dynamo marks each compiled frame that runs (Torch-Compiled Region).
The mark names the frame's compile id.
Dynamo's compilation metrics give each compile id's ops.
A frame whose graph holds none ran eagerly.
Both are torch's own records, read as torch 2.x writes them.
Where either is missing, the count is unknown.
Graph breaks are counted per process, not per model.
A paired process's sides share them.
Dynamo's recompile limit counts among them: past it, a function's further variants run eagerly.
Its sides compile variants of one model's code: a paired process holds as many of them as its compiled sides.
"""

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from perfsweep.conf.schema import CompileConf
from perfsweep.records import Compiled

REGION = "Torch-Compiled Region: "  # torch/_dynamo/convert_frame.py: a compiled frame's name in the profiler
LIMIT_HIT = "torch._dynamo hit config."  # convert_frame's warning where a function passes its recompile limit
DEFAULT_RECOMPILE_LIMIT = 8  # torch's recompile_limit: the variants of one function a side may compile


class _LimitHits(logging.Filter):
    """Each recompile limit Dynamo's warnings say it hit in this process, with the function: 'recompile_limit (8)
    at forward (models.py:16)' -> times."""

    def __init__(self) -> None:
        super().__init__()
        self.hits: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith(LIMIT_HIT):
            lines = record.getMessage().splitlines()
            limit = lines[0].removeprefix(LIMIT_HIT)
            where = lines[1].split("function: ", 1)[-1].strip() if len(lines) > 1 else "?"
            said = f"Dynamo's {limit} hit at {where}: its further variants run eagerly"
            self.hits[said] = self.hits.get(said, 0) + 1
        return True


_HITS = _LimitHits()


def watch_recompiles(compiled_sides: int) -> None:
    """Count Dynamo's recompile-limit hits as graph breaks, and give a process of `compiled_sides` compiled sides the
    limit of each: every side compiles variants of the same code (its mode, its autocast)."""
    import torch._dynamo

    logger = logging.getLogger("torch._dynamo.convert_frame")
    if _HITS not in logger.filters:
        logger.addFilter(_HITS)
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # its name before torch 2.6
    setattr(config, name, max(getattr(config, name), DEFAULT_RECOMPILE_LIMIT * compiled_sides))


def compiled_graphs(step: Callable[[], Any], conf: CompileConf) -> Compiled | None:
    """The compiled graphs that ran in one `step`, and the process's graph breaks.

    None where nothing is compiled.
    """
    if not conf.enabled:
        return None
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # above its highest (5): no lines at each profile's start and stop
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
            step()
        ran = [event.name.removeprefix(REGION) for event in profiler.events() if event.name.startswith(REGION)]
        graphs = _with_ops(ran)
    except Exception:  # counting is beside the measurement: it must never fail the run
        graphs = None
    return Compiled(backend=conf.backend, graphs_run=graphs, graph_breaks=graph_breaks())


def _with_ops(compile_ids: list[str]) -> int | None:
    """How many of the compiled frames that ran hold a graph of one op or more.

    None where a frame's graph is unknown.
    """
    from torch._dynamo.utils import get_compilation_metrics

    ops: dict[str, int] = {}
    for metrics in get_compilation_metrics():  # a compile id may have several entries: the one with a graph counts
        if metrics.graph_op_count is not None:
            key = str(metrics.compile_id)
            ops[key] = max(ops.get(key, 0), metrics.graph_op_count)
    if not compile_ids or any(key not in ops for key in compile_ids):
        return None if compile_ids else 0
    return sum(ops[key] > 0 for key in compile_ids)


def graph_breaks() -> dict[str, int]:
    """Dynamo's graph breaks in this process so far, by the first line of their reason."""
    if "torch._dynamo" not in sys.modules:
        return {}
    from torch._dynamo.utils import counters

    found: dict[str, int] = {}
    for reason, count in counters["graph_break"].items():
        first = str(reason).strip().splitlines()[0] if str(reason).strip() else "(no reason given)"
        found[first] = found.get(first, 0) + count
    return found | _HITS.hits
