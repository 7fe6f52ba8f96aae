"""The one round loop of every federated family (FT/LP/Random of legate2023, fedbabu's personalised runs,
FedMeZO of bernier2024): sample, train locally and aggregate, evaluate on a cadence, count costs, record,
checkpoint, show progress.

One round r (McMahan et al. 2017 Algorithm 1; Reddi et al. 2021 Algorithm 1 for the server step):

1. ``plan.sampler.sample(r)`` draws the round's clients (:mod:`benchmark.federated.sampling`);
2. ``trainer.train_round(r, clients, lr)`` runs the local updates and the aggregation / server step (what
   differs between algorithms lives there: :class:`RoundTrainer`), with ``lr = plan.lr_at(i)`` for the i-th
   round of the stage;
3. every ``plan.eval_every`` rounds of the stage, and after its last, ``trainer.evaluate()``; then the
   trainer's ``on_evaluated`` hook (model selection that needs the weights, e.g. fedbabu's best model);
4. one :class:`~benchmark.federated.history.RoundRecord` is appended (costs cumulative), the checkpoint is
   written when due, progress is shown.

Checkpoints (:mod:`benchmark.federated.checkpoint`): with a spec, the trainer's ``state_dict()``, the history,
the costs and the global torch generators are saved every ``spec.every`` rounds and after the last, and a run
whose file exists resumes from it -- bit-identically, since everything else is keyed by the round index. A
finished stage is returned from its checkpoint without training.

A stop asked for from outside (:func:`request_stop`: a harvest's budget, :mod:`benchmark.harvest`; a SIGTERM
to ``flb job``, e.g. SLURM's at a time limit, :mod:`benchmark.cli`) ends the run at the end of the round in
progress: its checkpoint is written there, due or not, and :class:`StopRequested` is raised, so a run stopped
between its periodic checkpoints loses no finished round.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import (
    CheckpointSpec,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from benchmark.federated.history import Costs, RoundRecord, RoundStats
from benchmark.federated.progress import RoundProgress


class Sampler(Protocol):
    """Which clients take part in a round (:mod:`benchmark.federated.sampling`)."""

    def sample(self, round_idx: int) -> np.ndarray: ...


@dataclass(frozen=True)
class RoundPlan:
    """How :func:`run_rounds` runs one stage: its rounds, sampler, client-lr schedule and evaluation cadence.

    ``identity``: what a checkpoint must match to be resumed (:func:`~benchmark.federated.checkpoint.
    run_identity`). ``start_round`` numbers the stage's rounds after an earlier stage (two-stage methods):
    sampling is keyed by the absolute round, ``lr_at`` by the round within the stage. ``initial_eval``:
    evaluate (and record as round ``start_round``) before the first round.
    """

    rounds: int
    sampler: Sampler
    lr_at: Callable[[int], float]
    eval_every: int
    identity: Mapping[str, Any]
    label: str = "run"
    stage: str = ""
    start_round: int = 0
    bytes_per_float: int = 4
    progress: bool = True
    initial_eval: bool = True

    def evaluates_after(self, i: int) -> bool:
        """Whether the stage evaluates after its ``i``-th round (1-based)."""
        return i % self.eval_every == 0 or i == self.rounds


class RoundTrainer:
    """What :func:`run_rounds` needs from a training back-end; an algorithm overrides what differs.

    Required: ``num_clients``, :meth:`train_round`, :meth:`evaluate`, :meth:`state_dict`,
    :meth:`load_state_dict`. The rest has defaults. ``measures_communication``: the trainer reports measured
    payload bytes (the cumulative measured counters then start at 0 rather than ``None``).
    """

    num_clients: int
    measures_communication: bool = False
    accuracy_unit: str = "fraction"
    """The unit of :meth:`evaluate`'s accuracy and so of the history's ``test_acc``: ``fraction`` (fl, pfl) or
    ``percent`` (zo, whose records hold percent); progress always shows a fraction."""

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        """Local training of ``clients``, aggregation and the server step."""
        raise NotImplementedError

    def evaluate(self) -> tuple[float, float]:
        """Test accuracy (in :attr:`accuracy_unit`) and mean cross-entropy of the model(s) evaluated."""
        raise NotImplementedError

    def on_evaluated(self, done: int) -> None:
        """Called after each evaluation with the absolute number of completed rounds (model selection)."""

    def frozen_drift(self) -> float:
        """Largest |change| of a parameter that is not trained (NaN: every parameter is trained)."""
        return float("nan")

    def head_state(self) -> dict[str, np.ndarray]:
        """The head's tensors (numpy copies), where the run reports them."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue bit-identically (tensors, numbers, strings, lists,
        dicts only; tensors may be references to live state: serialise before the next round)."""
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (tensors arrive on the CPU)."""
        raise NotImplementedError


@dataclass
class LoopResult:
    """The stage's history (earlier stages' rows first) and cumulative costs; ``resumed_finished``: the
    stage was complete in its checkpoint and nothing ran."""

    history: list[RoundRecord]
    costs: Costs
    resumed_finished: bool = False


