"""FedMeZO (bernier2024 §4.1, Algorithms 2-3): one shared seed per round, scalars up, their average down.

Per round r (full participation, one local step, as §4.2.1):

1. the server draws a seed ``s_r`` and sends it to every client (Alg. 2 l. 4);
2. client k perturbs its model along each of the ``num_z`` directions regenerated from ``s_r`` and returns
   ``num_z`` projected gradients computed on **its whole local dataset as one batch** (Alg. 3 l. 1-10; §4.2.2
   "the local batch size is set to the size of the local dataset");
3. the server averages them **weighted by client size** ``n_k / n`` (:class:`ScalarAverage`; Alg. 2 l. 8
   says "Average"; the weighting makes the average the projected gradient of the union, §4.1.2 "equivalent
   to running MeZO ... accumulating the projected gradient", so it is the default; ``weighting="uniform"``
   is the plain mean);
4. every client reconstructs the same update from ``(s_r, average)`` (Alg. 3 l. 11-19).

The server keeps nothing but the log of ``(s_r, average)``: with the initial model, **the log is the model**
(:func:`replay`). It is the trainer's whole checkpoint state: a resumed run replays it onto the initial model
(:mod:`benchmark.federated.checkpoint`). A client without data still receives the seed and the average (it
reconstructs) but sends nothing.

Issue 25: the rounds run through the one round loop (:func:`benchmark.federated.loop.run_rounds`);
:class:`ZOTrainer` is the base of the zo trainers (full participation, test accuracy in percent, the wire
of :mod:`benchmark.zo.transport` as the round's costs), :class:`FedMeZOTrainer` one round of FedMeZO.

Simulation: ``client_exec="shared"`` lets the clients use one model, since they hold bit-identical weights
(each restores exactly after perturbing: ``ZOConfig.restore="copy"``) and apply the same update: each
direction is generated once per round and every client's batch is evaluated under it, which gives each
client exactly the scalars it would compute alone (the ``replicas`` test checks it);
``client_exec="replicas"`` gives every client and the server their own copy and checks after each round
that all of them hash alike (the tests use it). Departures: seeds are 32-bit and scalars float64 on the
wire (the thesis counts one byte per number: :mod:`benchmark.zo.transport`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np
from torch import nn

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec, run_identity
from benchmark.federated.history import RoundStats
from benchmark.federated.loop import RoundPlan, RoundTrainer, run_rounds
from benchmark.federated.sampling import ClientSampler
from benchmark.seeding import RunSeeds, numpy_rng
from benchmark.zo.history import LogEntry, ZORunResult, zo_result
from benchmark.zo.mezo import (
    ZOConfig,
    apply_update_,
    parameters_sha256,
    projected_gradients,
    trainable_parameters,
    weighted_average,
)
from benchmark.zo.text_model import TextTensors, accuracy
from benchmark.zo.transport import THESIS_NUMBER_BYTES, Transport, WireFormat

CLIENT_EXECS = ("shared", "replicas")
WEIGHTINGS = ("size", "uniform")


@dataclass(frozen=True)
class FedMeZOConfig:
    zo: ZOConfig
    rounds: int
    seed: int = 0
    weighting: str = "size"
    client_exec: str = "shared"
    eval_every: int = 0
    wire: WireFormat = field(default_factory=WireFormat)
    #: the rounds' seeds, given (e.g. the released MeZO code's own draws, ``flb peer mezo``); empty: drawn from
    #: ``seed`` (:func:`round_seeds`)
    round_seeds: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.round_seeds and len(self.round_seeds) < self.rounds:
            raise ConfigError(f"{len(self.round_seeds)} round seeds for {self.rounds} rounds",
                              "give one seed per round, or none")  # fmt: skip
        if self.weighting not in WEIGHTINGS:
            raise ConfigError(f"FedMeZOConfig.weighting {self.weighting!r}", f"use one of {WEIGHTINGS}")
        if self.client_exec not in CLIENT_EXECS:
            raise ConfigError(f"FedMeZOConfig.client_exec {self.client_exec!r}", f"use one of {CLIENT_EXECS}")
        if self.rounds < 0:
            raise ConfigError(f"FedMeZOConfig.rounds {self.rounds}", "use a non-negative number of rounds")


def seed_draws(count: int, seed: int, stream: str, *keys: int) -> list[int]:
    """``count`` uint32 seeds from the named stream ``seeding.numpy_rng(seed, stream, *keys)``."""
    draws = numpy_rng(seed, stream, *keys).integers(0, 2**32, size=count, dtype=np.uint64)
    return [int(x) for x in draws]


def round_seeds(seed: int, rounds: int) -> list[int]:
    """The server's seed of each round (stream ``fedmezo-rounds``)."""
    return seed_draws(rounds, seed, "fedmezo-rounds")


