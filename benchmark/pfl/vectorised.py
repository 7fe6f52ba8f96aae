"""Vectorised execution of a fedbabu round's clients: the fedbabu plug-in of the one lock-step executor.

The per-client loop of :meth:`benchmark.pfl.trainer.PFLTrainer.train_round` trains the sampled clients one after
the other, each with batches of 50 images: on a GPU that is launch-bound (issue 12). Here a chunk of clients
trains in lock-step on :class:`benchmark.federated.vectorised.LockstepSGD` (weights stacked along a leading
client axis, every local step of all of them one ``torch.func.vmap(grad(loss))`` call; the executor shared
with legate2023's trainer, :mod:`benchmark.fl.vectorised`). What this module adds is fedbabu's: how the
batches are drawn and augmented, which entries are trained at which lr, the fine-tuning and the lock-step
evaluation of personalisation. The arithmetic of each client is that of :func:`benchmark.pfl.local.sgd_epochs`
(the reference's ``models/Update.py: LocalUpdate.train``):

* the same batches: ``epoch_plan`` of each client's stream (its shuffle, crops and flips depend only on the
  run's ``data_order`` stream keyed ``(round, client, epoch)``, not on the order in which clients run), gathered and
  augmented by :meth:`DeviceImages.train_batch`, one image at a time, so the pixels are bit-identical;
* the same loss: batch-mean cross-entropy plus, for FedProx, ``mu/2 * sum ||w - w_broadcast||^2`` over the
  model's parameters that are broadcast (in the model's order; ``SGDRule.prox_at="loss"``);
* the same step as ``torch.optim.SGD`` with a **fresh** optimiser per client and round (its foreach path,
  ``SGDRule.kernel="foreach"``): ``d = g + wd * w``, momentum buffer ``= d`` at the first step then
  ``buf = momentum * buf + d``, ``w -= lr * buf``; the body at ``body_lr`` and the head at ``head_lr``
  (:meth:`PFLTrainer.local_sgd`), one learning-rate group each.

A parameter whose learning rate is 0 (FedBABU's head) is not differentiated at all: ``torch.optim.SGD`` adds
``-0 * buf`` to it, which leaves every finite value unchanged, so skipping the update is exact and the head
stays bit-identical to its start (the returned entries are copies of the client's start values).

Lock-step needs equal schedules: the sampled clients are grouped by their number of training images (equal
sizes give equal batch-size sequences, including a smaller last batch), in sampling order, and each group is
cut into chunks of ``chunk`` clients (:func:`size_chunks`); every chunk is one lock-step computation (a client
with a size of its own is a chunk of one). No batch is padded (padding would change BatchNorm's batch
statistics). The states are returned in sampling order, so the server's mean stacks them in the loop's order.

What falls back to the per-client loop, with a warning naming the reason (:func:`loop_reason`): a local
procedure other than ``sgd`` (FedRep, Ditto, Per-FedAvg), a model with buffers (``bn="standard"``: the round
averages the running statistics, which the executor keeps as scratch per client), and a model with dropout.

Equality: the per-client operations are the loop's, but grouped convolutions and batched matrix products sum
in another order than the single ones, so a vectorised round equals the loop's round to floating-point
rounding, not bit for bit (``tests/test_pfl_vectorised.py`` bounds it in float64 and float32).

No host synchronisation inside a chunk's training: a chunk's batch draws go to the device in one copy per
kind, the losses stay on the device and are read back once per chunk.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from benchmark.errors import ConfigError
from benchmark.federated.images import DeviceImages, epoch_plan
from benchmark.federated.vectorised import (
    LockstepSGD,
    SGDRule,
    chunk_clients,
    lockstep_obstacle,
    split_shared,
    stack_states,
)
from benchmark.pfl.local import LocalSGD, State
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.personalise import FineTune, personalise
from benchmark.pfl.streams import FINE_TUNE, LOCAL, BatchKey, PFLStreams

if TYPE_CHECKING:
    from benchmark.pfl.trainer import PFLTrainer


# --------------------------------------------------------------------------------------------- eligibility
def model_reason(model: nn.Module) -> str | None:
    """Why ``model`` cannot run in lock-step (``None`` when it can): buffers (``bn="standard"``: the round
    averages their running statistics) or dropout anywhere (the whole model trains in train mode)."""
    return lockstep_obstacle(model, keeps_buffers=True, modes_as_set=False)


def loop_reason(trainer: PFLTrainer) -> str | None:
    """Why ``trainer``'s rounds fall back to the per-client loop (``None`` when they are vectorised)."""
    if trainer.algo.procedure != "sgd":
        return f"algorithm {trainer.algo.name!r} has local procedure {trainer.algo.procedure!r}, not 'sgd'"
    return model_reason(trainer.model)


