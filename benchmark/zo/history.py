"""What a zeroth-order run keeps beside the round loop's history: the seed log, and its record's rows.

The round loop (:func:`benchmark.federated.loop.run_rounds`) records :class:`~benchmark.federated.history.
RoundRecord` rows with cumulative costs. A zo run adds a :class:`LogEntry` per round (with the initial model
the log *is* the model), and its record keeps the rows it always had (:class:`ZORound`: the round's own
bytes), so that the recorded runs in runs/ stay readable; :func:`zo_result` writes them from the history.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.federated.history import RoundRecord
from benchmark.federated.loop import LoopResult
from benchmark.zo.transport import THESIS_NUMBER_BYTES, Traffic


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


def round_rows(history: Sequence[RoundRecord]) -> Iterator[tuple[RoundRecord, float | None, int, int]]:
    """Each row after round 0 with its accuracy as records write it (``None``: not evaluated) and the
    round's own measured up- and downlink bytes (the history's are cumulative)."""
    up = down = 0
    for row in (r for r in history if r.round > 0):
        acc = None if math.isnan(row.test_acc) else row.test_acc
        yield row, acc, (row.uplink_bytes_measured or 0) - up, (row.downlink_bytes_measured or 0) - down
        up, down = row.uplink_bytes_measured or 0, row.downlink_bytes_measured or 0


def zo_result(
    method: str, out: LoopResult, log: Sequence[LogEntry], params_sha256: str, extra: dict[str, Any]
) -> ZORunResult:
    """The :class:`ZORunResult` of a run of the round loop: the record's rows from the engine's (row 0, when
    present, is the initial model; the i-th round gets ``log[i]``, or seed -1 without a log)."""
    rows = list(round_rows(out.history))
    entries = list(log) or [LogEntry(row.round - 1, -1, ()) for row, *_ in rows]
    pairs = zip(rows, entries, strict=True)
    rounds = [ZORound(row.round - 1, e.seed, e.average, row.train_loss, *rest) for (row, *rest), e in pairs]
    initial = next((r.test_acc for r in out.history if r.round == 0 and not math.isnan(r.test_acc)), None)
    final = next((r.test_accuracy for r in reversed(rounds) if r.test_accuracy is not None), None)
    c = out.costs  # bytes: the thesis's count, numbers x 1 B; measured: the wire's (benchmark.zo.transport)
    up_numbers, down_numbers = c.uplink_bytes // THESIS_NUMBER_BYTES, c.downlink_bytes // THESIS_NUMBER_BYTES
    traffic = Traffic(c.uplink_bytes_measured or 0, c.downlink_bytes_measured or 0, up_numbers, down_numbers)
    return ZORunResult(method, rounds, initial, final, traffic, params_sha256, extra, list(log))
