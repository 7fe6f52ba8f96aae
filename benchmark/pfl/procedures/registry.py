"""The registry of local procedures (:mod:`benchmark.pfl.procedures`): a procedure module registers its
``update`` with :func:`register_procedure`; the round loop finds it with :func:`get_procedure`. Apart from the
package's ``__init__`` (which imports every procedure module, so that importing the package registers them) so
that a procedure module and the package do not import each other (issue 25)."""

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
