"""The body/head split every method in the suite works with.

The papers' code replaces each torchvision classifier by global-average-pooled features followed by one
``nn.Linear`` (legate2023 code: SqueezeNet's conv head -> ``AdaptiveAvgPool2d(1), Flatten, Linear``;
fedcof code: ``Linear(d, C, bias=False)``). :class:`Classifier` makes that split explicit: ``body`` maps
images to ``(B, d)`` features, ``head`` is the linear layer that FedNCM / Fed3R / FedCOF initialise and
that LP trains.
"""

from __future__ import annotations

import torch
from torch import nn


class Classifier(nn.Module):
    """``head(body(x))`` with ``body: images -> (B, feature_dim)`` and ``head: nn.Linear``."""

    def __init__(self, body: nn.Module, head: nn.Linear) -> None:
        super().__init__()
        self.body = body
        self.head = head

    @property
    def feature_dim(self) -> int:
        return int(self.head.in_features)

    @property
    def num_classes(self) -> int:
        return int(self.head.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))
