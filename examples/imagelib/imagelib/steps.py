"""imagelib's training step: callbacks after backward, gradient clipping, then the optimizer.

It follows perfsweep's step protocol: `phases` names the phases, `__init__(cfg, device)` builds everything
before timing starts, and `step(index, clock)` runs one step, marking the clock at the end of each phase.
"""

import torch

from perfsweep.train.build import build


class GradNorm:
    """A callback that keeps the gradients' norm after each backward, as a device tensor (read it after timing:
    reading it now would make the host wait for the device)."""

    def __init__(self) -> None:
        self.norms: list[torch.Tensor] = []

    def after_backward(self, model: torch.nn.Module) -> None:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        self.norms.append(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))


class ClippedStep:
    """data -> forward -> backward (and its callbacks) -> clip -> optimizer."""

    phases = ("data", "forward", "backward", "clip", "optimizer")

    def __init__(self, cfg, device: torch.device):
        self.parts = build(cfg, device)  # the model, batches and optimizer of this run's axes
        self.max_norm = float(cfg.workload.kwargs.get("max_norm", 1.0))
        self.callbacks = [GradNorm()]

    def step(self, index: int, clock) -> torch.Tensor:
        parts = self.parts
        clock.start()
        x, y = parts.batches[index % len(parts.batches)]
        x = parts.to_model(x)
        clock.mark()
        with parts.autocast():
            loss = parts.loss(parts.forward(x), y)
        clock.mark()
        loss.backward()
        for callback in self.callbacks:
            callback.after_backward(parts.model)
        clock.mark()
        torch.nn.utils.clip_grad_norm_(parts.model.parameters(), self.max_norm)
        clock.mark()
        parts.optimizer.step()
        parts.zero_grad()
        clock.mark()
        return loss.detach()
