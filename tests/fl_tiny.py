"""The tiny classifier the FL engine tests train (one definition for ``test_fl_engine.py`` and
``test_fl_checkpoint.py``, and the seeded initialisation ``test_fl_vectorised.py`` shares; issue 25)."""

from __future__ import annotations

import torch
from torch import nn

from benchmark.models.classifier import Classifier

C, D = 3, 4  # classes, feature dim of the tiny body


class TinyBody(nn.Module):
    """conv -> BN -> ReLU -> global pool: (B, 3, 6, 6) -> (B, 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, D, 3, padding=1)
        self.bn = nn.BatchNorm2d(D)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1)


def seeded_classifier(
    body: nn.Module, dim: int, classes: int, seed: int
) -> tuple[Classifier, torch.Generator]:
    """``Classifier(body, Linear(dim, classes))`` with every parameter drawn ``0.5 * N(0, 1)`` from a generator
    seeded ``seed``, and that generator: a caller draws anything more (BatchNorm statistics) from the same
    stream, so the model is a function of ``seed`` alone."""
    gen = torch.Generator().manual_seed(seed)
    model = Classifier(body, nn.Linear(dim, classes))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model, gen
