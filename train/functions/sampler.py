"""Seed 001's data sampler: pick SUB_SAMPLE = size // 10 of `size` labelled samples.

Half the picks are positive, and they come in random order.

- nonzero: the original, built on torch.nonzero.
  It syncs the host with the device, and its shapes depend on the data.
  It samples a batch one problem at a time, in a Python loop.
- static: the count_nonzero/topk version, with fixed shapes.
  It takes a whole batch at once and can be compiled (the compile axis).

One change from the published code: the static version gathers all features, as the nonzero version does.
The published one gathered `input` with an index of width 1.
So it returned one feature per sample.
"""

import torch

from perfsweep.train.functions.base import FunctionBench
from perfsweep.train.workloads import WORKLOADS


def nonzero_sample(inputs: torch.Tensor, labels: torch.Tensor, sub_sample: int) -> tuple[torch.Tensor, torch.Tensor]:
    device = labels.device
    positive = torch.nonzero(labels == 1, as_tuple=True)[0]
    negative = torch.nonzero(labels == 0, as_tuple=True)[0]
    num_pos = min(positive.numel(), sub_sample // 2)
    num_neg = min(negative.numel(), sub_sample // 2)
    if num_neg < sub_sample // 2:
        num_pos = sub_sample - num_neg
    elif num_pos < sub_sample // 2:
        num_neg = sub_sample - num_pos
    pos_idxs = positive[torch.randperm(positive.numel(), device=device)[:num_pos]]
    neg_idxs = negative[torch.randperm(negative.numel(), device=device)[:num_neg]]
    sampled = torch.cat([pos_idxs, neg_idxs], dim=0)
    sampled = sampled[torch.randperm(sub_sample, device=device)]
    return inputs[sampled], labels[sampled]


def nonzero_sample_batch(inputs: torch.Tensor, labels: torch.Tensor, sub_sample: int):
    if inputs.dim() == 2:
        return nonzero_sample(inputs, labels, sub_sample)
    pairs = [nonzero_sample(inputs[i], labels[i], sub_sample) for i in range(inputs.size(0))]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def static_sample(inputs: torch.Tensor, labels: torch.Tensor, sub_sample: int) -> tuple[torch.Tensor, torch.Tensor]:
    pos_mask = labels == 1
    neg_mask = labels == 0
    half = labels.new_full((), sub_sample // 2)
    num_pos = torch.minimum(torch.count_nonzero(pos_mask, dim=-1), half)
    num_neg = torch.minimum(torch.count_nonzero(neg_mask, dim=-1), half)
    num_pos = torch.where(num_neg < sub_sample // 2, sub_sample - num_neg, num_pos)
    num_neg = sub_sample - num_pos
    # a random order of the positive and of the negative entries; the others ranked last (-1)
    rand = torch.rand_like(labels, dtype=torch.float32)
    pos_rand = torch.where(pos_mask, rand, -1)
    neg_rand = torch.where(neg_mask, rand, -1)
    # the host does not know num_pos: take the most it can be, then invalidate the rest
    top_pos_rand, top_pos_idx = torch.topk(pos_rand, k=sub_sample)
    top_neg_rand, top_neg_idx = torch.topk(neg_rand, k=sub_sample)
    arange = torch.arange(sub_sample, device=labels.device)
    if num_pos.dim() > 0:
        arange, num_pos, num_neg = arange.unsqueeze(0), num_pos.unsqueeze(-1), num_neg.unsqueeze(-1)
    top_pos_rand = torch.where(arange >= num_pos, -1, top_pos_rand)
    top_neg_rand = torch.where(arange >= num_neg, -1, top_neg_rand)
    cat_rand = torch.cat([top_pos_rand, top_neg_rand], dim=-1)
    cat_idx = torch.cat([top_pos_idx, top_neg_idx], dim=-1)
    sampled = torch.gather(cat_idx, dim=-1, index=torch.topk(cat_rand, k=sub_sample)[1])
    index = sampled.unsqueeze(-1).expand(*sampled.shape, inputs.size(-1))
    return torch.gather(inputs, dim=-2, index=index), torch.gather(labels, dim=-1, index=sampled)


@WORKLOADS.register("sampler")
class Sampler(FunctionBench):
    """`batch` problems of `size` samples, with `features` features and random 0/1 labels.

    Batch 1 is unbatched.
    """

    impls = ("nonzero", "static")

    @classmethod
    def problems(cls, cfg):
        issues, conf = super().problems(cfg), cfg.workload
        if conf.size < 20:
            issues.append(f"workload.size={conf.size}: the sampler needs 20+ samples (it keeps a tenth)")
        return issues

    def inputs(self, conf, device):
        shape = (conf.size,) if conf.batch == 1 else (conf.batch, conf.size)
        samples = torch.randn((*shape, conf.features), device=device)
        labels = torch.randint(0, 2, shape, device=device, dtype=torch.int64)
        return samples, labels, conf.size // 10

    def function(self, impl):
        return {"nonzero": nonzero_sample_batch, "static": static_sample}[impl]
