"""ImageSet (benchmark/fl/image_data.py): uint8 images on the device, batches preprocessed there, bit-identical
on CPU to the feature-extraction path's preprocessing of the same images and frozen flips; client views share
the storage; local SGD on an ImageSet is local SGD on the preprocessed tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from benchmark.apps.reduced import _preprocess
from benchmark.errors import ConfigError
from benchmark.features.preprocess import Preprocess, get_preprocess, list_presets
from benchmark.federated.images import to_device_index
from benchmark.fl.client import batch_schedule, fetch_batch, local_sgd
from benchmark.fl.image_data import ImageSet

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def nhwc(n: int, h: int = 32, w: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def image_set(images: np.ndarray, split: str = "train", preset: str = "legate2023_cifar", **kw) -> ImageSet:
    labels = np.arange(len(images)) % 10
    return ImageSet(images.transpose(0, 3, 1, 2), labels, preset, split, **kw)


# ------------------------------------------------------------------------------------------------ the arithmetic
@pytest.mark.parametrize("split", ["train", "test"])
def test_batches_are_bit_identical_to_the_feature_path_preprocessing(split: str) -> None:
    """32 -> 224 px with legate2023's frozen flip: any batch, in any order, equals preprocessing the whole split
    (benchmark.apps.reduced._preprocess, the feature path's Preprocess call) and indexing it."""
    images = nhwc(12)
    want = _preprocess(images, split, "legate2023_cifar")
    data = image_set(images, split)
    assert bool(data.flips.any()) == (split == "train")
    for idx in (np.arange(12), np.array([7, 2, 2, 11, 0]), np.array([5])):
        x, y = data.batch(idx)
        assert x.dtype == torch.float32 and x.shape == (len(idx), 3, 224, 224) and x.is_contiguous()
        assert torch.equal(x, want[torch.as_tensor(idx)])
        assert y.dtype == torch.long and y.tolist() == [int(i) % 10 for i in idx]


@pytest.mark.parametrize("preset", list_presets())
def test_device_preprocessing_equals_preprocess_call_for_every_preset(preset: str) -> None:
    """Preprocess.transform with the constants passed (kept on the device) is Preprocess.__call__ bit for bit: resize by the
    shorter side, to a fixed size, centre crop, or none; a non-square image for the shorter-side resize."""
    pre = get_preprocess(preset)
    raw = torch.from_numpy(nhwc(3, 20, 27, seed=1)).permute(0, 3, 1, 2)
    stats = torch.tensor([pre.mean, pre.std], dtype=torch.float32).view(2, 1, 3, 1, 1)
    assert torch.equal(pre.transform(raw, stats[0], stats[1]), pre(raw))


def test_dtype_and_channels_last_change_only_type_and_layout() -> None:
    images = nhwc(4)
    ref, _ = image_set(images).batch(np.arange(4))
    x, _ = image_set(images, dtype=torch.float64, channels_last=True).batch(np.arange(4))
    assert x.dtype == torch.float64 and x.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(x, ref.double())


def test_explicit_flips_override_the_preset_mask() -> None:
    images = nhwc(3)
    flips = np.array([True, False, True])
    x, _ = image_set(images, "test", "legate2023_cifar32", flips=flips).batch(np.arange(3))
    plain, _ = image_set(images, "test", "legate2023_cifar32").batch(np.arange(3))
    assert torch.equal(x[1], plain[1]) and torch.equal(x[0], plain[0].flip(-1))


# ------------------------------------------------------------------------------------------------ views
def test_subsets_share_storage_and_compose() -> None:
    images = nhwc(10)
    full = image_set(images)
    want, _ = full.batch(np.arange(10))
    a = full.subset(np.array([9, 3, 5, 1]))
    b = a.subset([2, 0])  # rows 5, 9 of the full set
    assert len(a) == 4 and len(b) == 2 and a.shares_storage(full) and b.shares_storage(full)
    assert b.root_indices([0, 1]).tolist() == [5, 9] and a.root_indices([-1]).tolist() == [1]
    assert torch.equal(b.batch([1, 0])[0], want[torch.tensor([9, 5])])
    assert torch.equal(a.labels, full.labels[torch.tensor([9, 3, 5, 1])])
    assert torch.equal(a.images, torch.from_numpy(images[[9, 3, 5, 1]]).permute(0, 3, 1, 2))
    x, y = a[2]  # single items for generic Dataset code
    assert torch.equal(x, want[5]) and int(y) == 5
    assert len(full.root) == 10 and a.root.shares_storage(full)
    assert full.to("cpu") is full
    with pytest.raises(IndexError):
        a.batch([4])


def test_fetch_batch_and_local_sgd_on_an_image_set_equal_the_preprocessed_tensors() -> None:
    """The client path: fetch_batch -> ImageSet.batch; a client's local SGD on its ImageSet view is the same
    computation as on a TensorDataset of the preprocessed images (bit-identical on CPU)."""
    pre = Preprocess("small", (8, 8), None, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), "frozen")
    images = nhwc(20, 6, 6)
    full = ImageSet(images.transpose(0, 3, 1, 2), np.arange(20) % 3, pre, "train", dtype=torch.float64)
    client = full.subset(np.arange(3, 17))
    x_all, y_all = full.batch(np.arange(3, 17))
    tensors = TensorDataset(x_all, y_all)
    idx = np.array([4, 0, 13])
    assert all(
        torch.equal(u, v) for u, v in zip(fetch_batch(client, idx), fetch_batch(tensors, idx), strict=True)
    )
    weights = []
    for data in (client, tensors):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 3)).double()
        res = local_sgd(
            model, dict(model.named_parameters()), data, batch_schedule(14, 4, 2), lr=0.1, momentum=0.9
        )
        weights.append([p.detach().clone() for p in model.parameters()])
        assert res.num_examples == 28 and res.num_steps == 8 and np.isfinite(res.mean_loss)
        assert res.loss_sum.dtype == torch.float64  # summed on the device, read once
    assert all(torch.equal(u, v) for u, v in zip(*weights, strict=True))


