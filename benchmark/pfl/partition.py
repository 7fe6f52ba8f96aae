"""Client partitions of fedbabu: shards (§3, reference ``utils/sampling.py:noniid``) and Dirichlet (App. Table 18),
each with a per-client test split drawn from the client's own classes.

Shards (one class per scheme, as ``flwr_datasets`` partitioners): with K clients, C classes and s shards per
client, each class's indices **in dataset order** are cut into ``s*K/C`` equal shards (the leftover indices go
one each to the first shards); the multiset ``range(C) * (s*K/C)`` is shuffled and reshaped to K rows of s
labels; client i takes, for each label of its row, a random remaining shard of that class. A client can draw
the same label twice, so it holds **at most** s classes. The test split is cut the same way with the *same*
rows, so a client's test classes are among its training classes (CIFAR-100, K=100, s=10: 500 train and 100
test images per client).

Departure, documented: the reference shuffles the rows with Python's ``random``, which it never seeds (the
label-to-client assignment changes between runs with the same ``--seed``); here every draw comes from one
``numpy`` generator, the run's ``partition`` stream (:mod:`benchmark.pfl.streams`), so a partition is a function of
(dataset, scheme, seed, stream scheme).

Dirichlet (fedbabu App. Table 18, beta in {0.5, 1.0}): every client draws class proportions p ~ Dir(beta*1_C),
its ``train_per_client`` training and ``test_per_client`` test images are drawn class by class from those
proportions without replacement (classes running out of images are renormalised away). The reference
repository does not contain this code; the sizes follow the paper's 500/100 per client.

``server_fraction`` p (fedbabu Table 21, FedBABU+ with server data) draws ``p*N`` training indices uniformly
for the server, *from all training images* (the reference draws them from the full index list, so they
overlap the clients' data).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from benchmark.errors import ConfigError
from benchmark.pfl.streams import PARTITION_DIRICHLET, PARTITION_SHARDS, PFLStreams, as_streams


@dataclass(frozen=True)
class ClientSplit:
    """Per-client training and test indices (into the dataset's train / test splits), and the server's."""

    train: tuple[np.ndarray, ...]
    test: tuple[np.ndarray, ...]
    server: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    label_rows: np.ndarray | None = None  # shards: the K x s label assignment

    @property
    def num_clients(self) -> int:
        return len(self.train)


def _class_shards(labels: np.ndarray, num_classes: int, per_class: int) -> list[list[np.ndarray]]:
    shards = []
    for c in range(num_classes):
        idx = np.flatnonzero(labels == c)  # dataset order, unshuffled (reference)
        left = len(idx) % per_class
        main, leftover = (idx[: len(idx) - left], idx[len(idx) - left :]) if left else (idx, idx[:0])
        rows = list(main.reshape(per_class, -1))
        for i, j in enumerate(leftover):
            rows[i] = np.concatenate([rows[i], [j]])
        shards.append(rows)
    return shards


def _deal(
    shards: list[list[np.ndarray]], rows: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    out = []
    for row in rows:
        parts = []
        for label in row:
            pool = shards[int(label)]
            parts.append(pool.pop(int(rng.integers(len(pool)))))
        out.append(np.sort(np.concatenate(parts)).astype(np.int64))
    return tuple(out)


@dataclass(frozen=True)
class ShardsPartitioner:
    """The shards scheme (module docstring); ``shards_per_client`` is fedbabu's s."""

    num_clients: int
    shards_per_client: int
    server_fraction: float = 0.0

    def __call__(self, train_labels: np.ndarray, test_labels: np.ndarray, seed: int | PFLStreams) -> ClientSplit:
        num_classes = int(max(train_labels.max(), test_labels.max())) + 1
        total = self.shards_per_client * self.num_clients
        if total % num_classes:
            raise ConfigError(
                f"shards: s*K = {total} is not a multiple of the {num_classes} classes",
                "choose s and the number of clients so that every class is cut into the same number of shards",
            )
        per_class = total // num_classes
        rng = as_streams(seed).numpy(PARTITION_SHARDS)
        rows = rng.permutation(np.repeat(np.arange(num_classes)[None, :], per_class, axis=0).ravel())
        rows = rows.reshape(self.num_clients, self.shards_per_client)
        train = _deal(_class_shards(train_labels, num_classes, per_class), rows, rng)
        test = _deal(_class_shards(test_labels, num_classes, per_class), rows, rng)
        return ClientSplit(train, test, _server(len(train_labels), self.server_fraction, rng), rows)


@dataclass(frozen=True)
class DirichletPartitioner:
    """Class proportions per client from Dir(beta); ``train_per_client`` / ``test_per_client`` images each."""

    num_clients: int
    beta: float
    train_per_client: int = 500
    test_per_client: int = 100
    server_fraction: float = 0.0

    def __call__(self, train_labels: np.ndarray, test_labels: np.ndarray, seed: int | PFLStreams) -> ClientSplit:
        num_classes = int(max(train_labels.max(), test_labels.max())) + 1
        rng = as_streams(seed).numpy(PARTITION_DIRICHLET)
        props = rng.dirichlet(np.full(num_classes, self.beta), size=self.num_clients)
        train = _draw(train_labels, props, self.train_per_client, num_classes, rng)
        test = _draw(test_labels, props, self.test_per_client, num_classes, rng)
        return ClientSplit(train, test, _server(len(train_labels), self.server_fraction, rng))


def _draw(labels: np.ndarray, props: np.ndarray, n: int, num_classes: int, rng: np.random.Generator):
    pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in range(num_classes)]
    if n * len(props) > len(labels):
        raise ConfigError(
            f"dirichlet: {len(props)} clients x {n} images exceed the {len(labels)} available",
            "lower the clients or images per client",
        )
    out = []
    for p in props:
        counts = np.zeros(num_classes, dtype=np.int64)
        for _ in range(n):
            avail = np.array([len(pools[c]) - counts[c] > 0 for c in range(num_classes)])
            q = p * avail
            q = q / q.sum() if q.sum() > 0 else avail / avail.sum()
            counts[rng.choice(num_classes, p=q)] += 1
        idx = [pools[c][: counts[c]] for c in range(num_classes)]
        for c in range(num_classes):
            del pools[c][: counts[c]]
        out.append(np.sort(np.concatenate(idx)).astype(np.int64))
    return tuple(out)


def _server(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    if fraction <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(rng.choice(n, int(n * fraction), replace=False)).astype(np.int64)


def make_partitioner(
    kind: str,
    num_clients: int,
    *,
    shards_per_client: int | None = None,
    beta: float | None = None,
    server_fraction: float = 0.0,
):
    """The partitioner of a cell's ``partition`` (``shards`` with s, or ``dirichlet`` with beta)."""
    if kind == "shards" and shards_per_client:
        return ShardsPartitioner(num_clients, int(shards_per_client), server_fraction)
    if kind == "dirichlet" and beta:
        return DirichletPartitioner(num_clients, float(beta), server_fraction=server_fraction)
    raise ConfigError(
        f"partition {kind!r} (s={shards_per_client}, beta={beta})",
        "use shards with s, or dirichlet with beta",
    )
