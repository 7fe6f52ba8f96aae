"""Every random draw of a pfl run, by purpose (issue 27: ``pfl`` through :mod:`benchmark.seeding`'s named streams).

A run's draws are: the partition (numpy), the clients of each round (numpy), the model's initial weights (torch's
global generator, as the reference builds its networks), and the batch draws of every pass over a client's
images (torch: shuffle, crop offsets, flips; :func:`benchmark.federated.images.epoch_plan`). Each pass names its
purpose and its integer keys:

=================================  ==============  ==========================================================
purpose                            keys            pass
=================================  ==============  ==========================================================
``data_order``                     r, i, e [, p]   local epoch ``e`` of client ``i`` in round ``r`` (Per-FedAvg:
                                                   its pass ``p``); FedRep's body epoch is ``e = tau``
``data_order/ditto_personal``      r, i, e         Ditto's personal pass
``data_order/fine_tune``           i, e            personalisation: fine-tuning epoch ``e`` of client ``i``
``data_order/ncm_crops``           i               the crops of the nearest-template evaluation (no shuffle)
``data_order/per_fedavg_step``     i               client ``i``'s released Per-FedAvg evaluation step (the
                                                   order of the source client's test images)
``data_order/centralised``         e               epoch ``e`` of centralised training (Table 9)
``data_order/local_only``          i, e            epoch ``e`` of client ``i`` trained alone
``client_sampling``                r               the clients of round ``r``
``partition``                      (scheme)        the shards / Dirichlet partition
``model_init``                     (none)          the initial weights
=================================  ==============  ==========================================================

Two schemes map a purpose and its keys to a generator:

* ``named``: :mod:`benchmark.seeding` (``torch_generator`` / ``numpy_rng`` of the purpose under the run seed; the
  model is built after ``torch.manual_seed(int_seed(seed, "model_init"))``). Streams of different purposes are
  independent by construction.
* ``keyed``: the integer keys the pfl runner used before this module (``SeedSequence([seed, *legacy keys])``,
  :func:`benchmark.seeding.keyed_torch_generator` / :func:`~benchmark.seeding.keyed_rng`, ``torch.manual_seed(seed)``),
  where a purpose was told apart by a leading constant (fine-tuning ``0xF7 = 247``, the nearest-template crops
  ``0xCE = 206``, ...) that a round number can equal. Two passes then share their draws: in a run of more than 206
  rounds, round 206's first local epoch of client ``i`` has the crops of its nearest-template evaluation
  (``SeedSequence`` pads a 3-word key with zeros), and round 247's epochs have the shuffle of its fine-tuning.

:func:`scheme_for` picks ``keyed`` for a run of at most :data:`KEYED_SAFE_ROUNDS` rounds, where no two passes share
a key (tested by enumerating them), and ``named`` otherwise. Every pfl run recorded before ``named`` existed (32 or 80
rounds) was made under ``keyed`` and stays bit-identical; a 320-round run (tau = 1) draws from named streams. Departure from a
single scheme: the scheme depends on the run's length. Moving every run to ``named`` is one line in
:func:`scheme_for` plus a ``NUMERICS`` bump of the pfl jobs (their records are then stale and re-run). A run started
from another training's model (LG-FedAvg after FedAvg) draws under that training's scheme
(``PFLConfig.random_streams``), since its partition is the source's: at tau = 1 its 80 rounds follow FedAvg's 320.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from benchmark.errors import ConfigError
from benchmark.seeding import (
    check_seed,
    int_seed,
    keyed_rng,
    keyed_torch_generator,
    numpy_rng,
    torch_generator,
)

LOCAL = "data_order"
DITTO_PERSONAL = "data_order/ditto_personal"
FINE_TUNE = "data_order/fine_tune"
NCM_CROPS = "data_order/ncm_crops"
PER_FEDAVG_STEP = "data_order/per_fedavg_step"
CENTRALISED = "data_order/centralised"
LOCAL_ONLY = "data_order/local_only"
CLIENT_SAMPLING = "client_sampling"
PARTITION_SHARDS = "partition"
PARTITION_DIRICHLET = "partition/dirichlet"

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

#: A pass's stream: its purpose, then its integer keys, e.g. ``(LOCAL, r, i)`` (the epoch is appended per epoch).
BatchKey = tuple  # (str, *int): tuple[str, *tuple[int, ...]]

#: The keyed scheme's integer keys of each batch purpose (after the run seed): the keys before this module.
KEYED_BATCHES: dict[str, Callable[[tuple[int, ...]], tuple[int, ...]]] = {
    LOCAL: lambda k: k,
    DITTO_PERSONAL: lambda k: (k[0], k[1], 0xD1, *k[2:]),
    FINE_TUNE: lambda k: (0xF7, *k),
    NCM_CROPS: lambda k: (0xCE, *k),
    PER_FEDAVG_STEP: lambda k: (0xFA5, *k),  # no run has 4,005 rounds
    CENTRALISED: lambda k: (0xCE17, *k),
    LOCAL_ONLY: lambda k: (0x10CA1, *k),
}
#: The keyed scheme's numpy keys (client sampling is ``(0x5A, r)``).
KEYED_NUMPY: dict[str, tuple[int, ...]] = {CLIENT_SAMPLING: (0x5A,), PARTITION_SHARDS: (0x5A4D,),
                                           PARTITION_DIRICHLET: (0xD1,)}  # fmt: skip
#: The longest run whose keyed passes are all distinct: the smallest leading constant a round number can equal
#: (``0xCE``, the nearest-template crops) is round 206.
KEYED_SAFE_ROUNDS = 206
SCHEMES = ("keyed", "named")


def scheme_for(rounds: int) -> str:
    """The stream scheme of a run of ``rounds`` rounds (module docstring): ``keyed`` up to
    :data:`KEYED_SAFE_ROUNDS`, ``named`` beyond."""
    return "keyed" if int(rounds) <= KEYED_SAFE_ROUNDS else "named"


@dataclass(frozen=True)
class PFLStreams:
    """The random streams of one pfl run: its ``seed`` and ``scheme`` (``keyed`` or ``named``)."""

    seed: int
    scheme: str = "keyed"

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", check_seed(self.seed))
        if self.scheme not in SCHEMES:
            raise ConfigError(f"random-stream scheme {self.scheme!r}", f"use one of {', '.join(SCHEMES)}")

    @classmethod
    def for_run(cls, seed: int, rounds: int) -> PFLStreams:
        return cls(seed, scheme_for(rounds))

    def batches(self, purpose: str, *keys: int) -> torch.Generator:
        """The CPU generator of one pass's batch draws (shuffle, crops, flips)."""
        if self.scheme == "named":
            return torch_generator(self.seed, purpose, *keys)
        try:
            legacy = KEYED_BATCHES[purpose]
        except KeyError:
            raise ConfigError(f"batch purpose {purpose!r} has no keyed form",
                              f"use one of {', '.join(KEYED_BATCHES)}") from None  # fmt: skip
        return keyed_torch_generator(self.seed, *legacy(tuple(int(k) for k in keys)))

    def numpy(self, purpose: str, *keys: int) -> np.random.Generator:
        """The numpy generator of ``purpose`` (client sampling, partitions)."""
        if self.scheme == "named":
            return numpy_rng(self.seed, purpose, *keys)
        if purpose not in KEYED_NUMPY:
            raise ConfigError(f"numpy purpose {purpose!r} has no keyed form", f"use one of {', '.join(KEYED_NUMPY)}")
        return keyed_rng(self.seed, *KEYED_NUMPY[purpose], *keys)

    def seed_model_init(self) -> None:
        """Seed torch's global generator for building the run's model (the reference builds its networks from it;
        nothing else in a pfl run draws from it)."""
        import torch  # lazy: the partition and the sampler need no torch

        torch.manual_seed(self.seed if self.scheme == "keyed" else int_seed(self.seed, "model_init"))

    def to_dict(self) -> dict[str, object]:
        return {"seed": self.seed, "scheme": self.scheme}


def as_streams(seed: int | PFLStreams) -> PFLStreams:
    """A run's streams as given, or a bare seed's ``keyed`` streams (reduced runs, tests and figures that name a
    seed: the draws every pfl function made before the named scheme)."""
    return seed if isinstance(seed, PFLStreams) else PFLStreams(int(seed), "keyed")
