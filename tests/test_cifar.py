"""CIFAR loaders on the real files: sizes, labels, and verification before unpickling."""

from __future__ import annotations

import pickle
import shutil

import numpy as np
import pytest

from benchmark.data.registry import dataset_info, list_datasets, load_dataset
from benchmark.errors import ChecksumError, ConfigError, DataMissingError, UnknownNameError

pytestmark = pytest.mark.realdata


@pytest.mark.parametrize(("name", "split", "n", "c"), [
    ("cifar10", "train", 50000, 10), ("cifar10", "test", 10000, 10),
    ("cifar100", "train", 50000, 100), ("cifar100", "test", 10000, 100),
])  # fmt: skip
def test_real_cifar_loads(real_data_root, name, split, n, c) -> None:
    d = load_dataset(name, split, real_data_root)
    assert d.images.shape == (n, 32, 32, 3) and d.images.dtype == np.uint8
    assert len(d.labels) == n and d.num_classes == c == dataset_info(name).num_classes
    assert np.bincount(d.labels).tolist() == [n // c] * c
    assert len(d.checksum) == 64


def test_cifar10_first_labels_are_official(real_data_root) -> None:
    d = load_dataset("cifar10", "train", real_data_root)
    assert d.labels[:10].tolist() == [6, 9, 9, 4, 1, 1, 2, 7, 8, 3]  # the official data_batch_1 order
    assert d.class_names[0] == "airplane"


def _copy_cifar10(src, dst, manifest: bool):
    shutil.copytree(src / "cifar-10-batches-py", dst / "cifar-10-batches-py")
    if manifest:
        shutil.copyfile(src / "MANIFEST.sha256", dst / "MANIFEST.sha256")


def test_checksum_mismatch_stops_before_unpickling(real_data_root, tmp_path, monkeypatch) -> None:
    _copy_cifar10(real_data_root, tmp_path, manifest=True)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    data = bytearray(path.read_bytes())
    data[5000] ^= 1
    path.write_bytes(bytes(data))
    calls = []
    monkeypatch.setattr(pickle, "load", lambda *a, **k: calls.append(a))
    with pytest.raises(ChecksumError, match="test_batch"):
        load_dataset("cifar10", "test", tmp_path)
    assert calls == []


def test_cifar10_rebuild_without_manifest_fails_official_md5(real_data_root, tmp_path) -> None:
    """The shared CIFAR-10 has no 'filenames' key, so only the manifest can vouch for it."""
    _copy_cifar10(real_data_root, tmp_path, manifest=False)
    with pytest.raises(ChecksumError, match=r"md5 mismatch.*MANIFEST\.sha256"):
        load_dataset("cifar10", "test", tmp_path)


def test_cifar100_verifies_against_official_md5(real_data_root, tmp_path) -> None:
    shutil.copytree(real_data_root / "cifar-100-python", tmp_path / "cifar-100-python")
    d = load_dataset("cifar100", "test", tmp_path)  # no manifest: the official md5 applies
    assert len(d) == 10000


def test_missing_root_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(DataMissingError) as err:
        load_dataset("cifar100", "train", tmp_path / "nowhere", download=False)
    msg = str(err.value)
    assert "cifar-100-python" in msg and "FLB_DATA_ROOT" in msg and "\n" not in msg


def test_unknown_dataset_and_split() -> None:
    with pytest.raises(UnknownNameError, match="cifar10"):
        load_dataset("cifar11", "train")
    with pytest.raises(ConfigError, match="no split"):
        load_dataset("cifar10", "validation")
    assert {"cifar10", "cifar100"} <= set(list_datasets())


def test_stratified_subset_is_seeded_and_balanced(real_data_root) -> None:
    from benchmark.data.subsets import stratified_indices

    d = load_dataset("cifar10", "test", real_data_root)
    a = stratified_indices(d.labels, 20, seed=0)
    assert np.array_equal(a, stratified_indices(d.labels, 20, seed=0))
    assert not np.array_equal(a, stratified_indices(d.labels, 20, seed=1))
    assert np.bincount(d.labels[a]).tolist() == [20] * 10
    s = d.subset(a, "stratified20/seed0")
    assert len(s) == 200 and s.checksum != d.checksum
