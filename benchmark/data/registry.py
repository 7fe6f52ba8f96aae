"""Datasets by name, timm-style: ``@register_dataset`` on a typed loader, ``load_dataset(name, split)``.

Every loader returns a :class:`DatasetSplit`: labels, class names and either in-memory uint8 images
(CIFAR), image file paths (folder datasets) or texts, plus ``checksum``, an identity of the exact data
files read (recorded with every feature cache entry and result row).

Loaders share one policy (``benchmark.data.fetch``): files present under the data root are verified and
used; when absent and ``download=True`` (the default when the network is reachable) the dataset's
standard download path runs; otherwise a :class:`~benchmark.errors.DataMissingError` says which files are
expected where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchmark.errors import ConfigError
from benchmark.paths import data_root
from benchmark.registry import Registry

Modality = Literal["image", "text"]


@dataclass(frozen=True, eq=False)
class DatasetSplit:
    """One split of one dataset. Exactly one of ``images``, ``paths``, ``texts`` is set."""

    name: str
    split: str
    labels: np.ndarray
    class_names: tuple[str, ...]
    checksum: str
    images: np.ndarray | None = None  # uint8 (N, H, W, 3)
    paths: tuple[Path, ...] | None = None
    texts: tuple[str, ...] | None = None
    groups: np.ndarray | None = None  # natural-user id per sample, where the dataset has users
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.labels)
        set_ = [x for x in (self.images, self.paths, self.texts) if x is not None]
        if len(set_) != 1:
            raise ValueError("DatasetSplit needs exactly one of images, paths, texts")
        if len(set_[0]) != n:
            raise ValueError(f"{self.name}/{self.split}: {len(set_[0])} samples but {n} labels")
        if self.groups is not None and len(self.groups) != n:
            raise ValueError(f"{self.name}/{self.split}: groups length differs from labels")

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def modality(self) -> Modality:
        return "text" if self.texts is not None else "image"

    def subset(self, indices: np.ndarray, tag: str) -> DatasetSplit:
        """A subset (e.g. a stratified sample), its checksum extended by ``tag`` and the indices' hash."""
        from benchmark.io import sha256_bytes

        idx = np.asarray(indices, dtype=np.int64)
        pick = lambda seq: (
            None if seq is None else (seq[idx] if isinstance(seq, np.ndarray) else tuple(seq[i] for i in idx))
        )
        digest = sha256_bytes(self.checksum.encode() + tag.encode() + idx.tobytes())
        return DatasetSplit(
            name=self.name,
            split=self.split,
            labels=self.labels[idx],
            class_names=self.class_names,
            checksum=digest,
            images=pick(self.images),
            paths=pick(self.paths),
            texts=pick(self.texts),
            groups=pick(self.groups),
            meta={**self.meta, "subset": tag, "parent_checksum": self.checksum},
        )


Loader = Callable[..., DatasetSplit]


@dataclass(frozen=True)
class DatasetInfo:
    """Registry entry: facts about a dataset and its loader."""

    name: str
    loader: Loader
    num_classes: int
    modality: Modality
    splits: tuple[str, ...]
    expected_layout: str
    source: str


def _ensure_loaded() -> None:
    # Importing the loader modules registers them.
    from benchmark.data import cifar, emnist, folders, text  # noqa: F401


#: The datasets by name (the loader modules register themselves with :func:`register_dataset`).
DATASETS: Registry[DatasetInfo] = Registry("dataset", loader=_ensure_loaded)


def register_dataset(
    name: str,
    *,
    num_classes: int,
    modality: Modality,
    splits: Sequence[str] = ("train", "test"),
    expected_layout: str,
    source: str,
) -> Callable[[Loader], Loader]:
    """Decorator registering ``loader(root: Path, split: str, download: bool) -> DatasetSplit``."""
    return DATASETS.register(
        name, lambda fn: DatasetInfo(name, fn, num_classes, modality, tuple(splits), expected_layout, source)
    )


def list_datasets() -> list[str]:
    """Names of all registered datasets."""
    return DATASETS.sorted_names()


def dataset_info(name: str) -> DatasetInfo:
    """Registry entry of ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
    return DATASETS.get(name)


def load_dataset(
    name: str,
    split: str,
    root: str | Path | None = None,
    *,
    download: bool | None = None,
    **options: Any,
) -> DatasetSplit:
    """Load ``split`` of dataset ``name`` from the data root (argument, ``$FLB_DATA_ROOT`` or ``./data``).

    ``download=None`` means: download only if the files are absent and the network is reachable.
    ``options`` go to loaders that take them (e.g. ``seed`` for ``eurosat_sub`` and ``imagenet_r``); the
    defaults are the documented splits, and any option is part of the returned ``checksum``.
    """
    info = dataset_info(name)
    if split not in info.splits:
        raise ConfigError(f"dataset {name!r} has no split {split!r}", f"use one of: {', '.join(info.splits)}")
    if options:
        import inspect

        params = inspect.signature(info.loader).parameters
        unknown = sorted(k for k in options if k not in params or k in ("root", "split", "download"))
        if unknown:
            raise ConfigError(
                f"dataset {name!r} takes no option {', '.join(map(repr, unknown))}",
                "remove it (see the loader's docstring for its options)",
            )
    return info.loader(data_root(root), split, download, **options)
