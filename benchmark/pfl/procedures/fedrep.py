"""FedRep (Collins et al., "Exploiting Shared Representations for Personalized Federated Learning", ICML 2021)
as fedbabu's reference runs it (``models/Update.py: LocalUpdateFedRep.train``, ``main_fedrep.py``; fedbabu
App. A.3: "the number of local epochs for head and body updates were set to tau and 1").

Each sampled client loads the broadcast body and its own head, then

1. ``tau`` epochs (``cfg.local_epochs``) on the head only: one SGD over two groups, body lr 0, head lr = the
   round's lr, momentum ``cfg.momentum``, weight decay ``cfg.weight_decay`` (the reference's ``args``);
2. **one** epoch on the body only: the **same** optimiser with the groups' lrs swapped (body lr, head 0). The body's
   momentum buffers therefore start with the gradients accumulated in step 1 (torch's SGD updates the buffer of a
   parameter whose lr is 0), as in the reference.

The body is aggregated (unweighted mean, the trainer), the head stays personal (algorithm ``fedrep``:
``full``/``body``). Batches: head epoch ``e`` is keyed ``(seed, r, i, e)`` (as FedAvg's epoch ``e``), the body
epoch ``(seed, r, i, tau)``.

Departures and notes:

* The reference's ``scripts/run_fedrep.sh`` passes no ``--momentum``, so its FedRep ran with ``options.py``'s
  default **0.5** (the FedAvg/FedBABU/FedPer scripts pass 0.9). Here the momentum is ``cfg.momentum``: set
  ``momentum=0.5`` in a FedRep cell to reproduce the reference.
* The reference evaluates every round after running one more FedRep update of *every* client from the new body
  (its "fine-tuning", at the round's decayed lr, rolled back after the evaluation). The trainer evaluates the
  clients' models as they are (broadcast body + own head). fedbabu's Algorithm 2 (App. A.4) personalises FedRep
  the same way (``tau_f`` head epochs, then one body epoch): :func:`fedrep_update` is that update, for the
  personalisation stage.
* The reference's update returns no loss; here it is the mean over both phases' batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from benchmark.pfl.data import DeviceImages
from benchmark.pfl.models import is_head
from benchmark.pfl.procedures._loop import clone_state, epoch_batches, mean_loss, require, sgd_step
from benchmark.pfl.procedures.registry import register_procedure

if TYPE_CHECKING:
    from benchmark.pfl.algorithms import Algorithm
    from benchmark.pfl.trainer import PFLConfig, PFLTrainer, State


def fedrep_update(model: torch.nn.Module, data: DeviceImages, idx: np.ndarray, *, head_epochs: int, lr: float,
                  momentum: float, weight_decay: float, batch_size: int, seed: int, keys: tuple[int, ...],
                  body_epochs: int = 1) -> float:  # fmt: skip
    """``head_epochs`` epochs on the head (body lr 0), then ``body_epochs`` on the body (head lr 0), one SGD
    optimiser throughout (module docstring). Returns the mean loss."""
    model.train()
    body = [p for n, p in model.named_parameters() if not is_head(n)]
    head = [p for n, p in model.named_parameters() if is_head(n)]
    opt = torch.optim.SGD([{"params": body, "lr": 0.0}, {"params": head, "lr": lr}],
                          momentum=momentum, weight_decay=weight_decay)  # fmt: skip
    losses = []
    for e in range(head_epochs):
        losses += [
            sgd_step(model, opt, x, y) for x, y in epoch_batches(data, idx, batch_size, seed, *keys, e)
        ]
    opt.param_groups[0]["lr"], opt.param_groups[1]["lr"] = lr, 0.0
    for b in range(body_epochs):
        batches = epoch_batches(data, idx, batch_size, seed, *keys, head_epochs + b)
        losses += [sgd_step(model, opt, x, y) for x, y in batches]
    return mean_loss(losses)


def _validate(cfg: PFLConfig, algo: Algorithm) -> None:
    require(cfg, algo, "fedrep", aggregate=("body",), weight_decay=True)


@register_procedure("fedrep", validate=_validate)
def fedrep(trainer: PFLTrainer, i: int, r: int, lr: float) -> tuple[State, float]:
    """Client ``i``'s FedRep update in round ``r``: its full state after it, and the mean loss."""
    cfg = trainer.cfg
    trainer.model.load_state_dict(trainer.client_state(i))
    loss = fedrep_update(trainer.model, trainer.train, trainer.split.train[i], head_epochs=cfg.local_epochs, lr=lr,
                         momentum=cfg.momentum, weight_decay=cfg.weight_decay, batch_size=cfg.batch_size,
                         seed=cfg.seed, keys=(r, i))  # fmt: skip
    return clone_state(trainer.model), loss
