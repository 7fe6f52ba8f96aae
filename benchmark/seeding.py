"""Independent, named random streams derived from one run seed.

Every source of randomness in a run gets its own stream, keyed by a *purpose* name:

* ``"partition"`` - which samples each client holds (:mod:`benchmark.data.partition`);
* ``"client_sampling"`` - which clients take part in each round;
* ``"model_init"`` - initial weights of heads and randomly initialised models;
* ``"data_order"`` - local mini-batch order and augmentation draws.

Other purposes are allowed (any non-empty string, e.g. ``"partition/test"`` or ``"noise"``); the four
above are listed in :data:`KNOWN_PURPOSES`. Streams for different purposes are statistically independent,
so changing how many numbers one consumer draws, or changing one purpose's seed through
:class:`RunSeeds` overrides, never shifts another stream. This is the failure mode behind FLSim issue #49
and FLamby #170 (see ``shared/reference/peers-and-conventions.md`` E.4), where one global RNG was shared.

Derivation (stable across numpy versions and independent of call order): a stream is the
:class:`numpy.random.SeedSequence` with ``entropy = seed`` and ``spawn_key = (h0, h1, h2, h3, *keys)``, where
``h0..h3`` are the first 16 bytes of ``sha256(purpose)`` read as four little-endian uint32 words and
``keys`` are optional non-negative integers (a client id, a round number). Spawn keys are the mechanism
``SeedSequence.spawn`` uses for children; here they are computed from the purpose *name*, not from the
order in which children are spawned, so adding a new purpose never changes an existing stream.
``SeedSequence``'s mixing function is covered by numpy's stream-compatibility policy; the
``Generator`` methods built on it (``PCG64``) may change across numpy major versions, which is why
partitions are additionally pinned by the sha256 of their indices.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

KNOWN_PURPOSES: tuple[str, ...] = ("partition", "client_sampling", "model_init", "data_order")


def check_seed(seed: object, name: str = "seed") -> int:
    """Return ``seed`` as a Python int, or raise :class:`ConfigError` naming ``name``.

    A seed must be a non-negative integer (``bool`` is rejected: ``True`` is almost always a mistake).
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ConfigError(f"{name} must be a non-negative integer, got {seed!r}", f"set {name} to e.g. 0")
    value = int(seed)
    if value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value}", f"set {name} to e.g. 0")
    return value


def _check_purpose(purpose: object) -> str:
    if not isinstance(purpose, str) or not purpose:
        raise ConfigError(
            f"random-stream purpose must be a non-empty string, got {purpose!r}",
            f"use one of {', '.join(KNOWN_PURPOSES)} or another descriptive name",
        )
    return purpose


def purpose_key(purpose: str) -> tuple[int, int, int, int]:
    """The four uint32 words (first 16 bytes of ``sha256(purpose)``, little-endian) keying a purpose."""
    digest = hashlib.sha256(_check_purpose(purpose).encode("utf-8")).digest()
    words = np.frombuffer(digest[:16], dtype="<u4")
    return (int(words[0]), int(words[1]), int(words[2]), int(words[3]))


def seed_sequence(seed: int, purpose: str, *keys: int) -> np.random.SeedSequence:
    """The :class:`numpy.random.SeedSequence` of stream ``purpose`` (optionally sub-keyed) under ``seed``.

    ``keys`` are non-negative integers that split a purpose further, e.g. ``("data_order", client_id)``
    gives each client its own batch-order stream, independent of how many other clients exist.
    """
    s = check_seed(seed)
    extra = tuple(check_seed(k, name="stream key") for k in keys)
    return np.random.SeedSequence(entropy=s, spawn_key=purpose_key(purpose) + extra)


