"""Centralised MeZO (Malladi et al. 2023) with gradient accumulation: the reference FedMeZO must equal.

bernier2024 §4.1.2: "FedMeZO's gradient projection step is equivalent to running MeZO for multiple batches
and accumulating the projected gradient for a number of batches equal to the number of clients". Each step
here takes the same seeds as FedMeZO's rounds (:func:`benchmark.zo.fedmezo.round_seeds`), evaluates every
batch under each perturbation, accumulates the projected gradients weighted by batch size, and updates once.
With the clients' datasets as the batches this is FedMeZO without a network, bit for bit
(``tests/test_zo_fedmezo.py``); with one batch (the union) it is plain full-batch MeZO, equal up to the
summation order of the loss.

It is deliberately its own loop, not a plug-in of :func:`benchmark.federated.loop.run_rounds`: the equality
test then checks the federated engine against an independent implementation. It shares the MeZO step
(:mod:`benchmark.zo.mezo`), the seeds and the result format (:class:`~benchmark.zo.history.ZORunResult`).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from benchmark.federated.progress import RoundProgress
from benchmark.zo.fedmezo import FedMeZOConfig, round_seeds
from benchmark.zo.history import LogEntry, ZORound, ZORunResult
from benchmark.zo.mezo import (
    apply_update_,
    parameters_sha256,
    projected_gradients,
    trainable_parameters,
    weighted_average,
)
from benchmark.zo.text_model import TextTensors, accuracy
from benchmark.zo.transport import Traffic


def run_mezo(
    model: nn.Module,
    batches: Sequence[TextTensors],
    config: FedMeZOConfig,
    test: TextTensors | None = None,
    *,
    progress: bool = False,
    label: str = "mezo",
) -> ZORunResult:
    """``config.rounds`` MeZO steps on ``model`` in place, each accumulating over all of ``batches``; the
    test accuracy after every ``config.eval_every``-th step and the last (none when it is 0); ``progress``:
    shown as the round loop shows it (:class:`~benchmark.federated.progress.RoundProgress`)."""
    zo, every = config.zo, config.eval_every if test is not None else 0
    batches = [b for b in batches if len(b)]
    sizes = [len(b) for b in batches]
    weights = sizes if config.weighting == "size" else [1.0] * len(batches)
    params = trainable_parameters(model)
    initial = accuracy(model, test, zo.chunk) if every > 0 else None
    rows, log = [], []
    bar = RoundProgress(label, config.rounds, enabled=progress)
    for r, seed in enumerate(round_seeds(config.seed, config.rounds)):
        proj = projected_gradients(model, batches, seed, zo, params)
        average = weighted_average(proj.grads, weights)
        apply_update_(params, seed, average, zo)
        log.append(LogEntry(r, seed, tuple(float(x) for x in average)))
        loss = sum(n * float(row.mean()) for n, row in zip(sizes, proj.plus, strict=True)) / sum(sizes)
        evaluated = every > 0 and ((r + 1) % every == 0 or r + 1 == config.rounds)
        acc = accuracy(model, test, zo.chunk) if evaluated else None
        rows.append(ZORound(r, seed, log[-1].average, loss, acc))
        bar.set_acc(float("nan") if acc is None else acc)
        bar.round_done(r + 1)
    bar.close()
    final = next((x.test_accuracy for x in reversed(rows) if x.test_accuracy is not None), None)
    sha = parameters_sha256(model)
    return ZORunResult("mezo", rows, initial, final, Traffic(), sha, {"batch_sizes": sizes}, log)
