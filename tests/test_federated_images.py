"""The one on-device image store (benchmark/federated/images.py, issue 25): fedbabu's augmentation equals a
plain per-image pad-and-slice reference bit for bit, views share the storage in either layout, the draws are
keyed, bad input names its field. (legate2023's preset batches: tests/test_fl_image_data.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmark.errors import ConfigError
from benchmark.federated.images import NORMALISATION, DeviceImages, epoch_plan
from benchmark.seeding import keyed_torch_generator

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def store(n: int, channels: int = 3, const: torch.dtype = torch.float32, **kw) -> DeviceImages:
    g = torch.Generator().manual_seed(n + channels)
    mean, std = NORMALISATION["cifar100" if channels == 3 else "emnist"]
    return DeviceImages(
        torch.randint(0, 256, (n, channels, 8, 6), generator=g, dtype=torch.uint8),
        torch.randint(0, 10, (n,), generator=g),
        torch.tensor(mean, dtype=const),
        torch.tensor(std, dtype=const),
        **kw,
    )


def reference(data: DeviceImages, i: int, crop: torch.Tensor, flip: bool, pad: int) -> torch.Tensor:
    """Image ``i`` zero-padded, cut at ``crop``, mirrored when ``flip``, normalised: one image at a time."""
    img = data.images[i]
    h, w = img.shape[-2:]
    top, left = int(crop[0]), int(crop[1])
    out = F.pad(img, (pad, pad, pad, pad))[:, top : top + h, left : left + w]
    out = out.flip(-1) if flip else out
    return ((out.to(data.dtype) / 255.0 - data.mean[0]) / data.std[0]).contiguous()


@pytest.mark.parametrize(("channels", "const", "dtype"), [(3, torch.float32, torch.float32),
                                                          (3, torch.float64, torch.float32),
                                                          (1, torch.float32, torch.float64)])  # fmt: skip
def test_train_batches_are_the_per_image_pad_crop_flip(channels, const, dtype) -> None:
    """Every batch of two epochs (shuffled, cropped, flipped by epoch_plan) equals the per-image reference bit
    for bit, in the dtype the constants and ``dtype`` give; the test batch is the plain normalisation."""
    data = store(23, channels, const, dtype=dtype)
    idx = torch.arange(2, 21)
    want_dtype = torch.promote_types(dtype, const)
    for e in range(2):
        plan = epoch_plan(len(idx), 5, keyed_torch_generator(7, 3, 1, e))
        assert [len(p) for p, _, _ in plan] == [5, 5, 5, 4]
        flips = torch.cat([f for _, _, f in plan])
        assert bool(flips.any()) and not bool(flips.all())
        for pos, crop, flip in plan:
            x, y = data.train_batch(idx[pos], crop, flip)
            assert x.dtype == want_dtype and x.shape == (len(pos), channels, 8, 6) and x.is_contiguous()
            rows = zip(idx[pos].tolist(), crop, flip.tolist(), strict=True)
            want = torch.stack([reference(data, i, c, f, 4) for i, c, f in rows])
            assert torch.equal(x, want)
            assert torch.equal(y, data.labels[idx[pos]])
    x, _ = data.test_batch(torch.tensor([4, 0, 4]))
    centre = torch.full((2,), 4)
    assert torch.equal(x, torch.stack([reference(data, i, centre, False, 4) for i in (4, 0, 4)]))


def test_epoch_plan_is_keyed_and_unaugmented_plans_are_the_centre() -> None:
    a, b = epoch_plan(12, 5, keyed_torch_generator(0, 1, 2)), epoch_plan(12, 5, keyed_torch_generator(0, 1, 2))
    assert all(torch.equal(u, v) for pa, pb in zip(a, b, strict=True) for u, v in zip(pa, pb, strict=True))
    other = epoch_plan(12, 5, keyed_torch_generator(0, 2, 1))
    assert not all(torch.equal(pa[0], pb[0]) for pa, pb in zip(a, other, strict=True))
    plain = epoch_plan(12, 5, keyed_torch_generator(0, 1, 2), augment=False, shuffle=False, pad=3)
    assert torch.equal(torch.cat([p for p, _, _ in plain]), torch.arange(12))
    assert bool((torch.cat([c for _, c, _ in plain]) == 3).all())
    assert not bool(torch.cat([f for *_, f in plain]).any())


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_views_share_the_storage_in_either_layout(layout: str) -> None:
    base = store(10)
    data = DeviceImages(base.images, base.labels, base.mean, base.std, layout=layout)
    assert torch.equal(data.images, base.images)
    assert data.images.is_contiguous(memory_format=torch.channels_last) == (layout == "nhwc")
    sub = data.subset([9, 3, 5, 1])
    sub2 = sub.subset([2, 0])  # rows 5, 9 of the whole set
    assert sub.shares_storage(data) and sub2.root.shares_storage(data) and len(sub2) == 2
    assert sub2.root_indices([0, 1]).tolist() == [5, 9] and sub.root_indices([-1]).tolist() == [1]
    x, y = sub2.batch([1, 0])
    want = (base.images[[9, 5]].float() / 255.0 - base.mean) / base.std
    assert torch.equal(x, want) and y.tolist() == base.labels[[9, 5]].tolist()
    rows = [9, 3, 5, 1]
    assert torch.equal(sub.images, base.images[rows]) and torch.equal(sub.labels, base.labels[rows])
    assert torch.equal(data.gather(torch.tensor([2, 2])), base.images[[2, 2]])
    assert data.to("cpu") is data and len(data.root) == 10
    with pytest.raises(IndexError):
        sub.batch([4])


def test_from_split_normalises_as_the_reference() -> None:
    class Split:
        # EMNIST-like: no channel axis
        images = np.random.default_rng(0).integers(0, 256, (4, 5, 5), dtype=np.uint8)
        labels = (1, 0, 3, 2)

    data = DeviceImages.from_split(Split, "emnist", "cpu")
    assert data.images.shape == (4, 1, 5, 5) and data.labels.dtype == torch.long
    x, _ = data.test_batch(torch.arange(4))
    assert torch.equal(x, (torch.from_numpy(Split.images)[:, None].float() / 255.0 - 0.1307) / 0.3081)


@pytest.mark.parametrize(
    ("images", "labels", "kw", "match"),
    [
        (np.zeros((2, 3, 4, 4), dtype=np.float32), [0, 1], {}, "images must be uint8"),
        (np.zeros((2, 4, 4), dtype=np.uint8), [0, 1], {}, r"uint8 \(N, C, H, W\)"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0], {}, "labels"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0.5, 1.0], {}, "labels"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0, 1], {"dtype": torch.int64}, "dtype"),
        (np.zeros((2, 3, 4, 4), dtype=np.uint8), [0, 1], {"layout": "chw"}, "layout"),
    ],
)
def test_bad_input_names_the_field(images, labels, kw, match) -> None:
    with pytest.raises(ConfigError, match=match):
        DeviceImages(images, labels, (0.5,) * 3, (0.25,) * 3, **kw)
    with pytest.raises(ConfigError, match="normalisation"):
        DeviceImages.from_split(None, "svhn", "cpu")
