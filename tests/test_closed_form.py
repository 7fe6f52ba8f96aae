"""Closed-form heads: federated == centralised, oracle == within-class ridge, multi-round == one-shot.

Every comparison is against an independently written formula (benchmark.closed_form.centralised uses
lstsq / np.cov / per-class loops; some formulas are re-derived inline here), never the same code path.
"""

from __future__ import annotations

import numpy as np
import pytest
from closed_form_problems import TOL, hyp, make_problem, problems
from hypothesis import assume, given
from hypothesis import strategies as st

from benchmark.closed_form import (
    CountNoise,
    LinearHead,
    evaluate,
    fed3r_fedcof,
    fed3r_official,
    fedcof,
    fedcof_oracle,
    fedncm,
    get_method,
    list_methods,
    paper_protocol_options,
    participation_schedule,
    register_method,
    ridge_head,
    run_method,
    run_methods,
)
from benchmark.closed_form.heads import solve_gram
from benchmark.closed_form.protocols import protocol_methods
from benchmark.closed_form.stats import augmented_gram_message, check_inputs
from benchmark.errors import ConfigError, UnknownNameError


def assert_heads_close(a: LinearHead, b: LinearHead, tol: float = TOL) -> None:
    np.testing.assert_allclose(a.W, b.W, atol=tol, rtol=0)
    np.testing.assert_allclose(a.b, b.b, atol=tol, rtol=0)




# ------------------------------------------------------------------------------------------------
# federated == centralised for every registered method: tests/contracts/test_closed_form_contract.py


def test_fedcof_oracle_equals_ridge_without_between_class_scatter():
    """Oracle Gram == X^T X - sum_c N_c (mu_c - mu_g)(mu_c - mu_g)^T + gamma (N - C) I (no covariances)."""
    gamma = 0.5
    x, y, clients = make_problem(3, 300, 7, 6, 11)
    x64 = x.astype(np.float64)
    present = np.unique(y)
    mu_g = x64.mean(0)
    between = sum(
        (y == c).sum() * np.outer(x64[y == c].mean(0) - mu_g, x64[y == c].mean(0) - mu_g) for c in present
    )
    gram = x64.T @ x64 - between + gamma * (len(y) - len(present)) * np.eye(7)
    sums = np.stack([x64[y == c].sum(0) for c in range(6)])
    w = np.linalg.solve(gram, sums.T).T
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    np.testing.assert_allclose(fedcof_oracle(x, y, 6, clients, gamma=gamma).W, w, atol=1e-9)


def _fedcof_formula(x, y, clients, num_classes, gamma, ridge=0.0):
    """fedcof Eq. 7, 8, 11 written per class, per client, from the raw client rows (float64)."""
    x = x.astype(np.float64)
    d = x.shape[1]
    per_class: dict[int, list[tuple[int, np.ndarray]]] = {}
    for idx in clients:
        for c in np.unique(y[idx]):
            rows = x[idx][y[idx] == c]
            per_class.setdefault(int(c), []).append((len(rows), rows.mean(0)))
    gram = ridge * np.eye(d)
    sums = np.zeros((num_classes, d))
    n_total = 0
    for c, items in per_class.items():
        n_c = sum(n for n, _ in items)
        mu_c = sum(n * m for n, m in items) / n_c
        k_c = len(items)
        cov = sum(n * np.outer(m - mu_c, m - mu_c) for n, m in items) / (k_c - 1 if k_c > 1 else 1)
        gram += (n_c - 1) * (cov + gamma * np.eye(d))
        sums[c] = n_c * mu_c
        n_total += n_c
    mu_g = sums.sum(0) / n_total
    gram += n_total * np.outer(mu_g, mu_g)
    w = np.linalg.solve(gram, sums.T).T
    norms = np.linalg.norm(w, axis=1, keepdims=True)
    return np.where(norms > 0, w / np.where(norms > 0, norms, 1), 0.0)


@hyp
@given(problems, st.sampled_from([0.1, 1.0]), st.sampled_from([0.0, 0.01]))
def test_fedcof_batched_server_equals_per_class_formula(p, gamma, ridge):
    x, y, clients = make_problem(*p)
    assume(len(np.unique(y)) < len(y))  # otherwise gamma (N - C) = 0 and G is singular (edge-case tests)
    head = fedcof(x, y, p[3], clients, gamma=gamma, ridge=ridge)
    np.testing.assert_allclose(head.W, _fedcof_formula(x, y, clients, p[3], gamma, ridge), atol=TOL)
    assert np.all(head.b == 0)