def replay(model: nn.Module, log: Sequence[LogEntry], config: ZOConfig) -> None:
    """Apply the logged updates to ``model`` (which must hold the weights the log starts from)."""
    params = trainable_parameters(model)
    for entry in log:
        apply_update_(params, entry.seed, entry.average, config)


class ScalarAverage:
    """FedMeZO's aggregation (Alg. 2 l. 8): the clients' projected gradients averaged with their weights
    (:attr:`ZOTrainer.weights`), in client order, with :func:`~benchmark.zo.mezo.weighted_average` (so it
    rounds as the centralised accumulation does)."""

    def __init__(self, weights: Sequence[float]) -> None:
        self.weights = list(weights)

    def aggregate(self, replies: Mapping[int, np.ndarray]) -> np.ndarray:
        clients = sorted(replies)
        return weighted_average(np.stack([replies[k] for k in clients]), [self.weights[k] for k in clients])


@dataclass(eq=False)
class ZOTrainer(RoundTrainer):
    """Base of the zo trainers on the round loop: every client takes part, the wire is a :class:`Transport`
    (its counts are the round's costs), and :meth:`evaluate` gives the test accuracy in **percent** (the zo
    records' unit; no loss: NaN), or NaN when the run does not evaluate (no test set, ``eval_every`` 0)."""

    METHOD: ClassVar[str]
    measures_communication: ClassVar[bool] = True
    accuracy_unit: ClassVar[str] = "percent"
    model: nn.Module
    clients: Sequence[TextTensors]
    config: FedMeZOConfig
    test: TextTensors | None = None

    def __post_init__(self) -> None:
        self.sizes = [len(c) for c in self.clients]
        #: each client's weight in the server's average: its size (``weighting="size"``) or 1
        self.weights = [float(n) if self.config.weighting == "size" else 1.0 for n in self.sizes]
        self.num_clients = len(self.clients)
        self.transport = Transport(self.config.wire)
        self.log: list[LogEntry] = []  # the seed log (FedMeZO; empty for DistMeZO)

    def extra(self) -> dict[str, Any]:
        """What the record's ``extra`` says about the run."""
        return {"client_sizes": self.sizes}

    def run(
        self,
        *,
        label: str | None = None,
        checkpoint: CheckpointSpec | None = None,
        identity: Mapping[str, Any] | None = None,
        progress: bool = False,
        on_round_end: Callable[[int], None] | None = None,
    ) -> ZORunResult:
        """``config.rounds`` rounds through :func:`~benchmark.federated.loop.run_rounds`: every client every
        round, the config's cadence (:meth:`evaluate` skips when it is 0), numbers counted at the thesis's
        byte each (:mod:`benchmark.zo.transport`). ``checkpoint``: saved there and resumed from it when it
        exists (``identity``: the run it must belong to, by default the config's and :meth:`extra`'s)."""
        cfg = self.config
        own = {**asdict(cfg), **self.extra()}
        own = run_identity(own, method=self.METHOD, stage="", start_round=0, rounds=cfg.rounds)
        plan = RoundPlan(
            rounds=cfg.rounds,
            sampler=ClientSampler(self.num_clients, self.num_clients, RunSeeds(cfg.seed)),
            lr_at=lambda _i: cfg.zo.lr,
            eval_every=max(cfg.eval_every, 1),
            identity=identity or own,
            label=label or self.METHOD,
            bytes_per_float=THESIS_NUMBER_BYTES,
            progress=progress,
        )
        out = run_rounds(self, plan, checkpoint=checkpoint, on_round_end=on_round_end)
        return zo_result(self.METHOD, out, self.log, parameters_sha256(self.model), self.extra())

    def evaluate(self) -> tuple[float, float]:
        if self.test is None or self.config.eval_every <= 0:
            return math.nan, math.nan
        return accuracy(self.model, self.test, self.config.zo.chunk), math.nan


