"""Centralised training for fedbabu Table 9 (App. C, "Personalization of the centralized model"): one model
trained on the union of all clients' training data for 10 epochs, entirely (``F``, ``part="full"``) or body only
(``B``, ``part="body"``: the head keeps its initialisation, as FedBABU's); it is then broadcast to every client
and evaluated / fine-tuned like a federated model.

:func:`train_centralised` returns the trained state dict. The model is initialised exactly as
:class:`~benchmark.pfl.trainer.PFLTrainer` initialises a federated run of the same config (the ``model_init`` stream
of :mod:`benchmark.pfl.streams`, then ``build_model``), so the ``B`` model's head is the head of a FedBABU run of
the seed (under the same stream scheme: runs of up to 206 rounds). One SGD optimiser runs all epochs (two groups,
body / head, the part not trained at lr 0); epoch ``e``'s batches come from the ``data_order/centralised`` stream.

Recipes (:class:`CentralRecipe`):

* :meth:`CentralRecipe.protocol` (default) -- Table 9's protocol as transcribed (``expected/fedbabu/table9.yaml``:
  fedbabu §3's setup): the config's batch size (50), lr (0.1), momentum (0.9) and weight decay (0), lr x0.1 after
  epochs ``E//2`` and ``3E//4`` (1-based, as :meth:`PFLConfig.lr_at` over rounds).
* :meth:`CentralRecipe.main_single` -- the reference's only centralised script (``main_single.py``, which the
  paper does not name for Table 9): batch 128, weight decay 5e-4, ``MultiStepLR([80, 120])`` (no decay within
  10 epochs), head bias zeroed at initialisation.

How a job uses it: ``run.train_step`` calls :func:`run_centralised` for the algorithms in :data:`CENTRALISED` and
writes the training record and ``<base>.model.pt`` with ``{"broadcast": state, "personal": {}, "init_personal":
{}}``: ``run.eval_step`` then evaluates (``initial``) and fine-tunes (``personalised``, Table 9's ``tau_f`` =
1..5) it per client unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from benchmark.errors import ConfigError
from benchmark.federated.history import RoundRecord
from benchmark.federated.images import DeviceImages
from benchmark.pfl.local import State, clone_state, epoch_batches, sgd_step, weighted_mean
from benchmark.pfl.models import build_model
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.parts import is_head
from benchmark.pfl.streams import CENTRALISED as CENTRALISED_DRAWS
from benchmark.pfl.streams import PFLStreams, as_streams
from benchmark.pfl.trainer import PFLConfig, PFLResult, PFLTrainer, Selection


@dataclass(frozen=True)
class CentralRecipe:
    """Batch size, lr, momentum, weight decay, the epochs (1-based) after which the lr is x0.1, and whether the
    head bias starts at zero (``main_single.py``)."""

    batch_size: int
    lr: float
    momentum: float
    weight_decay: float
    milestones: tuple[int, ...]
    zero_head_bias: bool = False

    @classmethod
    def protocol(cls, cfg: PFLConfig, epochs: int) -> CentralRecipe:
        return cls(cfg.batch_size, cfg.lr, cfg.momentum, cfg.weight_decay, (epochs // 2, (epochs * 3) // 4))

    @classmethod
    def main_single(cls) -> CentralRecipe:
        return cls(128, 0.1, 0.9, 5e-4, (80, 120), zero_head_bias=True)

    def lr_at(self, epoch: int) -> float:
        """The lr of epoch ``epoch`` (0-based)."""
        return self.lr * 0.1 ** sum(epoch + 1 > m for m in self.milestones)


def train_centralised(
    cfg: PFLConfig,
    train: DeviceImages,
    split: ClientSplit,
    part: str,
    epochs: int,
    *,
    num_classes: int,
    recipe: CentralRecipe | None = None,
) -> State:
    """The model of ``cfg`` (model, bn, head init, seed) trained on the union of ``split.train`` for ``epochs``
    epochs, updating ``part`` (``full`` / ``body`` / ``head``); its state dict (module docstring)."""
    if part not in ("full", "body", "head"):
        raise ConfigError(f"part={part!r}", "use 'full' (Table 9 F), 'body' (Table 9 B) or 'head'")
    if epochs < 1:
        raise ConfigError(f"epochs={epochs}", "train at least one epoch (Table 9: 10)")
    recipe = recipe or CentralRecipe.protocol(cfg, epochs)
    idx = np.unique(np.concatenate([np.asarray(t, dtype=np.int64) for t in split.train]))
    if len(idx) == 0:
        raise ConfigError("the partition's clients hold no training images", "check the partition")
    cfg.streams.seed_model_init()
    model = build_model(cfg.model, num_classes, bn=cfg.bn, head_init=cfg.head_init).to(train.images.device)
    if cfg.channels_last:  # issue 27: the layout option of the trainer (models.place_model)
        model = model.to(memory_format=torch.channels_last)
    if recipe.zero_head_bias:
        torch.nn.init.zeros_(model.linear.bias)
    fit_part(model, train, idx, part, epochs, recipe, cfg.streams)
    return clone_state(model)


def fit_part(
    model: torch.nn.Module,
    train: DeviceImages,
    idx: np.ndarray,
    part: str,
    epochs: int,
    recipe: CentralRecipe,
    streams: int | PFLStreams,
    after_epoch: Callable[[int, float, list[torch.Tensor]], None] | None = None,
) -> None:
    """Train ``part`` (``full`` / ``body`` / ``head``) of ``model`` in place on the images ``idx`` of ``train``:
    one SGD optimiser over all epochs, two groups (body, head), the part not trained at lr 0, epoch ``e``'s
    batches from the run's ``data_order/centralised`` stream keyed ``e`` (:mod:`benchmark.pfl.streams`). ``after_epoch(e, lr, losses)`` runs after each epoch (0-based;
    the batches' detached losses), e.g. an evaluation (the model is put back in train mode after it)."""
    body = [p for n, p in model.named_parameters() if not is_head(n)]
    head = [p for n, p in model.named_parameters() if is_head(n)]
    trains = {"body": part in ("full", "body"), "head": part in ("full", "head")}
    groups = [{"params": body}, {"params": head}]
    opt = torch.optim.SGD(groups, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay)
    for e in range(epochs):
        lr = recipe.lr_at(e)
        opt.param_groups[0]["lr"] = lr if trains["body"] else 0.0
        opt.param_groups[1]["lr"] = lr if trains["head"] else 0.0
        model.train()
        batches = epoch_batches(train, idx, recipe.batch_size, as_streams(streams), CENTRALISED_DRAWS, e)
        losses = [sgd_step(model, opt, x, y) for x, y in batches]
        if after_epoch is not None:
            after_epoch(e, lr, losses)


