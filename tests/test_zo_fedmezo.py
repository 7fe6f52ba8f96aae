"""FedMeZO's exactness claims (bernier2024 §4.1.2) as tests, on a tiny random BERT (CPU, fixed threads)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec
from benchmark.zo.centralised import run_mezo
from benchmark.zo.distmezo import DistMeZOConfig, run_distmezo
from benchmark.zo.fedmezo import FedMeZOConfig, replay, round_seeds, run_fedmezo
from benchmark.zo.mezo import (
    ZOConfig,
    add_direction_,
    parameters_sha256,
    projected_gradients,
    trainable_parameters,
)
from benchmark.zo.text_model import TextClassifier, TextTensors
from benchmark.zo.transport import WireFormat, eq6_bytes_per_round, fedmezo_wire_bytes_per_round

transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_model(seed: int = 0, dtype=torch.float32, classes: int = 3) -> TextClassifier:
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32,
    )  # fmt: skip
    model = TextClassifier(transformers.BertModel(cfg), 16, classes).to(dtype)
    return model.eval()


def tiny_data(n: int, seed: int, classes: int = 3) -> TextTensors:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 12, (n,), generator=g)
    ids = torch.randint(1, 50, (n, 12), generator=g)
    mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
    labels = torch.randint(0, classes, (n,), generator=g)
    return TextTensors(ids * mask, mask, labels)


def split(data: TextTensors, sizes: list[int], order: np.ndarray | None = None) -> list[TextTensors]:
    idx = np.arange(len(data)) if order is None else order
    out, start = [], 0
    for n in sizes:
        out.append(data.subset(torch.as_tensor(idx[start : start + n])))
        start += n
    return out


ZO = ZOConfig(lr=1e-2, eps=1e-3, num_z=2)


def test_copy_restore_is_exact_and_inplace_restore_is_not():
    model = tiny_model()
    data = [tiny_data(20, 1)]
    before = parameters_sha256(model)
    projected_gradients(model, data, 7, ZO)
    assert parameters_sha256(model) == before
    projected_gradients(model, data, 7, ZOConfig(lr=1e-2, num_z=2, restore="inplace"))
    # MeZO's reference restore (+εz, −2εz, +εz) is not exact in fp32: documented in docs/fedmezo.md
    assert parameters_sha256(model) != before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_inplace_restore_is_inexact_in_every_dtype(dtype):
    theta = (torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 0.05).to(dtype)
    p = torch.nn.Parameter(theta.clone(), requires_grad=True)
    params = [("w", p)]
    add_direction_(params, 3, 0, 1e-3)
    add_direction_(params, 3, 0, -2e-3)
    add_direction_(params, 3, 0, 1e-3)
    off = (p.detach() != theta).double().mean().item()
    assert 0.1 < off < 0.9  # about half the entries are one ulp away


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_copy_restore_is_exact_in_every_dtype(dtype):
    model = tiny_model(dtype=dtype)
    before = parameters_sha256(model)
    projected_gradients(model, [tiny_data(12, 3)], 11, ZO)
    assert parameters_sha256(model) == before


def test_fedmezo_equals_centralised_mezo_with_accumulation_bit_for_bit():
    data = tiny_data(37, 2)
    clients = split(data, [5, 12, 0, 9, 11])  # unequal sizes, one empty client
    config = FedMeZOConfig(ZO, rounds=4, seed=3)
    fed_model, cen_model = tiny_model(), tiny_model()
    fed = run_fedmezo(fed_model, clients, config)
    cen = run_mezo(cen_model, clients, config)
    assert fed.params_sha256 == cen.params_sha256
    assert [r.projected for r in fed.rounds] == [r.projected for r in cen.rounds]
    assert fed.log == cen.log and [e.seed for e in fed.log] == round_seeds(3, 4)
    # size weighting matters: the uniform mean gives another model
    uni = run_mezo(tiny_model(), clients, FedMeZOConfig(ZO, rounds=4, seed=3, weighting="uniform"))
    assert uni.params_sha256 != cen.params_sha256


def test_every_client_reconstructs_the_servers_weights_and_the_log_is_the_model():
    clients = split(tiny_data(30, 4), [6, 10, 14])
    config = FedMeZOConfig(ZO, rounds=3, seed=1, client_exec="replicas")
    initial = tiny_model()
    server_model = copy.deepcopy(initial)
    result = run_fedmezo(server_model, clients, config)  # raises if a replica's hash differs
    log = result.log
    shared = run_fedmezo(copy.deepcopy(initial), clients, FedMeZOConfig(ZO, rounds=3, seed=1))
    assert result.params_sha256 == shared.params_sha256
    # a client that missed every round replays the (seed, average) log and reaches the same weights
    late = copy.deepcopy(initial)
    replay(late, log, ZO)
    assert parameters_sha256(late) == result.params_sha256
    # a client that missed the last round catches up from the log alone
    partial = copy.deepcopy(initial)
    replay(partial, log[:2], ZO)
    assert parameters_sha256(partial) != result.params_sha256
    replay(partial, log[2:], ZO)
    assert parameters_sha256(partial) == result.params_sha256


def test_reference_inplace_restore_breaks_reconstruction():
    clients = split(tiny_data(20, 5), [10, 10])
    config = FedMeZOConfig(
        ZOConfig(lr=1e-2, num_z=2, restore="inplace"), rounds=2, seed=0, client_exec="replicas"
    )
    with pytest.raises(RuntimeError, match="reconstructed weights"):
        run_fedmezo(tiny_model(), clients, config)


class Killed(Exception):
    pass


def test_a_killed_run_resumes_from_its_checkpointed_log_bit_identically(tmp_path):
    clients, test = split(tiny_data(24, 6), [8, 16]), tiny_data(10, 10)
    config = FedMeZOConfig(ZO, rounds=5, seed=2, eval_every=2)
    full = run_fedmezo(tiny_model(), clients, config, test)
    ckpt = CheckpointSpec(tmp_path / "run.ckpt", every=2)

    def kill(done: int) -> None:
        if done == 3:  # the checkpoint of round 2 is on disk, round 3 is lost
            raise Killed

    with pytest.raises(Killed):
        run_fedmezo(tiny_model(), clients, config, test, checkpoint=ckpt, on_round_end=kill)
    resumed = run_fedmezo(tiny_model(), clients, config, test, checkpoint=ckpt)  # the log is replayed
    assert resumed.params_sha256 == full.params_sha256 and resumed.log == full.log
    assert resumed.rounds == full.rounds and resumed.traffic == full.traffic
    assert resumed.initial_accuracy == full.initial_accuracy is not None


def test_iid_and_non_iid_partitions_follow_the_same_trajectory_and_distmezo_does_not():
    torch.set_default_dtype(torch.float64)
    try:
        data = tiny_data(40, 7)
        labels = data.labels.numpy()
        iid = split(data, [10, 10, 10, 10], np.random.default_rng(0).permutation(40))
        noniid = split(data, [10, 10, 10, 10], np.argsort(labels, kind="stable"))  # clients sorted by label
        config = FedMeZOConfig(ZOConfig(lr=5e-2, num_z=2), rounds=5, seed=4)
        a = run_fedmezo(tiny_model(dtype=torch.float64), iid, config)
        b = run_fedmezo(tiny_model(dtype=torch.float64), noniid, config)
        pa, pb = np.array([r.projected for r in a.rounds]), np.array([r.projected for r in b.rounds])
        np.testing.assert_allclose(pa, pb, rtol=1e-7, atol=1e-9)  # same up to summation order
        dist = DistMeZOConfig(config, local_steps=3)
        da = run_distmezo(tiny_model(dtype=torch.float64), iid, dist)
        db = run_distmezo(tiny_model(dtype=torch.float64), noniid, dist)
        assert da.params_sha256 != db.params_sha256
        numel = sum(p.numel() for _, p in trainable_parameters(tiny_model()))
        assert da.traffic.uplink_numbers == 5 * 4 * numel  # the whole model up, every round and client
    finally:
        torch.set_default_dtype(torch.float32)


def test_uplink_bytes_are_clients_times_num_z_times_scalar_size():
    clients = split(tiny_data(30, 8), [10, 10, 10])
    for wire, scalar in ((WireFormat(), 8), (WireFormat(seed_bytes=8, scalar_dtype="float32"), 4)):
        result = run_fedmezo(tiny_model(), clients, FedMeZOConfig(ZO, rounds=2, seed=0, wire=wire))
        for r in result.rounds:
            assert r.uplink_bytes == 3 * ZO.num_z * scalar
            assert r.downlink_bytes == 3 * wire.seed_bytes + 3 * ZO.num_z * scalar
            assert r.uplink_bytes + r.downlink_bytes == fedmezo_wire_bytes_per_round(3, ZO.num_z, wire)
        t = result.traffic
        assert t.uplink_numbers + t.downlink_numbers == 2 * eq6_bytes_per_round(3, ZO.num_z)
        assert t.uplink_bytes == 2 * 3 * ZO.num_z * scalar


def test_eq6_arithmetic():
    assert eq6_bytes_per_round(10, 2) == 50  # the text's num_z = 2
    assert eq6_bytes_per_round(10, 1) == 30  # what Table 4.1's printed GB imply (2621 x 30 B = 7.863e-5 GB)


def test_bad_config_is_one_clear_error():
    with pytest.raises(ConfigError, match="restore"):
        ZOConfig(lr=1.0, restore="undo")
    with pytest.raises(ConfigError, match="weighting"):
        FedMeZOConfig(ZO, rounds=1, weighting="median")


def test_a_step_lowers_the_loss_on_average():
    data = tiny_data(40, 9)
    model = tiny_model()
    from benchmark.zo.text_model import mean_loss

    before = mean_loss(model, data)
    run_mezo(model, [data], FedMeZOConfig(ZOConfig(lr=0.05, num_z=4), rounds=30, seed=0))
    assert mean_loss(model, data) < before
