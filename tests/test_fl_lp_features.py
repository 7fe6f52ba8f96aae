"""LP on cached features: the vectorised round equals the per-client loop, and cached-feature LP equals LP with
the frozen body in the loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from benchmark.errors import ConfigError
from benchmark.fl.config import FLConfig
from benchmark.fl.lp_features import CachedFeatures, head_module, init_head_state, run_lp_features
from benchmark.fl.methods import centralised_lp_oracle, run_lp
from benchmark.models.classifier import Classifier

D, C, K = 12, 5, 8


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_features(dtype: torch.dtype = torch.float64, seed: int = 0) -> CachedFeatures:
    """Class-dependent features; clients of uneven size (one empty, some with partial last batches)."""
    g = np.random.default_rng(seed)
    n = 700
    y = g.integers(0, C, n)
    means = g.standard_normal((C, D)) * 1.5
    x = means[y] + g.standard_normal((n, D))
    order = g.permutation(n)
    cuts = np.sort(g.choice(np.arange(1, n), K - 2, replace=False))
    parts = np.split(order, cuts)
    parts.insert(3, np.array([], dtype=np.int64))  # an empty client
    yt = g.integers(0, C, 200)
    xt = means[yt] + g.standard_normal((200, D))
    return CachedFeatures(
        torch.as_tensor(x, dtype=dtype),
        torch.as_tensor(y),
        [p.astype(np.int64) for p in parts],
        torch.as_tensor(xt, dtype=dtype),
        torch.as_tensor(yt),
    )


def cfg_for(**kw: object) -> FLConfig:
    base = {
        "num_clients": K,
        "participation": 0.5,
        "rounds": 4,
        "batch_size": 16,
        "client_lr": 0.2,
        "progress": False,
        "device": "cpu",
    }
    base.update(kw)
    return FLConfig(**base)  # type: ignore[arg-type]


def compare(a, b, tol: float) -> None:
    for ra, rb in zip(a.history, b.history, strict=True):
        assert ra.round == rb.round and ra.clients == rb.clients
        assert abs(ra.test_loss - rb.test_loss) <= tol * max(1.0, abs(ra.test_loss))
        assert abs(ra.train_loss - rb.train_loss) <= tol * max(1.0, abs(ra.train_loss)) or np.isnan(
            ra.train_loss
        )
        assert (ra.uplink_bytes, ra.downlink_bytes, ra.compute_f) == (
            rb.uplink_bytes,
            rb.downlink_bytes,
            rb.compute_f,
        )
    for k, v in a.head_state.items():
        np.testing.assert_allclose(v, b.head_state[k], rtol=0, atol=tol * max(1.0, float(np.abs(v).max())))


OPTIONS = [
    {},
    {"client_momentum": 0.9, "client_weight_decay": 1e-3},
    {"prox_mu": 0.5, "local_epochs": 2},
    {"client_shuffle": True, "local_epochs": 3, "server_opt": "fedadam", "server_lr": 0.05},
    {"server_opt": "fedavgm", "server_lr": 0.5, "aggregation_weights": "uniform", "participation": 1.0},
    {"server_opt": "fedadam", "server_lr": 0.05, "server_adam_tau": 1e-3, "client_lr_milestones": (2,)},
]


@pytest.mark.parametrize("kind", ["linear", "mlp"])
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "reference")
def test_vectorised_equals_per_client_loop_float64(kind: str, opts: dict) -> None:
    feats = make_features()
    cfg = cfg_for(head=kind, mlp_hidden=7, **opts)
    head = init_head_state(kind, D, C, np.random.default_rng(1), hidden=7)
    vec = run_lp_features(feats, cfg, head, backend="vectorised")
    loop = run_lp_features(feats, cfg, head, backend="loop")
    compare(vec, loop, 1e-12)
    assert vec.history[-1].test_acc == loop.history[-1].test_acc
    assert vec.meta["backend"] == "vectorised" and loop.meta["backend"] == "loop"


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_vectorised_equals_per_client_loop_float32(kind: str) -> None:
    feats = make_features(torch.float32)
    cfg = cfg_for(
        head=kind, client_momentum=0.5, prox_mu=0.1, local_epochs=2, server_opt="fedadam", server_lr=0.02
    )
    head = init_head_state(kind, D, C, np.random.default_rng(2))
    compare(run_lp_features(feats, cfg, head), run_lp_features(feats, cfg, head, backend="loop"), 2e-6)


def test_cached_feature_lp_equals_lp_with_frozen_body_in_the_loop() -> None:
    """Frozen body in eval mode + fixed data => cached features are exact (module docstring of lp_features)."""
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(6, D), nn.BatchNorm1d(D), nn.ReLU()).double()
    with torch.no_grad():
        body[1].running_mean.uniform_(-0.5, 0.5)
        body[1].running_var.uniform_(0.5, 1.5)
    body.eval()
    g = np.random.default_rng(4)
    raw = torch.as_tensor(g.standard_normal((300, 6)))
    y = torch.as_tensor(g.integers(0, C, 300))
    raw_t = torch.as_tensor(g.standard_normal((80, 6)))
    y_t = torch.as_tensor(g.integers(0, C, 80))
    parts = np.array_split(np.arange(300), K)
    with torch.no_grad():
        feats = CachedFeatures(body(raw), y, parts, body(raw_t), y_t)
    cfg = cfg_for(server_opt="fedadam", server_lr=0.05, client_shuffle=True)
    cached = run_lp(cfg, features=feats)
    model = Classifier(body, nn.Linear(D, C).double())
    clients = [TensorDataset(raw[p], y[p]) for p in parts]
    in_loop = run_lp(cfg, model=model, clients=clients, test=TensorDataset(raw_t, y_t))
    compare(cached, in_loop, 1e-12)
    assert [r.test_acc for r in cached.history] == [r.test_acc for r in in_loop.history]


def test_feature_path_refuses_quirks_that_need_the_body() -> None:
    feats = make_features()
    head = init_head_state("linear", D, C, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="lp_body_mode"):
        run_lp_features(feats, cfg_for(lp_body_mode="train"), head)
    with pytest.raises(ConfigError, match="server_opt_drift"):
        run_lp_features(feats, cfg_for(frozen_params="server_opt_drift"), head)
    with pytest.raises(ConfigError):
        run_lp_features(feats, cfg_for(num_clients=K + 1), head)
    with pytest.raises(ConfigError):
        CachedFeatures(feats.train_x, feats.train_y, [np.array([10_000])], feats.test_x, feats.test_y)


def test_lp_costs_count_the_head_only() -> None:
    feats = make_features()
    res = run_lp(cfg_for(rounds=3), features=feats)
    floats = C * D + C  # weight and bias (legate2023 Eq. 3 counts only the C*d weights)
    per_round = [len(r.clients) for r in res.history[1:]]
    assert res.costs.uplink_bytes == res.costs.downlink_bytes == 4 * floats * sum(per_round)
    sizes = feats.client_sizes()
    assert res.costs.compute_f == sum(int(sizes[list(r.clients)].sum()) for r in res.history[1:])
    mlp = run_lp(cfg_for(rounds=1, head="mlp"), features=feats)
    assert mlp.meta["uplink_floats_per_client"] == (D * D + D) * 2 + C * D + C


def test_init_head_matches_nn_linear_default_distribution() -> None:
    state = init_head_state("linear", 400, 50, np.random.default_rng(0))
    bound = 1 / np.sqrt(400)
    assert state["weight"].dtype == np.float32 and state["weight"].shape == (50, 400)
    assert np.abs(state["weight"]).max() <= bound and np.abs(state["weight"]).max() > 0.99 * bound
    ref = nn.Linear(400, 50).weight.detach().numpy()  # same U(-1/sqrt(d), 1/sqrt(d)) family
    assert abs(state["weight"].std() - ref.std()) < 0.02 * ref.std()
    mod = head_module(init_head_state("mlp", 6, 3, np.random.default_rng(0), hidden=4))
    assert isinstance(mod, nn.Sequential) and mod(torch.zeros(2, 6)).shape == (2, 3)


def test_lp_oracle_equals_centralised_sgd() -> None:
    feats = make_features()
    head = init_head_state("linear", D, C, np.random.default_rng(5))
    res = centralised_lp_oracle(feats, cfg_for(rounds=2, batch_size=32), head=head, shuffle=False)
    lin = head_module(head, torch.float64)
    pooled = np.concatenate(feats.client_indices)
    x, y = feats.train_x[pooled], feats.train_y[pooled]
    opt = torch.optim.SGD(lin.parameters(), lr=0.2)
    for _ in range(2):
        for s in range(0, len(pooled), 32):
            opt.zero_grad()
            nn.functional.cross_entropy(lin(x[s : s + 32]), y[s : s + 32]).backward()
            opt.step()
    np.testing.assert_allclose(res.head_state["weight"], lin.weight.detach().numpy(), rtol=0, atol=1e-12)
    assert res.costs.total_bytes == 0
