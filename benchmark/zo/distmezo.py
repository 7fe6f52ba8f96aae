"""DistMeZO naive (bernier2024 §4.1.2, Fig. 4.2): MeZO inside FedAvg, each client with its own seeds.

"a naive implementation of MeZO in the distributed setting where the seed is set independently for each
client and local training occurs for a number of steps": per round every client starts from the global
weights, runs ``local_steps`` MeZO steps on its whole local dataset with seeds of its own (drawn from
``seeding.numpy_rng(seed, 'distmezo', round, client)``), and uploads its weights; the server averages them
weighted by client size (FedAvg) and sends the average back. Traffic is the model both ways (its bytes are
counted on the :class:`~benchmark.zo.transport.Transport`). The thesis does not state its local step count;
it is a parameter (``local_steps``), reported with the run.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from benchmark.errors import ConfigError
from benchmark.seeding import numpy_rng
from benchmark.zo.fedmezo import FedMeZOConfig
from benchmark.zo.history import Progress, ZORound, ZORunResult, evaluate_every
from benchmark.zo.mezo import apply_update_, parameters_sha256, projected_gradients, trainable_parameters
from benchmark.zo.text_model import TextTensors, accuracy
from benchmark.zo.transport import Transport


@dataclass(frozen=True)
class DistMeZOConfig:
    fed: FedMeZOConfig
    local_steps: int = 10

    def __post_init__(self) -> None:
        if self.local_steps < 1:
            raise ConfigError(f"DistMeZOConfig.local_steps {self.local_steps}", "use at least one local step")


def client_seeds(seed: int, round_index: int, client: int, steps: int) -> list[int]:
    draws = numpy_rng(seed, "distmezo", round_index, client).integers(0, 2**32, size=steps, dtype=np.uint64)
    return [int(x) for x in draws]


def _flat(model: nn.Module) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1).cpu() for _, p in trainable_parameters(model)]).numpy()


def run_distmezo(
    model: nn.Module,
    clients: Sequence[TextTensors],
    config: DistMeZOConfig,
    test: TextTensors | None = None,
    *,
    progress: Progress | None = None,
) -> ZORunResult:
    fed, zo = config.fed, config.fed.zo
    sizes = [len(c) for c in clients]
    transport = Transport(fed.wire)
    params = trainable_parameters(model)
    numel = sum(p.numel() for _, p in params)
    initial = accuracy(model, test, zo.chunk) if test is not None and fed.eval_every > 0 else None
    records = []
    for r in range(fed.rounds):
        transport.begin_round(r)
        total = None
        loss_sum = 0.0
        weight_sum = 0.0
        for k, data in enumerate(clients):
            transport.down(fed.wire.encode_tensor(_flat(model)), numel)
            if not len(data):
                continue
            local = copy.deepcopy(model)
            for s in client_seeds(fed.seed, r, k, config.local_steps):
                local_params = trainable_parameters(local)
                proj = projected_gradients(local, [data], s, zo, local_params)
                apply_update_(local_params, s, proj.grads[0], zo)
                loss = float(proj.plus[0].mean())  # MeZO's loss1 of the client's last local step
            sent = _flat(local)
            received = np.frombuffer(transport.up(fed.wire.encode_tensor(sent), numel), dtype=sent.dtype)
            flat = torch.from_numpy(received.copy()).double()
            w = float(sizes[k] if fed.weighting == "size" else 1.0)
            total = flat * w if total is None else total + flat * w
            weight_sum += w
            loss_sum += w * loss
            del local
        average = (total / weight_sum).to(params[0][1].dtype)
        offset = 0
        with torch.no_grad():
            for _, p in params:
                p.copy_(average[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
        traffic = transport.rounds[-1]
        rec = ZORound(
            r, -1, (), loss_sum / weight_sum,
            evaluate_every(model, test, r, fed.rounds, fed.eval_every, zo.chunk),
            traffic.uplink_bytes, traffic.downlink_bytes,
        )  # fmt: skip
        records.append(rec)
        if progress is not None:
            progress(r + 1, fed.rounds, rec)
    final = next((x.test_accuracy for x in reversed(records) if x.test_accuracy is not None), None)
    return ZORunResult(
        "distmezo", records, initial, final, transport.totals(), parameters_sha256(model),
        {"local_steps": config.local_steps, "client_sizes": sizes},
    )  # fmt: skip
