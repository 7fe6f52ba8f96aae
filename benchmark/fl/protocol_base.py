"""What the two FL protocol catalogues share: the federation fields, the rounds arithmetic, the catalogue reader.

:mod:`benchmark.fl.protocols` (cached-feature LP, ``fl.yaml``) and :mod:`benchmark.fl.train_protocols`
(full-model training, ``fl_train.yaml``) describe the same federation (K clients, a fraction of them per round,
rounds counted in FLSim epochs or real rounds, evaluation once per FLSim epoch, best-on-test selection).
:class:`FederatedProtocol` holds those fields once, with what follows from them (``clients_per_round``,
``flsim_epoch_rounds``, :meth:`~FederatedProtocol.real_rounds`, :meth:`~FederatedProtocol.eval_interval`, the
:class:`~benchmark.fl.config.FLConfig` fields they fix); each catalogue module adds only its own fields, checks
and the ``fl_config`` of its methods (issue 25: one place per fact). :func:`parse_fields`,
:func:`read_catalogue`, :func:`parse_entries` and :class:`Catalogue` read either YAML file the same way, so
both give the same :class:`~benchmark.errors.ConfigError` for the same mistake.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from benchmark.data.partition import available_partitioners
from benchmark.data.registry import DATASETS
from benchmark.errors import UnknownNameError
from benchmark.fl.config import Selection, clients_per_round
from benchmark.protocols import Where, check_mapping, check_name, coerce, hint_name, load_catalogue
from benchmark.schema import YamlFile

RoundsUnit = Literal["flsim_epochs", "rounds"]
EvalEvery = int | Literal["flsim_epoch"]


def init_methods() -> tuple[str, ...]:
    """The closed-form heads a method may start from: every registered federated closed-form method.

    The registries of this module's names (closed-form methods, backbones, preprocessing presets) import torch,
    so they are read when a protocol is checked, never at import: the table, plan and verdict steps load every
    runner plug-in, and most of them never need torch (``tests/test_runner_plugins.py``)."""
    from benchmark.closed_form.registry import METHODS  # local: numpy, scipy, torch

    return tuple(m for m, info in METHODS.items() if info.federated)


def _backbones() -> Any:
    from benchmark.models.backbones import BACKBONES  # local: torch, torchvision

    return BACKBONES


def _presets() -> Any:
    from benchmark.features.preprocess import PRESETS  # local: torch

    return PRESETS

P = TypeVar("P")


@dataclass(frozen=True)
class FederatedProtocol:
    """One paper setting: what it reproduces, its data and model, and its federation (keyword-only fields)."""

    #: How errors name a protocol of this kind ("protocol 'x' has no method 'y'").
    KIND: ClassVar[str] = "protocol"

    name: str
    paper: str
    source: str
    """Tables / figures / sections the protocol reproduces."""
    dataset: str
    backbone: str
    preprocess: str
    """Preprocessing preset (:mod:`benchmark.features.preprocess`)."""
    _: KW_ONLY
    num_clients: int = 100
    """K (legate2023 §4, fedcof §5: 100 clients)."""
    partition_scheme: str = "dirichlet"
    """Per-client Dirichlet proportions, equal client sizes (both papers' sharder, papers-code.md §1.2)."""
    alpha: float | None = 0.1
    participation: float = 0.3
    """30 % of the clients per round for CIFAR (legate2023 §4, fedcof §5)."""
    rounds_unit: RoundsUnit = "flsim_epochs"
    eval_every: EvalEvery = "flsim_epoch"
    local_epochs: int = 1
    batch_size: int = 64
    """Reference ``local_bs`` default (papers-code.md §1.1)."""
    selection: Selection = "best_on_test"
    client_momentum: float = 0.0
    """Reference client optimiser: plain SGD, momentum 0, weight decay 0 (papers-code.md §1.5)."""
    client_shuffle: bool = False
    """Reference: fixed batches in dataset order, never reshuffled (papers-code.md §1.1)."""
    notes: tuple[str, ...] = ()
    if TYPE_CHECKING:  # every subclass has its methods (a field of its own, so not one here)
        methods: Mapping[str, Any]

    # ---------------------------------------------------------------- derived values
    @property
    def clients_per_round(self) -> int:
        """m = round(participation * K), at least 1 (as :class:`~benchmark.fl.config.FLConfig`)."""
        return clients_per_round(self.num_clients, self.participation)

    @property
    def flsim_epoch_rounds(self) -> int:
        """Real rounds per FLSim epoch: ``ceil(K / m)``."""
        return math.ceil(self.num_clients / self.clients_per_round)

    def method(self, name: str) -> Any:
        """The spec of method ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
        return self._entry("method", self.methods, name)

    def _entry(self, what: str, entries: Mapping[str, P], name: str) -> P:
        try:
            return entries[name]
        except KeyError:
            raise UnknownNameError(
                f"{self.KIND} {self.name!r} has no {what} {name!r}", f"use one of: {', '.join(entries)}"
            ) from None

    def nominal_rounds(self, method: str) -> int:
        """Rounds of ``method`` in the protocol's ``rounds_unit`` (the method's own ``rounds``)."""
        return self.method(method).rounds

    def real_rounds(self, method: str) -> int:
        """Communication rounds actually run for ``method``: FLSim epochs are ``ceil(K/m)`` real rounds each."""
        nominal = self.nominal_rounds(method)
        return nominal * self.flsim_epoch_rounds if self.rounds_unit == "flsim_epochs" else nominal

    def eval_interval(self) -> int:
        """Rounds between evaluations."""
        return self.flsim_epoch_rounds if self.eval_every == "flsim_epoch" else int(self.eval_every)

    def partition(self) -> dict[str, Any]:
        """The partition the runs use (``benchmark.jobs.partition_tag`` input)."""
        part: dict[str, Any] = {"scheme": self.partition_scheme, "num_clients": self.num_clients}
        if self.alpha is not None:
            part["alpha"] = self.alpha
        return part

    def federation_config(self) -> dict[str, Any]:
        """The :class:`~benchmark.fl.config.FLConfig` fields the federation fixes, whatever the method."""
        return {
            "num_clients": self.num_clients,
            "participation": self.participation,
            "local_epochs": self.local_epochs,
            "batch_size": self.batch_size,
            "client_shuffle": self.client_shuffle,
            "client_momentum": self.client_momentum,
            "selection": self.selection,
            "eval_every": self.eval_interval(),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record: every field, nested specs as mappings, tuples as lists."""
        return _lists(dataclasses.asdict(self))


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_lists(v) for v in value]
    return value


