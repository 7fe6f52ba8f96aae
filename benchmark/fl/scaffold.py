"""SCAFFOLD (Karimireddy et al., ICML 2020, Algorithm 1 with option II control variates) on the model path:
the plug-in example of docs/extending.md. Not in the five documents; it shows what adding an algorithm takes.

Each client k keeps a control variate ``c_k``, the server ``c`` (both start at zero). In a round, a sampled
client runs local SGD with every gradient corrected by ``c - c_k`` (:meth:`gradient_correction`), then
updates ``c_k <- c_k - c + (x - y_k) / (steps * lr)`` (option II; ``x - y_k`` is the delta the client sends
anyway) and also sends ``Delta c_k``. The server steps the weights as FedAvg does (its configured optimiser on
the averaged deltas) and sets ``c <- c + |S|/N * mean_k Delta c_k``. Communication doubles (the control
variates travel both ways). With one client and full participation ``c - c_k`` is exactly zero every round,
so SCAFFOLD is FedAvg bit for bit (tests/test_fl_scaffold.py).

Departures: the control variates cover the trained parameters only (not BatchNorm buffers); a client without
data sends nothing, as under FedAvg.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from benchmark.federated.checkpoint import tensors_to
from benchmark.federated.history import RoundStats
from benchmark.federated.server_opt import DeltaAccumulator
from benchmark.fl.client import ClientResult
from benchmark.fl.engine import FL_TRAINERS, ModelTrainer


class ScaffoldTrainer(ModelTrainer):
    """:class:`~benchmark.fl.engine.ModelTrainer` with SCAFFOLD's control variates (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        params = dict(self.model.named_parameters())
        self.c = {n: torch.zeros_like(params[n]) for n in self.train_names}
        self.c_client: dict[int, dict[str, torch.Tensor]] = {}
        self._c_deltas = DeltaAccumulator()
        self.up_floats *= 2  # weights and control variates, both ways
        self.down_floats *= 2

    def _c_of(self, client: int) -> dict[str, torch.Tensor]:
        return self.c_client.get(client) or {n: torch.zeros_like(v) for n, v in self.c.items()}

    def gradient_correction(self, client: int) -> dict[str, torch.Tensor]:
        mine = self._c_of(client)
        return {n: self.c[n] - mine[n] for n in self.c}

    def local_update(
        self, client, round_idx, lr, gparams, anchor
    ) -> tuple[dict[str, torch.Tensor], ClientResult]:
        update, res = super().local_update(client, round_idx, lr, gparams, anchor)
        old = self._c_of(client)
        scale = 1.0 / (res.num_steps * lr)
        with torch.no_grad():
            new = {n: old[n] - self.c[n] + update[n] * scale for n in self.c}
            self._c_deltas.add({n: new[n] - old[n] for n in self.c}, 1.0)
        self.c_client[client] = new
        return update, res

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        self._c_deltas = DeltaAccumulator()
        stats = super().train_round(round_idx, clients, lr)
        if self._c_deltas.total_weight > 0:
            share = self._c_deltas.total_weight / self.num_clients  # |S| / N over the clients that sent
            with torch.no_grad():
                for n, d in self._c_deltas.average().items():
                    self.c[n].add_(d, alpha=share)
        return stats

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "scaffold_c": dict(self.c),
            "scaffold_c_client": {str(k): v for k, v in self.c_client.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.c = tensors_to(dict(state["scaffold_c"]), self.device)
        self.c_client = {
            int(k): tensors_to(dict(v), self.device) for k, v in state["scaffold_c_client"].items()
        }


FL_TRAINERS.add("scaffold", ScaffoldTrainer)
