"""Local-only training (fedbabu Tables 5, 13, 18, 19 "Local-only"; reference ``main_local.py``): every client
trains its own copy of the initial model on its own data alone, with no communication.

As the reference: each client starts from the same initial model (deep copies of ``net_glob``), one SGD
optimiser over all parameters for the whole run (lr ``cfg.lr`` 0.1, momentum 0.9, no weight decay, batch 50),
``MultiStepLR`` milestones [80, 120] (x0.1, stepped after every epoch), ``cfg.rounds`` epochs (160 in
``scripts/run_local.sh``), the client's test accuracy after every epoch, and the client's **best** epoch kept
(selection on its own test set; ``selection="last"`` keeps the last epoch). The cell value is then the clients'
accuracies of those models, as for the other algorithms' "initial" accuracy.

Departures: none intended. Batches come from the run's ``data_order/local_only`` stream keyed ``(client, epoch)`` (the reference's unseeded
DataLoader shuffle). The milestones are the reference's fixed 80/120, not fractions of the run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from benchmark.pfl.local import State, client_accuracies, clone_state, epoch_batches, sgd_step, weighted_mean
from benchmark.pfl.streams import LOCAL_ONLY
from benchmark.pfl.trainer import PFLResult, PFLTrainer, Selection

MILESTONES = (80, 120)


def train_local_only(trainer: PFLTrainer) -> PFLResult:
    """Train every (evaluated) client alone; the per-client selected models become its personal entries."""
    cfg, model, t0 = trainer.cfg, trainer.model, time.perf_counter()
    init = {k: v.clone() for k, v in trainer.init_state.items()}
    chosen: dict[int, State] = {}
    acc = np.zeros(len(trainer.eval_split()))
    history: list[dict[str, Any]] = []
    for i in range(len(acc)):
        model.load_state_dict(init)
        opt = torch.optim.SGD(
            model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(MILESTONES), gamma=0.1)
        best, best_state = -1.0, None
        for e in range(cfg.rounds):
            model.train()
            for x, y in epoch_batches(
                trainer.train, trainer.split.train[i], cfg.batch_size, cfg.streams, LOCAL_ONLY, i, e
            ):
                sgd_step(model, opt, x, y)
            sched.step()
            state = clone_state(model)
            test = (trainer.split.test[i],)
            a = client_accuracies(model, trainer.test, test, lambda _j, s=state: s, cfg.eval_batch)[0]
            if cfg.selection == "last" or a > best:
                best, best_state = a, state
        chosen[i], acc[i] = best_state, best
        history.append(
            {"round": i + 1, "client": i, "test_accuracy": float(best), "wall_s": time.perf_counter() - t0}
        )
    trainer.broadcast, trainer.personal = {}, chosen
    trainer.init_personal = init
    mean = weighted_mean(acc, trainer.eval_split())
    extra = {
        "best_round": cfg.rounds,
        "best_accuracy": mean,
        "last_accuracy": mean,
        "selection_per_client": cfg.selection,
    }
    selected = Selection(mean, cfg.rounds, {}, chosen, acc)
    return PFLResult(cfg, selected, mean, history, time.perf_counter() - t0, extra)
