"""The round loop: sample clients, train them locally, aggregate, step the server, evaluate, count costs.

One round r (FedAvg family, McMahan et al. 2017 Algorithm 1 / Reddi et al. 2021 Algorithm 1):

1. :class:`ClientSampler` draws m = ``cfg.clients_per_round`` of the K clients uniformly without replacement
   from the ``client_sampling`` stream keyed by r (so the draw does not depend on the model seed, on the
   other rounds, or on how the clients are trained).
2. Each sampled client starts from the global weights and runs :func:`benchmark.fl.client.local_sgd`.
3. The server averages the deltas ``global - local`` with the client weights
   (:class:`~benchmark.federated.server_opt.DeltaAccumulator`) and takes one server-optimiser step.
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

Checkpoints (:mod:`benchmark.federated.checkpoint`): with a :class:`~benchmark.federated.checkpoint.CheckpointSpec`,
:func:`run_rounds` saves the trainer's ``state_dict()``, history and costs every ``every`` rounds and after
the last, and resumes from the file when it exists; the resumed history (wall time aside) and weights are
bit-identical to an uninterrupted run's. Progress: :mod:`benchmark.federated.progress`.

The model path here trains real modules (FT, Random, LP with the body in the loop); LP on cached features is
:mod:`benchmark.fl.lp_features`, which plugs into the same :func:`run_rounds`.
"""

from __future__ import annotations

import copy
import importlib
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from benchmark.devices import pick_device
from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec, run_identity, tensors_to
from benchmark.federated.history import Costs, RoundRecord, RoundStats, wire_bytes
from benchmark.federated.loop import RoundPlan, RoundTrainer, run_rounds
from benchmark.federated.precision import FP32, Precision, precision_from
from benchmark.federated.sampling import ClientSampler
from benchmark.federated.server_opt import DeltaAccumulator, make_server_optimizer
from benchmark.fl.client import ClientResult, batch_schedule, fetch_batch, local_sgd
from benchmark.fl.config import FLConfig
from benchmark.registry import Registry

TrainPart = Literal["all", "head", "body"]


# ------------------------------------------------------------------------------------------------ results
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
        import pandas as pd  # local: heavy import (pandas)

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


# ------------------------------------------------------------------------------------------------ stages
def round_plan(
    cfg: FLConfig, *, rounds: int, method: str, stage: str = "", start_round: int = 0, num_clients: int
) -> RoundPlan:
    """The :class:`~benchmark.federated.loop.RoundPlan` of one stage of an FL run: ``cfg``'s uniform sampler
    (``client_sampling`` stream), client-lr schedule, evaluation cadence and checkpoint identity."""
    return RoundPlan(
        rounds=rounds,
        sampler=ClientSampler(num_clients, cfg.clients_per_round, cfg.seeds),
        lr_at=cfg.client_lr_at,
        eval_every=cfg.eval_every,
        identity=run_identity(
            cfg.to_dict(), method=method, stage=stage, start_round=start_round, rounds=rounds
        ),
        label=f"{method}{'/' + stage if stage else ''}",
        stage=stage,
        start_round=start_round,
        bytes_per_float=cfg.bytes_per_float,
        progress=cfg.progress,
    )


