"""The local computations every fedbabu method shares: a client's augmented batches (the reference's
``DataLoader`` over ``DatasetSplit``, drawn by :func:`~benchmark.federated.images.epoch_plan`), one SGD step, the
reference's local update (:func:`sgd_epochs`, ``models/Update.py: LocalUpdate.train``) and the per-client test
accuracy (:func:`client_accuracies`, ``test_img_local``).

The round loop (:class:`~benchmark.pfl.trainer.PFLTrainer`), the local procedures
(:mod:`benchmark.pfl.procedures`), the personalisation (:mod:`benchmark.pfl.personalise`), local-only and
centralised training all train and evaluate through these functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.errors import ConfigError
from benchmark.federated.images import DeviceImages, epoch_plan
from benchmark.pfl.parts import in_part, is_head
from benchmark.pfl.streams import BatchKey, PFLStreams

State = dict[str, torch.Tensor]
Batch = tuple[torch.Tensor, torch.Tensor]


def epoch_batches(
    data: DeviceImages, idx: np.ndarray, batch_size: int, streams: PFLStreams, purpose: str, *keys: int
) -> Iterator[Batch]:
    """One pass over the client's images ``idx``: shuffled, cropped and flipped by the draws of the run's stream
    ``purpose`` keyed by ``keys`` (:mod:`benchmark.pfl.streams`; the last batch may be short, as the reference's
    ``DataLoader``)."""
    dev = data.images.device
    idx_t = torch.as_tensor(idx, device=dev)
    for pos, crop, flip in epoch_plan(len(idx), batch_size, streams.batches(purpose, *keys)):
        yield data.train_batch(idx_t[pos.to(dev)], crop.to(dev), flip.to(dev))


def batch_stream(
    data: DeviceImages, idx: np.ndarray, batch_size: int, streams: PFLStreams, purpose: str, *keys: int
) -> Iterator[Batch]:
    """Batches without end: pass ``p`` (0, 1, ...) is :func:`epoch_batches` keyed by ``(*keys, p)`` -- the
    reference's ``next(it)`` that re-creates the ``DataLoader`` iterator (a fresh shuffle) when it runs out."""
    if len(idx) == 0:
        raise ConfigError("a client without training images", "re-partition so that every client has data")
    p = 0
    while True:
        yield from epoch_batches(data, idx, batch_size, streams, purpose, *keys, p)
        p += 1


def sgd_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy on ``(x, y)``, backward, one optimiser step; the (detached) loss."""
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def mean_loss(losses: list[torch.Tensor]) -> float:
    """The mean of the batches' losses (NaN without a batch)."""
    return float(torch.stack(losses).mean()) if losses else float("nan")


def clone_state(model: torch.nn.Module) -> State:
    """A copy of ``model``'s state dict (detached tensors)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@dataclass(frozen=True)
class LocalSGD:
    """One local update's optimiser and batches (the reference's ``LocalUpdate.train`` arguments): ``epochs``
    passes over the client's augmented data in batches of ``batch_size`` drawn from the run's ``streams``, a fresh
    SGD with the body at ``body_lr`` and the head at ``head_lr`` (0: the part is not trained), ``momentum``,
    ``weight_decay``. ``body_part`` (:mod:`benchmark.pfl.parts`) is the part of the body at ``body_lr``: the whole
    ``body``, or fedbabu App. F.3's leading conv blocks (the rest of the body is not updated: lr 0)."""

    epochs: int
    batch_size: int
    body_lr: float
    head_lr: float
    momentum: float
    weight_decay: float
    streams: PFLStreams
    body_part: str = "body"

    def group_of(self, name: str) -> str:
        """``head``, ``body`` (in ``body_part``, at ``body_lr``) or ``frozen`` (the rest of the body)."""
        if is_head(name):
            return "head"
        return "body" if in_part(name, self.body_part) else "frozen"

    def lr_of(self, name: str) -> float:
        """The learning rate of the parameter ``name``."""
        return {"head": self.head_lr, "body": self.body_lr, "frozen": 0.0}[self.group_of(name)]

    def param_groups(self, model: torch.nn.Module) -> list[dict]:
        """The SGD parameter groups: the body's ``body_part`` at ``body_lr`` and the head at ``head_lr`` (the
        reference's two groups; the whole body unless a conv part is named)."""
        return [{"params": self.params(model, group), "lr": lr}
                for group, lr in (("body", self.body_lr), ("head", self.head_lr))]  # fmt: skip

    def params(self, model: torch.nn.Module, group: str) -> list[torch.nn.Parameter]:
        """The parameters of ``model`` in ``group`` (:meth:`group_of`), in the model's order. The ``frozen``
        ones (a conv part only) are never updated, so :func:`sgd_epochs` computes no gradient for them (a
        quarter less work per step for ``conv1``)."""
        return [p for n, p in model.named_parameters() if self.group_of(n) == group]