#: fedbabu Table 9: the algorithm names of the centralised models and the part each trains.
CENTRALISED = {"centralized_full": "full", "centralized_body": "body"}


def run_centralised(trainer: PFLTrainer, part: str) -> PFLResult:
    """A Table 9 job: the model of ``trainer``'s config trained centrally for ``cfg.rounds`` epochs
    (:func:`train_centralised`), broadcast to every client and evaluated on each client's test set; no model
    selection (the last epoch). The record's history is one row (the accuracy after the last epoch); its curve
    row counts no communication and ``3 * (every client's images) * local_epochs`` F, as the jobs always have."""
    cfg, t0 = trainer.cfg, time.perf_counter()
    num_classes = trainer.model.linear.out_features
    state = train_centralised(cfg, trainer.train, trainer.split, part, cfg.rounds, num_classes=num_classes)
    trainer.broadcast, trainer.init_personal, trainer.personal = state, {}, {}
    acc = trainer.client_accuracy()
    mean = weighted_mean(acc, trainer.eval_split())
    images = sum(len(t) for t in trainer.split.train) * cfg.local_epochs
    nan = math.nan
    record = RoundRecord(cfg.rounds, cfg.algorithm, mean / 100, nan, nan, 0, 0, 3 * images, nan, nan)
    extra = {"best_round": cfg.rounds, "best_accuracy": mean, "last_accuracy": mean, "centralised_part": part}
    selected = Selection(mean, cfg.rounds, state, {}, acc)
    history = [{"round": cfg.rounds, "test_accuracy": mean}]
    return PFLResult(cfg, selected, mean, history, time.perf_counter() - t0, extra, records=[record])
