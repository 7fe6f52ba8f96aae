"""The one lock-step executor: the local SGD of many clients at once with ``torch.func`` (issue 25).

On a GPU a round of small client batches is launch-bound. Here a chunk of ``c`` clients keeps the weights it
trains stacked along a leading client axis, and every local step of all of them is one
``torch.func.vmap(grad(loss))`` call over ``functional_call`` of the model (a convolution with per-client
weights becomes one grouped convolution), followed by one SGD step on the stacked tensors. Each client's
arithmetic is that of its family's per-client loop; only the kernels differ (grouped vs single convolutions,
batched vs single matrix products sum in another order), so a lock-step round equals the loop's round to
floating-point rounding, which each family's tests bound (``tests/test_fl_vectorised.py``,
``tests/test_pfl_vectorised.py``).

What is here, common to the families:

* :class:`LockstepSGD` - one chunk's state and step: the trained entries stacked per client (updated in
  place), the other parameters either shared by every client (one unbatched tensor) or stacked, scratch
  buffers; the batch-mean cross-entropy (bf16 autocast on request); per-parameter learning-rate groups; a
  step of some clients only (``rows``: the ragged steps of clients whose schedules differ);
* :func:`sgd_step` and :class:`SGDRule` - the SGD of a fresh optimiser per client and local update:
  coupled weight decay ``d = g + wd w``, momentum buffer set to ``d`` at the first step, then
  ``buf = momentum buf + d``, an optional FedProx term, ``w -= lr d``;
* :func:`replicate`, :func:`stack_states`, :func:`split_shared` - per-client states to stacked entries;
* :func:`chunk_clients`, :func:`step_groups` - clients of equal batch-size schedules grouped into chunks, and
  a chunk's steps grouped by batch size where its schedules differ (no batch is ever padded: padding would
  change BatchNorm's batch statistics);
* :func:`lockstep_obstacle` - why a model cannot run in lock-step (dropout, kept buffers).

The plug-ins keep only what differs: how a family draws and preprocesses its batches, which entries it
trains, and how it accounts losses: :mod:`benchmark.fl.vectorised` (legate2023's full-model rounds) and
:mod:`benchmark.pfl.vectorised` (fedbabu's personalised rounds, fine-tuning and lock-step evaluation).

Two numerical choices differ between the families and are kept as named options (each family's numbers are
unchanged by the move onto this module):

* ``SGDRule.kernel``: ``"per_tensor"`` is :func:`benchmark.fl.client.local_sgd` (one tensor at a time,
  ``p.sub_(d, alpha=lr)``); ``"foreach"`` is ``torch.optim.SGD``'s foreach path, the default on CUDA, which
  the fedbabu reference runs (``torch._foreach_*``, ``p += -lr d``). The elementwise arithmetic is the same
  (``sub`` with ``alpha`` is ``add`` with ``-alpha``) and on the CPU the foreach ops run the per-tensor
  kernels, so both give the same bits there (``tests/test_federated_vectorised.py``); on CUDA the foreach ops
  are fused multi-tensor kernels, which need not round alike, so each family keeps its own;
* ``SGDRule.prox_at``: ``"step"`` adds FedProx's ``mu (w - w_global)`` to the step after momentum (FLSim,
  legate2023); ``"loss"`` adds ``mu/2 ||w - w_broadcast||^2`` over the anchored entries to the loss (the
  fedbabu reference), so the term passes through weight decay and momentum. These are two algorithms, not
  two roundings of one.

Buffers (BatchNorm running statistics) are scratch: each client's forward passes update its own stacked copy,
which the executor never returns. A model whose round keeps its buffers (legate2023's
``bn_stats="aggregate"``, fedbabu's ``bn="standard"``) is refused, as is dropout in train mode (``vmap``
cannot reproduce a per-client loop's random stream): :func:`lockstep_obstacle`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from benchmark.errors import ConfigError
from benchmark.federated.precision import FP32, Precision

State = dict[str, torch.Tensor]
SGDKernel = Literal["per_tensor", "foreach"]
ProxAt = Literal["step", "loss"]


# --------------------------------------------------------------------------------------------- eligibility
def lockstep_obstacle(model: nn.Module, *, keeps_buffers: bool, modes_as_set: bool) -> str | None:
    """Why ``model`` cannot train in lock-step (``None`` when it can).

    ``keeps_buffers``: the round keeps what the forward passes write into the buffers (the executor returns no
    buffers). Dropout with ``p > 0`` is refused in the modules that are in train mode now when
    ``modes_as_set`` (the caller has set the modes it trains with), in every module otherwise (the caller
    puts the whole model in train mode)."""
    buffers = [n for n, _ in model.named_buffers()]
    if keeps_buffers and buffers:
        return (
            f"the model has buffers ({buffers[0]!r}: BatchNorm running statistics) that the round keeps, "
            "which vmap cannot update per client"
        )
    drop = [
        n
        for n, m in model.named_modules()
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and (m.training or not modes_as_set)
    ]
    if drop:
        return f"the model has dropout ({drop[0]!r}), whose random stream vmap cannot reproduce per client"
    return None


# ------------------------------------------------------------------------------------------------ chunks
def chunk_clients(
    signatures: Sequence[Hashable], chunk: int | None, *, ragged: bool = False
) -> list[list[int]]:
    """The positions ``0..len(signatures)-1`` of clients cut into lock-step chunks of at most ``chunk``
    (``None``: unbounded); a client's signature is its batch-size schedule (or a key that fixes it).

    ``ragged=False``: every chunk holds clients of one signature (the signatures in order of first
    appearance, each group's clients in their given order, cut into chunks); fedbabu's ``size_chunks``.
    ``ragged=True``: the clients stably sorted by signature and cut into consecutive chunks, so clients of
    equal schedules share chunks and a chunk may hold two signatures (:func:`step_groups` then splits its
    steps by batch size); legate2023's trainer. Signatures must then be orderable."""
    if chunk is not None and chunk < 1:
        raise ConfigError(f"vector_chunk={chunk}", "use a positive number of clients per chunk")
    if ragged:
        order = sorted(range(len(signatures)), key=lambda i: signatures[i])  # type: ignore[arg-type,return-value]
        step = chunk or max(len(order), 1)
        return [order[s : s + step] for s in range(0, len(order), step)]
    groups: dict[Hashable, list[int]] = {}
    for i, sig in enumerate(signatures):
        groups.setdefault(sig, []).append(i)
    out = []
    for members in groups.values():
        step = chunk or len(members)
        out += [members[s : s + step] for s in range(0, len(members), step)]
    return out


@dataclass(frozen=True)
class StepGroup:
    """One vmapped call of a chunk: the chunk ``rows`` that take local step ``t`` with batches of ``size``."""

    t: int
    rows: list[int]
    size: int


def step_groups(schedules: Sequence[Sequence[int]]) -> list[StepGroup]:
    """The calls of a chunk whose client ``r`` takes batches of sizes ``schedules[r]``: at each local step
    ``t`` the clients that still have a batch, grouped by its size (sizes in order of first appearance over
    the rows, rows in order). Equal schedules give one call per step with every row."""
    groups: list[StepGroup] = []
    for t in range(max((len(s) for s in schedules), default=0)):
        by_size: dict[int, list[int]] = {}
        for r, sched in enumerate(schedules):
            if t < len(sched):
                by_size.setdefault(int(sched[t]), []).append(r)
        groups += [StepGroup(t, rows, size) for size, rows in by_size.items()]
    return groups


# -------------------------------------------------------------------------------------------- stacking
def replicate(t: torch.Tensor, c: int) -> torch.Tensor:
    """``c`` copies of ``t`` along a new leading client axis (a fresh contiguous tensor)."""
    return t.detach().unsqueeze(0).repeat(c, *([1] * t.dim()))


def stack_states(states: Sequence[Mapping[str, torch.Tensor]], names: Sequence[str]) -> State:
    """The entries ``names`` of the clients' ``states`` stacked along a new leading client axis (fresh)."""
    return {n: torch.stack([s[n].detach() for s in states]) for n in names}


def split_shared(names: Sequence[str], states: Sequence[Mapping[str, torch.Tensor]]) -> tuple[State, State]:
    """The entries ``names`` of ``states`` split into those equal for every client (one tensor, unbatched)
    and the others (stacked along a new leading client axis). One host sync at most."""
    shared: State = {}
    pending: list[tuple[str, torch.Tensor]] = []
    for n in names:
        first = states[0][n]
        if all(s[n] is first for s in states[1:]):
            shared[n] = first.detach()
        else:
            pending.append((n, torch.stack([s[n].detach() for s in states])))
    stacked: State = {}
    if pending:
        same = torch.stack([(t == t[:1]).reshape(len(t), -1).all() for _, t in pending]).tolist()
        for (n, t), eq in zip(pending, same, strict=True):
            if eq:
                shared[n] = t[0]
            else:
                stacked[n] = t
    return shared, stacked


# ------------------------------------------------------------------------------------------------ SGD
@dataclass(frozen=True)
class SGDRule:
    """A fresh SGD per client and local update (module docstring): coupled ``weight_decay``, heavy-ball
    ``momentum`` started at the first step, FedProx ``prox_mu`` placed ``prox_at``, in ``kernel`` order."""

    momentum: float = 0.0
    weight_decay: float = 0.0
    prox_mu: float = 0.0
    prox_at: ProxAt = "step"
    kernel: SGDKernel = "per_tensor"


def sgd_step(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    moms: list[torch.Tensor],
    anchor: list[torch.Tensor],
    lr: float,
    *,
    first: bool,
    rule: SGDRule,
) -> None:
    """One SGD step of ``rule`` on stacked clients, in place: ``d = g + wd p``; with momentum ``moms[i] = d``
    at the ``first`` step, else ``moms[i] = momentum moms[i] + d``, and ``d = moms[i]``; with
    ``prox_at="step"`` ``d += mu (p - anchor[i])`` (``anchor``: the unbatched global weights); ``p -= lr d``.
    ``moms`` holds one tensor per parameter when ``rule.momentum != 0`` (its values are ignored at the first
    step); the order of operations is ``rule.kernel``'s (module docstring)."""
    wd, mom, mu = rule.weight_decay, rule.momentum, rule.prox_mu if rule.prox_at == "step" else 0.0
    if rule.kernel == "foreach":  # torch.optim.SGD's foreach path
        d = grads
        if wd != 0.0:
            d = torch._foreach_add(d, params, alpha=wd)
        if mom != 0.0:
            if first:
                for m, v in zip(moms, d, strict=True):
                    m.copy_(v)
            else:
                torch._foreach_mul_(moms, mom)
                torch._foreach_add_(moms, d)
            d = moms
        if mu != 0.0:
            d = torch._foreach_add(d, torch._foreach_sub(params, anchor), alpha=mu)
        torch._foreach_add_(params, d, alpha=-lr)
        return
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):  # FLSim's order (fl.client.local_sgd's step)
        d = g
        if wd != 0.0:
            d = d.add(p, alpha=wd)
        if mom != 0.0:
            if first:
                moms[i].copy_(d)
            else:
                moms[i].mul_(mom).add_(d)
            d = moms[i]
        if mu != 0.0:
            d = d.add(p - anchor[i], alpha=mu)
        p.sub_(d, alpha=lr)


