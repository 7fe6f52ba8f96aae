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

Two behaviours of the papers' code that their text does not state are options (issue 26), both part of the
cache key only when they differ from the historical default, so existing cache entries keep their keys:

* ``resize_impl``: ``"float"`` (default) resizes float tensors in batches (``interpolate`` bilinear, antialias);
  ``"pil_uint8"`` resizes each image as the papers' code does, ``PIL.Image.resize(..., BILINEAR)`` on the uint8
  image (torchvision ``Resize`` on a PIL image), so the pixels are rounded to uint8 before normalising. The text
  says only "we resize images to 224 x 224" (legate2023 §4); the two differ by under one grey level per pixel.
  ``pil_uint8`` runs on the CPU, one image at a time.
* ``flip_stream``: which frozen flips a run sees. ``"fixed"`` (the historical stream,
  ``default_rng([flip_seed, 0x5F1])`` with ``flip_seed`` 0 for every run) or ``"run_seed"``: the named stream
  ``"frozen_flip"`` of :mod:`benchmark.seeding` under ``flip_seed`` = the run's seed, so that a run seed varies
  the flips as the papers' unseeded code does between its runs (:func:`preprocess_for`).

Variants are named by a preset name plus modifiers (:class:`PreprocessName`): ``legate2023_cifar@pil`` (PIL
resize), ``legate2023_cifar@seedflip`` (a run's preprocessing: train flips keyed by the run seed, resolved per
seed by :meth:`PreprocessName.for_split`), ``legate2023_cifar@flip3`` (the train flips of run seed 3).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from benchmark.errors import ConfigError
from benchmark.registry import Registry
from benchmark.seeding import check_seed, numpy_rng

if TYPE_CHECKING:
    import torch

# torch is imported by the methods that transform pixels: the presets and names are read when a workflow is
# planned, where importing torch would cost seconds (tests/test_backbones.py checks the planning imports).

CIFAR10_MEAN = (0.491399689874, 0.482158419622, 0.446530924224)
CIFAR10_STD = (0.247032237587, 0.243485133253, 0.261587846975)
CIFAR100_MEAN = (0.507, 0.487, 0.441)
CIFAR100_STD = (0.267, 0.256, 0.276)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

