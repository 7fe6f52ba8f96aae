"""What crosses the wire, per method, as counts of floats in each direction.

Counts are exact integers where the inputs are (a partial-participation *expectation* such as 0.3 * K
clients may be fractional). Bytes and units are applied afterwards under a named convention
(:mod:`benchmark.costs.conventions`); nothing here picks a unit.

The partition enters only through the per-client number of present classes ``|C_k|`` (or the full
``K x C`` count matrix where the method needs sample counts). Build it with :func:`class_count_matrix`
from the client index arrays and the labels, or pass the per-client class counts directly.

Method messages (d = feature dimension, C = number of classes, K = clients):

=====================  =========================================================  ================================
method                 client -> server, per client k                             source
=====================  =========================================================  ================================
FedNCM                 |C_k| class means (or sums) of d floats [+ |C_k| counts]   legate2023 Alg. 1; fedcof Table 1
FedCOF                 as FedNCM, one mean per (class, subset) with subsets       fedcof Alg. 1, §4 "number of
                                                                                  clients", papers-code §2.5
FedCOF oracle          per present class: covariance d^2 (or d(d+1)/2) + mean d   fedcof App. G
                       [+ count]
Fed3R (fedcof repo)    G_k: d^2 (or d(d+1)/2) + class sums d * |C_k|              fedcof Table 1, papers-code §2.4
Fed3R (official)       A_k: (d+1)^2 + b_k: (d+1) * C (dense over all classes)     papers-code §3
LP, per round          each participating client receives and sends the head      legate2023 App. A Eq. 3
FT, per round          each participating client receives and sends model + head  legate2023 App. A Eq. 4
=====================  =========================================================  ================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchmark.costs.conventions import BYTES_FP32
from benchmark.errors import ConfigError


@dataclass(frozen=True)
class Traffic:
    """Floats sent client->server (``uplink``) and server->client (``downlink``), summed over clients."""

    uplink_floats: float
    downlink_floats: float = 0.0

    @property
    def total_floats(self) -> float:
        return self.uplink_floats + self.downlink_floats

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(self.uplink_floats + other.uplink_floats, self.downlink_floats + other.downlink_floats)

    def times(self, factor: float) -> Traffic:
        """This traffic repeated ``factor`` times (e.g. over rounds)."""
        return Traffic(self.uplink_floats * factor, self.downlink_floats * factor)

    def nbytes(self, bytes_per_float: int = BYTES_FP32, *, directions: int = 2) -> float:
        """Bytes on the wire: both directions (``directions=2``) or the uplink only (``directions=1``)."""
        if directions not in (1, 2):
            raise ConfigError(f"directions must be 1 or 2, got {directions}", "1 = uplink only, 2 = both")
        floats = self.uplink_floats if directions == 1 else self.total_floats
        return floats * bytes_per_float


# --- partition inputs -------------------------------------------------------------------------------


def class_count_matrix(
    client_indices: Sequence[np.ndarray], labels: np.ndarray, num_classes: int
) -> np.ndarray:
    """``(K, C)`` matrix of n_{k,c}: how many samples of class c client k holds."""
    labels = np.asarray(labels)
    out = np.zeros((len(client_indices), num_classes), dtype=np.int64)
    for k, idx in enumerate(client_indices):
        lab = labels[np.asarray(idx, dtype=np.int64)]
        if lab.size and (lab.min() < 0 or lab.max() >= num_classes):
            raise ConfigError(f"client {k} has labels outside [0, {num_classes})", "check num_classes")
        out[k] = np.bincount(lab, minlength=num_classes)
    return out


def present_classes_per_client(class_counts: np.ndarray, *, min_count: int = 1) -> np.ndarray:
    """``|C_k|`` per client: classes with at least ``min_count`` samples (2 for a defined covariance)."""
    counts = np.asarray(class_counts)
    if counts.ndim != 2:
        raise ConfigError(
            f"class_counts must be a (K, C) matrix, got shape {counts.shape}", "see class_count_matrix"
        )
    return (counts >= min_count).sum(axis=1)


def _total_pairs(per_client: Sequence[int] | np.ndarray) -> int:
    arr = np.asarray(per_client)
    if arr.ndim != 1 or (arr.size and (arr.min() < 0 or not np.issubdtype(arr.dtype, np.integer))):
        raise ConfigError(
            "per-client class counts must be a 1-D sequence of non-negative integers",
            "pass one |C_k| per client (present_classes_per_client)",
        )
    return int(arr.sum())


# --- training-free methods (one message per client) --------------------------------------------------


def fedncm_traffic(
    present_per_client: Sequence[int] | np.ndarray, d: int, *, counts_charged: bool = True
) -> Traffic:
    """FedNCM (legate2023 Alg. 1): each client sends, per present class, a d-vector and (optionally) its count.

    legate2023's Table 2 charges FedNCM as a head-sized message both ways instead (Eq. 3 with R=1); that
    accounting is :func:`legate2023_comm_floats`. fedcof Table 1 ignores the counts
    (``counts_charged=False``).
    """
    return Traffic(uplink_floats=_total_pairs(present_per_client) * (d + int(counts_charged)))


def fedcof_means_per_pair(class_counts: np.ndarray, subsets: int) -> np.ndarray:
    """Means each client sends per class when it splits its samples into ``subsets`` random subsets.

    Rule of the fedcof code (papers-code.md §2.5): a class with n >= 4 samples is split into
    min(subsets, n // 2) subsets; a class with 1 <= n < 4 sends one mean; absent classes send none.
    ``subsets=1`` gives one mean per present class (the plain method).
    """
    if subsets < 1:
        raise ConfigError(f"subsets must be >= 1, got {subsets}", "use 1 for one mean per class")
    n = np.asarray(class_counts, dtype=np.int64)
    split = np.minimum(subsets, n // 2)
    return np.where(n >= 4, split, np.where(n >= 1, 1, 0))


def fedcof_traffic(
    means_per_client: Sequence[int] | np.ndarray, d: int, *, counts_charged: bool = True
) -> Traffic:
    """FedCOF (fedcof Alg. 1): a d-vector mean (and a count) per shared mean; same message as FedNCM.

    ``means_per_client`` is |C_k| with one mean per class, or ``fedcof_means_per_pair(...).sum(axis=1)``
    with subsets.
    """
    return Traffic(uplink_floats=_total_pairs(means_per_client) * (d + int(counts_charged)))


def fedcof_oracle_traffic(
    present_per_client: Sequence[int] | np.ndarray,
    d: int,
    *,
    symmetric: bool = False,
    counts_charged: bool = True,
) -> Traffic:
    """FedCOF oracle (fedcof App. G): per present class a covariance, a mean and (optionally) a count.

    The covariance costs d^2 floats, or d(d+1)/2 when only its upper triangle is sent (``symmetric``).
    """
    cov = d * (d + 1) // 2 if symmetric else d * d
    return Traffic(uplink_floats=_total_pairs(present_per_client) * (cov + d + int(counts_charged)))


def fed3r_traffic(
    present_per_client: Sequence[int] | np.ndarray,
    d: int,
    *,
    variant: str = "fedcof",
    num_classes: int | None = None,
    symmetric: bool = False,
) -> Traffic:
    """Fed3R: each client sends its Gram matrix and its class sums.

    * ``variant="fedcof"`` (fedcof Table 1 and its code): G_k = X_k^T X_k, d^2 floats (d(d+1)/2 if
      ``symmetric``), plus B_k restricted to the present classes, d * |C_k| floats.
    * ``variant="official"`` (Fed3R repo, papers-code.md §3): features get a bias column, so A_k is
      (d+1)^2 ((d+1)(d+2)/2 if ``symmetric``) and b_k is dense over all C classes, (d+1) * C floats.
    """
    present = np.asarray(present_per_client)
    k = len(present)
    if variant == "fedcof":
        gram = d * (d + 1) // 2 if symmetric else d * d
        return Traffic(uplink_floats=k * gram + _total_pairs(present) * d)
    if variant == "official":
        if num_classes is None:
            raise ConfigError(
                "official Fed3R needs num_classes (b_k is dense over all classes)", "pass num_classes"
            )
        e = d + 1
        gram = e * (e + 1) // 2 if symmetric else e * e
        return Traffic(uplink_floats=k * (gram + e * num_classes))
    raise ConfigError(f"unknown Fed3R variant {variant!r}", "use 'fedcof' or 'official'")


# --- training methods (per round) --------------------------------------------------------------------


def head_params(d: int, num_classes: int, *, bias: bool) -> int:
    """Parameters of ``nn.Linear(d, num_classes, bias=bias)``."""
    return d * num_classes + (num_classes if bias else 0)


def lp_round_traffic(d: int, num_classes: int, clients: float, *, bias: bool) -> Traffic:
    """One LP round: each of ``clients`` participants receives the head and sends its update back."""
    h = head_params(d, num_classes, bias=bias)
    return Traffic(uplink_floats=clients * h, downlink_floats=clients * h)


def ft_round_traffic(base_params: int, d: int, num_classes: int, clients: float, *, bias: bool) -> Traffic:
    """One FT round: each participant receives and sends the whole model (base + head)."""
    m = base_params + head_params(d, num_classes, bias=bias)
    return Traffic(uplink_floats=clients * m, downlink_floats=clients * m)


def fedncm_ft_traffic(
    present_per_client: Sequence[int] | np.ndarray,
    base_params: int,
    d: int,
    num_classes: int,
    *,
    rounds: int,
    clients_per_round: float,
    bias: bool,
    include_ncm_stage: bool = True,
) -> Traffic:
    """FedNCM+FT (legate2023 §3.3): the one-shot FedNCM stage, then ``rounds`` FT rounds.

    legate2023 Table 2 prints FedNCM+FT with the FT cost alone (``include_ncm_stage=False``; see NOTES.md).
    """
    ft = ft_round_traffic(base_params, d, num_classes, clients_per_round, bias=bias).times(rounds)
    if not include_ncm_stage:
        return ft
    return ft + fedncm_traffic(present_per_client, d)


def legate2023_comm_floats(
    head_in: int, head_out: int, base_params: int, *, num_clients: int, rounds: int, participation: float
) -> float:
    """legate2023 App. A Eq. 3 (``base_params=0``) / Eq. 4: 2 * (LL_out*LL_in + P) * K * R * F floats.

    The factor 2 charges both directions. Multiply by 4 bytes for the paper's 32-bit floats. FedNCM in
    Table 2 is Eq. 3 with R=1 and F=1.
    """
    if not 0 < participation <= 1:
        raise ConfigError(f"participation must be in (0, 1], got {participation}", "e.g. 0.3 for 30 of 100")
    per_round = ft_round_traffic(base_params, head_in, head_out, num_clients * participation, bias=False)
    return per_round.times(rounds).total_floats
