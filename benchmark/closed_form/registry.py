"""Closed-form methods by name (timm-style registry) and the uniform entry point the workflow calls.

``@register_method(name, summary=...)`` registers a *fit* function with the signature::

    fit(features, labels, num_classes, clients, *, rounds=None, on_round=None, **options) -> FitOutput

``rounds`` is a client schedule (see :func:`participation_schedule`); ``None`` means one round with every
client. :func:`run_method` fits a method on cached train features and evaluates it on cached test features;
with ``participation`` set it runs the multi-round protocol of fedcof Sec. 4.3 / Fig. 3-4 and records the
accuracy after every round. :func:`run_methods` runs several methods on one partition in a single pass over
the clients (shared client moments). The reference-code options under which the papers' tables were produced
(pinv32 solver etc., papers-code.md section 6) are :func:`benchmark.closed_form.protocols.paper_protocol_options`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmark.closed_form.heads import LinearHead, evaluate
from benchmark.closed_form.stats import (
    MethodPlan,
    RoundCallback,
    check_inputs,
    federate_jointly,
    federate_plan,
)
from benchmark.errors import ConfigError
from benchmark.registry import Registry


@dataclass(frozen=True, eq=False)
class FitOutput:
    """What a registered fit returns: the final head, uplink floats per client (None if centralised)."""

    head: LinearHead
    uplink_floats: np.ndarray | None
    extra: dict[str, Any] = field(default_factory=dict)


FitFn = Callable[..., FitOutput]


PlanFn = Callable[..., MethodPlan]


ReferenceFn = Callable[..., LinearHead]

#: ``head(features, labels, num_classes, clients, **options)``: the head of a fit (:func:`head_of`).
HeadFn = Callable[..., LinearHead]


@dataclass(frozen=True)
class CentralisedReference:
    """What a federated method must equal on any partition: ``head(features, labels, num_classes, **opts)``
    computed on all rows at once by independently written code (:mod:`~benchmark.closed_form.centralised`).

    ``option_sets`` are the method options the contract test (``tests/contracts``) tries; each is passed to
    both the federated fit and the reference. ``needs_repeated_label``: the reference is singular when every
    class has one sample (``gamma (N - C) = 0``), so the test draws problems with a repeated label.
    """

    head: ReferenceFn
    option_sets: tuple[Mapping[str, Any], ...] = ({},)
    needs_repeated_label: bool = False


@dataclass(frozen=True)
class MethodInfo:
    """A registry entry: ``fit``, a one-line summary, whether it is a federated protocol, and (federated
    methods) ``plan(num_classes, dim, **options)``, the server and client message :func:`run_methods` uses
    to run several methods in one pass over the clients.

    Every federated method states what it must equal: its ``reference`` (checked for every registered
    method by ``tests/contracts/test_closed_form_contract.py``), or, when no centralised head equals it,
    ``no_reference``, the reason (e.g. FedCOF estimates the covariances from client means).
    ``suite_gamma``: the ``suite`` protocol passes the backbone's FedCOF gamma (``default_gamma``).
    ``head`` (centralised methods, :func:`register_centralised`): the head the fit computes on all rows;
    its keyword-only parameters are the method's options.
    """

    name: str
    fit: FitFn
    summary: str
    federated: bool
    plan: PlanFn | None = None
    reference: CentralisedReference | None = None
    no_reference: str | None = None
    suite_gamma: bool = False
    head: ReferenceFn | None = None


@dataclass(frozen=True, eq=False)
class MethodResult:
    """Result of :func:`run_method`: test top-1 accuracy in percent, the head, uplink floats, extras.

    ``extra`` holds ``method``, ``options`` and, for multi-round runs, ``rounds``: one dict per round with
    ``round``, ``draw`` (index of the sampling draw), ``new_clients``, ``clients_seen`` and ``accuracy``.
    """

    accuracy: float
    head: LinearHead
    uplink_floats: np.ndarray | None
    extra: dict[str, Any] = field(default_factory=dict)


#: The closed-form methods by name. Registration order is the order runs compute them. The method modules
#: register themselves when imported, and the package's ``__init__`` imports them, in the suite's order (fedncm,
#: fed3r, fedcof, centralised, which ALL_METHODS keeps), before any module of the package is used: importing
#: this module imports the package first, so the registry needs no loader (and imports no method module).
METHODS: Registry[MethodInfo] = Registry("closed-form method")


def register_method(
    name: str,
    *,
    summary: str,
    federated: bool = True,
    plan: PlanFn | None = None,
    reference: CentralisedReference | None = None,
    no_reference: str | None = None,
    suite_gamma: bool = False,
    head: ReferenceFn | None = None,
) -> Callable[[FitFn], FitFn]:
    """Decorator registering ``fit`` (and its ``plan`` or ``head``, if any) under ``name`` (twice is an error)."""
    return METHODS.register(
        name,
        lambda fn: MethodInfo(name, fn, summary, federated, plan, reference, no_reference, suite_gamma, head),
    )


def _fit(name: str, doc: str, body: Callable[..., FitOutput]) -> FitFn:
    """The fit registered as ``name``: every fit's signature (:data:`FitFn`), calling
    ``body(features, labels, num_classes, clients, rounds, on_round, options)``."""

    def fit(
        features: np.ndarray,
        labels: np.ndarray,
        num_classes: int,
        clients: Sequence[np.ndarray],
        *,
        rounds: Sequence[np.ndarray] | None = None,
        on_round: RoundCallback | None = None,
        **options: Any,
    ) -> FitOutput:
        return body(features, labels, num_classes, clients, rounds, on_round, options)

    fit.__name__ = fit.__qualname__ = f"fit_{name}"
    fit.__doc__ = doc
    return fit


def register_plan(
    name: str,
    *,
    summary: str,
    plan: PlanFn,
    reference: CentralisedReference | None = None,
    no_reference: str | None = None,
    suite_gamma: bool = False,
) -> FitFn:
    """Register a federated method given by its ``plan`` and return its fit.

    The fit validates the inputs (:func:`~benchmark.closed_form.stats.check_inputs`), builds
    ``plan(num_classes, dim, **options)``, runs the clients' rounds
    (:func:`~benchmark.closed_form.stats.federate_plan`) and returns the head, the uplink floats per client
    and ``plan.extra()``; an option the plan does not take is a ``TypeError``. ``reference`` /
    ``no_reference``: see :class:`MethodInfo`.
    """

    def body(features, labels, num_classes, clients, rounds, on_round, options) -> FitOutput:
        features, labels, clients = check_inputs(features, labels, num_classes, clients)
        method = plan(num_classes, features.shape[1], **options)
        head, uplink = federate_plan(features, labels, clients, method, rounds, on_round)
        return FitOutput(head, uplink, method.extra())

    doc = f"{summary}. Options: those of :func:`{plan.__module__}.{plan.__name__}`."
    return register_method(
        name,
        summary=summary,
        plan=plan,
        reference=reference,
        no_reference=no_reference,
        suite_gamma=suite_gamma,
    )(_fit(name, doc, body))


def register_centralised(name: str, *, summary: str, head: ReferenceFn, suite_gamma: bool = False) -> FitFn:
    """Register a centralised method and return its fit: ``head(x, y, num_classes, **options)`` on the union
    of the clients' rows (validated by :func:`~benchmark.closed_form.stats.check_inputs`), no uplink.

    ``rounds`` is refused (:class:`ConfigError`: a centralised method has none) before anything is read; an
    option ``head`` does not take is a ``TypeError``. The method's options are ``head``'s keyword-only
    parameters (:attr:`MethodInfo.head`).
    """

    def body(features, labels, num_classes, clients, rounds, on_round, options) -> FitOutput:
        if rounds is not None:
            raise ConfigError(f"{name} is centralised and has no rounds", "drop participation/rounds")
        features, labels, clients = check_inputs(features, labels, num_classes, clients)
        idx = np.sort(np.concatenate(clients)) if clients else np.zeros(0, np.int64)
        return FitOutput(head(features[idx], labels[idx], num_classes, **options), None)

    doc = f"{summary}: :func:`{head.__module__}.{head.__name__}` on the union of the clients' rows."
    return register_method(name, summary=summary, federated=False, suite_gamma=suite_gamma, head=head)(
        _fit(name, doc, body)
    )


def head_of(fit: FitFn) -> HeadFn:
    """The head alone: ``head_of(fit)(features, labels, num_classes, clients, **options)`` is
    ``fit(features, labels, num_classes, clients, **options).head`` (same options, same errors)."""

    def head(
        features: np.ndarray,
        labels: np.ndarray,
        num_classes: int,
        clients: Sequence[np.ndarray],
        **options: Any,
    ) -> LinearHead:
        return fit(features, labels, num_classes, clients, **options).head

    head.__name__ = head.__qualname__ = fit.__name__.removeprefix("fit_")
    head.__doc__ = f"Head of :func:`{fit.__name__}` (same keyword options)."
    return head


def list_methods() -> list[str]:
    """Names of all registered closed-form methods (sorted)."""
    return METHODS.sorted_names()


def suite_methods() -> tuple[str, ...]:
    """Every registered method in the order runs compute them: the federated ones, then the centralised
    ones, each in registration order."""
    entries = [METHODS.get(n) for n in METHODS.names()]
    return tuple(m.name for m in entries if m.federated) + tuple(m.name for m in entries if not m.federated)


def get_method(name: str) -> MethodInfo:
    """Registry entry of ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
    return METHODS.get(name)


