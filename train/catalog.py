"""Every workload and input type perfsweep has: importing this module registers them all.

`workload_class` gives the class of a run's workload.
That is a registered one by name, or the user's by import path.
`fastai_modules` gives the fastai modules a run imports.
"""

from perfsweep.conf.schema import RunConf, WorkloadConf
from perfsweep.train import fastai_loop, functions, step  # noqa: F401  (each registers its workloads)
from perfsweep.train.fastai_parts import MODULES as FASTAI_PARTS
from perfsweep.train.inputs import INPUT_TYPES
from perfsweep.train.workloads import WORKLOADS, Workload, user_workload

__all__ = ["INPUT_TYPES", "WORKLOADS", "fastai_modules", "workload_class"]


def workload_class(conf: WorkloadConf) -> type[Workload]:
    """The class of the workload `conf` names.

    That is the user's step (workload._target_), else the one registered.
    """
    return user_workload(conf._target_) if conf._target_ else WORKLOADS[conf.name]


def fastai_modules(cfg: RunConf) -> tuple[str, ...]:
    """The fastai modules a run of `cfg` imports as it runs.

    Those are fastai's loop's, or those of the fastai parts the run reads.
    A part counts where the workload reads its field: the input type, the loss or the optimizer.
    None is named for a step of the user's own.
    It may or may not import fastai.
    """
    if cfg.workload._target_:
        return ()
    if WORKLOADS[cfg.workload.name] is fastai_loop.FastaiStep:
        return fastai_loop.MODULES
    reads, input_type = set(cfg.workload.reads), cfg.input_type
    asked = {
        "input_type": not input_type._target_
        and input_type.name in INPUT_TYPES
        and INPUT_TYPES[input_type.name].needs_fastai,
        "loss": cfg.loss.name == "fastai",
        "optim": cfg.optim.name == "fastai",
    }
    return tuple(module for field, module in FASTAI_PARTS.items() if field in reads and asked[field])
