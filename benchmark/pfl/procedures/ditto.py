"""Ditto (Li et al., "Ditto: Fair and Robust Federated Learning Through Personalization", ICML 2021, Algorithm 1)
with the constants of fedbabu's reference (``main_ditto.py``, ``models/Update.py: LocalUpdateDitto``; fedbabu
App. A.3: lambda = 0.75).

A sampled client ``i`` in round ``r`` (at the round's lr ``eta``):

1. **global**: FedAvg's local update of the broadcast ``w`` -- ``tau`` epochs of SGD (momentum ``cfg.momentum``,
   no weight decay; the reference's ``LocalUpdateDitto.train`` without ``w_ditto``), giving ``w_i``; batches
   keyed ``(seed, r, i, e)`` as FedAvg's;
2. **personal**: its own model ``v_i`` trained ``tau`` epochs by SGD on the cross-entropy, each step followed by
   the reference's proximal step ``v <- v - eta * lambda * (v_before - w_i)`` -- a gradient step of
   ``lambda/2 ||v - w_i||^2`` at the pre-step point, outside the momentum, on every floating-point state entry
   (parameters and float buffers; the reference also shifts the integer ``num_batches_tracked``, skipped here);
   batches from the run's ``data_order/ditto_personal`` stream keyed ``(r, i, e)`` (the reference re-iterates the same shuffled ``DataLoader``);
3. the server averages the ``w_i`` (the trainer; algorithm ``ditto``: ``full``/``full``).

The personal model is kept per client across rounds in ``trainer.personal[i]`` -- a **full** state dict, which
the trainer overlays on the broadcast (``client_state``), so every evaluation of client ``i`` (each round's, the
selected model's ``initial`` and its fine-tuning) uses ``v_i``, as the reference evaluates ``net_local_list``; the
trainer checkpoints and snapshots it with the other personal entries. A client that has never been sampled has
no ``v_i`` and is evaluated with the global model; its ``v_i`` starts from the broadcast of its first round.

Departures from the Ditto paper (all as the reference and the FedRep repository's Ditto it derives from): the
anchor of the proximal step is the client's *updated* global model ``w_i`` (the paper: the round's ``w``);
the proximal step is applied after the SGD step rather than inside its gradient; lambda 0.75.

``ditto_reference`` runs ``main_ditto.py`` **as written**, which departs from Ditto further (registered
separately, so a table can use either): (a) both trainings use the *initial* lr ``cfg.lr`` every round (it passes
``args.lr``; the decayed ``lr`` is never used); (b) after every round every client's personal model is reset to
the new global (its "rollback global model" loop), so ``v_i`` restarts from the broadcast each round and a client
not sampled this round is evaluated with the round-start global; (c) the server averages the **personal** models
``v_i`` (``w_locals`` holds the second ``train``'s output), the ``w_i`` serve only as anchors.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch

from benchmark.federated.images import DeviceImages
from benchmark.pfl.local import LocalSGD, State, clone_state, epoch_batches, mean_loss, sgd_epochs, sgd_step
from benchmark.pfl.streams import DITTO_PERSONAL, LOCAL, BatchKey

if TYPE_CHECKING:
    from benchmark.pfl.trainer import PFLTrainer



@dataclass(frozen=True)
class DittoOptions:
    """``lam``: the proximal weight (fedbabu App. A.3: 0.75); ``reference``: ``main_ditto.py`` as written
    (module docstring, (a)-(c))."""

    lam: float = 0.75
    reference: bool = False


def personal_update(
    model: torch.nn.Module,
    data: DeviceImages,
    idx: np.ndarray,
    sgd: LocalSGD,
    key: BatchKey,
    *,
    anchor: State,
    lam: float,
) -> float:
    """Ditto's personal update (``LocalUpdateDitto.train`` with ``w_ditto``): SGD steps at ``sgd.body_lr``, each
    followed by ``v <- v - lr * lam * (v_before - anchor)`` on the floating-point entries. Returns the mean
    loss."""
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=sgd.body_lr, momentum=sgd.momentum)
    live = model.state_dict()  # shares storage with the parameters and buffers
    floats = [k for k, v in live.items() if v.is_floating_point()]
    coef = sgd.body_lr * lam
    losses = []
    for e in range(sgd.epochs):
        for x, y in epoch_batches(data, idx, sgd.batch_size, sgd.streams, *key, e):
            before = [live[k].detach().clone() for k in floats]
            losses.append(sgd_step(model, opt, x, y))
            with torch.no_grad():
                for k, v0 in zip(floats, before, strict=True):
                    live[k].copy_(live[k] - coef * (v0 - anchor[k]))
    return mean_loss(losses)


def reset_personal(trainer: PFLTrainer, r: int) -> None:
    """``main_ditto.py``'s rollback: every client's model is the round-start global (shared, not copied)."""
    trainer.personal = {j: trainer.broadcast for j in range(trainer.cfg.clients)}


def ditto(
    trainer: PFLTrainer, i: int, r: int, lr: float, opts: DittoOptions = DittoOptions()
) -> tuple[State, float]:
    """Client ``i``'s Ditto update in round ``r``: the state to aggregate (``w_i``; ``v_i`` for the reference
    variant) and the personal pass's mean loss; ``v_i`` is stored in ``trainer.personal[i]``."""
    cfg, model, idx = trainer.cfg, trainer.model, trainer.split.train[i]
    eta = cfg.lr if opts.reference else lr
    sgd = cfg.local_sgd(eta, eta, weight_decay=0.0)
    model.load_state_dict(trainer.broadcast)
    sgd_epochs(model, trainer.train, idx, sgd, (LOCAL, r, i))
    w_i = clone_state(model)
    model.load_state_dict(trainer.personal.get(i, trainer.broadcast))
    loss = personal_update(model, trainer.train, idx, sgd, (DITTO_PERSONAL, r, i), anchor=w_i, lam=opts.lam)
    v_i = clone_state(model)
    trainer.personal[i] = v_i
    return (v_i if opts.reference else w_i), loss


ditto_reference = partial(ditto, opts=DittoOptions(reference=True))
