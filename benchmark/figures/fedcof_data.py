"""The fedcof closed-form figures' inputs (Figs. 5, 9, 10): CIFAR-100 features of SqueezeNet (the papers'
torchvision checkpoint where it is available, else the substitute) with the fedcof preprocessing, and fedcof's
seeded Dirichlet partitions, as the typed jobs of :mod:`benchmark.jobs`, so the figure's ``inputs(config)`` are
outputs of the ``extract`` and ``partition`` rules and Snakemake builds them first (the CI tier extracts the
same features for fedcof Table 3).

:func:`load_setting` reads them back and checks each partition against the features it was drawn on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.data.partition import load_partition_for
from benchmark.errors import ConfigError
from benchmark.jobs import ExtractJob, PartitionJob, partition_tag
from benchmark.tables.availability import choose_weights

DATASET = "cifar100"
BACKBONE = "squeezenet1_1"
PREPROCESS = "fedcof_cifar"  # fedcof path A's CIFAR transform (papers-code.md §2.1)
SCHEME = "dirichlet_fedcof"  # the fedcof code's seeded sharder (papers-code.md §2.2)
SUBSET = "all"
NUM_CLASSES = 100
#: fedcof's five partition seeds (bash_for_datasets: seeds 0-4; Fig. 9 caption "five random seeds").
PAPER_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)


def weights(config: Mapping[str, Any]) -> tuple[str | None, str]:
    """SqueezeNet weights used here (``None`` and why, when there are none)."""
    return choose_weights(BACKBONE, config.get("data_root"), config.get("weights_dir"))


def unavailable(config: Mapping[str, Any]) -> str | None:
    """Why the CIFAR-100 closed-form figures cannot run (``None``: they can)."""
    w, why = weights(config)
    return None if w is not None else f"no SqueezeNet weights: {why}"


def is_substitute(config: Mapping[str, Any]) -> bool:
    return weights(config)[0] == "substitute"


def feature_jobs(config: Mapping[str, Any]) -> tuple[ExtractJob, ExtractJob]:
    """(train, test) feature jobs of CIFAR-100 / SqueezeNet / fedcof preprocessing."""
    w, why = weights(config)
    if w is None:
        raise ConfigError(f"fedcof CIFAR-100 figures: {why}", "provide the weights (FLB_WEIGHTS_DIR)")
    precision = str(config.get("precision", "fp32"))
    return tuple(  # type: ignore[return-value]
        ExtractJob(DATASET, BACKBONE, w, PREPROCESS, precision, SUBSET, split) for split in ("train", "test")
    )


def partition_job(alpha: float, num_clients: int, seed: int) -> PartitionJob:
    """fedcof's Dirichlet(alpha) partition over ``num_clients`` clients, seed ``seed``."""
    return PartitionJob(
        DATASET, SUBSET, partition_tag({"scheme": SCHEME, "alpha": alpha, "num_clients": num_clients}), seed
    )


@dataclass(frozen=True)
class Setting:
    """Loaded features (train and test) of the closed-form figures."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    train_pointer: Mapping[str, Any]
    train_path: str


def load_setting(config: Mapping[str, Any]) -> Setting:
    """The features of :func:`feature_jobs`, read from their pointers (sha256-checked by the cache)."""
    from benchmark.features.pointer import load_train_test  # local: heavy import (torch)

    tr_job, te_job = feature_jobs(config)
    ptr, tr, _, te = load_train_test(tr_job.path, te_job.path)
    return Setting(tr.features, tr.labels, te.features, te.labels, ptr, tr_job.path)


def load_clients(setting: Setting, job: PartitionJob) -> list[np.ndarray]:
    """Client index arrays of partition ``job``, checked against the features it indexes."""
    from benchmark.features.pointer import partition_data_of  # local: heavy import (torch)

    part = load_partition_for(job.path, partition_data_of(setting.train_pointer), setting.train_path)
    return list(part.clients)


def fedcof_options(**extra: Any) -> dict[str, Any]:
    """FedCOF's options of fedcof Table 3 (the ``fedcof`` closed-form protocol: path A of the fedcof code,
    gamma = 1 for SqueezeNet, float32 pinv), with ``extra`` over them."""
    # local: heavy import (scipy, torch, torchvision)
    from benchmark.closed_form.protocols import protocol_options

    return {**protocol_options("fedcof", BACKBONE)["fedcof"], **extra}


def method_options(method: str, **extra: Any) -> dict[str, Any]:
    """Options of ``method`` in the ``fedcof`` closed-form protocol, with ``extra`` over them."""
    # local: heavy import (scipy, torch, torchvision)
    from benchmark.closed_form.protocols import protocol_options

    return {**protocol_options("fedcof", BACKBONE)[method], **extra}


def inputs(config: Mapping[str, Any], partitions: Sequence[PartitionJob]) -> list[str]:
    """Feature pointers and partition files (rule outputs) of a closed-form figure."""
    return [j.path for j in feature_jobs(config)] + [p.path for p in partitions]


SUBSTITUTE_NOTE = (
    "SqueezeNet features from the substitute checkpoint (no torchvision squeezenet1_1 weights here): "
    "accuracies are not the paper's model's."
)