@dataclass(frozen=True)
class RoundLimit:
    """Stop a run early, resumable (a learning-rate search's rung, :mod:`benchmark.fl.lr_halving`): after
    ``rounds`` rounds of the stage, or at once after a round whose training loss is not finite when
    ``stop_nonfinite``. The run's checkpoint (when it has one) is written at the stop, whatever its cadence, so
    the same run continued later (without a limit) resumes there, bit for bit as if it had never stopped."""

    rounds: int | None = None
    stop_nonfinite: bool = False


class RoundLimitReached(Exception):
    """Raised by :func:`run_rounds` under :func:`round_limit` when the limit stops the run: ``rounds`` of the
    stage done, the history so far, whether the loss became non-finite (``diverged``) and the stage's
    ``start_round`` (its rows after it are its rounds)."""

    def __init__(self, rounds: int, history: list[RoundRecord], diverged: bool, start_round: int = 0) -> None:
        super().__init__(f"stopped after round {rounds}" + (" (non-finite loss)" if diverged else ""))
        self.rounds, self.history, self.diverged, self.start_round = rounds, history, diverged, start_round


_LIMIT: ContextVar[RoundLimit | None] = ContextVar("round_limit", default=None)


class StopRequested(BaseException):
    """Raised by :func:`run_rounds` at the end of a round after :func:`request_stop`: the run's checkpoint (when
    it has one) holds that round, and the same run started again resumes there, bit for bit as if it had never
    stopped. A ``BaseException``, like ``KeyboardInterrupt``: no ``except Exception`` of a job swallows it."""

    def __init__(self, rounds: int, of: int) -> None:
        super().__init__(f"stopped on request after round {rounds}/{of}")
        self.rounds = rounds


@dataclass
class _StopRequest:
    requested: bool = False
    loops: int = 0  # run_rounds calls of this process in their rounds now (in_round_loop)


_STOP = _StopRequest()


def request_stop() -> None:
    """Ask every :func:`run_rounds` of this process to stop after the round in progress (checkpoint written,
    :class:`StopRequested` raised; a loop that has not started yet stops before its first round). Safe in a
    signal handler."""
    _STOP.requested = True


def stop_requested() -> bool:
    """Whether :func:`request_stop` was called (and not cleared) in this process."""
    return _STOP.requested


def clear_stop_request() -> None:
    """Forget a :func:`request_stop` (a process that goes on to run again, e.g. a test)."""
    _STOP.requested = False


def in_round_loop() -> bool:
    """Whether a :func:`run_rounds` of this process is in its rounds now (between its first round's start and
    its last round's end): where :func:`request_stop` ends a round and writes its checkpoint. Safe in a signal
    handler (``flb job``'s SIGTERM, :mod:`benchmark.cli`)."""
    return _STOP.loops > 0


@contextmanager
def round_limit(limit: RoundLimit) -> Iterator[None]:
    """While inside, every :func:`run_rounds` stops at ``limit`` by raising :class:`RoundLimitReached`."""
    token = _LIMIT.set(limit)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def _add_measured(total: int | None, add: int | None) -> int | None:
    """Cumulative measured bytes: rounds that were not measured (``None``) add nothing."""
    if add is None:
        return total
    return (total or 0) + int(add)


def _resume(trainer: RoundTrainer, state: Mapping[str, Any], path: Path) -> None:
    try:
        trainer.load_state_dict(state["trainer"])
    except ConfigError as err:
        raise ConfigError(f"checkpoint {path}: {err.what}", err.fix or "delete it to start over") from err
    except (KeyError, RuntimeError, ValueError, TypeError, AttributeError) as err:
        raise ConfigError(
            f"checkpoint {path} does not fit this run's model ({type(err).__name__}: {err})",
            "delete it to start over",
        ) from err
    if "torch_rng" in state:
        set_rng_state(state["torch_rng"])


def _add_round(costs: Costs, stats: RoundStats, bytes_per_float: int) -> Costs:
    return Costs(
        uplink_bytes=costs.uplink_bytes + stats.uplink_floats * bytes_per_float,
        downlink_bytes=costs.downlink_bytes + stats.downlink_floats * bytes_per_float,
        compute_f=costs.compute_f + stats.compute_f,
        uplink_bytes_measured=_add_measured(costs.uplink_bytes_measured, stats.uplink_bytes_measured),
        downlink_bytes_measured=_add_measured(costs.downlink_bytes_measured, stats.downlink_bytes_measured),
    )


