"""fastai's own training loop as a workload: a real Learner's batch, Learner.one_batch.

The batch has its callbacks, its loss and optimizer, and its fastai tensor types.
It is timed phase by phase, beside perfsweep's plain step (seed 000).

A callback of the Learner's, last in each event, marks the clock where a phase ends:

- data: moving and splitting the batch, and the callbacks before it (CastToTensor);
- forward: the model, the loss, and the callbacks after them;
- backward;
- optimizer: the step, zeroing the gradients, and the callbacks after the batch (Recorder's).

The phases have the plain step's names, so a sweep of both lines them up.
fastai is optional: requirements-fastai.txt.
"""

from typing import Any

import torch

from perfsweep.conf.schema import RunConf
from perfsweep.train import fastai_parts
from perfsweep.train import precision as prec
from perfsweep.train.build import ALGORITHMS, LOSSES, MEMORY_FORMATS, OPTIMIZERS, build_model, synthetic_batches
from perfsweep.train.inputs import get_input_type
from perfsweep.train.registry import choice
from perfsweep.train.step import model_problems_of
from perfsweep.train.timing import NoClock
from perfsweep.train.workloads import WORKLOADS, Workload, compiled

# The fastai modules the loop imports as it is built, its parts' among them.
MODULES = (
    *fastai_parts.MODULES.values(),
    "fastai.callback.core",
    "fastai.data.core",
    "fastai.data.load",
    "fastai.data.transforms",
    "fastai.learner",
)
LAST = 1000  # the marking callback's order: after every callback of the event


def _optimizer(cfg: RunConf):
    """The Learner's opt_func: fastai's optimizer, or torch's wrapped in fastai's OptimWrapper."""
    conf = cfg.optim
    if conf.name == "fastai":
        return lambda params, lr: fastai_parts.optimizer(params, conf.algorithm, lr, conf.momentum)
    from fastai.optimizer import OptimWrapper

    if conf.algorithm == "adam":
        return lambda params, lr: OptimWrapper(params, torch.optim.Adam, lr=lr, betas=(conf.momentum, 0.99))
    return lambda params, lr: OptimWrapper(params, torch.optim.SGD, lr=lr, momentum=conf.momentum)


def _marks():
    """A fastai callback that marks the run's clock at the end of each phase of a batch."""
    from fastai.callback.core import Callback

    class Marks(Callback):
        order = LAST

        def __init__(self) -> None:
            super().__init__()
            self.clock = NoClock()

        def before_batch(self) -> None:
            self.clock.mark()  # data

        def before_backward(self) -> None:
            self.clock.mark()  # forward, with the loss

        def after_backward(self) -> None:
            self.clock.mark()  # backward

        def after_batch(self) -> None:
            self.clock.mark()  # optimizer, zero_grad and the callbacks after the batch

    return Marks()


@WORKLOADS.register("fastai_step")
class FastaiStep(Workload):
    """A fastai Learner's training batch: data -> forward (with loss) -> backward -> optimizer."""

    phases = ("data", "forward", "backward", "optimizer")

    @classmethod
    def problems(cls, cfg: RunConf) -> list[str]:
        """What the fastai step checks.

        - fastai installed;
        - a known model and input type, loss and optimizer;
        - no precision fastai's loop does not take.

        fastai's loop does not take pure half precision.
        Mixed precision needs CUDA: fastai's MixedPrecision autocasts on CUDA.
        """
        issues = fastai_parts.missing("workload=fastai_step") + model_problems_of(cfg)
        issues += choice("loss", cfg.loss.name, list(LOSSES))
        issues += choice("optim", cfg.optim.name, list(OPTIMIZERS))
        issues += choice("optim.algorithm", cfg.optim.algorithm, ALGORITHMS)
        if cfg.precision.param_dtype:
            issues.append(
                f"precision={cfg.precision.name} with workload=fastai_step: fastai trains in float32 or "
                "mixed precision (amp_fp16, amp_bf16), not with half-precision weights"
            )
        if cfg.model.inputs:
            issues.append(
                f"model.inputs={cfg.model.inputs} with workload=fastai_step: fastai's loop here takes "
                "image batches; a batch factory of your own goes with workload=train_step"
            )
        if cfg.precision.autocast_dtype and cfg.device == "cpu":
            issues.append(
                f"precision={cfg.precision.name} with workload=fastai_step: fastai's MixedPrecision "
                "autocasts on CUDA; use device=cuda or precision=fp32"
            )
        return issues

    def __init__(self, cfg: RunConf, device: torch.device):
        super().__init__(cfg, device)
        from fastai.data.core import DataLoaders
        from fastai.data.load import DataLoader
        from fastai.data.transforms import TensorCategory
        from fastai.learner import CastToTensor, Learner

        self.memory_format = MEMORY_FORMATS[cfg.memory_format.name]
        dtype = prec.param_dtype(cfg.precision)
        model = build_model(cfg.model).to(device=device, dtype=dtype, memory_format=self.memory_format).train()
        self.batches = [(x, TensorCategory(y)) for x, y in synthetic_batches(cfg, device)]
        self.input_type = get_input_type(cfg.input_type)
        loader = DataLoader(self.batches[:1], bs=1)
        data = DataLoaders(loader, loader, device=device)
        data.n_inp = 1  # (the batch is (x, y): one input)
        self.marks = _marks()
        learn = Learner(
            data,
            compiled(model, cfg.compile),
            loss_func=LOSSES[cfg.loss.name](),
            opt_func=_optimizer(cfg),
            lr=cfg.optim.lr,
            cbs=[self.marks],
        )
        learn.remove_cbs([cb for cb in learn.cbs if type(cb).__name__ == "ProgressCallback"])
        if not cfg.workload.cast_to_tensor:
            learn.remove_cb(CastToTensor)
        if cfg.precision.autocast_dtype == "bfloat16":
            learn.to_bf16()
        elif cfg.precision.autocast_dtype:
            learn.to_fp16()
        learn.create_opt()
        learn.n_epoch, learn.epoch, learn.n_iter = 1, 0, 10**6
        learn("before_fit")
        learn("before_epoch")
        learn.dl = data.train
        learn("before_train")
        self.learn = learn
        self.replica = model
        self.output_type: type | None = None

    def step(self, index: int, clock) -> torch.Tensor:
        self.marks.clock = clock
        clock.start()
        x, y = self.batches[index % len(self.batches)]
        x = self.input_type.before_model(self.input_type.wrap(x.contiguous(memory_format=self.memory_format)))
        self.learn.one_batch(index, (x, y))
        self.output_type = type(self.learn.pred)
        return self.learn.loss.detach()

    def summary(self, steps_per_s: float) -> dict[str, Any]:
        output = self.output_type.__name__ if self.output_type else ""
        params = sum(p.numel() for p in self.replica.parameters())
        batch = self.cfg.model.batch_size
        return {"samples_per_s": steps_per_s * batch, "output_type": output, "params": params, "batch_size": batch}
