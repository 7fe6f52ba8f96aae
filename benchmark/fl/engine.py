"""The round loop: sample clients, train them locally, aggregate, step the server, evaluate, count costs.

One round r (FedAvg family, McMahan et al. 2017 Algorithm 1 / Reddi et al. 2021 Algorithm 1):

1. :class:`ClientSampler` draws m = ``cfg.clients_per_round`` of the K clients uniformly without replacement
   from the ``client_sampling`` stream keyed by r (so the draw does not depend on the model seed, on the
   other rounds, or on how the clients are trained).
2. Each sampled client starts from the global weights and runs :func:`benchmark.fl.client.local_sgd`.
3. The server averages the deltas ``global - local`` with the client weights
   (:class:`~benchmark.fl.server_opt.DeltaAccumulator`) and takes one server-optimiser step.
4. Every ``cfg.eval_every`` rounds (and after the last) the global model is evaluated on the test set.

Per-round record (:class:`RoundRecord`): test accuracy / loss, mean local training loss, cumulative uplink and
downlink bytes, cumulative compute in F units, cumulative wall time, the sampled clients, and the largest
drift of a not-trained parameter.

Costs, legate2023 App. A (Eq. 3-6), counted from what the run actually does:

* Communication: each sampled client receives and returns one payload per round (the factor 2 of Eq. 3-4),
  ``bytes_per_float`` (4) bytes per float. The payload is the floats that must cross the wire: the trained
  parameters (only the head for LP, *including its bias*: Eq. 3 counts only ``LL_in * LL_out``), plus the
  BatchNorm buffers when they are aggregated, plus (downlink) frozen parameters the server moves under
  ``frozen_params="server_opt_drift"``. The one-off download of the pre-trained model is not counted
  (neither does Eq. 3-4).
* Compute: F = one forward pass of one sample through the model; a backward pass is 2F. A client processes
  ``n_k * E`` samples per round: 3F each when the body is trained (Eq. 5), 1F each for head-only training
  (Eq. 6; the head's own cost is neglected, as in the paper).
* Wall time: seconds since the start of the run (evaluation included).
* Measured communication (``*_bytes_measured``), next to the arithmetic above: the bytes of the tensors that
  the model path actually puts in each payload (the uplink dict a client returns, the downlink dict the
  server sends), ``numel * bytes_per_float`` per float tensor, summed over the sampled clients. It equals the
  arithmetic unless the payloads and the counts disagree (the tests check that), except that a sampled
  client without data receives the downlink but returns nothing. It counts the rounds of measuring trainers
  only (from 0 at the first of them; an earlier closed-form stage is not included); ``None`` where no
  trainer measured (cached-feature LP). ``describe()`` records one uplink payload's ``torch.save`` size
  (``uplink_payload_serialized_bytes``, zip framing included, in the tensors' own dtype).

Checkpoints (:mod:`benchmark.fl.checkpoint`): with a :class:`~benchmark.fl.checkpoint.CheckpointSpec`,
:func:`run_rounds` saves the trainer's ``state_dict()``, history and costs every ``every`` rounds and after
the last, and resumes from the file when it exists; the resumed history (wall time aside) and weights are
bit-identical to an uninterrupted run's. Progress: :mod:`benchmark.fl.progress`.

The model path here trains real modules (FT, Random, LP with the body in the loop); LP on cached features is
:mod:`benchmark.fl.lp_features`, which plugs into the same :func:`run_rounds`.
"""

from __future__ import annotations

import copy
import io
import math
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from benchmark.errors import ConfigError
from benchmark.fl.checkpoint import (
    CheckpointSpec,
    load_checkpoint,
    rng_state,
    run_identity,
    save_checkpoint,
    set_rng_state,
    tensors_to,
)
from benchmark.fl.client import batch_schedule, fetch_batch, local_sgd
from benchmark.fl.config import FLConfig
from benchmark.fl.progress import RoundProgress
from benchmark.fl.server_opt import DeltaAccumulator, make_server_optimizer
from benchmark.seeding import RunSeeds

TrainPart = Literal["all", "head", "body"]


