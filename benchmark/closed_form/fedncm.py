"""FedNCM (legate2023 Alg. 1, Sec. 3.2): the head is the L2-normalised global class means.

Clients send per-class feature sums and counts (:class:`~benchmark.closed_form.stats.ClassSumsMessage`);
the server adds them, divides, and normalises each class mean (``W_c = mu_c / ||mu_c||``). This is exact:
it equals NCM on the union of the clients' data for any partition.

Bias (papers-code.md 1.4): the paper text sets it to 0 (§3.2: "the bias term to 0"; ``bias="zero"``, default;
also the fedcof repo's copy, ``bias=False``). The legate2023 code keeps PyTorch's random ``nn.Linear`` bias init,
``U(-1/sqrt(d), 1/sqrt(d))``; ``bias="torch_default_init"`` draws such a bias from ``np.random.default_rng(seed)``
(same distribution, not torch's bits), where the callers pass the run seed's ``fedncm_bias`` stream
(:func:`benchmark.seeding.int_seed`; the closed-form protocols' ``@fedncm_bias_seed``). ``"random"`` is its
old name, still accepted (the same draw).

A class with no sample on any client gets a zero weight row (and zero bias with ``bias="zero"``), which is
what ``F.normalize`` does to the reference's zero mean: its logit is 0 (or its random bias).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from benchmark.closed_form.centralised import ncm_head
from benchmark.closed_form.heads import LinearHead, row_normalise, solver_dtype
from benchmark.closed_form.registry import CentralisedReference, head_of, register_plan
from benchmark.closed_form.stats import (
    ClassSumsMessage,
    MethodPlan,
    class_sums_message,
)
from benchmark.errors import ConfigError

Bias = Literal["zero", "torch_default_init", "random"]
#: The bias options (``random``: the old name of ``torch_default_init``).
BIASES: tuple[str, ...] = ("zero", "torch_default_init", "random")


class FedNCMServer:
    """Accumulates class sums and counts (legate2023 Alg. 1, lines 3-8)."""

    def __init__(
        self, num_classes: int, dim: int, *, bias: Bias = "zero", seed: int = 0, dtype: np.dtype = np.float64
    ) -> None:
        if bias not in BIASES:
            raise ConfigError(
                f"fedncm bias {bias!r} unknown", "use 'zero' (the paper's text) or 'torch_default_init' (legate2023 code)"
            )
        self.dtype = np.dtype(dtype)
        self.sums = np.zeros((num_classes, dim), dtype=self.dtype)
        self.counts = np.zeros(num_classes, dtype=np.int64)
        if bias != "zero":
            bound = 1.0 / np.sqrt(dim)
            self.bias = np.random.default_rng(seed).uniform(-bound, bound, num_classes).astype(self.dtype)
        else:
            self.bias = np.zeros(num_classes, dtype=self.dtype)

    def add(self, message: ClassSumsMessage) -> None:
        """Fold in one client's class sums (its classes are distinct, so plain fancy-index addition)."""
        self.sums[message.classes] += message.sums
        self.counts[message.classes] += message.counts

    def class_means(self) -> np.ndarray:
        """Global class means ``l_c = (1 / D_c) sum_k m_c^k`` (Alg. 1 line 7); zero for absent classes."""
        means = np.zeros_like(self.sums)
        present = self.counts > 0
        means[present] = self.sums[present] / self.counts[present, None].astype(self.dtype)
        return means

    def head(self) -> LinearHead:
        """``W = normalize(class_means)`` row-wise, bias as configured."""
        return LinearHead(row_normalise(self.class_means()), self.bias.copy())


def plan_fedncm(
    num_classes: int, dim: int, *, bias: Bias = "zero", seed: int = 0, solver: str = "solve64"
) -> MethodPlan:
    """FedNCM server and client message (legate2023 Alg. 1) for :func:`fit_fedncm` and joint runs."""
    dtype = solver_dtype(solver)
    server = FedNCMServer(num_classes, dim, bias=bias, seed=seed, dtype=dtype)
    return MethodPlan(
        server,
        dtype,
        lambda k, x, y, m: class_sums_message(k, x, y, dtype, m),
        extra=lambda: {"class_counts": server.counts.copy()},
    )


fit_fedncm = register_plan(
    "fedncm",
    summary="FedNCM (legate2023 Alg. 1): L2-normalised federated class means",
    plan=plan_fedncm,
    reference=CentralisedReference(ncm_head),
)


#: FedNCM head (legate2023 Alg. 1): :func:`fit_fedncm`'s head, same options (``bias``, ``seed``, ``solver``).
fedncm = head_of(fit_fedncm)