@dataclass(frozen=True)
class ScheduledRound:
    """One initialisation round: the draw index, the clients sampled, and those not seen before."""

    draw: int
    sampled: np.ndarray
    new: np.ndarray


def participation_schedule(
    num_clients: int,
    *,
    participation: float = 0.3,
    seed: int = 0,
    max_rounds: int = 100,
    clients_per_round: int | None = None,
) -> list[ScheduledRound]:
    """Multi-round initialisation schedule (fedcof Sec. 4.3 and Fig. 3-4; path B of the reference code).

    Each draw samples ``m = clients_per_round`` (default ``max(1, round(participation * K))``, 30 of 100 in
    the paper) clients uniformly without replacement with ``np.random.default_rng(seed)``. As in the
    reference, already-seen clients send nothing again and a draw with no new client is skipped (no round,
    no evaluation); it stops when every client has been seen or after ``max_rounds`` draws (reference: 100).
    Only rounds that bring at least one new client are returned.
    """
    if num_clients < 1:
        raise ConfigError("participation_schedule: no clients", "pass at least one client")
    if clients_per_round is None:
        if not 0 < participation <= 1:
            raise ConfigError(f"participation must be in (0, 1], got {participation}", "the paper uses 0.3")
        clients_per_round = max(1, int(np.floor(participation * num_clients + 0.5)))
    m = min(int(clients_per_round), num_clients)
    if m < 1:
        raise ConfigError(f"clients_per_round must be >= 1, got {clients_per_round}", "use a positive count")
    rng = np.random.default_rng(seed)
    seen = np.zeros(num_clients, dtype=bool)
    out: list[ScheduledRound] = []
    for draw in range(max_rounds):
        if seen.all():
            break
        sampled = np.sort(rng.choice(num_clients, size=m, replace=False))
        new = sampled[~seen[sampled]]
        if new.size == 0:
            continue
        seen[new] = True
        out.append(ScheduledRound(draw, sampled, new))
    return out


