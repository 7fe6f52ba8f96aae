"""Full-model federated training protocols: the paper settings of the real-image training cells.

The values live in ``benchmark/protocols/fl_train.yaml`` (each protocol with its ``source`` and ``notes``),
loaded and validated on import. A :class:`TrainProtocol` is one paper setting (dataset, backbone,
preprocessing, federation, rounds); :class:`TrainMethod` says what a paper method trains (legate2023 §4:
FT, Random; §3.3: FedNCM+FT; Table 6: LP for 5 / 10 rounds then FT; fedcof App. J/K: Fed3R/FedCOF+FT) and
:class:`Algorithm` the FL algorithm it runs under (legate2023 Table 3: FedAvg, FedProx, FedAdam) with its
learning rates. :meth:`TrainProtocol.fl_config` turns (method, algorithm, seed, lrs) into the engine's
:class:`~benchmark.fl.config.FLConfig`.

Paper ambiguities are explicit fields with the reference code's behaviour as default (the same as the
cached-feature protocols of :mod:`benchmark.fl.protocols`): ``rounds_unit`` (FLSim epochs = ceil(K/m) real
rounds each), ``eval_every`` (once per FLSim epoch), ``selection`` (best on test), ``bn_stats`` (global
BatchNorm statistics never aggregated), frozen flips (the preset's). Learning rates the paper tuned without
printing them are ``grid``: the runner tunes them on a validation split (:mod:`benchmark.fl.train_tuning`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmark.data.partition import available_partitioners
from benchmark.data.registry import DATASETS
from benchmark.errors import ConfigError, UnknownNameError
from benchmark.fl.config import (
    FEDPROX_DEFAULT_MU,
    BNStats,
    FLConfig,
    HeadBias,
    Selection,
    ServerOpt,
    clients_per_round,
)
from benchmark.protocols import Where, check_mapping, check_name, coerce, hint_name, load_catalogue

RoundsUnit = Literal["flsim_epochs", "rounds"]
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
class TrainProtocol:
    """One paper setting of full-model training (module docstring)."""

    name: str
    paper: str
    source: str
    dataset: str
    backbone: str
    preprocess: str
    methods: Mapping[str, TrainMethod]
    algorithms: Mapping[str, Algorithm]
    grids: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    num_clients: int = 100
    partition_scheme: str = "dirichlet"
    alpha: float | None = 0.1
    participation: float = 0.3
    rounds_unit: RoundsUnit = "flsim_epochs"
    eval_every: int | Literal["flsim_epoch"] = "flsim_epoch"
    local_epochs: int = 1
    batch_size: int = 64
    selection: Selection = "best_on_test"
    bn_stats: BNStats = "frozen_global"
    client_momentum: float = 0.0
    client_shuffle: bool = False
    subset: str = "all"
    """Images per split (``all`` = the paper's protocol; ``stratified<N>`` only for reduced configurations)."""
    dtype: Dtype = "float32"
    """Compute dtype of model and inputs (float64 only for the pinned reduced configuration)."""
    val_fraction: float = 0.1
    """Share of every class held out of the training set to tune ``grid`` learning rates."""
    notes: tuple[str, ...] = ()

    # ---------------------------------------------------------------- derived values
    @property
    def clients_per_round(self) -> int:
        return clients_per_round(self.num_clients, self.participation)

    @property
    def flsim_epoch_rounds(self) -> int:
        return math.ceil(self.num_clients / self.clients_per_round)

    def method(self, name: str) -> TrainMethod:
        try:
            return self.methods[name]
        except KeyError:
            raise UnknownNameError(
                f"training protocol {self.name!r} has no method {name!r}",
                f"use one of: {', '.join(self.methods)}",
            ) from None

    def algorithm(self, name: str) -> Algorithm:
        try:
            return self.algorithms[name]
        except KeyError:
            raise UnknownNameError(
                f"training protocol {self.name!r} has no algorithm {name!r}",
                f"use one of: {', '.join(self.algorithms)}",
            ) from None

    def real_rounds(self, method: str) -> int:
        """Communication rounds of the (last) training stage actually run."""
        n = self.method(method).rounds
        return n * self.flsim_epoch_rounds if self.rounds_unit == "flsim_epochs" else n

    def eval_interval(self) -> int:
        return self.flsim_epoch_rounds if self.eval_every == "flsim_epoch" else int(self.eval_every)

    def partition(self) -> dict[str, Any]:
        """The partition the runs use (``benchmark.jobs.partition_tag`` input)."""
        part: dict[str, Any] = {"scheme": self.partition_scheme, "num_clients": self.num_clients}
        if self.alpha is not None:
            part["alpha"] = self.alpha
        return part

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
            num_clients=self.num_clients,
            participation=self.participation,
            rounds=self.real_rounds(method),
            local_epochs=self.local_epochs,
            batch_size=self.batch_size,
            client_shuffle=self.client_shuffle,
            client_lr=float(c_lr),
            client_momentum=self.client_momentum,
            prox_mu=alg.prox_mu,
            server_opt=alg.server_opt,
            server_lr=float(s_lr),
            selection=self.selection,
            eval_every=self.eval_interval(),
            bn_stats=self.bn_stats,
            seed=seed,
            device=device,
            amp=amp,
            progress=progress,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["methods"] = {k: dataclasses.asdict(v) for k, v in self.methods.items()}
        out["algorithms"] = {k: dataclasses.asdict(v) for k, v in self.algorithms.items()}
        out["grids"] = {k: list(v) for k, v in self.grids.items()}
        out["notes"] = list(self.notes)
        return out

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
def _parse(cls: type, raw: Any, where: Where, required: tuple[str, ...], skip: tuple[str, ...] = ()) -> dict:
    hints = typing.get_type_hints(cls)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in skip}
    data = check_mapping(raw, where, allowed={k: hint_name(h) for k, h in fields.items()}, required=required)
    return {k: coerce(v, fields[k], where.at(k)) for k, v in data.items()}


