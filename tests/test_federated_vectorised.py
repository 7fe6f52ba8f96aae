"""The one lock-step executor (benchmark/federated/vectorised.py, issue 25): its SGD step is torch.optim.SGD's
and legate2023's local SGD (both kernels give the same bits on the CPU), a chunk with ragged steps equals each
client trained alone with either family's proximal placement, and the chunking, stacking and refusals the
two plug-ins (fl/vectorised.py, pfl/vectorised.py) rely on.

A chunk is compared to the per-client loop in float64 to 1e-12 of the update (batched vs single matrix
products sum in another order; the plug-ins' own tests bound whole rounds the same way); the SGD step alone is
elementwise and compared bit for bit.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from benchmark.errors import ConfigError
from benchmark.federated.vectorised import (
    LockstepSGD,
    SGDRule,
    StepGroup,
    chunk_clients,
    lockstep_obstacle,
    replicate,
    sgd_step,
    split_shared,
    stack_states,
    step_groups,
)
from benchmark.fl.client import local_sgd

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SHAPES = ((3, 5, 4), (3, 5))  # three clients' stacked weight and bias


def tensors(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in SHAPES]


@pytest.mark.parametrize(
    ("momentum", "wd", "mu"), list(itertools.product((0.0, 0.9), (0.0, 0.05), (0.0, 0.3)))
)
def test_both_kernels_give_the_same_bits_on_the_cpu(momentum: float, wd: float, mu: float) -> None:
    anchor = [t[0] for t in tensors(9)]
    out = {}
    for kernel in ("per_tensor", "foreach"):
        rule = SGDRule(momentum, wd, mu, "step", kernel)
        params, moms = tensors(0), [torch.empty(s, dtype=torch.float64) for s in SHAPES]
        for t in range(3):
            sgd_step(params, tensors(10 + t), moms, anchor, 0.1, first=t == 0, rule=rule)
        out[kernel] = params
    assert all(torch.equal(a, b) for a, b in zip(out["per_tensor"], out["foreach"], strict=True))
    assert not torch.equal(out["foreach"][0], tensors(0)[0])


def test_the_foreach_step_is_torch_optim_sgd() -> None:
    """A fresh torch.optim.SGD (foreach path) per client: the same bits over three steps, momentum started at
    the first step, coupled weight decay; prox_at="loss" leaves the step alone."""
    rule = SGDRule(0.9, 5e-4, 0.7, "loss", "foreach")
    params, moms = tensors(0), [torch.empty(s, dtype=torch.float64) for s in SHAPES]
    ref = [nn.Parameter(t.clone()) for t in tensors(0)]
    opt = torch.optim.SGD(ref, lr=0.1, momentum=0.9, weight_decay=5e-4, foreach=True)
    for t in range(3):
        grads = tensors(10 + t)
        sgd_step(params, grads, moms, [], 0.1, first=t == 0, rule=rule)
        for p, g in zip(ref, grads, strict=True):
            p.grad = g.clone()
        opt.step()
    assert all(torch.equal(a, b.detach()) for a, b in zip(params, ref, strict=True))


# ------------------------------------------------------------------------------------------------ a chunk
SIZES = (12, 9, 5)  # batches of 4: schedules (4, 4, 4), (4, 4, 1), (4, 1): steps 1 and 2 are ragged


def tiny(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).double()


def client_data() -> list[TensorDataset]:
    g = torch.Generator().manual_seed(1)
    return [
        TensorDataset(
            torch.randn(n, 4, generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)
        )
        for n in SIZES
    ]


def schedules() -> list[list[np.ndarray]]:
    return [[np.arange(s, min(s + 4, n)) for s in range(0, n, 4)] for n in SIZES]


def run_chunk(lock: LockstepSGD, data: list[TensorDataset]) -> torch.Tensor:
    """Drive ``lock`` through the clients' schedules (ragged steps by rows); the losses summed per client."""
    sched = schedules()
    losses = torch.zeros(len(data), dtype=torch.float64)
    for g in step_groups([[len(b) for b in s] for s in sched]):
        x = torch.stack([data[r].tensors[0][sched[r][g.t]] for r in g.rows])
        y = torch.stack([data[r].tensors[1][sched[r][g.t]] for r in g.rows])
        rows = None if len(g.rows) == len(data) else torch.tensor(g.rows)
        losses.index_add_(0, torch.tensor(g.rows), lock.step(x, y, first=g.t == 0, rows=rows))
    return losses


def assert_close(got: dict[str, torch.Tensor], want: list[dict[str, torch.Tensor]], start: dict) -> None:
    moved = max(float((w[k] - start[k]).abs().max()) for w in want for k in start)
    assert moved > 1e-3
    for j, w in enumerate(want):
        for k in start:
            gap = float((got[k][j] - w[k]).abs().max())
            assert gap <= 1e-12 * moved, f"client {j} {k}: gap {gap:.3g}, update {moved:.3g}"


def test_a_chunk_with_ragged_steps_equals_legate2023s_local_sgd() -> None:
    """prox_at="step", per-tensor kernel: each client is benchmark.fl.client.local_sgd from the global weights
    (momentum, weight decay, FedProx after momentum)."""
    model, data = tiny(0), client_data()
    start = {k: v.detach().clone() for k, v in model.named_parameters()}
    want = []
    for j in range(len(SIZES)):
        m = copy.deepcopy(model)
        params = dict(m.named_parameters())
        local_sgd(
            m,
            params,
            data[j],
            schedules()[j],
            lr=0.2,
            momentum=0.9,
            weight_decay=0.05,
            prox_mu=0.3,
            anchor=start,
        )
        want.append({k: v.detach() for k, v in params.items()})
    rule = SGDRule(0.9, 0.05, 0.3, "step", "per_tensor")
    lock = LockstepSGD(model, {k: replicate(v, 3) for k, v in start.items()}, 0.2, rule, anchor=start)
    run_chunk(lock, data)
    assert_close(lock.weights, want, start)


