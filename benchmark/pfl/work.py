"""How many images one sampled client passes forward and backward in a round, by local procedure: the unit of a
pfl training's time estimate (:func:`benchmark.runners.pfl.pfl_job_seconds`). Torch-free, for the planner.

FedAvg's local update (``sgd``: fedbabu Algorithm 1, the reference's ``LocalUpdate.train``) passes each of the
client's ``n`` images once per local epoch, ``tau x n`` in a round; the other procedures (:mod:`benchmark.pfl.procedures`)
pass more or fewer:

* ``ditto``, ``ditto_reference``: the global model's ``tau`` epochs, then the personal model's ``tau``: ``2 tau n``;
* ``fedrep``: ``tau`` epochs of the head (the body's gradient is computed too, at lr 0), then one of the body:
  ``(tau + 1) n``;
* ``per_fedavg``, ``per_fedavg_beta_lr``: per local epoch, :func:`meta_steps` meta-steps of two batches each:
  ``tau x meta_steps x 2B``. With fedbabu's ``n = 500``, ``B = 50`` that is 2.2 / 0.6 / 0.4 times FedAvg's at
  ``tau = 1 / 4 / 10``.

Departure: a head-only or body-only epoch is counted as a whole pass (its backward skips no layer's input
gradient in these networks, only parameter gradients), and a last partial batch as full-size.
"""

from __future__ import annotations

import math

#: fedbabu's local batch size (App. A.2: B = 50), the reference's ``--local_bs``.
BATCH_SIZE = 50


def meta_steps(n: int, batch_size: int, epochs: int) -> int:
    """Per-FedAvg's meta-steps per local epoch for a client with ``n`` images: the reference's ``num_iter``,
    ``int(len(loader) / local_ep) + 1``."""
    return int(math.ceil(n / batch_size) / epochs) + 1


def local_passes(procedure: str, n: int, epochs: int, batch_size: int = BATCH_SIZE) -> int:
    """Images a sampled client passes forward and backward in one round of ``procedure`` (module docstring),
    with ``n`` training images, ``epochs`` local epochs (``tau``) and batches of ``batch_size``."""
    if procedure in ("ditto", "ditto_reference"):
        return 2 * epochs * n
    if procedure == "fedrep":
        return (epochs + 1) * n
    if procedure in ("per_fedavg", "per_fedavg_beta_lr"):
        return epochs * meta_steps(n, batch_size, epochs) * 2 * batch_size
    return epochs * n  # sgd (FedAvg, FedBABU, FedPer, LG-FedAvg, FedProx), centralised, local-only
