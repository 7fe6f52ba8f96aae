"""client_exec="vectorised" (benchmark/fl/vectorised.py): one round of VectorisedTrainer is the round of the
per-client loop (ModelTrainer), to floating-point rounding, for every client-optimiser option, unequal client
sizes, any chunk size, and every trained part; it refuses what it cannot do exactly.

The two paths compute the same per-client SGD with different kernels (grouped vs single convolutions, a
different order of the delta sums when schedules differ), so they are compared in float64 to 1e-12 relative,
not for bit equality.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch
from tiny_nets import seeded_classifier
from torch import nn
from torch.utils.data import TensorDataset

from benchmark.errors import ConfigError
from benchmark.features.preprocess import Preprocess
from benchmark.fl.client import batch_schedule, local_sgd
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import ModelTrainer, run_stage
from benchmark.fl.image_data import ImageSet
from benchmark.fl.vectorised import VectorisedTrainer, _Client
from benchmark.models.classifier import Classifier

pytestmark = pytest.mark.usefixtures("one_torch_thread")

C, D = 3, 5  # classes, feature dim
SIZES = [10, 13, 8, 16, 3, 7]  # unequal: a multiple of the batch, smaller than a batch, last batches 2/5/3/7


class TinyBody(nn.Module):
    """conv -> BN -> ReLU -> strided conv -> global pool: (B, 3, 6, 6) -> (B, D)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, D, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv2(torch.relu(self.bn(self.conv1(x))))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1)


def make_model(seed: int = 0) -> Classifier:
    return seeded_classifier(TinyBody(), nn.Linear(D, C), seed).double()


def make_clients(sizes: list[int] = SIZES, seed: int = 1) -> tuple[list[TensorDataset], TensorDataset]:
    gen = torch.Generator().manual_seed(seed)
    data = [
        TensorDataset(
            torch.randn(n, 3, 6, 6, generator=gen, dtype=torch.float64),
            torch.randint(0, C, (n,), generator=gen),
        )
        for n in sizes
    ]
    test = TensorDataset(
        torch.randn(20, 3, 6, 6, generator=gen, dtype=torch.float64), torch.randint(0, C, (20,))
    )
    return data, test


def cfg_for(**kw: object) -> FLConfig:
    base: dict[str, object] = {
        "num_clients": len(SIZES),
        "participation": 1.0,
        "batch_size": 4,
        "client_lr": 0.2,
        "progress": False,
        "device": "cpu",
        "client_exec": "vectorised",
        "vector_chunk": 4,
    }
    base.update(kw)
    return FLConfig(**base)  # type: ignore[arg-type]


def both_rounds(cfg: FLConfig, train_part: str, clients, test, rounds: int = 2, sample=None):
    """Run ``rounds`` rounds with the loop and with the vectorised trainer from the same start."""
    start = make_model()
    out = {}
    for name, cls in (("loop", ModelTrainer), ("vectorised", VectorisedTrainer)):
        model = copy.deepcopy(start)
        trainer = cls(model, clients, test, cfg, train_part=train_part)
        stats = []
        for r in range(rounds):
            ids = np.arange(cfg.num_clients) if sample is None else sample(r)
            stats.append(trainer.train_round(r, ids, cfg.client_lr_at(r)))
        out[name] = (model, stats)
    return start, out