# ------------------------------------------------------------------------------------------- a chunk
class LockstepSGD:
    """The local SGD of one chunk of ``c`` clients in lock-step (module docstring).

    ``weights``: the trained entries, stacked ``(c, ...)``; trained in place, read them back from
    :attr:`weights`. ``lr``: one learning rate, or one per trained entry (entries of equal lr form one step
    group, in the order of ``weights``). ``stacked`` / ``shared``: the other parameters, per client or one for
    all; ``buffers``: stacked scratch copies of the model's buffers (never returned). ``anchor``: the unbatched
    FedProx anchor (``prox_at="step"``: one per trained entry; ``"loss"``: the anchored entries, in the order
    the term sums them). ``precision``: the run's :class:`~benchmark.federated.precision.Precision` (its
    autocast around the forward pass, its loss logits; already resolved for the device with ``on``).
    ``step``: the SGD step of a group, called as :func:`sgd_step` without ``rule`` (default: :func:`sgd_step`
    with ``rule``). The model must already be in the modes it trains with."""

    def __init__(
        self,
        model: nn.Module,
        weights: Mapping[str, torch.Tensor],
        lr: float | Mapping[str, float],
        rule: SGDRule,
        *,
        stacked: Mapping[str, torch.Tensor] | None = None,
        shared: Mapping[str, torch.Tensor] | None = None,
        buffers: Mapping[str, torch.Tensor] | None = None,
        anchor: Mapping[str, torch.Tensor] | None = None,
        precision: Precision = FP32,
        step: Callable[..., None] | None = None,
    ) -> None:
        self.model, self.rule, self.precision = model, rule, precision
        self.weights: State = dict(weights)
        self.stacked, self.shared, self.buffers = dict(stacked or {}), dict(shared or {}), dict(buffers or {})
        self.anchor: State = dict(anchor or {})
        self.groups: dict[float, list[str]] = {}
        for n in self.weights:
            self.groups.setdefault(float(lr[n] if isinstance(lr, Mapping) else lr), []).append(n)
        self.moms: State = {n: torch.empty_like(w) for n, w in self.weights.items()} if rule.momentum else {}
        self._step: Callable[..., None] = step or partial(sgd_step, rule=rule)
        in_dims = (0, 0, None, 0, 0, 0)  # weights, stacked, shared, buffers, x, y
        self._grad = vmap(grad(self._loss, has_aux=True), in_dims=in_dims, randomness="error")
        self._forward = vmap(self._loss, in_dims=in_dims, randomness="error")

    def _loss(
        self,
        weights: State,
        stacked: State,
        shared: State,
        buffers: State,
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One client's batch-mean cross-entropy (plus FedProx's term with ``prox_at="loss"``), and its value."""
        params = {**weights, **stacked, **shared}
        with self.precision.autocast_context():
            logits = functional_call(self.model, (params, buffers), (x,))
        loss = F.cross_entropy(self.precision.loss_logits(logits), y)
        if self.rule.prox_at == "loss" and self.anchor:
            mu = self.rule.prox_mu
            loss = loss + mu / 2 * sum(((params[k] - a) ** 2).sum() for k, a in self.anchor.items())
        return loss, loss.detach()

    def step(
        self, x: torch.Tensor, y: torch.Tensor, *, first: bool, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One local step of every client (``rows=None``) or of the chunk rows ``rows`` (a device index), on
        their batches ``x`` ``(clients, batch, ...)``, ``y`` ``(clients, batch)``; ``first``: their first
        step (momentum starts). Returns each client's batch loss (detached, on the device). With no trained
        entry it only computes the losses."""

        def sel(d: State) -> State:  # the rows' entries (fresh), or every row's (the tensors themselves)
            return d if rows is None else {n: v.index_select(0, rows) for n, v in d.items()}

        w, s, b = sel(self.weights), sel(self.stacked), sel(self.buffers)
        if not w:
            with torch.no_grad():
                return self._forward(w, s, self.shared, b, x, y)[1]
        grads, losses = self._grad(w, s, self.shared, b, x, y)
        with torch.no_grad():
            m = sel(self.moms)
            step_anchor = self.rule.prox_at == "step" and bool(self.anchor)
            for lr, names in self.groups.items():
                self._step(
                    [w[n] for n in names],
                    [grads[n] for n in names],
                    [m[n] for n in names] if m else [],
                    [self.anchor[n] for n in names] if step_anchor else [],
                    lr,
                    first=first,
                )
            if rows is not None:
                for n in self.weights:
                    self.weights[n].index_copy_(0, rows, w[n])
                    if m:
                        self.moms[n].index_copy_(0, rows, m[n])
        return losses
