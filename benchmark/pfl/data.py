"""Images of a personalised-FL run on the training device, with the reference's train-time augmentation.

fedbabu's reference code (``utils/train_utils.py``) trains with ``RandomCrop(32, padding=4)`` +
``RandomHorizontalFlip`` + ``ToTensor`` + ``Normalize``, drawn afresh every epoch (a DataLoader over a
torchvision dataset), and tests with ``ToTensor`` + ``Normalize``. Normalisation: CIFAR-100 uses its own
statistics; **CIFAR-10 uses the ImageNet mean and std** (a quirk of the reference, kept; ``cifar10_stats=
"cifar10"`` is not offered because the paper's numbers were produced with it).

Here the uint8 images stay on the device and each mini-batch is cropped, flipped and normalised there: the
padding is zeros in pixel space (as torchvision pads the PIL image before normalising). Every random draw of a
client's local epoch (its shuffle, crop offsets and flips) comes from a generator seeded by ``(seed, round,
client, epoch)``, so a client's batches do not depend on the order in which clients are run (the loop and the
vectorised execution draw the same batches).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from benchmark.errors import ConfigError
from benchmark.seeding import keyed_torch_generator

#: (mean, std) per dataset, as the reference normalises (CIFAR-10: ImageNet statistics, the quirk).
NORMALISATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "cifar10": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "cifar100": ((0.507, 0.487, 0.441), (0.267, 0.256, 0.276)),
    "emnist": ((0.1307,), (0.3081,)),
}


@dataclass
class DeviceImages:
    """One split as uint8 ``(N, C, H, W)`` and int64 labels on ``device``."""

    images: torch.Tensor
    labels: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    dtype: torch.dtype = torch.float32

    @classmethod
    def from_split(cls, split, dataset: str, device: torch.device | str) -> DeviceImages:
        if dataset not in NORMALISATION:
            raise ConfigError(f"no normalisation for {dataset!r}", f"use one of {sorted(NORMALISATION)}")
        imgs = np.asarray(split.images)
        imgs = imgs[..., None] if imgs.ndim == 3 else imgs
        mean, std = NORMALISATION[dataset]
        dev = torch.device(device)
        return cls(
            torch.from_numpy(np.ascontiguousarray(imgs.transpose(0, 3, 1, 2))).to(dev),
            torch.from_numpy(np.asarray(split.labels, dtype=np.int64)).to(dev),
            torch.tensor(mean, device=dev).view(1, -1, 1, 1),
            torch.tensor(std, device=dev).view(1, -1, 1, 1),
        )

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        # float64 constants promote the batch to float64 (the exact float32 constants, as a cast would give)
        return (x.to(self.dtype) / 255.0 - self.mean) / self.std

    def test_batch(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.normalise(self.images[idx]), self.labels[idx]

    def train_batch(self, idx: torch.Tensor, crop: torch.Tensor, flip: torch.Tensor, pad: int = 4):
        """Images ``idx`` cropped at offsets ``crop`` (``(B, 2)`` in ``[0, 2*pad]``) from the zero-padded
        image and flipped where ``flip``; normalised."""
        x = self.images[idx]
        b, _, h, w = x.shape
        padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
        rows = (crop[:, 0:1] + torch.arange(h, device=x.device)).view(b, 1, h, 1)
        cols = (crop[:, 1:2] + torch.arange(w, device=x.device)).view(b, 1, 1, w)
        cols = torch.where(flip.view(b, 1, 1, 1), cols.flip(-1), cols)
        bi = torch.arange(b, device=x.device).view(b, 1, 1, 1)
        ci = torch.arange(x.shape[1], device=x.device).view(1, -1, 1, 1)
        return self.normalise(padded[bi, ci, rows, cols]), self.labels[idx]


def epoch_plan(
    n: int, batch_size: int, seed: int, *keys: int, augment: bool = True, shuffle: bool = True, pad: int = 4
):
    """One local epoch's draws for a client with ``n`` images: a list of (positions, crop, flip) per batch
    (the DataLoader's shuffle unless ``shuffle=False``, then per-image crop offsets and flips), from the
    generator of ``(seed, *keys)`` (:func:`benchmark.seeding.keyed_torch_generator`)."""
    g = keyed_torch_generator(seed, *keys)
    order = torch.randperm(n, generator=g) if shuffle else torch.arange(n)
    crop = torch.randint(0, 2 * pad + 1, (n, 2), generator=g) if augment else torch.full((n, 2), pad)
    flip = torch.rand(n, generator=g) < 0.5 if augment else torch.zeros(n, dtype=torch.bool)
    return [
        (order[i : i + batch_size], crop[i : i + batch_size], flip[i : i + batch_size])
        for i in range(0, n, batch_size)
    ]
