"""DistMeZO naive (bernier2024 §4.1.2, Fig. 4.2): MeZO inside FedAvg, each client with its own seeds.

"a naive implementation of MeZO in the distributed setting where the seed is set independently for each
client and local training occurs for a number of steps": per round every client starts from the global
weights, runs ``local_steps`` MeZO steps on its whole local dataset with seeds of its own (drawn from
``seeding.numpy_rng(seed, 'distmezo', round, client)``), and uploads its weights; the server averages them
weighted by client size (FedAvg) and sends the average back. Traffic is the model both ways (its bytes are
counted on the :class:`~benchmark.zo.transport.Transport`). The thesis does not state its local step count;
it is a parameter (``local_steps``), reported with the run. One round is :meth:`DistMeZOTrainer.train_round`
on the round loop (:class:`~benchmark.zo.fedmezo.ZOTrainer`); its checkpoint state is the global model (every
other input of a round is keyed by the round index), so a killed run resumes bit-identically (issue 25).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from benchmark.errors import ConfigError
from benchmark.federated.history import RoundStats
from benchmark.zo.fedmezo import FedMeZOConfig, ZOTrainer, seed_draws
from benchmark.zo.history import ZORunResult
from benchmark.zo.mezo import apply_update_, projected_gradients, trainable_parameters
from benchmark.zo.text_model import TextTensors


@dataclass(frozen=True)
class DistMeZOConfig:
    fed: FedMeZOConfig
    local_steps: int = 10

    def __post_init__(self) -> None:
        if self.local_steps < 1:
            raise ConfigError(f"DistMeZOConfig.local_steps {self.local_steps}", "use at least one local step")


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).cpu() for _, p in trainable_parameters(model)])


@dataclass(eq=False)
class DistMeZOTrainer(ZOTrainer):
    """One DistMeZO round per :meth:`train_round` (module docstring)."""

    METHOD: ClassVar[str] = "distmezo"
    local_steps: int = 10

    def extra(self) -> dict[str, Any]:
        return {"local_steps": self.local_steps, **super().extra()}

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        fed, zo, net = self.config, self.config.zo, self.transport
        params = trainable_parameters(self.model)
        total = None
        loss_sum = weight_sum = 0.0
        for k in map(int, clients):
            net.down.tensors([p for _, p in params])
            if not self.sizes[k]:
                continue
            local = copy.deepcopy(self.model)
            for s in seed_draws(self.local_steps, fed.seed, "distmezo", round_idx, k):
                local_params = trainable_parameters(local)
                proj = projected_gradients(local, [self.clients[k]], s, zo, local_params)
                apply_update_(local_params, s, proj.grads[0], zo)
                loss = float(proj.plus[0].mean())  # MeZO's loss1 of the client's last local step
            flat = net.up.tensors([_flat(local)])[0].double()
            w = self.weights[k]
            total = flat * w if total is None else total + flat * w
            weight_sum += w
            loss_sum += w * loss
            del local
        average = (total / weight_sum).to(params[0][1].dtype)
        with torch.no_grad():
            for (_, p), value in zip(params, average.split([p.numel() for _, p in params]), strict=True):
                p.copy_(value.view_as(p))
        n = sum(self.sizes[k] for k in map(int, clients))
        return net.round_stats(n, loss_sum / weight_sum, compute_f=2 * zo.num_z * self.local_steps * n)

    def state_dict(self) -> dict[str, Any]:
        """The global model after the last round (the clients' seeds and data are keyed by the round)."""
        return {"model": self.model.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` onto the model (strict: another architecture is refused)."""
        self.model.load_state_dict(state["model"])


def run_distmezo(
    model: nn.Module,
    clients: Sequence[TextTensors],
    config: DistMeZOConfig,
    test: TextTensors | None = None,
    **run,
) -> ZORunResult:
    """Run ``config.fed.rounds`` DistMeZO rounds on ``model`` in place; ``run``: :meth:`ZOTrainer.run`'s
    options (progress, ...)."""
    return DistMeZOTrainer(model, clients, config.fed, test, config.local_steps).run(**run)
