"""The text task of a FedMeZO run: a dataset split, MeZO's optional k-shot subset, clients, tokens.

bernier2024 §4.2.1: SST-2 / SST-5 / MNLI over 10 clients by a Dirichlet label split, α = 100 ("IID") and
0.1 ("non-IID"), full participation, and "a complete distribution of the original dataset to clients"
(§4.2.2). The split is legate2023's equal-size Dirichlet sharder (the same authors' FLSim code,
:func:`benchmark.data.partition.dirichlet`), whose ``N mod K`` leftover examples are then dealt to the
clients round-robin so that the union of the clients is the whole training set (the thesis's equivalence
claim needs it). ``k_shot`` draws MeZO's / LM-BFF's k examples per class from the training split first
(Malladi et al. 2023 §3: k = 16 and 512); the default ``None`` uses the full split, as Table 4.2 lists.
Evaluation uses the labelled ``test`` split (SST-2: the 1,821 labelled sentences LM-BFF and MeZO test on;
SST-5: 2,210) and MNLI's ``dev_matched`` (MeZO's; premise and hypothesis are encoded as a pair).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.data.partition import make_partition, partition_sha256
from benchmark.data.registry import DatasetSplit, load_dataset
from benchmark.errors import ConfigError
from benchmark.seeding import numpy_rng
from benchmark.zo.text_model import TextTensors, tokenise

#: bernier2024 Table 4.2's text datasets, and the split each is evaluated on (MNLI: dev_matched, as MeZO).
TEXT_DATASETS = ("sst2", "sst5", "mnli")
TEST_SPLITS = {"sst2": "test", "sst5": "test", "mnli": "dev_matched"}
DEFAULT_MAX_LENGTH = 128


@dataclass(frozen=True)
class TextTask:
    """Tokenised clients and test set, with the identities of everything that made them."""

    dataset: str
    classes: int
    clients: tuple[TextTensors, ...]
    test: TextTensors
    identity: dict[str, Any] = field(default_factory=dict)


def k_shot_indices(labels: np.ndarray, k: int, seed: int) -> np.ndarray:
    """``k`` examples of every class, drawn without replacement (seeded), in ascending index order."""
    rng = numpy_rng(seed, "k-shot")
    out = []
    for c in np.unique(labels):
        pool = np.flatnonzero(labels == c)
        if len(pool) < k:
            raise ConfigError(f"k_shot={k} but class {c} has {len(pool)} training examples", "lower k_shot")
        out.append(rng.choice(pool, size=k, replace=False))
    return np.sort(np.concatenate(out))


def complete_dirichlet(labels: np.ndarray, clients: int, alpha: float, seed: int) -> list[np.ndarray]:
    """legate2023's equal-size Dirichlet split, plus the ``N mod K`` leftovers dealt round-robin (sorted),
    so every example is on exactly one client."""
    part = make_partition("dirichlet", labels, seed, num_clients=clients, alpha=alpha)
    shards = [np.asarray(c, dtype=np.int64) for c in part.clients]
    used = np.zeros(len(labels), dtype=bool)
    for c in shards:
        used[c] = True
    for i, idx in enumerate(np.flatnonzero(~used)):
        shards[i % clients] = np.append(shards[i % clients], idx)
    return shards


def _split(dataset: str, split: str, data_root: str | Path | None) -> DatasetSplit:
    if dataset not in TEXT_DATASETS:
        raise ConfigError(f"text dataset {dataset!r}", f"use one of {TEXT_DATASETS} ")
    return load_dataset(dataset, split, data_root)


def prepare_task(
    dataset: str,
    tokenizer,
    *,
    clients: int = 10,
    alpha: float = 100.0,
    seed: int = 0,
    k_shot: int | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    test_split: str | None = None,
    data_root: str | Path | None = None,
    test_limit: int | None = None,
) -> TextTask:
    """Load, subsample, split over ``clients`` and tokenise. ``seed`` seeds the k-shot draw and the split;
    ``test_limit`` keeps the first n test examples (CI only)."""
    test_split = test_split or TEST_SPLITS.get(dataset, "test")
    train = _split(dataset, "train", data_root)
    test = _split(dataset, test_split, data_root)

    def tokens(split: DatasetSplit, index: np.ndarray) -> TextTensors:
        """The examples ``index`` of ``split`` tokenised (MNLI: with their hypotheses as ``pairs``)."""
        pairs = split.meta.get("text_pairs")
        second = None if pairs is None else [pairs[i] for i in index]
        labels = np.asarray(split.labels)[index].tolist()
        return tokenise(tokenizer, [split.texts[i] for i in index], labels, max_length, second)

    labels = np.asarray(train.labels)
    pool = np.arange(len(labels)) if k_shot is None else k_shot_indices(labels, k_shot, seed)
    shards = complete_dirichlet(labels[pool], clients, alpha, seed)
    client_tensors = tuple(tokens(train, pool[s]) for s in shards)
    n_test = len(test) if test_limit is None else min(test_limit, len(test))
    if (np.asarray(test.labels[:n_test]) < 0).any():
        raise ConfigError(f"{dataset} {test_split!r} split has no labels", "evaluate on test_split='dev'")
    test_tensors = tokens(test, np.arange(n_test))
    identity = {
        "train_checksum": train.checksum,
        "test_checksum": test.checksum,
        "test_split": test_split,
        "test_examples": n_test,
        "k_shot": k_shot,
        "clients": clients,
        "alpha": alpha,
        "partition_sha256": partition_sha256([pool[s] for s in shards]),
        "client_sizes": [len(s) for s in shards],
        "max_length": max_length,
    }
    return TextTask(dataset, len(train.class_names), client_tensors, test_tensors, identity)
