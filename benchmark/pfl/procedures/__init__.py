"""The local procedures of fedbabu's personalised-FL baselines that are not plain SGD (fedbabu Table 5 and its
copies), in a registry the round loop dispatches to.

:class:`~benchmark.pfl.trainer.PFLTrainer` runs the reference's ``LocalUpdate.train`` itself (procedure
``sgd``); an :class:`~benchmark.pfl.algorithms.Algorithm` with another ``procedure`` calls
``get_procedure(name)(trainer, i, r, lr) -> (state, loss)``: client ``i``'s **full** state dict after its update
in round ``r`` (0-based) at the round's lr, and its mean training loss. The trainer then keeps the entries the
algorithm does not aggregate as the client's personal entries and averages the aggregated ones (unweighted).

A procedure also says which aggregated parts it supports and whether it implements weight decay (checked when
the trainer is built: one :class:`~benchmark.errors.ConfigError` for a configuration knob it does not implement,
rather than ignoring it), and may have a ``begin_round(trainer, r)`` hook, called once at the start of every
round before the first local update.

Modules (one per method; each docstring cites its paper and reference file and says where it departs):
:mod:`.fedrep` (``fedrep``), :mod:`.ditto` (``ditto``, ``ditto_reference``), :mod:`.per_fedavg`
(``per_fedavg``, ``per_fedavg_beta_lr``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmark.errors import ConfigError
from benchmark.pfl.procedures.ditto import ditto, ditto_reference, reset_personal
from benchmark.pfl.procedures.fedrep import fedrep
from benchmark.pfl.procedures.per_fedavg import per_fedavg, per_fedavg_beta_lr
from benchmark.registry import Registry

if TYPE_CHECKING:
    from benchmark.pfl.algorithms import Algorithm
    from benchmark.pfl.local import State
    from benchmark.pfl.trainer import PFLConfig

UpdateFn = Callable[[Any, int, int, float], "tuple[State, float]"]


@dataclass(frozen=True)
class Procedure:
    """A local procedure: ``update(trainer, i, r, lr) -> (state, loss)``, the aggregated parts it supports,
    whether it implements weight decay, and its optional ``begin_round`` hook."""

    name: str
    update: UpdateFn
    aggregate: tuple[str, ...]
    weight_decay: bool = False
    begin_round: Callable[[Any, int], None] | None = None

    def __call__(self, trainer: Any, i: int, r: int, lr: float) -> tuple[State, float]:
        return self.update(trainer, i, r, lr)

    def start_round(self, trainer: Any, r: int) -> None:
        if self.begin_round is not None:
            self.begin_round(trainer, r)

    def check(self, cfg: PFLConfig, algo: Algorithm) -> None:
        """One :class:`ConfigError` for a knob the procedure does not implement: a proximal term, a head lr
        ratio, weight decay (unless it has it), or an aggregated part other than its own."""
        mu = cfg.prox_mu if cfg.prox_mu is not None else algo.prox_mu
        if mu:
            raise ConfigError(
                f"{self.name}: prox_mu={mu}", "leave prox_mu unset (FedProx is its own algorithm)"
            )
        if cfg.head_lr_ratio != 1.0:
            raise ConfigError(
                f"{self.name}: head_lr_ratio={cfg.head_lr_ratio}", "use 1.0 (the procedure sets its own lrs)"
            )
        if cfg.weight_decay and not self.weight_decay:
            raise ConfigError(
                f"{self.name}: weight_decay={cfg.weight_decay}",
                "use 0 (the reference's procedure has no weight decay)",
            )
        if algo.aggregate_part not in self.aggregate:
            raise ConfigError(
                f"{self.name}: aggregate_part={algo.aggregate_part!r}", f"use one of {list(self.aggregate)}"
            )


#: The local procedures by name (an algorithm's ``procedure``; ``sgd`` and ``centralised`` are not procedures:
#: the trainer runs plain SGD epochs, :mod:`benchmark.pfl.centralised` the centralised baseline).
PROCEDURES: Registry[Procedure] = Registry("local procedure")
for _p in (
    Procedure("fedrep", fedrep, aggregate=("body",), weight_decay=True),
    Procedure("ditto", ditto, aggregate=("full",)),
    Procedure("ditto_reference", ditto_reference, aggregate=("full",), begin_round=reset_personal),
    Procedure("per_fedavg", per_fedavg, aggregate=("full",)),
    Procedure("per_fedavg_beta_lr", per_fedavg_beta_lr, aggregate=("full",)),
):
    PROCEDURES.add(_p.name, _p)


def list_procedures() -> list[str]:
    """The registered procedure names, sorted."""
    return PROCEDURES.sorted_names()


def get_procedure(name: str) -> Procedure:
    """The procedure ``name``; :class:`~benchmark.errors.UnknownNameError` listing the known ones otherwise."""
    return PROCEDURES.get(name)