def test_fedcof_differs_from_ridge_and_ncm():
    """Power check: the equality tests above would notice a method silently replaced by another."""
    x, y, clients = make_problem(1, 400, 6, 5, 10)
    heads = [fedncm(x, y, 5, clients), fed3r_fedcof(x, y, 5, clients), fedcof(x, y, 5, clients, gamma=1.0)]
    for i in range(3):
        for j in range(i + 1, 3):
            assert np.abs(heads[i].W - heads[j].W).max() > 1e-3


# ------------------------------------------------------------------------------------------------
# solvers


def test_solvers_agree_on_a_well_conditioned_problem():
    x, y, clients = make_problem(2, 500, 8, 5, 10)
    ref = fedcof(x, y, 5, clients, gamma=1.0, solver="solve64")
    for solver in ("pinv32", "solve32", "pinv64"):
        head = fedcof(x, y, 5, clients, gamma=1.0, solver=solver)
        assert head.W.dtype == (np.float32 if solver.endswith("32") else np.float64)
        np.testing.assert_allclose(head.W, ref.W, atol=1e-4)
    for fn in (fed3r_fedcof, fed3r_official, fedncm):
        np.testing.assert_allclose(fn(x, y, 5, clients, solver="pinv32").W, fn(x, y, 5, clients).W, atol=1e-4)


def test_pinv32_cutoff_matches_torch_pinv():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    # Kept directions well above the cut-off (20 * eps32 * sigma_1 ~ 2.4e-6), dropped ones far below it, so
    # the comparison does not hinge on fp32 round-off of singular values that sit at the threshold.
    s = np.concatenate([np.logspace(0, -3, 15), np.full(5, 1e-9)])
    g = ((q * s) @ q.T).astype(np.float32)
    b = rng.normal(size=(20, 3)).astype(np.float32)
    ours = solve_gram(g, b, "pinv32")
    theirs = (torch.linalg.pinv(torch.from_numpy(g)) @ torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3 * np.abs(theirs).max())
    # The cut-off is what makes pinv32 differ from an exact solve: small directions are dropped.
    exact = np.linalg.solve(g.astype(np.float64), b.astype(np.float64))
    assert np.abs(exact).max() > 1e3 * np.abs(ours).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pinv_of_a_rank_deficient_gram_matches_torch_and_inverts_on_the_row_space(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 30))
    g = (x.T @ x).astype(dtype)  # rank 12 of 30: the cut-off drops 18 directions
    b = rng.normal(size=(30, 4)).astype(dtype)
    ours = solve_gram(g, b, "pinv32" if dtype == np.float32 else "pinv64")
    theirs = (torch.linalg.pinv(torch.from_numpy(g)) @ torch.from_numpy(b)).numpy()
    tol = 1e-3 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=tol * np.abs(theirs).max())
    p = x.T @ np.linalg.pinv(x.T)  # projector onto the row space of x, the range of g
    np.testing.assert_allclose(g.astype(np.float64) @ ours, p @ b, rtol=0, atol=50 * tol * np.abs(b).max())


