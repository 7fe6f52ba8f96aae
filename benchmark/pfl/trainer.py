"""The round loop of fedbabu's federated training (reference ``main_fed.py``; fedbabu Algorithm 1).

Per round ``r`` (0-based) of ``R``:

1. ``m = max(int(f*K), 1)`` clients are drawn without replacement (a generator keyed by ``(seed, r)``);
2. each sampled client loads the broadcast (aggregated) entries plus its own personal entries, and runs its
   local procedure: the reference's ``LocalUpdate.train`` is ``tau`` epochs of SGD over its augmented data in
   batches of 50, with a **fresh** optimiser (momentum restarts every round), two parameter groups (body at
   ``lr``, head at ``lr * head_lr_ratio``; a part the algorithm does not train gets lr 0), weight decay 0, and
   for FedProx the proximal term ``mu/2 * ||w - w_global||^2`` over the trained parameters. An algorithm whose
   ``procedure`` is not ``sgd`` runs its own (:mod:`benchmark.pfl.procedures`: FedRep, Ditto, Per-FedAvg), which
   returns the client's full state; the procedure's ``begin_round`` hook runs before the round's first update;
3. the server takes the **unweighted** mean of the sampled clients' aggregated entries (integer buffers are
   averaged as floats and cast back, as ``torch.div`` then ``load_state_dict`` do) and broadcasts them to
   every client; each sampled client keeps its personal entries;
4. the learning rate is multiplied by 0.1 after rounds ``R//2`` and ``3R//4`` (1-based, the reference);
5. every ``eval_every`` rounds each client's model (broadcast + its personal entries) is evaluated on its own
   test set in batches of 128 (with batch-statistics BN the batch composition matters, so the batches are the
   reference's: the client's test indices in order); the round's accuracy is the test-size-weighted mean.

Model selection (``selection``): ``best`` keeps the state of the round with the highest weighted accuracy (the
reference's ``best_model.pt``: selection on the clients' test sets, strictly greater, first wins); ``last``
keeps the final round's state (fedbabu App. A says the paper reports the last model). Both selected states are
kept; :class:`PFLResult` carries the one asked for and the other's accuracy.

``personal[i]`` overlays the broadcast for client ``i`` (``client_state``). For the sgd-procedure algorithms it
holds exactly the entries the algorithm does not aggregate; a procedure may keep more there -- Ditto keeps the
client's **full** personal model (the broadcast is then the global model, ``personal[i]`` the model client ``i``
is evaluated and fine-tuned with). The round loop only overwrites it with non-aggregated entries when there are any.

A checkpoint (every ``checkpoint_every`` rounds, atomic) holds the broadcast and personal entries, the best
state so far and the history; a resumed run continues bit-identically (all randomness is keyed by round and
client, the optimiser restarts every round).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.errors import ConfigError
from benchmark.pfl.algorithms import Algorithm, get_algorithm
from benchmark.pfl.data import DeviceImages, epoch_plan
from benchmark.pfl.models import build_model, is_head
from benchmark.pfl.partition import ClientSplit

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class PFLConfig:
    """One federated run of fedbabu (defaults: §3 and the reference scripts; Table 1/5 f=0.1, tau=10)."""

    dataset: str = "cifar100"
    model: str = "mobilenet_cifar"
    algorithm: str = "fedbabu"
    clients: int = 100
    participation: float = 0.1
    local_epochs: int = 10
    rounds: int = 32
    batch_size: int = 50
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    head_lr_ratio: float = 1.0  # Table 23: the head's lr relative to the body's (FedBABU: 0 by its part)
    prox_mu: float | None = None  # None: the algorithm's own
    bn: str | None = None  # None: the model's default (batch statistics for the reference networks)
    head_init: str = "default"
    selection: str = "best"
    eval_every: int = 1
    eval_batch: int = 128
    seed: int = 0
    # reduced configurations only (the pinned CI guard): evaluate / personalise the first ``eval_clients``
    # clients (None: all, the paper) and compute in ``dtype`` (float64 makes the guard portable across CPUs)
    eval_clients: int | None = None
    dtype: str = "float32"
    # execution only (same arithmetic up to summation order): the per-client loop, or clients of a round in
    # lock-step with torch.func (benchmark/pfl/vectorised.py; GPU), ``vector_chunk`` clients at a time
    client_exec: str = "loop"
    vector_chunk: int | None = None

    def __post_init__(self) -> None:
        if self.selection not in ("best", "last"):
            raise ConfigError(f"selection={self.selection!r}", "use 'best' (the reference) or 'last'")
        if self.client_exec not in ("loop", "vectorised"):
            raise ConfigError(f"client_exec={self.client_exec!r}", "use 'loop' or 'vectorised'")
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"dtype={self.dtype!r}", "use float32 (the paper) or float64 (portable pins)")
        if not 0 < self.participation <= 1:
            raise ConfigError(f"participation={self.participation}", "use a client fraction in (0, 1]")

    @property
    def clients_per_round(self) -> int:
        return max(int(self.participation * self.clients), 1)

    def lr_at(self, r: int) -> float:
        """The client lr of round ``r`` (0-based): x0.1 after rounds R//2 and 3R//4 (1-based), multiplied as
        ``main_fed.py`` does (``lr *= 0.1`` once after each finished round in ``[R//2, 3R//4]``: no drop for
        R=1, one for R=2 where the milestones coincide)."""
        lr = self.lr
        for done in range(1, r + 1):
            if done in (self.rounds // 2, (self.rounds * 3) // 4):
                lr *= 0.1
        return lr

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PFLResult:
    """The selected model's per-client test accuracies (percent), the per-round history, the selected round."""

    config: PFLConfig
    client_accuracy: np.ndarray
    selected_round: int
    history: list[dict[str, Any]]
    selected_state: State
    selected_personal: dict[int, State]
    other_selection_accuracy: float
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    #: the other selection's model (``best`` when ``last`` was asked for, and the reverse): training does not
    #: depend on the selection, so one run can write the outputs of both jobs (:func:`benchmark.pfl.run.train_step`)
    other_round: int | None = None
    other_state: State | None = None
    other_personal: dict[int, State] | None = None
    other_client_accuracy: np.ndarray | None = None


def client_accuracies(model: torch.nn.Module, data: DeviceImages, test: tuple[np.ndarray, ...],
                      states: Callable[[int], State], batch: int = 128) -> np.ndarray:  # fmt: skip
    """Percent accuracy of each client's model (``states(i)``) on its own test indices, batches of ``batch``
    in index order (reference ``test_img_local``)."""
    out = np.zeros(len(test))
    model.eval()
    dev = data.images.device
    with torch.no_grad():
        for i, idx in enumerate(test):
            model.load_state_dict(states(i))
            correct = 0
            for s in range(0, len(idx), batch):
                x, y = data.test_batch(torch.as_tensor(idx[s : s + batch], device=dev))
                correct += int((model(x).argmax(1) == y).sum())
            out[i] = 100.0 * correct / max(len(idx), 1)
    return out


def weighted_mean(acc: np.ndarray, test: tuple[np.ndarray, ...]) -> float:
    sizes = np.array([len(t) for t in test], dtype=float)
    return float((acc * sizes).sum() / sizes.sum())


def sgd_epochs(model: torch.nn.Module, data: DeviceImages, idx: np.ndarray, *, epochs: int, batch_size: int,
               body_lr: float, head_lr: float, momentum: float, weight_decay: float, seed: int,
               keys: tuple[int, ...], prox: tuple[float, State] | None = None) -> float:  # fmt: skip
    """The reference's ``LocalUpdate.train``: a fresh SGD with body / head groups, ``epochs`` passes over the
    client's augmented data. Returns the mean loss. ``keys`` seed the batches (``epoch_plan``)."""
    model.train()
    body = [p for n, p in model.named_parameters() if not is_head(n)]
    head = [p for n, p in model.named_parameters() if is_head(n)]
    opt = torch.optim.SGD([{"params": body, "lr": body_lr}, {"params": head, "lr": head_lr}],
                          momentum=momentum, weight_decay=weight_decay)  # fmt: skip
    anchor = None
    if prox is not None:
        named = dict(model.named_parameters())
        anchor = [(named[k], prox[1][k]) for k in named if k in prox[1]]
    dev = data.images.device
    idx_t = torch.as_tensor(idx, device=dev)
    losses = []
    for e in range(epochs):
        for pos, crop, flip in epoch_plan(len(idx), batch_size, seed, *keys, e):
            x, y = data.train_batch(idx_t[pos.to(dev)], crop.to(dev), flip.to(dev))
            loss = F.cross_entropy(model(x), y)
            if anchor:
                loss = loss + prox[0] / 2 * sum(((p - a) ** 2).sum() for p, a in anchor)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return float(torch.stack(losses).mean()) if losses else float("nan")


class PFLTrainer:
    """Broadcast entries + per-client personal entries; :meth:`run` runs the rounds (module docstring)."""

    def __init__(self, cfg: PFLConfig, train: DeviceImages, test: DeviceImages, split: ClientSplit,
                 num_classes: int, *, progress: bool = True) -> None:  # fmt: skip
        if split.num_clients != cfg.clients:
            raise ConfigError(
                f"partition has {split.num_clients} clients, config {cfg.clients}", "re-partition"
            )
        self.cfg, self.train, self.test, self.split = cfg, train, test, split
        self.algo: Algorithm = get_algorithm(cfg.algorithm)
        self.device = train.images.device
        torch.manual_seed(cfg.seed)
        self.model = build_model(cfg.model, num_classes, bn=cfg.bn, head_init=cfg.head_init)
        self.model = self.model.to(self.device, getattr(torch, cfg.dtype))
        train.dtype = test.dtype = getattr(torch, cfg.dtype)
        init = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.init_state = init
        self.broadcast: State = {k: v for k, v in init.items() if self.algo.aggregates(k)}
        self.init_personal: State = {k: v for k, v in init.items() if not self.algo.aggregates(k)}
        self.personal: dict[int, State] = {}
        self.prox_mu = cfg.prox_mu if cfg.prox_mu is not None else self.algo.prox_mu
        self.procedure = None  # the reference's LocalUpdate.train (sgd_epochs); else a registered procedure
        if self.algo.procedure not in ("sgd", "centralised"):  # centralised: benchmark.pfl.run
            from benchmark.pfl.procedures import get_procedure  # local: the procedures import this module

            self.procedure = get_procedure(self.algo.procedure)
            self.procedure.check(cfg, self.algo)
        self.history: list[dict[str, Any]] = []
        self.progress = progress

    # ------------------------------------------------------------------------------------------ states
    def client_state(self, i: int) -> State:
        return {**self.broadcast, **self.personal.get(i, self.init_personal)}

    def part_lrs(self, lr: float) -> tuple[float, float]:
        """(body lr, head lr) of a local update: 0 for a part the algorithm does not train."""
        body = lr if self.algo.local_part in ("body", "full") else 0.0
        head = lr * self.cfg.head_lr_ratio if self.algo.local_part in ("head", "full") else 0.0
        return body, head

    def sample(self, r: int) -> np.ndarray:
        rng = np.random.default_rng([self.cfg.seed, 0x5A, r])
        return np.sort(rng.choice(self.cfg.clients, self.cfg.clients_per_round, replace=False))

    # ------------------------------------------------------------------------------------ local update
    def local_update(self, i: int, r: int, lr: float) -> tuple[State, float]:
        """Client ``i``'s update in round ``r``: its full state after the local procedure, and its loss."""
        if self.procedure is not None:
            return self.procedure(self, i, r, lr)
        self.model.load_state_dict(self.client_state(i))
        body_lr, head_lr = self.part_lrs(lr)
        prox = None
        if self.prox_mu:
            prox = (float(self.prox_mu), {k: v for k, v in self.broadcast.items()})
        loss = sgd_epochs(
            self.model, self.train, self.split.train[i], epochs=self.cfg.local_epochs,
            batch_size=self.cfg.batch_size, body_lr=body_lr, head_lr=head_lr, momentum=self.cfg.momentum,
            weight_decay=self.cfg.weight_decay, seed=self.cfg.seed, keys=(r, i), prox=prox,
        )  # fmt: skip
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}, loss

    def aggregate(self, states: list[State]) -> State:
        """Unweighted mean of the aggregated entries (float mean, cast back to the entry's dtype)."""
        out = {}
        for k, ref in self.broadcast.items():
            mean = torch.stack([s[k].double() for s in states]).mean(0)
            out[k] = mean.to(ref.dtype) if ref.is_floating_point() else mean.trunc().to(ref.dtype)
        return out

    def run_round(self, r: int) -> dict[str, Any]:
        if self.cfg.client_exec == "vectorised" and self.procedure is None:  # procedures run their own loop
            from benchmark.pfl.vectorised import run_round_vectorised  # local: circle via pfl.personalise

            return run_round_vectorised(self, r, self.cfg.vector_chunk)
        lr = self.cfg.lr_at(r)
        clients = self.sample(r)
        if self.procedure is not None:
            self.procedure.start_round(self, r)
        states, losses = [], []
        for i in clients:
            s, loss = self.local_update(int(i), r, lr)
            states.append(s)
            losses.append(loss)
        for i, s in zip(clients, states, strict=True):
            personal = {k: s[k] for k in self.init_personal}
            if personal:
                self.personal[int(i)] = personal
        if self.broadcast:
            self.broadcast = self.aggregate(states)
        return {"round": r + 1, "lr": lr, "train_loss": float(np.mean(losses)), "clients": len(clients)}

    def eval_split(self) -> tuple[np.ndarray, ...]:
        """The test sets evaluated: every client's, or the first ``eval_clients`` (reduced configurations)."""
        return self.split.test[: self.cfg.eval_clients] if self.cfg.eval_clients else self.split.test

    def evaluate(self) -> np.ndarray:
        return client_accuracies(
            self.model, self.test, self.eval_split(), self.client_state, self.cfg.eval_batch
        )

    # ------------------------------------------------------------------------------------------- run
    def snapshot(self) -> tuple[State, dict[int, State]]:
        return (
            {k: v.clone() for k, v in self.broadcast.items()},
            {i: {k: v.clone() for k, v in s.items()} for i, s in self.personal.items()},
        )

    def run(self, *, checkpoint: Path | None = None, checkpoint_every: int = 5) -> PFLResult:
        from benchmark.fl.progress import RoundProgress

        cfg = self.cfg
        t0 = time.perf_counter()
        start, best = 0, {"acc": -1.0, "round": 0, "state": None, "clients": None}
        if checkpoint is not None and Path(checkpoint).is_file():
            start, best = self._resume(Path(checkpoint))
        bar = RoundProgress(f"{cfg.algorithm}/{cfg.model}", cfg.rounds, done=start, enabled=self.progress)
        last_acc = None
        for r in range(start, cfg.rounds):
            row = self.run_round(r)
            if (r + 1) % cfg.eval_every == 0 or r + 1 == cfg.rounds:
                acc = self.evaluate()
                row["test_accuracy"] = weighted_mean(acc, self.eval_split())
                last_acc = acc
                if row["test_accuracy"] > best["acc"]:
                    best = {
                        "acc": row["test_accuracy"],
                        "round": r + 1,
                        "state": self.snapshot(),
                        "clients": acc,
                    }
                bar.set_acc(row["test_accuracy"] / 100)
            row["wall_s"] = time.perf_counter() - t0
            self.history.append(row)
            bar.round_done(r + 1)
            if checkpoint is not None and ((r + 1) % checkpoint_every == 0) and r + 1 < cfg.rounds:
                self._save(Path(checkpoint), r + 1, best)
        bar.close()
        if last_acc is None:  # resumed at the end: re-evaluate the final state
            last_acc = self.evaluate()
        last = {"acc": weighted_mean(last_acc, self.eval_split()), "round": cfg.rounds, "state": self.snapshot(),
                "clients": last_acc}  # fmt: skip
        chosen, other = (best, last) if cfg.selection == "best" else (last, best)
        state, personal = chosen["state"]
        other_state, other_personal = other["state"] if other["state"] is not None else ({}, None)
        return PFLResult(
            cfg, np.asarray(chosen["clients"]), int(chosen["round"]), self.history,
            {**state}, personal, float(other["acc"]), time.perf_counter() - t0,
            extra={"best_round": int(best["round"]), "best_accuracy": float(best["acc"]),
                   "last_accuracy": float(last["acc"])},
            other_round=int(other["round"]), other_state={**other_state} if other_personal is not None else None,
            other_personal=other_personal,
            other_client_accuracy=None if other["clients"] is None else np.asarray(other["clients"]),
        )  # fmt: skip

    # ----------------------------------------------------------------------------------- checkpoints
    def _identity(self) -> dict[str, Any]:
        return {"config": self.cfg.to_dict(), "method": self.cfg.algorithm, "stage": "pfl", "start_round": 0,
                "rounds": self.cfg.rounds}  # fmt: skip

    def _save(self, path: Path, done: int, best: Mapping[str, Any]) -> None:
        from benchmark.fl.checkpoint import save_checkpoint

        bstate, bpers = best["state"] if best["state"] is not None else ({}, {})
        save_checkpoint(path, {
            "run": self._identity(), "round": done,
            "trainer": {"broadcast": self.broadcast, "personal": {str(i): s for i, s in self.personal.items()},
                        "best_state": bstate, "best_personal": {str(i): s for i, s in bpers.items()},
                        "best_clients": torch.as_tensor(best["clients"] if best["clients"] is not None else []),
                        "best_acc": float(best["acc"]), "best_round": int(best["round"])},
            "history": self.history, "costs": {},
        })  # fmt: skip

    def _resume(self, path: Path) -> tuple[int, dict[str, Any]]:
        from benchmark.fl.checkpoint import load_checkpoint, tensors_to

        st = load_checkpoint(path, self._identity())
        tr = tensors_to(st["trainer"], self.device)
        self.broadcast = tr["broadcast"]
        self.personal = {int(i): s for i, s in tr["personal"].items()}
        self.history = list(st["history"])
        best = {"acc": tr["best_acc"], "round": tr["best_round"], "clients": tr["best_clients"].cpu().numpy(),
                "state": (tr["best_state"], {int(i): s for i, s in tr["best_personal"].items()})}  # fmt: skip
        return int(st["round"]), best
