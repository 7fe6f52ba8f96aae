"""The federated round engine: equivalences with centralised SGD, server optimisers against hand computations
and torch, frozen vs drifting bodies, BatchNorm handling, seeding, costs, selection and plots.

All models are tiny conv nets with BatchNorm, mostly in float64 so equalities can be tight.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from tiny_nets import FEATURES, TinyBody, seeded_classifier
from torch import nn
from torch.utils.data import TensorDataset

from benchmark.apps.plots import plot_curves
from benchmark.errors import ConfigError
from benchmark.federated.history import Costs, RoundRecord
from benchmark.federated.sampling import ClientSampler
from benchmark.federated.server_opt import FedAdam, FedAvg, FedAvgM, make_server_optimizer
from benchmark.fl.client import batch_schedule, local_sgd
from benchmark.fl.config import FLConfig, flsim_epochs_to_rounds
from benchmark.fl.engine import run_federated, summarise
from benchmark.fl.lp_features import CachedFeatures
from benchmark.fl.methods import (
    closed_form_head,
    reinit_default,
    run_lp,
    run_lp_then_ft,
    run_method,
    run_two_stage,
    seeded_build,
)
from benchmark.models.classifier import Classifier
from benchmark.seeding import RunSeeds

C, D = 3, FEATURES  # classes, feature dim of the tiny body


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_model(seed: int = 0, dtype: torch.dtype = torch.float64) -> Classifier:
    return seeded_classifier(TinyBody(), nn.Linear(D, C), seed).to(dtype)


def make_data(
    num_clients: int, sizes: list[int] | None = None, seed: int = 1, dtype: torch.dtype = torch.float64
) -> tuple[list[TensorDataset], TensorDataset]:
    gen = torch.Generator().manual_seed(seed)
    sizes = sizes or [10 + 3 * k for k in range(num_clients)]
    clients = [
        TensorDataset(
            torch.randn(n, 3, 6, 6, generator=gen, dtype=dtype), torch.randint(0, C, (n,), generator=gen)
        )
        for n in sizes
    ]
    test = TensorDataset(
        torch.randn(40, 3, 6, 6, generator=gen, dtype=dtype), torch.randint(0, C, (40,), generator=gen)
    )
    return clients, test


def cfg_for(**kw: object) -> FLConfig:
    base = {
        "num_clients": 4,
        "participation": 0.5,
        "rounds": 3,
        "batch_size": 8,
        "client_lr": 0.1,
        "progress": False,
        "device": "cpu",
    }
    base.update(kw)
    return FLConfig(**base)  # type: ignore[arg-type]


def body_state(model: Classifier) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.body.state_dict().items()}


# ------------------------------------------------------------------------------------------------ equivalences
@pytest.mark.parametrize("bn_stats", ["frozen_global", "aggregate"])
def test_fedavg_one_client_one_step_equals_centralised_sgd(bn_stats: str) -> None:
    model = make_model()
    central = copy.deepcopy(model)
    clients, test = make_data(1, sizes=[13])
    cfg = cfg_for(
        num_clients=1, participation=1.0, rounds=1, batch_size=16, client_lr=0.05, bn_stats=bn_stats
    )
    res = run_federated(model, clients, test, cfg, train_part="all", method="ft")

    opt = torch.optim.SGD(central.parameters(), lr=0.05)
    central.train()
    x, y = clients[0].tensors
    nn.functional.cross_entropy(central(x), y).backward()
    opt.step()
    for (n, p), q in zip(model.named_parameters(), central.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-12, msg=n)
    rm = model.body.bn.running_mean
    if bn_stats == "aggregate":  # the one client's running statistics become the global ones
        torch.testing.assert_close(rm, central.body.bn.running_mean, rtol=0, atol=1e-15)
    else:  # FLSim: never aggregated, stays at the pre-trained value
        assert torch.equal(rm, make_model().body.bn.running_mean)
        assert not torch.equal(rm, central.body.bn.running_mean)
    assert res.history[-1].round == 1 and res.costs.compute_f == 3 * 13


def test_fedprox_mu_zero_equals_fedavg() -> None:
    clients, test = make_data(4)
    runs = []
    for mu in (None, 0.0):
        model = make_model()
        cfg = cfg_for() if mu is None else cfg_for(prox_mu=mu)
        runs.append((run_federated(model, clients, test, cfg, train_part="all", method="ft"), model))
    (a, ma), (b, mb) = runs
    assert [r.test_acc for r in a.history] == [r.test_acc for r in b.history]
    assert [r.train_loss for r in a.history[1:]] == [r.train_loss for r in b.history[1:]]
    for p, q in zip(ma.parameters(), mb.parameters(), strict=True):
        assert torch.equal(p, q)
    # and mu > 0 really changes the run
    model = make_model()
    run_federated(model, clients, test, cfg_for(prox_mu=1.0), train_part="all", method="ft")
    assert not all(torch.equal(p, q) for p, q in zip(model.parameters(), ma.parameters(), strict=True))


def test_fedprox_step_is_gradient_of_proximal_objective() -> None:
    """Engine (one client, full participation, FedAvg) == autograd SGD on CE + mu/2 ||w - w_global||^2."""
    mu, lr = 0.7, 0.05
    model = make_model()
    ref = copy.deepcopy(model)
    anchor = [p.detach().clone() for p in ref.parameters()]
    clients, test = make_data(1, sizes=[21])
    cfg = cfg_for(num_clients=1, participation=1.0, rounds=1, batch_size=8, client_lr=lr, prox_mu=mu)
    run_federated(model, clients, test, cfg, train_part="all", method="ft")
    ref.train()
    x, y = clients[0].tensors
    for idx in batch_schedule(21, 8, 1):
        loss = nn.functional.cross_entropy(ref(x[idx]), y[idx])
        loss = loss + mu / 2 * sum(
            ((p - a) ** 2).sum() for p, a in zip(ref.parameters(), anchor, strict=True)
        )
        grads = torch.autograd.grad(loss, list(ref.parameters()))
        with torch.no_grad():
            for p, g in zip(ref.parameters(), grads, strict=True):
                p -= lr * g
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------------------------ server optimisers
def test_fedadam_one_step_matches_hand_computation() -> None:
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-8, 1e-5
    x0 = [1.0, -2.0, 0.5]
    g0 = [0.3, 0.0, -0.02]
    p = {"w": torch.tensor(x0, dtype=torch.float64)}
    FedAdam(lr, (b1, b2), eps, wd).step(p, {"w": torch.tensor(g0, dtype=torch.float64)})
    expected = []
    for x, g in zip(x0, g0, strict=True):
        g = g + wd * x  # coupled L2 (torch.optim.Adam, reference code)
        m, v = (1 - b1) * g, (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1), v / (1 - b2)
        expected.append(x - lr * m_hat / (math.sqrt(v_hat) + eps))
    np.testing.assert_allclose(p["w"].numpy(), expected, rtol=0, atol=1e-15)
    # the zero-gradient coordinate moved by ~lr because of the coupled weight decay (papers-code §1.7-2)
    assert abs(p["w"][1].item() - x0[1]) == pytest.approx(lr, rel=1e-3)

    # Reddi et al. Alg. 2 variant: no bias correction, tau instead of eps
    tau = 1e-3
    q = {"w": torch.tensor(x0, dtype=torch.float64)}
    FedAdam(lr, (b1, b2), eps, 0.0, tau=tau).step(q, {"w": torch.tensor(g0, dtype=torch.float64)})
    exp_r = [x - lr * (1 - b1) * g / (math.sqrt((1 - b2) * g * g) + tau) for x, g in zip(x0, g0, strict=True)]
    np.testing.assert_allclose(q["w"].numpy(), exp_r, rtol=0, atol=1e-15)


@pytest.mark.parametrize("wd", [0.0, 1e-2])
def test_fedadam_equals_torch_adam_over_steps(wd: float) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    ours = {"w": x.clone()}
    ref = nn.Parameter(x.clone())
    topt = torch.optim.Adam([ref], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd, foreach=False)
    opt = FedAdam(0.01, (0.9, 0.999), 1e-8, wd)
    for _ in range(6):
        g = torch.randn(5, 3, generator=gen, dtype=torch.float64)
        ref.grad = g.clone()
        topt.step()
        opt.step(ours, {"w": g})
    torch.testing.assert_close(ours["w"], ref.detach(), rtol=0, atol=1e-14)


def test_fedavgm_equals_torch_sgd_momentum_and_fedavg_is_average() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, generator=gen, dtype=torch.float64)
    ours, ref = {"w": x.clone()}, nn.Parameter(x.clone())
    topt = torch.optim.SGD([ref], lr=0.3, momentum=0.9)
    opt = FedAvgM(0.3, 0.9)
    for _ in range(4):
        g = torch.randn(4, generator=gen, dtype=torch.float64)
        ref.grad = g.clone()
        topt.step()
        opt.step(ours, {"w": g})
    torch.testing.assert_close(ours["w"], ref.detach(), rtol=0, atol=1e-15)
    # FedAvg with lr 1 on g = x - avg(local) lands on avg(local)
    local = torch.tensor([2.0, 4.0], dtype=torch.float64)
    p = {"w": torch.zeros(2, dtype=torch.float64)}
    FedAvg(1.0).step(p, {"w": p["w"] - local})
    torch.testing.assert_close(p["w"], local, rtol=0, atol=0)


def test_make_server_optimizer_uses_reference_constants() -> None:
    opt = make_server_optimizer(FLConfig(server_opt="fedadam", server_lr=1e-3, progress=False))
    assert opt.describe() == {
        "name": "fedadam",
        "lr": 1e-3,
        "betas": [0.9, 0.999],
        "eps": 1e-8,
        "weight_decay": 1e-5,
        "tau": None,
        "variant": "torch_adam",
    }
    assert make_server_optimizer(FLConfig(progress=False)).describe() == {"name": "fedavg", "lr": 1.0}


# ------------------------------------------------------------------------------------------------ LP and the body
def test_lp_leaves_every_body_tensor_bit_identical_under_fedadam() -> None:
    model = make_model()
    before = body_state(model)
    head_before = model.head.weight.detach().clone()
    clients, test = make_data(4)
    cfg = cfg_for(server_opt="fedadam", server_lr=1e-2, rounds=4, bn_stats="aggregate")
    res = run_lp(cfg, model=model, clients=clients, test=test)
    for k, v in model.body.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert all(r.frozen_drift == 0.0 for r in res.history)
    assert not torch.equal(model.head.weight, head_before)
    assert all(not p.requires_grad for p in model.body.parameters())


@pytest.mark.parametrize("server_opt", ["fedadam", "fedavg"])
def test_drift_option_moves_frozen_body_only_under_fedadam(server_opt: str) -> None:
    lr = 1e-2
    model = make_model()
    before = body_state(model)
    clients, test = make_data(4)
    cfg = cfg_for(server_opt=server_opt, server_lr=lr if server_opt == "fedadam" else 1.0, rounds=1)
    res = run_lp(replace_cfg(cfg, frozen_params="server_opt_drift"), model=model, clients=clients, test=test)
    w = model.body.conv.weight.detach()
    moved = w - before["conv.weight"]
    if server_opt == "fedadam":
        # zero pseudo-gradient + coupled L2: the first Adam step is -lr * g / (|g| + eps) with g = wd * w, i.e.
        # ~lr towards 0 for every |w| >> eps / wd (papers-code §1.7-2)
        g = 1e-5 * before["conv.weight"]
        torch.testing.assert_close(moved, -lr * g / (g.abs() + 1e-8), rtol=1e-9, atol=1e-15)
        big = before["conv.weight"].abs() > lr
        assert torch.all(w[big].abs() < before["conv.weight"][big].abs())
        assert res.history[-1].frozen_drift == pytest.approx(float(moved.abs().max()), rel=0, abs=1e-15)
        assert res.history[-1].frozen_drift > 0
        # the moved body must be downloaded: downlink payload > uplink payload
        assert res.costs.downlink_bytes > res.costs.uplink_bytes
    else:
        assert torch.equal(w, before["conv.weight"]) and res.history[-1].frozen_drift == 0.0


def replace_cfg(cfg: FLConfig, **kw: object) -> FLConfig:
    from dataclasses import replace

    return replace(cfg, **kw)  # type: ignore[arg-type]


def test_lp_body_train_mode_uses_batch_statistics_but_keeps_global_stats() -> None:
    """lp_body_mode='train' (reference): BN normalises with batch stats during LP steps, so the head differs
    from eval-mode LP; with frozen_global the global running statistics are still untouched."""
    clients, test = make_data(4)
    heads = {}
    for mode in ("eval", "train"):
        model = make_model()
        before = body_state(model)
        run_lp(cfg_for(lp_body_mode=mode), model=model, clients=clients, test=test)
        assert all(torch.equal(v, before[k]) for k, v in model.body.state_dict().items())
        heads[mode] = model.head.weight.detach().clone()
    assert not torch.allclose(heads["eval"], heads["train"])


# ------------------------------------------------------------------------------------------------ BatchNorm
def test_bn_frozen_global_vs_aggregate() -> None:
    clients, test = make_data(2, sizes=[12, 30])
    cfg = cfg_for(num_clients=2, participation=1.0, rounds=1, batch_size=8)
    # expected aggregate: example-weighted mean of the clients' local running statistics
    locals_ = []
    for data in clients:
        m = make_model()
        m.train()
        params = dict(m.named_parameters())
        local_sgd(m, params, data, batch_schedule(len(data), 8, 1), lr=0.1)
        locals_.append(m.body.bn.running_mean.detach().clone())
    expected = (12 * locals_[0] + 30 * locals_[1]) / 42

    frozen = make_model()
    run_federated(frozen, clients, test, cfg, train_part="all", method="ft")
    assert torch.equal(frozen.body.bn.running_mean, make_model().body.bn.running_mean)
    assert torch.equal(frozen.body.bn.running_var, make_model().body.bn.running_var)

    agg = make_model()
    res = run_federated(
        agg, clients, test, replace_cfg(cfg, bn_stats="aggregate"), train_part="all", method="ft"
    )
    torch.testing.assert_close(agg.body.bn.running_mean, expected, rtol=0, atol=1e-14)
    assert not torch.equal(agg.body.bn.running_mean, make_model().body.bn.running_mean)
    # aggregated buffers cross the wire: payload = params + running_mean + running_var
    n_params = sum(p.numel() for p in agg.parameters())
    assert res.meta["uplink_floats_per_client"] == n_params + 2 * D
    assert res.costs.uplink_bytes == 2 * (n_params + 2 * D) * 4


# ------------------------------------------------------------------------------------------------ two-stage
def test_two_stage_starts_from_exactly_the_closed_form_head() -> None:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((C, D)).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    model = make_model(dtype=torch.float32)
    clients, test = make_data(4, dtype=torch.float32)
    res = run_two_stage(w, b, cfg_for(rounds=0), stage2="ft", model=model, clients=clients, test=test)
    assert np.array_equal(model.head.weight.detach().numpy(), w)
    assert np.array_equal(model.head.bias.detach().numpy(), b)
    # round 0 of the history is the closed-form classifier's own accuracy
    model.eval()
    with torch.no_grad():
        acc = float((model(test.tensors[0]).argmax(1) == test.tensors[1]).double().mean())
    assert res.history[0].round == 0 and res.history[0].test_acc == acc

    # bias options: zero forces 0; random draws nn.Linear's bias init from the model-init stream
    assert np.array_equal(closed_form_head(w, b, cfg_for(head_bias="zero"))["bias"], np.zeros(C, np.float32))
    rb = closed_form_head(w, b, cfg_for(head_bias="random"))["bias"]
    assert np.all(np.abs(rb) <= 1 / np.sqrt(D)) and not np.array_equal(rb, b)
    assert np.array_equal(rb, closed_form_head(w, None, cfg_for(head_bias="random"))["bias"])
    assert np.array_equal(closed_form_head(w, None, cfg_for())["bias"], np.zeros(C, np.float32))

    # on cached features too
    feats = CachedFeatures(
        torch.randn(40, D), torch.randint(0, C, (40,)), [np.arange(i, 40, 4) for i in range(4)],
        torch.randn(20, D), torch.randint(0, C, (20,)),
    )  # fmt: skip
    fres = run_two_stage(w, b, cfg_for(rounds=0), stage2="lp", features=feats)
    assert np.array_equal(fres.head_state["weight"], w) and np.array_equal(fres.head_state["bias"], b)
    logits = feats.test_x.numpy() @ w.T + b
    assert fres.history[0].test_acc == float(np.mean(logits.argmax(1) == feats.test_y.numpy()))


def test_lp_then_ft_runs_both_stages_in_sequence() -> None:
    clients, test = make_data(4)
    model = make_model()
    res = run_lp_then_ft(model, clients, test, cfg_for(rounds=2), lp_rounds=3)
    assert [r.stage for r in res.history] == ["lp"] * 4 + ["ft"] * 3
    assert [r.round for r in res.history] == [0, 1, 2, 3, 3, 4, 5]
    # the FT stage starts from the last LP model: same accuracy at the hand-over
    assert res.history[3].test_acc == res.history[4].test_acc
    assert res.history[4].uplink_bytes == res.history[3].uplink_bytes
    assert res.best_round in (4, 5) and res.meta["stage1"]["rounds"] == 3
    # costs: LP payload is the head, FT payload the whole model
    head_floats = C * D + C
    all_floats = sum(p.numel() for p in model.parameters())
    assert res.costs.uplink_bytes == 4 * 2 * (3 * head_floats + 2 * all_floats)


# ------------------------------------------------------------------------------------------------ seeding
def test_same_seed_identical_curves_on_cpu() -> None:
    clients, test = make_data(4)
    outs = []
    for _ in range(2):
        model = seeded_build(lambda: make_model(0), FLConfig(progress=False))
        cfg = cfg_for(seed=7, client_shuffle=True, rounds=3, client_momentum=0.5)
        res = run_method(cfg, model=model, clients=clients, test=test)
        outs.append((res, model))
    (a, ma), (b, mb) = outs
    key = lambda r: (
        r.round,
        r.test_acc,
        r.test_loss,
        r.uplink_bytes,
        r.downlink_bytes,
        r.compute_f,
        r.clients,
    )
    assert [key(r) for r in a.history] == [key(r) for r in b.history]
    assert [r.train_loss for r in a.history[1:]] == [r.train_loss for r in b.history[1:]]
    assert all(torch.equal(p, q) for p, q in zip(ma.parameters(), mb.parameters(), strict=True))
    other = run_method(cfg_for(seed=8, rounds=3), model=make_model(0), clients=clients, test=test)
    assert [r.clients for r in other.history] != [r.clients for r in a.history]


def test_client_sampling_reproducible_and_independent_of_model_seed() -> None:
    s = ClientSampler(100, 30, RunSeeds(0))
    draws = [s.sample(r) for r in range(20)]
    assert all(len(set(d.tolist())) == 30 and d.min() >= 0 and d.max() < 100 for d in draws)
    assert all(np.array_equal(d, ClientSampler(100, 30, RunSeeds(0)).sample(r)) for r, d in enumerate(draws))
    same = ClientSampler(100, 30, RunSeeds(0, {"model_init": 5, "data_order": 9}))
    assert all(np.array_equal(d, same.sample(r)) for r, d in enumerate(draws))
    assert not np.array_equal(draws[0], ClientSampler(100, 30, RunSeeds(0, {"client_sampling": 1})).sample(0))
    assert len({tuple(d.tolist()) for d in draws}) == 20  # rounds differ
    assert np.array_equal(ClientSampler(5, 5, RunSeeds(0)).sample(3), np.arange(5))

    # in a run: changing the model-init seed changes the head but not the sampled clients
    clients, test = make_data(4)
    runs = [
        run_method(cfg_for(seed_overrides=ov), model=make_model(), clients=clients, test=test)
        for ov in ({}, {"model_init": 11})
    ]
    assert [r.clients for r in runs[0].history] == [r.clients for r in runs[1].history]
    assert (
        runs[0].history[0].test_acc != runs[1].history[0].test_acc
        or runs[0].history[0].test_loss != runs[1].history[0].test_loss
    )


def test_reinit_default_is_seeded_and_resets_bn_stats() -> None:
    cfg = FLConfig(progress=False, seed=3)
    a, b = reinit_default(make_model(1), cfg), reinit_default(make_model(2), cfg)
    assert all(
        torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )
    assert torch.equal(a.body.bn.running_mean, torch.zeros(D, dtype=torch.float64))
    fresh = make_model(1)
    state = torch.random.get_rng_state()
    reinit_default(fresh, cfg)
    assert torch.equal(state, torch.random.get_rng_state())  # scoped: global generator restored


# ------------------------------------------------------------------------------------------------ config helpers
def test_flsim_epochs_to_rounds() -> None:
    assert flsim_epochs_to_rounds(200, 100, 30) == 800  # papers-code §1.6: 4 rounds per FLSim epoch
    assert flsim_epochs_to_rounds(1, 100, 100) == 1
    assert flsim_epochs_to_rounds(5, 10, 3) == 20
    assert flsim_epochs_to_rounds(0, 100, 30) == 0
    with pytest.raises(ConfigError):
        flsim_epochs_to_rounds(1, 10, 11)
    cfg = FLConfig(progress=False)
    assert cfg.clients_per_round == 30 and FLConfig(participation=1.0).clients_per_round == 100


@pytest.mark.parametrize(
    "kw",
    [
        {"server_opt": "fedyogi"},
        {"participation": 0.0},
        {"participation": 1.5},
        {"selection": "best"},
        {"bn_stats": "average"},
        {"rounds": -1},
        {"client_lr": 0.0},
        {"prox_mu": -0.1},
        {"seed": -1},
        {"seed_overrides": {"model_init": -2}},
        {"batch_size": 0},
        {"frozen_params": "drift"},
        {"device": "tpu"},
    ],
)
def test_config_rejects_bad_values(kw: dict) -> None:
    with pytest.raises(ConfigError):
        FLConfig(**kw)


def test_client_lr_schedule() -> None:
    cfg = FLConfig(client_lr=0.1, client_lr_milestones=(2, 4), progress=False)
    assert [round(cfg.client_lr_at(r), 6) for r in range(6)] == [0.1, 0.1, 0.01, 0.01, 0.001, 0.001]


# ------------------------------------------------------------------------------------------------ costs, selection
def test_costs_follow_legate2023_appendix_a() -> None:
    sizes = [10, 13, 16, 19]
    clients, test = make_data(4, sizes=sizes)
    cfg = cfg_for(rounds=3, local_epochs=2)
    ft_model = make_model()
    ft = run_federated(ft_model, clients, test, cfg, train_part="all", method="ft")
    lp = run_lp(cfg, model=make_model(), clients=clients, test=test)
    n_all = sum(p.numel() for p in ft_model.parameters())
    for res, floats, factor in ((ft, n_all, 3), (lp, C * D + C, 1)):
        seen = [c for r in res.history[1:] for c in r.clients]
        assert len(seen) == 3 * 2
        assert res.costs.uplink_bytes == res.costs.downlink_bytes == 4 * floats * len(seen)
        assert res.costs.compute_f == factor * 2 * sum(sizes[c] for c in seen)  # Eq. 5 / Eq. 6, E = 2
        assert res.history[-1].compute_f == res.costs.compute_f
        walls = [r.wall_s for r in res.history]
        assert walls == sorted(walls)


def test_selection_best_on_test_vs_last_and_eval_every() -> None:
    def row(r: int, acc: float, stage: str = "") -> RoundRecord:
        return RoundRecord(r, stage, acc, 0.0, 0.0, 0, 0, 0, 0.0, float("nan"))

    hist = [row(0, 0.9), row(1, 0.5), row(2, 0.7), row(3, float("nan")), row(4, 0.7), row(5, 0.6)]
    best = summarise("x", FLConfig(progress=False), hist, Costs(), selection_stage="", start_round=0)
    assert (best.reported_acc, best.best_round, best.last_acc) == (0.7, 2, 0.6)  # round 0 never selected
    last = summarise(
        "x", FLConfig(selection="last", progress=False), hist, Costs(), selection_stage="", start_round=0
    )
    assert last.reported_acc == 0.6 and last.best_acc == 0.7

    clients, test = make_data(4)
    res = run_federated(
        make_model(), clients, test, cfg_for(rounds=5, eval_every=2), train_part="all", method="ft"
    )
    evaluated = [r.round for r in res.history if not math.isnan(r.test_acc)]
    assert evaluated == [0, 2, 4, 5]


def test_run_method_dispatch_and_oracles() -> None:
    clients, test = make_data(4)
    feats = CachedFeatures(
        torch.randn(60, D, dtype=torch.float64), torch.randint(0, C, (60,)),
        [np.arange(i, 60, 4) for i in range(4)], torch.randn(20, D, dtype=torch.float64), torch.randint(0, C, (20,)),
    )  # fmt: skip
    for method in ("lp", "ft", "random", "lp_ft", "ft_oracle", "lp_oracle"):
        res = run_method(
            cfg_for(method=method, rounds=2), model=make_model(), clients=clients, test=test, features=feats
        )
        assert res.method == method and 0.0 <= res.reported_acc <= 1.0
        if method.endswith("oracle"):
            assert res.costs.total_bytes == 0 and all(r.clients == (0,) for r in res.history[1:])
    with pytest.raises(ConfigError):
        run_method(cfg_for(method="head_ft"), model=make_model(), clients=clients, test=test)


def test_ft_oracle_equals_centralised_sgd_epoch() -> None:
    from benchmark.fl.methods import centralised_ft_oracle

    clients, test = make_data(2, sizes=[9, 14])
    model = make_model()
    ref = copy.deepcopy(model)
    head = {"weight": np.ones((C, D)) * 0.1, "bias": np.zeros(C)}
    centralised_ft_oracle(
        model, clients, test, cfg_for(num_clients=2, rounds=1, batch_size=8), head=head, shuffle=False
    )
    with torch.no_grad():
        ref.head.weight.fill_(0.1)
        ref.head.bias.zero_()
    x = torch.cat([c.tensors[0] for c in clients])
    y = torch.cat([c.tensors[1] for c in clients])
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref.train()
    for idx in batch_schedule(23, 8, 1):
        opt.zero_grad()
        nn.functional.cross_entropy(ref(x[idx]), y[idx]).backward()
        opt.step()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-12)


def test_plot_curves_writes_png(tmp_path) -> None:
    clients, test = make_data(4)
    results = {
        "FT": run_federated(make_model(), clients, test, cfg_for(), train_part="all", method="ft"),
        "LP": run_lp(cfg_for(), model=make_model(), clients=clients, test=test),
    }
    out = plot_curves(results, tmp_path / "curves.png", title="tiny")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    frame = results["FT"].to_frame()
    assert list(frame["round"]) == [0, 1, 2, 3]
