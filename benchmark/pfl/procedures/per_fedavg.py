"""Per-FedAvg (Fallah et al., "Personalized Federated Learning with Theoretical Guarantees: A Model-Agnostic
Meta-Learning Approach", NeurIPS 2020), first-order (FO) version, as fedbabu's reference runs it
(``models/Update.py: LocalUpdatePerFedAvg.train``, ``main_per_fedavg.py``; fedbabu App. A.3).

A sampled client starts from the broadcast and, for each of ``tau`` local epochs, takes
``int(ceil(n/B) / tau) + 1`` meta-steps (the reference's ``num_iter``; its ``== 0`` test is never true for a
client with data), each on two fresh batches of its augmented training data:

1. keep ``theta``; one SGD step at the round's lr ``alpha`` on batch ``D`` -> ``theta'``;
2. the gradient at ``theta'`` on the next batch ``D'``; the parameters are restored to ``theta`` and the *same*
   optimiser steps at lr ``beta`` with that gradient (FO-MAML). One SGD (``momentum = cfg.momentum``; the
   reference's 0.9, no weight decay) serves both steps, so its momentum buffer mixes the two steps' gradients,
   as in the reference. Only parameters are restored (buffers of running-statistics BN keep both passes'
   updates, as the reference).

Batches come from a stream per local epoch (the run's ``data_order`` stream keyed ``(r, i, e, p)`` for its pass ``p``): the reference
re-creates its ``DataLoader`` iterator at each local epoch and whenever it runs out (a fresh shuffle). The
loss reported is the mean of the step-2 losses (the reference's ``batch_loss``). The server averages the full
model (algorithm ``per_fedavg``: ``full``/``full``).

``beta``: the reference passes ``beta=0.1`` every round (``main_per_fedavg.py``); fedbabu App. A.3 says "the beta
value was set as the learning rate value corresponding to the communication round" -- equal until the first lr
decay. ``per_fedavg`` is the reference (0.1); ``per_fedavg_beta_lr`` follows the paper's sentence (beta = the
round's lr).

Not copied: the reference's per-round evaluation first takes ``one_sgd_step`` (an lr step and a beta step, no
restore) for every client on the **test** data of ``dict_users_test[idx]`` with the **stale** ``idx`` (the last
client of the training loop), and its optional fine-tuning (``--fine_tuning``, unused by
``scripts/run_per_fedavg.sh``) uses the same stale ``idx`` (papers-code.md §4). The trainer evaluates the global
model on each client's test set; fedbabu's fine-tuning for personalisation is the personalisation stage's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.federated.images import DeviceImages
from benchmark.pfl.local import LocalSGD, State, batch_stream, clone_state, mean_loss, sgd_step
from benchmark.pfl.streams import LOCAL, BatchKey
from benchmark.pfl.work import meta_steps

if TYPE_CHECKING:
    from benchmark.pfl.trainer import PFLTrainer


@dataclass(frozen=True)
class PerFedAvgOptions:
    """``beta``: the meta-step's lr; ``None`` = the round's lr (fedbabu App. A.3); the reference passes 0.1."""

    beta: float | None = 0.1

    def beta_at(self, lr: float) -> float:
        """The meta-step lr in a round whose lr is ``lr``."""
        return lr if self.beta is None else self.beta


def per_fedavg_update(
    model: torch.nn.Module,
    data: DeviceImages,
    idx: np.ndarray,
    sgd: LocalSGD,
    key: BatchKey,
    *,
    beta: float,
) -> float:
    """First-order Per-FedAvg local update (module docstring): the inner steps at ``sgd.body_lr``, the meta-step
    at ``beta``. Returns the mean step-2 loss."""
    model.train()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=sgd.body_lr, momentum=sgd.momentum)
    group = opt.param_groups[0]
    losses = []
    for e in range(sgd.epochs):
        stream = batch_stream(data, idx, sgd.batch_size, sgd.streams, *key, e)
        for _ in range(meta_steps(len(idx), sgd.batch_size, sgd.epochs)):
            theta = [p.detach().clone() for p in params]
            group["lr"] = sgd.body_lr
            sgd_step(model, opt, *next(stream))
            group["lr"] = beta
            x, y = next(stream)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():
                for p, t in zip(params, theta, strict=True):
                    p.copy_(t)
            opt.step()
            losses.append(loss.detach())
    return mean_loss(losses)


def per_fedavg(
    trainer: PFLTrainer, i: int, r: int, lr: float, opts: PerFedAvgOptions = PerFedAvgOptions()
) -> tuple[State, float]:
    """Client ``i``'s Per-FedAvg update in round ``r``: its full state after it, and the mean step-2 loss."""
    trainer.model.load_state_dict(trainer.client_state(i))
    beta = opts.beta_at(lr)
    sgd, idx = trainer.cfg.local_sgd(lr, lr), trainer.split.train[i]
    loss = per_fedavg_update(trainer.model, trainer.train, idx, sgd, (LOCAL, r, i), beta=beta)
    return clone_state(trainer.model), loss


per_fedavg_beta_lr = partial(per_fedavg, opts=PerFedAvgOptions(beta=None))
#: Each Per-FedAvg procedure's options: the reference's beta 0.1, or the paper's beta = the round's lr.
PROCEDURE_OPTIONS = {"per_fedavg": PerFedAvgOptions(), "per_fedavg_beta_lr": PerFedAvgOptions(beta=None)}