def test_solve64_refuses_singular_gram_and_pinv_handles_it():
    g = np.outer([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(ConfigError, match="solve64"):
        solve_gram(g, np.ones((3, 1)), "solve64")
    # one client holding one sample of each of two classes: FedCOF's Gram is rank one, yet Cholesky succeeds
    # with a 1.8e-8 pivot that passes the conditioning test, and LU then hits an exact zero pivot
    x, y, clients = make_problem(2, 2, 2, 2, 1)
    with pytest.raises(ConfigError, match="solve64"):
        fedcof(x, y, 2, clients, gamma=1.0)
    out = solve_gram(g, np.array([[1.0], [2.0], [3.0]]), "pinv64")
    np.testing.assert_allclose(g @ out, [[1.0], [2.0], [3.0]], atol=1e-12)
    with pytest.raises(ConfigError, match="unknown solver"):
        solve_gram(g, np.ones((3, 1)), "cholesky")


# ------------------------------------------------------------------------------------------------
# FedNCM bias option


def test_fedncm_random_bias_reproduces_nn_linear_init_range():
    x, y, clients = make_problem(0, 100, 16, 4, 5)
    zero = fedncm(x, y, 4, clients)
    a = fedncm(x, y, 4, clients, bias="random", seed=3)
    b = fedncm(x, y, 4, clients, bias="random", seed=3)
    c = fedncm(x, y, 4, clients, bias="random", seed=4)
    np.testing.assert_array_equal(a.W, zero.W)
    assert np.all(zero.b == 0)
    np.testing.assert_array_equal(a.b, b.b)
    assert not np.array_equal(a.b, c.b)
    assert np.all(np.abs(a.b) <= 1 / np.sqrt(16)) and np.any(a.b != 0)
    with pytest.raises(ConfigError):
        fedncm(x, y, 4, clients, bias="torch")


# ------------------------------------------------------------------------------------------------
# multi-round


def test_participation_schedule_reference_semantics():
    sched = participation_schedule(100, participation=0.3, seed=0)
    assert all(len(s.sampled) == 30 for s in sched)
    new = np.concatenate([s.new for s in sched])
    assert sorted(new.tolist()) == list(range(100))  # every client exactly once
    draws = [s.draw for s in sched]
    assert draws == sorted(set(draws)) and draws[0] == 0
    seen: set[int] = set()
    for s in sched:
        assert set(s.new.tolist()) == set(s.sampled.tolist()) - seen and len(s.new) > 0
        seen |= set(s.new.tolist())
    again = participation_schedule(100, participation=0.3, seed=0)
    assert [s.new.tolist() for s in again] == [s.new.tolist() for s in sched]
    other = participation_schedule(100, participation=0.3, seed=1)
    assert [s.new.tolist() for s in other] != [s.new.tolist() for s in sched]
    short = participation_schedule(100, participation=0.3, seed=0, max_rounds=2)
    assert len(short) == 2 and sum(len(s.new) for s in short) < 100


@pytest.mark.parametrize(
    ("name", "opts"),
    [
        ("fedncm", {}),
        ("fed3r_fedcof", {}),
        ("fed3r_official", {}),
        ("fedcof", {"gamma": 1.0}),
        ("fedcof", {"gamma": 1.0, "subsets": 3, "noise": {"kind": "laplace", "epsilon": 0.5}, "seed": 7}),
        ("fedcof_oracle", {"gamma": 0.1}),
    ],
)
def test_multiround_equals_one_shot_and_each_round_uses_seen_clients(name, opts):
    x, y, clients = make_problem(4, 400, 5, 6, 20)
    xt, yt, _ = make_problem(40, 200, 5, 6, 1)
    one = run_method(name, x, y, xt, yt, clients, 6, **opts)
    multi = run_method(name, x, y, xt, yt, clients, 6, participation=0.3, schedule_seed=2, **opts)
    assert multi.extra["all_clients_seen"]
    assert_heads_close(multi.head, one.head, tol=1e-9)
    assert multi.accuracy == one.accuracy == multi.extra["rounds"][-1]["accuracy"]
    np.testing.assert_array_equal(multi.uplink_floats, one.uplink_floats)
    rounds = multi.extra["rounds"]
    assert len(rounds) > 1 and rounds[-1]["clients_seen"] == 20
    # Round r's accuracy is that of a one-shot fit on the clients seen up to round r.
    sched = participation_schedule(20, participation=0.3, seed=2)
    seen = np.zeros(20, dtype=bool)
    for rec, s in zip(rounds, sched, strict=True):
        seen[s.new] = True
        partial = [c if seen[k] else c[:0] for k, c in enumerate(clients)]
        if not any(len(c) for c in partial):
            continue
        assert rec["accuracy"] == pytest.approx(run_method(name, x, y, xt, yt, partial, 6, **opts).accuracy)


# ------------------------------------------------------------------------------------------------
# uplink counts, evaluation, registry


def test_uplink_float_counts_match_the_protocols():
    d, c = 4, 5
    x, y, clients = make_problem(6, 120, d, c, 6)
    clients.append(np.zeros(0, np.int64))
    m = np.array([len(np.unique(y[idx])) for idx in clients])
    xt, yt = x[:10], y[:10]

    def up(name, **kw):
        return run_method(name, x, y, xt, yt, clients, c, **kw).uplink_floats

    np.testing.assert_array_equal(up("fedncm"), m * (d + 1))
    np.testing.assert_array_equal(up("fedcof", gamma=1.0), m * (d + 1))
    np.testing.assert_array_equal(up("fed3r_fedcof"), np.where(m > 0, d * d + m * d, 0))
    np.testing.assert_array_equal(up("fed3r_official"), np.where(m > 0, (d + 1) ** 2 + (d + 1) * c, 0))
    np.testing.assert_array_equal(up("fedcof_oracle", gamma=1.0), m * (d + 1 + d * d))
    np.testing.assert_array_equal(up("fedcof_oracle", gamma=1.0, covariance="diagonal"), m * (2 * d + 1))
    np.testing.assert_array_equal(up("fedcof_oracle", gamma=1.0, covariance="spherical"), m * (d + 2))
    assert up("fedcof", gamma=1.0)[-1] == 0
    assert run_method("centralised_ncm", x, y, xt, yt, clients, c).uplink_floats is None


def test_evaluate_is_top1_percent():
    head = LinearHead(np.eye(3), np.zeros(3))
    x = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [0, 2.0, 1.0]])
    assert evaluate(head, x, np.array([0, 1, 2, 2])) == 75.0
    assert (
        evaluate(LinearHead(np.zeros((3, 3)), np.array([0.0, 0.0, 1.0])), x, np.array([2, 2, 2, 0])) == 75.0
    )
    with pytest.raises(ConfigError):
        evaluate(head, x[:, :2], np.array([0, 1, 2, 2]))


