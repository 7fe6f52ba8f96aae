"""fedbabu's federated training (reference ``main_fed.py``; fedbabu Algorithm 1) as a plug-in of the one round
loop (:func:`benchmark.federated.loop.run_rounds`): :class:`PFLTrainer` is a
:class:`~benchmark.federated.loop.RoundTrainer`.

Per round ``r`` (0-based) of ``R``:

1. ``m = max(int(f*K), 1)`` clients are drawn without replacement (:class:`~benchmark.federated.sampling.
   FedBABUSampler`, the run's ``client_sampling`` stream keyed by ``r``; every draw of a run comes from its
   streams, :mod:`benchmark.pfl.streams`);
2. each sampled client loads the broadcast (aggregated) entries plus its own personal entries, and runs its
   local procedure: the reference's ``LocalUpdate.train`` (:func:`~benchmark.pfl.local.sgd_epochs`) is ``tau``
   epochs of SGD over its augmented data in batches of 50, with a **fresh** optimiser (momentum restarts every
   round), two parameter groups (body at ``lr``, head at ``lr * head_lr_ratio``; a part the algorithm does not
   train gets lr 0), weight decay 0, and for FedProx the proximal term ``mu/2 * ||w - w_global||^2`` over the
   trained parameters. An algorithm whose ``procedure`` is not ``sgd`` runs its own
   (:mod:`benchmark.pfl.procedures`: FedRep, Ditto, Per-FedAvg), which returns the client's full state; the
   procedure's ``begin_round`` hook runs before the round's first update. ``client_exec="vectorised"`` trains
   the clients in lock-step (:mod:`benchmark.pfl.vectorised`) where the algorithm and model allow it;
   ``client_procs > 1`` runs the loop's updates in that many forked CPU processes, bit for bit the loop
   (:mod:`benchmark.pfl.client_pool`);
3. the server takes the **unweighted** mean of the sampled clients' aggregated entries (integer buffers are
   averaged as floats and cast back, as ``torch.div`` then ``load_state_dict`` do) and broadcasts them to
   every client; each sampled client keeps its personal entries;
4. the learning rate is multiplied by 0.1 after rounds ``R//2`` and ``3R//4`` (1-based, the reference:
   :meth:`PFLConfig.lr_at`, the plan's ``lr_at``);
5. every ``eval_every`` rounds (and after the last) each client's model (broadcast + its personal entries) is
   evaluated on its own test set in batches of 128 (with batch-statistics BN the batch composition matters, so
   the batches are the reference's: the client's test indices in order); the round's accuracy is the
   test-size-weighted mean (percent; the loop's history holds it as a fraction).

Costs of a round (:class:`~benchmark.federated.history.RoundStats`, cumulated by the loop; the run's curve): each
sampled client receives and returns the aggregated entries (4 bytes per element: FedBABU sends the body only);
compute is 3 F per training image and local epoch (forward 1 F, backward 2 F), whatever the procedure.

Model selection (``selection``), in the :meth:`PFLTrainer.on_evaluated` hook: ``best`` keeps the state of the
round with the highest weighted accuracy (the reference's ``best_model.pt``: selection on the clients' test
sets, strictly greater, first wins); ``last`` keeps the final round's state (fedbabu App. A says the paper reports
the last model). Both selected states are kept; :class:`PFLResult` carries the one asked for and the other.

``personal[i]`` overlays the broadcast for client ``i`` (``client_state``). For the sgd-procedure algorithms it
holds exactly the entries the algorithm does not aggregate; a procedure may keep more there -- Ditto keeps the
client's **full** personal model (the broadcast is then the global model, ``personal[i]`` the model client ``i``
is evaluated and fine-tuned with). The round only overwrites it with non-aggregated entries when there are any.

Checkpoints are the loop's (:mod:`benchmark.federated.checkpoint`): :meth:`PFLTrainer.state_dict` holds the
broadcast and personal entries, the best state so far and the evaluated accuracies; a resumed run continues
bit-identically (all randomness is keyed by round and client, the optimiser restarts every round). A client's
personal entries are stored only where they differ from the initial model (:func:`pack_personal`): the entries
an algorithm never trains (FedBABU's head; the frozen blocks and head of the conv-block ablation, which every drawn
client would otherwise store once, 14 to 27 MiB at f = 0.1) are the initial model's, rebuilt from it on resume.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec, run_identity, tensors_to
from benchmark.federated.history import RoundRecord, RoundStats
from benchmark.federated.images import DeviceImages
from benchmark.federated.loop import RoundPlan, RoundTrainer, run_rounds
from benchmark.federated.precision import Precision, precision_from
from benchmark.federated.sampling import FedBABUSampler
from benchmark.pfl.algorithms import Algorithm, get_algorithm
from benchmark.pfl.client_pool import ClientPool
from benchmark.pfl.local import LocalSGD, State, client_accuracies, clone_state, sgd_epochs, weighted_mean
from benchmark.pfl.models import build_model, place_model
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.parts import missing_blocks
from benchmark.pfl.procedures import get_procedure
from benchmark.pfl.streams import CLIENT_SAMPLING, LOCAL, SCHEMES, PFLStreams, scheme_for
from benchmark.pfl.vectorised import local_updates_vectorised
from benchmark.pfl.work import BATCH_SIZE


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
    batch_size: int = BATCH_SIZE
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
    # execution only: the model's weights (hence its activations) in channels-last memory format (issue 27: a
    # 4convNet step ~1.5x faster on a CPU). Not bit-identical to contiguous (other kernels, other summation
    # order), so it is off by default and, when on, part of the checkpoint identity and of the record.
    channels_last: bool = False
    # execution only: the clients of a round trained in this many forked CPU processes, one torch thread each
    # (benchmark/pfl/client_pool.py); bit for bit the loop at one thread, so in the record (when above 1) but never
    # in the checkpoint identity
    client_procs: int = 1
    # fedbabu App. A.3's LG-FedAvg: ``lr`` held for every round (no x0.1 steps), and the run initialised from
    # the selected model of another training (``init_model``: its record path, ``results/runs/...json``; the
    # sha256 of the model bytes loaded, filled by :func:`benchmark.pfl.run.train_step`, is part of the identity)
    lr_decay: bool = True
    init_model: str | None = None
    init_model_sha256: str | None = None
    # the random-stream scheme (benchmark.pfl.streams: ``keyed`` / ``named``) when it is not the one of this run's
    # length: a run started from another training's model draws under that training's scheme, so that its client
    # partition is the source's (LG-FedAvg's 80 rounds after FedAvg's 320 at tau = 1). None: by the run's length;
    # a value equal to that is stored as None (the records of the runs made before the field stay what they were)
    random_streams: str | None = None

    def __post_init__(self) -> None:
        if self.random_streams is not None:
            if self.random_streams not in SCHEMES:
                raise ConfigError(f"random_streams={self.random_streams!r}", f"use one of {', '.join(SCHEMES)}")
            if self.random_streams == scheme_for(self.rounds):
                object.__setattr__(self, "random_streams", None)
        if self.selection not in ("best", "last"):
            raise ConfigError(f"selection={self.selection!r}", "use 'best' (the reference) or 'last'")
        if self.selection == "best" and self.eval_every != 1:
            raise ConfigError(f"selection='best' with eval_every={self.eval_every}",
                              "best-on-test needs every round evaluated: use eval_every=1")  # fmt: skip
        if self.client_exec not in ("loop", "vectorised"):
            raise ConfigError(f"client_exec={self.client_exec!r}", "use 'loop' or 'vectorised'")
        if not isinstance(self.channels_last, bool):
            raise ConfigError(f"channels_last={self.channels_last!r}", "use true or false")
        if isinstance(self.client_procs, bool) or not isinstance(self.client_procs, int) or self.client_procs < 1:
            raise ConfigError(f"client_procs={self.client_procs!r}", "use a whole number of processes >= 1")
        if self.client_procs > 1 and self.client_exec != "loop":
            raise ConfigError(f"client_procs={self.client_procs} with client_exec={self.client_exec!r}",
                              "worker processes run the per-client loop: use client_exec 'loop' or client_procs 1")  # fmt: skip
        precision_from(dtype=self.dtype)  # float32 (the paper) or float64 (portable pins); else a ConfigError
        if not 0 < self.participation <= 1:
            raise ConfigError(f"participation={self.participation}", "use a client fraction in (0, 1]")

    @property
    def precision(self) -> Precision:
        """:attr:`dtype` as the one precision policy (:mod:`benchmark.federated.precision`): the model's and the
        batches' dtype."""
        return precision_from(dtype=self.dtype)

    @property
    def clients_per_round(self) -> int:
        return max(int(self.participation * self.clients), 1)

    def lr_at(self, r: int) -> float:
        """The client lr of round ``r`` (0-based): x0.1 after rounds R//2 and 3R//4 (1-based), multiplied as
        ``main_fed.py`` does (``lr *= 0.1`` once after each finished round in ``[R//2, 3R//4]``: no drop for
        R=1, one for R=2 where the milestones coincide)."""
        lr = self.lr
        if not self.lr_decay:
            return lr
        for done in range(1, r + 1):
            if done in (self.rounds // 2, (self.rounds * 3) // 4):
                lr *= 0.1
        return lr

    def local_sgd(
        self, body_lr: float, head_lr: float, weight_decay: float | None = None, body_part: str = "body"
    ) -> LocalSGD:
        """The config's local SGD (epochs, batch size, momentum, weight decay unless given, seed) at these lrs,
        ``body_lr`` for the ``body_part`` of the body (:class:`~benchmark.pfl.local.LocalSGD`)."""
        wd = self.weight_decay if weight_decay is None else weight_decay
        return LocalSGD(self.local_epochs, self.batch_size, body_lr, head_lr, self.momentum, wd, self.streams,
                        body_part)  # fmt: skip

    @property
    def streams(self) -> PFLStreams:
        """The run's random streams (:mod:`benchmark.pfl.streams`: keyed up to 206 rounds, named beyond, unless
        :attr:`random_streams` names the scheme of the training this run starts from)."""
        return PFLStreams(self.seed, self.random_streams or scheme_for(self.rounds))

    def sampler(self) -> FedBABUSampler:
        """The run's client sampler: fedbabu's draw from the run's ``client_sampling`` stream."""
        return FedBABUSampler(self.clients, self.clients_per_round, self.seed,
                              rng_for_round=partial(self.streams.numpy, CLIENT_SAMPLING))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The fields, less the warm-start ones (:data:`WARM_START_DEFAULTS`) at their defaults: the records and
        checkpoint identities of the runs made before they existed stay what they were."""
        out = asdict(self)
        for key, default in {**WARM_START_DEFAULTS, **EXECUTION_DEFAULTS}.items():
            if out[key] == default:
                del out[key]
        return out

    def identity(self) -> dict[str, Any]:
        """What a checkpoint of this run must match: :meth:`to_dict`, less ``client_procs`` (the same model with any
        number of processes), less ``channels_last`` when it is off (the identity of the runs checkpointed before
        the option existed), and with the stream scheme when it is
        ``named`` (a checkpoint of the keyed draws never resumes under the named ones)."""
        out = self.to_dict()
        out.pop("client_procs", None)  # execution only, bit for bit (benchmark/pfl/client_pool.py)
        if not self.channels_last:
            del out["channels_last"]
        if self.streams.scheme != "keyed":
            out["random_streams"] = self.streams.scheme
        return out


#: The :class:`PFLConfig` fields of a run started from another run's model, and their defaults (a run from
#: scratch): left out of :meth:`PFLConfig.to_dict` at these values.
WARM_START_DEFAULTS: dict[str, Any] = {
    "lr_decay": True, "init_model": None, "init_model_sha256": None, "random_streams": None
}
#: Execution fields added after runs were recorded, and their defaults: left out of :meth:`PFLConfig.to_dict` at
#: these values (the records of the runs made before they existed stay what they were).
EXECUTION_DEFAULTS: dict[str, Any] = {"client_procs": 1}


@dataclass(frozen=True)
class Selection:
    """One kept model: its weighted test accuracy (percent), the round after which it was evaluated, its
    broadcast and personal entries, and the per-client accuracies (percent) of the evaluated clients."""

    acc: float = -1.0
    round: int = 0
    state: State = field(default_factory=dict)
    personal: dict[int, State] = field(default_factory=dict)
    clients: np.ndarray | None = None


@dataclass
class PFLResult:
    """The selected model, the other selection's (``best`` when ``last`` was asked for, and the reverse:
    training does not depend on the selection, so one run can write the outputs of both jobs,
    :func:`benchmark.pfl.run.train_step`), the record's history rows (per round: lr, train loss, weighted test
    accuracy in percent where evaluated, wall time) and the loop's rows (costs: the curve)."""

    config: PFLConfig
    selected: Selection
    other_selection_accuracy: float | None  # None: not every round was evaluated (no best-on-test model)
    history: list[dict[str, Any]]
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    other: Selection | None = None
    records: list[RoundRecord] = field(default_factory=list)

    @property
    def client_accuracy(self) -> np.ndarray:
        return np.asarray(self.selected.clients)

    @property
    def selected_round(self) -> int:
        return self.selected.round

    @property
    def selected_state(self) -> State:
        return self.selected.state

    @property
    def selected_personal(self) -> dict[int, State]:
        return self.selected.personal


