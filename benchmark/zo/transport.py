"""The simulated network of a federated run: every message is encoded to bytes, and the bytes are counted.

bernier2024 §4.1.1 and Eq. 6 count FedMeZO's traffic as numbers: per round and client one seed (down), num_z
projected gradients (up) and their average (down), "1 byte each" (§4.2.1: "8-bit numbers for the random
seeds and gradient directions"), i.e. ``K + 2·K·num_z`` bytes per round. The simulation here sends what it
really needs: the seed as an unsigned integer of ``seed_bytes`` and each scalar in ``scalar_dtype``
(float64 by default, so the server's average is exactly the centralised one). Both are recorded: the
*numbers* sent (which Eq. 6 counts) and the *bytes* on this wire. :func:`eq6_bytes_per_round` is the
thesis's arithmetic, :meth:`Transport.totals` the measurement.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from benchmark.errors import ConfigError

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

    def encode_tensor(self, array: np.ndarray) -> bytes:
        """A model's parameters (DistMeZO, SLoRA): raw bytes in their own dtype."""
        return np.ascontiguousarray(array).tobytes()


@dataclass
class RoundTraffic:
    """One round's messages: bytes and numbers (seeds, scalars or parameters) in each direction."""

    round: int
    uplink_bytes: int = 0
    downlink_bytes: int = 0
    uplink_numbers: int = 0
    downlink_numbers: int = 0
    messages: int = 0


@dataclass
class Transport:
    """Counts what :meth:`down` and :meth:`up` carry; a payload is returned as received (bytes in, bytes out)."""

    wire: WireFormat = field(default_factory=WireFormat)
    rounds: list[RoundTraffic] = field(default_factory=list)

    def begin_round(self, round_index: int) -> None:
        self.rounds.append(RoundTraffic(round_index))

    def _current(self) -> RoundTraffic:
        if not self.rounds:
            raise ConfigError("a message was sent outside a round", "call Transport.begin_round first")
        return self.rounds[-1]

    def down(self, payload: bytes, numbers: int) -> bytes:
        r = self._current()
        r.downlink_bytes += len(payload)
        r.downlink_numbers += numbers
        r.messages += 1
        return bytes(payload)

    def up(self, payload: bytes, numbers: int) -> bytes:
        r = self._current()
        r.uplink_bytes += len(payload)
        r.uplink_numbers += numbers
        r.messages += 1
        return bytes(payload)

    def totals(self) -> RoundTraffic:
        out = RoundTraffic(len(self.rounds))
        for r in self.rounds:
            out.uplink_bytes += r.uplink_bytes
            out.downlink_bytes += r.downlink_bytes
            out.uplink_numbers += r.uplink_numbers
            out.downlink_numbers += r.downlink_numbers
            out.messages += r.messages
        return out


def eq6_bytes_per_round(clients: int, num_z: int) -> int:
    """bernier2024 Eq. 6 per round, in bytes (one byte per number): ``K + 2·K·num_z``."""
    return clients + 2 * clients * num_z


def fedmezo_wire_bytes_per_round(clients: int, num_z: int, wire: WireFormat) -> int:
    """What :func:`benchmark.zo.fedmezo.run_fedmezo` sends per round on ``wire`` with every client holding
    data: K seeds down, K·num_z scalars up, K·num_z averaged scalars down."""
    scalar = np.dtype(wire.scalar_dtype).itemsize
    return clients * wire.seed_bytes + 2 * clients * num_z * scalar
