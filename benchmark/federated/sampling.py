"""Client samplers: which clients take part in round r. A sampler is any object with ``sample(r) ->
np.ndarray`` (sorted client ids); the round loop asks it once per round, keyed by the absolute round index, so
the draw does not depend on the model seed, on other rounds, or on how clients are trained."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from benchmark.errors import ConfigError
from benchmark.seeding import RunSeeds, keyed_rng


class ClientSampler:
    """m of K clients per round, uniform without replacement, from the ``client_sampling`` stream keyed by
    the round index (FLSim's ``UniformlyRandomActiveUserSelector`` semantics, but seeded: FLSim's draw uses an
    unseeded torch RNG, papers-code.md §1.1). Full participation returns every client without drawing."""

    def __init__(self, num_clients: int, per_round: int, seeds: RunSeeds) -> None:
        if not 1 <= per_round <= num_clients:
            raise ConfigError(
                f"clients per round must be in [1, {num_clients}], got {per_round}", "check participation"
            )
        self.num_clients = int(num_clients)
        self.per_round = int(per_round)
        self.seeds = seeds

    def sample(self, round_idx: int) -> np.ndarray:
        """Sorted client ids of round ``round_idx`` (0-based)."""
        if self.per_round == self.num_clients:
            return np.arange(self.num_clients, dtype=np.int64)
        rng = self.seeds.rng("client_sampling", int(round_idx))
        return np.sort(rng.choice(self.num_clients, size=self.per_round, replace=False)).astype(np.int64)


class FedBABUSampler:
    """fedbabu's draw (reference ``main_fed.py``: ``np.random.choice(range(K), m, replace=False)``, sorted):
    ``per_round`` of ``num_clients`` clients uniformly without replacement, from
    :func:`benchmark.seeding.keyed_rng` ``(seed, SAMPLING_KEY, r)`` (the reference's draw is unseeded). It
    always draws, full participation included (the draw is then every client), as the recorded pfl runs did.
    ``rng_for_round`` (a round index -> a numpy generator) replaces that keyed draw: the pfl run's
    ``client_sampling`` stream (:class:`benchmark.pfl.streams.PFLStreams`)."""

    SAMPLING_KEY = 0x5A

    def __init__(self, num_clients: int, per_round: int, seed: int,
                 rng_for_round: Callable[[int], np.random.Generator] | None = None) -> None:  # fmt: skip
        if not 1 <= per_round <= num_clients:
            raise ConfigError(
                f"clients per round must be in [1, {num_clients}], got {per_round}", "check participation"
            )
        self.num_clients, self.per_round, self.seed = int(num_clients), int(per_round), int(seed)
        self.rng_for_round = rng_for_round

    def sample(self, round_idx: int) -> np.ndarray:
        """Sorted client ids of round ``round_idx`` (0-based)."""
        return np.sort(self.drawn(round_idx))

    def drawn(self, round_idx: int) -> np.ndarray:
        """The client ids of round ``round_idx`` in the order drawn: the order the reference's loop visits them
        (``for idx in idxs_users``), whose last one its Per-FedAvg evaluation adapts on
        (:func:`benchmark.pfl.personalise.per_fedavg_step`)."""
        if self.rng_for_round is not None:
            rng = self.rng_for_round(int(round_idx))
        else:
            rng = keyed_rng(self.seed, self.SAMPLING_KEY, int(round_idx))
        return rng.choice(self.num_clients, self.per_round, replace=False)
