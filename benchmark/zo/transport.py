"""The simulated network of a federated zo run: every message is encoded, and what it carries is counted.

bernier2024 §4.1.1 and Eq. 6 count FedMeZO's traffic as numbers: per round and client one seed (down), num_z
projected gradients (up) and their average (down), "1 byte each" (§4.2.1: "8-bit numbers for the random
seeds and gradient directions"), i.e. ``K + 2·K·num_z`` bytes per round. The simulation here sends what it
really needs: the seed as an unsigned integer of ``seed_bytes`` and each scalar in ``scalar_dtype``
(float64 by default, so the server's average is exactly the centralised one). Both are recorded: the
*numbers* sent (which Eq. 6 counts) and the *bytes* on this wire. :func:`eq6_bytes_per_round` is the
thesis's arithmetic, the :class:`Transport` the measurement.

In the one round loop (:func:`benchmark.federated.loop.run_rounds`) a round's counts are its
:class:`~benchmark.federated.history.RoundStats` (:meth:`Transport.round_stats`): the numbers as
``uplink_floats`` / ``downlink_floats`` (the plan's ``bytes_per_float`` is :data:`THESIS_NUMBER_BYTES`, so the
engine's ``Costs.uplink_bytes`` is the thesis's count) and the wire bytes as ``*_bytes_measured``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from benchmark.errors import ConfigError
from benchmark.federated.history import RoundStats, wire_bytes

_SEED_FORMATS = {4: "<I", 8: "<Q"}
SCALAR_DTYPES = ("float64", "float32")
#: The thesis's stated width of a seed or a scalar on the wire (§4.2.1), in bytes.
THESIS_NUMBER_BYTES = 1


@dataclass(frozen=True)
class WireFormat:
    """How numbers travel: seeds as ``seed_bytes``-byte unsigned ints, scalars as ``scalar_dtype``."""

    seed_bytes: int = 4
    scalar_dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.seed_bytes not in _SEED_FORMATS:
            raise ConfigError(
                f"WireFormat.seed_bytes {self.seed_bytes}", f"use one of {sorted(_SEED_FORMATS)}"
            )
        if self.scalar_dtype not in SCALAR_DTYPES:
            raise ConfigError(f"WireFormat.scalar_dtype {self.scalar_dtype!r}", f"use one of {SCALAR_DTYPES}")

    def encode_seed(self, seed: int) -> bytes:
        return struct.pack(_SEED_FORMATS[self.seed_bytes], int(seed))

    def decode_seed(self, payload: bytes) -> int:
        return int(struct.unpack(_SEED_FORMATS[self.seed_bytes], payload)[0])

    def encode_scalars(self, values) -> bytes:
        return np.ascontiguousarray(values, dtype=self.scalar_dtype).tobytes()

    def decode_scalars(self, payload: bytes) -> np.ndarray:
        return np.frombuffer(payload, dtype=self.scalar_dtype).astype(np.float64)


@dataclass(frozen=True)
class Traffic:
    """Bytes on the wire and numbers sent, in each direction (a run's totals)."""

    uplink_bytes: int = 0
    downlink_bytes: int = 0
    uplink_numbers: int = 0
    downlink_numbers: int = 0


@dataclass
class Link:
    """One direction of the wire in the current round: the bytes it carried and the numbers they hold. Each
    send hands the payload back as received (bytes in, bytes out; tensors in, detached copies out), so a
    receiver only ever sees what was sent."""

    wire: WireFormat
    bytes: int = 0
    numbers: int = 0

    def send(self, payload: bytes, numbers: int) -> bytes:
        self.bytes += len(payload)
        self.numbers += numbers
        return bytes(payload)

    def seed(self, seed: int) -> int:
        """A seed, encoded on the wire."""
        return self.wire.decode_seed(self.send(self.wire.encode_seed(seed), 1))

    def scalars(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """Scalars, encoded on the wire (float64 back)."""
        return self.wire.decode_scalars(self.send(self.wire.encode_scalars(values), len(values)))

    def tensors(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Tensors in their own dtype (:func:`~benchmark.federated.history.wire_bytes`; no framing, no
        indices: DistMeZO's model, SLoRA's messages)."""
        self.bytes += wire_bytes(tensors)
        self.numbers += sum(t.numel() for t in tensors)
        return [t.detach().clone() for t in tensors]


class Transport:
    """The simulated network of a run: :attr:`down` (server -> client) and :attr:`up` (client -> server)
    count the current round until :meth:`round_stats`."""

    def __init__(self, wire: WireFormat | None = None) -> None:
        self.wire = wire or WireFormat()
        self.down, self.up = Link(self.wire), Link(self.wire)

    def round_stats(self, num_examples: int, train_loss: float, compute_f: int) -> RoundStats:
        """The round's :class:`RoundStats` (module docstring); the links start again from zero."""
        up, down = self.up, self.down
        self.down, self.up = Link(self.wire), Link(self.wire)
        return RoundStats(num_examples, train_loss, up.numbers, down.numbers, compute_f, up.bytes, down.bytes)


def eq6_bytes_per_round(clients: int, num_z: int) -> int:
    """bernier2024 Eq. 6 per round, in bytes (one byte per number): ``K + 2·K·num_z``."""
    return clients + 2 * clients * num_z


def fedmezo_wire_bytes_per_round(clients: int, num_z: int, wire: WireFormat) -> int:
    """What :func:`benchmark.zo.fedmezo.run_fedmezo` sends per round on ``wire`` with every client holding
    data: K seeds down, K·num_z scalars up, K·num_z averaged scalars down."""
    scalar = np.dtype(wire.scalar_dtype).itemsize
    return clients * wire.seed_bytes + 2 * clients * num_z * scalar
