"""Full-model federated training protocols: the paper settings of the real-image training cells.

The values live in ``benchmark/protocols/fl_train.yaml`` (each protocol with its ``source`` and ``notes``),
loaded and validated on import. A :class:`TrainProtocol` is one paper setting (dataset, backbone,
preprocessing, federation, rounds); :class:`TrainMethod` says what a paper method trains (legate2023 §4:
FT, Random; §3.3: FedNCM+FT; Table 6: LP for 5 / 10 rounds then FT; fedcof App. J/K: Fed3R/FedCOF+FT) and
:class:`Algorithm` the FL algorithm it runs under (legate2023 Table 3: FedAvg, FedProx, FedAdam) with its
learning rates. :meth:`TrainProtocol.fl_config` turns (method, algorithm, seed, lrs) into the engine's
:class:`~benchmark.fl.config.FLConfig`.

Paper ambiguities are explicit fields with the reference code's behaviour as default (the federation fields
of :class:`~benchmark.fl.protocol_base.FederatedProtocol`, shared with the cached-feature protocols of
:mod:`benchmark.fl.protocols`): ``rounds_unit`` (FLSim epochs = ceil(K/m) real
rounds each), ``eval_every`` (once per FLSim epoch), ``selection`` (best on test), ``bn_stats`` (global
BatchNorm statistics never aggregated), frozen flips (the preset's). Learning rates the paper tuned without
printing them are ``grid``: the runner tunes them on a validation split (:mod:`benchmark.fl.train_tuning`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchmark.errors import ConfigError
from benchmark.fl.config import FEDPROX_DEFAULT_MU, BNStats, FLConfig, HeadBias, ServerOpt
from benchmark.fl.protocol_base import (
    Catalogue,
    FederatedProtocol,
    parse_entries,
    parse_fields,
    read_catalogue,
)
from benchmark.fl.protocol_base import RoundsUnit as RoundsUnit  # re-exported (its old home)
from benchmark.protocols import Where, check_mapping, coerce

if TYPE_CHECKING:
    from benchmark.federated.precision import Precision

__all__ = [
    "FEDPROX_DEFAULT_MU",
    "Algorithm",
    "TrainMethod",
    "TrainProtocol",
    "get_train_protocol",
    "list_train_protocols",
    "load_train_protocols",
]
Engine = Literal["ft", "head_ft", "random", "lp_ft", "lp"]
Dtype = Literal["float32", "float64"]
GRID = "grid"


@dataclass(frozen=True)
class TrainMethod:
    """A paper method under a protocol (the key is the tidy ``method`` name)."""

    engine: Engine
    """Engine entry (:mod:`benchmark.fl.methods`): ``ft`` (random head, all trained), ``head_ft`` (closed-form
    head, then FT: FedNCM+FT), ``random`` (random init, all trained), ``lp_ft`` (LP then FT, Table 6), ``lp``
    (the head alone on the frozen body, for backbones without a cached-feature protocol, e.g. ResNet18 in
    legate2023 Table 8; the body stays in eval mode, where the reference code trains it in train mode)."""
    rounds: int
    """Rounds of training in the protocol's ``rounds_unit`` (legate2023 Table 4; fedcof App. J/K)."""
    init: str | None = None
    """Closed-form head of ``head_ft`` (a federated closed-form method), fitted on the cached features of the
    same backbone and preprocessing."""
    init_options: str = "legate2023"
    """Options of the closed-form fit (:func:`benchmark.closed_form.paper_protocol_options` key)."""
    init_participation: float | None = None
    """``None``: one round of statistics from every client (legate2023 §3.2); a fraction: fedcof's multi-round
    initialisation (clients arrive that fraction at a time until all were seen)."""
    lp_stage_rounds: int = 0
    """Rounds of LP before FT (``lp_ft``; Table 6: 5 or 10). Real rounds, not FLSim epochs (Table 6 says
    "LP for 5/10 rounds")."""
    pretrained: bool = True
    """False for Random (legate2023 §4 (a): no pre-trained weights)."""
    head_bias: HeadBias = "as_given"
    """Bias of the closed-form head (legate2023 §3.2: 0; ``random`` = the reference code's kept init)."""
    note: str = ""