def pack_personal(personal: Mapping[int, State], init: State) -> dict[str, Any]:
    """The checkpoint form of per-client personal entries: for each client the names of its entries, in order,
    and only the entries that differ from ``init`` (the initial model) in dtype, shape or any bit."""

    def same(k: str, v: torch.Tensor) -> bool:
        ref = init.get(k)
        return ref is not None and ref.dtype == v.dtype and ref.shape == v.shape and torch.equal(ref, v)

    return {
        str(i): {"keys": list(s), "changed": {k: v for k, v in s.items() if not same(k, v)}}
        for i, s in personal.items()
    }


def unpack_personal(packed: Mapping[str, Any], init: State) -> dict[int, State]:
    """The per-client personal entries of :func:`pack_personal`'s form, the unchanged ones taken from ``init``;
    a checkpoint written before that form (each client's entries in full) is read as it is."""
    out: dict[int, State] = {}
    for i, p in packed.items():
        if isinstance(p.get("keys"), list) and isinstance(p.get("changed"), Mapping):
            out[int(i)] = {k: p["changed"][k] if k in p["changed"] else init[k] for k in p["keys"]}
        else:
            out[int(i)] = dict(p)
    return out


class PFLTrainer(RoundTrainer):
    """Broadcast entries + per-client personal entries, trained by :meth:`run` through the one round loop
    (module docstring)."""

    def __init__(
        self,
        cfg: PFLConfig,
        train: DeviceImages,
        test: DeviceImages,
        split: ClientSplit,
        num_classes: int,
        *,
        progress: bool = True,
        init_state: State | None = None,
    ) -> None:
        """``init_state``: the model of the training ``cfg.init_model`` names (every entry of the network), which
        replaces the random initialisation: the broadcast entries and every client's personal ones start from it
        (fedbabu App. A.3's LG-FedAvg after FedAvg); required exactly when ``cfg.init_model`` is set."""
        if (init_state is None) != (cfg.init_model is None):
            raise ConfigError(
                f"init_model={cfg.init_model!r} with{'out' if init_state is None else ''} an initial state",
                "load the selected model of the init_model record (benchmark.pfl.run.train_step does)",
            )
        if split.num_clients != cfg.clients:
            raise ConfigError(
                f"partition has {split.num_clients} clients, config {cfg.clients}", "re-partition"
            )
        self.cfg, self.train, self.test, self.split = cfg, train, test, split
        self.num_clients = cfg.clients
        self.algo: Algorithm = get_algorithm(cfg.algorithm)
        self.device = train.images.device
        cfg.streams.seed_model_init()
        self.model = build_model(cfg.model, num_classes, bn=cfg.bn, head_init=cfg.head_init)
        self.model = place_model(self.model, self.device, cfg.precision.dtype, cfg.channels_last)
        absent = missing_blocks(self.algo.local_part, self.model.state_dict())
        if absent:
            raise ConfigError(f"algorithm {cfg.algorithm!r} trains the conv blocks {self.algo.local_part} of a "
                              f"convNet body; {cfg.model} has no block {absent[0]}",
                              "use 4convnet (fedbabu App. F.3's network) or 3convnet")  # fmt: skip
        if init_state is not None:
            missing = self.model.state_dict().keys() ^ init_state.keys()
            if missing:
                raise ConfigError(f"init_model {cfg.init_model}: entries {sorted(missing)} differ from {cfg.model}'s",
                                  "start from a training of the same model")  # fmt: skip
            self.model.load_state_dict(init_state)  # copied into the placed tensors: their dtype and layout
        train.dtype = test.dtype = cfg.precision.dtype
        self.init_state = clone_state(self.model)
        self.broadcast: State = {k: v for k, v in self.init_state.items() if self.algo.aggregates(k)}
        self.init_personal: State = {k: v for k, v in self.init_state.items() if not self.algo.aggregates(k)}
        self.personal: dict[int, State] = {}
        self.prox_mu = cfg.prox_mu if cfg.prox_mu is not None else self.algo.prox_mu
        self.procedure = None  # the reference's LocalUpdate.train (sgd_epochs); else a registered procedure
        if self.algo.procedure not in ("sgd", "centralised"):  # centralised: benchmark.pfl.centralised
            self.procedure = get_procedure(self.algo.procedure)
            self.procedure.check(cfg, self.algo)
        self.progress = progress
        self.pool: ClientPool | None = None  # the round's worker processes while run() trains (client_procs > 1)
        self.history: list[dict[str, Any]] = []  # the record's rows of the last run()
        self.best = Selection()
        self.accuracy_at: dict[int, float] = {}  # weighted accuracy (percent) after each evaluated round
        self.accuracy = math.nan  # the latest evaluation's weighted and per-client accuracies
        self.clients_accuracy: np.ndarray | None = None

    # ------------------------------------------------------------------------------------------ states
    def client_state(self, i: int) -> State:
        return {**self.broadcast, **self.personal.get(i, self.init_personal)}

    def local_sgd(self, lr: float) -> LocalSGD:
        """The local SGD of a round at ``lr``: the head at ``lr * head_lr_ratio``, 0 for a part the algorithm
        does not train."""
        body = lr if self.algo.trains_body() else 0.0
        head = lr * self.cfg.head_lr_ratio if self.algo.trains_head() else 0.0
        return self.cfg.local_sgd(body, head, body_part=self.algo.body_part)

    def prox(self) -> tuple[float, State] | None:
        """FedProx's ``(mu, anchor)``: the broadcast entries (None: not proximal)."""
        return (float(self.prox_mu), dict(self.broadcast)) if self.prox_mu else None

    def snapshot(self) -> tuple[State, dict[int, State]]:
        return (
            {k: v.clone() for k, v in self.broadcast.items()},
            {i: {k: v.clone() for k, v in s.items()} for i, s in self.personal.items()},
        )

    # ------------------------------------------------------------------------------------------ a round
    def round_plan(self) -> RoundPlan:
        """The run's plan: fedbabu's sampler, lr schedule and evaluation cadence, no evaluation before the
        first round; the checkpoint identity is the config (stage ``pfl``)."""
        cfg = self.cfg
        return RoundPlan(
            rounds=cfg.rounds,
            sampler=cfg.sampler(),
            lr_at=cfg.lr_at,
            eval_every=cfg.eval_every,
            identity=run_identity(
                cfg.identity(), method=cfg.algorithm, stage="pfl", start_round=0, rounds=cfg.rounds
            ),
            label=f"{cfg.algorithm}/{cfg.model}",
            stage=cfg.algorithm,
            progress=self.progress,
            initial_eval=False,
        )

    def local_update(self, i: int, r: int, lr: float) -> tuple[State, float]:
        """Client ``i``'s update in round ``r``: its full state after the local procedure, and its loss."""
        if self.procedure is not None:
            return self.procedure(self, i, r, lr)
        self.model.load_state_dict(self.client_state(i))
        idx = self.split.train[i]
        loss = sgd_epochs(self.model, self.train, idx, self.local_sgd(lr), (LOCAL, r, i), self.prox())
        return clone_state(self.model), loss

    def aggregate(self, states: list[State]) -> State:
        """Unweighted mean of the aggregated entries (float mean, cast back to the entry's dtype)."""
        out = {}
        for k, ref in self.broadcast.items():
            mean = torch.stack([s[k].double() for s in states]).mean(0)
            out[k] = mean.to(ref.dtype) if ref.is_floating_point() else mean.trunc().to(ref.dtype)
        return out

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        """The local updates of ``clients`` (one after the other, or in lock-step with ``client_exec=
        "vectorised"`` and the sgd procedure), their personal entries kept, the aggregated ones averaged."""
        ids = [int(i) for i in clients]
        if self.cfg.client_exec == "vectorised" and self.procedure is None:
            updates = local_updates_vectorised(self, round_idx, ids, lr, self.cfg.vector_chunk)
        else:
            if self.procedure is not None:
                self.procedure.start_round(self, round_idx)
            if self.pool is not None:
                done = self.pool.map(self, round_idx, ids, lr)
                for i, (_, _, personal) in zip(ids, done, strict=True):
                    if self.procedure is not None and personal is not None:
                        self.personal[i] = personal  # what the procedure kept (Ditto's personal model)
                updates = [(state, loss) for state, loss, _ in done]
            else:
                updates = [self.local_update(i, round_idx, lr) for i in ids]
        states = [s for s, _ in updates]
        for i, s in zip(ids, states, strict=True):
            personal = {k: s[k] for k in self.init_personal}
            if personal:
                self.personal[i] = personal
        sent = len(ids) * sum(v.numel() for v in self.broadcast.values())
        if self.broadcast:
            self.broadcast = self.aggregate(states)
        images = sum(len(self.split.train[i]) for i in ids) * self.cfg.local_epochs
        return RoundStats(
            num_examples=images,
            train_loss=float(np.mean([loss for _, loss in updates])),
            uplink_floats=sent,
            downlink_floats=sent,
            compute_f=3 * images,
        )

    # ---------------------------------------------------------------------------------------- evaluation
    def eval_split(self) -> tuple[np.ndarray, ...]:
        """The test sets evaluated: every client's, or the first ``eval_clients`` (reduced configurations)."""
        return self.split.test[: self.cfg.eval_clients] if self.cfg.eval_clients else self.split.test

    def client_accuracy(self) -> np.ndarray:
        """Percent accuracy of each evaluated client's model on its own test set."""
        return client_accuracies(
            self.model, self.test, self.eval_split(), self.client_state, self.cfg.eval_batch
        )

    def evaluate(self) -> tuple[float, float]:
        """The weighted accuracy as a fraction (no test loss: NaN); the per-client percentages are kept."""
        self.clients_accuracy = self.client_accuracy()
        self.accuracy = weighted_mean(self.clients_accuracy, self.eval_split())
        return self.accuracy / 100, math.nan

    def on_evaluated(self, done: int) -> None:
        """Keep the round's accuracy and, when it beats the best so far (strictly), the model as ``best``."""
        self.accuracy_at[done] = self.accuracy
        if self.accuracy > self.best.acc:
            self.best = Selection(self.accuracy, done, *self.snapshot(), self.clients_accuracy)

    # ------------------------------------------------------------------------------------------- run
    def run(self, *, checkpoint: Path | None = None, checkpoint_every: int = 5) -> PFLResult:
        """Train ``cfg.rounds`` rounds through :func:`run_rounds` (checkpointed to ``checkpoint`` every
        ``checkpoint_every`` rounds and after the last, resumed from it when it exists); both selections."""
        t0 = time.perf_counter()
        spec = None if checkpoint is None else CheckpointSpec(Path(checkpoint), checkpoint_every)
        procs = self.cfg.client_procs
        self.pool = ClientPool(self, procs) if procs > 1 else None
        try:
            records = run_rounds(self, self.round_plan(), checkpoint=spec).history
        finally:
            if self.pool is not None:
                self.pool.close()
                self.pool = None
        if self.clients_accuracy is None:  # resumed after the last round: evaluate the final state
            self.evaluate()
        last = Selection(self.accuracy, self.cfg.rounds, *self.snapshot(), self.clients_accuracy)
        self.history = [self._row(rec) for rec in records]
        wall = time.perf_counter() - t0
        if self.cfg.eval_every != 1:  # not every round evaluated: there is no best-on-test model to report
            extra = {"last_accuracy": last.acc, "evaluated_rounds": sorted(self.accuracy_at)}
            return PFLResult(self.cfg, last, None, self.history, wall, extra, None, records)
        chosen, other = (self.best, last) if self.cfg.selection == "best" else (last, self.best)
        extra = {"best_round": self.best.round, "best_accuracy": self.best.acc, "last_accuracy": last.acc}
        return PFLResult(self.cfg, chosen, other.acc, self.history, wall, extra, other, records)

    def _row(self, rec: RoundRecord) -> dict[str, Any]:
        """The record's history row of one round (:mod:`benchmark.pfl.run`)."""
        row = {
            "round": rec.round,
            "lr": self.cfg.lr_at(rec.round - 1),
            "train_loss": rec.train_loss,
            "clients": len(rec.clients),
        }
        if rec.round in self.accuracy_at:
            row["test_accuracy"] = self.accuracy_at[rec.round]
        return {**row, "wall_s": rec.wall_s}

    # ----------------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "broadcast": self.broadcast,
            "personal": pack_personal(self.personal, self.init_state),
            "best_state": best.state,
            "best_personal": pack_personal(best.personal, self.init_state),
            "best_clients": torch.as_tensor(best.clients if best.clients is not None else []),
            "best_acc": float(best.acc),
            "best_round": int(best.round),
            "accuracy_at": {str(r): a for r, a in self.accuracy_at.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        st = tensors_to(state, self.device)
        self.broadcast = st["broadcast"]
        self.personal = unpack_personal(st["personal"], self.init_state)
        personal = unpack_personal(st["best_personal"], self.init_state)
        clients = st["best_clients"].cpu().numpy()
        self.best = Selection(st["best_acc"], st["best_round"], st["best_state"], personal, clients)
        self.accuracy_at = {int(r): float(a) for r, a in st["accuracy_at"].items()}
