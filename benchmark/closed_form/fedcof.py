"""FedCOF (fedcof Alg. 1, Eq. 7-11) and the FedCOF oracle (fedcof App. G, Eq. 25).

Clients send class means and counts only (same message as FedNCM). With ``n_{k,c}``, ``mu_{k,c}`` the
count and mean of the k-th mean of class c, ``N_c = sum_k n_{k,c}``, ``K_c`` the number of means of class
c, ``mu_c`` the count-weighted class mean, ``N = sum_c N_c`` and ``mu_g = sum_c N_c mu_c / N``:

* Eq. 7/8: ``Sigma_c = 1/(K_c - 1) sum_k n_{k,c} (mu_{k,c} - mu_c)(mu_{k,c} - mu_c)^T + gamma I``
  (unbiased for iid client samples, Prop. 2).
* Eq. 9: ``B = [N_c mu_c]_c`` (class sums).
* Eq. 11: ``G = sum_c (N_c - 1) Sigma_c + N mu_g mu_g^T`` (the between-class scatter of Eq. 10 dropped),
  ``W = rownorm(((G + ridge I)^{-1} B)^T)``, no bias.

The server is batched: ``sum_c (N_c - 1)/(K_c - 1) sum_k n_{k,c} d_{k,c} d_{k,c}^T`` is one weighted
``D^T D`` product over all M sent means (``d_{k,c} = mu_{k,c} - mu_c``), streamed in row chunks, plus
``gamma * sum_c (N_c - 1) * I``; no per-class d x d work.

Quirks and choices, each an explicit option:

* ``ridge`` - fedcof Alg. 1 and Sec. 5 write ``(G + lambda I)^{-1}`` with ``lambda = 0.01``; the reference
  code (path A, the tables) has no lambda: ``ridge = 0.0`` (default). Path B (multi-round, Fig. 3-4) adds
  ``gamma I`` once more to ``G``: ``ridge = gamma``.
* ``single_client`` - a class with a single mean (``K_c = 1``) has no between-client scatter:
  ``"zero"`` (default, reference path A: the code divides by ``K_c`` instead of ``K_c - 1``, so the scatter
  is 0 and only ``gamma I`` remains); ``"error"`` raises; ``"path_b_noise"`` uses the reference path-B
  stand-in: the unweighted covariance (ddof 1) of the mean and 5 copies plus N(0, 0.1^2) noise.
* ``covariance`` - ``"full"`` (paper), ``"diagonal"`` or ``"spherical"`` (``trace / d``) restriction of the
  estimated class covariances (before shrinkage). Fig. 8 (right) compares clients *sending* diagonal or
  spherical covariances: that is :func:`fit_fedcof_oracle` with ``covariance=...``.
* ``subsets=g`` - each client sends ``min(g, floor(n/2))`` means of random disjoint subsets of every class
  with at least 4 samples (fedcof Fig. 5, 8, Table 5; reference path B); each subset mean counts as one
  of the ``K_c`` means.
* ``noise`` - noisy class counts (fedcof App. N, :class:`~benchmark.closed_form.stats.CountNoise`).

A class absent everywhere gets a zero weight row. With no statistics at all the head is zero.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from benchmark.closed_form.centralised import within_class_head
from benchmark.closed_form.heads import LinearHead, row_normalise, solve_gram, solver_dtype
from benchmark.closed_form.registry import CentralisedReference, head_of, register_plan
from benchmark.closed_form.stats import (
    COVARIANCE_KINDS,
    ClassCovarianceMessage,
    ClassMeansMessage,
    ClientMoments,
    CountNoise,
    CovarianceKind,
    MethodPlan,
    class_covariance_message,
    class_means_message,
)
from benchmark.errors import ConfigError, UnknownNameError
from benchmark.models.backbones import backbone_spec, list_backbones

SingleClient = Literal["zero", "error", "path_b_noise"]
SINGLE_CLIENT_MODES: tuple[str, ...] = ("zero", "error", "path_b_noise")

#: path-B stand-in covariance for a class with one mean: this many noisy copies, this noise std.
PATH_B_COPIES = 5
PATH_B_NOISE_STD = 0.1

_CHUNK_ROWS = 4096


def _family(name: str) -> str:
    """``squeezenet1_1`` -> ``squeezenet``, ``vit_b_16`` -> ``vit``: the letters a backbone's name starts with."""
    return re.match(r"[a-z]*", name).group(0)  # type: ignore[union-attr]


