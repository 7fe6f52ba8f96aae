"""Full-model rounds with the sampled clients trained side by side (``client_exec="vectorised"``).

:class:`VectorisedTrainer` is :class:`~benchmark.fl.engine.ModelTrainer` with another execution of step 2 of
a round (module docstring of :mod:`benchmark.fl.engine`; McMahan et al. 2017 Algorithm 1 ClientUpdate):
instead of one client after the other on one working copy, ``cfg.vector_chunk`` clients at a time train in
lock-step on :class:`benchmark.federated.vectorised.LockstepSGD` (weights stacked along a leading client
axis, every local SGD step of all of them one ``torch.func.vmap(grad(loss))`` call). This module is its
legate2023 plug-in: it draws the clients' batches and chunks them; the executor does the arithmetic. On a GPU
this turns 30 small batches into one large computation; the arithmetic of each client is unchanged:

* the same mini-batches (:func:`benchmark.fl.client.batch_schedule`, the same ``data_order`` stream when
  ``client_shuffle``), the same batch-mean cross-entropy, the same SGD step as
  :func:`benchmark.fl.client.local_sgd` (:func:`~benchmark.federated.vectorised.sgd_step` with
  ``kernel="per_tensor"``, ``prox_at="step"``: coupled weight decay, momentum buffer started at the first
  step, FedProx term ``mu (w - w_global)`` after momentum, FLSim order), in the same precision (bf16 autocast
  on CUDA under ``cfg.amp``);
* clients whose schedules differ (unequal sizes, the smaller last batch of an epoch) are exact too: at local
  step ``t`` the clients of a chunk that still have a batch are grouped by that batch's size and each group is
  one vmapped call (:func:`~benchmark.federated.vectorised.step_groups`), so no batch is ever padded
  (padding would change BatchNorm's batch statistics). Chunks are formed after a stable sort of the clients
  by their batch-size sequence (:func:`~benchmark.federated.vectorised.chunk_clients` with ``ragged=True``),
  so clients with identical schedules (the balanced partitions of legate2023) share every call;
* the working model is in train mode as in the loop (BatchNorm normalises with each client's own batch
  statistics); the running statistics a client's forward passes would update are discarded, exactly as
  ``bn_stats="frozen_global"`` discards the working copy's;
* the example-weighted delta average (:class:`~benchmark.federated.server_opt.DeltaAccumulator`, clients added in
  chunk order: the client order of the loop when all schedules are equal) and the server step are the
  loop's.

So one round equals the loop's round up to floating-point rounding (grouped vs single convolutions, summation
order), which ``tests/test_fl_vectorised.py`` checks in float64 to 1e-12 relative.

No host syncs inside a round: a chunk's batch indices go to the device in one non-blocking copy, batches of an
:class:`~benchmark.fl.image_data.ImageSet` are gathered and preprocessed there, the losses are summed there and
read back once, at the end of the round.

Not covered, with a clear :class:`~benchmark.errors.ConfigError`: ``bn_stats="aggregate"`` (clients would
have to return their BatchNorm statistics; use ``client_exec="loop"``) and models with dropout in train mode
(``vmap`` cannot reproduce the loop's random stream;
:func:`~benchmark.federated.vectorised.lockstep_obstacle`). Memory: a chunk holds ``vector_chunk *
batch_size`` images' activations at once (``vector_chunk`` is the knob), plus three stacked copies of the
trained weights (weights, gradients, momentum).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from benchmark.errors import ConfigError
from benchmark.federated.history import RoundStats, wire_bytes
from benchmark.federated.images import to_device_index
from benchmark.federated.server_opt import DeltaAccumulator
from benchmark.federated.vectorised import (
    LockstepSGD,
    SGDRule,
    chunk_clients,
    lockstep_obstacle,
    replicate,
    sgd_step,
    step_groups,
)
from benchmark.fl.client import batch_schedule, fetch_batch
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import FL_TRAINERS, ModelTrainer
from benchmark.fl.image_data import ImageSet


@dataclass(frozen=True)
class _Client:
    """One sampled client of a round: its data, mini-batches and aggregation weight."""

    k: int
    data: Dataset
    schedule: list[np.ndarray]
    weight: float

    @property
    def signature(self) -> tuple[int, ...]:
        """The batch sizes of its local steps (clients with equal signatures run in lockstep)."""
        return tuple(len(b) for b in self.schedule)


@dataclass(frozen=True)
class _Group:
    """One vmapped call (:class:`~benchmark.federated.vectorised.StepGroup`): the chunk rows that take local
    step ``t`` with batches of ``size`` samples.

    ``rows``/``index`` are slices into the chunk's plan tensor on the device (rows of the chunk, and the
    samples' rows of the shared :class:`ImageSet` storage when the clients have one)."""

    t: int
    rows: list[int]
    size: int
    rows_at: tuple[int, int]
    index_at: tuple[int, int] | None


