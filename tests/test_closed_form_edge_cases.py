"""Edge cases of the closed-form heads: each gives a finite, documented result or a clear ConfigError."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.closed_form import (
    fed3r_fedcof,
    fed3r_official,
    fedcof,
    fedcof_oracle,
    fedncm,
    ncm_head,
    ridge_head,
    run_method,
    within_class_head,
)
from benchmark.closed_form.fedcof import FedCOFServer, default_gamma
from benchmark.closed_form.stats import class_means_message
from benchmark.errors import ConfigError, UnknownNameError

ALL = [
    (fedncm, {}),
    (fed3r_fedcof, {}),
    (fed3r_official, {}),
    (fedcof, {"gamma": 1.0}),
    (fedcof_oracle, {"gamma": 1.0}),
]


def data(seed: int = 0, n: int = 60, d: int = 4, c: int = 3):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % c
    x = (rng.normal(size=(n, d)) + 2.0 * np.eye(c, d)[y]).astype(np.float32)
    return x, y.astype(np.int64)


def _fedcof_no_scatter(x, y, c, gamma):
    """Eq. 11 when every class has one client mean: G = gamma (N - C) I + N mu_g mu_g^T."""
    x = x.astype(np.float64)
    present = np.unique(y)
    sums = np.stack([x[y == k].sum(0) for k in range(c)])
    mu_g = x.mean(0)
    g = gamma * (len(y) - len(present)) * np.eye(x.shape[1]) + len(y) * np.outer(mu_g, mu_g)
    w = np.linalg.solve(g, sums.T).T
    return w / np.linalg.norm(w, axis=1, keepdims=True)


@pytest.mark.parametrize(("fn", "kw"), ALL)
def test_one_client_gives_finite_heads(fn, kw):
    x, y = data()
    head = fn(x, y, 3, [np.arange(len(y))], **kw)
    assert np.all(np.isfinite(head.W)) and np.all(np.isfinite(head.b))


def test_one_client_fedcof_has_no_scatter_only_shrinkage():
    """K_c = 1 for every class: reference divides by K_c, the covariance is 0 and only gamma I remains."""
    x, y = data()
    np.testing.assert_allclose(
        fedcof(x, y, 3, [np.arange(len(y))], gamma=1.0).W, _fedcof_no_scatter(x, y, 3, 1.0)
    )


def test_class_on_one_client_only_modes():
    x, y = data(n=90)
    idx = np.arange(90)
    # Class 2 lives on client 0 only; classes 0 and 1 are spread over three clients.
    c2 = idx[y == 2]
    rest = idx[y != 2]
    clients = [c2, rest[0::3], rest[1::3], rest[2::3]]
    zero = fedcof(x, y, 3, clients, gamma=1.0)
    assert np.all(np.isfinite(zero.W))
    with pytest.raises(ConfigError, match="single client mean"):
        fedcof(x, y, 3, clients, gamma=1.0, single_client="error")
    noisy = fedcof(x, y, 3, clients, gamma=1.0, single_client="path_b_noise", seed=1)
    assert np.all(np.isfinite(noisy.W)) and np.abs(noisy.W - zero.W).max() > 0
    # With "zero" the class's scatter is exactly absent from G (only its (N_c - 1) gamma I remains).
    server = FedCOFServer(3, 4, gamma=0.0)
    for k, cl in enumerate(clients):
        server.add(class_means_message(k, x[cl], y[cl], np.dtype(np.float64)))
    full = server.statistics().scatter
    server2 = FedCOFServer(3, 4, gamma=0.0)
    for k, cl in enumerate(clients[1:]):
        server2.add(class_means_message(k, x[cl], y[cl], np.dtype(np.float64)))
    np.testing.assert_allclose(full, server2.statistics().scatter, atol=1e-9)


@pytest.mark.parametrize(("fn", "kw"), ALL)
def test_empty_clients_change_nothing(fn, kw):
    x, y = data()
    clients = [np.arange(0, 30), np.arange(30, 60)]
    with_empty = [np.zeros(0, np.int64), clients[0], np.zeros(0, np.int64), clients[1]]
    a, b = fn(x, y, 3, clients, **kw), fn(x, y, 3, with_empty, **kw)
    np.testing.assert_allclose(a.W, b.W, atol=1e-12)
    np.testing.assert_allclose(a.b, b.b, atol=1e-12)


def test_empty_client_sends_nothing():
    x, y = data()
    res = run_method("fedcof", x, y, x, y, [np.arange(60), np.zeros(0, np.int64)], 3, gamma=1.0)
    assert res.uplink_floats[1] == 0 and res.uplink_floats[0] > 0


def test_d_greater_than_n():
    rng = np.random.default_rng(3)
    n, d, c = 12, 40, 3
    y = np.arange(n) % c
    x = rng.normal(size=(n, d)).astype(np.float32)
    clients = [np.arange(0, 5), np.arange(5, 12)]
    # Ridge methods stay exact (lam > 0 makes the Gram positive definite).
    np.testing.assert_allclose(fed3r_fedcof(x, y, c, clients).W, ridge_head(x, y, c).W, atol=1e-6)
    np.testing.assert_allclose(
        fed3r_official(x, y, c, clients).W, ridge_head(x, y, c, bias=True).W, atol=1e-6
    )
    np.testing.assert_allclose(fedncm(x, y, c, clients).W, ncm_head(x, y, c).W, atol=1e-12)
    # FedCOF: gamma (N - C) I > 0 keeps G positive definite; gamma = 0 leaves it rank deficient.
    assert np.all(np.isfinite(fedcof(x, y, c, clients, gamma=1.0).W))
    np.testing.assert_allclose(
        fedcof_oracle(x, y, c, clients, gamma=1.0).W, within_class_head(x, y, c, gamma=1.0).W, atol=1e-6
    )
    with pytest.raises(ConfigError, match="solve64"):
        fedcof(x, y, c, clients, gamma=0.0)
    assert np.all(np.isfinite(fedcof(x, y, c, clients, gamma=0.0, solver="pinv64").W))
    assert np.all(np.isfinite(fed3r_fedcof(x, y, c, clients, lam=0.0, solver="pinv32").W))
    with pytest.raises(ConfigError):
        fed3r_fedcof(x, y, c, clients, lam=0.0)


def test_duplicate_features():
    x, _ = data(n=3)
    x = np.tile(x, (10, 1))  # every class is one repeated vector (row i has class i % 3)
    y = np.tile(np.arange(3), 10)
    clients = [np.arange(0, 15), np.arange(15, 30)]
    for fn, kw in ALL:
        head = fn(x, y, 3, clients, **kw)
        assert np.all(np.isfinite(head.W))
    # Identical client means: the estimated covariance is exactly zero, so FedCOF = "no scatter" formula.
    np.testing.assert_allclose(
        fedcof(x, y, 3, clients, gamma=1.0).W, _fedcof_no_scatter(x, y, 3, 1.0), atol=1e-9
    )
    np.testing.assert_allclose(fedncm(x, y, 3, clients).W, ncm_head(x, y, 3).W, atol=1e-12)


@pytest.mark.parametrize(("fn", "kw"), ALL)
def test_class_absent_everywhere_gets_zero_row(fn, kw):
    x, y = data()
    head = fn(x, y, 5, [np.arange(30), np.arange(30, 60)], **kw)  # classes 3 and 4 have no sample
    assert np.all(head.W[3:] == 0) and np.all(head.b[3:] == 0)
    assert np.all(np.linalg.norm(head.W[:3], axis=1) > 0.5)


def test_noisy_counts_can_drop_a_class_everywhere():
    x, y = data(n=30)
    res = run_method(
        "fedcof",
        x,
        y,
        x,
        y,
        [np.arange(15), np.arange(15, 30)],
        3,
        gamma=1.0,
        noise={"kind": "uniform", "epsilon": 1.0},
    )
    assert res.extra["total_means"] == 6
    # A class of one sample per client with huge Gaussian noise is dropped by some client.
    x1, y1 = data(n=6)
    clients = [np.array([k, k + 3]) for k in range(3)]
    out = run_method(
        "fedcof", x1, y1, x1, y1, clients, 3, gamma=1.0, noise={"kind": "gaussian", "epsilon": 1e-4}
    )
    assert out.extra["total_means"] < 6
    assert np.all(np.isfinite(out.head.W))


def test_all_clients_empty_or_bad_partition_is_a_clear_error():
    x, y = data()
    with pytest.raises(ConfigError, match="no client holds any sample"):
        fedncm(x, y, 3, [np.zeros(0, np.int64)])
    with pytest.raises(ConfigError, match="clients is empty"):
        fedncm(x, y, 3, [])
    with pytest.raises(ConfigError, match="repeats a sample"):
        fedncm(x, y, 3, [np.arange(10), np.arange(5, 20)])
    with pytest.raises(ConfigError, match="outside"):
        fedncm(x, y, 3, [np.arange(61)])
    with pytest.raises(ConfigError, match="labels must lie"):
        fedncm(x, y, 2, [np.arange(60)])
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ConfigError, match="NaN"):
        fedncm(bad, y, 3, [np.arange(60)])
    with pytest.raises(ConfigError, match="labels shape"):
        fedncm(x, y[:-1], 3, [np.arange(59)])


def test_option_errors_are_clear():
    x, y = data()
    clients = [np.arange(60)]
    with pytest.raises(ConfigError, match="needs gamma"):
        fedcof(x, y, 3, clients)
    with pytest.raises(ConfigError, match="covariance"):
        fedcof(x, y, 3, clients, gamma=1.0, covariance="block")
    with pytest.raises(ConfigError, match="single_client"):
        fedcof(x, y, 3, clients, gamma=1.0, single_client="drop")
    with pytest.raises(ConfigError, match="subsets"):
        fedcof(x, y, 3, clients, gamma=1.0, subsets=0)
    with pytest.raises(ConfigError, match="unknown solver"):
        fed3r_fedcof(x, y, 3, clients, solver="lu")
    with pytest.raises(ConfigError, match="epsilon"):
        fedcof(x, y, 3, clients, gamma=1.0, noise={"kind": "uniform", "epsilon": 2.0})
    with pytest.raises(ConfigError, match="lam"):
        fed3r_official(x, y, 3, clients, lam=-1.0)
    assert fedcof(x, y, 3, clients, model_name="mobilenet_v2").W.shape == (3, 4)


def test_default_gamma():
    assert default_gamma("squeezenet1_1") == 1.0
    assert default_gamma("mobilenet_v2") == 0.1
    assert default_gamma("MobileNetV2") == 0.1
    assert default_gamma("vit_b16") == 1.0
    assert default_gamma("resnet18") == 1.0
    with pytest.raises(UnknownNameError, match="gamma"):
        default_gamma("convnext_tiny")


def test_single_sample_classes_everywhere():
    """N = C: gamma (N - C) = 0 and G = N mu_g mu_g^T has rank 1: solve64 refuses, pinv gives a head."""
    x, y = data(n=3)
    with pytest.raises(ConfigError, match="solve64"):
        fedcof(x, y, 3, [np.arange(3)], gamma=1.0)
    assert np.all(np.isfinite(fedcof(x, y, 3, [np.arange(3)], gamma=1.0, solver="pinv32").W))
    # The oracle gives single-sample classes weight n - 1 = 0 and still works when other classes have data.
    x2, y2 = data(n=30)
    x2 = np.vstack([x2, x2[:1]])
    y2 = np.append(y2, 3)
    head = fedcof_oracle(x2, y2, 4, [np.arange(31)], gamma=1.0)
    np.testing.assert_allclose(head.W, within_class_head(x2, y2, 4, gamma=1.0).W, atol=1e-9)
