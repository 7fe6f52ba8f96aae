"""Tests for benchmark.pfl.partition: fedbabu's shards (reference ``utils/sampling.py:noniid``) and Dirichlet
partitions with per-client test sets, and the server's share (FedBABU+), on the real CIFAR labels."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.errors import ConfigError
from benchmark.pfl.partition import ClientSplit, DirichletPartitioner, ShardsPartitioner, make_partitioner

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def labels(real_data_root):
    from benchmark.data.registry import load_dataset

    def get(name: str) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(load_dataset(name, "train", real_data_root).labels, dtype=np.int64),
                np.asarray(load_dataset(name, "test", real_data_root).labels, dtype=np.int64))  # fmt: skip

    return {"cifar10": get("cifar10"), "cifar100": get("cifar100")}


def _same(a: ClientSplit, b: ClientSplit) -> bool:
    return all(np.array_equal(x, y) for x, y in zip((*a.train, *a.test, a.server), (*b.train, *b.test, b.server),
                                                      strict=True))  # fmt: skip


def _check_shards(split: ClientSplit, y_train, y_test, clients: int, s: int, n_train: int, n_test: int):
    num_classes = int(y_train.max()) + 1
    per_class = s * clients // num_classes
    assert split.num_clients == clients and split.label_rows.shape == (clients, s)
    # every class appears per_class times in the label assignment (the reference's rand_set_all)
    assert np.array_equal(
        np.bincount(split.label_rows.ravel(), minlength=num_classes), np.full(num_classes, per_class)
    )
    for part, y, n in ((split.train, y_train, n_train), (split.test, y_test, n_test)):
        # every image is used exactly once, and every client holds n of them
        assert [len(p) for p in part] == [n] * clients
        assert np.array_equal(np.sort(np.concatenate(part)), np.arange(len(y)))
        shard = len(y) // num_classes // per_class
        pos = np.empty(len(y), dtype=np.int64)  # an image's position among its class, in dataset order
        for c in range(num_classes):
            pos[y == c] = np.arange((y == c).sum())
        for i, idx in enumerate(part):
            # client i holds, of class c, one whole shard per occurrence of c in its row, and a shard is a
            # run of consecutive images of the class in dataset order (the reference cuts unshuffled)
            want = np.bincount(split.label_rows[i], minlength=num_classes) * shard
            assert np.array_equal(np.bincount(y[idx], minlength=num_classes), want)
            for c in np.unique(y[idx]):
                shards = pos[idx[y[idx] == c]] // shard
                assert np.all(np.bincount(shards) % shard == 0)
    for tr, te in zip(split.train, split.test, strict=True):
        classes = set(np.unique(y_train[tr]).tolist())
        assert len(classes) <= s
        assert set(np.unique(y_test[te]).tolist()) <= classes


def test_shards_cifar100_k100_s10_is_the_reference_layout(labels):
    """fedbabu §3: 100 clients, 500 train and 100 test images each, at most 10 classes, test ⊆ train classes."""
    y_train, y_test = labels["cifar100"]
    split = ShardsPartitioner(100, 10)(y_train, y_test, seed=0)
    _check_shards(split, y_train, y_test, 100, 10, 500, 100)
    assert split.server.size == 0


@pytest.mark.parametrize("s", [2, 5])
def test_shards_cifar10(labels, s):
    y_train, y_test = labels["cifar10"]
    split = ShardsPartitioner(100, s)(y_train, y_test, seed=1)
    _check_shards(split, y_train, y_test, 100, s, 500, 100)


def test_shards_are_seeded(labels):
    y_train, y_test = labels["cifar100"]
    part = ShardsPartitioner(100, 10)
    a, b, c = part(y_train, y_test, 3), part(y_train, y_test, 3), part(y_train, y_test, 4)
    assert _same(a, b) and np.array_equal(a.label_rows, b.label_rows)
    assert not np.array_equal(a.label_rows, c.label_rows)
    assert not any(np.array_equal(x, y) for x, y in zip(a.train, c.train, strict=True))


def test_shards_need_s_times_k_to_be_a_multiple_of_the_classes(labels):
    y_train, y_test = labels["cifar10"]
    with pytest.raises(ConfigError, match="not a multiple of the 10 classes"):
        ShardsPartitioner(3, 3)(y_train, y_test, 0)
    with pytest.raises(ConfigError, match="not a multiple of the 100 classes"):
        ShardsPartitioner(10, 3)(*labels["cifar100"], 0)


def test_dirichlet_sizes_disjointness_and_seeding(labels):
    y_train, y_test = labels["cifar10"]
    part = DirichletPartitioner(10, beta=0.5, train_per_client=200, test_per_client=40)
    a = part(y_train, y_test, seed=0)
    assert [len(t) for t in a.train] == [200] * 10 and [len(t) for t in a.test] == [40] * 10
    for p, n in ((a.train, len(y_train)), (a.test, len(y_test))):
        flat = np.concatenate(p)
        assert np.unique(flat).size == flat.size and flat.min() >= 0 and flat.max() < n
    # skewed: beta=0.5 gives clients very different class mixes
    hist = np.stack([np.bincount(y_train[t], minlength=10) for t in a.train])
    assert hist.max(1).min() > 20 + 10  # every client's main class is well above the uniform 20
    assert _same(a, part(y_train, y_test, seed=0))
    assert not _same(a, part(y_train, y_test, seed=1))


def test_dirichlet_defaults_are_the_papers_500_and_100(labels):
    split = make_partitioner("dirichlet", 3, beta=1.0)(*labels["cifar100"], 0)
    assert [len(t) for t in split.train] == [500] * 3 and [len(t) for t in split.test] == [100] * 3


def test_dirichlet_refuses_more_images_than_there_are(labels):
    with pytest.raises(ConfigError, match="exceed"):
        DirichletPartitioner(11, beta=1.0, train_per_client=5000, test_per_client=10)(*labels["cifar10"], 0)


@pytest.mark.parametrize("kind", ["shards", "dirichlet"])
def test_server_fraction(labels, kind):
    """FedBABU+ (Table 21): p*N training indices drawn uniformly for the server, seeded."""
    y_train, y_test = labels["cifar10"]
    kw = {"shards_per_client": 2} if kind == "shards" else {"beta": 0.5}
    a = make_partitioner(kind, 10, server_fraction=0.05, **kw)(y_train, y_test, 0)
    assert a.server.size == int(0.05 * len(y_train)) == 2500
    assert np.unique(a.server).size == a.server.size and a.server.max() < len(y_train)
    b = make_partitioner(kind, 10, server_fraction=0.05, **kw)(y_train, y_test, 0)
    c = make_partitioner(kind, 10, server_fraction=0.05, **kw)(y_train, y_test, 1)
    assert np.array_equal(a.server, b.server) and not np.array_equal(a.server, c.server)
    assert make_partitioner(kind, 10, **kw)(y_train, y_test, 0).server.size == 0


def test_make_partitioner_refuses_an_incomplete_scheme():
    with pytest.raises(ConfigError, match="shards with s"):
        make_partitioner("shards", 10)
    with pytest.raises(ConfigError, match="dirichlet with beta"):
        make_partitioner("iid", 10, beta=0.5)
