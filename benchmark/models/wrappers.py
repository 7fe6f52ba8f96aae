"""The modules that turn a torchvision network into a backbone body returning ``(B, d)`` features
(:mod:`benchmark.models.backbones` builds them; kept apart so that the registry imports no torch)."""

from __future__ import annotations

import torch
from torch import nn


class PooledFeatures(nn.Module):
    """``module(x)`` -> global average pool -> ``(B, C)`` (the papers' NCM / head input)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.features = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1)


class Headless(nn.Module):
    """A torchvision classifier whose last layer ``head`` is the identity, so that it outputs what that layer
    reads: ResNet without ``fc`` (stem, layer1-4, avgpool, flatten); ViT without ``heads`` (the class token
    after the encoder's final LayerNorm)."""

    def __init__(self, net: nn.Module, head: str) -> None:
        super().__init__()
        self.net = net
        setattr(self.net, head, nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
