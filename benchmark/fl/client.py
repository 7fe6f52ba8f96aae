"""Local training of one client: mini-batch SGD with optional momentum, weight decay and FedProx term.

Reference behaviour (legate2023 code = FLSim ``LocalOptimizerSGD``; papers-code.md §1.5): plain SGD, momentum 0,
weight decay 0, batch 64, one local epoch, samples in fixed dataset order (every round sees the same batches,
``shuffle_batch_order=False``), mean cross-entropy per batch (the last batch of an epoch may be smaller).

FedProx (Li et al. 2020, Eq. 2) adds ``(mu/2) ||w - w_global||^2`` to the local objective. As in FLSim's
``LocalOptimizerFedProx`` its gradient ``mu (w - w_global)`` is added to the update *after* the momentum
buffer, with ``w_global`` the weights received at the start of the round. legate2023 reports FedProx
(Table 3) but gives no mu and its code has none: see :data:`benchmark.fl.config.FEDPROX_DEFAULT_MU`.

One SGD step, per trainable tensor ``p`` with gradient ``g`` (the same sequence of operations is used by the
vectorised cached-feature path in :mod:`benchmark.fl.lp_features`)::

    d = g + wd * p                      # coupled weight decay (torch.optim.SGD)
    buf = d if first step else momentum * buf + d ; d = buf     # if momentum > 0
    d = d + mu * (p - p_global)         # FedProx, after momentum (FLSim order)
    p = p - lr * d
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from benchmark.federated.images import DeviceImages, to_device_index
from benchmark.federated.precision import FP32, Precision
from benchmark.federated.vectorised import SGDRule, sgd_step


def batch_schedule(
    n: int, batch_size: int, epochs: int, rng: np.random.Generator | None = None
) -> list[np.ndarray]:
    """Index arrays of the mini-batches one client runs in one round (``epochs`` passes over ``n`` samples).

    ``rng=None``: fixed dataset order every epoch (the reference); otherwise a fresh permutation per epoch
    drawn from ``rng``. Batches never straddle epochs; the last batch of an epoch holds ``n mod batch_size``
    samples when that is non-zero (FLSim/DataLoader ``drop_last=False``).
    """
    out: list[np.ndarray] = []
    for _ in range(epochs):
        order = np.arange(n, dtype=np.int64) if rng is None else rng.permutation(n).astype(np.int64)
        out.extend(order[s : s + batch_size] for s in range(0, n, batch_size))
    return out


def fetch_batch(data: Dataset, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` tensors for the samples ``idx`` of ``data``.

    Fast paths: an on-device image store (:class:`~benchmark.federated.images.DeviceImages`, e.g. an
    :class:`~benchmark.fl.image_data.ImageSet`) gathers and preprocesses the batch on its own device (``x`` comes
    back there), a ``TensorDataset`` is indexed where its tensors are; the index travels to the device without
    a host sync (:func:`~benchmark.federated.images.to_device_index`). Any other dataset is read item by item
    and stacked.
    """
    if isinstance(data, DeviceImages):
        return data.batch(idx)
    if isinstance(data, TensorDataset):
        x, y = data.tensors[0], data.tensors[1]
        return x[to_device_index(idx, x.device)], y[to_device_index(idx, y.device)]
    items = [data[int(i)] for i in idx]
    xs = torch.stack([torch.as_tensor(x) for x, _ in items])
    ys = torch.as_tensor([int(y) for _, y in items], dtype=torch.long)
    return xs, ys


@dataclass(frozen=True)
class ClientResult:
    """What a client reports besides its weights: examples processed, steps, and the summed training loss
    (``sum_batches batch_mean_loss * batch_size``, float64, left on the training device so that a round can
    add its clients' losses up without waiting for the device; :attr:`mean_loss` reads it back)."""

    num_examples: int
    num_steps: int
    loss_sum: torch.Tensor

    @property
    def mean_loss(self) -> float:
        """Example-weighted mean of the batch losses (NaN without examples). Reading it waits for the device."""
        return float(self.loss_sum.item() / self.num_examples) if self.num_examples else float("nan")


def local_sgd(
    model: nn.Module,
    params: Mapping[str, nn.Parameter],
    data: Dataset,
    schedule: Sequence[np.ndarray],
    *,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    prox_mu: float = 0.0,
    anchor: Mapping[str, torch.Tensor] | None = None,
    correction: Mapping[str, torch.Tensor] | None = None,
    device: torch.device | str = "cpu",
    precision: Precision = FP32,
) -> ClientResult:
    """Run the mini-batches ``schedule`` of ``data`` through ``model`` and update ``params`` in place.

    ``params`` are the trainable tensors (the rest of ``model`` is not touched by the update; its BatchNorm
    buffers change only if the caller put those modules in train mode). ``anchor`` holds the round's global
    values of ``params`` for the FedProx term (required when ``prox_mu > 0``). ``correction`` (by name) is added
    to each gradient before weight decay and momentum (SCAFFOLD's control-variate term ``c - c_i``; None: none). The loss is the batch-mean
    cross-entropy (legate2023 Eq. 1 with the softmax absorbed in the loss). ``precision``: the forward pass under
    its autocast on CUDA, the loss from float32 logits then (:class:`~benchmark.federated.precision.Precision`). Implements the step in the module docstring. Nothing in the loop waits for the device (the loss
    is summed there; batches of an :class:`~benchmark.fl.image_data.ImageSet` are made there).
    """
    if prox_mu > 0.0 and anchor is None:
        raise ValueError("local_sgd: prox_mu > 0 needs the round's global weights as anchor")
    names = list(params)
    tensors = [params[n] for n in names]
    rule = SGDRule(momentum, weight_decay, prox_mu, prox_at="step", kernel="per_tensor")  # FLSim's order
    moms = [torch.empty_like(t) for t in tensors] if momentum != 0.0 else []
    anchors = [anchor[n] for n in names] if prox_mu != 0.0 else []  # type: ignore[index]
    dev = torch.device(device)
    prec = precision.on(dev)
    loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
    seen = 0
    for step, idx in enumerate(schedule):
        x, y = fetch_batch(data, idx)
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        with prec.autocast_context():
            logits = model(x)
        loss = nn.functional.cross_entropy(prec.loss_logits(logits), y)
        grads = torch.autograd.grad(loss, tensors)
        with torch.no_grad():
            if correction is not None:  # SCAFFOLD: c - c_i joins the gradient before decay and momentum
                grads = tuple(g.add(correction[n]) for g, n in zip(grads, names, strict=True))
            sgd_step(tensors, list(grads), moms, anchors, lr, first=step == 0, rule=rule)
        loss_sum += loss.detach().double() * len(idx)  # stays on the device: no host sync per batch
        seen += len(idx)
    return ClientResult(num_examples=seen, num_steps=len(schedule), loss_sum=loss_sum)
