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

# Importing the procedure modules registers them.
from benchmark.pfl.procedures import ditto, fedrep, per_fedavg  # noqa: F401
from benchmark.pfl.procedures.registry import (
    Procedure,
    UpdateFn,
    get_procedure,
    list_procedures,
    register_procedure,
)

__all__ = ["Procedure", "UpdateFn", "get_procedure", "list_procedures", "register_procedure"]
