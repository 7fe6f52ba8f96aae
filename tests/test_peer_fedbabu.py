"""The fedbabu peer family (issue 26): jhoon-oh/FedBABU's released code beside this suite's pfl runner.

The tests that run the released code need a checkout (``$FLB_PEER_FEDBABU``, else ``../peers/FedBABU`` beside the checkout)
and skip with the reason when there is none; they run its functions through this suite's driver
(``benchmark/peers/drivers/fedbabu_driver.py``) in a subprocess, as ``flb peer fedbabu`` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark.peers.fedbabu_inputs import from_released_keys, our_init_state, to_released_keys

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DRIVER = Path(__file__).resolve().parents[1] / "benchmark" / "peers" / "drivers" / "fedbabu_driver.py"


def _checkout() -> Path | None:
    env = os.environ.get("FLB_PEER_FEDBABU")
    for cand in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[1].parent / "peers" / "FedBABU"]:
        if (cand / "main_fed.py").is_file():
            return cand
    return None


needs_checkout = pytest.mark.skipif(
    _checkout() is None,
    reason="no checkout of jhoon-oh/FedBABU (set FLB_PEER_FEDBABU to one, or clone it to ../peers/FedBABU beside the checkout)",
)


def _driver(spec: dict, tmp_path: Path) -> dict:
    path = tmp_path / f"{spec['mode']}.spec.json"
    path.write_text(json.dumps({**spec, "repo": str(_checkout()), "threads": 1}))
    proc = subprocess.run([sys.executable, str(DRIVER), str(path)], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_state_keys_round_trip_to_the_released_names():
    ours = our_init_state("4convnet", 10, 0)
    theirs = to_released_keys(ours)
    assert "features.0.0.weight" in theirs and "features.3.1.bias" in theirs and "linear.weight" in theirs
    back = from_released_keys(theirs)
    assert back.keys() == ours.keys()
    assert all(torch.equal(back[k], ours[k]) for k in ours)


def _class_mean_state(real_data_root):
    """Weights with a non-trivial accuracy: the seed-0 init with the head set from the class means of a few
    hundred training features (any fixed state will do; a near-chance one would hide a mismatch)."""
    from benchmark.data.registry import load_dataset
    from benchmark.federated.images import DeviceImages
    from benchmark.pfl.models import build_model

    torch.manual_seed(1)
    state = our_init_state("4convnet", 10, 0)
    net = build_model("4convnet", 10)
    net.load_state_dict(state)
    train = DeviceImages.from_split(load_dataset("cifar10", "train", real_data_root), "cifar10", "cpu")
    with torch.no_grad():
        net.eval()
        x, y = train.test_batch(torch.arange(2000))
        f = net.features(x)
        means = torch.stack([f[y == c].mean(0) for c in range(10)])
        state["linear.weight"] = torch.nn.functional.normalize(means, dim=1) * 5
        state["linear.bias"] = torch.zeros(10)
    return net, state


@needs_checkout
def test_released_per_fedavg_step_adapts_every_client_on_the_source_clients_test_images(real_data_root, tmp_path):
    """``per_fedavg_step`` runs main_per_fedavg.py's evaluation step: with ``source`` a client id, every client
    adapts on that client's test images (the released ``dict_users_test[idx]``), so at s = 2 the clients
    that share no class with the source lose accuracy against adapting on their own images."""
    from benchmark.peers.fedbabu_inputs import our_split

    split = our_split("cifar10", 2, 100, 0, str(real_data_root))
    _net, state = _class_mean_state(real_data_root)
    torch.save(to_released_keys(state), tmp_path / "state.pt")
    clients = range(6)
    part = tmp_path / "partition.json"
    part.write_text(json.dumps({"train": [split.train[i].tolist() for i in clients],
                                "test": [split.test[i].tolist() for i in clients]}))  # fmt: skip
    spec = {"mode": "per_fedavg_step", "data_root": str(real_data_root), "partition": str(part),
            "state": str(tmp_path / "state.pt"), "algorithm": "fedavg", "frac": 1.0, "local_ep": 1, "bs": 128,
            "lr": 0.001, "beta": 0.1}  # fmt: skip
    own = _driver({**spec, "source": "own"}, tmp_path)
    one = _driver({**spec, "source": 0}, tmp_path)
    assert len(own["per_client"]) == len(one["per_client"]) == 6 and one["source"] == 0
    assert np.mean(one["per_client"][1:]) < np.mean(own["per_client"][1:])


@needs_checkout
def test_released_evaluation_of_fixed_weights_equals_ours(real_data_root, tmp_path):
    """The released ``test_img_local_all`` and this suite's ``client_accuracies`` on the same weights and
    clients give the same per-client accuracies (deterministic: batch-statistics BN, test batches of 128 in
    index order): identical, bit for bit."""
    from benchmark.data.registry import load_dataset
    from benchmark.federated.images import DeviceImages
    from benchmark.peers.fedbabu_inputs import our_split
    from benchmark.pfl.local import client_accuracies

    split = our_split("cifar10", 10, 100, 0, str(real_data_root))
    clients = range(6)
    net, state = _class_mean_state(real_data_root)
    test = DeviceImages.from_split(load_dataset("cifar10", "test", real_data_root), "cifar10", "cpu")
    state_path = tmp_path / "state.pt"
    torch.save(to_released_keys(state), state_path)
    part = tmp_path / "partition.json"
    part.write_text(json.dumps({"train": [split.train[i].tolist() for i in clients],
                                "test": [split.test[i].tolist() for i in clients]}))  # fmt: skip
    theirs = _driver({"mode": "eval", "data_root": str(real_data_root), "partition": str(part),
                      "state": str(state_path), "algorithm": "fedavg", "frac": 1.0, "local_ep": 1,
                      "bs": 128}, tmp_path)  # fmt: skip
    ours = client_accuracies(net, test, tuple(split.test[i] for i in clients), lambda _i: state, 128)
    assert np.mean(ours) > 20  # the check is not at chance level
    assert theirs["per_client"] == [float(a) for a in ours]


@needs_checkout
def test_released_aggregation_matches_ours_to_float32_rounding(tmp_path):
    """One aggregation of the same client states: the released ``models.Fed.FedAvg`` (float32 running sum, then
    division) and this suite's (float64 mean, cast back) differ only by the rounding of the float32 sum."""
    from benchmark.pfl.trainer import PFLTrainer

    states = []
    for s in range(10):
        st = to_released_keys(our_init_state("4convnet", 10, s))
        path = tmp_path / f"client{s}.pt"
        torch.save(st, path)
        states.append(st)
    out = tmp_path / "avg.pt"
    _driver({"mode": "aggregate", "states": [str(tmp_path / f"client{s}.pt") for s in range(10)],
             "out_state": str(out)}, tmp_path)  # fmt: skip
    theirs = torch.load(out, weights_only=True)

    class _Agg:  # the trainer's aggregate() needs only the broadcast entries' dtypes
        broadcast = states[0]

    ours = PFLTrainer.aggregate(_Agg(), states)  # type: ignore[arg-type]
    eps = torch.finfo(torch.float32).eps
    exact = 0
    for k, v in ours.items():
        # a float32 running sum of m terms errs by at most ~m eps max|term| (relative to the terms, not the mean)
        scale = torch.stack([s[k].abs() for s in states]).amax(0)
        assert ((theirs[k] - v).abs() <= len(states) * eps * scale).all(), k
        exact += int((theirs[k] == v).sum())
    assert exact > 0  # most entries agree bit for bit


