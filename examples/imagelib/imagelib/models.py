"""imagelib's models: a small CNN, and a tagger of tokens with its batch factory (a model that takes no images)."""

import torch
from torch import nn


class SmallCNN(nn.Module):
    """Two convolution blocks and a linear head."""

    def __init__(self, num_classes: int = 10, width: int = 16, in_chans: int = 3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_chans, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1, stride=2),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Tagger(nn.Module):
    """A tag for each token of a sequence."""

    def __init__(self, vocab: int = 1000, dim: int = 32, tags: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.embed(tokens)))


def token_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of 16 tokens and a tag for each: (inputs, targets)."""
    tokens = torch.randint(0, 1000, (batch_size, 16), device=device)
    return tokens, torch.randint(0, 8, (batch_size, 16), device=device)