def test_a_chunk_with_lr_groups_and_a_proximal_loss_equals_torch_sgd_per_client() -> None:
    """prox_at="loss", foreach kernel, clients from their own starts, the middle and last layers at two lrs and
    the first layer shared (lr 0: not trained): each client is torch.optim.SGD with two parameter groups on
    cross-entropy + mu/2 ||w - anchor||^2 (the anchor over every layer)."""
    model, data = tiny(0), client_data()
    names = [k for k, _ in model.named_parameters()]
    starts = [{k: v.detach() + 0.01 * j for k, v in model.named_parameters()} for j in range(3)]
    for s in starts:
        s["0.weight"], s["0.bias"] = starts[0]["0.weight"], starts[0]["0.bias"]  # the shared first layer
    anchor = {k: v.detach().clone() for k, v in model.named_parameters()}
    lrs = {"0.weight": 0.0, "0.bias": 0.0, "2.weight": 0.05, "2.bias": 0.05, "4.weight": 0.1, "4.bias": 0.1}
    want = []
    for j, s in enumerate(starts):
        m = copy.deepcopy(model)
        m.load_state_dict(s)
        opt = torch.optim.SGD(
            [{"params": [m[2].weight, m[2].bias], "lr": 0.05}, {"params": [m[4].weight, m[4].bias]}],
            lr=0.1,
            momentum=0.9,
            weight_decay=5e-4,
            foreach=True,
        )
        for idx in schedules()[j]:
            x, y = data[j].tensors[0][idx], data[j].tensors[1][idx]
            loss = nn.functional.cross_entropy(m(x), y)
            params = dict(m.named_parameters())
            loss = loss + 0.4 / 2 * sum(((params[k] - a) ** 2).sum() for k, a in anchor.items())
            opt.zero_grad()
            loss.backward()
            opt.step()
        want.append({k: v.detach() for k, v in m.named_parameters()})
    trained = ["2.weight", "2.bias", "4.weight", "4.bias"]
    shared, stacked = split_shared([k for k in names if k not in trained], starts)
    assert set(shared) == {"0.weight", "0.bias"} and not stacked
    rule = SGDRule(0.9, 5e-4, 0.4, "loss", "foreach")
    lock = LockstepSGD(model, stack_states(starts, trained), lrs, rule, shared=shared, anchor=anchor)
    assert lock.groups == {0.05: trained[:2], 0.1: trained[2:]}
    run_chunk(lock, data)
    assert_close({**lock.weights, **{k: replicate(v, 3) for k, v in shared.items()}}, want, starts[0])


# ------------------------------------------------------------------------------------------ chunks, refusals
def test_chunks_of_equal_signatures_and_of_sorted_ones() -> None:
    sigs = [(2, (4, 4)), (2, (4, 1)), (2, (4, 4)), (1, (4,)), (2, (4, 1))]
    assert chunk_clients(sigs, 2) == [[0, 2], [1, 4], [3]]  # fedbabu: one signature a chunk
    assert chunk_clients(sigs, None) == [[0, 2], [1, 4], [3]]
    assert chunk_clients(sigs, 2, ragged=True) == [[3, 1], [4, 0], [2]]  # legate2023: sorted, then cut
    assert chunk_clients(sigs, None, ragged=True) == [[3, 1, 4, 0, 2]]
    assert chunk_clients([], None, ragged=True) == [] == chunk_clients([], 3)
    with pytest.raises(ConfigError, match="vector_chunk"):
        chunk_clients(sigs, 0)
    assert step_groups([(4, 4), (4, 1), (4,)]) == [
        StepGroup(0, [0, 1, 2], 4),
        StepGroup(1, [0], 4),
        StepGroup(1, [1], 1),
    ]


def test_split_shared_keeps_one_tensor_for_entries_equal_everywhere() -> None:
    same = torch.ones(2)
    states = [{"same": same, "equal": torch.zeros(2), "own": torch.tensor([0.0, i])} for i in range(3)]
    shared, stacked = split_shared(["same", "equal", "own"], states)
    assert shared["same"].data_ptr() == same.data_ptr() and torch.equal(shared["equal"], torch.zeros(2))
    assert list(stacked) == ["own"] and stacked["own"].shape == (3, 2)
    assert torch.equal(replicate(same, 3), torch.ones(3, 2))


def test_what_cannot_run_in_lockstep() -> None:
    bn = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    assert "buffers" in lockstep_obstacle(bn, keeps_buffers=True, modes_as_set=True)
    assert lockstep_obstacle(bn, keeps_buffers=False, modes_as_set=True) is None  # scratch buffers: fine
    drop = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).eval()
    assert lockstep_obstacle(drop, keeps_buffers=True, modes_as_set=True) is None  # off in eval mode
    assert "dropout" in lockstep_obstacle(drop, keeps_buffers=True, modes_as_set=False)
    assert "dropout" in lockstep_obstacle(drop.train(), keeps_buffers=False, modes_as_set=True)
