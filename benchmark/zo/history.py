"""What a zeroth-order run records: one :class:`ZORound` per round and a :class:`ZORunResult` at the end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from torch import nn

from benchmark.zo.text_model import TextTensors, accuracy
from benchmark.zo.transport import RoundTraffic

#: ``progress(round, rounds, last)``: called after every round (``last`` is that round's record).
Progress = Callable[[int, int, "ZORound"], None]


@dataclass
class ZORound:
    """One round: its seed, the (averaged) projected gradients, the training loss (MeZO's loss1, averaged
    over the clients by size), the test accuracy when evaluated, and the round's traffic."""

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
    traffic: RoundTraffic
    params_sha256: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best_accuracy(self) -> float | None:
        seen = [r.test_accuracy for r in self.rounds if r.test_accuracy is not None]
        if self.final_accuracy is not None:
            seen.append(self.final_accuracy)
        return max(seen) if seen else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["best_accuracy"] = self.best_accuracy
        return out


def evaluate_every(
    model: nn.Module, test: TextTensors | None, round_index: int, rounds: int, every: int, chunk: int
) -> float | None:
    """Test accuracy after round ``round_index`` (0-based) when it is a multiple of ``every`` rounds or the
    last round; None otherwise (or without a test set, or ``every`` 0)."""
    if test is None or every <= 0:
        return None
    done = round_index + 1
    if done % every == 0 or done == rounds:
        return accuracy(model, test, chunk)
    return None
