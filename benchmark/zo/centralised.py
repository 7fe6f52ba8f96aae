"""Centralised MeZO (Malladi et al. 2023) with gradient accumulation: the reference FedMeZO must equal.

bernier2024 §4.1.2: "FedMeZO's gradient projection step is equivalent to running MeZO for multiple batches
and accumulating the projected gradient for a number of batches equal to the number of clients". Each step
here takes the same seeds as FedMeZO's rounds (:func:`benchmark.zo.fedmezo.round_seeds`), evaluates every
batch under each perturbation, accumulates the projected gradients weighted by batch size, and updates once.
With the clients' datasets as the batches this is FedMeZO without a network, bit for bit
(``tests/test_zo_fedmezo.py``); with one batch (the union) it is plain full-batch MeZO, equal up to the
summation order of the loss.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from benchmark.zo.fedmezo import FedMeZOConfig, round_seeds
from benchmark.zo.history import Progress, ZORound, ZORunResult, evaluate_every
from benchmark.zo.mezo import (
    apply_update_,
    parameters_sha256,
    projected_gradients,
    trainable_parameters,
    weighted_average,
)
from benchmark.zo.text_model import TextTensors, accuracy
from benchmark.zo.transport import RoundTraffic


def run_mezo(
    model: nn.Module,
    batches: Sequence[TextTensors],
    config: FedMeZOConfig,
    test: TextTensors | None = None,
    *,
    progress: Progress | None = None,
) -> ZORunResult:
    """``config.rounds`` MeZO steps on ``model`` in place, each accumulating over all of ``batches``."""
    zo = config.zo
    batches = [b for b in batches if len(b)]
    sizes = [len(b) for b in batches]
    weights = sizes if config.weighting == "size" else [1.0] * len(batches)
    params = trainable_parameters(model)
    initial = accuracy(model, test, zo.chunk) if test is not None and config.eval_every > 0 else None
    records = []
    for r, seed in enumerate(round_seeds(config.seed, config.rounds)):
        proj = projected_gradients(model, batches, seed, zo, params)
        average = weighted_average(proj.grads, weights)
        apply_update_(params, seed, average, zo)
        loss = sum(n * float(row.mean()) for n, row in zip(sizes, proj.plus, strict=True)) / sum(sizes)
        rec = ZORound(
            r, seed, tuple(float(x) for x in average), loss,
            evaluate_every(model, test, r, config.rounds, config.eval_every, zo.chunk),
        )  # fmt: skip
        records.append(rec)
        if progress is not None:
            progress(r + 1, config.rounds, rec)
    final = next((x.test_accuracy for x in reversed(records) if x.test_accuracy is not None), None)
    return ZORunResult(
        "mezo", records, initial, final, RoundTraffic(config.rounds), parameters_sha256(model),
        {"batch_sizes": sizes},
    )  # fmt: skip