def test_registry_lists_and_rejects_unknown_names():
    names = list_methods()
    for name in ("fedncm", "fed3r_fedcof", "fed3r_official", "fedcof", "fedcof_oracle", "centralised_ncm"):
        assert name in names
        assert get_method(name).name == name
    with pytest.raises(UnknownNameError) as err:
        get_method("fed3r")
    assert "fed3r_fedcof" in str(err.value) and "fed3r_official" in str(err.value)
    with pytest.raises(ValueError, match="registered twice"):
        register_method("fedncm", summary="duplicate")(lambda *a, **k: None)


def test_run_method_centralised_and_paper_protocol():
    x, y, clients = make_problem(8, 300, 5, 4, 6)
    xt, yt, _ = make_problem(9, 200, 5, 4, 1)
    res = run_method("centralised_ridge", x, y, xt, yt, clients, 4, bias=True)
    assert 0.0 <= res.accuracy <= 100.0
    assert_heads_close(res.head, ridge_head(x, y, 4, bias=True))
    with pytest.raises(ConfigError):
        run_method("centralised_ncm", x, y, xt, yt, clients, 4, participation=0.3)
    opts = paper_protocol_options("fedcof", model_name="mobilenet_v2")
    assert opts == {"gamma": 0.1, "ridge": 0.0, "single_client": "zero", "solver": "pinv32"}
    assert paper_protocol_options("fed3r_fedcof")["solver"] == "pinv32"
    assert paper_protocol_options("fed3r_official")["solver"] == "solve32"
    assert paper_protocol_options("fedncm", paper="legate2023")["bias"] == "zero"  # the paper's text
    assert paper_protocol_options("fedncm", paper="legate2023-code")["bias"] == "torch_default_init"  # its code (issue 26 name)
    multi = paper_protocol_options("fedcof", paper="fedcof-multiround", model_name="squeezenet1_1")
    assert multi["ridge"] == multi["gamma"] == 1.0 and multi["single_client"] == "path_b_noise"
    for name in [m for m in protocol_methods("fedcof") if get_method(m).federated]:
        kw = paper_protocol_options(name, model_name="vit_b16")
        assert run_method(name, x, y, xt, yt, clients, 4, **kw).head.W.dtype == np.float32
    with pytest.raises(ConfigError):
        paper_protocol_options("fedcof")  # needs model_name


def test_noise_option_accepts_dataclass_or_dict():
    x, y, clients = make_problem(10, 200, 4, 3, 8)
    a = fedcof(x, y, 3, clients, gamma=1.0, noise=CountNoise("gaussian", 0.5), seed=1)
    b = fedcof(x, y, 3, clients, gamma=1.0, noise={"kind": "gaussian", "epsilon": 0.5}, seed=1)
    np.testing.assert_array_equal(a.W, b.W)


