"""The personalised-FL baselines' local procedures (benchmark/pfl/procedures: FedRep, Ditto, Per-FedAvg) and
Table 9's centralised training (benchmark/pfl/centralised.py), on a 4convNet and 3 clients of a few CIFAR-10
images (the real images when the data is here, else random uint8 images: then these are mechanics tests only).

What must hold: each procedure runs inside the round loop and is bit-identical when run twice; FedRep never
aggregates the head and trains head then body with one optimiser (as the reference); Ditto keeps a full personal
model per client across rounds, evaluates with it and averages the global updates (the reference variant: the
personal models, reset every round); Per-FedAvg restores the parameters before its meta-step; the centralised
body-only model keeps its initial head.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.federated.images import DeviceImages
from benchmark.pfl import algorithms
from benchmark.pfl.centralised import CentralRecipe, train_centralised
from benchmark.pfl.local import LocalSGD, epoch_batches, sgd_step
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.parts import is_head
from benchmark.pfl.procedures import get_procedure, list_procedures
from benchmark.pfl.procedures.fedrep import fedrep_update
from benchmark.pfl.procedures.per_fedavg import meta_steps, per_fedavg_update
from benchmark.pfl.streams import LOCAL, PFLStreams
from benchmark.pfl.trainer import PFLConfig, PFLTrainer
from tests.round_faults import Interrupted, interrupt_at

pytestmark = pytest.mark.usefixtures("one_torch_thread")

K, N_TRAIN, N_TEST = 3, 60, 30


@pytest.fixture(scope="module")
def tiny(request) -> tuple[DeviceImages, ClientSplit]:
    """The first ``K*(N_TRAIN+N_TEST)`` CIFAR-10 training images (random ones without the data): client ``k``
    trains on a block of ``N_TRAIN`` and tests on a later block of ``N_TEST``."""
    n = K * (N_TRAIN + N_TEST)
    try:
        from benchmark.data.registry import load_dataset

        d = load_dataset("cifar10", "train", request.getfixturevalue("real_data_root"))
        images, labels = d.images[:n], d.labels[:n]
    except pytest.skip.Exception:  # mechanics only
        rng = np.random.default_rng(0)
        images, labels = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, n)
    data = DeviceImages.from_split(SimpleNamespace(images=images, labels=labels), "cifar10", "cpu")
    train = tuple(np.arange(k * N_TRAIN, (k + 1) * N_TRAIN) for k in range(K))
    test = tuple(K * N_TRAIN + np.arange(k * N_TEST, (k + 1) * N_TEST) for k in range(K))
    return data, ClientSplit(train, test)


@pytest.fixture(scope="module", autouse=True)
def _reference_ditto_algorithm():
    """``ditto_reference`` as an algorithm (algorithms.py registers only ``ditto``)."""
    added = "ditto_reference" not in algorithms.ALGORITHMS
    if added:
        algorithms.ALGORITHMS["ditto_reference"] = algorithms.Algorithm(
            "ditto_reference", "full", "full", procedure="ditto_reference"
        )
    yield
    if added:
        del algorithms.ALGORITHMS["ditto_reference"]


def trainer(tiny, algorithm: str, **kw) -> PFLTrainer:
    data, split = tiny
    kw = {"participation": 1.0, "local_epochs": 1, "rounds": 4, "lr": 0.05, **kw}
    cfg = PFLConfig(dataset="cifar10", model="4convnet", algorithm=algorithm, clients=K, **kw)
    return PFLTrainer(cfg, data, data, split, 10, progress=False)


def run_round(t: PFLTrainer, r: int, clients: list[int] | None = None) -> float:
    """Round ``r`` of the trainer's plan (its sampled clients unless ``clients``); the round's train loss."""
    plan = t.round_plan()
    picked = plan.sampler.sample(r) if clients is None else np.array(clients)
    return t.train_round(r, picked, plan.lr_at(r)).train_loss


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def differs(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return any(not torch.equal(a[k], b[k]) for k in a if a[k].is_floating_point())


# ------------------------------------------------------------------------------------------------ registry
def test_every_algorithm_procedure_is_registered_and_unknown_names_fail():
    assert {"fedrep", "ditto", "ditto_reference", "per_fedavg", "per_fedavg_beta_lr"} <= set(
        list_procedures()
    )
    for algo in algorithms.ALGORITHMS.values():
        if algo.procedure not in ("sgd", "centralised"):  # centralised: benchmark.pfl.run
            get_procedure(algo.procedure)
    with pytest.raises(UnknownNameError, match="unknown local procedure 'fedrepp'"):
        get_procedure("fedrepp")


@pytest.mark.parametrize(("algorithm", "kw", "field"), [
    ("ditto", {"weight_decay": 5e-4}, "weight_decay"),
    ("per_fedavg", {"prox_mu": 0.01}, "prox_mu"),
    ("fedrep", {"head_lr_ratio": 0.5}, "head_lr_ratio"),
])  # fmt: skip
def test_a_knob_the_procedure_does_not_implement_is_refused(tiny, algorithm, kw, field):
    with pytest.raises(ConfigError, match=field):
        trainer(tiny, algorithm, **kw)


@pytest.mark.parametrize("algorithm", ["fedrep", "ditto", "ditto_reference", "per_fedavg"])
def test_a_round_is_bit_identical_when_run_twice(tiny, algorithm):
    runs = []
    for _ in range(2):
        t = trainer(tiny, algorithm)
        loss = run_round(t, 0)
        runs.append((t.broadcast, t.personal, loss))
    (b1, p1, l1), (b2, p2, l2) = runs
    assert same(b1, b2) and p1.keys() == p2.keys() and all(same(p1[i], p2[i]) for i in p1)
    assert l1 == l2 and np.isfinite(l1)
    assert differs(b1, trainer(tiny, algorithm).broadcast)  # the round changed the global model


# -------------------------------------------------------------------------------------------------- FedRep
def test_fedrep_keeps_each_head_personal_and_aggregates_only_the_body(tiny):
    t = trainer(tiny, "fedrep")
    init_head = dict(t.init_personal)
    for r in range(2):
        run_round(t, r)
    assert t.broadcast and not any(is_head(k) for k in t.broadcast)
    assert set(t.personal) == set(range(K))
    heads = [t.personal[i] for i in range(K)]
    assert all(set(h) == set(init_head) and all(is_head(k) for k in h) for h in heads)
    assert all(differs(h, init_head) for h in heads)
    assert differs(heads[0], heads[1]) and differs(heads[1], heads[2])  # never averaged


def test_fedrep_update_trains_the_head_then_the_body_with_one_optimiser(tiny):
    data, split = tiny
    t = trainer(tiny, "fedrep")
    model, start = t.model, t.client_state(0)

    def run(head_epochs: int, body_epochs: int = 1) -> dict[str, torch.Tensor]:
        model.load_state_dict(start)
        sgd = LocalSGD(head_epochs, 25, 0.05, 0.05, momentum=0.9, weight_decay=0.0, streams=PFLStreams(0))
        fedrep_update(model, data, split.train[0], sgd, (LOCAL, 0, 0), body_epochs)
        return {k: v.clone() for k, v in model.state_dict().items()}

    body = lambda s: {k: v for k, v in s.items() if not is_head(k)}
    head = lambda s: {k: v for k, v in s.items() if is_head(k)}
    head_only, body_only, both = run(head_epochs=2, body_epochs=0), run(head_epochs=0), run(head_epochs=2)
    assert same(body(head_only), body(start)) and differs(head(head_only), head(start))
    assert same(head(body_only), head(start)) and differs(body(body_only), body(start))
    assert same(head(both), head(head_only))  # the body epoch leaves the head alone

    # An independent transcription of LocalUpdateFedRep.train (one SGD, lrs swapped) gives the same bits; a fresh
    # optimiser for the body epoch (no momentum carried over) does not.
    def transcription(fresh: bool) -> dict[str, torch.Tensor]:
        model.load_state_dict(start)
        model.train()
        groups = lambda b, h: [
            {"params": [p for n, p in model.named_parameters() if not is_head(n)], "lr": b},
            {"params": [p for n, p in model.named_parameters() if is_head(n)], "lr": h},
        ]
        opt = torch.optim.SGD(groups(0.0, 0.05), momentum=0.9)
        for e in range(2):
            for x, y in epoch_batches(data, split.train[0], 25, PFLStreams(0), LOCAL, 0, 0, e):
                sgd_step(model, opt, x, y)
        if fresh:
            opt = torch.optim.SGD(groups(0.05, 0.0), momentum=0.9)
        else:
            opt.param_groups[0]["lr"], opt.param_groups[1]["lr"] = 0.05, 0.0
        for x, y in epoch_batches(data, split.train[0], 25, PFLStreams(0), LOCAL, 0, 0, 2):
            sgd_step(model, opt, x, y)
        return {k: v.clone() for k, v in model.state_dict().items()}

    assert same(both, transcription(fresh=False))
    assert differs(body(both), body(transcription(fresh=True)))


# --------------------------------------------------------------------------------------------------- Ditto
def test_ditto_keeps_a_full_personal_model_per_client_and_averages_the_global_updates(tiny):
    t = trainer(tiny, "ditto")
    run_round(t, 0)
    first = {i: dict(s) for i, s in t.personal.items()}
    assert set(first) == set(range(K))
    for i in range(K):
        assert set(first[i]) == set(t.broadcast)  # a full model
        assert differs(first[i], t.broadcast)
        assert same(t.client_state(i), first[i])  # evaluated (and fine-tuned) with its personal model
    assert differs(t.aggregate([first[i] for i in range(K)]), t.broadcast)  # the server averages the w_i

    # Round 1 with client 0 only: clients 1 and 2 keep their personal models; client 0 continues from its own.
    restarted = trainer(tiny, "ditto")
    restarted.broadcast, restarted.personal = dict(t.broadcast), {}
    run_round(t, 1, clients=[0])
    run_round(restarted, 1, clients=[0])
    assert same(t.personal[1], first[1]) and same(t.personal[2], first[2])
    assert differs(t.personal[0], first[0])
    assert same(t.broadcast, restarted.broadcast)  # the global update does not depend on v_i ...
    assert differs(t.personal[0], restarted.personal[0])  # ... the personal one starts from the kept v_i


def test_ditto_reference_averages_the_personal_models_and_resets_them_every_round(tiny):
    t = trainer(tiny, "ditto_reference")
    run_round(t, 0)
    assert same(t.aggregate([t.personal[i] for i in range(K)]), t.broadcast)
    start = dict(t.broadcast)
    run_round(t, 1, clients=[0])
    assert same(t.personal[1], start) and same(t.personal[2], start)  # reset to the round-start global
    assert same(t.broadcast, t.aggregate([t.personal[0]]))


def test_ditto_lambda_reaches_the_personal_update(tiny):
    from benchmark.pfl.procedures.ditto import DittoOptions, ditto

    out = []
    for lam in (0.0, 0.75):
        t = trainer(tiny, "ditto")
        ditto(t, 0, 0, 0.05, DittoOptions(lam=lam))
        out.append(t.personal[0])
    assert differs(out[0], out[1])


def test_ditto_personal_models_survive_a_checkpoint(tiny, tmp_path):
    whole = trainer(tiny, "ditto", rounds=2, selection="last")
    whole.run()
    killed = trainer(tiny, "ditto", rounds=2, selection="last")
    interrupt_at(killed, 1)
    with pytest.raises(Interrupted):
        killed.run(checkpoint=tmp_path / "ck.pt", checkpoint_every=1)
    resumed = trainer(tiny, "ditto", rounds=2, selection="last")
    res = resumed.run(checkpoint=tmp_path / "ck.pt", checkpoint_every=1)  # resumes after round 1
    strip = lambda h: [{k: v for k, v in row.items() if k != "wall_s"} for row in h]
    assert len(res.history) == 2 and strip(resumed.history) == strip(whole.history)
    assert same(resumed.broadcast, whole.broadcast)
    assert all(same(resumed.personal[i], whole.personal[i]) for i in range(K))


# ---------------------------------------------------------------------------------------------- Per-FedAvg
def test_per_fedavg_meta_steps_follow_the_reference():
    # int(len(loader) / local_ep) + 1 (fedbabu's clients: 500 images, batch 50)
    assert [meta_steps(500, 50, e) for e in (1, 4, 10)] == [11, 3, 2]
    assert meta_steps(60, 25, 1) == 4


def test_per_fedavg_restores_the_parameters_before_the_meta_step(tiny):
    """With beta = 0 the meta-step moves nothing: the inner step must have been undone."""
    data, split = tiny
    t = trainer(tiny, "per_fedavg")
    start = t.client_state(0)
    sgd = LocalSGD(1, 25, 0.05, 0.05, momentum=0.9, weight_decay=0.0, streams=PFLStreams(0))
    t.model.load_state_dict(start)
    per_fedavg_update(t.model, data, split.train[0], sgd, (LOCAL, 0, 0), beta=0.0)
    assert same(t.model.state_dict(), start)
    t.model.load_state_dict(start)
    per_fedavg_update(t.model, data, split.train[0], sgd, (LOCAL, 0, 0), beta=0.05)
    assert differs(t.model.state_dict(), start)


# ------------------------------------------------------------------------------------------- cost estimate
@pytest.mark.parametrize("tau", [1, 2])
@pytest.mark.parametrize("algorithm", ["fedavg", "fedbabu", "fedrep", "ditto", "per_fedavg"])
def test_a_rounds_training_passes_are_what_the_estimate_counts(tiny, algorithm, tau):
    """The planner's unit of a pfl training's time (benchmark.pfl.work.local_passes, per sampled client and
    round) is the number of images a round really passes through the network in training mode: FedAvg's
    tau x n, Ditto's twice that, FedRep's (tau + 1) x n, Per-FedAvg's two batches per meta-step."""
    t = trainer(tiny, algorithm, local_epochs=tau, batch_size=20)
    seen: list[int] = []
    hook = t.model.register_forward_pre_hook(lambda m, args: seen.append(len(args[0])) if m.training else None)
    try:
        run_round(t, 0)
    finally:
        hook.remove()
    want = algorithms.get_algorithm(algorithm).local_passes(N_TRAIN, tau, batch_size=20)
    assert sum(seen) == K * want
    assert want == {"fedrep": (tau + 1) * N_TRAIN, "ditto": 2 * tau * N_TRAIN,
                    "per_fedavg": tau * meta_steps(N_TRAIN, 20, tau) * 2 * 20}.get(algorithm, tau * N_TRAIN)  # fmt: skip


