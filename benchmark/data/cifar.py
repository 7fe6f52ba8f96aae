"""CIFAR-10 and CIFAR-100 in the official python pickle layout (Krizhevsky 2009).

Files are verified (manifest or official md5, :mod:`benchmark.data.fetch`) before any pickle is read.
The CIFAR-10 copy in ``shared/data`` has no ``filenames`` key and so does not match the official md5:
it is accepted through the manifest beside the data. Downloads (``download=True``, or ``flb data fetch``) go
through :mod:`benchmark.data.download`: the official tarball, md5-checked before it is extracted.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from benchmark.data.dataset import DatasetSplit, register_dataset
from benchmark.data.fetch import ensure_present, public_downloader, verify_dataset_files
from benchmark.errors import CacheCorruptError

CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR100_FOLDER = "cifar-100-python"
CIFAR10_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
CIFAR10_MD5 = {  # torchvision.datasets.CIFAR10.train_list / test_list / meta
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
}
CIFAR100_MD5 = {
    "train": "16019d7e3df5f24257cddd939b257f8d",
    "test": "f0ef6b0ae62326f3e7ffdfab6717acfc",
    "meta": "7973b15100ade9c7d40fb424638fde48",
}
_HOW = (
    "run `flb data fetch cifar10` / `flb data fetch cifar100` (needs network), or download from "
    "https://www.cs.toronto.edu/~kriz/cifar.html and extract, or run shared/data/prepare.py --out DATA_ROOT"
)


def _unpickle(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return pickle.load(f, encoding="latin1")
    except Exception as exc:  # verified file that still fails to parse
        raise CacheCorruptError(f"cannot unpickle {path}: {exc}", "delete it and re-create the data") from exc


def _to_nhwc(data: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(data, dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))


@register_dataset(
    "cifar10",
    num_classes=10,
    modality="image",
    expected_layout=f"{CIFAR10_FOLDER}/{{data_batch_1..5,test_batch,batches.meta}}",
    source="Krizhevsky 2009; legate2023 Table 1",
)
def load_cifar10(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """CIFAR-10 train (50,000) or test (10,000), images uint8 NHWC, official order."""
    files = CIFAR10_TRAIN if split == "train" else ["test_batch"]
    ensure_present(
        root,
        CIFAR10_FOLDER,
        [*files, "batches.meta"],
        dataset="cifar10",
        download=download,
        downloader=public_downloader("cifar10"),
        how_to_get=_HOW,
    )
    checksum = verify_dataset_files(root, CIFAR10_FOLDER, [*files, "batches.meta"], CIFAR10_MD5)
    batches = [_unpickle(root / CIFAR10_FOLDER / f) for f in files]
    meta = _unpickle(root / CIFAR10_FOLDER / "batches.meta")
    images = np.concatenate([_to_nhwc(b["data"]) for b in batches])
    labels = np.concatenate([np.asarray(b["labels"], dtype=np.int64) for b in batches])
    return DatasetSplit("cifar10", split, labels, tuple(meta["label_names"]), checksum, images=images)


@register_dataset(
    "cifar100",
    num_classes=100,
    modality="image",
    expected_layout=f"{CIFAR100_FOLDER}/{{train,test,meta}}",
    source="Krizhevsky 2009; fedcof Table 3",
)
def load_cifar100(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """CIFAR-100 train (50,000) or test (10,000) with fine labels, images uint8 NHWC, official order."""
    ensure_present(
        root,
        CIFAR100_FOLDER,
        [split, "meta"],
        dataset="cifar100",
        download=download,
        downloader=public_downloader("cifar100"),
        how_to_get=_HOW,
    )
    checksum = verify_dataset_files(root, CIFAR100_FOLDER, [split, "meta"], CIFAR100_MD5)
    batch = _unpickle(root / CIFAR100_FOLDER / split)
    meta = _unpickle(root / CIFAR100_FOLDER / "meta")
    labels = np.asarray(batch["fine_labels"], dtype=np.int64)
    return DatasetSplit(
        "cifar100", split, labels, tuple(meta["fine_label_names"]), checksum, images=_to_nhwc(batch["data"])
    )