@needs_checkout
def test_released_local_update_without_augmentation_or_shuffle_equals_ours(
    real_data_root, tmp_path, monkeypatch
):
    """One local update (the released ``LocalUpdate.train`` vs this suite's ``sgd_epochs``), made deterministic
    on both sides by turning off augmentation and shuffling: the same SGD steps on the same batches, so the
    trained weights agree to float32 rounding (bit for bit on one machine, measured)."""
    import functools

    from benchmark.data.registry import load_dataset
    from benchmark.federated.images import DeviceImages, epoch_plan
    from benchmark.peers.fedbabu_inputs import our_split
    from benchmark.pfl import local
    from benchmark.pfl.models import build_model
    from benchmark.pfl.streams import LOCAL, PFLStreams

    split = our_split("cifar10", 10, 100, 0, str(real_data_root))
    client = 3
    idx = split.train[client][:150]  # three batches of 50
    state = our_init_state("4convnet", 10, 0)
    state_path = tmp_path / "state.pt"
    torch.save(to_released_keys(state), state_path)
    part = tmp_path / "partition.json"
    part.write_text(
        json.dumps({"train": [[] for _ in range(client)] + [idx.tolist()], "test": [[]] * (client + 1)})
    )
    out = tmp_path / "local.pt"
    theirs_out = _driver({"mode": "local", "data_root": str(real_data_root), "partition": str(part),
                          "state": str(state_path), "algorithm": "fedavg", "frac": 1.0, "local_ep": 2,
                          "local_bs": 50, "lr": 0.1, "momentum": 0.9, "client": client, "body_lr": 0.1,
                          "head_lr": 0.1, "augment": False, "shuffle": False, "out_state": str(out)},
                         tmp_path)  # fmt: skip
    theirs = from_released_keys(torch.load(out, weights_only=True))

    monkeypatch.setattr(local, "epoch_plan", functools.partial(epoch_plan, augment=False, shuffle=False))
    train = DeviceImages.from_split(load_dataset("cifar10", "train", real_data_root), "cifar10", "cpu")
    net = build_model("4convnet", 10)
    net.load_state_dict(state)
    sgd = local.LocalSGD(
        epochs=2, batch_size=50, body_lr=0.1, head_lr=0.1, momentum=0.9, weight_decay=0.0, streams=PFLStreams(0)
    )
    loss = local.sgd_epochs(net, train, idx, sgd, (LOCAL, 0, client))
    ours = net.state_dict()
    assert abs(loss - theirs_out["loss"]) < 1e-4
    moved = max(float((ours[k] - state[k]).abs().max()) for k in ours)
    assert moved > 1e-3  # the update did something
    worst = max(float((ours[k] - theirs[k]).abs().max()) for k in ours)
    assert worst <= 1e-5, worst


@needs_checkout
def test_released_main_ditto_equals_ditto_reference_on_a_deterministic_loop(real_data_root, tmp_path):
    """``main_ditto.py`` as released (through the driver) and this suite's ``ditto_reference`` on the
    ``ditto-loop-identity`` configuration (no augmentation or shuffling, the same clients, tau = 1, 3 rounds):
    every round's size-weighted accuracy of the clients' models as the script tests them agrees within the
    configuration's 0.25 point (measured: equal to 4 decimals). The paper's Ditto (``ditto``: personal models
    kept, the global updates averaged) does not (docs/peers/fedbabu.md)."""
    from benchmark.peers import fedbabu
    from benchmark.peers.compare import render
    from benchmark.peers.registry import PeerRequest

    cmp = fedbabu.run(PeerRequest("fedbabu", "ditto-loop-identity", (0,), _checkout(), tmp_path))
    assert cmp.outcome().status == "AGREE", render(cmp)
    assert len(cmp.ours[0].rounds) == 3 and cmp.ours[0].accuracy[-1] > 10