def numpy_rng(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """A fresh ``numpy.random.Generator`` (PCG64) for stream ``purpose`` under ``seed``."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, purpose, *keys)))


def int_seed(seed: int, purpose: str, *keys: int) -> int:
    """A 63-bit integer seed for stream ``purpose``, for libraries that only take an int.

    Deterministic in ``(seed, purpose, keys)``; use it to seed ``random.Random`` or a library call,
    never to seed a global RNG.
    """
    lo, hi = seed_sequence(seed, purpose, *keys).generate_state(2, dtype=np.uint32)
    return ((int(hi) << 32) | int(lo)) & ((1 << 63) - 1)


def torch_generator(seed: int, purpose: str, *keys: int, device: str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded from stream ``purpose`` (torch is imported lazily).

    The generator is seeded with :func:`int_seed`. Its numbers are not the same as those of
    :func:`numpy_rng` for the same purpose (different algorithms); a consumer should use one or the other.
    """
    import torch  # lazy: seeding must stay importable without torch

    gen = torch.Generator(device=device)
    gen.manual_seed(int_seed(seed, purpose, *keys))
    return gen


@dataclass(frozen=True)
class RunSeeds:
    """The seeds of one run: a run seed plus optional per-purpose overrides.

    ``RunSeeds(0).rng("client_sampling")`` and ``RunSeeds(0, {"model_init": 7}).rng("client_sampling")``
    are the same stream: overriding the model seed leaves client sampling, partition and data order
    untouched. Without overrides every purpose uses the run seed (each through its own stream).
    """

    seed: int
    overrides: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seed", check_seed(self.seed))
        if not isinstance(self.overrides, Mapping):
            raise ConfigError(
                f"seed overrides must be a mapping purpose -> seed, got {type(self.overrides).__name__}",
                "e.g. {'model_init': 3}",
            )
        clean = {
            _check_purpose(p): check_seed(s, name=f"seed override for {p!r}")
            for p, s in sorted(self.overrides.items())
        }
        object.__setattr__(self, "overrides", MappingProxyType(clean))

    def __hash__(self) -> int:
        return hash((self.seed, tuple(self.overrides.items())))

    def seed_for(self, purpose: str) -> int:
        """The seed used for ``purpose``: its override if set, else the run seed."""
        return self.overrides.get(_check_purpose(purpose), self.seed)

    def rng(self, purpose: str, *keys: int) -> np.random.Generator:
        """:func:`numpy_rng` for ``purpose`` under :meth:`seed_for` ``(purpose)``."""
        return numpy_rng(self.seed_for(purpose), purpose, *keys)

    def int_seed(self, purpose: str, *keys: int) -> int:
        """:func:`int_seed` for ``purpose`` under :meth:`seed_for` ``(purpose)``."""
        return int_seed(self.seed_for(purpose), purpose, *keys)

    def torch_generator(self, purpose: str, *keys: int, device: str = "cpu") -> torch.Generator:
        """:func:`torch_generator` for ``purpose`` under :meth:`seed_for` ``(purpose)``."""
        return torch_generator(self.seed_for(purpose), purpose, *keys, device=device)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record of the seeds (for metrics rows)."""
        return {"seed": self.seed, "overrides": dict(self.overrides)}


# --------------------------------------------------------------------------------------------------
# fedbabu's integer-keyed streams (benchmark.pfl)
# --------------------------------------------------------------------------------------------------
# benchmark.pfl names a purpose for every draw (benchmark/pfl/streams.py). Its ``keyed`` scheme, used by the runs
# of up to 206 rounds (every recorded pfl run), maps a purpose to the integer keys below (client sampling
# ``(seed, 0x5A, round)``, a client's epoch ``(seed, round, client, epoch)``, the partitions ``(seed, 0x5A4D)`` /
# ``(seed, 0xD1)``): they reproduce the draws of the recorded pfl runs bit for bit. Longer runs use the named
# purposes above.


def keyed_rng(seed: int, *keys: int) -> np.random.Generator:
    """``numpy.random.default_rng([seed, *keys])``: the numpy generator of pfl's stream ``keys`` (client
    sampling, partitions) in the keyed scheme of :mod:`benchmark.pfl.streams`."""
    return np.random.default_rng([seed, *keys])


def keyed_torch_generator(seed: int, *keys: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with the first word of ``SeedSequence([seed, *keys])``: pfl's batch
    draws (shuffle, crops, flips) of one pass in the keyed scheme of :mod:`benchmark.pfl.streams`."""
    import torch  # lazy: seeding must stay importable without torch

    return torch.Generator().manual_seed(int(np.random.SeedSequence([seed, *keys]).generate_state(1)[0]))
