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

Validation (issue 26): ``val_split`` adds a labelled validation set that choices (learning rate, reported
round) are made on, never the test set: ``"dev"`` is the dataset's dev split (SST-2: GLUE's 872 labelled dev
sentences; SST-5: 1,101), ``"k-shot"`` is MeZO's / LM-BFF's few-shot dev set, k examples per class drawn from
the training split **disjoint** from the k-shot training set (Malladi et al. 2023 App. E.1, following Gao et
al. 2021: "a development set of the same size"). ``None`` (the default) keeps the task as it was.
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
#: The validation sets a task can carry (module docstring); ``dev`` reads each dataset's dev split.
VAL_SPLITS = ("dev", "k-shot")
DEV_SPLITS = {"sst2": "dev", "sst5": "dev", "mnli": "dev_mismatched"}
DEFAULT_MAX_LENGTH = 128


@dataclass(frozen=True)
class TextTask:
    """Tokenised clients and test set, with the identities of everything that made them."""

    dataset: str
    classes: int
    clients: tuple[TextTensors, ...]
    test: TextTensors
    identity: dict[str, Any] = field(default_factory=dict)
    #: the validation set (``val_split``), ``None`` when the task was built without one
    val: TextTensors | None = None


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


def k_shot_dev_indices(labels: np.ndarray, k: int, seed: int, exclude: np.ndarray) -> np.ndarray:
    """MeZO's k-shot dev set: ``k`` examples of every class not in ``exclude`` (the k-shot training set),
    drawn without replacement from their own stream (so the training draw is unchanged), ascending."""
    rng = numpy_rng(seed, "k-shot-dev")
    free = np.ones(len(labels), dtype=bool)
    free[np.asarray(exclude, dtype=np.int64)] = False
    out = []
    for c in np.unique(labels):
        pool = np.flatnonzero((labels == c) & free)
        if len(pool) < k:
            raise ConfigError(f"k-shot dev of {k} but class {c} has {len(pool)} unused examples", "lower k_shot")
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
    val_split: str | None = None,
) -> TextTask:
    """Load, subsample, split over ``clients`` and tokenise. ``seed`` seeds the k-shot draw and the split;
    ``test_limit`` keeps the first n test examples (CI only); ``val_split``: the validation set (module
    docstring; ``"k-shot"`` needs ``k_shot``)."""
    if val_split is not None and val_split not in VAL_SPLITS:
        raise ConfigError(f"validation split {val_split!r}", f"use one of {VAL_SPLITS} or none")
    if val_split == "k-shot" and k_shot is None:
        raise ConfigError("a k-shot validation set without k_shot", "give k_shot, or use val_split='dev'")
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
    val_tensors, val_identity = None, {}
    if val_split == "dev":
        dev = _split(dataset, DEV_SPLITS[dataset], data_root)
        val_tensors = tokens(dev, np.arange(len(dev)))
        val_identity = {"val_split": DEV_SPLITS[dataset], "val_checksum": dev.checksum, "val_examples": len(dev)}
    elif val_split == "k-shot":
        val_index = k_shot_dev_indices(labels, int(k_shot), seed, pool)  # type: ignore[arg-type]
        val_tensors = tokens(train, val_index)
        val_identity = {"val_split": f"k-shot dev ({k_shot} per class from train, disjoint from the k-shot set)",
                        "val_examples": len(val_index),
                        "val_index_sha256": partition_sha256([val_index])}  # fmt: skip
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
        **val_identity,
    }
    return TextTask(dataset, len(train.class_names), client_tensors, test_tensors, identity, val_tensors)