@dataclass(frozen=True)
class Algorithm:
    """An FL algorithm of a protocol and its learning rates (``grid`` = tuned on a validation split)."""

    server_opt: ServerOpt
    lr_source: str
    client_lr: float | Literal["grid"]
    server_lr: float | Literal["grid"] = 1.0
    prox_mu: float = 0.0
    """FedProx (Li et al. 2020, Eq. 2) weight; 0 = FedAvg's client."""
    client_lr_grid: str | None = None
    server_lr_grid: str | None = None

    @property
    def tuned(self) -> bool:
        return self.client_lr == GRID or self.server_lr == GRID


@dataclass(frozen=True)
class TrainProtocol(FederatedProtocol):
    """One paper setting of full-model training (module docstring); the federation fields (keyword-only) are
    :class:`FederatedProtocol`'s."""

    KIND = "training protocol"

    methods: Mapping[str, TrainMethod]
    algorithms: Mapping[str, Algorithm]
    grids: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    bn_stats: BNStats = "frozen_global"
    subset: str = "all"
    """Images per split (``all`` = the paper's protocol; ``stratified<N>`` only for reduced configurations)."""
    dtype: Dtype = "float32"
    """Compute dtype of model and inputs (float64 only for the pinned reduced configuration)."""
    val_fraction: float = 0.1
    """Share of every class held out of the training set to tune ``grid`` learning rates."""

    @property
    def precision(self) -> Precision:
        """:attr:`dtype` as the one precision policy (:func:`benchmark.federated.precision.precision_from`; an
        unknown dtype is a :class:`ConfigError` naming the field)."""
        from benchmark.federated.precision import precision_from  # local: torch

        return precision_from(dtype=self.dtype)

    def method(self, name: str) -> TrainMethod:
        """The method ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
        return self._entry("method", self.methods, name)

    def algorithm(self, name: str) -> Algorithm:
        """The algorithm ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
        return self._entry("algorithm", self.algorithms, name)

    def lr_grid(self, algorithm: str) -> list[tuple[float, float]]:
        """Every (client lr, server lr) pair to try for ``algorithm`` (one pair when nothing is tuned)."""
        alg = self.algorithm(algorithm)
        clients = self.grids[alg.client_lr_grid] if alg.client_lr == GRID else (float(alg.client_lr),)
        servers = self.grids[alg.server_lr_grid] if alg.server_lr == GRID else (float(alg.server_lr),)
        return [(float(c), float(s)) for c, s in itertools.product(clients, servers)]

    def images_per_round(self, train_size: int) -> float:
        """Training images processed per round (m clients of equal share, ``local_epochs`` passes)."""
        return self.clients_per_round * train_size / self.num_clients * self.local_epochs

    def fl_config(
        self,
        method: str,
        algorithm: str,
        *,
        seed: int,
        client_lr: float | None = None,
        server_lr: float | None = None,
        device: str = "auto",
        amp: bool = False,
        progress: bool = True,
    ) -> FLConfig:
        """The engine configuration; ``client_lr`` / ``server_lr`` are required where the protocol says grid."""
        m, alg = self.method(method), self.algorithm(algorithm)
        c_lr = alg.client_lr if client_lr is None else client_lr
        s_lr = alg.server_lr if server_lr is None else server_lr
        if c_lr == GRID or s_lr == GRID:
            raise ConfigError(
                f"protocol {self.name!r} algorithm {algorithm!r} tunes its learning rate on a validation split",
                "pass client_lr / server_lr (the tuning record's choice)",
            )
        stage = {"lp_stage_rounds": m.lp_stage_rounds} if m.engine == "lp_ft" else {}
        return FLConfig(
            method=m.engine,
            head_bias=m.head_bias,
            **stage,
            rounds=self.real_rounds(method),
            client_lr=float(c_lr),
            prox_mu=alg.prox_mu,
            server_opt=alg.server_opt,
            server_lr=float(s_lr),
            bn_stats=self.bn_stats,
            seed=seed,
            device=device,
            amp=amp,
            progress=progress,
            **self.federation_config(),
        )

    def validate(self, where: Where) -> None:
        """Raise :class:`ConfigError` naming the first bad field."""
        if not self.methods:
            raise where.at("methods").error("no method", "list at least one method")
        if not self.algorithms:
            raise where.at("algorithms").error("no algorithm", "list at least one algorithm")
        for name, alg in self.algorithms.items():
            at = where.at("algorithms", name)
            for lr, grid in (("client_lr", alg.client_lr_grid), ("server_lr", alg.server_lr_grid)):
                if getattr(alg, lr) == GRID and grid not in self.grids:
                    raise at.at(f"{lr}_grid").error(
                        f"{lr} is 'grid' but {lr}_grid {grid!r} names no grid",
                        f"use one of: {', '.join(self.grids)}",
                    )
        for name, m in self.methods.items():
            at = where.at("methods", name)
            if (m.engine == "head_ft") != (m.init is not None):
                raise at.error(
                    "engine head_ft needs an init, and only head_ft takes one", "fix engine / init"
                )
            if m.engine == "lp_ft" and m.lp_stage_rounds < 1:
                raise at.at("lp_stage_rounds").error("lp_ft needs lp_stage_rounds >= 1", "e.g. 5")
            if m.rounds < 0:
                raise at.at("rounds").error("rounds must be >= 0", "e.g. 200")
            for alg in self.algorithms:
                try:
                    lrs = self.lr_grid(alg)[0]
                    self.fl_config(name, alg, seed=0, client_lr=lrs[0], server_lr=lrs[1], device="cpu")
                except ConfigError as err:
                    raise at.error(err.what, err.fix) from None