def default_gamma(model_name: str) -> float:
    """Shrinkage ``gamma`` used by fedcof for a backbone: the backbone registry's ``BackboneSpec.default_gamma``
    (1 for SqueezeNet, ResNet and ViT-B/16, 0.1 for MobileNetV2; sources there).

    A registered name is used as is; another name is matched to a backbone family by prefix (``squeezenet``,
    ``mobilenet``, ``vit``, ``resnet``: ``MobileNetV2``, ``vit_b16`` ...) when every registered backbone of
    that family has the same gamma. Unknown names raise :class:`UnknownNameError`.
    """
    key = model_name.lower().replace("-", "_")
    if key in list_backbones():
        return backbone_spec(key).default_gamma
    families: dict[str, set[float]] = {}
    for name in list_backbones():
        families.setdefault(_family(name), set()).add(backbone_spec(name).default_gamma)
    for family, gammas in families.items():
        if family and key.startswith(family) and len(gammas) == 1:
            return next(iter(gammas))
    raise UnknownNameError(
        f"no fedcof gamma for backbone {model_name!r}",
        f"pass gamma explicitly or use one of: {', '.join(list_backbones())}",
    )


def _resolve_gamma(gamma: float | None, model_name: str | None) -> float:
    if gamma is None:
        if model_name is None:
            raise ConfigError("fedcof needs gamma", "pass gamma=... or model_name=... (see default_gamma)")
        gamma = default_gamma(model_name)
    if not gamma >= 0:
        raise ConfigError(f"fedcof gamma must be >= 0, got {gamma}", "the paper uses 0.1 or 1")
    return float(gamma)


# ------------------------------------------------------------------------------------------------
# batched kernels


@dataclass(frozen=True, eq=False)
class _Rows:
    classes: np.ndarray
    means: np.ndarray
    counts: np.ndarray


def _chunks(messages: Sequence[Any], dtype: np.dtype, chunk_rows: int) -> Iterator[_Rows]:
    """Concatenate consecutive messages into blocks of at least ``chunk_rows`` rows (means cast to dtype)."""
    buf: list[Any] = []
    rows = 0

    def flush() -> _Rows:
        return _Rows(
            np.concatenate([m.classes for m in buf]),
            np.concatenate([np.asarray(m.means, dtype=dtype) for m in buf]),
            np.concatenate([np.asarray(m.counts, dtype=np.float64) for m in buf]),
        )

    for m in messages:
        if len(m.classes) == 0:
            continue
        buf.append(m)
        rows += len(m.classes)
        if rows >= chunk_rows:
            yield flush()
            buf, rows = [], 0
    if buf:
        yield flush()