class VectorisedTrainer(ModelTrainer):
    """:class:`~benchmark.fl.engine.ModelTrainer` whose rounds train ``cfg.vector_chunk`` clients at a time
    with ``torch.func`` (module docstring). Same constructor, same records; only :meth:`train_round` differs."""

    @classmethod
    def refuse(cls, cfg: FLConfig) -> None:
        if cfg.bn_stats == "aggregate":
            raise ConfigError(
                "client_exec='vectorised' does not return the clients' BatchNorm statistics, which "
                "bn_stats='aggregate' averages",
                "use client_exec='loop' with bn_stats='aggregate'",
            )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._set_modes(self.work)
        reason = lockstep_obstacle(self.work, keeps_buffers=False, modes_as_set=True)
        if reason:
            raise ConfigError(f"client_exec='vectorised': {reason}", "use client_exec='loop' for this model")
        self.chunk = int(self.cfg.vector_chunk)

    # ------------------------------------------------------------------------------------------ a round
    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        """Train the sampled clients chunk by chunk, aggregate, step the server (module docstring)."""
        cfg = self.cfg
        self._set_modes(self.work)
        gparams = dict(self.model.named_parameters())
        trained = {n: gparams[n].detach() for n in self.train_names}
        fixed = {n: gparams[n].detach() for n in self.frozen_names}
        buffers = {n: b.detach() for n, b in self.model.named_buffers()}
        jobs: list[_Client] = []
        for k in clients:
            data = self.clients[int(k)]
            n_k = len(data)  # type: ignore[arg-type]
            if n_k == 0:
                continue
            rng = cfg.seeds.rng("data_order", int(round_idx), int(k)) if cfg.client_shuffle else None
            schedule = batch_schedule(n_k, cfg.batch_size, cfg.local_epochs, rng)
            examples = sum(len(b) for b in schedule)
            weight = float(examples) if cfg.aggregation_weights == "examples" else 1.0
            jobs.append(_Client(int(k), data, schedule, weight))
        signatures = [(len(j.schedule), j.signature) for j in jobs]
        deltas = DeltaAccumulator()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        examples = 0
        up_measured = 0
        for rows in chunk_clients(signatures, self.chunk, ragged=True):
            chunk = [jobs[r] for r in rows]
            stacked, chunk_loss = self._train_chunk(chunk, trained, fixed, buffers, lr)
            with torch.no_grad():
                for r, job in enumerate(chunk):
                    update = {
                        n: trained[n] - stacked[n][r] for n in self.train_names
                    }  # what the client returns
                    up_measured += wire_bytes(update, cfg.bytes_per_float)
                    deltas.add(update, job.weight)
            loss_sum += chunk_loss
            examples += sum(sum(len(b) for b in j.schedule) for j in chunk)
            del stacked
        self.server_update(gparams, deltas, DeltaAccumulator())  # no aggregated buffers: refused (refuse)
        down_bytes = wire_bytes(self.downlink_payload(), cfg.bytes_per_float)
        return self.round_stats(len(clients), examples, loss_sum, up_measured, down_bytes)

    # ------------------------------------------------------------------------------------------ a chunk
    def _plan(self, chunk: Sequence[_Client]) -> tuple[list[_Group], torch.Tensor, ImageSet | None]:
        """The vmapped calls of a chunk and one device tensor holding all their row / sample indices."""
        first = chunk[0].data
        shared = (
            isinstance(first, ImageSet)
            and first.device == self.device
            and all(first.shares_storage(j.data) for j in chunk)
        )
        root = first.root if shared else None  # type: ignore[union-attr]
        groups: list[_Group] = []
        parts: list[np.ndarray] = []
        at = 0
        for g in step_groups([j.signature for j in chunk]):
            parts.append(np.asarray(g.rows, dtype=np.int64))
            rows_at = (at, at + len(g.rows))
            at += len(g.rows)
            index_at = None
            if root is not None:
                parts.extend(chunk[r].data.root_indices(chunk[r].schedule[g.t]) for r in g.rows)  # type: ignore[attr-defined]
                index_at = (at, at + len(g.rows) * g.size)
                at += len(g.rows) * g.size
            groups.append(_Group(g.t, g.rows, g.size, rows_at, index_at))
        plan = to_device_index(np.concatenate(parts), self.device)
        return groups, plan, root

    def _batch(
        self, chunk: Sequence[_Client], group: _Group, plan: torch.Tensor, root: ImageSet | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The group's batches stacked ``(clients, size, ...)`` on the device."""
        if root is not None and group.index_at is not None:
            x, y = root.batch_rows(plan[group.index_at[0] : group.index_at[1]])
        else:
            parts = [fetch_batch(chunk[r].data, chunk[r].schedule[group.t]) for r in group.rows]
            x = torch.cat([p[0] for p in parts]).to(self.device, non_blocking=True)
            y = torch.cat([p[1] for p in parts]).to(self.device, non_blocking=True)
        if self.cfg.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        return x.unflatten(0, (len(group.rows), group.size)), y.unflatten(0, (len(group.rows), group.size))

    def _train_chunk(
        self,
        chunk: Sequence[_Client],
        trained: Mapping[str, torch.Tensor],
        fixed: dict[str, torch.Tensor],
        buffers: Mapping[str, torch.Tensor],
        lr: float,
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Local SGD of the chunk's clients from the global weights: their stacked final weights and the sum
        of their batch losses (times batch sizes), both on the device. The BatchNorm running statistics each
        client's forward passes update are scratch copies, dropped (``bn_stats="frozen_global"``)."""
        c = len(chunk)
        lock = LockstepSGD(
            self.work,
            {n: replicate(trained[n], c) for n in self.train_names},
            lr,
            self._rule(),
            shared=fixed,
            buffers={n: replicate(b, c) for n, b in buffers.items()},
            anchor=trained,
            precision=self.precision,
            step=self._sgd_step,
        )
        loss_sum = torch.zeros(c, dtype=torch.float64, device=self.device)
        groups, plan, root = self._plan(chunk)
        for group in groups:
            every = len(group.rows) == c
            rows = plan[group.rows_at[0] : group.rows_at[1]]
            x, y = self._batch(chunk, group, plan, root)
            losses = lock.step(x, y, first=group.t == 0, rows=None if every else rows)
            if every:
                loss_sum += losses.double() * group.size
            else:
                loss_sum.index_add_(0, rows, losses.double() * group.size)
        return lock.weights, loss_sum.sum()

    def _rule(self) -> SGDRule:
        """The clients' SGD (:func:`~benchmark.fl.client.local_sgd`'s order), read from the config now."""
        cfg = self.cfg
        return SGDRule(cfg.client_momentum, cfg.client_weight_decay, cfg.prox_mu, "step", "per_tensor")

    def _sgd_step(self, *group: Any, first: bool) -> None:
        """:func:`~benchmark.fl.client.local_sgd`'s step on one group of stacked clients, in place
        (:func:`~benchmark.federated.vectorised.sgd_step`'s arguments; the config read now)."""
        sgd_step(*group, first=first, rule=self._rule())

    def describe(self) -> dict[str, object]:
        """:meth:`ModelTrainer.describe` plus how the clients were executed."""
        return {
            **super().describe(),
            "client_exec": "vectorised",
            "vector_chunk": self.chunk,
            "channels_last": bool(self.cfg.channels_last),
        }


FL_TRAINERS.add("fedavg_vectorised", VectorisedTrainer)
