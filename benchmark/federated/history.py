"""One history format for every federated run: the cumulative costs, one row per round, one round's stats.

Every family's round loop is :func:`benchmark.federated.loop.run_rounds`; what it records is here. Costs follow
legate2023 App. A (Eq. 3-6): bytes on the wire, compute in F (one forward pass of one sample; a backward pass
is 2F), wall seconds. ``*_bytes_measured`` are the bytes of the tensors a trainer actually put in its payloads
(``None`` where the trainer does not measure them), next to the arithmetic counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Costs:
    """Cumulative cost counters (legate2023 App. A units: bytes, F, plus wall seconds)."""

    uplink_bytes: int = 0
    downlink_bytes: int = 0
    compute_f: int = 0
    wall_s: float = 0.0
    uplink_bytes_measured: int | None = None
    """Bytes of the uplink tensors actually sent (module docstring); ``None``: not measured."""
    downlink_bytes_measured: int | None = None

    @property
    def total_bytes(self) -> int:
        """Uplink + downlink (legate2023's "Total Comm.")."""
        return self.uplink_bytes + self.downlink_bytes


@dataclass(frozen=True)
class RoundRecord:
    """One row of a run's history. ``round`` counts completed rounds (0 = before training)."""

    round: int
    stage: str
    test_acc: float
    test_loss: float
    train_loss: float
    uplink_bytes: int
    downlink_bytes: int
    compute_f: int
    wall_s: float
    frozen_drift: float
    clients: tuple[int, ...] = ()
    uplink_bytes_measured: int | None = None
    downlink_bytes_measured: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (``clients`` as a list), as checkpoints store rows."""
        out = asdict(self)
        out["clients"] = list(self.clients)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundRecord:
        """Inverse of :meth:`as_dict`."""
        return cls(**{**d, "clients": tuple(int(c) for c in d.get("clients", ()))})


@dataclass(frozen=True)
class RoundStats:
    """What one round of local training cost and reported."""

    num_examples: int
    train_loss: float
    uplink_floats: int
    downlink_floats: int
    compute_f: int
    uplink_bytes_measured: int | None = None
    """Bytes of the uplink payload tensors of the round (all sampled clients); ``None``: not measured."""
    downlink_bytes_measured: int | None = None


def wire_bytes(
    payload: Mapping[str, torch.Tensor] | Iterable[torch.Tensor], bytes_per_float: int | None = None
) -> int:
    """Bytes of ``payload`` (named tensors, or tensors) on the wire: ``numel * bytes_per_float`` per float
    tensor, ``numel * element_size`` otherwise and for every tensor when ``bytes_per_float`` is ``None`` (the
    one count of payload bytes for every family; metadata only: no copy, no device sync)."""
    tensors = payload.values() if isinstance(payload, Mapping) else payload
    own = bytes_per_float is None
    return sum(
        t.numel() * (bytes_per_float if t.is_floating_point() and not own else t.element_size())
        for t in tensors
    )