def assert_same_round(start: nn.Module, out: dict, rel: float = 1e-12) -> None:
    (a, sa), (b, sb) = out["loop"], out["vectorised"]
    with torch.no_grad():
        moved = max(
            float((p - q).abs().max()) for p, q in zip(a.parameters(), start.parameters(), strict=True)
        )
    assert moved > 1e-3  # the round did something
    for (n, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        diff = float((p - q).detach().abs().max())
        assert diff <= rel * moved, f"{n}: |loop - vectorised| = {diff:.3g}, update {moved:.3g}"
    for x, y in zip(sa, sb, strict=True):
        assert (x.num_examples, x.uplink_floats, x.downlink_floats, x.compute_f) == (
            y.num_examples, y.uplink_floats, y.downlink_floats, y.compute_f
        )  # fmt: skip
        assert abs(x.train_loss - y.train_loss) <= rel * abs(x.train_loss)
    for (n, u), v in zip(a.named_buffers(), b.buffers(), strict=True):
        assert torch.equal(u, v), n  # frozen_global: the global running statistics never change


# ------------------------------------------------------------------------------------------------ equivalence
OPTIONS = {
    "fedavg": {},
    "fedprox": {"prox_mu": 0.3},
    "momentum_wd": {"client_momentum": 0.9, "client_weight_decay": 0.05},
    "all_client_terms": {"client_momentum": 0.5, "client_weight_decay": 0.01, "prox_mu": 0.1},
    "shuffle_two_epochs": {"client_shuffle": True, "local_epochs": 2, "client_momentum": 0.9},
    "fedadam_uniform": {"server_opt": "fedadam", "server_lr": 0.01, "aggregation_weights": "uniform"},
    "fedavgm": {"server_opt": "fedavgm", "server_lr": 0.5},
}


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("train_part", ["all", "head"])
def test_vectorised_round_equals_loop(option: str, train_part: str) -> None:
    clients, test = make_clients()
    start, out = both_rounds(cfg_for(**OPTIONS[option]), train_part, clients, test)
    assert_same_round(start, out)


@pytest.mark.parametrize("chunk", [1, 2, 5, 100])
def test_every_chunk_size_gives_the_loop_round(chunk: int) -> None:
    clients, test = make_clients()
    cfg = cfg_for(vector_chunk=chunk, client_momentum=0.9, prox_mu=0.1)
    start, out = both_rounds(cfg, "all", clients, test)
    assert_same_round(start, out)


def test_partial_participation_body_only_and_reference_drift() -> None:
    """Sampled subsets, the head-frozen body update, and the reference's FedAdam drift of frozen weights."""
    clients, test = make_clients()
    cfg = cfg_for(participation=0.5, server_opt="fedadam", server_lr=0.01, frozen_params="server_opt_drift")
    sample = lambda r: np.sort(np.random.default_rng(r).permutation(6)[:3])
    start, out = both_rounds(cfg, "body", clients, test, rounds=3, sample=sample)
    assert_same_round(start, out)


def test_lp_body_in_train_mode_and_empty_clients() -> None:
    clients, test = make_clients([9, 0, 5, 12, 0, 4])
    start, out = both_rounds(cfg_for(lp_body_mode="train"), "head", clients, test)
    assert_same_round(start, out)


def test_identical_schedules_run_one_call_per_step_and_unequal_ones_are_grouped() -> None:
    """Equal client sizes (legate2023's balanced partitions): every local step is one vmapped call over the
    whole chunk; unequal sizes split a step by batch size, never padding a batch."""
    clients, test = make_clients([10] * 6)
    cfg = cfg_for(vector_chunk=3)
    start, out = both_rounds(cfg, "all", clients, test, rounds=1)
    assert_same_round(start, out)
    trainer = VectorisedTrainer(make_model(), clients, test, cfg, train_part="all")
    jobs = [_Client(k, clients[k], batch_schedule(10, 4, 1), 10.0) for k in range(3)]
    groups, plan, root = trainer._plan(jobs)
    assert [(g.t, g.rows, g.size) for g in groups] == [
        (0, [0, 1, 2], 4),
        (1, [0, 1, 2], 4),
        (2, [0, 1, 2], 2),
    ]
    assert root is None and plan.tolist() == [0, 1, 2] * 3
    sizes = [5, 9, 4]  # batch 4: steps (4, 1), (4, 4, 1), (4,)
    jobs = [_Client(k, clients[k], batch_schedule(n, 4, 1), float(n)) for k, n in enumerate(sizes)]
    groups, _, _ = trainer._plan(jobs)
    assert [(g.t, g.rows, g.size) for g in groups] == [
        (0, [0, 1, 2], 4),
        (1, [0], 1),
        (1, [1], 4),
        (2, [1], 1),
    ]


def test_the_comparison_catches_a_dropped_fedprox_term(monkeypatch) -> None:
    """The equivalence test can fail: without its FedProx term the vectorised round is far from the loop's."""
    clients, test = make_clients()
    cfg = cfg_for(prox_mu=0.3)
    original = VectorisedTrainer._sgd_step

    def no_prox(self, *args, **kw):
        self.cfg = replace(self.cfg, prox_mu=0.0)
        try:
            return original(self, *args, **kw)
        finally:
            self.cfg = replace(self.cfg, prox_mu=0.3)

    monkeypatch.setattr(VectorisedTrainer, "_sgd_step", no_prox)
    start, out = both_rounds(cfg, "all", clients, test)
    with pytest.raises(AssertionError, match="loop - vectorised"):
        assert_same_round(start, out)


# ------------------------------------------------------------------------------------------------ image data
def image_clients(sizes: list[int], device: str = "cpu") -> tuple[list[ImageSet], ImageSet]:
    """Clients as views of one on-device uint8 ImageSet (the fast path: one gather per vmapped call)."""
    rng = np.random.default_rng(2)
    n = sum(sizes)
    pre = Preprocess("tiny", (6, 6), None, (0.5, 0.4, 0.3), (0.2, 0.25, 0.3), "frozen")
    full = ImageSet(
        rng.integers(0, 256, (n + 12, 3, 5, 5), dtype=np.uint8), rng.integers(0, C, n + 12), pre, "train",
        dtype=torch.float64, device=device,
    )  # fmt: skip
    order = rng.permutation(n)
    cuts = np.cumsum([0, *sizes])
    clients = [full.subset(order[a:b]) for a, b in itertools.pairwise(cuts)]
    test = ImageSet(
        rng.integers(0, 256, (12, 3, 5, 5), dtype=np.uint8),
        rng.integers(0, C, 12),
        pre,
        "test",
        dtype=torch.float64,
    )
    return clients, test


def test_image_set_clients_equal_the_loop_and_the_run_records_agree() -> None:
    clients, test = image_clients(SIZES)
    cfg = cfg_for(client_momentum=0.9, client_shuffle=True, eval_every=1)
    start, out = both_rounds(cfg, "all", clients, test)
    assert_same_round(start, out)
    # through the round loop: same records (costs exact, accuracy/loss to rounding)
    runs = {}
    for name, cls in (("loop", ModelTrainer), ("vectorised", VectorisedTrainer)):
        trainer = cls(copy.deepcopy(start), clients, test, replace(cfg, rounds=2), train_part="all")
        runs[name] = run_stage(
            trainer, replace(cfg, rounds=2), rounds=2, method="ft", meta=trainer.describe()
        )
    a, b = runs["loop"], runs["vectorised"]
    assert [r.compute_f for r in a.history] == [r.compute_f for r in b.history]
    assert [r.clients for r in a.history] == [r.clients for r in b.history]
    np.testing.assert_allclose([r.test_loss for r in a.history], [r.test_loss for r in b.history], rtol=1e-12)
    assert b.meta["client_exec"] == "vectorised" and b.meta["vector_chunk"] == 4


def test_mixed_datasets_fall_back_to_per_client_batches() -> None:
    """Clients that are not views of one ImageSet are fetched one by one and stacked: same round."""
    img, test = image_clients([6, 9, 4])
    plain = [TensorDataset(*img[1].batch(np.arange(9)))]
    clients = [img[0], plain[0], img[2]]
    cfg = cfg_for(num_clients=3)
    start, out = both_rounds(cfg, "all", clients, test)
    assert_same_round(start, out)


# ------------------------------------------------------------------------------------------------ refusals
def test_refuses_aggregated_bn_statistics_and_dropout() -> None:
    clients, test = make_clients()
    with pytest.raises(ConfigError, match="bn_stats='aggregate'"):
        VectorisedTrainer(make_model(), clients, test, cfg_for(bn_stats="aggregate"), train_part="all")
    model = make_model()
    model.body = nn.Sequential(model.body, nn.Dropout(0.5))
    with pytest.raises(ConfigError, match="dropout"):
        VectorisedTrainer(model, clients, test, cfg_for(), train_part="all")


@pytest.mark.parametrize(
    "kw", [{"client_exec": "threads"}, {"vector_chunk": 0}, {"vector_chunk": 2.5}, {"channels_last": "yes"}]
)
def test_config_validates_the_execution_fields(kw: dict) -> None:
    with pytest.raises(ConfigError, match=next(iter(kw))):
        cfg_for(**kw)


def test_config_records_the_execution_fields() -> None:
    d = FLConfig().to_dict()
    assert (d["client_exec"], d["vector_chunk"], d["channels_last"]) == ("loop", 10, False)


# ------------------------------------------------------------------------------------------------ GPU only
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (host syncs are a device matter)")
def test_a_vectorised_chunk_never_waits_for_the_device() -> None:
    clients, test = image_clients([8] * 4, device="cuda")
    cfg = cfg_for(num_clients=4, device="cuda", client_momentum=0.9, prox_mu=0.1)
    trainer = VectorisedTrainer(make_model(), clients, test.to("cuda"), cfg, train_part="all")
    jobs = [_Client(k, clients[k], batch_schedule(8, 4, 1), 8.0) for k in range(4)]
    assert trainer._plan(jobs)[2] is not None  # the shared-storage fast path
    trainer.train_round(0, np.arange(4), 0.1)  # warm-up (first calls may allocate / compile)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        gparams = dict(trainer.model.named_parameters())
        trained = {n: gparams[n].detach() for n in trainer.train_names}
        buffers = {n: b.detach() for n, b in trainer.model.named_buffers()}
        trainer._train_chunk(jobs, trained, {}, buffers, 0.1)
        # and the per-client loop's local SGD on an ImageSet client
        work = trainer.work
        local_sgd(
            work, dict(work.named_parameters()), clients[0], batch_schedule(8, 4, 2), lr=0.1, device="cuda"
        )
    finally:
        torch.cuda.set_sync_debug_mode("default")
