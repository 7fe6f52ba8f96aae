"""Choosing FedMeZO's learning rate and reported round on a validation set (issue 26, point 3).

bernier2024 tuned lr and does not state it; this suite's first CPU runs chose 4e-3 by the fall of the training
loss and reported the last round, evaluated on the test set only. Here the choice is made the way MeZO makes it
(Malladi et al. 2023 App. E: a grid over lr, the checkpoint chosen on a dev set, the test set read once):

* :func:`validation_curve`: one FedMeZO run per learning rate of the grid, ``rounds`` rounds (the step
  budget), evaluated on the validation set (:func:`benchmark.zo.data.prepare_task`'s ``val_split``: SST-2's dev
  split or MeZO's k-shot dev set, never the test set) before training and every ``val_every`` rounds; the run's
  ``(seed, average)`` log is kept, so the model at any round can be rebuilt (:func:`~benchmark.zo.fedmezo.
  replay`);
* :func:`choose`: the (lr, round) with the highest validation accuracy (ties: lower validation loss, then the
  earlier round, then the smaller lr); round 0, the FedNCM head before any zeroth-order step, is a candidate,
  so a grid whose every step hurts chooses it;
* :class:`LRSelection`: the grid, every curve, the choice and the **test accuracy at the chosen point only**
  (the selection job rebuilds the chosen model by replaying the log, then reads the test set once), and
  whether zeroth-order tuning moved at all (:attr:`LRSelection.status`): when no point beats round 0 on
  validation the cells say so with these curves instead of printing a number as the method's accuracy.

Departures from MeZO: the grid is run at a CPU-sized step budget (MeZO: 100k steps for RoBERTa-large); the
selection runs on one partition (FedMeZO's update does not depend on the partition: size-weighted, full
participation, it is MeZO on the union, ``tests/test_zo_fedmezo.py``) and is applied to both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from torch import nn

from benchmark.errors import ConfigError
from benchmark.zo.fedmezo import FedMeZOConfig, run_fedmezo
from benchmark.zo.history import LogEntry
from benchmark.zo.text_model import TextTensors, accuracy_and_loss

#: The statuses of a selection: ``improves`` (a zeroth-order point beats round 0 on validation),
#: ``no-gain`` (the curves move, none above round 0), ``flat`` (every curve equal to round 0 at every point).
STATUSES = ("improves", "no-gain", "flat")


@dataclass(frozen=True)
class ValPoint:
    """The model after ``round`` rounds (0: before training) on the validation set: accuracy (%), mean
    cross-entropy, and the training loss of that round (MeZO's loss1; ``None`` at round 0)."""

    round: int
    accuracy: float
    loss: float
    train_loss: float | None = None


@dataclass(frozen=True)
class ValCurve:
    """One learning rate of the grid: its validation points and its run's log (the model at every round)."""

    lr: float
    points: tuple[ValPoint, ...]
    log: tuple[LogEntry, ...] = ()
    wall_s: float = 0.0

    def best(self) -> ValPoint:
        return min(self.points, key=lambda p: (-p.accuracy, p.loss, p.round))


@dataclass(frozen=True)
class Choice:
    """The chosen learning rate and round, with their validation accuracy and loss."""

    lr: float
    round: int
    val_accuracy: float
    val_loss: float


@dataclass(frozen=True)
class LRSelection:
    """A grid search on validation (module docstring). ``budget``: rounds per lr, forward passes, examples."""

    method: str
    grid: tuple[float, ...]
    rounds: int
    val_every: int
    val_split: str
    val_examples: int
    curves: tuple[ValCurve, ...]
    chosen: Choice
    initial_val_accuracy: float
    status: str
    test_accuracy: float | None = None
    test_examples: int = 0
    budget: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: what ``rounds`` and a point's ``round`` count: FedMeZO rounds, or first-order steps
    unit: str = "rounds"

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ConfigError(f"LRSelection.status {self.status!r}", f"use one of {STATUSES}")

    @property
    def moved(self) -> bool:
        """Whether zeroth-order tuning improved on the initial model on validation."""
        return self.status == "improves"

    def summary(self) -> str:
        """One line: the choice, its validation gain, the test accuracy at it (or why there is none)."""
        c = self.chosen
        gain = c.val_accuracy - self.initial_val_accuracy
        head = (f"{self.method} lr chosen on {self.val_split} ({self.val_examples} examples) over "
                f"{', '.join(f'{x:g}' for x in self.grid)} at {self.rounds} {self.unit}")  # fmt: skip
        if self.status != "improves":
            return (f"{head}: no trained point beats the initial model on validation ({self.status}; initial "
                    f"{self.initial_val_accuracy:.2f})")  # fmt: skip
        test = "" if self.test_accuracy is None else f"; test at it {self.test_accuracy:.2f}"
        where = f"{self.unit.removesuffix('s')} {c.round}"
        return f"{head}: lr {c.lr:g}, {where}, validation {c.val_accuracy:.2f} ({gain:+.2f}){test}"


def validation_points(every: int, rounds: int) -> list[int]:
    """The rounds a curve is evaluated after: 0, every ``every``-th, and the last."""
    if every < 1:
        raise ConfigError(f"val_every {every}", "evaluate validation every >= 1 rounds")
    return sorted({0, *range(every, rounds + 1, every), rounds})


def validation_curve(
    model: nn.Module,
    clients: Sequence[TextTensors],
    val: TextTensors,
    config: FedMeZOConfig,
    val_every: int,
    *,
    progress: bool = False,
    label: str = "fedmezo",
    on_point: Callable[[ValPoint], None] | None = None,
) -> ValCurve:
    """Run FedMeZO (``config``: no test evaluation) from ``model`` in place, evaluating ``val`` before the first
    round and after every ``val_every``-th and the last; returns the curve with the run's log."""
    if config.eval_every:
        raise ConfigError("a validation curve with test evaluation", "set FedMeZOConfig.eval_every=0")
    start = time.time()
    due = set(validation_points(val_every, config.rounds))
    acc, loss = accuracy_and_loss(model, val, config.zo.chunk)
    points = [ValPoint(0, acc, loss)]

    def after(done: int) -> None:
        if done in due:
            points.append(ValPoint(done, *accuracy_and_loss(model, val, config.zo.chunk)))
            if on_point is not None:
                on_point(points[-1])

    result = run_fedmezo(model, clients, config, None, label=label, progress=progress, on_round_end=after)
    train = {r.round + 1: r.train_loss for r in result.rounds}  # the loss of the round that ended there
    points = [p if p.round == 0 else ValPoint(p.round, p.accuracy, p.loss, train[p.round]) for p in points]
    return ValCurve(config.zo.lr, tuple(points), tuple(result.log), time.time() - start)


def choose(curves: Sequence[ValCurve]) -> Choice:
    """The highest validation accuracy over every (lr, round); ties: lower loss, earlier round, smaller lr."""
    if not curves or not all(c.points for c in curves):
        raise ConfigError("no validation curve to choose from", "run the grid's curves first")
    key = min(
        ((-p.accuracy, p.loss, p.round, c.lr, p) for c in curves for p in c.points), key=lambda t: t[:4]
    )
    p = key[4]
    return Choice(lr=key[3], round=p.round, val_accuracy=p.accuracy, val_loss=p.loss)


def status_of(curves: Sequence[ValCurve], chosen: Choice) -> str:
    """``improves`` when the chosen point is after round 0 and above round 0's validation accuracy; ``flat``
    when every point of every curve has round 0's accuracy and loss; ``no-gain`` otherwise."""
    first = curves[0].points[0]
    if chosen.round > 0 and chosen.val_accuracy > first.accuracy:
        return "improves"
    same = all(
        p.accuracy == first.accuracy and abs(p.loss - first.loss) <= 1e-6 for c in curves for p in c.points
    )
    return "flat" if same else "no-gain"
