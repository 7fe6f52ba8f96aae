"""Vectorised client execution of the personalised-FL trainer (benchmark/pfl/vectorised.py): a lock-step round
is the per-client loop's round (``PFLTrainer.train_round``) to floating-point rounding, FedBABU's head stays
bit-identical, vectorised personalisation gives the loop's accuracies, and what cannot run in lock-step falls
back to the loop with a warning.

Tolerance. Both paths do the same per-client arithmetic on bit-identical batches; only the kernels differ
(grouped vs single convolutions, batched vs single matrix products), which sum in another order. In float64 a
reordered sum of n terms differs by at most ~n * 1.1e-16 relative (n up to ~6e4 here: the first convolution's
weight gradient, 60 images x 1024 positions; ~sqrt(n) * 1.1e-16 in practice), and two SGD steps through
batch-statistics BatchNorm amplify that modestly. Measured on the development machine: 5e-15 (FedAvg, FedProx)
and 1.3e-14 (FedBABU) of the largest parameter update. The bound, 1e-10 of the largest update, leaves four
orders of magnitude for other CPUs' kernels, while any real departure (another batch, crop or flip, momentum,
learning rate, a client missed or trained twice) moves the weights by a sizeable fraction of the update itself.
In float32 (the dtype of real runs) BatchNorm's backward cancels digits (batches of 10 and 5 images here): the
gap reaches 3.5e-3 of the largest update element (the first convolution's weight), so the float32 check bounds
the gap's norm by 1e-2 of the update's norm (measured 1.6e-4 for FedBABU, 2.8e-4 for FedAvg).
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch

from benchmark.errors import ConfigError
from benchmark.federated.history import RoundStats
from benchmark.federated.images import NORMALISATION, DeviceImages
from benchmark.pfl.local import LocalSGD, client_accuracies
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.parts import is_head
from benchmark.pfl.personalise import FineTune, personalise
from benchmark.pfl.streams import LOCAL, PFLStreams
from benchmark.pfl.trainer import PFLConfig, PFLTrainer
from benchmark.pfl.vectorised import (
    lockstep_accuracies,
    lockstep_sgd,
    loop_reason,
    personalise_vectorised,
    size_chunks,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SIZES = (60, 60, 60, 55)  # batches 50 + 10; the last client 50 + 5 (a size group of its own)


def images(n: int, seed: int, dtype: torch.dtype) -> DeviceImages:
    """Random CIFAR-like uint8 images; float64 normalisation constants make the batches float64."""
    g = torch.Generator().manual_seed(seed)
    mean, std = NORMALISATION["cifar10"]
    return DeviceImages(
        torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8),
        torch.randint(0, 10, (n,), generator=g),
        torch.tensor(mean, dtype=dtype).view(1, -1, 1, 1),
        torch.tensor(std, dtype=dtype).view(1, -1, 1, 1),
    )


def split_of(sizes: tuple[int, ...], test: int = 50) -> ClientSplit:
    ends = np.cumsum((0, *sizes))
    return ClientSplit(
        tuple(np.arange(a, b) for a, b in itertools.pairwise(ends)),
        tuple(np.arange(i * test, (i + 1) * test) for i in range(len(sizes))),
    )


def trainer(
    algorithm: str, dtype: torch.dtype = torch.float64, sizes: tuple[int, ...] = SIZES, **kw
) -> PFLTrainer:
    """A 4convnet trainer over ``sizes`` clients (all sampled, 1 epoch, lr 0.1 in round 0) in ``dtype``."""
    cfg = PFLConfig(model="4convnet", algorithm=algorithm, clients=len(sizes), participation=1.0, local_epochs=1,
                    rounds=4, lr=0.1, **kw)  # fmt: skip
    t = PFLTrainer(cfg, images(sum(sizes), 0, dtype), images(50 * len(sizes), 1, dtype), split_of(sizes), 10,
                   progress=False)  # fmt: skip
    t.model.to(dtype)
    t.broadcast = {k: v.to(dtype) for k, v in t.broadcast.items()}
    t.init_personal = {k: v.to(dtype) for k, v in t.init_personal.items()}
    return t


def run_round(t: PFLTrainer, *, vectorised: bool = False, chunk: int | None = None, r: int = 0) -> RoundStats:
    """Round ``r`` of every client at lr 0.1, one after the other or (``vectorised``) in lock-step chunks of
    ``chunk`` clients."""
    if vectorised:
        t.cfg = replace(t.cfg, client_exec="vectorised", vector_chunk=chunk)
    return t.train_round(r, np.arange(t.cfg.clients), 0.1)


def max_rel_gap(a: dict, b: dict, start: dict) -> float:
    gap = max(float((a[k] - b[k]).abs().max()) for k in a)
    update = max(float((a[k] - start[k]).abs().max()) for k in a)
    assert update > 0
    return gap / update


def norm_rel_gap(a: dict, b: dict, start: dict) -> float:
    gap = torch.cat([(a[k] - b[k]).flatten() for k in a]).norm()
    update = torch.cat([(a[k] - start[k]).flatten() for k in a]).norm()
    return float(gap / update)


def test_size_chunks_groups_equal_sizes_in_order() -> None:
    sizes = [(4, 100), (7, 70), (9, 100), (11, 100), (12, 70), (20, 30)]
    assert size_chunks(sizes, 2) == [[4, 9], [11], [7, 12], [20]]
    assert size_chunks(sizes, None) == [[4, 9, 11], [7, 12], [20]]
    with pytest.raises(ConfigError, match="vector_chunk"):
        size_chunks(sizes, 0)


@pytest.mark.parametrize(
    ("algorithm", "kw"),
    [("fedavg", {}), ("fedbabu", {}), ("fedprox", {"weight_decay": 5e-4}), ("fedbabu_conv12", {})],
)
def test_vectorised_round_equals_the_loop(algorithm: str, kw: dict) -> None:
    loop, vec = trainer(algorithm, **kw), trainer(algorithm, **kw)
    start = dict(loop.broadcast)
    row_loop = run_round(loop)
    row_vec = run_round(vec, vectorised=True, chunk=2)  # chunks [0, 1], [2], [3]
    assert replace(row_vec, train_loss=0.0) == replace(row_loop, train_loss=0.0)  # the same costs
    assert row_vec.train_loss == pytest.approx(row_loop.train_loss, rel=1e-12)
    assert vec.broadcast.keys() == loop.broadcast.keys()
    assert all(vec.broadcast[k].dtype == loop.broadcast[k].dtype for k in loop.broadcast)
    assert max_rel_gap(loop.broadcast, vec.broadcast, start) < 1e-10
    assert vec.personal.keys() == loop.personal.keys()
    if algorithm.startswith("fedbabu"):  # the personal entries are never trained: bit-identical to their init
        assert sorted(loop.personal) == [0, 1, 2, 3]
        for i in range(4):
            for k, v in vec.personal[i].items():
                assert torch.equal(v, loop.personal[i][k]) and torch.equal(v, loop.init_personal[k])
    else:
        assert loop.personal == {}


def test_fedbabu_float32_head_bit_identical_over_rounds_body_close() -> None:
    loop, vec = trainer("fedbabu", torch.float32), trainer("fedbabu", torch.float32)
    start = dict(loop.broadcast)
    run_round(loop)
    run_round(vec, vectorised=True, chunk=3)
    assert norm_rel_gap(loop.broadcast, vec.broadcast, start) < 1e-2
    # personal heads are now distinct (equal) tensors per client
    run_round(vec, vectorised=True, chunk=None, r=1)
    head = vec.init_personal
    assert set(head) == {"linear.weight", "linear.bias"}
    for i in range(4):
        assert all(torch.equal(vec.personal[i][k], head[k]) for k in head)
    assert not any(torch.equal(vec.broadcast[k], start[k]) for k in start if "weight" in k)  # the body moved


SGD = LocalSGD(1, 50, 0.1, 0.1, momentum=0.9, weight_decay=0.0, streams=PFLStreams(0))


def test_what_cannot_run_in_lockstep_runs_the_loop() -> None:
    sizes = (50, 50)
    loop, vec = trainer("fedavg", sizes=sizes, bn="standard"), trainer("fedavg", sizes=sizes, bn="standard")
    assert "buffers" in loop_reason(vec)
    row_loop = run_round(loop)
    with pytest.warns(UserWarning, match="per-client loop: the model has buffers"):
        row_vec = run_round(vec, vectorised=True, chunk=2)
    assert row_vec == row_loop  # the same code path: bit-identical
    assert all(torch.equal(vec.broadcast[k], loop.broadcast[k]) for k in loop.broadcast)
    with pytest.raises(ConfigError, match="buffers"):
        lockstep_sgd(vec.model, vec.train, [vec.client_state(0)], [vec.split.train[0]], SGD, [(LOCAL, 0, 0)])
    assert "procedure 'fedrep'" in loop_reason(trainer("fedrep", sizes=sizes))
    ok = trainer("fedavg", sizes=(50, 30))
    assert loop_reason(ok) is None
    with pytest.raises(ConfigError, match="unequal sizes"):
        starts = [ok.client_state(0), ok.client_state(1)]
        lockstep_sgd(ok.model, ok.train, starts, list(ok.split.train), SGD, [(LOCAL, 0, 0), (LOCAL, 0, 1)])


def test_personalise_vectorised_equals_personalise() -> None:
    t = trainer("fedbabu")

    def states(i: int) -> dict[str, torch.Tensor]:  # fresh copies, client i's body shifted by 0.01 * i
        return {k: v.clone() if is_head(k) else v + 0.01 * i for k, v in t.client_state(i).items()}

    clients = [3, 1, 0]  # sizes 55, 60, 60: lock-step groups [3] and [1, 0] (bodies differ: stacked entries)
    before = client_accuracies(t.model, t.test, t.split.test, states, 20)  # batches of 20, 20, 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        got = lockstep_accuracies(t.model, t.test, t.split.test, [states(i) for i in range(4)], 20, chunk=3)
    np.testing.assert_array_equal(got, before)
    ft = FineTune(part="head", epochs=1, lr=0.5)  # head only: the body is a fixed entry of the chunk
    want = personalise(t.model, t.train, t.test, t.split, states, ft, seed=0, eval_batch=20, clients=clients)
    got = personalise_vectorised(t.model, t.train, t.test, t.split, states, ft, seed=0, eval_batch=20,
                                 clients=clients, chunk=None)  # fmt: skip
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want, before[clients])  # fine-tuning changed something