FlipMode = Literal["none", "frozen", "all"]
FlipStream = Literal["fixed", "run_seed"]
ResizeImpl = Literal["float", "pil_uint8"]
FLIP_STREAMS: tuple[str, ...] = ("run_seed", "fixed")
RESIZE_IMPLS: tuple[str, ...] = ("float", "pil_uint8")
#: The :mod:`benchmark.seeding` purpose of the frozen flips under ``flip_stream="run_seed"``.
FLIP_PURPOSE = "frozen_flip"


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
    flip_stream: FlipStream = "fixed"
    resize_impl: ResizeImpl = "float"

    def __post_init__(self) -> None:
        if self.flip_stream not in FLIP_STREAMS:
            raise ConfigError(f"flip_stream {self.flip_stream!r} unknown", f"use one of: {', '.join(FLIP_STREAMS)}")
        if self.resize_impl not in RESIZE_IMPLS:
            raise ConfigError(f"resize {self.resize_impl!r} unknown", f"use one of: {', '.join(RESIZE_IMPLS)}")

    def key(self) -> str:
        """Canonical JSON of every field (part of the feature-cache key); ``flip_stream`` / ``resize_impl`` only
        when they are not the historical ``fixed`` / ``float`` (so the entries made before them keep their keys)."""
        fields = asdict(self)
        for name, old in (("flip_stream", "fixed"), ("resize_impl", "float")):
            if fields[name] == old:
                del fields[name]
        return json.dumps(fields, sort_keys=True)

    def flip_mask(self, n: int, split: str) -> np.ndarray:
        """Which of ``n`` images of ``split`` are flipped (all False unless train with a frozen flip)."""
        if self.flip == "none" or split != "train":
            return np.zeros(n, dtype=bool)
        if self.flip == "all":  # every train image mirrored (one of the two passes a run_seed stream is built from)
            return np.ones(n, dtype=bool)
        if self.flip_stream == "run_seed":
            return numpy_rng(self.flip_seed, FLIP_PURPOSE).random(n) < 0.5
        return np.random.default_rng([self.flip_seed, 0x5F1]).random(n) < 0.5

    def _resized_size(self, h: int, w: int) -> tuple[int, int]:
        """The size after the resize, before any crop (torchvision ``Resize``'s arithmetic)."""
        if self.resize is None:
            return h, w
        if isinstance(self.resize, int):
            s = self.resize
            return (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
        return (int(self.resize[0]), int(self.resize[1]))

    def output_size(self, h: int, w: int) -> tuple[int, int]:
        oh, ow = self._resized_size(h, w)
        if self.center_crop is not None:
            oh, ow = self.center_crop, self.center_crop
        return oh, ow

    def __call__(self, batch: torch.Tensor, flip: torch.Tensor | None = None) -> torch.Tensor:
        """``batch``: uint8 or float (B, 3, H, W) of one size -> normalised float32 (B, 3, h, w), the images of
        ``flip`` mirrored first (exact on either dtype)."""
        import torch

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
        import torch
        import torch.nn.functional as F

        size = None if self.resize is None else self._resized_size(*batch.shape[-2:])
        if self.resize_impl == "pil_uint8" and size is not None and tuple(batch.shape[-2:]) != size:
            x = pil_resize(batch, size).float().div_(255.0)
        else:
            x = batch.float().div_(255.0) if batch.dtype == torch.uint8 else batch.float()
            if size is not None and tuple(x.shape[-2:]) != size:
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


def orientation_passes(pre: Preprocess) -> tuple[Preprocess, Preprocess]:
    """The two passes the train images of any ``run_seed`` flip stream are made of: every image as it is, and
    every image mirrored (the preprocessing otherwise ``pre``'s). A seed's features pick one row of either per
    image by its :meth:`Preprocess.flip_mask` (:func:`benchmark.features.extract.extract_features`): two passes
    for any number of seeds instead of one per seed."""
    plain = replace(pre, flip="none", flip_seed=0, flip_stream="fixed")
    return plain, replace(plain, flip="all")


def pil_resize(batch: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Each uint8 image of ``batch`` (B, 3, H, W) resized to ``size`` (h, w) by ``PIL.Image.resize`` with
    bilinear filtering, as torchvision's ``Resize`` does on a PIL image (the papers' pipelines); uint8 out, on
    ``batch``'s device (the resize itself runs on the CPU). A float batch must hold whole grey levels in [0, 1]
    steps of 1/255 or [0, 255]: anything else is refused (PIL resizes uint8)."""
    import torch
    from PIL import Image  # local: heavy import (PIL)

    if batch.dtype != torch.uint8:
        raise ConfigError(
            f"resize pil_uint8 needs uint8 images, got {batch.dtype}", "pass the decoded uint8 images (or resize float)"
        )
    h, w = size
    host = batch.permute(0, 2, 3, 1).contiguous().cpu().numpy()
    out = np.empty((len(host), h, w, 3), dtype=np.uint8)
    for i, img in enumerate(host):
        out[i] = np.asarray(Image.fromarray(img).resize((w, h), Image.BILINEAR))
    return torch.from_numpy(out).permute(0, 3, 1, 2).to(batch.device)


_MODIFIER = re.compile(r"^(pil|seedflip|flip(\d+))$")


@dataclass(frozen=True)
class PreprocessName:
    """A preset name with its variant modifiers (``<preset>[@pil][@seedflip|@flip<k>]``), as jobs carry it.

    ``pil``: ``resize_impl="pil_uint8"``. ``seedflip``: a run's preprocessing whose train flips come from the
    run seed's stream (the name of run-level jobs; :meth:`for_split` turns it into the features a seed reads).
    ``flip_seed``: the ``run_seed`` flip stream of that seed (the train features of one run seed). Without a
    flip modifier the preset keeps the historical ``fixed`` stream (``flip_stream: fixed``)."""

    preset: str
    pil: bool = False
    seed_flip: bool = False
    flip_seed: int | None = None

    @classmethod
    def parse(cls, name: str) -> PreprocessName:
        preset, *mods = str(name).split("@")
        out = cls(preset)
        for mod in mods:
            m = _MODIFIER.match(mod)
            if m is None:
                raise ConfigError(
                    f"preprocessing {name!r}: unknown modifier {mod!r}",
                    "use <preset>[@pil][@seedflip|@flip<seed>], e.g. legate2023_cifar@pil@seedflip",
                )
            if mod == "pil":
                out = replace(out, pil=True)
            elif mod == "seedflip":
                out = replace(out, seed_flip=True)
            else:
                out = replace(out, flip_seed=int(m.group(2)))
        if out.seed_flip and out.flip_seed is not None:
            raise ConfigError(f"preprocessing {name!r}: both @seedflip and @flip<k>", "keep one of them")
        return out

    def __str__(self) -> str:
        mods = ["pil"] if self.pil else []
        if self.seed_flip:
            mods.append("seedflip")
        elif self.flip_seed is not None:
            mods.append(f"flip{self.flip_seed}")
        return "@".join([self.preset, *mods])

    def for_split(self, split: str, seed: int) -> str:
        """The preprocessing of ``split``'s features in a run of seed ``seed``: with ``@seedflip`` the train
        split gets ``@flip<seed>`` and the other splits (no flips) the name without flip modifier."""
        if not self.seed_flip:
            return str(self)
        if split == "train" and PRESETS.get(self.preset).flip == "frozen":
            return str(replace(self, seed_flip=False, flip_seed=check_seed(seed)))
        return str(replace(self, seed_flip=False))


def preprocess_variant(preset: str, *, flip_stream: str = "run_seed", resize: str = "float") -> str:
    """The run-level preprocessing name of ``preset`` under the workflow options ``flip_stream`` and ``resize``
    (config.yaml; one :class:`ConfigError` for an unknown value): ``legate2023_cifar`` + ``@pil`` / ``@seedflip``.
    A preset without frozen flips never gets ``@seedflip`` (nothing to key)."""
    if flip_stream not in FLIP_STREAMS:
        raise ConfigError(f"flip_stream {flip_stream!r} unknown", f"set flip_stream to one of: {', '.join(FLIP_STREAMS)}")
    if resize not in RESIZE_IMPLS:
        raise ConfigError(f"resize {resize!r} unknown", f"set resize to one of: {', '.join(RESIZE_IMPLS)}")
    base = PreprocessName.parse(preset)
    frozen = PRESETS.get(base.preset).flip == "frozen"
    return str(replace(base, pil=base.pil or resize == "pil_uint8",
                       seed_flip=base.seed_flip or (flip_stream == "run_seed" and frozen and base.flip_seed is None)))  # fmt: skip


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
    """Preset ``name`` with its modifiers (:class:`PreprocessName`; frozen-flip presets take ``flip_seed`` for the
    ``fixed`` stream). ``@flip<k>`` gives the ``run_seed`` stream of seed k; ``@seedflip`` is refused here: it
    names a run, whose features are per seed (:meth:`PreprocessName.for_split`)."""
    var = PreprocessName.parse(name)
    if var.seed_flip:
        raise ConfigError(
            f"preprocessing {name!r} names a run's preprocessing (flips keyed by its seed), not one set of images",
            f"use {var.preset}@flip<seed> for the train images of one run seed",
        )
    p = PRESETS.get(var.preset)
    if p.flip == "frozen" and var.flip_seed is not None:
        p = replace(p, flip_seed=var.flip_seed, flip_stream="run_seed")
    elif p.flip == "frozen" and flip_seed != p.flip_seed:
        p = replace(p, flip_seed=flip_seed)
    if var.pil:
        p = replace(p, resize_impl="pil_uint8")
    return p