@contextmanager
def without_gradients(params: list[torch.nn.Parameter]) -> Iterator[None]:
    """``params`` with ``requires_grad`` off inside the block, as they were after it (also on an error)."""
    before = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, was in zip(params, before, strict=True):
            p.requires_grad_(was)


def sgd_epochs(
    model: torch.nn.Module,
    data: DeviceImages,
    idx: np.ndarray,
    sgd: LocalSGD,
    key: BatchKey,
    prox: tuple[float, State] | None = None,
) -> float:
    """The reference's ``LocalUpdate.train``: ``sgd`` with body / head groups over the client's images ``idx``
    (epoch ``e``'s batches from the stream ``key = (purpose, *keys)`` keyed ``(*keys, e)``), and with ``prox = (mu, anchor)`` FedProx's
    ``mu/2 * ||w - anchor||^2`` over the parameters in ``anchor``. Returns the mean loss."""
    with without_gradients(sgd.params(model, "frozen")):
        return _sgd_epochs(model, data, idx, sgd, key, prox)


def _sgd_epochs(
    model: torch.nn.Module,
    data: DeviceImages,
    idx: np.ndarray,
    sgd: LocalSGD,
    key: BatchKey,
    prox: tuple[float, State] | None,
) -> float:
    model.train()
    opt = torch.optim.SGD(sgd.param_groups(model), momentum=sgd.momentum, weight_decay=sgd.weight_decay)
    anchor = []
    if prox is not None:
        named = dict(model.named_parameters())
        anchor = [(named[k], prox[1][k]) for k in named if k in prox[1]]
    losses = []
    for e in range(sgd.epochs):
        for x, y in epoch_batches(data, idx, sgd.batch_size, sgd.streams, *key, e):
            loss = F.cross_entropy(model(x), y)
            if anchor:
                loss = loss + prox[0] / 2 * sum(((p - a) ** 2).sum() for p, a in anchor)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return mean_loss(losses)


def client_accuracies(
    model: torch.nn.Module,
    data: DeviceImages,
    test: tuple[np.ndarray, ...],
    states: Callable[[int], State],
    batch: int = 128,
) -> np.ndarray:
    """Percent accuracy of each client's model (``states(i)``) on its own test indices, batches of ``batch``
    in index order (reference ``test_img_local``)."""
    out = np.zeros(len(test))
    model.eval()
    dev = data.images.device
    with torch.no_grad():
        for i, idx in enumerate(test):
            model.load_state_dict(states(i))
            correct = 0
            for s in range(0, len(idx), batch):
                x, y = data.test_batch(torch.as_tensor(idx[s : s + batch], device=dev))
                correct += int((model(x).argmax(1) == y).sum())
            out[i] = 100.0 * correct / max(len(idx), 1)
    return out


def weighted_mean(acc: np.ndarray, test: tuple[np.ndarray, ...]) -> float:
    """The clients' accuracies weighted by their test-set sizes (a round's reported accuracy)."""
    sizes = np.array([len(t) for t in test], dtype=float)
    return float((acc * sizes).sum() / sizes.sum())
