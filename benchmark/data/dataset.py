"""What a dataset loader returns and how it registers: :class:`DatasetSplit`, :class:`DatasetInfo` and
:func:`register_dataset`, the bottom of the data package.

The loader modules (:mod:`~benchmark.data.cifar`, :mod:`~benchmark.data.emnist`, :mod:`~benchmark.data.folders`,
:mod:`~benchmark.data.text`) import this module; :mod:`benchmark.data.registry` imports them (so importing the
registry registers every dataset) and is where datasets are looked up by name. They lived in one module, which
then had to import its own loaders lazily: an import circle (issue 25).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from benchmark.io import sha256_bytes
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


#: The datasets by name: the loader modules register themselves with :func:`register_dataset`, and
#: :mod:`benchmark.data.registry` imports every loader module. Look datasets up through that module.
DATASETS: Registry[DatasetInfo] = Registry("dataset")


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
