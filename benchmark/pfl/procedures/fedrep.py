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
``full``/``body``). Batches: head epoch ``e`` comes from the run's ``data_order`` stream keyed ``(r, i, e)`` (as
FedAvg's epoch ``e``), the body epoch from ``(r, i, tau)`` (:mod:`benchmark.pfl.streams`).

Departures and notes:

* The reference's ``scripts/run_fedrep.sh`` passes no ``--momentum``, so its FedRep ran with ``options.py``'s
  default **0.5** (the FedAvg/FedBABU/FedPer scripts pass 0.9). Here the momentum is ``cfg.momentum``: set
  ``momentum=0.5`` in a FedRep cell to reproduce the reference.
* The reference evaluates every round after running one more FedRep update of *every* client from the new body
  (its "fine-tuning", at the round's decayed lr, rolled back after the evaluation) and keeps the best round on the
  test sets. The trainer evaluates the clients' models as they are (broadcast body + own head). fedbabu's
  Algorithm 2 (App. A.4, lines 17 and 20-21) personalises FedRep the same way (``tau_f`` head epochs, then one
  body epoch): :func:`fedrep_update` is also that fine-tuning (:func:`benchmark.pfl.personalise.personalise` with
  ``part="sequential"``, the tables' default; ``pfl_fedrep_finetune: joint`` fine-tunes both parts together).
* The reference's update returns no loss; here it is the mean over both phases' batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from benchmark.federated.images import DeviceImages
from benchmark.pfl.local import LocalSGD, State, clone_state, epoch_batches, mean_loss, sgd_step
from benchmark.pfl.parts import is_head
from benchmark.pfl.streams import LOCAL, BatchKey

if TYPE_CHECKING:
    from benchmark.pfl.trainer import PFLTrainer


def fedrep_update(
    model: torch.nn.Module,
    data: DeviceImages,
    idx: np.ndarray,
    sgd: LocalSGD,
    key: BatchKey,
    body_epochs: int = 1,
) -> float:
    """``sgd.epochs`` epochs on the head at ``sgd.head_lr`` (body lr 0), then ``body_epochs`` on the body at
    ``sgd.body_lr`` (head lr 0), one SGD optimiser throughout (module docstring). Returns the mean loss."""
    model.train()
    body = [p for n, p in model.named_parameters() if not is_head(n)]
    head = [p for n, p in model.named_parameters() if is_head(n)]
    groups = [{"params": body, "lr": 0.0}, {"params": head, "lr": sgd.head_lr}]
    opt = torch.optim.SGD(groups, momentum=sgd.momentum, weight_decay=sgd.weight_decay)
    losses = []
    for e in range(sgd.epochs + body_epochs):
        if e == sgd.epochs:
            opt.param_groups[0]["lr"], opt.param_groups[1]["lr"] = sgd.body_lr, 0.0
        losses += [
            sgd_step(model, opt, x, y)
            for x, y in epoch_batches(data, idx, sgd.batch_size, sgd.streams, *key, e)
        ]
    return mean_loss(losses)


def fedrep(trainer: PFLTrainer, i: int, r: int, lr: float) -> tuple[State, float]:
    """Client ``i``'s FedRep update in round ``r``: its full state after it, and the mean loss."""
    trainer.model.load_state_dict(trainer.client_state(i))
    loss = fedrep_update(
        trainer.model, trainer.train, trainer.split.train[i], trainer.cfg.local_sgd(lr, lr), (LOCAL, r, i)
    )
    return clone_state(trainer.model), loss
