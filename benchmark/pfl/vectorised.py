"""Vectorised execution of a fedbabu round's clients: lock-step local SGD of many clients with ``torch.func``.

The per-client loop of :meth:`benchmark.pfl.trainer.PFLTrainer.train_round` trains the sampled clients one after
the other, each with batches of 50 images: on a GPU that is launch-bound (issue 12). Here a chunk of clients
keeps its weights stacked along a leading client axis and every local step of all of them is one
``torch.func.vmap(grad(loss))`` call over ``functional_call`` of the model (a convolution with per-client
weights becomes one grouped convolution; precedent: :mod:`benchmark.fl.vectorised` for legate2023's trainer).
The arithmetic of each client is that of :func:`benchmark.pfl.local.sgd_epochs` (the reference's
``models/Update.py: LocalUpdate.train``):

* the same batches: ``epoch_plan(n, batch_size, seed, r, i, e)`` of each client (its shuffle, crops and flips
  depend only on ``(seed, round, client, epoch)``, not on the order in which clients run), gathered and
  augmented by :meth:`DeviceImages.train_batch`, one image at a time, so the pixels are bit-identical;
* the same loss: batch-mean cross-entropy plus, for FedProx, ``mu/2 * sum ||w - w_broadcast||^2`` over the
  model's parameters that are broadcast (in the model's order);
* the same step as ``torch.optim.SGD`` with a **fresh** optimiser per client and round: ``d = g + wd * w``,
  momentum buffer ``= d`` at the first step then ``buf = momentum * buf + d``, ``w -= lr * buf``; the body at
  ``body_lr`` and the head at ``head_lr`` (:meth:`PFLTrainer.local_sgd`).

A parameter whose learning rate is 0 (FedBABU's head) is not differentiated at all: ``torch.optim.SGD`` adds
``-0 * buf`` to it, which leaves every finite value unchanged, so skipping the update is exact and the head
stays bit-identical to its start (the returned entries are copies of the client's start values).

Lock-step needs equal schedules: the sampled clients are grouped by their number of training images (equal
sizes give equal batch-size sequences, including a smaller last batch), in sampling order, and each group is
cut into chunks of ``chunk`` clients; every chunk is one lock-step computation (a client with a size of its
own is a chunk of one). No batch is padded (padding would change BatchNorm's batch statistics). The states
are returned in sampling order, so the server's mean stacks them in the loop's order.

What falls back to the per-client loop, with a warning naming the reason (:func:`loop_reason`): a local
procedure other than ``sgd`` (FedRep, Ditto, Per-FedAvg), a model with buffers (``bn="standard"``: running
statistics would be updated in place, which ``vmap`` cannot do per client), and a model with dropout.

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
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from benchmark.errors import ConfigError
from benchmark.federated.images import DeviceImages, epoch_plan
from benchmark.pfl.local import LocalSGD, State
from benchmark.pfl.models import is_head
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.personalise import FINE_TUNE_KEY, FineTune, personalise

if TYPE_CHECKING:
    from benchmark.pfl.trainer import PFLTrainer


# --------------------------------------------------------------------------------------------- eligibility
def model_reason(model: nn.Module) -> str | None:
    """Why ``model`` cannot run in lock-step (``None`` when it can)."""
    buffers = [n for n, _ in model.named_buffers()]
    if buffers:
        return (
            f"the model has buffers ({buffers[0]!r}: BatchNorm running statistics, bn='standard'), which "
            "vmap cannot update per client"
        )
    drop = [n for n, m in model.named_modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0]
    if drop:
        return f"the model has dropout ({drop[0]!r}), whose random stream vmap cannot reproduce per client"
    return None


def loop_reason(trainer: PFLTrainer) -> str | None:
    """Why ``trainer``'s rounds fall back to the per-client loop (``None`` when they are vectorised)."""
    if trainer.algo.procedure != "sgd":
        return f"algorithm {trainer.algo.name!r} has local procedure {trainer.algo.procedure!r}, not 'sgd'"
    return model_reason(trainer.model)


def size_chunks(sizes: Sequence[tuple[int, int]], chunk: int | None) -> list[list[int]]:
    """``(client, n_images)`` pairs -> chunks of clients with equal ``n_images`` (at most ``chunk`` each,
    ``None``: unbounded), groups in order of first appearance, clients in their given order."""
    if chunk is not None and chunk < 1:
        raise ConfigError(f"vector_chunk={chunk}", "use a positive number of clients per chunk")
    groups: dict[int, list[int]] = {}
    for client, n in sizes:
        groups.setdefault(int(n), []).append(int(client))
    out = []
    for members in groups.values():
        step = chunk or len(members)
        out += [members[s : s + step] for s in range(0, len(members), step)]
    return out


# ------------------------------------------------------------------------------------------- lock-step
def _stack_shared(names: Sequence[str], states: Sequence[State]) -> tuple[State, State]:
    """The entries ``names`` of ``states`` split into those equal for every client (one tensor, unbatched)
    and the others (stacked along a new leading client axis). One host sync at most."""
    shared: State = {}
    pending: list[tuple[str, torch.Tensor]] = []
    for n in names:
        first = states[0][n]
        if all(s[n] is first for s in states[1:]):
            shared[n] = first.detach()
        else:
            pending.append((n, torch.stack([s[n].detach() for s in states])))
    stacked: State = {}
    if pending:
        same = torch.stack([(t == t[:1]).reshape(len(t), -1).all() for _, t in pending]).tolist()
        for (n, t), eq in zip(pending, same, strict=True):
            if eq:
                shared[n] = t[0]
            else:
                stacked[n] = t
    return shared, stacked


