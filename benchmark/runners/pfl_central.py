"""Centralised training curves of fedbabu §5.1 / App. B, F.1, G.1 (Figures 2-9): one network trained on the whole
training set, updating the ``full`` network, the ``body`` only (the head keeps its initialisation, as FedBABU) or
the ``head`` only, with the test accuracy of the whole test set after every epoch.

The recipe is the paper's for Figure 2 (§5.1, line 106): 160 epochs, lr 0.1 x0.1 after epochs 80 and 120; the
rest is fedbabu's SGD of §3 (momentum 0.9, batch 50, no weight decay), i.e. :meth:`CentralRecipe.protocol
<benchmark.pfl.centralised.CentralRecipe.protocol>` (milestones ``E//2``, ``3E//4``), with the pfl library's
networks, head initialisations (``default`` = PyTorch's He-uniform, ``orthogonal``, ``similar_rows``: App. B's
'similar'), batches and augmentation (:mod:`benchmark.pfl`). A part not trained has lr 0 (two SGD groups), as
:func:`benchmark.pfl.centralised.train_centralised`: both train through
:func:`~benchmark.pfl.centralised.fit_part`, this one with an evaluation after each epoch.

``train_images`` (``all`` or N) trains on the first N training images (CIFAR's pickles are in random order): a
reduced budget for a CPU, written into the path and the record. This module registers the job type only (no
runner); the workflow gives it a rule (workflow/rules/plugins.smk) and the figures of
:mod:`benchmark.figures.fedbabu_central` read its records.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from benchmark.data.registry import load_dataset
from benchmark.errors import ConfigError
from benchmark.io import atomic_write_json
from benchmark.jobs import Job, register_job
from benchmark.provenance import git_commit, machine, package_versions

#: The parts a centralised run may update (fedbabu Figure 2: full / body / head).
PARTS = ("full", "body", "head")


@register_job
@dataclass(frozen=True)
class CentralCurveJob(Job):
    """One centralised training run with a test-accuracy curve (module docstring)."""

    KIND: ClassVar[str] = "pfl_central_curve"
    RESOURCES: ClassVar[dict[str, Any]] = {"gpu": 1}
    PATTERN: ClassVar[str] = (
        "results/runs/pfl_central/{dataset}/{model}/{part}-{head_init}/e{epochs}-n{train_images}/seed{seed}.json"
    )

    dataset: str
    model: str
    part: str
    head_init: str
    epochs: int
    train_images: str
    seed: int

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark.pfl.run import resolve_device  # local: heavy import (torch)

        record = train_curve(self, resolve_device(config.get("device")), config.get("data_root"))
        atomic_write_json(self.path, record, checksum=True)


def head_row_cosine(weight: Any) -> float:
    """The mean cosine similarity between distinct rows of the head (fedbabu Figure 3's values in parentheses)."""
    import torch  # local: heavy import (torch)

    w = torch.nn.functional.normalize(weight.detach().double(), dim=1)
    c = w @ w.T
    n = c.shape[0]
    return float((c.sum() - c.diagonal().sum()) / (n * (n - 1)))


def train_curve(job: CentralCurveJob, device: Any, data_root: str | None) -> dict[str, Any]:
    """Train ``job``'s network on the (first ``train_images``) training images; the record with one history
    row per epoch (lr, mean train loss, test accuracy on the whole test set, wall time)."""
    import torch  # local: heavy import (torch)

    from benchmark.federated.images import DeviceImages  # local: heavy import (torch)
    from benchmark.pfl.centralised import CentralRecipe, fit_part  # local: heavy import (torch)
    from benchmark.pfl.models import build_model  # local: heavy import (torch)
    from benchmark.pfl.streams import PFLStreams
    from benchmark.pfl.trainer import PFLConfig  # local: heavy import (torch)

    if job.part not in PARTS:
        raise ConfigError(f"{job.path}: part={job.part!r}", f"use one of {PARTS}")
    if job.epochs < 1:
        raise ConfigError(f"{job.path}: epochs={job.epochs}", "train at least one epoch (the paper: 160)")
    commit = git_commit()
    t0 = time.perf_counter()
    tr, te = load_dataset(job.dataset, "train", data_root), load_dataset(job.dataset, "test", data_root)
    n = len(tr.labels) if job.train_images == "all" else int(job.train_images)
    if not 0 < n <= len(tr.labels):
        raise ConfigError(f"{job.path}: train_images={job.train_images}", f"use 'all' or 1..{len(tr.labels)}")
    train = DeviceImages.from_split(tr, job.dataset, device)
    test = DeviceImages.from_split(te, job.dataset, device)
    cfg = PFLConfig(dataset=job.dataset, model=job.model, head_init=job.head_init, seed=job.seed)
    recipe = CentralRecipe.protocol(cfg, job.epochs)
    streams = PFLStreams.for_run(job.seed, job.epochs)
    streams.seed_model_init()
    num_classes = int(tr.num_classes)
    model = build_model(job.model, num_classes, head_init=job.head_init).to(device)
    cosine = head_row_cosine(model.linear.weight)
    history: list[dict[str, Any]] = []

    def record(e: int, lr: float, losses: list[Any]) -> None:
        history.append({"epoch": e + 1, "lr": lr, "train_loss": float(torch.stack(losses).mean()),
                        "test_accuracy": evaluate_accuracy(model, test), "wall_s": time.perf_counter() - t0})  # fmt: skip

    fit_part(model, train, np.arange(n, dtype=np.int64), job.part, job.epochs, recipe, streams, record)
    return {
        "kind": CentralCurveJob.KIND, "config": {**job.__dict__, "batch_size": recipe.batch_size, "lr": recipe.lr,
                                                 "momentum": recipe.momentum, "weight_decay": recipe.weight_decay,
                                                 "milestones": list(recipe.milestones)},
        "train_images": n, "test_images": len(te.labels), "num_classes": num_classes,
        "data_checksum": {"train": tr.checksum, "test": te.checksum}, "head_row_cosine": cosine,
        "history": history, "final_accuracy": history[-1]["test_accuracy"], "device": str(device),
        "machine": machine(), "versions": package_versions(), "git_commit": commit,
        "wall_s": time.perf_counter() - t0,
    }  # fmt: skip


def evaluate_accuracy(model: Any, test: Any, batch: int = 500) -> float:
    """Percent accuracy on the whole test split (eval mode: the convNets' BN keeps batch statistics)."""
    import torch  # local: heavy import (torch)

    model.eval()
    correct, n = 0, len(test.labels)
    with torch.no_grad():
        for s in range(0, n, batch):
            x, y = test.test_batch(torch.arange(s, min(s + batch, n), device=test.images.device))
            correct += int((model(x).argmax(1) == y).sum())
    return 100.0 * correct / n