def _segment_add(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``target[index[i]] += values[i]`` for repeated indices, via one sort and ``np.add.reduceat``."""
    order = np.argsort(index, kind="stable")
    idx = index[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(idx)) + 1))
    target[idx[starts]] += np.add.reduceat(values[order], starts, axis=0)


def _add_scatter(scatter: np.ndarray, centred: np.ndarray, weights: np.ndarray) -> None:
    """``scatter += centred^T diag(weights) centred`` as one (symmetric) matrix product."""
    w = weights.astype(centred.dtype)
    if np.all(w >= 0):
        scaled = centred * np.sqrt(w)[:, None]
        scatter += scaled.T @ scaled
    else:  # negative weights only arise from noisy counts with N_c < 1
        part = (centred * w[:, None]).T @ centred
        scatter += 0.5 * (part + part.T)


@dataclass(frozen=True, eq=False)
class FedCOFStatistics:
    """Server-side quantities of fedcof Alg. 1 (all per class c of C; ``d`` the feature dimension).

    ``scatter`` is ``sum_c (N_c - 1) Sigma_c`` *without* shrinkage (restricted to diagonal/spherical if
    asked); ``gram`` is Eq. 11's ``G`` including ``gamma * sum_c (N_c - 1) I``, ``N mu_g mu_g^T`` and
    ``ridge I``.
    """

    class_counts: np.ndarray  # N_c, (C,) float64
    means_per_class: np.ndarray  # K_c, (C,) int64
    class_sums: np.ndarray  # B, (C, d)
    class_means: np.ndarray  # mu_c, (C, d), zero for absent classes
    global_mean: np.ndarray  # mu_g, (d,)
    scatter: np.ndarray  # (d, d)
    gram: np.ndarray  # (d, d)


def _first_moments(
    messages: Sequence[Any], num_classes: int, dim: int, dtype: np.dtype, chunk_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(N_c, K_c, B, mu_c, mu_g) from the sent means and counts (Alg. 1, server lines 1-3)."""
    sent = [m for m in messages if len(m.classes)]
    classes = np.concatenate([m.classes for m in sent]) if sent else np.zeros(0, np.int64)
    counts = np.concatenate([np.asarray(m.counts, np.float64) for m in sent]) if sent else np.zeros(0)
    n_c = np.bincount(classes, weights=counts, minlength=num_classes).astype(np.float64)
    k_c = np.bincount(classes, minlength=num_classes).astype(np.int64)
    sums = np.zeros((num_classes, dim), dtype=dtype)
    for rows in _chunks(sent, dtype, chunk_rows):
        _segment_add(sums, rows.classes, rows.means * rows.counts[:, None].astype(dtype))
    present = k_c > 0
    means = np.zeros_like(sums)
    means[present] = sums[present] / n_c[present, None].astype(dtype)
    total = n_c.sum()
    g_mean = sums.sum(0) / dtype.type(total) if total > 0 else np.zeros(dim, dtype=dtype)
    return n_c, k_c, sums, means, g_mean


def _restrict(scatter: np.ndarray, covariance: str) -> np.ndarray:
    if covariance == "diagonal":
        return np.diag(np.diag(scatter))
    if covariance == "spherical":
        d = scatter.shape[0]
        return (np.trace(scatter) / d) * np.eye(d, dtype=scatter.dtype)
    return scatter


def _finish_gram(
    scatter: np.ndarray, n_c: np.ndarray, k_c: np.ndarray, g_mean: np.ndarray, gamma: float, ridge: float
) -> np.ndarray:
    """Eq. 11: ``scatter + gamma sum_c (N_c - 1) I + N mu_g mu_g^T + ridge I``."""
    present = k_c > 0
    dtype = scatter.dtype
    gram = scatter + dtype.type(n_c.sum()) * np.outer(g_mean, g_mean)
    gram[np.diag_indices_from(gram)] += dtype.type(gamma * (n_c[present] - 1.0).sum() + ridge)
    return gram


def fedcof_statistics(
    messages: Sequence[ClassMeansMessage],
    num_classes: int,
    dim: int,
    *,
    gamma: float,
    ridge: float = 0.0,
    covariance: CovarianceKind = "full",
    single_client: SingleClient = "zero",
    dtype: np.dtype = np.float64,
    seed: int = 0,
    chunk_rows: int = _CHUNK_ROWS,
) -> FedCOFStatistics:
    """Batched FedCOF server statistics (fedcof Alg. 1, Eq. 7-11) from all received means and counts."""
    if covariance not in COVARIANCE_KINDS:
        raise ConfigError(f"covariance {covariance!r} unknown", f"use one of: {', '.join(COVARIANCE_KINDS)}")
    if single_client not in SINGLE_CLIENT_MODES:
        raise ConfigError(
            f"single_client {single_client!r} unknown", f"use one of: {', '.join(SINGLE_CLIENT_MODES)}"
        )
    dtype = np.dtype(dtype)
    n_c, k_c, sums, means, g_mean = _first_moments(messages, num_classes, dim, dtype, chunk_rows)
    single = k_c == 1
    if single_client == "error" and single.any():
        raise ConfigError(
            f"fedcof: {int(single.sum())} classes have a single client mean (K_c = 1, e.g. class "
            f"{int(np.flatnonzero(single)[0])}), Eq. 7 is undefined",
            "use single_client='zero' (reference) or 'path_b_noise', or subsets > 1",
        )
    # Eq. 7 weight of each sent mean in sum_c (N_c - 1) Sigma_c: n_{k,c} (N_c - 1) / (K_c - 1), with the
    # reference's divisor K_c (= 1) when K_c = 1 (the centred mean is then zero anyway).
    per_class = (n_c - 1.0) / np.maximum(k_c - 1, 1)
    if single_client == "path_b_noise":
        per_class[single] = 0.0
    scatter = np.zeros((dim, dim), dtype=dtype)
    for rows in _chunks([m for m in messages if len(m.classes)], dtype, chunk_rows):
        centred = rows.means - means[rows.classes]
        _add_scatter(scatter, centred, rows.counts * per_class[rows.classes])
    if single_client == "path_b_noise" and single.any():
        rng = np.random.default_rng([int(seed), 2])
        cls = np.flatnonzero(single)
        copies = np.repeat(means[cls][:, None, :], PATH_B_COPIES + 1, axis=1)
        copies[:, 1:] += (PATH_B_NOISE_STD * rng.standard_normal(copies[:, 1:].shape)).astype(dtype)
        centred = (copies - copies.mean(1, keepdims=True)).reshape(-1, dim)
        weights = np.repeat((n_c[cls] - 1.0) / PATH_B_COPIES, PATH_B_COPIES + 1)
        _add_scatter(scatter, centred, weights)
    scatter = _restrict(scatter, covariance)
    gram = _finish_gram(scatter, n_c, k_c, g_mean, gamma, ridge)
    return FedCOFStatistics(n_c, k_c, sums, means, g_mean, scatter, gram)


def class_covariance_estimates(
    messages: Sequence[ClassMeansMessage], num_classes: int, dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-class Eq. 7 estimates ``Sigma_c`` (no shrinkage) and ``K_c``, float64, for analysis and tests.

    Not used by the server (which never forms per-class matrices); memory is ``M d^2``, so keep d small.
    ``K_c <= 1`` gives a zero matrix (reference divisor ``K_c``).
    """
    _, k_c, _, means, _ = _first_moments(messages, num_classes, dim, np.dtype(np.float64), _CHUNK_ROWS)
    sent = [m for m in messages if len(m.classes)]
    covs = np.zeros((num_classes, dim, dim))
    if not sent:
        return covs, k_c
    classes = np.concatenate([m.classes for m in sent])
    mus = np.concatenate([np.asarray(m.means, np.float64) for m in sent])
    counts = np.concatenate([np.asarray(m.counts, np.float64) for m in sent])
    centred = mus - means[classes]
    outer = np.einsum("m,md,me->mde", counts, centred, centred)
    _segment_add(covs, classes, outer)
    return covs / np.maximum(k_c - 1, 1)[:, None, None], k_c


def _solve_head(gram: np.ndarray, sums: np.ndarray, k_c: np.ndarray, solver: str) -> LinearHead:
    """``W = rownorm(((G)^{-1} B)^T)`` (Eq. 11 and the final normalisation of Alg. 1), no bias."""
    if not np.any(k_c > 0):
        return LinearHead(np.zeros_like(sums), np.zeros(sums.shape[0], dtype=sums.dtype))
    w = solve_gram(gram, sums.T, solver).T
    return LinearHead(row_normalise(w), np.zeros(w.shape[0], dtype=w.dtype))


class _Eq11Server:
    """What both FedCOF servers share: their options, the client means received so far, and Eq. 11's head
    from their :meth:`statistics`. ``ridge >= 0`` is checked first (``_RIDGE_FIX``: what the error suggests)."""

    _RIDGE_FIX = "use 0 (reference code)"

    def __init__(
        self,
        num_classes: int,
        dim: int,
        *,
        gamma: float,
        ridge: float = 0.0,
        solver: str = "solve64",
        chunk_rows: int = _CHUNK_ROWS,
    ) -> None:
        if not ridge >= 0:
            raise ConfigError(f"fedcof ridge must be >= 0, got {ridge}", self._RIDGE_FIX)
        self.num_classes, self.dim = num_classes, dim
        self.gamma, self.ridge, self.solver = float(gamma), float(ridge), solver
        self.dtype = solver_dtype(solver)
        self.chunk_rows = chunk_rows
        self.messages: list[ClassMeansMessage] = []

    def statistics(self) -> FedCOFStatistics:
        raise NotImplementedError

    def head(self) -> LinearHead:
        """Eq. 11 head from all statistics received so far."""
        st = self.statistics()
        return _solve_head(st.gram, st.class_sums, st.means_per_class, self.solver)


class FedCOFServer(_Eq11Server):
    """FedCOF server (fedcof Alg. 1): stores the received means, computes the head in one batched pass.

    ``common``: ``gamma``, ``ridge``, ``solver``, ``chunk_rows`` (:class:`_Eq11Server`); the rest are the
    estimator's options (:func:`fedcof_statistics`).
    """

    _RIDGE_FIX = "use 0 (reference code) or 0.01 (paper text)"

    def __init__(
        self,
        num_classes: int,
        dim: int,
        *,
        covariance: CovarianceKind = "full",
        single_client: SingleClient = "zero",
        seed: int = 0,
        **common: Any,
    ) -> None:
        super().__init__(num_classes, dim, **common)
        self.options = {"covariance": covariance, "single_client": single_client, "seed": seed}

    def add(self, message: ClassMeansMessage) -> None:
        """Store one client's means and counts (all of them are needed once the class means are known)."""
        if len(message.classes):
            self.messages.append(message)

    def statistics(self) -> FedCOFStatistics:
        """:func:`fedcof_statistics` of everything received so far."""
        return fedcof_statistics(
            self.messages,
            self.num_classes,
            self.dim,
            gamma=self.gamma,
            ridge=self.ridge,
            dtype=self.dtype,
            chunk_rows=self.chunk_rows,
            **self.options,
        )


class FedCOFOracleServer(_Eq11Server):
    """FedCOF oracle (fedcof App. G): pools exact client class covariances with Eq. 25, then Eq. 11.

    ``(N_c - 1) Sigma_c = sum_k (n_{k,c} - 1) S_{k,c} + sum_k n_{k,c} (mu_{k,c} - mu_c)(mu_{k,c} - mu_c)^T``
    (Eq. 25 multiplied by ``N_c - 1``); the first sum is folded in as messages arrive (one d x d
    accumulator, :attr:`within`), the second is the batched scatter of the client means. Implemented from
    the math: the released code's oracle is broken (papers-code.md 2.5).
    """

    @cached_property
    def within(self) -> np.ndarray:
        """``sum (n - 1) S_{k,c}`` over the messages received so far (d x d; zero before the first)."""
        return np.zeros((self.dim, self.dim), dtype=self.dtype)

    def add(self, message: ClassCovarianceMessage) -> None:
        """Fold ``sum (n - 1) S_{k,c}`` into the accumulator; keep the means and counts."""
        if len(message.classes) == 0:
            return
        w = (np.asarray(message.counts, np.float64) - 1.0).astype(self.dtype)
        covs = np.asarray(message.covariances, dtype=self.dtype)
        diag = np.diag_indices(self.dim)
        if message.kind == "full":
            self.within += np.tensordot(w, covs, axes=1)
        else:  # diagonal: (m, d) variances; spherical: (m,) mean variances, broadcast over the diagonal
            self.within[diag] += w @ covs
        self.messages.append(
            ClassMeansMessage(
                message.client, message.classes, message.means, message.counts.astype(np.float64)
            )
        )

    def statistics(self) -> FedCOFStatistics:
        """Pooled within-class scatter (Eq. 25 times ``N_c - 1``, summed over classes) and Eq. 11's ``G``."""
        n_c, k_c, sums, means, g_mean = _first_moments(
            self.messages, self.num_classes, self.dim, self.dtype, self.chunk_rows
        )
        scatter = self.within.copy()
        for rows in _chunks(self.messages, self.dtype, self.chunk_rows):
            _add_scatter(scatter, rows.means - means[rows.classes], rows.counts)
        gram = _finish_gram(scatter, n_c, k_c, g_mean, self.gamma, self.ridge)
        return FedCOFStatistics(n_c, k_c, sums, means, g_mean, scatter, gram)


# ------------------------------------------------------------------------------------------------
# registered fits


def _as_noise(noise: CountNoise | dict[str, Any] | None) -> CountNoise | None:
    if noise is None or isinstance(noise, CountNoise):
        return noise
    if isinstance(noise, dict):
        return CountNoise(**noise)
    raise ConfigError(
        f"fedcof noise must be a CountNoise or a dict, got {type(noise).__name__}", "see CountNoise"
    )


def plan_fedcof(
    num_classes: int,
    dim: int,
    *,
    gamma: float | None = None,
    model_name: str | None = None,
    ridge: float = 0.0,
    subsets: int = 1,
    covariance: CovarianceKind = "full",
    single_client: SingleClient = "zero",
    noise: CountNoise | dict[str, Any] | None = None,
    seed: int = 0,
    solver: str = "solve64",
) -> MethodPlan:
    """FedCOF server and client message (fedcof Alg. 1) for :func:`fit_fedcof` and joint runs.

    ``gamma`` explicit or from ``model_name`` (:func:`default_gamma`); ``seed`` drives the client-side
    randomness (subset split, count noise) and the path-B noisy copies. ``extra()`` reports
    ``means_per_class`` (K_c, cf. Fig. 8 middle) and ``total_means``.
    """
    gamma = _resolve_gamma(gamma, model_name)
    if int(subsets) < 1:
        raise ConfigError(f"fedcof subsets must be >= 1, got {subsets}", "use 1 (one mean per class) or more")
    noise_ = _as_noise(noise)
    dtype = solver_dtype(solver)
    server = FedCOFServer(
        num_classes,
        dim,
        gamma=gamma,
        ridge=ridge,
        covariance=covariance,
        single_client=single_client,
        solver=solver,
        seed=seed,
    )

    def message(k: int, x: np.ndarray, y: np.ndarray, m: ClientMoments | None) -> ClassMeansMessage:
        return class_means_message(k, x, y, dtype, subsets=int(subsets), noise=noise_, seed=seed, moments=m)

    def extra() -> dict[str, Any]:
        sent = [m.classes for m in server.messages]
        k_c = np.bincount(np.concatenate(sent) if sent else np.zeros(0, np.int64), minlength=num_classes)
        return {"gamma": gamma, "means_per_class": k_c, "total_means": int(k_c.sum())}

    return MethodPlan(server, dtype, message, needs_moments=int(subsets) == 1, extra=extra)


def plan_fedcof_oracle(
    num_classes: int,
    dim: int,
    *,
    gamma: float | None = None,
    model_name: str | None = None,
    ridge: float = 0.0,
    covariance: CovarianceKind = "full",
    solver: str = "solve64",
) -> MethodPlan:
    """FedCOF-oracle server and client message (fedcof App. G, Eq. 25 + Eq. 11) for :func:`fit_fedcof_oracle`;
    ``covariance`` is what clients send (Fig. 8 right)."""
    gamma = _resolve_gamma(gamma, model_name)
    if covariance not in COVARIANCE_KINDS:
        raise ConfigError(f"covariance {covariance!r} unknown", f"use one of: {', '.join(COVARIANCE_KINDS)}")
    dtype = solver_dtype(solver)
    server = FedCOFOracleServer(num_classes, dim, gamma=gamma, ridge=ridge, solver=solver)

    def message(k: int, x: np.ndarray, y: np.ndarray, _: ClientMoments | None) -> ClassCovarianceMessage:
        return class_covariance_message(k, x, y, dtype, covariance)

    return MethodPlan(server, dtype, message, needs_moments=False, extra=lambda: {"gamma": gamma})


fit_fedcof = register_plan(
    "fedcof",
    summary="FedCOF (fedcof Alg. 1): covariances estimated from client means",
    plan=plan_fedcof,
    no_reference="the covariances are estimated from client means (unbiased, not equal to the pooled ones); "
    "checked against the per-class Eq. 7, 8, 11 formula and by the estimator tests",
    suite_gamma=True,
)
fit_fedcof_oracle = register_plan(
    "fedcof_oracle",
    summary="FedCOF oracle (fedcof App. G): pooled exact class covariances",
    plan=plan_fedcof_oracle,
    reference=CentralisedReference(
        within_class_head, ({"gamma": 0.1}, {"gamma": 1.0}), needs_repeated_label=True
    ),
    suite_gamma=True,
)


#: The heads of :func:`fit_fedcof` and :func:`fit_fedcof_oracle` (same keyword options).
fedcof = head_of(fit_fedcof)
fedcof_oracle = head_of(fit_fedcof_oracle)
