"""Centralised counterparts of the closed-form heads, written independently of the federated code path.

They see all training rows at once and use different numerics on purpose (per-class loops, ``lstsq`` on
the stacked ridge system, ``np.cov``), so that "federated == centralised" tests compare two derivations:

* :func:`ncm_head` - NCM: L2-normalised class means (what FedNCM must equal, legate2023 Sec. 3.2).
* :func:`ridge_head` - ridge regression on one-hot targets, ``min ||X W - Y||^2 + lam ||W||^2``
  (``bias=False``: fed3r_fedcof; ``bias=True``: official Fed3R with the ones column and its column
  normalisation).
* :func:`within_class_head` - fedcof Eq. 11 with the *true* class covariances:
  ``G = sum_c (N_c - 1)(S_c + gamma I) + N mu_g mu_g^T + ridge I`` (what the FedCOF oracle must equal; with
  ``gamma = 0`` this is the ridge Gram without the between-class scatter of Eq. 10).

Absent classes get zero rows (and zero bias), as in the federated heads.

``solver`` (ridge without bias, within-class): ``None`` keeps the independent float64 numerics above; a
named solver of :mod:`~benchmark.closed_form.heads` (e.g. ``"pinv32"``, the fedcof code's float32
pseudo-inverse, papers-code.md §6) builds the Gram in that precision and solves it with
:func:`~benchmark.closed_form.heads.solve_gram`, as the fedcof protocol does for Table 2.
"""

from __future__ import annotations

import numpy as np

from benchmark.closed_form.heads import LinearHead, solve_gram, solver_dtype
from benchmark.closed_form.registry import register_centralised
from benchmark.errors import ConfigError


def _rownorm(w: np.ndarray) -> np.ndarray:
    out = np.zeros_like(w)
    for c in range(w.shape[0]):
        norm = np.sqrt(np.sum(w[c] ** 2))
        if norm > 0:
            out[c] = w[c] / norm
    return out


def ncm_head(features: np.ndarray, labels: np.ndarray, num_classes: int) -> LinearHead:
    """Centralised NCM: ``W_c = mean(X_c) / ||mean(X_c)||``, bias 0 (float64)."""
    x = np.asarray(features, dtype=np.float64)
    means = np.zeros((num_classes, x.shape[1]))
    for c in range(num_classes):
        rows = x[labels == c]
        if len(rows):
            means[c] = rows.mean(axis=0)
    return LinearHead(_rownorm(means), np.zeros(num_classes))


def ridge_head(
    features: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    *,
    lam: float = 0.01,
    bias: bool = False,
    solver: str | None = None,
) -> LinearHead:
    """Centralised ridge regression, solved as least squares on ``[X; sqrt(lam) I] W = [Y; 0]`` (float64).

    ``bias=False``: ``W`` rows L2-normalised, no bias (Fed3R as in the fedcof repo). ``bias=True``: a ones
    column is appended and also penalised; each class's feature weights are divided by their norm and the
    bias by the same norm, zero norm -> 1e-6 (official Fed3R ``normalize_W``). ``solver`` (no bias only):
    ``(X^T X + lam I)^-1 X^T Y`` by :func:`solve_gram` in that solver's precision.
    """
    if solver is not None:
        if bias:
            raise ConfigError("ridge_head: solver is only for bias=False", "drop solver or bias")
        dt = solver_dtype(solver)
        xs = np.asarray(features, dtype=dt)
        y1 = np.zeros((xs.shape[0], num_classes), dtype=dt)
        y1[np.arange(xs.shape[0]), labels] = 1.0
        gram = xs.T @ xs + dt.type(lam) * np.eye(xs.shape[1], dtype=dt)
        return LinearHead(_rownorm(solve_gram(gram, xs.T @ y1, solver).T), np.zeros(num_classes, dtype=dt))
    x = np.asarray(features, dtype=np.float64)
    if bias:
        x = np.hstack([x, np.ones((x.shape[0], 1))])
    p = x.shape[1]
    y = np.zeros((x.shape[0], num_classes))
    y[np.arange(x.shape[0]), labels] = 1.0
    stacked_x = np.vstack([x, np.sqrt(lam) * np.eye(p)])
    stacked_y = np.vstack([y, np.zeros((p, num_classes))])
    w, *_ = np.linalg.lstsq(stacked_x, stacked_y, rcond=None)  # (p, C)
    if not bias:
        return LinearHead(_rownorm(w.T), np.zeros(num_classes))
    feat, b = w[:-1].T, w[-1]
    norms = np.sqrt(np.sum(feat**2, axis=1))
    norms = np.where(norms == 0.0, 1e-6, norms)
    return LinearHead(feat / norms[:, None], b / norms)


def within_class_head(
    features: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    *,
    gamma: float,
    ridge: float = 0.0,
    solver: str | None = None,
) -> LinearHead:
    """fedcof Eq. 11 with the true class covariances ``S_c`` (``np.cov``, ddof=1), float64 ``solve``
    (``solver``: built in that solver's precision and solved by :func:`solve_gram`)."""
    dt = np.dtype(np.float64) if solver is None else solver_dtype(solver)
    x = np.asarray(features, dtype=dt)
    d = x.shape[1]
    gram = dt.type(ridge) * np.eye(d, dtype=dt)
    sums = np.zeros((num_classes, d), dtype=dt)
    total = 0
    for c in range(num_classes):
        rows = x[labels == c]
        n = len(rows)
        if n == 0:
            continue
        sums[c] = rows.sum(axis=0)
        total += n
        cov = np.cov(rows, rowvar=False, ddof=1).reshape(d, d).astype(dt) if n > 1 else np.zeros((d, d), dt)
        gram += dt.type(n - 1) * (cov + dt.type(gamma) * np.eye(d, dtype=dt))
    if total == 0:
        return LinearHead(np.zeros((num_classes, d)), np.zeros(num_classes))
    mu_g = sums.sum(axis=0) / dt.type(total)
    gram += dt.type(total) * np.outer(mu_g, mu_g)
    w = np.linalg.solve(gram, sums.T).T if solver is None else solve_gram(gram, sums.T, solver).T
    return LinearHead(_rownorm(w), np.zeros(num_classes))


fit_centralised_ncm = register_centralised(
    "centralised_ncm", summary="NCM on all client data (reference for FedNCM)", head=ncm_head
)
#: Options ``lam``, ``bias`` (``True``: official Fed3R's form) and ``solver``, as :func:`ridge_head`.
fit_centralised_ridge = register_centralised(
    "centralised_ridge",
    summary="ridge on all client data, no bias (reference for fed3r_fedcof)",
    head=ridge_head,
)
fit_centralised_within_class = register_centralised(
    "centralised_within_class",
    summary="Eq. 11 head with true class covariances (oracle reference)",
    head=within_class_head,
    suite_gamma=True,
)