# ------------------------------------------------------------------------------------------------ catalogue
def parse_train_protocol(
    name: str, raw: Any, grids: Mapping[str, tuple[float, ...]], where: Where
) -> TrainProtocol:
    """One catalogue entry as a validated :class:`TrainProtocol`."""
    required = ("methods", "algorithms", "paper", "source", "dataset", "backbone", "preprocess")
    nested = {"methods": None, "algorithms": None}
    kw, data = parse_fields(TrainProtocol, raw, where, required, skip=("name", "grids"), nested=nested)
    methods = {}
    for m, spec in check_mapping(data["methods"], where.at("methods")).items():
        mkw, _ = parse_fields(TrainMethod, spec, where.at("methods", m), ("engine", "rounds"))
        methods[m] = TrainMethod(**mkw)
    required_alg = ("server_opt", "lr_source", "client_lr")
    algorithms = {
        a: Algorithm(**parse_fields(Algorithm, spec, where.at("algorithms", a), required_alg)[0])
        for a, spec in check_mapping(data["algorithms"], where.at("algorithms")).items()
    }
    proto = TrainProtocol(name=name, methods=methods, algorithms=algorithms, grids=dict(grids), **kw)
    try:
        proto.validate(where)
    except ConfigError as err:
        raise (err if str(where.path) in err.what else where.error(err.what, err.fix)) from None
    return proto


def load_train_protocols(folder: Path | None = None) -> dict[str, TrainProtocol]:
    """Every protocol of ``fl_train.yaml`` (in ``folder``, default: :mod:`benchmark.protocols`), validated."""
    src = read_catalogue("fl_train", folder, {"grids": "mapping of name -> list"})
    grids = {
        g: coerce(v, tuple[float, ...], Where.of(src, "grids", g))
        for g, v in check_mapping(src.data.get("grids", {}), Where.of(src, "grids")).items()
    }
    return parse_entries(src, lambda name, raw, where: parse_train_protocol(name, raw, grids, where))


_PROTOCOLS: Catalogue[TrainProtocol] = Catalogue(load_train_protocols, "training protocol")


def list_train_protocols() -> list[str]:
    """Names of all catalogued training protocols (the catalogue is loaded on first use)."""
    return _PROTOCOLS.names()


def get_train_protocol(name: str) -> TrainProtocol:
    """Catalogue entry ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
    return _PROTOCOLS.get(name)
