"""FedMeZO (bernier2024 §4.1, Algorithms 2-3): one shared seed per round, scalars up, their average down.

Per round r (full participation, one local step, as §4.2.1):

1. the server draws a seed ``s_r`` and sends it to every client (Alg. 2 l. 4);
2. client k perturbs its model along each of the ``num_z`` directions regenerated from ``s_r`` and returns
   ``num_z`` projected gradients computed on **its whole local dataset as one batch** (Alg. 3 l. 1-10; §4.2.2
   "the local batch size is set to the size of the local dataset");
3. the server averages them **weighted by client size** ``n_k / n`` (Alg. 2 l. 8 says "Average"; the
   weighting makes the average the projected gradient of the union, §4.1.2 "equivalent to running MeZO ...
   accumulating the projected gradient", so it is the default; ``weighting="uniform"`` is the plain mean);
4. every client reconstructs the same update from ``(s_r, average)`` (Alg. 3 l. 11-19).

The server keeps nothing but the log of ``(s_r, average)``: with the initial model, **the log is the model**
(:func:`replay`). A client without data still receives the seed and the average (it reconstructs) but sends
nothing.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from torch import nn

from benchmark.errors import ConfigError
from benchmark.seeding import numpy_rng
from benchmark.zo.history import Progress, ZORound, ZORunResult, evaluate_every
from benchmark.zo.mezo import (
    ZOConfig,
    apply_update_,
    parameters_sha256,
    projected_gradients,
    trainable_parameters,
    weighted_average,
)
from benchmark.zo.text_model import TextTensors, accuracy
from benchmark.zo.transport import Transport, WireFormat

CLIENT_EXECS = ("shared", "replicas")
WEIGHTINGS = ("size", "uniform")


@dataclass(frozen=True)
class LogEntry:
    """What round ``round`` changed: its seed and the averaged projected gradients (num_z)."""

    round: int
    seed: int
    average: tuple[float, ...]


@dataclass(frozen=True)
class FedMeZOConfig:
    zo: ZOConfig
    rounds: int
    seed: int = 0
    weighting: str = "size"
    client_exec: str = "shared"
    eval_every: int = 0
    wire: WireFormat = field(default_factory=WireFormat)

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise ConfigError(f"FedMeZOConfig.weighting {self.weighting!r}", f"use one of {WEIGHTINGS}")
        if self.client_exec not in CLIENT_EXECS:
            raise ConfigError(f"FedMeZOConfig.client_exec {self.client_exec!r}", f"use one of {CLIENT_EXECS}")
        if self.rounds < 0:
            raise ConfigError(f"FedMeZOConfig.rounds {self.rounds}", "use a non-negative number of rounds")


def round_seeds(seed: int, rounds: int, start: int = 0) -> list[int]:
    """The server's seed of each round (uint32; drawn from ``seeding.numpy_rng(seed, 'fedmezo-rounds')``)."""
    draws = numpy_rng(seed, "fedmezo-rounds").integers(0, 2**32, size=start + rounds, dtype=np.uint64)
    return [int(x) for x in draws[start:]]


def replay(model: nn.Module, log: Sequence[LogEntry], config: ZOConfig) -> None:
    """Apply the logged updates to ``model`` (which must hold the weights the log starts from)."""
    params = trainable_parameters(model)
    for entry in log:
        apply_update_(params, entry.seed, entry.average, config)


class FedMeZOServer:
    """Alg. 2: draws the seeds, averages the clients' scalars, keeps the log."""

    def __init__(self, config: FedMeZOConfig, sizes: Sequence[int]) -> None:
        self.config = config
        self.sizes = [int(n) for n in sizes]
        self.log: list[LogEntry] = []

    def aggregate(self, replies: dict[int, np.ndarray]) -> np.ndarray:
        clients = sorted(replies)
        rows = np.stack([replies[k] for k in clients])
        weights = [self.sizes[k] if self.config.weighting == "size" else 1.0 for k in clients]
        return weighted_average(rows, weights)