def parse_train_protocol(
    name: str, raw: Any, grids: Mapping[str, tuple[float, ...]], where: Where
) -> TrainProtocol:
    """One catalogue entry as a validated :class:`TrainProtocol`."""
    # local: heavy import (scipy, torch, torchvision)
    from benchmark.closed_form.registry import METHODS as CLOSED_FORM
    from benchmark.features.preprocess import PRESETS  # local: heavy import (torch)
    from benchmark.models.backbones import BACKBONES  # local: heavy import (torch, torchvision)

    hints = typing.get_type_hints(TrainProtocol)
    fields = {f.name: hint_name(hints[f.name]) for f in dataclasses.fields(TrainProtocol) if f.name not in ("name", "grids")}
    data = check_mapping(raw, where, allowed=fields, required=("methods", "algorithms"))
    rest = {k: v for k, v in data.items() if k not in ("methods", "algorithms")}
    kw = _parse(
        TrainProtocol, rest, where, ("paper", "source", "dataset", "backbone", "preprocess"),
        skip=("name", "methods", "algorithms", "grids"),
    )  # fmt: skip
    check_name(kw["dataset"], where.at("dataset"), lambda: DATASETS, "dataset")
    check_name(kw["backbone"], where.at("backbone"), lambda: BACKBONES, "backbone")
    check_name(kw["preprocess"], where.at("preprocess"), lambda: PRESETS, "preprocessing preset")
    if "partition_scheme" in kw:
        check_name(
            kw["partition_scheme"], where.at("partition_scheme"), available_partitioners, "partition scheme"
        )
    federated = tuple(m for m, info in CLOSED_FORM.items() if info.federated)
    methods = {}
    for m, spec in check_mapping(data["methods"], where.at("methods")).items():
        mkw = _parse(TrainMethod, spec, where.at("methods", m), ("engine", "rounds"))
        if mkw.get("init") is not None:
            check_name(
                mkw["init"], where.at("methods", m, "init"), lambda: federated, "federated closed-form method"
            )
        methods[m] = TrainMethod(**mkw)
    algorithms = {
        a: Algorithm(
            **_parse(Algorithm, spec, where.at("algorithms", a), ("server_opt", "lr_source", "client_lr"))
        )
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
    src = load_catalogue("fl_train", folder)
    top = check_mapping(
        src.data, Where.of(src), allowed={"protocols": "mapping of name -> protocol", "grids": "mapping of name -> list"},
        required=("protocols",),
    )  # fmt: skip
    grids = {
        g: coerce(v, tuple[float, ...], Where.of(src, "grids", g))
        for g, v in check_mapping(top.get("grids", {}), Where.of(src, "grids")).items()
    }
    entries = check_mapping(top["protocols"], Where.of(src, "protocols"))
    return {
        name: parse_train_protocol(name, raw, grids, Where.of(src, "protocols", name, protocol=name))
        for name, raw in entries.items()
    }


_PROTOCOLS: dict[str, TrainProtocol] | None = None


def list_train_protocols() -> list[str]:
    return sorted(_catalogue())


def get_train_protocol(name: str) -> TrainProtocol:
    """Catalogue entry ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
    try:
        return _catalogue()[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown training protocol {name!r}", f"use one of: {', '.join(list_train_protocols())}"
        ) from None


def _catalogue() -> dict[str, TrainProtocol]:
    global _PROTOCOLS
    if _PROTOCOLS is None:
        _PROTOCOLS = load_train_protocols()
    return _PROTOCOLS


__all__ = [
    "FEDPROX_DEFAULT_MU", "Algorithm", "TrainMethod", "TrainProtocol", "get_train_protocol", "list_train_protocols",
    "load_train_protocols",
]  # fmt: skip
