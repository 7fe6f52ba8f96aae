"""The local procedures of fedbabu's personalised-FL baselines that are not plain SGD (fedbabu Table 5 and its
copies), in a registry the round loop dispatches to.

:class:`~benchmark.pfl.trainer.PFLTrainer` runs the reference's ``LocalUpdate.train`` itself (procedure
``sgd``); an :class:`~benchmark.pfl.algorithms.Algorithm` with another ``procedure`` calls
``get_procedure(name)(trainer, i, r, lr) -> (state, loss)``: client ``i``'s **full** state dict after its update
in round ``r`` (0-based) at the round's lr, and its mean training loss. The trainer then keeps the entries the
algorithm does not aggregate as the client's personal entries and averages the aggregated ones (unweighted).

A procedure may also have

* ``validate(cfg, algo)`` -- called when the trainer is built: one :class:`~benchmark.errors.ConfigError` for a
  configuration knob it does not implement (rather than ignoring it);
* ``begin_round(trainer, r)`` -- called once at the start of every round, before the first local update.

Modules (one per method; each docstring cites its paper and reference file and says where it departs):
:mod:`.fedrep` (``fedrep``), :mod:`.ditto` (``ditto``, ``ditto_reference``), :mod:`.per_fedavg`
(``per_fedavg``, ``per_fedavg_beta_lr``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmark.errors import UnknownNameError

if TYPE_CHECKING:
    from benchmark.pfl.algorithms import Algorithm
    from benchmark.pfl.trainer import PFLConfig, State

UpdateFn = Callable[[Any, int, int, float], "tuple[State, float]"]


@dataclass(frozen=True)
class Procedure:
    """A registered local procedure: ``update(trainer, i, r, lr) -> (state, loss)`` and its optional hooks."""

    name: str
    update: UpdateFn
    begin_round: Callable[[Any, int], None] | None = None
    validate: Callable[[PFLConfig, Algorithm], None] | None = None

    def __call__(self, trainer: Any, i: int, r: int, lr: float) -> tuple[State, float]:
        return self.update(trainer, i, r, lr)

    def start_round(self, trainer: Any, r: int) -> None:
        if self.begin_round is not None:
            self.begin_round(trainer, r)

    def check(self, cfg: PFLConfig, algo: Algorithm) -> None:
        if self.validate is not None:
            self.validate(cfg, algo)


_PROCEDURES: dict[str, Procedure] = {}


def register_procedure(name: str, *, begin_round: Callable[[Any, int], None] | None = None,
                       validate: Callable[[PFLConfig, Algorithm], None] | None = None) -> Callable[[UpdateFn], UpdateFn]:  # fmt: skip
    """Decorator: ``update`` becomes the procedure ``name`` (a name can be registered once)."""

    def deco(update: UpdateFn) -> UpdateFn:
        if name in _PROCEDURES:
            raise ValueError(f"local procedure {name!r} is registered twice")
        _PROCEDURES[name] = Procedure(name, update, begin_round, validate)
        return update

    return deco


def list_procedures() -> list[str]:
    return sorted(_PROCEDURES)


def get_procedure(name: str) -> Procedure:
    if name not in _PROCEDURES:
        raise UnknownNameError(
            f"no local procedure {name!r}", f"use 'sgd' or one of: {', '.join(list_procedures())}"
        )
    return _PROCEDURES[name]


# Registration happens on import (after the registry exists).
from benchmark.pfl.procedures import ditto, fedrep, per_fedavg  # noqa: E402, F401