# ------------------------------------------------------------------------------------------------ kept preprocessed
@pytest.mark.parametrize(("dtype", "channels_last"), [(torch.float32, False), (torch.float64, True)])
def test_kept_preprocessed_batches_are_the_same_bits_for_every_view(dtype, channels_last) -> None:
    """keep_preprocessed (issue 28: resized once, flips frozen): every batch of the set and of its client views,
    in any order and any batch size, equals the per-batch preprocessing bit for bit, in the same dtype and layout;
    the kept tensor is computed once, in chunks of another size than the batches, and shared by the views."""
    images = nhwc(13)
    per_batch = image_set(images, dtype=dtype, channels_last=channels_last)
    kept = image_set(images, dtype=dtype, channels_last=channels_last)
    client = kept.subset(np.array([12, 4, 7, 0]))  # a view taken before keeping sees the kept tensor too
    kept.KEEP_CHUNK = 5  # 13 images: chunks of 5, 5, 3
    assert not kept.kept and kept.preprocessed_bytes() == 13 * 3 * 224 * 224 * (8 if dtype == torch.float64 else 4)
    kept.keep_preprocessed()
    assert kept.kept and client.kept and kept.subset([1]).kept
    for idx in (np.arange(13), np.array([7, 2, 2, 11, 0]), np.array([5])):
        x, y = kept.batch(idx)
        want, want_y = per_batch.batch(idx)
        assert torch.equal(x, want) and torch.equal(y, want_y) and x.dtype == dtype
        assert x.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    assert torch.equal(client.batch([3, 1])[0], per_batch.subset(np.array([12, 4, 7, 0])).batch([3, 1])[0])


def test_keep_if_fits_keeps_on_a_cpu_only_when_told(monkeypatch) -> None:
    from benchmark.fl.image_data import keep_if_fits

    data = image_set(nhwc(3))
    assert keep_if_fits(data, "auto").startswith("not kept (0.0 GiB): auto keeps only on a CUDA device")
    assert keep_if_fits(data, "off").endswith("keep_preprocessed=off") and not data.kept
    assert keep_if_fits(data, "on").startswith("kept (") and data.kept
    with pytest.raises(ConfigError, match="keep_preprocessed must be one of auto, on, off"):
        keep_if_fits(data, "yes")


