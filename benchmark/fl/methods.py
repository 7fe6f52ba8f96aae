"""The training-based methods of legate2023 §4 and their two-stage variants, on top of the round engine.

=============  ==========================================================================================
method         what runs (legate2023)
=============  ==========================================================================================
``lp``         LP: frozen pre-trained body, federated training of a random linear head (§4 baseline (b));
               ``cfg.head="mlp"``: the three-layer MLP head of App. C.1 / Table 5 (cached features only)
``ft``         FT: pre-trained body + random head, everything trained (§4 baseline (c))
``random``     Random: the same architecture from a random init, everything trained (§4 baseline (a))
``head_ft``    HeadTune + FineTune (§3.3): start from a given closed-form head (FedNCM, Fed3R, FedCOF as
               numpy W, b) and run FT - "FedNCM+FT"
``head_lp``    the same closed-form head followed by LP (fedcof's Init_FT_LP path, papers-code.md §2.5)
``lp_ft``      ``cfg.lp_stage_rounds`` rounds of LP (5 or 10 in Table 6) as stage 1, then FT
``lp_oracle``  centralised LP on the pooled data (§4 baseline (d), an upper bound)
``ft_oracle``  centralised FT on the pooled data (§4 baseline (d))
=============  ==========================================================================================

LP runs on cached features (:mod:`benchmark.fl.lp_features`, exact and fast) unless a quirk needs the body in
the loop (``lp_body_mode="train"``, ``frozen_params="server_opt_drift"``), in which case pass ``model``.

Random heads are PyTorch's default ``nn.Linear`` init drawn from the ``model_init`` stream
(:func:`benchmark.fl.lp_features.init_head_state`), so the same seed gives the same head on both paths.

Every entry point takes ``checkpoint`` (:class:`~benchmark.federated.checkpoint.CheckpointSpec`): the run is saved
every ``every`` rounds and resumed from the file when it exists (:func:`benchmark.fl.engine.run_rounds`).
``lp_ft`` keeps one file per stage (``<stem>.lp<suffix>``, ``<stem>.ft<suffix>``): a finished LP stage is
restored from its file, not rerun.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from torch import nn
from torch.utils.data import ConcatDataset, Dataset

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec
from benchmark.federated.history import Costs
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import RunResult, run_federated
from benchmark.fl.lp_features import Backend, CachedFeatures, init_head_state, run_lp_features
from benchmark.fl.method_registry import FL_METHODS, MethodInputs, need

M = TypeVar("M", bound=nn.Module)


# ------------------------------------------------------------------------------------------------ heads / init
def init_head(cfg: FLConfig, feature_dim: int, num_classes: int) -> dict[str, np.ndarray]:
    """The random head of LP / FT (``cfg.head`` kind) from the run's ``model_init`` stream."""
    return init_head_state(cfg.head, feature_dim, num_classes, cfg.seeds.rng("model_init", 0), cfg.mlp_hidden)


def closed_form_head(weight: np.ndarray, bias: np.ndarray | None, cfg: FLConfig) -> dict[str, np.ndarray]:
    """Head state from a closed-form classifier (W of shape (C, d), b of shape (C,) or None = 0).

    ``cfg.head_bias``: ``as_given`` keeps b (zeros if None; legate2023 §3.2 sets FedNCM's bias to 0),
    ``zero`` forces 0, ``random`` replaces it with ``nn.Linear``'s default bias init U(+-1/sqrt(d)) from the
    ``model_init`` stream (what the legate2023 reference code does: it never zeroes the bias,
    papers-code.md §1.4). W is copied unchanged (float32), so the run starts from exactly this head.
    """
    w = np.array(weight, dtype=np.float32, copy=True)
    if w.ndim != 2:
        raise ConfigError(f"closed-form W must be (C, d), got shape {w.shape}", "pass the head weight matrix")
    c, d = w.shape
    if cfg.head_bias == "random":
        b = cfg.seeds.rng("model_init", 1).uniform(-1 / np.sqrt(d), 1 / np.sqrt(d), size=c).astype(np.float32)
    elif cfg.head_bias == "zero" or bias is None:
        b = np.zeros(c, dtype=np.float32)
    else:
        b = np.array(bias, dtype=np.float32, copy=True).reshape(-1)
        if b.shape != (c,):
            raise ConfigError(
                f"closed-form b must have shape ({c},), got {b.shape}", "pass one bias per class"
            )
    return {"weight": w, "bias": b}