def run_stage(
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
    """One stage of an FL run through the one round loop (:func:`benchmark.federated.loop.run_rounds`), then
    its :class:`RunResult` (:func:`summarise`: selection only looks at this stage)."""
    plan = round_plan(
        cfg,
        rounds=rounds,
        method=method,
        stage=stage,
        start_round=start_round,
        num_clients=trainer.num_clients,
    )
    out = run_rounds(
        trainer,
        plan,
        start_costs=start_costs,
        history=history,
        checkpoint=checkpoint,
        on_round_end=on_round_end,
    )
    return summarise(
        method,
        cfg,
        out.history,
        out.costs,
        selection_stage=stage,
        start_round=start_round,
        head_state=trainer.head_state(),
        meta=meta,
    )


# ------------------------------------------------------------------------------------------------ model path
def resolve_device(cfg: FLConfig) -> torch.device:
    """``cfg.device``, with ``auto`` = CUDA when available, else CPU; a name that is no device (``gpu``) or a GPU
    torch does not see is one :class:`ConfigError` (:func:`benchmark.devices.pick_device`, the one
    place that knows device names)."""
    return pick_device(cfg.device, "device")


@torch.no_grad()
def evaluate_model(
    model: nn.Module,
    data: Dataset,
    *,
    batch_size: int = 128,
    device: torch.device | str = "cpu",
    precision: Precision = FP32,
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
    prec = precision.on(dev)
    for s in range(0, n, batch_size):
        x, y = fetch_batch(data, np.arange(s, min(n, s + batch_size)))
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        with prec.autocast_context():
            logits = model(x)
        logits = prec.loss_logits(logits)
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


class ModelTrainer(RoundTrainer):
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
        self.refuse(cfg)
        if len(clients) != cfg.num_clients:
            raise ConfigError(
                f"got {len(clients)} client datasets but num_clients={cfg.num_clients}",
                "pass one dataset per client or set num_clients",
            )
        self.cfg = cfg
        self.device = resolve_device(cfg)
        self.precision = precision_from(amp=cfg.amp).on(self.device, warn=True)
        self.amp = self.precision.amp  # bf16 autocast on CUDA only (the one policy: federated/precision.py)
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

    @classmethod
    def refuse(cls, cfg: FLConfig) -> None:
        """Raise :class:`ConfigError` for a config this trainer cannot run; called first in ``__init__`` (before
        the model moves), so a subclass adds its refusals here and keeps the constructor (issue 25)."""

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

    def gradient_correction(self, client: int) -> dict[str, torch.Tensor] | None:
        """Added to every local gradient of ``client`` (None: plain SGD / FedProx). SCAFFOLD's ``c - c_i``."""
        return None

    def local_update(
        self,
        client: int,
        round_idx: int,
        lr: float,
        gparams: Mapping[str, torch.Tensor],
        anchor: Mapping[str, torch.Tensor] | None,
    ) -> tuple[dict[str, torch.Tensor], ClientResult]:
        """Client ``client``'s round: local SGD from the global weights on :attr:`work`, then its uplink
        payload (:meth:`client_update`) and what it reports."""
        cfg = self.cfg
        data = self.clients[client]
        self.work.load_state_dict(self.model.state_dict())
        self._set_modes(self.work)
        wparams = dict(self.work.named_parameters())
        rng = cfg.seeds.rng("data_order", int(round_idx), int(client)) if cfg.client_shuffle else None
        res = local_sgd(
            self.work,
            {n: wparams[n] for n in self.train_names},
            data,
            batch_schedule(len(data), cfg.batch_size, cfg.local_epochs, rng),  # type: ignore[arg-type]
            lr=lr,
            momentum=cfg.client_momentum,
            weight_decay=cfg.client_weight_decay,
            prox_mu=cfg.prox_mu,
            anchor=anchor,
            correction=self.gradient_correction(client),
            device=self.device,
            precision=self.precision,
        )
        return self.client_update(gparams), res

    def server_update(
        self, gparams: Mapping[str, torch.Tensor], deltas: DeltaAccumulator, bufs: DeltaAccumulator
    ) -> None:
        """One server-optimiser step on the averaged deltas, and the averaged buffers (FedAvg / FedAdam)."""
        if deltas.total_weight == 0:
            return
        pseudo = deltas.average()
        for n in self.server_names:
            if n not in pseudo:  # frozen parameter stepped on purpose (reference drift)
                pseudo[n] = torch.zeros_like(gparams[n])
        self.server_opt.step({n: gparams[n] for n in self.server_names}, pseudo)
        if self.buffer_names:
            gbuffers = dict(self.model.named_buffers())
            with torch.no_grad():
                for n, v in bufs.average().items():
                    gbuffers[n].copy_(v)

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        """Train each sampled client from the global weights, aggregate, step the server (module docstring)."""
        cfg = self.cfg
        gparams = dict(self.model.named_parameters())
        anchor = {n: gparams[n].detach() for n in self.train_names} if cfg.prox_mu > 0 else None
        deltas, bufs = DeltaAccumulator(), DeltaAccumulator()
        examples = 0
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)  # summed on the device: no sync
        down_bytes = wire_bytes(self.downlink_payload(), cfg.bytes_per_float)
        up_measured = 0
        for k in clients:
            if len(self.clients[int(k)]) == 0:  # type: ignore[arg-type]
                continue
            update, res = self.local_update(int(k), round_idx, lr, gparams, anchor)
            w = float(res.num_examples) if cfg.aggregation_weights == "examples" else 1.0
            up_measured += wire_bytes(update, cfg.bytes_per_float)
            with torch.no_grad():
                deltas.add({n: update[n] for n in self.train_names}, w)
                if self.buffer_names:
                    bufs.add({n: update[n] for n in self.buffer_names}, w)
            examples += res.num_examples
            loss_sum += res.loss_sum
        self.server_update(gparams, deltas, bufs)
        return self.round_stats(len(clients), examples, loss_sum, up_measured, down_bytes)

    def round_stats(
        self, sampled: int, examples: int, loss_sum: torch.Tensor, up_measured: int, down_bytes: int
    ) -> RoundStats:
        """The :class:`RoundStats` of a round of ``sampled`` clients that trained on ``examples`` samples with
        summed loss ``loss_sum`` (read once: the round's one sync), sent ``up_measured`` bytes and were each
        sent ``down_bytes``; the wire counts are 0 when the run does not communicate. Shared by every
        model-path trainer, so the loop and vectorised executors record a round alike (issue 25)."""
        m = sampled if self.communicate else 0
        return RoundStats(
            num_examples=examples,
            train_loss=float(loss_sum.item()) / examples if examples else float("nan"),
            uplink_floats=m * self.up_floats,
            downlink_floats=m * self.down_floats,
            compute_f=self.f_per_sample * examples,
            uplink_bytes_measured=up_measured if self.communicate else 0,
            downlink_bytes_measured=m * down_bytes,
        )

    def evaluate(self) -> tuple[float, float]:
        """Test accuracy and loss of the global model (eval mode: BatchNorm running statistics)."""
        return evaluate_model(
            self.model, self.test, batch_size=self.cfg.eval_batch_size, device=self.device, precision=self.precision
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


#: Modules whose trainers register themselves in :data:`FL_TRAINERS` (imported on the first lookup: they
#: import this module).
TRAINER_MODULES = ("benchmark.fl.vectorised", "benchmark.fl.scaffold")


def _load_trainers() -> None:
    for name in TRAINER_MODULES:
        importlib.import_module(name)


#: Client algorithms of the model path by name: the class whose local update and server step a run uses.
#: ``fedavg`` is :class:`ModelTrainer` (FedAvg / FedProx / FedAdam: the server optimiser and ``prox_mu`` come
#: from the config); a plug-in subclasses it and overrides only what differs (docs/extending.md).
FL_TRAINERS: Registry[type[ModelTrainer]] = Registry("FL client algorithm", loader=_load_trainers)
FL_TRAINERS.add("fedavg", ModelTrainer)


def trainer_class(cfg: FLConfig, algorithm: str = "fedavg") -> type[ModelTrainer]:
    """The model-path trainer of ``algorithm`` (:data:`FL_TRAINERS`); with ``client_exec="vectorised"``,
    :class:`benchmark.fl.vectorised.VectorisedTrainer` (FedAvg-family only: clients trained in lockstep)."""
    if getattr(cfg, "client_exec", "loop") == "vectorised":
        if algorithm != "fedavg":
            raise ConfigError(
                f"client_exec='vectorised' runs the FedAvg family only, not {algorithm!r}", "use client_exec='loop'"
            )
        return FL_TRAINERS.get("fedavg_vectorised")
    return FL_TRAINERS.get(algorithm)


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
    algorithm: str = "fedavg",
) -> RunResult:
    """Federated training of ``model`` (the global model, updated in place) on ``clients``; see module doc.

    ``rounds`` defaults to ``cfg.rounds``. ``communicate=False`` zeroes the communication counters (the
    centralised oracles, where nothing crosses a network). ``checkpoint`` / ``on_round_end``: see
    :func:`run_rounds`.
    """
    trainer = trainer_class(cfg, algorithm)(
        model, clients, test, cfg, train_part=train_part, communicate=communicate
    )
    return run_stage(
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
