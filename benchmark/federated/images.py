"""The one on-device image store of the training families (issue 25: "one on-device image store").

Federated training reads every training image once per local epoch; decoding and normalising on the host each
time, or keeping float copies (600 KB per 224 px image), makes the naive path slow or large. A
:class:`DeviceImages` keeps a split on the training device as uint8 images at their stored resolution (CIFAR:
150 MB for 50,000) with int64 labels, the normalisation constants and the batch dtype; a batch is gathered,
augmented and normalised there, and only the batch indices cross the host-device link
(:func:`to_device_index`: no host sync). Client datasets are views sharing the storage
(:meth:`~DeviceImages.subset`, :attr:`~DeviceImages.root`, :meth:`~DeviceImages.root_indices`: a vectorised
executor gathers many clients' batches in one call).

Each family's augmentation is a small part on top:

* fedbabu (:mod:`benchmark.pfl`): the reference's ``RandomCrop(32, padding=4)`` + ``RandomHorizontalFlip``
  drawn afresh every epoch, by :func:`epoch_plan` from the generator of ``(round, client, epoch)``
  (a client's batches do not depend on the order clients run in: loop and vectorised draw the same), applied
  by :meth:`DeviceImages.train_batch` (:func:`crop_flip`: zero padding in pixel space, as torchvision pads the
  PIL image). :data:`NORMALISATION` normalises CIFAR-10 with the ImageNet statistics (the reference's quirk,
  kept: the paper's numbers were produced with it).
* legate2023 / fedcof (:mod:`benchmark.fl`): a preset's frozen flip, resize and normalisation,
  :class:`benchmark.fl.image_data.ImageSet`, a subclass overriding :meth:`DeviceImages.batch_rows` (the
  presets live a layer above this one); it stores the pixels NHWC (``layout="nhwc"``) so that a gathered
  batch has the channels-last strides the feature-extraction path feeds to the same resize.

Every batch is bit-identical to the two stores this replaced (``pfl/data.py``, the storage of
``fl/image_data.py``): same gathers, same arithmetic in the same dtype, same memory layout.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torch.utils.data import Dataset

from benchmark.errors import ConfigError

#: (mean, std) per dataset, as fedbabu's reference normalises (CIFAR-10: ImageNet statistics, the quirk).
NORMALISATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "cifar10": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "cifar100": ((0.507, 0.487, 0.441), (0.267, 0.256, 0.276)),
    "emnist": ((0.1307,), (0.3081,)),
}

Layout = Literal["nchw", "nhwc"]


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


def host_tensor(values: object) -> torch.Tensor:
    """``values`` (a tensor anywhere, or an array / sequence) as a tensor, not yet moved."""
    return values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values))


def check_images(images: torch.Tensor, who: str, channels: int | None = None) -> None:
    """A :class:`ConfigError` unless ``images`` is uint8 ``(N, C, H, W)`` (with ``C == channels`` when given)."""
    shape_ok = images.dim() == 4 and (channels is None or images.shape[1] == channels)
    if images.dtype != torch.uint8 or not shape_ok:
        c = "C" if channels is None else str(channels)
        raise ConfigError(
            f"{who} images must be uint8 (N, {c}, H, W), got {images.dtype} {tuple(images.shape)}",
            "pass uint8 NCHW images (a DatasetSplit's NHWC array: .transpose(0, 3, 1, 2))",
        )


def crop_flip(x: torch.Tensor, crop: torch.Tensor, flip: torch.Tensor, pad: int = 4) -> torch.Tensor:
    """fedbabu's augmentation of a batch ``x`` ``(B, C, H, W)``: each image cropped at offsets ``crop`` (``(B, 2)``,
    rows then columns, in ``[0, 2 * pad]``) from the image zero-padded by ``pad`` on every side, and mirrored
    where ``flip``; the same dtype, pixels copied exactly (torchvision's ``RandomCrop(padding=pad)`` +
    ``RandomHorizontalFlip`` with these draws)."""
    b, _, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    rows = (crop[:, 0:1] + torch.arange(h, device=x.device)).view(b, 1, h, 1)
    cols = (crop[:, 1:2] + torch.arange(w, device=x.device)).view(b, 1, 1, w)
    cols = torch.where(flip.view(b, 1, 1, 1), cols.flip(-1), cols)
    bi = torch.arange(b, device=x.device).view(b, 1, 1, 1)
    ci = torch.arange(x.shape[1], device=x.device).view(1, -1, 1, 1)
    return padded[bi, ci, rows, cols]


def epoch_plan(
    n: int, batch_size: int, g: torch.Generator, *, augment: bool = True, shuffle: bool = True, pad: int = 4
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """One local epoch's draws for a client with ``n`` images: a list of (positions, crop, flip) per batch
    (the DataLoader's shuffle unless ``shuffle=False``, then per-image crop offsets and flips; without
    ``augment`` the centre crop and no flip), from the CPU generator ``g`` of the pass
    (:meth:`benchmark.pfl.streams.PFLStreams.batches`). Host tensors; :meth:`DeviceImages.train_batch` takes them."""
    order = torch.randperm(n, generator=g) if shuffle else torch.arange(n)
    crop = torch.randint(0, 2 * pad + 1, (n, 2), generator=g) if augment else torch.full((n, 2), pad)
    flip = torch.rand(n, generator=g) < 0.5 if augment else torch.zeros(n, dtype=torch.bool)
    return [
        (order[i : i + batch_size], crop[i : i + batch_size], flip[i : i + batch_size])
        for i in range(0, n, batch_size)
    ]


class DeviceImages(Dataset):
    """One split's uint8 images, int64 labels and normalisation constants on one device (module docstring).

    ``images``: uint8 ``(N, C, H, W)`` (tensor or array); ``labels``: ``N`` integer class ids; ``mean`` /
    ``std``: per-channel constants (tensors are kept in their dtype, float64 ones make float64 batches;
    sequences become float32), reshaped to ``(1, C, 1, 1)``; ``dtype``: the floating dtype of the batches;
    ``device``: where everything lives (``None``: where ``images`` are); ``layout``: how the pixels are stored
    (``nchw`` as given, ``nhwc`` channels-last, see :meth:`gather`). Nothing is copied that is already on the
    device in that layout. Bad input is one :class:`ConfigError` naming the field.
    """

    #: The attributes that are tensors on the device (moved together by :meth:`to`); subclasses add theirs.
    DEVICE_TENSORS: tuple[str, ...] = ("_store", "_labels", "mean", "std")

    def __init__(
        self,
        images: torch.Tensor | np.ndarray,
        labels: torch.Tensor | np.ndarray,
        mean: torch.Tensor | tuple[float, ...],
        std: torch.Tensor | tuple[float, ...],
        dtype: torch.dtype = torch.float32,
        *,
        device: torch.device | str | None = None,
        layout: Layout = "nchw",
    ) -> None:
        who = type(self).__name__
        img = host_tensor(images)
        check_images(img, who)
        n = img.shape[0]
        lab = host_tensor(labels)
        if lab.dim() != 1 or len(lab) != n or lab.is_floating_point() or lab.dtype == torch.bool:
            raise ConfigError(
                f"{who} labels must be {n} integer class ids, got {lab.dtype} {tuple(lab.shape)}",
                "pass one integer label per image",
            )
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ConfigError(f"{who} dtype must be a floating dtype, got {dtype!r}", "e.g. torch.float32")
        if layout not in ("nchw", "nhwc"):
            raise ConfigError(f"{who} layout={layout!r}", "use 'nchw' or 'nhwc'")
        dev = img.device if device is None else torch.device(device)
        # nhwc: stored as a DatasetSplit holds its pixels; a gathered batch permuted to NCHW then has
        # channels-last strides (what the feature-extraction path feeds to the same resize)
        self._store = (img.permute(0, 2, 3, 1).contiguous() if layout == "nhwc" else img).to(dev)
        self._labels = lab.to(dtype=torch.long).to(dev)
        self.mean = self._constants(mean, dev)
        self.std = self._constants(std, dev)
        self.layout: Layout = layout
        self.dtype = dtype
        self.device = dev
        self._index: np.ndarray | None = None  # None: the whole storage; else this view's rows of it
        self._index_dev: torch.Tensor | None = None

    @staticmethod
    def _constants(values: torch.Tensor | tuple[float, ...], device: torch.device) -> torch.Tensor:
        t = values if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=torch.float32)
        return t.view(1, -1, 1, 1).to(device)

    @classmethod
    def from_split(cls, split: object, dataset: str, device: torch.device | str) -> DeviceImages:
        """A :class:`~benchmark.data.registry.DatasetSplit` (uint8 ``(N, H, W[, C])`` images, labels) on
        ``device`` with ``dataset``'s :data:`NORMALISATION` (fedbabu's reference constants)."""
        if dataset not in NORMALISATION:
            raise ConfigError(f"no normalisation for {dataset!r}", f"use one of {sorted(NORMALISATION)}")
        imgs = np.asarray(split.images)  # type: ignore[attr-defined]
        imgs = imgs[..., None] if imgs.ndim == 3 else imgs
        mean, std = NORMALISATION[dataset]
        images = torch.from_numpy(np.ascontiguousarray(imgs.transpose(0, 3, 1, 2)))
        labels = torch.from_numpy(np.asarray(split.labels, dtype=np.int64))  # type: ignore[attr-defined]
        return cls(images, labels, mean, std, device=device)

    # ------------------------------------------------------------------------------------------ views
    def _view(self, index: np.ndarray | None, device: torch.device | None = None) -> DeviceImages:
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        dev = device or self.device
        if dev != self.device:
            out.__dict__.update({k: getattr(self, k).to(dev) for k in self.DEVICE_TENSORS})
            out.device = dev
        out._index = index
        out._index_dev = None if index is None else torch.from_numpy(index).to(dev)
        return out

    def subset(self, idx: object) -> DeviceImages:
        """The images ``idx`` of this set as a view sharing its storage (a client's dataset)."""
        return self._view(self.root_indices(idx))

    @property
    def root(self) -> DeviceImages:
        """The view over the whole storage this set (or subset) shares."""
        return self if self._index is None else self._view(None)

    def shares_storage(self, other: object) -> bool:
        """Whether ``other`` is a view of the same storage (same device)."""
        return isinstance(other, DeviceImages) and other._store is self._store

    def root_indices(self, idx: object) -> np.ndarray:
        """Host int64 rows of :attr:`root` that this set's items ``idx`` are (no device work)."""
        arr = np.asarray(idx, dtype=np.int64).reshape(-1)
        n = len(self)
        if arr.size and (int(arr.min()) < -n or int(arr.max()) >= n):
            raise IndexError(f"{type(self).__name__} index out of range for {n} images")
        arr = np.where(arr < 0, arr + n, arr)
        return arr if self._index is None else self._index[arr]

    def to(self, device: torch.device | str) -> DeviceImages:
        """This set on ``device`` (itself when already there). The whole storage moves, and views moved one by
        one no longer share it: move the full set, then take the client subsets."""
        dev = torch.device(device)
        return self if dev == self.device else self._view(self._index, dev)

    # ------------------------------------------------------------------------------------------ data
    def __len__(self) -> int:
        return int(self._store.shape[0] if self._index is None else len(self._index))

    def _nchw(self, stored: torch.Tensor) -> torch.Tensor:
        return stored.permute(0, 3, 1, 2) if self.layout == "nhwc" else stored

    @property
    def images(self) -> torch.Tensor:
        """The set's uint8 images ``(N, C, H, W)`` (channels-last strides when stored ``nhwc``)."""
        return self._nchw(self._store if self._index_dev is None else self._store[self._index_dev])

    @property
    def labels(self) -> torch.Tensor:
        """The set's labels (int64, on the device)."""
        return self._labels if self._index_dev is None else self._labels[self._index_dev]

    def rows(self, idx: object) -> torch.Tensor:
        """The rows of :attr:`root` that items ``idx`` are, int64 on the device (``idx``: host ints or a
        tensor; no host sync)."""
        rows = to_device_index(idx, self.device)
        return rows if self._index_dev is None else self._index_dev[rows]

    def gather(self, rows: torch.Tensor) -> torch.Tensor:
        """The uint8 images ``(B, C, H, W)`` at ``rows`` of :attr:`root` (int64 on the device)."""
        return self._nchw(self._store.index_select(0, rows))

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        """``(x / 255 - mean) / std`` computed in :attr:`dtype` (float64 constants promote the batch to float64:
        the exact float32 constants, as a cast would give)."""
        return (x.to(self.dtype) / 255.0 - self.mean) / self.std

    def batch(self, idx: object) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)`` of the items ``idx``: :meth:`batch_rows` of their rows."""
        return self.batch_rows(self.rows(idx))

    #: fedbabu's name for the un-augmented batch (its test batches).
    test_batch = batch

    def batch_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch of ``rows`` of :attr:`root`: the images normalised (no augmentation), labels int64."""
        return self.normalise(self.gather(rows)), self._labels.index_select(0, rows)

    def train_batch(
        self, idx: object, crop: torch.Tensor, flip: torch.Tensor, pad: int = 4
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """fedbabu's training batch of the items ``idx``: :func:`crop_flip` with the draws ``crop`` / ``flip``
        (:func:`epoch_plan`, moved to the device), then normalised."""
        rows = self.rows(idx)
        x = crop_flip(self.gather(rows), crop, flip, pad)
        return self.normalise(x), self._labels.index_select(0, rows)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.batch([int(i)])
        return x[0], y[0]

    def __repr__(self) -> str:
        c, h, w = self.images.shape[1:]
        return f"{type(self).__name__}({len(self)} images {c}x{h}x{w} uint8 on {self.device}, dtype={self.dtype})"