def run_method(
    name: str,
    features_train: np.ndarray,
    labels_train: np.ndarray,
    features_test: np.ndarray,
    labels_test: np.ndarray,
    clients: Sequence[np.ndarray],
    num_classes: int,
    *,
    participation: float | None = None,
    schedule_seed: int = 0,
    max_rounds: int = 100,
    clients_per_round: int | None = None,
    **options: Any,
) -> MethodResult:
    """Fit method ``name`` on the train features of ``clients`` and return its test accuracy (percent).

    ``options`` go to the method's fit (e.g. ``gamma``, ``lam``, ``solver``, ``subsets``, ``noise``; see
    each method). With ``participation`` (fraction per round, fedcof uses 0.3) the multi-round protocol
    runs: clients arrive by :func:`participation_schedule` and the accuracy after each round is recorded in
    ``extra["rounds"]``; once every client was seen the head equals the one-shot head. Centralised methods
    are fitted on the union of the clients' rows (so they are
    comparable with the federated methods on the same data).
    """
    info = get_method(name)
    extra: dict[str, Any] = {"method": name, "options": dict(options)}
    rounds: list[np.ndarray] | None = None
    on_round: RoundCallback | None = None
    if participation is not None or clients_per_round is not None:
        if not info.federated:
            raise ConfigError(f"method {name!r} is centralised", "drop participation for centralised methods")
        schedule = participation_schedule(
            len(clients),
            participation=0.3 if participation is None else participation,
            seed=schedule_seed,
            max_rounds=max_rounds,
            clients_per_round=clients_per_round,
        )
        rounds = [s.new for s in schedule]
        records: list[dict[str, Any]] = []
        seen = np.cumsum([len(s.new) for s in schedule])

        def on_round(r: int, head: LinearHead) -> None:
            records.append(
                {
                    "round": r,
                    "draw": schedule[r].draw,
                    "new_clients": len(schedule[r].new),
                    "clients_seen": int(seen[r]),
                    "accuracy": evaluate(head, features_test, labels_test),
                }
            )

        extra["rounds"] = records
        extra["all_clients_seen"] = bool(seen[-1] == len(clients)) if len(seen) else False
    out = info.fit(
        features_train, labels_train, num_classes, clients, rounds=rounds, on_round=on_round, **options
    )
    extra.update(out.extra)
    return MethodResult(evaluate(out.head, features_test, labels_test), out.head, out.uplink_floats, extra)


