"""Preprocessing presets, one per paper protocol; each is part of the feature-cache key.

The papers' pipelines (``shared/reference/papers-code.md`` §1.1, §2.1, §4):

* legate2023, CIFAR-10: ``Resize(224)``, random horizontal flip on train, CIFAR-10 mean/std. FLSim builds
  the data provider once, so the flip is drawn **once per image** for the whole run ("frozen flip").
* legate2023, Flowers/CUB/Cars/EuroSAT: ``Resize((224, 224))`` (aspect ratio distorted), ImageNet mean/std.
* legate2023, CIFAR-10 32x32: no resize.
* fedcof, CIFAR-100: as legate2023 CIFAR (the CIFAR-10 constants, a quirk kept on purpose); ImageNet-R /
  CUB / Cars: ``Resize((224, 224))``; iNat: ``Resize(299)``, ``CenterCrop(224)``; train features are
  extracted with one random flip.
* fedbabu: 32x32, CIFAR-100 constants for CIFAR-100 and ImageNet constants for CIFAR-10.

Departure, documented: resizing is done on float tensors in batches (``interpolate`` bilinear, antialias),
not on PIL images with uint8 rounding, so pixels differ from the PIL pipeline by under one grey level.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.registry import Registry

CIFAR10_MEAN = (0.491399689874, 0.482158419622, 0.446530924224)
CIFAR10_STD = (0.247032237587, 0.243485133253, 0.261587846975)
CIFAR100_MEAN = (0.507, 0.487, 0.441)
CIFAR100_STD = (0.267, 0.256, 0.276)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

FlipMode = Literal["none", "frozen"]


@dataclass(frozen=True)
class Preprocess:
    """A deterministic image -> tensor pipeline.

    ``resize``: an int resizes the shorter side (torchvision ``Resize(n)``), a pair resizes to exactly
    that size, ``None`` keeps the input size. ``center_crop`` then crops. ``flip="frozen"`` flips each
    training image with probability 1/2, decided once per image index from ``flip_seed`` (FLSim's
    once-per-image augmentation); it applies to the train split only.
    """

    name: str
    resize: int | tuple[int, int] | None
    center_crop: int | None
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    flip: FlipMode = "none"
    flip_seed: int = 0

    def key(self) -> str:
        """Canonical JSON of every field (part of the feature-cache key)."""
        return json.dumps(asdict(self), sort_keys=True)

    def flip_mask(self, n: int, split: str) -> np.ndarray:
        """Which of ``n`` images of ``split`` are flipped (all False unless train with a frozen flip)."""
        if self.flip == "none" or split != "train":
            return np.zeros(n, dtype=bool)
        return np.random.default_rng([self.flip_seed, 0x5F1]).random(n) < 0.5

    def output_size(self, h: int, w: int) -> tuple[int, int]:
        if self.resize is None:
            oh, ow = h, w
        elif isinstance(self.resize, int):
            s = self.resize
            oh, ow = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
        else:
            oh, ow = self.resize
        if self.center_crop is not None:
            oh, ow = self.center_crop, self.center_crop
        return oh, ow

    def __call__(self, batch: torch.Tensor, flip: torch.Tensor | None = None) -> torch.Tensor:
        """``batch``: uint8 or float (B, 3, H, W) of one size -> normalised float32 (B, 3, h, w), the images of
        ``flip`` mirrored first (exact on either dtype)."""
        if flip is not None and bool(flip.any()):
            batch = torch.where(flip.view(-1, 1, 1, 1), batch.flip(-1), batch)
        return self.transform(batch)

    def transform(
        self, batch: torch.Tensor, mean: torch.Tensor | None = None, std: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Everything but the flip: to float in [0, 1], resize, centre crop, normalise. ``mean`` / ``std``: the
        preset's constants as float32 ``(1, 3, 1, 1)`` tensors already on the batch's device; left out, they are
        built here, which on CUDA is a host-to-device copy per call (the training loop passes them:
        :class:`benchmark.fl.image_data.ImageSet`)."""
        x = batch.float().div_(255.0) if batch.dtype == torch.uint8 else batch.float()
        if self.resize is not None:
            if isinstance(self.resize, int):
                h, w = x.shape[-2:]
                s = self.resize
                size = (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
            else:
                size = tuple(self.resize)
            if tuple(x.shape[-2:]) != size:
                x = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)
        if self.center_crop is not None:
            c = self.center_crop
            h, w = x.shape[-2:]
            top, left = round((h - c) / 2.0), round((w - c) / 2.0)
            x = x[..., top : top + c, left : left + c]
        if mean is None:
            mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        if std is None:
            std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
        return (x - mean) / std


#: The preprocessing presets by name.
PRESETS: Registry[Preprocess] = Registry("preprocessing")
for _p in (
    Preprocess("legate2023_cifar", 224, None, CIFAR10_MEAN, CIFAR10_STD, "frozen"),
    Preprocess("legate2023_cifar32", None, None, CIFAR10_MEAN, CIFAR10_STD, "frozen"),
    Preprocess("legate2023_folder", (224, 224), None, IMAGENET_MEAN, IMAGENET_STD, "frozen"),
    Preprocess("fedcof_cifar", 224, None, CIFAR10_MEAN, CIFAR10_STD, "frozen"),
    Preprocess("fedcof_folder", (224, 224), None, IMAGENET_MEAN, IMAGENET_STD, "frozen"),
    Preprocess("fedcof_inat", 299, 224, IMAGENET_MEAN, IMAGENET_STD, "frozen"),
    Preprocess("fedbabu_cifar10", None, None, IMAGENET_MEAN, IMAGENET_STD),
    Preprocess("fedbabu_cifar100", None, None, CIFAR100_MEAN, CIFAR100_STD),
    Preprocess("plain_cifar224", 224, None, CIFAR10_MEAN, CIFAR10_STD),
    Preprocess("imagenet224", (224, 224), None, IMAGENET_MEAN, IMAGENET_STD),
):
    PRESETS.add(_p.name, _p)


def list_presets() -> list[str]:
    return PRESETS.sorted_names()


def get_preprocess(name: str, flip_seed: int = 0) -> Preprocess:
    """Preset ``name`` (frozen-flip presets take ``flip_seed``)."""
    p = PRESETS.get(name)
    if p.flip == "frozen" and flip_seed != p.flip_seed:
        p = Preprocess(p.name, p.resize, p.center_crop, p.mean, p.std, p.flip, flip_seed)
    return p