@dataclass(eq=False)
class FedMeZOTrainer(ZOTrainer):
    """One FedMeZO round per :meth:`train_round` (module docstring); :attr:`log` is the run so far."""

    METHOD: ClassVar[str] = "fedmezo"

    def __post_init__(self) -> None:
        super().__post_init__()
        if sum(self.sizes) == 0:
            raise ConfigError("FedMeZO clients hold no examples", "give the clients some training data")
        cfg = self.config
        self.server = ScalarAverage(self.weights)
        self.seeds = [int(x) for x in cfg.round_seeds] or round_seeds(cfg.seed, cfg.rounds)
        self.holders = [k for k, n in enumerate(self.sizes) if n]
        self.replicas = (
            [copy.deepcopy(self.model) for _ in self.clients] if cfg.client_exec == "replicas" else None
        )

    def extra(self) -> dict[str, Any]:
        return {**super().extra(), "weighting": self.config.weighting, "client_exec": self.config.client_exec}

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        zo, net, seed = self.config.zo, self.transport, self.seeds[round_idx]
        shared = None
        if self.replicas is None:  # one perturbation serves every client: they hold the same weights and seed
            shared = projected_gradients(self.model, [self.clients[k] for k in self.holders], seed, zo)
        replies, losses = {}, {}  # client -> its projected gradients, its loss
        for k in map(int, clients):
            got = net.down.seed(seed)
            if not self.sizes[k]:
                continue
            if shared is None:
                proj = projected_gradients(self.replicas[k], [self.clients[k]], got, zo)
                grads, plus = proj.grads[0], proj.plus[0]
            else:
                grads, plus = shared.grads[self.holders.index(k)], shared.plus[self.holders.index(k)]
            replies[k] = net.up.scalars(grads)
            losses[k] = float(plus.mean())
        entry = LogEntry(round_idx, seed, tuple(float(x) for x in self.server.aggregate(replies)))
        self.log.append(entry)
        for k in map(int, clients):
            got = net.down.scalars(entry.average)
            if self.replicas is not None:
                apply_update_(trainable_parameters(self.replicas[k]), seed, got, zo)
        apply_update_(trainable_parameters(self.model), seed, entry.average, zo)
        want = parameters_sha256(self.model) if self.replicas is not None else ""
        for k, replica in enumerate(self.replicas or []):
            if (got := parameters_sha256(replica)) != want:
                raise RuntimeError(
                    f"FedMeZO round {round_idx}: client {k}'s reconstructed weights ({got[:12]}) differ from the "
                    f"server's ({want[:12]}); a perturbation was not restored exactly (ZOConfig.restore)"
                )
        n = sum(self.sizes[k] for k in losses)
        loss = sum(self.sizes[k] * losses[k] for k in sorted(losses)) / n
        return net.round_stats(n, loss, compute_f=2 * zo.num_z * n)

    def state_dict(self) -> dict[str, Any]:
        """The log (module docstring: with the initial model it is the model)."""
        return {"log": [[e.round, e.seed, list(e.average)] for e in self.log]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replay the saved log onto the model (and the replicas), which hold the initial weights."""
        self.log = [LogEntry(int(r), int(s), tuple(float(x) for x in a)) for r, s, a in state["log"]]
        for model in [self.model, *(self.replicas or [])]:
            replay(model, self.log, self.config.zo)


def run_fedmezo(
    model: nn.Module,
    clients: Sequence[TextTensors],
    config: FedMeZOConfig,
    test: TextTensors | None = None,
    **run,
) -> ZORunResult:
    """Run ``config.rounds`` FedMeZO rounds from ``model`` (trained in place; in ``replicas`` mode ``model``
    is the server's reconstruction); ``run``: :meth:`ZOTrainer.run`'s options (checkpoint, progress, ...).
    The result holds the full log."""
    return FedMeZOTrainer(model, clients, config, test).run(**run)