# --------------------------------------------------------------------------------------------- centralised
def test_centralised_body_keeps_the_initial_head_and_is_bit_identical(tiny):
    data, split = tiny
    cfg = PFLConfig(dataset="cifar10", model="4convnet", algorithm="fedbabu", clients=K, batch_size=50)
    init = trainer(tiny, "fedbabu").init_state
    body = train_centralised(cfg, data, split, "body", 1, num_classes=10)
    assert same({k: v for k, v in body.items() if is_head(k)}, {k: v for k, v in init.items() if is_head(k)})
    assert differs({k: v for k, v in body.items() if not is_head(k)}, init)
    assert same(body, train_centralised(cfg, data, split, "body", 1, num_classes=10))
    full = train_centralised(cfg, data, split, "full", 1, num_classes=10)
    assert differs({k: v for k, v in full.items() if is_head(k)}, init)
    with pytest.raises(ConfigError, match="part='both'"):
        train_centralised(cfg, data, split, "both", 1, num_classes=10)


def test_centralised_recipes_schedule_the_lr():
    cfg = PFLConfig()
    assert [CentralRecipe.protocol(cfg, 10).lr_at(e) for e in range(10)] == pytest.approx(
        [0.1] * 5 + [0.01] * 2 + [0.001] * 3
    )
    single = CentralRecipe.main_single()
    assert (single.batch_size, single.weight_decay, single.zero_head_bias) == (128, 5e-4, True)
    assert {single.lr_at(e) for e in range(10)} == {0.1}  # MultiStepLR([80, 120]): no decay in 10 epochs
