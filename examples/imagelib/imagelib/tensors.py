"""imagelib's tensor type: an image batch that keeps its metadata through torch operations."""

import torch


class MetaImage(torch.Tensor):
    """A torch.Tensor subclass whose results carry the metadata of the MetaImage they came from."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        source = next((a for a in args if isinstance(a, MetaImage)), None)
        if source is not None and isinstance(result, MetaImage) and result is not source:
            result.__dict__.update(source.__dict__)
        return result