def size_chunks(sizes: Sequence[tuple[int, int]], chunk: int | None) -> list[list[int]]:
    """``(client, n_images)`` pairs -> chunks of clients with equal ``n_images`` (at most ``chunk`` each,
    ``None``: unbounded), groups in order of first appearance, clients in their given order
    (:func:`~benchmark.federated.vectorised.chunk_clients`: equal sizes give equal batch-size schedules)."""
    return [[int(sizes[j][0]) for j in c] for c in chunk_clients([int(n) for _, n in sizes], chunk)]


# ------------------------------------------------------------------------------------------- lock-step
def _draws(
    sgd: LocalSGD, keys: Sequence[BatchKey], idxs: Sequence[np.ndarray], n: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every epoch's draws of every client of a chunk, ``(epochs, clients, n)`` dataset indices in batch order,
    crops ``(..., 2)`` and flips, from ``epoch_plan`` (so they equal the loop's), on the device."""
    rows, crops, flips = [], [], []
    epochs = sgd.epochs
    for e in range(epochs):
        for key, idx in zip(keys, idxs, strict=True):
            plan = epoch_plan(n, sgd.batch_size, sgd.streams.batches(*key, e))
            pos = torch.cat([p for p, _, _ in plan])
            rows.append(torch.as_tensor(idx, dtype=torch.int64)[pos])
            crops.append(torch.cat([c for _, c, _ in plan]))
            flips.append(torch.cat([f for _, _, f in plan]))
    c = len(keys)
    return (
        torch.stack(rows).view(epochs, c, n).to(device),
        torch.stack(crops).view(epochs, c, n, 2).to(device),
        torch.stack(flips).view(epochs, c, n).to(device),
    )


def lockstep_sgd(
    model: nn.Module,
    data: DeviceImages,
    starts: Sequence[State],
    idxs: Sequence[np.ndarray],
    sgd: LocalSGD,
    keys: Sequence[BatchKey],
    prox: tuple[float, State] | None = None,
) -> tuple[list[State], list[float]]:
    """:func:`~benchmark.pfl.local.sgd_epochs` for several clients at once (module docstring): client ``j``
    starts from ``starts[j]`` (a state of ``model``, never mutated), trains on ``data`` rows ``idxs[j]``
    (all of one length) with the batches keyed by ``keys[j]``. Returns each client's final state (fresh
    tensors, the model's ``state_dict`` order) and its mean batch loss."""
    reason = model_reason(model)
    if reason:
        raise ConfigError(f"lock-step SGD: {reason}", "train these clients with sgd_epochs (the loop)")
    c = len(starts)
    if not c or len(idxs) != c or len(keys) != c:
        raise ConfigError(
            f"lock-step SGD: {c} starts, {len(idxs)} index sets, {len(keys)} keys",
            "give one start state, index set and key per client",
        )
    n = len(idxs[0])
    if any(len(i) != n for i in idxs):
        raise ConfigError("lock-step SGD: clients of unequal sizes", "group clients by size (size_chunks)")
    names = [k for k, _ in model.named_parameters()]
    if n == 0:  # sgd_epochs: no batch, the state unchanged, a nan loss
        return [{k: s[k].detach().clone() for k in names} for s in starts], [float("nan")] * c
    lr_of = {k: sgd.lr_of(k) for k in names}
    trained = [k for k in names if lr_of[k] != 0.0]
    shared, stacked = split_shared([k for k in names if k not in trained], starts)
    anchor = {k: prox[1][k].detach() for k in names if k in prox[1]} if prox is not None else {}
    rule = SGDRule(sgd.momentum, sgd.weight_decay, float(prox[0]) if prox else 0.0, "loss", "foreach")
    model.train()
    lock = LockstepSGD(
        model, stack_states(starts, trained), lr_of, rule, stacked=stacked, shared=shared, anchor=anchor
    )
    rows, crops, flips = _draws(sgd, keys, idxs, n, data.images.device)
    losses = []
    for e in range(sgd.epochs):
        for s in range(0, n, sgd.batch_size):
            b = min(sgd.batch_size, n - s)
            x, y = data.train_batch(
                rows[e, :, s : s + b].reshape(-1),
                crops[e, :, s : s + b].reshape(-1, 2),
                flips[e, :, s : s + b].reshape(-1),
            )
            losses.append(lock.step(x.unflatten(0, (c, b)), y.unflatten(0, (c, b)), first=(e, s) == (0, 0)))
    means = torch.stack(losses).mean(0).tolist() if losses else [float("nan")] * c
    weights = lock.weights
    out = []
    for j, start in enumerate(starts):
        out.append({k: weights[k][j].clone() if k in weights else start[k].detach().clone() for k in names})
    return out, [float(v) for v in means]


# ----------------------------------------------------------------------------------------------- a round
def local_updates_vectorised(
    trainer: PFLTrainer, r: int, clients: Sequence[int], lr: float, chunk: int | None = None
) -> list[tuple[State, float]]:
    """The local updates of round ``r`` of the sampled ``clients`` at ``lr`` (:meth:`PFLTrainer.local_update`
    of each, in their order: its full state and mean loss), trained in lock-step chunks of ``chunk`` clients of
    equal size (``None``: every client of a size at once); the per-client loop (with a warning) where
    :func:`loop_reason` says so."""
    reason = loop_reason(trainer)
    if reason:
        warnings.warn(f"client_exec='vectorised' runs the per-client loop: {reason}", stacklevel=3)
        return [trainer.local_update(i, r, lr) for i in clients]
    sgd, prox = trainer.local_sgd(lr), trainer.prox()
    done: dict[int, tuple[State, float]] = {}
    for group in size_chunks([(i, len(trainer.split.train[i])) for i in clients], chunk):
        starts = [trainer.client_state(i) for i in group]
        idxs = [trainer.split.train[i] for i in group]
        keys = [(LOCAL, r, i) for i in group]
        states, losses = lockstep_sgd(trainer.model, trainer.train, starts, idxs, sgd, keys, prox)
        done.update(zip(group, zip(states, losses, strict=True), strict=True))
    return [done[i] for i in clients]


# ------------------------------------------------------------------------------------------ evaluation
def lockstep_accuracies(
    model: nn.Module,
    data: DeviceImages,
    test: Sequence[np.ndarray],
    states: Sequence[State],
    batch: int = 128,
    chunk: int | None = None,
) -> np.ndarray:
    """:func:`~benchmark.pfl.local.client_accuracies` of the clients with models ``states[j]`` on test
    indices ``test[j]`` (batches of ``batch`` in index order, the model in ``eval()``), clients of equal test
    size evaluated together in chunks of ``chunk``."""
    reason = model_reason(model)
    if reason:
        raise ConfigError(f"lock-step evaluation: {reason}", "use client_accuracies (the loop)")
    model.eval()
    names = [k for k, _ in model.named_parameters()]
    dev = data.images.device
    out = np.zeros(len(test))
    fwd = vmap(lambda p, q, x: functional_call(model, {**p, **q}, (x,)), in_dims=(0, None, 0))
    with torch.no_grad():
        for group in size_chunks([(j, len(t)) for j, t in enumerate(test)], chunk):
            n = len(test[group[0]])
            if n == 0:
                continue
            shared, stacked = split_shared(names, [states[j] for j in group])
            rows = torch.as_tensor(np.stack([test[j] for j in group]), dtype=torch.int64).to(dev)
            correct = torch.zeros(len(group), dtype=torch.int64, device=dev)
            for s in range(0, n, batch):
                x, y = data.test_batch(rows[:, s : s + batch].reshape(-1))
                b = min(batch, n - s)
                x, y = x.unflatten(0, (len(group), b)), y.unflatten(0, (len(group), b))
                correct += (fwd(stacked, shared, x).argmax(-1) == y).sum(1)
            out[group] = 100.0 * correct.cpu().numpy() / n
    return out


def personalise_vectorised(
    model: nn.Module,
    train: DeviceImages,
    test: DeviceImages,
    split: ClientSplit,
    states: Callable[[int], State],
    ft: FineTune,
    seed: int | PFLStreams,
    eval_batch: int = 128,
    clients: list[int] | None = None,
    chunk: int | None = 10,
) -> np.ndarray:
    """:func:`benchmark.pfl.personalise.personalise` (same arguments, same per-client accuracies up to
    rounding) with the clients' copies fine-tuned and evaluated in lock-step chunks of ``chunk`` clients of
    equal training size. Falls back to the loop (with a warning) for a model :func:`model_reason` refuses, and
    (silently: nothing is lost but speed) for FedRep's ``sequential`` fine-tuning, which has no lock-step version."""
    if ft.part == "sequential":
        return personalise(model, train, test, split, states, ft, seed, eval_batch, clients)
    reason = model_reason(model)
    ids = list(clients) if clients is not None else list(range(split.num_clients))
    if reason:
        warnings.warn(f"personalise_vectorised runs the per-client loop: {reason}", stacklevel=2)
        return personalise(model, train, test, split, states, ft, seed, eval_batch, clients)
    acc: dict[int, float] = {}
    for group in size_chunks([(i, len(split.train[i])) for i in ids], chunk):
        starts = [states(i) for i in group]
        if ft.epochs > 0:
            idxs, keys = [split.train[i] for i in group], [(FINE_TUNE, i) for i in group]
            starts, _ = lockstep_sgd(model, train, starts, idxs, ft.local_sgd(seed), keys)
        got = lockstep_accuracies(model, test, [split.test[i] for i in group], starts, eval_batch, chunk)
        acc.update(zip(group, got.tolist(), strict=True))
    return np.asarray([acc[i] for i in ids])
