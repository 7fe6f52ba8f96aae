"""Feature extraction and cache: batched == per-image reference, cache hits skip the forward pass,
corruption and failures leave clear errors and no half-written files."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision.transforms import v2

from benchmark.data.registry import DatasetSplit
from benchmark.errors import CacheCorruptError, ConfigError
from benchmark.features import extract as ex
from benchmark.features.cache import FeatureCache
from benchmark.features.preprocess import get_preprocess, list_presets
from benchmark.models.backbones import create_backbone


def _toy_split(n: int = 10, split: str = "train", seed: int = 0) -> DatasetSplit:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 3, size=n).astype(np.int64)
    return DatasetSplit("toy", split, labels, ("a", "b", "c"), f"toy-checksum-{seed}", images=images)


@pytest.mark.parametrize("backbone", ["squeezenet1_1", "mobilenet_v2"])
@pytest.mark.parametrize("preset", ["legate2023_cifar", "fedbabu_cifar100", "fedcof_inat"])
def test_batched_extraction_equals_per_image_torchvision_pipeline(tmp_path, backbone, preset) -> None:
    data = _toy_split(6)
    pre = get_preprocess(preset, flip_seed=1)
    fs = ex.extract_features(
        data, backbone, "random", pre, cache=FeatureCache(tmp_path), progress=False, batch_size=4, seed=2
    )
    model, _ = create_backbone(backbone, "random", seed=2)
    model.eval()
    steps: list = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    if pre.resize is not None:
        steps.append(v2.Resize(pre.resize, antialias=True))
    if pre.center_crop is not None:
        steps.append(v2.CenterCrop(pre.center_crop))
    steps.append(v2.Normalize(pre.mean, pre.std))
    tf = v2.Compose(steps)
    flips = pre.flip_mask(len(data), "train")
    ref = []
    with torch.inference_mode():
        for img, flip in zip(data.images, flips, strict=True):
            x = tf(img[:, ::-1].copy() if flip else img)
            ref.append(model.body(x.unsqueeze(0))[0].numpy())
    np.testing.assert_allclose(fs.features, np.stack(ref), atol=1e-5, rtol=1e-5)
    assert fs.features.shape[0] == 6 and np.array_equal(fs.labels, data.labels)


def test_frozen_flip_is_per_image_and_train_only() -> None:
    pre = get_preprocess("legate2023_cifar", flip_seed=0)
    m = pre.flip_mask(1000, "train")
    assert 400 < m.sum() < 600
    assert np.array_equal(m, pre.flip_mask(1000, "train"))
    assert not np.array_equal(m, get_preprocess("legate2023_cifar", flip_seed=1).flip_mask(1000, "train"))
    assert not pre.flip_mask(1000, "test").any()
    assert not get_preprocess("plain_cifar224").flip_mask(1000, "train").any()


def test_second_request_is_a_cache_hit_without_forward(tmp_path, monkeypatch) -> None:
    data = _toy_split(5)
    pre = get_preprocess("fedbabu_cifar10")
    calls = []
    real = ex.forward_features
    monkeypatch.setattr(ex, "forward_features", lambda *a, **k: calls.append(1) or real(*a, **k))
    cache = FeatureCache(tmp_path)
    first = ex.extract_features(
        data, "squeezenet1_1", "random", pre, cache=cache, progress=False, batch_size=2
    )
    n_first = len(calls)
    assert n_first == 3 and not first.cache_hit
    second = ex.extract_features(data, "squeezenet1_1", "random", pre, cache=cache, progress=False)
    assert len(calls) == n_first and second.cache_hit
    np.testing.assert_array_equal(first.features, second.features)


def test_cache_key_covers_precision_preprocessing_weights_and_data(tmp_path) -> None:
    cache = FeatureCache(tmp_path)
    data = _toy_split(3)
    kw = dict(cache=cache, progress=False)
    a = ex.extract_features(data, "squeezenet1_1", "random", get_preprocess("fedbabu_cifar10"), **kw)
    keys = {a.key_digest}
    keys.add(
        ex.extract_features(
            data, "squeezenet1_1", "random", get_preprocess("fedbabu_cifar10"), precision="bf16", **kw
        ).key_digest
    )
    keys.add(
        ex.extract_features(
            data, "squeezenet1_1", "random", get_preprocess("fedbabu_cifar100"), **kw
        ).key_digest
    )
    keys.add(
        ex.extract_features(
            data, "squeezenet1_1", "random", get_preprocess("fedbabu_cifar10"), seed=1, **kw
        ).key_digest
    )
    keys.add(
        ex.extract_features(
            _toy_split(3, seed=1), "squeezenet1_1", "random", get_preprocess("fedbabu_cifar10"), **kw
        ).key_digest
    )
    assert len(keys) == 5
    meta = a.meta
    assert meta["key"]["weights"]["source"] == "random" and len(meta["key"]["weights"]["sha256"]) == 64


def test_corrupt_cache_file_is_a_clear_error(tmp_path) -> None:
    cache = FeatureCache(tmp_path)
    data = _toy_split(3)
    pre = get_preprocess("fedbabu_cifar10")
    fs = ex.extract_features(data, "squeezenet1_1", "random", pre, cache=cache, progress=False)
    tensors, meta = cache.paths_from_digest(fs.key_digest)
    blob = bytearray(tensors.read_bytes())
    blob[-3] ^= 0xFF
    tensors.write_bytes(bytes(blob))
    with pytest.raises(CacheCorruptError, match=f"{tensors.name}.*delete"):
        ex.extract_features(data, "squeezenet1_1", "random", pre, cache=cache, progress=False)
    meta.write_text("{not json")
    with pytest.raises(CacheCorruptError, match="unreadable"):
        ex.extract_features(data, "squeezenet1_1", "random", pre, cache=cache, progress=False)


def test_failure_mid_extraction_leaves_nothing_behind(tmp_path, monkeypatch) -> None:
    cache = FeatureCache(tmp_path)

    def boom(*a, **k):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(ex, "forward_features", boom)
    with pytest.raises(RuntimeError):
        ex.extract_features(
            _toy_split(3),
            "squeezenet1_1",
            "random",
            get_preprocess("fedbabu_cifar10"),
            cache=cache,
            progress=False,
        )
    assert not cache.root.exists() or list(cache.root.iterdir()) == []


def test_bad_options_raise_config_errors(tmp_path) -> None:
    pre = get_preprocess("fedbabu_cifar10")
    with pytest.raises(ConfigError, match="precision"):
        ex.extract_features(
            _toy_split(2), "squeezenet1_1", "random", pre, precision="fp8", cache=FeatureCache(tmp_path)
        )
    with pytest.raises(ConfigError, match="batch_size"):
        ex.extract_features(
            _toy_split(2), "squeezenet1_1", "random", pre, batch_size=0, cache=FeatureCache(tmp_path)
        )
    with pytest.raises(ConfigError, match="batch_size must be 'auto'"):
        ex.extract_features(
            _toy_split(2), "squeezenet1_1", "random", pre, batch_size="8", cache=FeatureCache(tmp_path)
        )
    assert "legate2023_cifar" in list_presets()


def test_auto_batch_size_is_the_devices_and_a_number_is_kept() -> None:
    assert ex.resolve_batch_size("auto", torch.device("cpu")) == 8
    assert ex.resolve_batch_size("auto", torch.device("cuda")) == 64
    assert ex.resolve_batch_size(3, torch.device("cpu")) == 3


def test_extraction_in_batches_of_8_matches_batches_of_64(tmp_path) -> None:
    """The CPU's auto batch gives the features of the earlier default to rounding (oneDNN picks its kernels by
    batch size: on real CIFAR-10 they were 2.3e-5 apart at most, on values up to 57)."""
    data = _toy_split(24, split="test")
    pre = get_preprocess("legate2023_cifar")
    a, b = (ex.extract_features(data, "squeezenet1_1", "random", pre, batch_size=bs, progress=False,
                                cache=FeatureCache(tmp_path / str(bs))) for bs in (64, "auto"))
    assert b.meta["batch_size"] == 8 and a.meta["batch_size"] == 64
    np.testing.assert_allclose(b.features, a.features, rtol=1e-5, atol=1e-6)


@pytest.mark.realdata
def test_real_cifar10_substitute_squeezenet_features(real_data_root, real_weights_dir, tmp_path) -> None:
    """A few real images through the substitute SqueezeNet: non-negative pooled ReLU features, 512-d."""
    from benchmark.data.registry import load_dataset

    d = load_dataset("cifar10", "test", real_data_root)
    sub = d.subset(np.arange(8), "first8")
    fs = ex.extract_features(
        sub,
        "squeezenet1_1",
        "substitute",
        get_preprocess("legate2023_cifar"),
        cache=FeatureCache(tmp_path),
        progress=False,
        weights_dir=str(real_weights_dir),
    )
    assert fs.features.shape == (8, 512) and (fs.features >= 0).all() and fs.features.std() > 0