def _row(
    plan: RoundPlan,
    trainer: RoundTrainer,
    done: int,
    costs: Costs,
    wall: float,
    acc: float,
    loss: float,
    train_loss: float,
    clients: tuple[int, ...] = (),
) -> RoundRecord:
    return RoundRecord(
        round=done,
        stage=plan.stage,
        test_acc=acc,
        test_loss=loss,
        train_loss=train_loss,
        uplink_bytes=costs.uplink_bytes,
        downlink_bytes=costs.downlink_bytes,
        compute_f=costs.compute_f,
        wall_s=wall,
        frozen_drift=trainer.frozen_drift(),
        clients=clients,
        uplink_bytes_measured=costs.uplink_bytes_measured,
        downlink_bytes_measured=costs.downlink_bytes_measured,
    )


def run_rounds(
    trainer: RoundTrainer,
    plan: RoundPlan,
    *,
    start_costs: Costs | None = None,
    history: list[RoundRecord] | None = None,
    checkpoint: CheckpointSpec | None = None,
    on_round_end: Callable[[int], None] | None = None,
) -> LoopResult:
    """Run ``plan.rounds`` rounds of ``trainer`` (numbered from ``plan.start_round``) and record them.

    ``start_costs`` / ``history`` continue an earlier stage: costs keep accumulating and rows are appended.
    ``checkpoint``: when its file exists it must belong to this run (``plan.identity``, else
    :class:`ConfigError`) and the run continues after its last round with the trainer state, history, costs
    and torch generators it holds. ``on_round_end(r)`` is called with the absolute number of completed rounds
    after each round, once its checkpoint (if due) is on disk.
    """
    costs = start_costs or Costs()
    rows = list(history or [])
    done = 0
    resumed = False
    if checkpoint is not None and checkpoint.path.exists():
        state = load_checkpoint(checkpoint.path, plan.identity)
        _resume(trainer, state, checkpoint.path)
        rows = [RoundRecord.from_dict(d) for d in state["history"]]
        costs = Costs(**state["costs"])
        done = int(state["round"])
        resumed = True
        if plan.progress:
            print(
                f"[{plan.label}] resuming from {checkpoint.path} after round {done}/{plan.rounds}",
                file=sys.stderr,
            )
    if _STOP.requested and done < plan.rounds:  # asked for before this stage began: nothing to lose
        raise StopRequested(done, plan.rounds)
    if trainer.measures_communication:
        costs = replace(
            costs,
            uplink_bytes_measured=costs.uplink_bytes_measured or 0,
            downlink_bytes_measured=costs.downlink_bytes_measured or 0,
        )
    t0 = time.perf_counter() - costs.wall_s
    if not resumed and plan.initial_eval:
        acc, loss = trainer.evaluate()
        rows.append(
            _row(plan, trainer, plan.start_round, costs, time.perf_counter() - t0, acc, loss, math.nan)
        )
    progress = RoundProgress(plan.label, plan.rounds, done=done, enabled=plan.progress)
    scale = 100.0 if trainer.accuracy_unit == "percent" else 1.0
    for row in rows:
        progress.set_acc(row.test_acc / scale)
    limit = _LIMIT.get()
    _STOP.loops += 1
    try:
        for i in range(done, plan.rounds):
            r = plan.start_round + i
            clients = plan.sampler.sample(r)
            stats = trainer.train_round(r, clients, plan.lr_at(i))
            costs = _add_round(costs, stats, plan.bytes_per_float)
            acc = loss = math.nan
            if plan.evaluates_after(i + 1):
                acc, loss = trainer.evaluate()
                trainer.on_evaluated(r + 1)
                progress.set_acc(acc / scale)
            wall = time.perf_counter() - t0
            costs = replace(costs, wall_s=wall)
            rows.append(
                _row(
                    plan,
                    trainer,
                    r + 1,
                    costs,
                    wall,
                    acc,
                    loss,
                    stats.train_loss,
                    tuple(int(c) for c in clients),
                )
            )
            diverged = limit is not None and limit.stop_nonfinite and not math.isfinite(stats.train_loss)
            asked = _STOP.requested and i + 1 < plan.rounds  # the last round ends the run anyway
            stop = asked or diverged or (limit is not None and limit.rounds is not None and i + 1 >= limit.rounds)
            if checkpoint is not None and (stop or checkpoint.due(i + 1, plan.rounds)):
                save_checkpoint(
                    checkpoint.path,
                    {
                        "run": dict(plan.identity),
                        "round": i + 1,
                        "trainer": trainer.state_dict(),
                        "history": [row.as_dict() for row in rows],
                        "costs": asdict(costs),
                        "torch_rng": rng_state(),
                    },
                )
            progress.round_done(i + 1)
            if on_round_end is not None:
                on_round_end(r + 1)
            if asked:
                raise StopRequested(i + 1, plan.rounds)
            if stop and (diverged or i + 1 < plan.rounds):
                raise RoundLimitReached(i + 1, rows, diverged, plan.start_round)
    finally:
        _STOP.loops -= 1
        progress.close()
    finished_before = resumed and done >= plan.rounds
    if not finished_before:
        costs = replace(costs, wall_s=time.perf_counter() - t0)
    return LoopResult(rows, costs, resumed_finished=finished_before)
