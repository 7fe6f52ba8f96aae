"""Contract of every registered FL method, parametrised over :data:`benchmark.fl.method_registry.FL_METHODS`.

* Every method runs through :func:`benchmark.fl.methods.run_method` from the inputs it declares, reports
  itself under its name, and refuses to run without them.
* A method that names an ``oracle`` equals it with **one client** holding all the data, full participation,
  one local epoch, FedAvg (server lr 1): federated SGD with one client is centralised SGD (legate2023 §4 (d)).
  Same seed, so the same initial head and data order; the whole history and the final weights must match.

A newly registered method gets these obligations automatically
(``test_a_newly_registered_fl_method_gets_the_obligation``; a wrong one fails).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from benchmark.errors import ConfigError
from benchmark.fl.config import FLConfig
from benchmark.fl.lp_features import CachedFeatures
from benchmark.fl.method_registry import FL_METHODS, MethodInputs, register_fl_method
from benchmark.fl.methods import run_lp, run_method
from benchmark.models.classifier import Classifier

D, C, N = 4, 3, 30


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_model() -> Classifier:
    gen = torch.Generator().manual_seed(0)
    body = nn.Sequential(nn.Conv2d(3, D, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    model = Classifier(body, nn.Linear(D, C))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model.to(torch.float64)


def make_inputs(num_clients: int) -> dict[str, object]:
    """Model, image clients, test set, cached features and a closed-form head; ``num_clients`` clients."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(N, 3, 6, 6, generator=gen, dtype=torch.float64)
    y = torch.randint(0, C, (N,), generator=gen)
    parts = np.array_split(np.arange(N), num_clients)
    test = TensorDataset(torch.randn(12, 3, 6, 6, generator=gen, dtype=torch.float64), torch.randint(0, C, (12,)))
    feats = CachedFeatures(
        torch.randn(N, D, generator=gen, dtype=torch.float64), y, list(parts),
        torch.randn(12, D, generator=gen, dtype=torch.float64), test.tensors[1], C,
    )  # fmt: skip
    clients = [TensorDataset(x[p], y[p]) for p in parts]
    head = (np.random.default_rng(2).normal(size=(C, D)), np.zeros(C))
    return {"model": make_model(), "clients": clients, "test": test, "features": feats, "closed_form": head}


def cfg_for(method: str, **kw: object) -> FLConfig:
    base: dict[str, object] = {
        "method": method, "num_clients": 3, "participation": 1.0, "rounds": 2, "batch_size": 8,
        "client_lr": 0.1, "progress": False, "device": "cpu",
    }  # fmt: skip
    base.update(kw)
    return FLConfig(**base)  # type: ignore[arg-type]


def one_client_cfg(method: str) -> FLConfig:
    return cfg_for(
        method, num_clients=1, participation=1.0, local_epochs=1, server_opt="fedavg", server_lr=1.0,
        client_shuffle=True,
    )  # fmt: skip


def check_equals_oracle(name: str) -> None:
    """One-client run of ``name`` == its oracle's run on the same data (AssertionError otherwise)."""
    oracle = FL_METHODS.get(name).oracle
    assert oracle is not None
    inputs = make_inputs(1)
    cfg = one_client_cfg(name)
    fed = run_method(cfg, **copy.deepcopy(inputs))  # type: ignore[arg-type]
    ref = run_method(replace(cfg, method=oracle), **copy.deepcopy(inputs))  # type: ignore[arg-type]
    assert [r.test_acc for r in fed.history] == [r.test_acc for r in ref.history]
    assert fed.head_state.keys() == ref.head_state.keys() and fed.head_state
    for k in fed.head_state:
        np.testing.assert_allclose(fed.head_state[k], ref.head_state[k], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", FL_METHODS.names())
def test_method_runs_from_its_declared_inputs(name: str) -> None:
    info = FL_METHODS.get(name)
    assert info.oracle is None or FL_METHODS.get(info.oracle).centralised, f"{name}: oracle must be centralised"
    res = run_method(cfg_for(name), **make_inputs(3))  # type: ignore[arg-type]
    assert res.method == name and 0.0 <= res.reported_acc <= 1.0
    if info.centralised:
        assert res.costs.total_bytes == 0
    for missing in info.needs:
        given = {k: v for k, v in make_inputs(3).items() if k != missing}
        with pytest.raises(ConfigError, match=missing):
            run_method(cfg_for(name), **given)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [n for n, m in FL_METHODS.items() if m.oracle is not None])
def test_one_client_equals_centralised_oracle(name: str) -> None:
    check_equals_oracle(name)


def test_a_newly_registered_fl_method_gets_the_obligation() -> None:
    """A method registered like the real ones is parametrised over; one that is not LP fails the check."""

    def lp_again(cfg: FLConfig, i: MethodInputs):
        return run_lp(cfg, features=i.features, backend=i.backend)  # type: ignore[arg-type]

    def lp_wrong_lr(cfg: FLConfig, i: MethodInputs):
        return run_lp(replace(cfg, client_lr=2 * cfg.client_lr), features=i.features)

    register_fl_method("dummy_lp", summary="LP again", needs=("features",), oracle="lp_oracle")(lp_again)
    register_fl_method("dummy_wrong", summary="LP, double lr", needs=("features",), oracle="lp_oracle")(
        lp_wrong_lr
    )
    try:
        assert {"dummy_lp", "dummy_wrong"} <= set(FL_METHODS.names())
        check_equals_oracle("dummy_lp")
        with pytest.raises(AssertionError):
            check_equals_oracle("dummy_wrong")
    finally:
        FL_METHODS.remove("dummy_lp")
        FL_METHODS.remove("dummy_wrong")
