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

import functools
import inspect
from pathlib import Path
from typing import Any

# Importing the loader modules registers their datasets (in this order: the order of DATASETS.names()).
from benchmark.data import cifar, emnist, folders, text  # noqa: F401
from benchmark.data.dataset import DATASETS, DatasetInfo, DatasetSplit, Loader, Modality, register_dataset
from benchmark.errors import ConfigError
from benchmark.paths import data_root

# re-exported: the loaders' types and registration live in benchmark.data.dataset
__all__ = [
    "DATASETS", "DatasetInfo", "DatasetSplit", "Loader", "Modality", "dataset_info", "list_datasets",
    "load_dataset", "register_dataset", "split_size",
]  # fmt: skip


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
        params = inspect.signature(info.loader).parameters
        unknown = sorted(k for k in options if k not in params or k in ("root", "split", "download"))
        if unknown:
            raise ConfigError(
                f"dataset {name!r} takes no option {', '.join(map(repr, unknown))}",
                "remove it (see the loader's docstring for its options)",
            )
    return info.loader(data_root(root), split, download, **options)


def split_size(name: str, split: str, root: str | Path | None = None) -> int:
    """Examples in ``split`` of ``name`` as found on disk (verified and read once per process; never downloads):
    what planning asks (is the dataset here, how many images does a run see). Raises what :func:`load_dataset`
    raises with ``download=False``. Cached: a workflow plans thousands of cells over a few datasets, and reading
    CIFAR or parsing SST each time cost seconds per Snakemake start. Remembered per folder the root resolves to at
    the call (``root=None``: ``$FLB_DATA_ROOT`` as it is then; a relative root: from the working folder then), so
    the same folder named two ways is read once, and another folder is never answered for."""
    where = data_root(root)
    return _split_size(name, split, str(where), str(where.absolute()))


@functools.cache
def _split_size(name: str, split: str, root: str, _folder: str) -> int:
    return len(load_dataset(name, split, root, download=False).labels)


def forget_split_sizes() -> None:
    """Forget every size :func:`split_size` found: for a process whose dataset files change under it (tests)."""
    _split_size.cache_clear()