# ------------------------------------------------------------------------------------------------ records
@dataclass(frozen=True)
class Costs:
    """Cumulative cost counters (legate2023 App. A units: bytes, F, plus wall seconds)."""

    uplink_bytes: int = 0
    downlink_bytes: int = 0
    compute_f: int = 0
    wall_s: float = 0.0
    uplink_bytes_measured: int | None = None
    """Bytes of the uplink tensors actually sent (module docstring); ``None``: not measured."""
    downlink_bytes_measured: int | None = None

    @property
    def total_bytes(self) -> int:
        """Uplink + downlink (legate2023's "Total Comm.")."""
        return self.uplink_bytes + self.downlink_bytes


@dataclass(frozen=True)
class RoundRecord:
    """One row of a run's history. ``round`` counts completed rounds (0 = before training)."""

    round: int
    stage: str
    test_acc: float
    test_loss: float
    train_loss: float
    uplink_bytes: int
    downlink_bytes: int
    compute_f: int
    wall_s: float
    frozen_drift: float
    clients: tuple[int, ...] = ()
    uplink_bytes_measured: int | None = None
    downlink_bytes_measured: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (``clients`` as a list), as checkpoints store rows."""
        out = asdict(self)
        out["clients"] = list(self.clients)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundRecord:
        """Inverse of :meth:`as_dict`."""
        return cls(**{**d, "clients": tuple(int(c) for c in d.get("clients", ()))})


@dataclass
class RunResult:
    """History and summary of one run.

    ``reported_acc`` follows ``config["selection"]``; ``best_acc`` / ``last_acc`` are both always kept.
    Selection ignores round 0 and rows of earlier stages (``selection_stage``).
    """

    method: str
    config: dict[str, object]
    history: list[RoundRecord]
    reported_acc: float
    best_acc: float
    best_round: int
    last_acc: float
    costs: Costs
    head_state: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)

    def evaluated(self) -> list[RoundRecord]:
        """Rows where the test set was evaluated."""
        return [r for r in self.history if not math.isnan(r.test_acc)]

    def to_frame(self):
        """History as a pandas DataFrame (one row per round; ``clients`` as a tuple column)."""
        import pandas as pd

        return pd.DataFrame([asdict(r) for r in self.history])


def summarise(
    method: str,
    cfg: FLConfig,
    history: list[RoundRecord],
    costs: Costs,
    *,
    selection_stage: str,
    start_round: int,
    head_state: dict[str, np.ndarray] | None = None,
    meta: dict[str, object] | None = None,
) -> RunResult:
    """Build a :class:`RunResult`: best-on-test over the evaluated rows of ``selection_stage`` after
    ``start_round`` (the first maximum wins, as FLSim only replaces its best model on a strict improvement),
    last = the final evaluated row."""
    rows = [
        r
        for r in history
        if r.stage == selection_stage and r.round > start_round and not math.isnan(r.test_acc)
    ]
    if not rows:  # zero rounds: the initial model is all there is
        rows = [r for r in history if not math.isnan(r.test_acc)][-1:]
    best = rows[0]
    for r in rows[1:]:
        if r.test_acc > best.test_acc:
            best = r
    last = rows[-1]
    reported = best.test_acc if cfg.selection == "best_on_test" else last.test_acc
    return RunResult(
        method=method,
        config=cfg.to_dict(),
        history=history,
        reported_acc=reported,
        best_acc=best.test_acc,
        best_round=best.round,
        last_acc=last.test_acc,
        costs=costs,
        head_state=head_state or {},
        meta=meta or {},
    )


# ------------------------------------------------------------------------------------------------ sampling
class ClientSampler:
    """m of K clients per round, uniform without replacement, from the ``client_sampling`` stream keyed by
    the round index (FLSim's ``UniformlyRandomActiveUserSelector`` semantics, but seeded: FLSim's draw uses an
    unseeded torch RNG, papers-code.md §1.1). Full participation returns every client without drawing."""

    def __init__(self, num_clients: int, per_round: int, seeds: RunSeeds) -> None:
        if not 1 <= per_round <= num_clients:
            raise ConfigError(
                f"clients per round must be in [1, {num_clients}], got {per_round}", "check participation"
            )
        self.num_clients = int(num_clients)
        self.per_round = int(per_round)
        self.seeds = seeds

    def sample(self, round_idx: int) -> np.ndarray:
        """Sorted client ids of round ``round_idx`` (0-based)."""
        if self.per_round == self.num_clients:
            return np.arange(self.num_clients, dtype=np.int64)
        rng = self.seeds.rng("client_sampling", int(round_idx))
        return np.sort(rng.choice(self.num_clients, size=self.per_round, replace=False)).astype(np.int64)


# ------------------------------------------------------------------------------------------------ loop
@dataclass(frozen=True)
class RoundStats:
    """What one round of local training cost and reported."""

    num_examples: int
    train_loss: float
    uplink_floats: int
    downlink_floats: int
    compute_f: int
    uplink_bytes_measured: int | None = None
    """Bytes of the uplink payload tensors of the round (all sampled clients); ``None``: not measured."""
    downlink_bytes_measured: int | None = None


def wire_bytes(payload: Mapping[str, torch.Tensor], bytes_per_float: int) -> int:
    """Bytes of ``payload`` on the wire: ``numel * bytes_per_float`` per float tensor, ``numel *
    element_size`` otherwise (metadata only: no copy, no device sync)."""
    return sum(
        t.numel() * (bytes_per_float if t.is_floating_point() else t.element_size()) for t in payload.values()
    )


def _add_measured(total: int | None, add: int | None) -> int | None:
    """Cumulative measured bytes: rounds that were not measured (``None``) add nothing."""
    if add is None:
        return total
    return (total or 0) + int(add)


class RoundTrainer(Protocol):
    """What :func:`run_rounds` needs from a training back-end (model path or cached features).

    Optional: a true ``measures_communication`` attribute says the trainer reports measured payload bytes
    (then the cumulative measured counters start at 0 rather than ``None``).
    """

    num_clients: int

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        """Local training of ``clients``, aggregation and the server step."""
        ...

    def evaluate(self) -> tuple[float, float]:
        """Test accuracy (fraction) and mean cross-entropy of the global model."""
        ...

    def frozen_drift(self) -> float:
        """Largest |change| of a parameter that is not trained (NaN when every parameter is trained)."""
        ...

    def head_state(self) -> dict[str, np.ndarray]:
        """The head's tensors (numpy copies)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue bit-identically (tensors, numbers, strings, lists,
        dicts only; tensors may be references to live state: serialise before the next round)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (tensors arrive on the CPU)."""
        ...


def _resume(trainer: RoundTrainer, state: Mapping[str, Any], path: Path) -> None:
    try:
        trainer.load_state_dict(state["trainer"])
    except ConfigError as err:
        raise ConfigError(f"checkpoint {path}: {err.what}", err.fix or "delete it to start over") from err
    except (KeyError, RuntimeError, ValueError, TypeError, AttributeError) as err:
        raise ConfigError(
            f"checkpoint {path} does not fit this run's model ({type(err).__name__}: {err})",
            "delete it to start over",
        ) from err
    if "torch_rng" in state:
        set_rng_state(state["torch_rng"])


def run_rounds(
    trainer: RoundTrainer,
    cfg: FLConfig,
    *,
    rounds: int,
    method: str,
    stage: str = "",
    start_round: int = 0,
    start_costs: Costs | None = None,
    history: list[RoundRecord] | None = None,
    meta: dict[str, object] | None = None,
    checkpoint: CheckpointSpec | None = None,
    on_round_end: Callable[[int], None] | None = None,
) -> RunResult:
    """Run ``rounds`` federated rounds of ``trainer`` (numbered from ``start_round``) and record them.

    ``start_costs`` / ``history`` continue an earlier stage (two-stage methods): costs keep accumulating
    and the rows are appended, while accuracy selection only looks at this stage. Client sampling is keyed
    by the absolute round index, the client lr schedule by the round index within the stage.

    ``checkpoint``: when its file exists it must belong to this run (config, method, stage, start round,
    rounds; else :class:`ConfigError`) and the run continues after its last round, with the trainer,
    history, costs and torch generators it holds (``start_costs`` / ``history`` are then taken from the
    file). It is rewritten every ``checkpoint.every`` rounds of the stage and after the last; a finished
    stage is returned from it without training. ``on_round_end(r)`` is called with the absolute number of
    completed rounds ``r`` after each round, once its checkpoint (if due) is on disk.
    """
    sampler = ClientSampler(trainer.num_clients, cfg.clients_per_round, cfg.seeds)
    label = f"{method}{'/' + stage if stage else ''}"
    costs = start_costs or Costs()
    rows = list(history or [])
    done = 0
    identity = None
    resumed = False
    if checkpoint is not None:
        identity = run_identity(
            cfg.to_dict(), method=method, stage=stage, start_round=start_round, rounds=rounds
        )
        if checkpoint.path.exists():
            state = load_checkpoint(checkpoint.path, identity)
            _resume(trainer, state, checkpoint.path)
            rows = [RoundRecord.from_dict(d) for d in state["history"]]
            costs = Costs(**state["costs"])
            done = int(state["round"])
            resumed = True
            if cfg.progress:
                import sys

                print(
                    f"[{method}{'/' + stage if stage else ''}] resuming from {checkpoint.path} after round "
                    f"{done}/{rounds}",
                    file=sys.stderr,
                )
    if getattr(trainer, "measures_communication", False):
        costs = replace(
            costs,
            uplink_bytes_measured=costs.uplink_bytes_measured or 0,
            downlink_bytes_measured=costs.downlink_bytes_measured or 0,
        )
    t0 = time.perf_counter() - costs.wall_s
    if not resumed:
        acc, loss = trainer.evaluate()
        rows.append(
            RoundRecord(
                round=start_round,
                stage=stage,
                test_acc=acc,
                test_loss=loss,
                train_loss=float("nan"),
                uplink_bytes=costs.uplink_bytes,
                downlink_bytes=costs.downlink_bytes,
                compute_f=costs.compute_f,
                wall_s=time.perf_counter() - t0,
                frozen_drift=trainer.frozen_drift(),
                uplink_bytes_measured=costs.uplink_bytes_measured,
                downlink_bytes_measured=costs.downlink_bytes_measured,
            )
        )
    progress = RoundProgress(label, rounds, done=done, enabled=cfg.progress)
    for row in rows:
        progress.set_acc(row.test_acc)
    try:
        for i in range(done, rounds):
            r = start_round + i
            clients = sampler.sample(r)
            stats = trainer.train_round(r, clients, cfg.client_lr_at(i))
            costs = Costs(
                uplink_bytes=costs.uplink_bytes + stats.uplink_floats * cfg.bytes_per_float,
                downlink_bytes=costs.downlink_bytes + stats.downlink_floats * cfg.bytes_per_float,
                compute_f=costs.compute_f + stats.compute_f,
                uplink_bytes_measured=_add_measured(costs.uplink_bytes_measured, stats.uplink_bytes_measured),
                downlink_bytes_measured=_add_measured(
                    costs.downlink_bytes_measured, stats.downlink_bytes_measured
                ),
            )
            if (i + 1) % cfg.eval_every == 0 or i == rounds - 1:
                acc, loss = trainer.evaluate()
                progress.set_acc(acc)
            else:
                acc, loss = float("nan"), float("nan")
            wall = time.perf_counter() - t0
            costs = replace(costs, wall_s=wall)
            rows.append(
                RoundRecord(
                    round=r + 1,
                    stage=stage,
                    test_acc=acc,
                    test_loss=loss,
                    train_loss=stats.train_loss,
                    uplink_bytes=costs.uplink_bytes,
                    downlink_bytes=costs.downlink_bytes,
                    compute_f=costs.compute_f,
                    wall_s=wall,
                    frozen_drift=trainer.frozen_drift(),
                    clients=tuple(int(c) for c in clients),
                    uplink_bytes_measured=costs.uplink_bytes_measured,
                    downlink_bytes_measured=costs.downlink_bytes_measured,
                )
            )
            if checkpoint is not None and checkpoint.due(i + 1, rounds):
                save_checkpoint(
                    checkpoint.path,
                    {
                        "run": identity,
                        "round": i + 1,
                        "trainer": trainer.state_dict(),
                        "history": [row.as_dict() for row in rows],
                        "costs": asdict(costs),
                        "torch_rng": rng_state(),
                    },
                )
            progress.round_done(i + 1)
            if on_round_end is not None:
                on_round_end(r + 1)
    finally:
        progress.close()
    if not resumed or done < rounds:
        costs = replace(costs, wall_s=time.perf_counter() - t0)
    return summarise(
        method,
        cfg,
        rows,
        costs,
        selection_stage=stage,
        start_round=start_round,
        head_state=trainer.head_state(),
        meta=meta,
    )


# ------------------------------------------------------------------------------------------------ model path
def resolve_device(cfg: FLConfig) -> torch.device:
    """``cfg.device``, with ``auto`` = CUDA when available, else CPU; a name that is no device (``gpu``) or a GPU
    torch does not see is one :class:`ConfigError` (:func:`benchmark.features.extract.pick_device`, the one
    place that knows device names)."""
    from benchmark.features.extract import pick_device

    return pick_device(cfg.device, "device")


@torch.no_grad()
def evaluate_model(
    model: nn.Module,
    data: Dataset,
    *,
    batch_size: int = 128,
    device: torch.device | str = "cpu",
    amp: bool = False,
) -> tuple[float, float]:
    """Accuracy (fraction in [0, 1]) and mean cross-entropy of ``model`` in eval mode on ``data``.

    The reference's ``inference()`` computes the loss as ``loss / batch_idx + 1`` (papers-code.md §1.7-3);
    here the loss is the plain mean, accuracy is unaffected either way.
    """
    dev = torch.device(device)
    was_training = model.training
    model.eval()
    n = len(data)  # type: ignore[arg-type]
    correct = 0
    loss_sum = 0.0
    autocast = (
        torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        if amp and dev.type == "cuda"
        else nullcontext()
    )
    for s in range(0, n, batch_size):
        x, y = fetch_batch(data, np.arange(s, min(n, s + batch_size)))
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        with autocast:
            logits = model(x)
        logits = logits.float() if amp else logits
        loss_sum += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
    model.train(was_training)
    return correct / max(n, 1), loss_sum / max(n, 1)


def _part_names(model: nn.Module, part: TrainPart) -> list[str]:
    names = [n for n, _ in model.named_parameters()]
    if part == "all":
        return names
    prefix = f"{part}."
    chosen = [n for n in names if n.startswith(prefix)]
    if not chosen:
        raise ConfigError(f"model has no parameters under {prefix!r}", "pass a Classifier(body, head)")
    return chosen


class ModelTrainer:
    """:class:`RoundTrainer` on a real :class:`~benchmark.models.classifier.Classifier` (any device).

    ``train_part``: ``all`` (FT, Random), ``head`` (LP: body frozen), ``body`` (head frozen, as FedBABU's
    body-only update). Parameters outside the part get ``requires_grad=False`` (the model is modified in
    place and is the global model of the run). Clients are trained one after the other on one working copy.

    Payloads (module docstring, "Measured communication"): :meth:`downlink_payload` is what the server sends a
    sampled client, :meth:`client_update` what a client returns; aggregation consumes exactly that dict.
    """

    measures_communication = True

    def __init__(
        self,
        model: nn.Module,
        clients: Sequence[Dataset],
        test: Dataset,
        cfg: FLConfig,
        *,
        train_part: TrainPart,
        communicate: bool = True,
    ) -> None:
        if len(clients) != cfg.num_clients:
            raise ConfigError(
                f"got {len(clients)} client datasets but num_clients={cfg.num_clients}",
                "pass one dataset per client or set num_clients",
            )
        self.cfg = cfg
        self.device = resolve_device(cfg)
        self.amp = bool(cfg.amp and self.device.type == "cuda")
        self.model = model.to(self.device)
        self.clients = list(clients)
        self.test = test
        self.num_clients = cfg.num_clients
        self.train_part = train_part
        self.communicate = communicate
        params = dict(self.model.named_parameters())
        self.train_names = _part_names(self.model, train_part)
        self.frozen_names = [n for n in params if n not in set(self.train_names)]
        for n, p in params.items():
            p.requires_grad_(n in set(self.train_names))
        drift = cfg.frozen_params == "server_opt_drift"
        self.server_names = self.train_names + (self.frozen_names if drift else [])
        self.body_eval = train_part == "head" and cfg.lp_body_mode == "eval"
        self.buffer_names: list[str] = []
        if cfg.bn_stats == "aggregate":
            self.buffer_names = [
                n
                for n, b in self.model.named_buffers()
                if b.is_floating_point() and not (self.body_eval and n.startswith("body."))
            ]
        self.initial_frozen = {n: params[n].detach().clone() for n in self.frozen_names}
        self.server_opt = make_server_optimizer(cfg)
        self.work = copy.deepcopy(self.model)
        numel = {n: p.numel() for n, p in params.items()}
        buf_numel = dict((n, b.numel()) for n, b in self.model.named_buffers())
        n_buf = sum(buf_numel[n] for n in self.buffer_names)
        self.up_floats = sum(numel[n] for n in self.train_names) + n_buf
        self.down_floats = sum(numel[n] for n in self.server_names) + n_buf
        self.f_per_sample = 1 if train_part == "head" else 3

    def _set_modes(self, module: nn.Module) -> None:
        module.train()
        if self.body_eval:
            module.body.eval()  # type: ignore[union-attr]

    def downlink_payload(self) -> dict[str, torch.Tensor]:
        """What the server sends each sampled client: the tensors it steps (``server_names``) and the
        aggregated buffers (references to the global model's tensors)."""
        gparams = dict(self.model.named_parameters())
        gbuffers = dict(self.model.named_buffers())
        return {n: gparams[n] for n in self.server_names} | {n: gbuffers[n] for n in self.buffer_names}

    @torch.no_grad()
    def client_update(self, gparams: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What a client returns after local training on :attr:`work`: the deltas ``global - local`` of the
        trained parameters and its aggregated buffers."""
        wparams = dict(self.work.named_parameters())
        out = {n: gparams[n] - wparams[n] for n in self.train_names}
        if self.buffer_names:
            wbuf = dict(self.work.named_buffers())
            out.update({n: wbuf[n] for n in self.buffer_names})
        return out

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        """Train each sampled client from the global weights, aggregate, step the server (module docstring)."""
        cfg = self.cfg
        gparams = dict(self.model.named_parameters())
        gbuffers = dict(self.model.named_buffers())
        anchor = {n: gparams[n].detach() for n in self.train_names} if cfg.prox_mu > 0 else None
        deltas, bufs = DeltaAccumulator(), DeltaAccumulator()
        examples = 0
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)  # summed on the device: no sync
        down_bytes = wire_bytes(self.downlink_payload(), cfg.bytes_per_float)
        up_measured = 0
        for k in clients:
            data = self.clients[int(k)]
            n_k = len(data)  # type: ignore[arg-type]
            if n_k == 0:
                continue
            self.work.load_state_dict(self.model.state_dict())
            self._set_modes(self.work)
            wparams = dict(self.work.named_parameters())
            rng = cfg.seeds.rng("data_order", int(round_idx), int(k)) if cfg.client_shuffle else None
            res = local_sgd(
                self.work,
                {n: wparams[n] for n in self.train_names},
                data,
                batch_schedule(n_k, cfg.batch_size, cfg.local_epochs, rng),
                lr=lr,
                momentum=cfg.client_momentum,
                weight_decay=cfg.client_weight_decay,
                prox_mu=cfg.prox_mu,
                anchor=anchor,
                device=self.device,
                amp=self.amp,
            )
            w = float(res.num_examples) if cfg.aggregation_weights == "examples" else 1.0
            update = self.client_update(gparams)
            up_measured += wire_bytes(update, cfg.bytes_per_float)
            with torch.no_grad():
                deltas.add({n: update[n] for n in self.train_names}, w)
                if self.buffer_names:
                    bufs.add({n: update[n] for n in self.buffer_names}, w)
            examples += res.num_examples
            loss_sum += res.loss_sum
        if deltas.total_weight > 0:
            pseudo = deltas.average()
            for n in self.server_names:
                if n not in pseudo:  # frozen parameter stepped on purpose (reference drift)
                    pseudo[n] = torch.zeros_like(gparams[n])
            self.server_opt.step({n: gparams[n] for n in self.server_names}, pseudo)
            if self.buffer_names:
                with torch.no_grad():
                    for n, v in bufs.average().items():
                        gbuffers[n].copy_(v)
        m = len(clients) if self.communicate else 0
        return RoundStats(
            num_examples=examples,
            train_loss=float(loss_sum.item()) / examples
            if examples
            else float("nan"),  # the round's one sync
            uplink_floats=m * self.up_floats,
            downlink_floats=m * self.down_floats,
            compute_f=self.f_per_sample * examples,
            uplink_bytes_measured=up_measured if self.communicate else 0,
            downlink_bytes_measured=m * down_bytes,
        )

    def evaluate(self) -> tuple[float, float]:
        """Test accuracy and loss of the global model (eval mode: BatchNorm running statistics)."""
        return evaluate_model(
            self.model, self.test, batch_size=self.cfg.eval_batch_size, device=self.device, amp=self.amp
        )

    @torch.no_grad()
    def frozen_drift(self) -> float:
        """max |p - p_initial| over the parameters that are not trained (NaN if all are trained)."""
        if not self.frozen_names:
            return float("nan")
        params = dict(self.model.named_parameters())
        return max(
            float((params[n] - v).abs().max()) if v.numel() else 0.0 for n, v in self.initial_frozen.items()
        )

    def head_state(self) -> dict[str, np.ndarray]:
        """The head's tensors as float numpy arrays (names relative to the head)."""
        head = getattr(self.model, "head", None)
        if head is None:
            return {}
        return {n: p.detach().cpu().numpy().copy() for n, p in head.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """Global model (parameters and buffers), server optimiser state, initial frozen parameters."""
        return {
            "model": self.model.state_dict(),
            "server_opt": self.server_opt.state_dict(),
            "initial_frozen": dict(self.initial_frozen),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (copied onto this trainer's device and tensors)."""
        self.model.load_state_dict(state["model"])
        self.server_opt.load_state_dict(tensors_to(state["server_opt"], self.device))
        frozen = state["initial_frozen"]
        if set(frozen) != set(self.initial_frozen):
            raise ConfigError(
                f"frozen parameters {sorted(frozen)} differ from this run's {sorted(self.initial_frozen)}",
                "resume with the model and train_part the checkpoint was written with",
            )
        self.initial_frozen = {n: frozen[n].to(self.device, copy=True) for n in self.initial_frozen}

    def uplink_payload_serialized_bytes(self) -> int:
        """Size of one client's uplink payload written with ``torch.save`` (zip framing included), from
        CPU copies of tensors shaped like :meth:`client_update`'s."""
        params = dict(self.model.named_parameters())
        buffers = dict(self.model.named_buffers())
        sample = {n: params[n].detach().to("cpu", copy=True) for n in self.train_names}
        sample.update({n: buffers[n].detach().to("cpu", copy=True) for n in self.buffer_names})
        buf = io.BytesIO()
        torch.save(sample, buf)
        return buf.getbuffer().nbytes

    def describe(self) -> dict[str, object]:
        """Run metadata: device, precision, what is trained / communicated."""
        serialized = self.uplink_payload_serialized_bytes() if self.communicate else 0
        return {
            "device": str(self.device),
            "amp": self.amp,
            "amp_dtype": "bfloat16" if self.amp else None,
            "torch": torch.__version__,
            "train_part": self.train_part,
            "server_opt": self.server_opt.describe(),
            "clients_per_round": self.cfg.clients_per_round,
            "uplink_floats_per_client": self.up_floats if self.communicate else 0,
            "downlink_floats_per_client": self.down_floats if self.communicate else 0,
            "uplink_payload_serialized_bytes": serialized,
            "aggregated_buffers": list(self.buffer_names),
            "f_per_sample": self.f_per_sample,
        }


def trainer_class(cfg: FLConfig) -> type[ModelTrainer]:
    """The model-path trainer of ``cfg``: :class:`ModelTrainer` (clients one after the other), or, with
    ``client_exec="vectorised"``, :class:`benchmark.fl.vectorised.VectorisedTrainer` (imported only then)."""
    if getattr(cfg, "client_exec", "loop") == "vectorised":
        from benchmark.fl.vectorised import VectorisedTrainer  # local: fl.vectorised imports this module

        return VectorisedTrainer
    return ModelTrainer


def run_federated(
    model: nn.Module,
    clients: Sequence[Dataset],
    test: Dataset,
    cfg: FLConfig,
    *,
    train_part: TrainPart,
    method: str,
    rounds: int | None = None,
    stage: str = "",
    start_round: int = 0,
    start_costs: Costs | None = None,
    history: list[RoundRecord] | None = None,
    communicate: bool = True,
    checkpoint: CheckpointSpec | None = None,
    on_round_end: Callable[[int], None] | None = None,
) -> RunResult:
    """Federated training of ``model`` (the global model, updated in place) on ``clients``; see module doc.

    ``rounds`` defaults to ``cfg.rounds``. ``communicate=False`` zeroes the communication counters (the
    centralised oracles, where nothing crosses a network). ``checkpoint`` / ``on_round_end``: see
    :func:`run_rounds`.
    """
    trainer = trainer_class(cfg)(model, clients, test, cfg, train_part=train_part, communicate=communicate)
    return run_rounds(
        trainer,
        cfg,
        rounds=cfg.rounds if rounds is None else rounds,
        method=method,
        stage=stage,
        start_round=start_round,
        start_costs=start_costs,
        history=history,
        meta=trainer.describe(),
        checkpoint=checkpoint,
        on_round_end=on_round_end,
    )