# ------------------------------------------------------------------------------------------------ catalogue
def parse_fields(
    cls: type,
    raw: Any,
    where: Where,
    required: tuple[str, ...],
    *,
    skip: Collection[str] = (),
    nested: Mapping[str, str | None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Catalogue entry ``raw`` as keyword arguments of dataclass ``cls``, each value checked against its field's
    type and each registry name against its registry (:func:`check_names`); ``skip`` fields may not be given,
    ``nested`` ones are returned raw (second result) for their own parser, described by the given text or, for
    ``None``, their type. Any problem is one :class:`~benchmark.errors.ConfigError` naming the file, line,
    protocol and field."""
    hints = typing.get_type_hints(cls)
    nested = dict(nested or {})
    fields = {
        f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in skip and f.name not in nested
    }
    allowed = {k: hint_name(h) for k, h in fields.items()}
    allowed |= {k: hint_name(hints[k]) if text is None else text for k, text in nested.items()}
    data = check_mapping(raw, where, allowed=allowed, required=required)
    kw = {k: coerce(v, fields[k], where.at(k)) for k, v in data.items() if k in fields}
    check_names(kw, where)
    return kw, {k: v for k, v in data.items() if k in nested}


def check_names(kw: Mapping[str, Any], where: Where) -> None:
    """The registry names of a parsed protocol exist: dataset, backbone, preprocessing preset, partition scheme
    and a method's closed-form ``init``, whichever ``kw`` holds."""
    registries: dict[str, tuple[Callable[[], Any], str]] = {
        "dataset": (lambda: DATASETS, "dataset"),
        "backbone": (_backbones, "backbone"),
        "preprocess": (_presets, "preprocessing preset"),
        "partition_scheme": (available_partitioners, "partition scheme"),
        "init": (init_methods, "federated closed-form method"),
    }
    for key, (known, kind) in registries.items():
        if kw.get(key) is not None:
            check_name(kw[key], where.at(key), known, kind)


def read_catalogue(name: str, folder: Path | None, also: Mapping[str, str] | None = None) -> YamlFile:
    """Catalogue file ``name`` (:func:`benchmark.protocols.load_catalogue`) whose top level holds
    ``protocols`` and may hold the keys of ``also`` (key -> what it is)."""
    src = load_catalogue(name, folder)
    allowed = {"protocols": "mapping of name -> protocol", **(also or {})}
    check_mapping(src.data, Where.of(src), allowed=allowed, required=("protocols",))
    return src


def parse_entries(src: YamlFile, parse: Callable[[str, Any, Where], P]) -> dict[str, P]:
    """Every entry under ``protocols`` of ``src``, parsed by ``parse(name, raw, where)``."""
    entries = check_mapping(src.data["protocols"], Where.of(src, "protocols"))
    return {
        name: parse(name, raw, Where.of(src, "protocols", name, protocol=name))
        for name, raw in entries.items()
    }


class Catalogue(Generic[P]):
    """The protocols of one catalogue file, loaded once on first use."""

    def __init__(self, load: Callable[[], dict[str, P]], kind: str) -> None:
        self._load, self._kind, self._entries = load, kind, None

    def entries(self) -> dict[str, P]:
        """Every protocol by name (loaded and validated on the first call)."""
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def names(self) -> list[str]:
        return sorted(self.entries())

    def get(self, name: str) -> P:
        """Entry ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
        try:
            return self.entries()[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self._kind} {name!r}", f"use one of: {', '.join(self.names())}"
            ) from None