def test_to_device_index() -> None:
    cpu = torch.device("cpu")
    t = to_device_index(np.array([3, 1], dtype=np.int32), cpu)
    assert t.dtype == torch.long and t.tolist() == [3, 1]
    assert to_device_index([0, 2], cpu).tolist() == [0, 2]
    src = torch.tensor([5])
    assert to_device_index(src, cpu) is src


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("images", "labels", "kw", "match"),
    [
        (np.zeros((2, 3, 4, 4), dtype=np.float32), [0, 1], {}, "uint8"),
        (np.zeros((2, 4, 4, 3), dtype=np.uint8), [0, 1], {}, r"uint8 \(N, 3, H, W\)"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0], {}, "labels"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0.5, 1.0], {}, "labels"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0, 1], {"flips": [1, 0]}, "flips"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0, 1], {"dtype": torch.int64}, "dtype"),
    ],
)
def test_bad_input_names_the_field(images, labels, kw, match) -> None:
    with pytest.raises(ConfigError, match=match):
        ImageSet(images, labels, "legate2023_cifar32", "train", **kw)


# ------------------------------------------------------------------------------------------------ loading
def test_from_registry_cifar_equals_the_reduced_data_path(real_data_root) -> None:
    """A stratified CIFAR-10 subset loaded as an ImageSet preprocesses exactly as benchmark.apps.reduced does
    (flip drawn over the subset's images, as if the subset were the dataset)."""
    from benchmark.data.registry import load_dataset
    from benchmark.data.subsets import stratified_indices

    data = ImageSet.from_registry(
        "cifar10", "train", "legate2023_cifar", data_root=real_data_root, subset="stratified2"
    )
    split = load_dataset("cifar10", "train", real_data_root)
    idx = stratified_indices(split.labels, 2, 0)
    assert len(data) == 20 and data.source["subset"] == "stratified2"
    x, y = data.batch(np.arange(20))
    assert torch.equal(x, _preprocess(split.images[idx], "train", "legate2023_cifar"))
    assert y.tolist() == split.labels[idx].tolist()


def test_from_registry_folder_dataset_is_resized_once(tmp_path) -> None:
    """Folder datasets are decoded and resized to the preset's size once and stored as uint8: within the
    uint8 rounding (half a grey level over the std) of the feature path's float pipeline."""
    from test_data_folders import make_flowers

    from benchmark.data.registry import load_dataset
    from benchmark.features.extract import preprocessed_batches

    make_flowers(tmp_path)
    pre = get_preprocess("legate2023_folder")
    data = ImageSet.from_registry("flowers102", "train", "legate2023_folder", data_root=tmp_path)
    assert len(data) == 4 and data.images.shape == (4, 3, 224, 224) and data.images.dtype == torch.uint8
    x, _ = data.batch(np.arange(4))
    ((_, want),) = list(preprocessed_batches(load_dataset("flowers102", "train", tmp_path), pre, 8))
    assert (x - want).abs().max() <= 0.5 / 255 / min(pre.std) + 1e-5


def test_a_preset_without_a_fixed_size_is_refused_for_images_of_different_shapes(tmp_path) -> None:
    from PIL import Image

    from benchmark.fl.image_data import _decode_resized

    paths = []
    for i, size in enumerate([(7, 5), (5, 7)]):
        paths.append(tmp_path / f"{i}.png")
        Image.new("RGB", size, (10, 20, 30)).save(paths[-1])
    shorter_side = Preprocess("short", 8, None, (0, 0, 0), (1, 1, 1))
    with pytest.raises(ConfigError, match="different sizes"):
        _decode_resized(tuple(paths), shorter_side, torch.device("cpu"))
    images, stored = _decode_resized(tuple(paths), get_preprocess("fedcof_inat"), torch.device("cpu"))
    assert images.shape == (2, 3, 224, 224) and (stored.resize, stored.center_crop) == (None, None)
