"""Feature extraction: decode -> batched resize/normalise -> frozen backbone body -> pooled features.

One pass per (dataset, split, backbone, weights, preprocessing, precision); every later consumer reads
the cache (:mod:`benchmark.features.cache`). Batches are streamed (the whole set at 224 px is never held
in memory: only the uint8 source and the ``(N, d)`` output are), the model runs in ``eval()`` under
``torch.inference_mode`` with channels_last memory format, and bf16 autocast is an option that is part of
the cache key (never the default for paper tables).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Literal, TextIO

import numpy as np
import torch
from torch import nn

from benchmark.data.registry import DatasetSplit
from benchmark.devices import pick_device
from benchmark.errors import ConfigError, DataMissingError
from benchmark.features.cache import FeatureCache, FeatureKey, FeatureSet
from benchmark.features.preprocess import Preprocess, orientation_passes
from benchmark.federated.progress import CountProgress
from benchmark.models.backbones import create_backbone
from benchmark.provenance import cpu_description, peak_rss_mb

Precision = Literal["fp32", "bf16"]
PRECISIONS = ("fp32", "bf16")

#: Images per forward pass for ``batch_size="auto"``, by device type. On a CPU a batch of 8 keeps the 224 px
#: activations in the caches: SqueezeNet 1.1 extraction ran at 68 img/s end to end with 8 against 34 with 64
#: (one thread, 2-core AMD EPYC, AVX2; two threads 137 vs 54 for the bare forward). The features agree with those
#: of 64 to rounding, not bit for bit (real CIFAR-10 there: at most 2.3e-5 on values up to 57; every value of the
#: CI-tier tables unchanged), as the features of two CPUs do; the cache key holds no batch size, the cached
#: metadata does. A GPU keeps the earlier 64.
AUTO_BATCH_SIZE = {"cpu": 8}
DEFAULT_BATCH_SIZE = 64


def resolve_batch_size(batch_size: int | str, device: torch.device) -> int:
    """``batch_size`` as an int: a number is used as given, ``"auto"`` picks :data:`AUTO_BATCH_SIZE` for the device."""
    if batch_size == "auto":
        return AUTO_BATCH_SIZE.get(device.type, DEFAULT_BATCH_SIZE)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be 'auto' or an integer >= 1, got {batch_size!r}",
                          "set batch_size: auto, or a positive number of images per forward pass")
    return batch_size


def _decode(path: object) -> torch.Tensor:
    from PIL import Image  # local: heavy import (PIL)

    try:
        with Image.open(path) as im:  # type: ignore[arg-type]
            arr = np.asarray(im.convert("RGB"))
    except OSError as exc:
        raise DataMissingError(
            f"cannot decode image {path}: {exc}", "re-download or remove the file"
        ) from exc
    return torch.from_numpy(arr.copy()).permute(2, 0, 1)


def preprocessed_batches(
    data: DatasetSplit, preprocess: Preprocess, batch_size: int, device: torch.device | None = None
) -> Iterator[tuple[slice, torch.Tensor]]:
    """Yield ``(slice, float32 NCHW batch)``, preprocessed on ``device`` (default CPU), in dataset order.

    In-memory uint8 images travel to the device as uint8 (4x less traffic) and are resized there.
    """
    dev = device or torch.device("cpu")
    n = len(data)
    flips = torch.from_numpy(preprocess.flip_mask(n, data.split))
    for start in range(0, n, batch_size):
        sl = slice(start, min(start + batch_size, n))
        if data.images is not None:
            raw = torch.from_numpy(data.images[sl]).permute(0, 3, 1, 2).to(dev, non_blocking=True)
            yield sl, preprocess(raw, flips[sl].to(dev))
        elif data.paths is not None:
            parts = [
                preprocess(_decode(p).unsqueeze(0).to(dev), flips[i : i + 1].to(dev))
                for i, p in zip(range(sl.start, sl.stop), data.paths[sl], strict=True)
            ]
            yield sl, torch.cat(parts)
        else:
            raise ConfigError(f"dataset {data.name!r} is text", "image backbones need an image dataset")


def forward_features(
    body: nn.Module, x: torch.Tensor, device: torch.device, precision: Precision
) -> torch.Tensor:
    """The extraction kernel: one batch through the frozen body -> float32 ``(B, d)`` on CPU."""
    x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        out = body(x)
    return out.float().cpu()


def prepare_body(body: nn.Module, device: torch.device) -> nn.Module:
    body = body.eval().to(device).to(memory_format=torch.channels_last)
    for p in body.parameters():
        p.requires_grad_(False)
    return body


def extract_features(
    data: DatasetSplit,
    backbone: str,
    weights: str,
    preprocess: Preprocess,
    *,
    precision: Precision = "fp32",
    batch_size: int | str = "auto",
    device: str | None = None,
    cache: FeatureCache | None = None,
    progress: bool = True,
    progress_stream: TextIO | None = None,
    progress_every_s: float = 30.0,
    weights_dir: str | None = None,
    seed: int = 0,
) -> FeatureSet:
    """Features of ``data`` through ``backbone``'s body, from the cache when present.

    ``batch_size`` is the number of images per forward pass, ``"auto"`` for the device's
    (:func:`resolve_batch_size`). ``seed`` only matters for ``weights="random"`` (the init stream). A cache hit
    performs no forward pass.
    With ``progress``, images done / total, img/s and the time left go to ``progress_stream`` (default
    stderr): a bar on a terminal, else a line every ``progress_every_s`` seconds
    (:class:`benchmark.federated.progress.CountProgress`). The device is checked (:func:`pick_device`) before the
    backbone or the cache is touched.
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}", f"use one of: {', '.join(PRECISIONS)}")
    dev = pick_device(device)
    batch_size = resolve_batch_size(batch_size, dev)
    model, ident = create_backbone(backbone, weights, seed=seed, weights_dir=weights_dir)
    key = FeatureKey(data.name, data.split, data.checksum, backbone, ident, preprocess.key(), precision)
    cache = cache or FeatureCache()
    hit = cache.get(key)
    if hit is not None:
        return hit
    if preprocess.flip == "frozen" and preprocess.flip_stream == "run_seed" and data.split == "train":
        # issue 26: a seed's frozen flips pick, image by image, the plain or the mirrored pass (each cached once)
        kw = dict(precision=precision, batch_size=batch_size, device=device, cache=cache, progress=progress,
                  progress_stream=progress_stream, progress_every_s=progress_every_s, weights_dir=weights_dir,
                  seed=seed)  # fmt: skip
        plain, mirrored = (extract_features(data, backbone, weights, p, **kw) for p in orientation_passes(preprocess))
        mask = preprocess.flip_mask(len(data), data.split)
        out = np.where(mask[:, None], mirrored.features, plain.features)
        extra = {
            "composed_from": {"plain": plain.key_digest, "mirrored": mirrored.key_digest},
            "flipped": int(mask.sum()),
            "wall_s": 0.0,
            "images_per_s": None,
        }
        return cache.put(key, out, data.labels, extra)
    body = prepare_body(model.body, dev)
    out: np.ndarray | None = None
    t0 = time.perf_counter()
    bar = CountProgress(
        f"extract {data.name}/{data.split} {backbone}",
        len(data),
        unit="img",
        enabled=progress,
        stream=progress_stream,
        every_s=progress_every_s,
    )
    with torch.inference_mode():
        for sl, x in preprocessed_batches(data, preprocess, batch_size, dev):
            f = forward_features(body, x, dev, precision)
            if out is None:
                out = np.empty((len(data), f.shape[1]), dtype=np.float32)
            out[sl] = f.numpy()
            bar.update(sl.stop - sl.start)
    bar.close()
    if out is None:
        raise ConfigError(f"dataset {data.name}/{data.split} is empty", "check the data root")
    bad = ~np.isfinite(out)
    if bad.any():  # never cached: a NaN feature is scored as class 0 downstream, a plausible wrong number
        raise ConfigError(
            f"{backbone} ({ident.source} weights {ident.name}) gave {int(bad.sum())} NaN/inf feature value(s) "
            f"in {int(bad.any(axis=1).sum())} of {len(out)} images of {data.name}/{data.split}; nothing was cached",
            "check the weights file and the images; with --precision bf16, retry with fp32",
        )
    wall = time.perf_counter() - t0
    extra = {
        "wall_s": wall,
        "images_per_s": len(data) / wall if wall > 0 else None,
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else cpu_description(),
        "torch": torch.__version__,
        "batch_size": batch_size,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "data_meta": {k: v for k, v in data.meta.items() if isinstance(v, (str, int, float))},
    }
    return cache.put(key, out, data.labels, extra)