#: Options that make a run multi-round; such methods run on their own in :func:`run_methods`.
_ROUND_OPTIONS = ("participation", "clients_per_round", "schedule_seed", "max_rounds")


def run_methods(
    methods: Mapping[str, Mapping[str, Any]],
    features_train: np.ndarray,
    labels_train: np.ndarray,
    features_test: np.ndarray,
    labels_test: np.ndarray,
    clients: Sequence[np.ndarray],
    num_classes: int,
) -> dict[str, MethodResult]:
    """Several methods (name -> options, as :func:`run_method`) on the same features and partition.

    One-shot federated methods run together (:func:`~benchmark.closed_form.stats.federate_jointly`): each
    client computes its class sums, counts and (if a Fed3R form is among them) its Gram once per precision
    and answers every method from them, so e.g. FedNCM, both Fed3R forms and FedCOF cost one pass over the
    data and one Gram per client instead of four passes and two Grams. Every method's server receives
    exactly the messages it receives when run alone, so the heads are the same as :func:`run_method`'s.
    Centralised methods and multi-round runs (``participation`` ...) go through :func:`run_method`.
    Each result's ``extra["wall_s"]`` is the seconds spent on that method: its own messages, server, head
    and evaluation, plus the shared client moments it used (so the values overlap; the joint wall time is
    less than their sum).
    """
    results: dict[str, MethodResult] = {}
    joint: dict[str, PlanFn] = {}
    for name, opts in methods.items():
        plan_fn = get_method(name).plan
        if plan_fn is not None and not any(k in opts for k in _ROUND_OPTIONS):
            joint[name] = plan_fn
            continue
        t0 = time.perf_counter()
        res = run_method(
            name, features_train, labels_train, features_test, labels_test, clients, num_classes, **opts
        )
        res.extra["wall_s"] = time.perf_counter() - t0
        results[name] = res
    if joint:
        features_train, labels_train, checked = check_inputs(
            features_train, labels_train, num_classes, clients
        )
        dim = features_train.shape[1]
        plans = {name: fn(num_classes, dim, **methods[name]) for name, fn in joint.items()}
        outcomes, shared = federate_jointly(features_train, labels_train, checked, plans)
        for name, plan in plans.items():
            t0 = time.perf_counter()
            out = outcomes[name]
            acc = evaluate(out.head, features_test, labels_test)
            extra: dict[str, Any] = {"method": name, "options": dict(methods[name]), **plan.extra()}
            moments_s = shared.get(plan.dtype.name, 0.0) if plan.needs_moments else 0.0
            extra["wall_s"] = out.seconds + moments_s + time.perf_counter() - t0
            extra["joint_with"] = sorted(plans)
            results[name] = MethodResult(acc, out.head, out.uplink, extra)
    return {name: results[name] for name in methods}
