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

Preprocessed once (issue 28: "the 224 px training images resized once and kept on the GPU when they fit"). The
flips are frozen, so every image's preprocessed tensor is the same in every round: :meth:`ImageSet.keep_preprocessed`
computes them all once, in chunks, with the same per-batch call, and :meth:`ImageSet.batch_rows` then gathers
rows of that tensor instead of resizing again. Every step of the preset is per image (flip, resize, crop,
normalise: no value depends on the other images of its batch), so the batches are the same bits (tested on the
CPU; the GPU check is ``tools/fl_train_bench.py``'s ``--check-kept``). The price is memory: CIFAR-10's 50,000
training images at 224 px in float32 are 30 GB. :func:`keep_if_fits` decides: ``auto`` keeps them on a CUDA
device when at least :data:`KEEP_RESERVE_FRACTION` of the GPU (and :data:`KEEP_RESERVE_BYTES`) stays free after,
never on a CPU (host memory is the machine's, shared); ``on`` / ``off`` force it. All client views of a set share
its kept tensor.
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
    KEEP_CHUNK = 512

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
        self._kept: dict[str, torch.Tensor] = {}  # shared by every view of this storage (keep_preprocessed)

    def _view(self, index: np.ndarray | None, device: torch.device | None = None) -> ImageSet:
        out = super()._view(index, device)
        if out.device != self.device:  # a copy on another device keeps nothing (yet)
            out._kept = {}
        return out

    @property
    def flips(self) -> torch.Tensor:
        """The set's frozen flip mask (bool, on the device)."""
        return self._flips if self._index_dev is None else self._flips[self._index_dev]

    def batch_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch of ``rows`` of :attr:`root`: ``x`` flipped where frozen and preprocessed on the device in
        :attr:`dtype` (channels-last when set), ``y`` int64; gathered from the kept tensor when there is one
        (:meth:`keep_preprocessed`)."""
        kept = self._kept.get("x")
        if kept is None:
            x = self._preprocess_rows(rows)
        else:
            x = kept.index_select(0, rows)
            x = x.contiguous(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)
        return x, self._labels.index_select(0, rows)

    @property
    def kept(self) -> bool:
        """Whether the preprocessed images are kept (:meth:`keep_preprocessed`)."""
        return "x" in self._kept

    def preprocessed_bytes(self) -> int:
        """Bytes of every image of :attr:`root` preprocessed (what :meth:`keep_preprocessed` allocates)."""
        n = int(self._store.shape[0])
        if n == 0:
            return 0
        one = self._preprocess_rows(torch.zeros(1, dtype=torch.int64, device=self.device))
        return n * one[0].numel() * one.element_size()

    @torch.no_grad()
    def keep_preprocessed(self) -> None:
        """Preprocess every image of :attr:`root` once, :data:`KEEP_CHUNK` at a time, and keep the result on the
        device for every view of this storage (module docstring)."""
        if self.kept:
            return
        n = int(self._store.shape[0])
        out: torch.Tensor | None = None
        for s in range(0, n, self.KEEP_CHUNK):  # filled in place: the peak is the kept tensor plus one chunk
            x = self._preprocess_rows(torch.arange(s, min(n, s + self.KEEP_CHUNK), device=self.device))
            if out is None:
                fmt = torch.channels_last if self.channels_last else torch.contiguous_format
                out = torch.empty((n, *x.shape[1:]), dtype=x.dtype, device=self.device, memory_format=fmt)
            out[s : s + len(x)] = x
        if out is not None:
            self._kept["x"] = out

    def _preprocess_rows(self, rows: torch.Tensor) -> torch.Tensor:
        raw = self.gather(rows)
        if self._any_flip:
            flip = self._flips.index_select(0, rows).view(-1, 1, 1, 1)
            raw = torch.where(flip, raw.flip(-1), raw)
        x = self.preprocess.transform(raw, self.mean, self.std)  # constants on the device: no sync
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        return x.contiguous(memory_format=torch.channels_last if self.channels_last else torch.contiguous_format)

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


#: ``keep_if_fits``'s ``auto``: the share of the GPU's memory, and the bytes, that must stay free after keeping.
KEEP_RESERVE_FRACTION = 0.25
KEEP_RESERVE_BYTES = 8 * 2**30
KEEP_MODES = ("auto", "on", "off")


def keep_if_fits(images: ImageSet, mode: str = "auto") -> str:
    """Keep ``images`` preprocessed (:meth:`ImageSet.keep_preprocessed`) per ``mode`` (module docstring); returns
    what was decided and why, for the run's record."""
    if mode not in KEEP_MODES:
        raise ConfigError(f"keep_preprocessed must be one of {', '.join(KEEP_MODES)}, got {mode!r}")
    need = images.preprocessed_bytes()
    size = f"{need / 2**30:.1f} GiB"
    if mode == "off":
        return f"not kept ({size}): keep_preprocessed=off"
    if mode == "auto":
        if images.device.type != "cuda":
            return f"not kept ({size}): auto keeps only on a CUDA device"
        free, total = torch.cuda.mem_get_info(images.device)
        reserve = max(KEEP_RESERVE_BYTES, int(KEEP_RESERVE_FRACTION * total))
        if free - need < reserve:
            return f"not kept ({size}): {free / 2**30:.1f} GiB free, {reserve / 2**30:.1f} GiB must stay free"
    images.keep_preprocessed()
    return f"kept ({size} on {images.device})"


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
