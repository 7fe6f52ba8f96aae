"""The tiny conv nets of the federated-training tests, with seeded "pre-trained" weights.

One body and one seeded initialisation shared by tests/test_fl_engine.py, test_fl_checkpoint.py and
test_fl_vectorised.py (issue 25: one helper, not a copy per test module)."""

from __future__ import annotations

import torch
from torch import nn

from benchmark.models.classifier import Classifier

FEATURES = 4  # feature dim of TinyBody


class TinyBody(nn.Module):
    """conv -> BN -> ReLU -> global pool: (B, 3, H, W) -> (B, 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, FEATURES, 3, padding=1)
        self.bn = nn.BatchNorm2d(FEATURES)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1)


def seeded_classifier(body: nn.Module, head: nn.Module, seed: int, *, bn_stats: bool = True) -> Classifier:
    """``Classifier(body, head)`` with every parameter drawn as ``0.5 * N(0, 1)`` from a generator seeded with
    ``seed``, in parameter order; with ``bn_stats``, ``body.bn``'s running mean (``0.1 * N(0, 1)``) and variance
    (``U(0, 1) + 0.5``) drawn next from the same generator (non-trivial "pre-trained" statistics)."""
    gen = torch.Generator().manual_seed(seed)
    model = Classifier(body, head)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        if bn_stats:
            bn = model.body.bn
            bn.running_mean.copy_(torch.randn(bn.num_features, generator=gen) * 0.1)
            bn.running_var.copy_(torch.rand(bn.num_features, generator=gen) + 0.5)
    return model
