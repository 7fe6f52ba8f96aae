"""Client compute in units of F, one forward pass of one sample (legate2023 App. A.2, Eq. 5-6).

A backward pass costs 2F, so full fine-tuning costs 3F per sample per local epoch (Eq. 5). Head tuning
(LP) needs no backward pass through the base, and the paper charges it F per sample (Eq. 6): the head's own
forward and backward are neglected. FedNCM is one forward pass over the data (§4: "for FedNCM the ... cost
consists only one forward pass through the data"), i.e. Eq. 6 with R = E = 1 and N_s = N.
"""

from __future__ import annotations

from benchmark.errors import ConfigError

FORWARD = 1.0  # F
BACKWARD = 2.0  # legate2023 §4: "the backward pass of a model is 2x the forward pass"


def samples_per_round(num_train: int, participation: float) -> float:
    """N_s, the samples held by the clients selected in one round, for balanced clients.

    legate2023's sharder gives every client exactly N/K samples (papers-code.md §1.2), so with a fraction
    F of the clients selected N_s = F * N (exact when F * K is an integer).
    """
    if not 0 < participation <= 1:
        raise ConfigError(f"participation must be in (0, 1], got {participation}", "e.g. 0.3 for 30 of 100")
    return participation * num_train


def legate2023_compute(
    rounds: int, local_epochs: int, samples_per_round: float, *, full_model: bool
) -> float:
    """legate2023 Eq. 5 (``full_model=True``): 3 * R * E * N_s; Eq. 6 (head tuning): R * E * N_s. In F."""
    if rounds < 0 or local_epochs < 0 or samples_per_round < 0:
        raise ConfigError(
            "rounds, local_epochs and samples_per_round must be non-negative", "check the inputs"
        )
    per_sample = FORWARD + BACKWARD if full_model else FORWARD
    return per_sample * rounds * local_epochs * samples_per_round


def fedncm_compute(num_train: int) -> float:
    """FedNCM: one forward pass of every training sample, Eq. 6 with R = E = 1 and N_s = N. In F."""
    return legate2023_compute(1, 1, float(num_train), full_model=False)


def fedncm_ft_compute(
    num_train: int, rounds: int, local_epochs: int, n_s: float, *, include_ncm_stage: bool
) -> float:
    """FedNCM+FT: the FedNCM pass (if included) plus Eq. 5 over the FT rounds. In F."""
    ft = legate2023_compute(rounds, local_epochs, n_s, full_model=True)
    return ft + (fedncm_compute(num_train) if include_ncm_stage else 0.0)