def _draws(
    sgd: LocalSGD, keys: Sequence[tuple[int, ...]], idxs: Sequence[np.ndarray], n: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every epoch's draws of every client of a chunk, ``(epochs, clients, n)`` dataset indices in batch order,
    crops ``(..., 2)`` and flips, from ``epoch_plan`` (so they equal the loop's), on the device."""
    rows, crops, flips = [], [], []
    epochs = sgd.epochs
    for e in range(epochs):
        for key, idx in zip(keys, idxs, strict=True):
            plan = epoch_plan(n, sgd.batch_size, sgd.seed, *key, e)
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
    keys: Sequence[tuple[int, ...]],
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
    lr_of = {k: sgd.head_lr if is_head(k) else sgd.body_lr for k in names}
    trained = [k for k in names if lr_of[k] != 0.0]
    shared, stacked = _stack_shared([k for k in names if k not in trained], starts)
    weights = {k: torch.stack([s[k].detach() for s in starts]).clone() for k in trained}
    mu = float(prox[0]) if prox is not None else 0.0
    anchor = {k: prox[1][k].detach() for k in names if k in prox[1]} if prox is not None else {}

    def loss_fn(w: State, fixed: State, common: State, x: torch.Tensor, y: torch.Tensor):
        params = {**w, **fixed, **common}
        loss = F.cross_entropy(functional_call(model, params, (x,)), y)
        if anchor:
            loss = loss + mu / 2 * sum(((params[k] - a) ** 2).sum() for k, a in anchor.items())
        return loss, loss.detach()

    in_dims = (0, 0, None, 0, 0)
    step = vmap(grad(loss_fn, has_aux=True), in_dims=in_dims, randomness="error") if trained else None
    forward = vmap(loss_fn, in_dims=in_dims, randomness="error")
    model.train()
    dev = data.images.device
    rows, crops, flips = _draws(sgd, keys, idxs, n, dev)
    by_lr: dict[float, list[str]] = {}
    for k in trained:
        by_lr.setdefault(lr_of[k], []).append(k)
    bufs: dict[float, list[torch.Tensor]] = {}
    losses = []
    for e in range(sgd.epochs):
        for s in range(0, n, sgd.batch_size):
            b = min(sgd.batch_size, n - s)
            x, y = data.train_batch(
                rows[e, :, s : s + b].reshape(-1),
                crops[e, :, s : s + b].reshape(-1, 2),
                flips[e, :, s : s + b].reshape(-1),
            )
            x, y = x.unflatten(0, (c, b)), y.unflatten(0, (c, b))
            if step is None:
                with torch.no_grad():
                    loss = forward(weights, stacked, shared, x, y)[1]
                losses.append(loss)
                continue
            grads, loss = step(weights, stacked, shared, x, y)
            losses.append(loss)
            with torch.no_grad():
                for lr, ks in by_lr.items():
                    params, grad_ks = [weights[k] for k in ks], [grads[k] for k in ks]
                    _sgd_step(params, grad_ks, bufs.setdefault(lr, []), lr, sgd.momentum, sgd.weight_decay)
    means = torch.stack(losses).mean(0).tolist() if losses else [float("nan")] * c
    out = []
    for j, start in enumerate(starts):
        out.append({k: weights[k][j].clone() if k in weights else start[k].detach().clone() for k in names})
    return out, [float(v) for v in means]


def _sgd_step(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    bufs: list[torch.Tensor],
    lr: float,
    momentum: float,
    weight_decay: float,
) -> None:
    """``torch.optim.SGD``'s step (its foreach path, the default on CUDA; the same elementwise arithmetic as its
    single-tensor path) on stacked clients, in place; ``bufs`` is empty before the first step."""
    d = grads
    if weight_decay != 0.0:
        d = torch._foreach_add(d, params, alpha=weight_decay)
    if momentum != 0.0:
        if not bufs:
            bufs.extend(torch.clone(g).detach() for g in d)
        else:
            torch._foreach_mul_(bufs, momentum)
            torch._foreach_add_(bufs, d)
        d = bufs
    torch._foreach_add_(params, d, alpha=-lr)


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
        keys = [(r, i) for i in group]
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
            shared, stacked = _stack_shared(names, [states[j] for j in group])
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
    seed: int,
    eval_batch: int = 128,
    clients: list[int] | None = None,
    chunk: int | None = 10,
) -> np.ndarray:
    """:func:`benchmark.pfl.personalise.personalise` (same arguments, same per-client accuracies up to
    rounding) with the clients' copies fine-tuned and evaluated in lock-step chunks of ``chunk`` clients of
    equal training size. Falls back to the loop (with a warning) for a model :func:`model_reason` refuses."""
    reason = model_reason(model)
    ids = list(clients) if clients is not None else list(range(split.num_clients))
    if reason:
        warnings.warn(f"personalise_vectorised runs the per-client loop: {reason}", stacklevel=2)
        return personalise(model, train, test, split, states, ft, seed, eval_batch, clients)
    acc: dict[int, float] = {}
    for group in size_chunks([(i, len(split.train[i])) for i in ids], chunk):
        starts = [states(i) for i in group]
        if ft.epochs > 0:
            idxs, keys = [split.train[i] for i in group], [(FINE_TUNE_KEY, i) for i in group]
            starts, _ = lockstep_sgd(model, train, starts, idxs, ft.local_sgd(seed), keys)
        got = lockstep_accuracies(model, test, [split.test[i] for i in group], starts, eval_batch, chunk)
        acc.update(zip(group, got.tolist(), strict=True))
    return np.asarray([acc[i] for i in ids])
