"""What a zeroth-order run keeps beyond the engine's history: the seed log, and the rows its record writes.

The round loop (:func:`benchmark.federated.loop.run_rounds`) records every run as
:class:`~benchmark.federated.history.RoundRecord` rows with cumulative costs. A zo run adds its
:class:`LogEntry` per round (FedMeZO: the seed and the averaged projected gradients; with the initial model
the log *is* the model), and its record (``benchmark/zo/run.py``) keeps the per-round shape it always had
(:class:`ZORound`, the round's own bytes rather than cumulative ones), so that the recorded runs in runs/
stay readable: :func:`zo_result` writes that shape from the engine's history.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.federated.history import RoundRecord
from benchmark.federated.loop import LoopResult
from benchmark.zo.transport import Traffic


@dataclass(frozen=True)
class LogEntry:
    """What round ``round`` changed: its seed and the averaged projected gradients (num_z)."""

    round: int
    seed: int
    average: tuple[float, ...]


@dataclass
class ZORound:
    """One round as the record writes it: its seed, the (averaged) projected gradients, the training loss
    (MeZO's loss1, averaged over the clients by size), the test accuracy (%) when evaluated, and the round's
    wire bytes (seed -1 and no projections where the run has no log: DistMeZO)."""

    round: int
    seed: int
    projected: tuple[float, ...]
    train_loss: float
    test_accuracy: float | None = None
    uplink_bytes: int = 0
    downlink_bytes: int = 0


@dataclass
class ZORunResult:
    """A finished run: per-round records, the accuracy before training and after the last round, traffic
    totals, and the sha256 of the final parameters."""

    method: str
    rounds: list[ZORound]
    initial_accuracy: float | None
    final_accuracy: float | None
    traffic: Traffic
    params_sha256: str
    extra: dict[str, Any] = field(default_factory=dict)
    log: list[LogEntry] = field(default_factory=list)

    @property
    def best_accuracy(self) -> float | None:
        """The best evaluated accuracy after a round (the initial model's is not counted)."""
        seen = [r.test_accuracy for r in self.rounds if r.test_accuracy is not None]
        return max(seen) if seen else None


def accuracy_or_none(value: float) -> float | None:
    """A row's accuracy as the record writes it: ``None`` where the round was not evaluated (NaN)."""
    return None if math.isnan(value) else value


def zo_rounds(history: Sequence[RoundRecord], log: Sequence[LogEntry]) -> list[ZORound]:
    """The record's rows from the engine's history (rows after round 0, with ``log[i]`` for the i-th)."""
    out: list[ZORound] = []
    up = down = 0
    for i, row in enumerate(r for r in history if r.round > 0):
        entry = log[i] if log else LogEntry(row.round - 1, -1, ())
        out.append(
            ZORound(
                row.round - 1,
                entry.seed,
                entry.average,
                row.train_loss,
                accuracy_or_none(row.test_acc),
                (row.uplink_bytes_measured or 0) - up,
                (row.downlink_bytes_measured or 0) - down,
            )
        )
        up, down = row.uplink_bytes_measured or 0, row.downlink_bytes_measured or 0
    return out


def zo_result(
    method: str, out: LoopResult, log: Sequence[LogEntry], params_sha256: str, extra: dict[str, Any]
) -> ZORunResult:
    """The :class:`ZORunResult` of a run of the round loop (its row 0, when present, is the initial model)."""
    rounds = zo_rounds(out.history, log)
    initial = next((accuracy_or_none(r.test_acc) for r in out.history if r.round == 0), None)
    final = next((r.test_accuracy for r in reversed(rounds) if r.test_accuracy is not None), None)
    traffic = Traffic.from_costs(out.costs)
    return ZORunResult(method, rounds, initial, final, traffic, params_sha256, extra, list(log))