def run_fedmezo(
    model: nn.Module,
    clients: Sequence[TextTensors],
    config: FedMeZOConfig,
    test: TextTensors | None = None,
    *,
    start_log: Sequence[LogEntry] = (),
    progress: Progress | None = None,
    transport: Transport | None = None,
    after_round: Callable[[list[LogEntry], ZORound], None] | None = None,
) -> tuple[ZORunResult, list[LogEntry]]:
    """Run ``config.rounds`` FedMeZO rounds from ``model`` (trained in place; in ``replicas`` mode ``model``
    is the server's reconstruction). ``start_log`` resumes: ``model`` must already hold those updates.
    ``after_round(log, record)`` runs after every round (checkpointing). Returns the result (the rounds run
    by this call) and the full log."""
    zo = config.zo
    sizes = [len(c) for c in clients]
    if sum(sizes) == 0:
        raise ConfigError("FedMeZO clients hold no examples", "give the clients some training data")
    server = FedMeZOServer(config, sizes)
    server.log = list(start_log)
    transport = transport or Transport(config.wire)
    wire = transport.wire
    replicas = [copy.deepcopy(model) for _ in clients] if config.client_exec == "replicas" else None
    initial = accuracy(model, test, zo.chunk) if test is not None and config.eval_every > 0 else None
    done = len(server.log)
    seeds = round_seeds(config.seed, config.rounds - done, start=done)
    records: list[ZORound] = []
    for i, seed in enumerate(seeds):
        r = done + i
        transport.begin_round(r)
        replies: dict[int, np.ndarray] = {}
        losses: dict[int, float] = {}
        holders = [k for k, data in enumerate(clients) if len(data)]
        shared = None
        if replicas is None:  # one perturbation serves every client: they hold the same weights and seed
            shared = projected_gradients(model, [clients[k] for k in holders], seed, zo)
        for k in range(len(clients)):
            got = wire.decode_seed(transport.down(wire.encode_seed(seed), 1))
            if k not in holders:
                continue
            if shared is None:
                proj = projected_gradients(replicas[k], [clients[k]], got, zo)
                grads, plus = proj.grads[0], proj.plus[0]
            else:
                grads, plus = shared.grads[holders.index(k)], shared.plus[holders.index(k)]
            replies[k] = wire.decode_scalars(transport.up(wire.encode_scalars(grads), zo.num_z))
            losses[k] = float(plus.mean())
        average = server.aggregate(replies)
        entry = LogEntry(r, seed, tuple(float(x) for x in average))
        server.log.append(entry)
        for k in range(len(clients)):
            got = wire.decode_scalars(transport.down(wire.encode_scalars(average), zo.num_z))
            if replicas is not None:
                apply_update_(trainable_parameters(replicas[k]), seed, got, zo)
        apply_update_(trainable_parameters(model), seed, entry.average, zo)
        if replicas is not None:
            _check_replicas(model, replicas, r)
        loss = sum(sizes[k] * losses[k] for k in sorted(losses)) / sum(sizes[k] for k in losses)
        traffic = transport.rounds[-1]
        rec = ZORound(
            r, seed, entry.average, loss,
            evaluate_every(model, test, r, config.rounds, config.eval_every, zo.chunk),
            traffic.uplink_bytes, traffic.downlink_bytes,
        )  # fmt: skip
        records.append(rec)
        if after_round is not None:
            after_round(server.log, rec)
        if progress is not None:
            progress(r + 1, config.rounds, rec)
    final = next((x.test_accuracy for x in reversed(records) if x.test_accuracy is not None), None)
    result = ZORunResult(
        "fedmezo", records, initial, final, transport.totals(), parameters_sha256(model),
        {"client_sizes": sizes, "weighting": config.weighting, "client_exec": config.client_exec},
    )  # fmt: skip
    return result, server.log


def _check_replicas(server_model: nn.Module, replicas: Sequence[nn.Module], round_index: int) -> None:
    want = parameters_sha256(server_model)
    for k, rep in enumerate(replicas):
        got = parameters_sha256(rep)
        if got != want:
            raise RuntimeError(
                f"FedMeZO round {round_index}: client {k}'s reconstructed weights ({got[:12]}) differ from the "
                f"server's ({want[:12]}); a perturbation was not restored exactly (ZOConfig.restore)"
            )
