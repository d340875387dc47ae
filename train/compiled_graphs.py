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
"""

import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from perfsweep.conf.schema import CompileConf
from perfsweep.records import Compiled

REGION = "Torch-Compiled Region: "  # torch/_dynamo/convert_frame.py: a compiled frame's name in the profiler


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
    return found
