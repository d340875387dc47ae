"""perfsweep's own models (model.source=perfsweep), registered by name.

They import neither timm nor torchvision, so a run of one starts without those libraries.
The tests train them: a step takes about a millisecond on a CPU.
"""

from torch import nn

from perfsweep.train.registry import Registry

MODELS: Registry[type[nn.Module]] = Registry("model")


def _block(channels_in: int, channels_out: int) -> nn.Sequential:
    """A strided 3x3 convolution, batch norm and ReLU: half the height and width."""
    return nn.Sequential(
        nn.Conv2d(channels_in, channels_out, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(channels_out),
        nn.ReLU(inplace=True),
    )


@MODELS.register("tiny_cnn")
class TinyCNN(nn.Sequential):
    """Two convolution blocks, then average pooling and a linear classifier.

    It takes images of any size, in either memory format.
    Its convolutions and its classifier are what a FLOP count counts.
    Each block is a top-level child: dist=fsdp makes it a unit.
    """

    def __init__(self, num_classes: int = 1000, in_chans: int = 3, width: int = 8):
        super().__init__(
            _block(in_chans, width),
            _block(width, 2 * width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(2 * width, num_classes),
        )
