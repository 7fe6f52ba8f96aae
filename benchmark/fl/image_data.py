"""legate2023's image datasets on the training device: the one store (:mod:`benchmark.federated.images`) with
the preprocessing preset's frozen flip, resize and normalisation applied on the device, one mini-batch at a time.

Full-model federated training (legate2023 §4 FT / Random) reads every training image once per local epoch. An
:class:`ImageSet` is a :class:`~benchmark.federated.images.DeviceImages` (uint8 images at their stored
resolution, int64 labels, client views sharing the storage, index transfer without a host sync) that also holds
the frozen per-image flip mask and a preset of :mod:`benchmark.features.preprocess`; :meth:`ImageSet.batch_rows`
gathers a mini-batch and runs the preset on it (flip, ``Resize``, normalise).

The arithmetic is the feature-extraction path's (:func:`benchmark.features.extract.preprocessed_batches`,
``benchmark.apps.reduced._preprocess``): the same :class:`~benchmark.features.preprocess.Preprocess` call on
the same channels-last uint8 layout (the store's ``layout="nhwc"``), with the flip applied to the uint8 pixels
first (a permutation, so it commutes exactly with the per-pixel ``/255``). On CPU a batch is bit-identical to
preprocessing the whole split and indexing it (tested). The frozen flip (legate2023 / FLSim: drawn once per
image for the whole run) is ``preprocess.flip_mask(n, split)`` over the set's images, as in the feature path.

Folder datasets (image files of varying size) are decoded and brought to the preset's output size once, when
the set is built (:meth:`ImageSet.from_registry`), and stored as uint8 at that size. Departure, documented:
the resized pixels are rounded to uint8 (under half a grey level; the feature path keeps them in float) and
the frozen flip is applied after the resize / crop instead of before (the same image for a symmetric crop).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmark.data.registry import load_dataset
from benchmark.data.subsets import parse_subset, stratified_indices
from benchmark.errors import ConfigError
from benchmark.features.preprocess import Preprocess, get_preprocess
from benchmark.federated.images import DeviceImages, check_images, host_tensor


class ImageSet(DeviceImages):
    """A :class:`~benchmark.federated.images.DeviceImages` whose batches are a preprocessing preset's output.

    ``images``: uint8 ``(N, 3, H, W)`` (tensor or array), one size for all; ``labels``: ``N`` class ids;
    ``preprocess``: a preset name of :mod:`benchmark.features.preprocess` (or a
    :class:`~benchmark.features.preprocess.Preprocess`); ``split``: ``train`` applies the preset's frozen
    flip, any other split none. ``flips`` overrides the mask (default ``preprocess.flip_mask(N, split)``).
    ``dtype`` / ``channels_last``: the dtype and memory layout of the batches :meth:`batch` returns.
    """

    DEVICE_TENSORS = (*DeviceImages.DEVICE_TENSORS, "_flips")

    def __init__(
        self,
        images: torch.Tensor | np.ndarray,
        labels: torch.Tensor | np.ndarray,
        preprocess: str | Preprocess,
        split: str,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        channels_last: bool = False,
        flips: torch.Tensor | np.ndarray | None = None,
    ) -> None:
        img = host_tensor(images)
        check_images(img, "ImageSet", channels=3)
        pre = get_preprocess(preprocess) if isinstance(preprocess, str) else preprocess
        if not isinstance(pre, Preprocess):
            raise ConfigError(
                f"preprocess must be a preset name, got {preprocess!r}", "e.g. 'legate2023_cifar'"
            )
        super().__init__(img, labels, pre.mean, pre.std, dtype, device=device, layout="nhwc")
        n = len(self)
        mask = torch.from_numpy(pre.flip_mask(n, split)) if flips is None else host_tensor(flips).cpu()
        if mask.dtype != torch.bool or mask.shape != (n,):
            raise ConfigError(
                f"ImageSet flips must be a bool mask of {n} images, got {mask.dtype} {tuple(mask.shape)}",
                "leave flips=None for the preset's frozen flip",
            )
        self._flips = mask.to(self.device)
        self._any_flip = bool(mask.any())
        self.preprocess = pre
        self.split = str(split)
        self.channels_last = bool(channels_last)
        self.source: dict[str, object] = {}

    @property
    def flips(self) -> torch.Tensor:
        """The set's frozen flip mask (bool, on the device)."""
        return self._flips if self._index_dev is None else self._flips[self._index_dev]

    def batch_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch of ``rows`` of :attr:`root`: ``x`` flipped where frozen and preprocessed on the device in
        :attr:`dtype` (channels-last when set), ``y`` int64."""
        raw = self.gather(rows)
        if self._any_flip:
            flip = self._flips.index_select(0, rows).view(-1, 1, 1, 1)
            raw = torch.where(flip, raw.flip(-1), raw)
        x = self.preprocess.transform(raw, self.mean, self.std)  # constants on the device: no sync
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        x = x.contiguous(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)
        return x, self._labels.index_select(0, rows)

    def __repr__(self) -> str:
        h, w = self._store.shape[1:3]
        return (
            f"ImageSet({len(self)} images {h}x{w} uint8 on {self.device}, preprocess="
            f"{self.preprocess.name!r}, split={self.split!r}, dtype={self.dtype}, channels_last={self.channels_last})"
        )

    # ------------------------------------------------------------------------------------------ loading
    @classmethod
    def from_registry(
        cls,
        dataset: str,
        split: str,
        preprocess: str,
        *,
        data_root: str | Path | None = None,
        subset: str = "all",
        subset_seed: int = 0,
        flip_seed: int = 0,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        channels_last: bool = False,
    ) -> ImageSet:
        """Split ``split`` of the registered ``dataset`` (:func:`benchmark.data.registry.load_dataset`).

        ``subset``: ``all`` or ``stratified<N>`` (N per class, :func:`benchmark.data.subsets.stratified_indices`
        with ``subset_seed``); the frozen flip is drawn over the subset, as if it were the dataset (as
        :func:`benchmark.apps.reduced.load_reduced_data` does). In-memory datasets (CIFAR) are stored as they
        are; folder datasets are decoded and resized to the preset's output size once, on ``device``
        (module docstring: the uint8 rounding).
        """
        data = load_dataset(dataset, split, data_root)
        kind, per_class = parse_subset(subset)
        if kind == "stratified":
            data = data.subset(stratified_indices(data.labels, per_class, subset_seed), subset)
        pre = get_preprocess(preprocess, flip_seed)
        dev = torch.device(device)
        if data.images is not None:
            images = torch.from_numpy(np.ascontiguousarray(data.images)).permute(0, 3, 1, 2)
            out = cls(images, data.labels, pre, split, device=dev, dtype=dtype, channels_last=channels_last)
        elif data.paths is not None:
            images, stored = _decode_resized(data.paths, pre, dev)
            flips = pre.flip_mask(len(data.paths), split)
            out = cls(
                images, data.labels, stored, split, device=dev, dtype=dtype, channels_last=channels_last,
                flips=flips,
            )  # fmt: skip
        else:
            raise ConfigError(f"dataset {dataset!r} is text", "ImageSet needs an image dataset")
        out.source = {
            "dataset": dataset,
            "split": split,
            "subset": subset,
            "checksum": data.checksum,
            "preprocess": pre.key(),
        }
        return out


def stored_preprocess(pre: Preprocess) -> Preprocess:
    """``pre`` for images already brought to its output size: normalise (and flip) only."""
    return replace(pre, name=f"{pre.name}@stored", resize=None, center_crop=None, resize_impl="float")


def _decode_resized(
    paths: tuple[Path, ...], pre: Preprocess, device: torch.device
) -> tuple[torch.Tensor, Preprocess]:
    """Decode image files and resize / crop them with ``pre``'s geometry, rounded to uint8 NCHW (on CPU)."""
    from benchmark.features.extract import _decode  # local: heavy import (torchvision)

    geometry = Preprocess(
        f"{pre.name}@geometry", pre.resize, pre.center_crop, (0.0,) * 3, (1.0,) * 3, resize_impl=pre.resize_impl
    )
    out: list[torch.Tensor] = []
    for p in paths:
        x = geometry(_decode(p).unsqueeze(0).to(device))  # float in [0, 1] at the output size
        out.append(x.mul_(255.0).round_().clamp_(0, 255).to(torch.uint8).cpu())
    sizes = {tuple(t.shape[-2:]) for t in out}
    if len(sizes) > 1:
        raise ConfigError(
            f"preset {pre.name!r} gives images of {len(sizes)} different sizes (shorter-side resize without a "
            "crop on images of different aspect ratios)",
            "use a preset with a fixed output size (e.g. legate2023_folder) for an ImageSet",
        )
    images = torch.cat(out) if out else torch.zeros(0, 3, 1, 1, dtype=torch.uint8)
    return images, stored_preprocess(pre)