def test_check_inputs_returns_int64_clients():
    x, y, clients = make_problem(0, 30, 3, 2, 3)
    _, labels, out = check_inputs(x, y.astype(np.int32), 2, [c.astype(np.int32) for c in clients])
    assert labels.dtype == np.int64 and all(c.dtype == np.int64 for c in out)


# ------------------------------------------------------------------------------------------------
# several methods in one pass over the clients


@hyp
@given(problems, st.sampled_from(["solve64", "pinv32"]))
def test_run_methods_gives_each_method_exactly_its_solo_result(p, solver):
    """Shared client moments change nothing: heads, uplink and accuracy are bit-identical to run_method."""
    x, y, clients = make_problem(*p)
    xt, yt, _ = make_problem(p[0] + 1, 30, p[2], p[3], 1)
    c = p[3]
    methods = {
        "fedncm": {"solver": solver},
        "fed3r_fedcof": {"lam": 0.01, "solver": solver},
        "fed3r_official": {"lam": 0.01, "solver": "solve32" if solver == "pinv32" else solver},
        "fedcof": {"gamma": 1.0, "solver": solver},
        "fedcof_oracle": {"gamma": 1.0, "solver": solver},
        "centralised_ncm": {},
    }
    solo = {}
    for name, opts in list(methods.items()):
        try:
            solo[name] = run_method(name, x, y, xt, yt, clients, c, **opts)
        except ConfigError:  # a degenerate draw (singular Gram): the joint run must refuse it too
            with pytest.raises(ConfigError):
                run_methods({name: opts}, x, y, xt, yt, clients, c)
            del methods[name]
    joint = run_methods(methods, x, y, xt, yt, clients, c)
    assert list(joint) == list(methods)
    for name in methods:
        np.testing.assert_array_equal(joint[name].head.W, solo[name].head.W)
        np.testing.assert_array_equal(joint[name].head.b, solo[name].head.b)
        assert joint[name].accuracy == solo[name].accuracy
        if solo[name].uplink_floats is not None:
            np.testing.assert_array_equal(joint[name].uplink_floats, solo[name].uplink_floats)
        assert joint[name].extra["wall_s"] >= 0.0
    if "fedcof" in methods:
        assert joint["fedcof"].extra["total_means"] == solo["fedcof"].extra["total_means"]


def test_run_methods_runs_multiround_and_subset_options_on_their_own():
    x, y, clients = make_problem(3, 300, 5, 4, 10)
    xt, yt, _ = make_problem(4, 100, 5, 4, 1)
    methods = {
        "fedcof": {"gamma": 1.0, "participation": 0.3, "schedule_seed": 2},
        "fedcof_oracle": {"gamma": 1.0},
        "fedncm": {},
    }
    methods_sub = {"fedcof": {"gamma": 1.0, "subsets": 3, "seed": 5}, "fedncm": {}}
    joint = run_methods(methods, x, y, xt, yt, clients, 4)
    assert "rounds" in joint["fedcof"].extra and "joint_with" not in joint["fedcof"].extra
    assert joint["fedncm"].extra["joint_with"] == ["fedcof_oracle", "fedncm"]
    sub = run_methods(methods_sub, x, y, xt, yt, clients, 4)
    solo = run_method("fedcof", x, y, xt, yt, clients, 4, **methods_sub["fedcof"])
    np.testing.assert_array_equal(sub["fedcof"].head.W, solo.head.W)
    with pytest.raises(UnknownNameError):
        run_methods({"nope": {}}, x, y, xt, yt, clients, 4)


def test_augmented_gram_from_moments_equals_the_explicit_bias_column():
    """Official Fed3R's ``A_k = X~^T X~`` and ``b_k = X~^T Y`` built from the moments, against X~ itself."""
    x, y, _ = make_problem(11, 50, 4, 5, 1)
    msg = augmented_gram_message(7, x, y, 6, np.dtype(np.float64))
    xt = np.hstack([x.astype(np.float64), np.ones((len(x), 1))])
    onehot = np.eye(6)[y]
    np.testing.assert_allclose(msg.a, xt.T @ xt, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(msg.b, xt.T @ onehot, rtol=1e-12, atol=1e-9)
    assert msg.client == 7
