"""Image datasets held on the training device as uint8 and preprocessed there, one mini-batch at a time.

Full-model federated training (legate2023 §4 FT / Random) reads every training image once per local epoch;
decoding, resizing and normalising them on the host each time, or keeping 224 px float copies (600 KB per
image), is what makes the naive path slow or large. An :class:`ImageSet` keeps the images at their stored
resolution as uint8 (CIFAR: 3 KB per image, the 50,000 training images are 150 MB) together with int64 labels
and the frozen per-image flip mask on one device; :meth:`ImageSet.batch` gathers a mini-batch there and runs
the preprocessing preset of :mod:`benchmark.features.preprocess` on it (flip, ``Resize``, normalise), so
nothing crosses the host-device link during training but the batch indices.

The arithmetic is the feature-extraction path's (:func:`benchmark.features.extract.preprocessed_batches`,
``benchmark.apps.reduced._preprocess``): the same :class:`~benchmark.features.preprocess.Preprocess` call on
the same channels-last uint8 layout, with the flip applied to the uint8 pixels first (a permutation, so it
commutes exactly with the per-pixel ``/255``). On CPU a batch is bit-identical to preprocessing the whole
split and indexing it (tested). The frozen flip (legate2023 / FLSim: drawn once per image for the whole run)
is ``preprocess.flip_mask(n, split)`` over the set's images, as in the feature path.

Client datasets are :meth:`ImageSet.subset` views: they share the storage of the full split and only hold
their index map, so a partition costs no copy. :attr:`ImageSet.root` and :meth:`ImageSet.root_indices` let a
vectorised trainer gather the batches of many clients in one call.

Folder datasets (image files of varying size) are decoded and brought to the preset's output size once, when
the set is built (:meth:`ImageSet.from_registry`), and stored as uint8 at that size. Departure, documented:
the resized pixels are rounded to uint8 (under half a grey level; the feature path keeps them in float) and
the frozen flip is applied after the resize / crop instead of before (the same image for a symmetric crop).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from benchmark.data.registry import load_dataset
from benchmark.data.subsets import parse_subset, stratified_indices
from benchmark.errors import ConfigError
from benchmark.features.preprocess import Preprocess, get_preprocess


def to_device_index(idx: object, device: torch.device) -> torch.Tensor:
    """``idx`` (a sequence, array or tensor of ints) as an int64 tensor on ``device``, without a host sync.

    Host arrays bound for a CUDA device go through pinned memory with ``non_blocking=True`` (a plain
    pageable copy makes the host wait for the device); a tensor already on ``device`` is used as it is.
    """
    if isinstance(idx, torch.Tensor):
        return idx.to(device=device, dtype=torch.long, non_blocking=True)
    host = torch.from_numpy(np.ascontiguousarray(idx, dtype=np.int64))
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host if device.type == "cpu" else host.to(device)


class ImageSet(Dataset):
    """uint8 images, labels and frozen flips on one device; :meth:`batch` preprocesses on that device.

    ``images``: uint8 ``(N, 3, H, W)`` (tensor or array), one size for all; ``labels``: ``N`` class ids;
    ``preprocess``: a preset name of :mod:`benchmark.features.preprocess` (or a
    :class:`~benchmark.features.preprocess.Preprocess`); ``split``: ``train`` applies the preset's frozen
    flip, any other split none. ``flips`` overrides the mask (default ``preprocess.flip_mask(N, split)``).
    ``dtype`` / ``channels_last``: the dtype and memory layout of the batches :meth:`batch` returns.
    """

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
        img = torch.as_tensor(images)
        if img.dtype != torch.uint8 or img.dim() != 4 or img.shape[1] != 3:
            raise ConfigError(
                f"ImageSet images must be uint8 (N, 3, H, W), got {img.dtype} {tuple(img.shape)}",
                "pass uint8 NCHW images (a DatasetSplit's NHWC array: .transpose(0, 3, 1, 2))",
            )
        n = img.shape[0]
        lab = labels.cpu() if isinstance(labels, torch.Tensor) else torch.as_tensor(np.asarray(labels))
        if lab.dim() != 1 or len(lab) != n or lab.is_floating_point() or lab.dtype == torch.bool:
            raise ConfigError(
                f"ImageSet labels must be {n} integer class ids, got {lab.dtype} {tuple(lab.shape)}",
                "pass one integer label per image",
            )
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ConfigError(f"ImageSet dtype must be a floating dtype, got {dtype!r}", "e.g. torch.float32")
        pre = get_preprocess(preprocess) if isinstance(preprocess, str) else preprocess
        if not isinstance(pre, Preprocess):
            raise ConfigError(
                f"preprocess must be a preset name, got {preprocess!r}", "e.g. 'legate2023_cifar'"
            )
        if flips is None:
            mask = torch.from_numpy(pre.flip_mask(n, split))
        else:
            mask = flips.cpu() if isinstance(flips, torch.Tensor) else torch.as_tensor(np.asarray(flips))
        if mask.dtype != torch.bool or mask.shape != (n,):
            raise ConfigError(
                f"ImageSet flips must be a bool mask of {n} images, got {mask.dtype} {tuple(mask.shape)}",
                "leave flips=None for the preset's frozen flip",
            )
        dev = torch.device(device)
        # Stored NHWC (the layout of a DatasetSplit): a gathered batch permuted to NCHW has the channels-last
        # strides the feature-extraction path feeds to the same Preprocess call.
        self._hwc = img.permute(0, 2, 3, 1).contiguous().to(dev)
        self._labels = lab.to(dtype=torch.long).to(dev)
        self._flips = mask.to(dev)
        self._any_flip = bool(mask.any())
        stats = torch.tensor([pre.mean, pre.std], dtype=torch.float32).view(2, 1, 3, 1, 1).to(dev)
        self._mean, self._std = stats[0], stats[1]
        self._index: np.ndarray | None = None  # None: the whole storage; else this view's rows of it
        self._index_dev: torch.Tensor | None = None
        self.preprocess = pre
        self.split = str(split)
        self.dtype = dtype
        self.channels_last = bool(channels_last)
        self.device = dev
        self.source: dict[str, object] = {}

    # ------------------------------------------------------------------------------------------ views
    def _view(self, index: np.ndarray | None, device: torch.device | None = None) -> ImageSet:
        out = object.__new__(ImageSet)
        out.__dict__.update(self.__dict__)
        dev = device or self.device
        if dev != self.device:
            names = ("_hwc", "_labels", "_flips", "_mean", "_std")
            out.__dict__.update({k: getattr(self, k).to(dev) for k in names})
            out.device = dev
        out._index = index
        out._index_dev = None if index is None else torch.from_numpy(index).to(dev)
        return out

    def subset(self, idx: object) -> ImageSet:
        """The images ``idx`` of this set as a view sharing its storage (a client's dataset)."""
        return self._view(self.root_indices(idx))

    @property
    def root(self) -> ImageSet:
        """The view over the whole storage this set (or subset) shares."""
        return self if self._index is None else self._view(None)

    def shares_storage(self, other: object) -> bool:
        """Whether ``other`` is an :class:`ImageSet` view of the same storage (same device)."""
        return isinstance(other, ImageSet) and other._hwc is self._hwc

    def root_indices(self, idx: object) -> np.ndarray:
        """Host int64 rows of :attr:`root` that this set's items ``idx`` are (no device work)."""
        arr = np.asarray(idx, dtype=np.int64).reshape(-1)
        n = len(self)
        if arr.size and (int(arr.min()) < -n or int(arr.max()) >= n):
            raise IndexError(f"ImageSet index out of range for {n} images")
        arr = np.where(arr < 0, arr + n, arr)
        return arr if self._index is None else self._index[arr]

    def to(self, device: torch.device | str) -> ImageSet:
        """This set on ``device`` (itself when already there). The whole storage moves, and views moved one by
        one no longer share it: move the full set, then take the client subsets."""
        dev = torch.device(device)
        return self if dev == self.device else self._view(self._index, dev)

    # ------------------------------------------------------------------------------------------ data
    def __len__(self) -> int:
        return int(self._hwc.shape[0] if self._index is None else len(self._index))

    @property
    def labels(self) -> torch.Tensor:
        """The set's labels (int64, on the device)."""
        return self._labels if self._index_dev is None else self._labels[self._index_dev]

    @property
    def flips(self) -> torch.Tensor:
        """The set's frozen flip mask (bool, on the device)."""
        return self._flips if self._index_dev is None else self._flips[self._index_dev]

    @property
    def images(self) -> torch.Tensor:
        """The set's uint8 images as an ``(N, 3, H, W)`` view (channels-last strides)."""
        hwc = self._hwc if self._index_dev is None else self._hwc[self._index_dev]
        return hwc.permute(0, 3, 1, 2)

    def batch(self, idx: object) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)`` of the items ``idx``: ``x`` preprocessed on the device in :attr:`dtype` (channels-last
        when set), ``y`` int64. ``idx`` may be a device tensor (no host work at all) or host ints."""
        rows = to_device_index(idx, self.device)
        if self._index_dev is not None:
            rows = self._index_dev[rows]
        return self.batch_rows(rows)

    def batch_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`batch` for rows of :attr:`root` given as an int64 tensor on the device."""
        raw = self._hwc.index_select(0, rows).permute(0, 3, 1, 2)
        if self._any_flip:
            flip = self._flips.index_select(0, rows).view(-1, 1, 1, 1)
            raw = torch.where(flip, raw.flip(-1), raw)
        x = self.preprocess.transform(raw, self._mean, self._std)  # constants on the device: no sync
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        x = x.contiguous(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)
        return x, self._labels.index_select(0, rows)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.batch([int(i)])
        return x[0], y[0]

    def __repr__(self) -> str:
        h, w = self._hwc.shape[1:3]
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
    return Preprocess(f"{pre.name}@stored", None, None, pre.mean, pre.std, pre.flip, pre.flip_seed)


def _decode_resized(
    paths: tuple[Path, ...], pre: Preprocess, device: torch.device
) -> tuple[torch.Tensor, Preprocess]:
    """Decode image files and resize / crop them with ``pre``'s geometry, rounded to uint8 NCHW (on CPU)."""
    from benchmark.features.extract import _decode  # local: heavy import (torchvision)

    geometry = Preprocess(f"{pre.name}@geometry", pre.resize, pre.center_crop, (0.0,) * 3, (1.0,) * 3)
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
