"""The training-based methods by name: one registry entry per method, no hand-kept list, no if-chain.

Each method of :mod:`benchmark.fl.methods` is a row of :mod:`benchmark.fl.method_table`, registered with
:func:`register_fl_method`: the function that runs it from a :class:`MethodInputs`, the inputs it needs, and, for a federated method with a
centralised counterpart, ``oracle``: the method a run with **one client**, full participation, one local
epoch and FedAvg (server lr 1) must equal exactly (legate2023 §4 (d): the oracles are centralised SGD, and
federated SGD with a single client is centralised SGD). ``tests/contracts/test_fl_method_contract.py``
checks that obligation for every registered method that states one.

:class:`~benchmark.fl.config.FLConfig` validates ``method`` against this registry, and
:func:`benchmark.fl.methods.run_method` dispatches through it. This module imports no torch, so the
configuration can use it; the registry's loader imports :mod:`benchmark.fl.method_table` (no torch either) on
first lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmark.errors import ConfigError
from benchmark.registry import Registry

if TYPE_CHECKING:
    from benchmark.fl.config import FLConfig
    from benchmark.fl.engine import RunResult

#: Inputs a method may need (the keyword arguments of :func:`benchmark.fl.methods.run_method`).
INPUT_NAMES = ("model", "clients", "test", "features", "closed_form")


@dataclass(frozen=True)
class MethodInputs:
    """What :func:`benchmark.fl.methods.run_method` was given (``None`` = not given).

    ``model``/``clients``/``test``: an ``nn.Module`` with a linear ``head`` and the client and test
    datasets; ``features``: :class:`~benchmark.fl.lp_features.CachedFeatures`; ``closed_form``: a
    closed-form head ``(W, b)``; ``stage1_costs``: costs of stage 1 of a two-stage method; ``backend``:
    the cached-feature LP backend; ``checkpoint``: a :class:`~benchmark.federated.checkpoint.CheckpointSpec` to
    save and resume the run (not an input a method needs: every method accepts it).
    """

    model: Any = None
    clients: Sequence[Any] | None = None
    test: Any = None
    features: Any = None
    closed_form: tuple[Any, Any] | None = None
    stage1_costs: Any = None
    backend: str = "vectorised"
    checkpoint: Any = None

    def require(self, names: Sequence[str]) -> None:
        """:class:`ConfigError` naming the inputs among ``names`` that were not given (:func:`need`)."""
        need(**{n: getattr(self, n) for n in names})


def need(**given: Any) -> None:
    """:class:`ConfigError` naming the inputs of ``given`` that are ``None`` (one message for every method)."""
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise ConfigError(f"this method needs {', '.join(missing)}", "pass them to the methods.run_* call")


RunFn = Callable[["FLConfig", MethodInputs], "RunResult"]


@dataclass(frozen=True)
class FLMethodInfo:
    """A registry entry: how to run the method, what it needs, what it must equal.

    ``needs``: inputs that must be given (checked before ``run``). ``centralised``: the method is a
    centralised upper bound (no federation, communication not counted). ``oracle``: see the module
    docstring; ``None`` where no centralised run equals it (e.g. ``random`` starts from a random body, the
    two-stage methods from a given head).
    """

    name: str
    run: RunFn
    summary: str
    needs: tuple[str, ...] = ()
    centralised: bool = False
    oracle: str | None = None


def _load() -> None:
    # the rows (no torch): FLConfig validates names without loading torch; a row imports fl.methods when it runs
    import benchmark.fl.method_table  # noqa: F401  (the rows register themselves)


#: The training-based methods by name, in registration order (the table of :mod:`benchmark.fl.methods`).
FL_METHODS: Registry[FLMethodInfo] = Registry("FL method", loader=_load)


def register_fl_method(
    name: str,
    *,
    summary: str,
    needs: Sequence[str] = (),
    centralised: bool = False,
    oracle: str | None = None,
) -> Callable[[RunFn], RunFn]:
    """Decorator registering ``run(cfg, inputs) -> RunResult`` under ``name``."""
    unknown = [n for n in needs if n not in INPUT_NAMES]
    if unknown:
        raise ValueError(f"FL method {name!r}: unknown inputs {unknown}; use {INPUT_NAMES}")
    return FL_METHODS.register(
        name, lambda fn: FLMethodInfo(name, fn, summary, tuple(needs), centralised, oracle)
    )


def fl_method_names() -> tuple[str, ...]:
    """Names of every registered FL method (registration order)."""
    return FL_METHODS.names()