@torch.no_grad()
def set_head(model: nn.Module, state: Mapping[str, np.ndarray]) -> None:
    """Copy ``state`` into ``model.head`` (shapes must match; values converted to the head's dtype)."""
    head: nn.Module = model.head  # type: ignore[assignment]
    own = head.state_dict()
    if set(own) != set(state):
        raise ConfigError(f"head state keys {sorted(state)} do not match the model head {sorted(own)}", "")
    for k, v in state.items():
        if tuple(own[k].shape) != tuple(np.shape(v)):
            raise ConfigError(f"head tensor {k!r}: shape {np.shape(v)} != model's {tuple(own[k].shape)}", "")
        own[k].copy_(torch.as_tensor(np.asarray(v)))


def seeded_build(fn: Callable[[], M], cfg: FLConfig) -> M:
    """Call ``fn()`` (e.g. build a randomly initialised torchvision model) with torch's CPU generator
    seeded from the ``model_init`` stream, restoring the generator afterwards (scoped, not global seeding).
    This is how "Random" gets torchvision's own init schemes reproducibly."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(cfg.seeds.int_seed("model_init", 2))
        return fn()


def reinit_default(model: M, cfg: FLConfig) -> M:
    """Re-initialise every submodule with its own ``reset_parameters`` (PyTorch defaults; BatchNorm running
    statistics back to (0, 1)) under :func:`seeded_build`'s scoped seed. Note: torchvision models apply their
    own init schemes in ``__init__`` (e.g. Kaiming-normal convs in ResNet), which this does *not* reproduce;
    prefer building the random model with :func:`seeded_build`."""

    def reset() -> M:
        for mod in model.modules():
            if hasattr(mod, "reset_parameters"):
                mod.reset_parameters()  # type: ignore[operator]
        return model

    return seeded_build(reset, cfg)


def _dims(model: nn.Module) -> tuple[int, int]:
    head = getattr(model, "head", None)
    if not isinstance(head, nn.Linear):
        raise ConfigError("model.head must be an nn.Linear", "pass a benchmark.models.classifier.Classifier")
    return int(head.in_features), int(head.out_features)


# ------------------------------------------------------------------------------------------------ methods
def run_lp(
    cfg: FLConfig,
    *,
    features: CachedFeatures | None = None,
    model: nn.Module | None = None,
    clients: Sequence[Dataset] | None = None,
    test: Dataset | None = None,
    head: Mapping[str, np.ndarray] | None = None,
    backend: Backend = "vectorised",
    method: str = "lp",
    start_costs: Costs | None = None,
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """Federated LP (legate2023 §4 baseline (b)) from ``head`` (default: a random head).

    With ``features`` it runs on cached features (vectorised, exact); otherwise on ``model`` with the body
    frozen (``requires_grad=False``) and only ``model.head`` trained and communicated.
    """
    if features is not None:
        if head is None:
            head = init_head(cfg, features.feature_dim, features.classes)
        kw = {"backend": backend, "method": method, "start_costs": start_costs, "checkpoint": checkpoint}
        return run_lp_features(features, cfg, head, **kw)
    need(model=model, clients=clients, test=test)
    if cfg.head != "linear":
        raise ConfigError("the MLP head runs on cached features only", "pass features=CachedFeatures(...)")
    d, c = _dims(model)  # type: ignore[arg-type]
    set_head(model, head if head is not None else init_head(cfg, d, c))  # type: ignore[arg-type]
    kw = {"method": method, "start_costs": start_costs, "checkpoint": checkpoint}
    return run_federated(model, clients, test, cfg, train_part="head", **kw)  # type: ignore[arg-type]


def run_ft(
    model: nn.Module,
    clients: Sequence[Dataset],
    test: Dataset,
    cfg: FLConfig,
    *,
    head: Mapping[str, np.ndarray] | None = None,
    method: str = "ft",
    start_costs: Costs | None = None,
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """Federated full fine-tuning (legate2023 §4 baseline (c)) of ``model`` from ``head`` (default random)."""
    d, c = _dims(model)
    set_head(model, head if head is not None else init_head(replace(cfg, head="linear"), d, c))
    kw = {"method": method, "start_costs": start_costs, "checkpoint": checkpoint}
    return run_federated(model, clients, test, cfg, train_part="all", **kw)


def run_random(
    model: nn.Module,
    clients: Sequence[Dataset],
    test: Dataset,
    cfg: FLConfig,
    *,
    reinit: bool = False,
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """Random (legate2023 §4 baseline (a)): full federated training from a random init.

    Pass a model built with random weights (e.g. the backbone registry's random weights under
    :func:`seeded_build`); ``reinit=True`` instead resets every submodule to PyTorch's defaults
    (:func:`reinit_default`). With ``bn_stats="frozen_global"`` the BatchNorm running statistics stay at
    (0, 1) for the whole run, as in the reference (papers-code.md §1.7-1).
    """
    if reinit:
        reinit_default(model, cfg)
    return run_ft(model, clients, test, cfg, method="random", checkpoint=checkpoint)


def run_two_stage(
    weight: np.ndarray,
    bias: np.ndarray | None,
    cfg: FLConfig,
    *,
    stage2: Literal["ft", "lp"],
    model: nn.Module | None = None,
    clients: Sequence[Dataset] | None = None,
    test: Dataset | None = None,
    features: CachedFeatures | None = None,
    stage1_costs: Costs | None = None,
    backend: Backend = "vectorised",
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """HeadTune + FineTune (legate2023 §3.3): start from the closed-form head (W, b) and run FT or LP.

    The head is :func:`closed_form_head` (``cfg.head_bias`` applies), copied exactly into the run; round 0
    of the history is the closed-form classifier's own test accuracy. ``stage1_costs`` (e.g. FedNCM's one
    round of statistics, from :mod:`benchmark.costs`) offsets the cost counters so curves against
    communication / compute include stage 1.
    """
    kw = {"head": closed_form_head(weight, bias, cfg), "start_costs": stage1_costs, "checkpoint": checkpoint}
    if stage2 == "ft":
        need(model=model, clients=clients, test=test)
        return run_ft(model, clients, test, cfg, method="head_ft", **kw)  # type: ignore[arg-type]
    if stage2 == "lp":
        kw |= {"features": features, "model": model, "clients": clients, "test": test, "backend": backend}
        return run_lp(replace(cfg, head="linear"), method="head_lp", **kw)
    raise ConfigError(f"stage2 must be 'ft' or 'lp', got {stage2!r}", "")


def run_lp_then_ft(
    model: nn.Module,
    clients: Sequence[Dataset],
    test: Dataset,
    cfg: FLConfig,
    *,
    lp_rounds: int | None = None,
    features: CachedFeatures | None = None,
    backend: Backend = "vectorised",
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """``lp_rounds`` (default ``cfg.lp_stage_rounds``; Table 6: 5 or 10) rounds of LP, then ``cfg.rounds``
    rounds of FT from the LP head (legate2023 App. C.2 / Table 6).

    Stage 1 runs on ``features`` when given (they must come from ``model``'s body), else on ``model``.
    Stage 2 continues the round numbering (client sampling does not replay stage 1's draws) and the cost
    counters; the history holds both stages (``stage`` = "lp" / "ft"), accuracy selection looks at FT only.
    The FT stage starts from the *last* LP head. ``checkpoint``: one file per stage
    (:meth:`CheckpointSpec.for_stage`), so an interrupted FT stage resumes after the restored LP stage.
    """
    n1 = cfg.lp_stage_rounds if lp_rounds is None else int(lp_rounds)
    cfg1 = replace(cfg, rounds=n1, head="linear", method="lp")
    d, c = _dims(model)
    head0 = init_head(cfg1, d, c)
    ck1 = checkpoint.for_stage("lp") if checkpoint is not None else None
    ck2 = checkpoint.for_stage("ft") if checkpoint is not None else None
    if features is not None:
        s1 = run_lp_features(
            features, cfg1, head0, backend=backend, method="lp_ft", stage="lp", checkpoint=ck1
        )
    else:
        set_head(model, head0)
        s1 = run_federated(
            model, clients, test, cfg1, train_part="head", method="lp_ft", stage="lp", checkpoint=ck1
        )
    set_head(model, s1.head_state)
    kw = {"stage": "ft", "start_round": n1, "start_costs": s1.costs, "history": s1.history, "checkpoint": ck2}
    res = run_federated(model, clients, test, cfg, train_part="all", method="lp_ft", **kw)
    res.meta["stage1"] = {"rounds": n1, "best_acc": s1.best_acc, "last_acc": s1.last_acc, **s1.meta}
    return res


# ------------------------------------------------------------------------------------------------ oracles
def _oracle_cfg(cfg: FLConfig, shuffle: bool) -> FLConfig:
    return replace(
        cfg,
        num_clients=1,
        participation=1.0,
        local_epochs=1,
        server_opt="fedavg",
        server_lr=1.0,
        prox_mu=0.0,
        client_shuffle=shuffle,
        frozen_params="untouched",
    )


def centralised_lp_oracle(
    features: CachedFeatures,
    cfg: FLConfig,
    *,
    head: Mapping[str, np.ndarray] | None = None,
    shuffle: bool = True,
    backend: Backend = "vectorised",
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """LP oracle (legate2023 §4 (d)): SGD on the head over the pooled client data, ``cfg.rounds`` epochs.

    Implemented as the engine with one client holding every sample, full participation, one local epoch per
    "round" and FedAvg lr 1, which is exactly centralised mini-batch SGD (momentum buffers, if any, restart
    each epoch; the protocol's momentum is 0). ``shuffle``: reshuffle every epoch from the ``data_order``
    stream (neither paper specifies the oracle's data order). Communication is not counted.
    """
    pooled = np.concatenate([np.asarray(i, dtype=np.int64) for i in features.client_indices])
    one = CachedFeatures(
        features.train_x, features.train_y, [pooled], features.test_x, features.test_y, features.classes
    )
    ocfg = _oracle_cfg(cfg, shuffle)
    if head is None:
        head = init_head(ocfg, features.feature_dim, features.classes)
    return run_lp_features(
        one, ocfg, head, backend=backend, method="lp_oracle", communicate=False, checkpoint=checkpoint
    )


def centralised_ft_oracle(
    model: nn.Module,
    clients: Sequence[Dataset],
    test: Dataset,
    cfg: FLConfig,
    *,
    head: Mapping[str, np.ndarray] | None = None,
    shuffle: bool = True,
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """FT oracle (legate2023 §4 (d)): full fine-tuning on the concatenation of the client datasets for
    ``cfg.rounds`` epochs (same construction and caveats as :func:`centralised_lp_oracle`)."""
    d, c = _dims(model)
    ocfg = _oracle_cfg(cfg, shuffle)
    set_head(model, head if head is not None else init_head(replace(ocfg, head="linear"), d, c))
    kw = {"train_part": "all", "method": "ft_oracle", "communicate": False, "checkpoint": checkpoint}
    return run_federated(model, [ConcatDataset(list(clients))], test, ocfg, **kw)


# ------------------------------------------------------------------------------------------------ the table
def call_method(fn: Callable[..., RunResult], cfg: FLConfig, inputs: MethodInputs, fixed: Mapping[str, Any]) -> RunResult:
    """Call ``fn`` (a ``run_*`` function of this module, a row of :mod:`benchmark.fl.method_table`) with ``cfg``,
    each :class:`MethodInputs` field it has a parameter of that name for (``weight`` / ``bias``: the
    closed-form head's W and b) and ``fixed``."""
    params = inspect.signature(fn).parameters
    given = {f.name: getattr(inputs, f.name) for f in dataclasses.fields(MethodInputs) if f.name in params}
    if "weight" in params:
        given["weight"], given["bias"] = inputs.closed_form  # type: ignore[misc]
    return fn(cfg=cfg, **given, **fixed)


# ------------------------------------------------------------------------------------------------ dispatch
def run_method(
    cfg: FLConfig,
    *,
    model: nn.Module | None = None,
    clients: Sequence[Dataset] | None = None,
    test: Dataset | None = None,
    features: CachedFeatures | None = None,
    closed_form: tuple[np.ndarray, np.ndarray | None] | None = None,
    stage1_costs: Costs | None = None,
    backend: Backend = "vectorised",
    checkpoint: CheckpointSpec | None = None,
) -> RunResult:
    """Run ``cfg.method`` with whatever inputs it needs (table in the module docstring; the registered
    entry of :data:`~benchmark.fl.method_registry.FL_METHODS` says which). ``checkpoint``: save / resume
    the run (module docstring)."""
    info = FL_METHODS.get(cfg.method)
    inputs = MethodInputs(model, clients, test, features, closed_form, stage1_costs, backend, checkpoint)
    inputs.require(info.needs)
    return info.run(cfg, inputs)
