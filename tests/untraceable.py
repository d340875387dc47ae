"""A tensor subclass that torch.compile cannot trace: its __torch_function__ reads __dict__.

Dynamo breaks the graph there, and every frame that sees it falls back to eager code.
Tests use it as it is, and as a user's module written from this file.
"""

import torch


class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        tags = {}
        for arg in args:
            if isinstance(arg, Tagged):
                tags.update(arg.__dict__)
        return super().__torch_function__(func, types, args, kwargs or {})
