"""Linear heads and the numerical kernels every closed-form server shares.

A closed-form method ends in a :class:`LinearHead` ``logits = X W^T + b`` (``W``: C x d, ``b``: C). The
server-side linear algebra is part of the protocol (papers-code.md section 6), so the solver is a named
option, never an implicit choice:

=========  =========================================================================================
solver     behaviour
=========  =========================================================================================
solve64    float64 throughout; the Gram matrix is checked symmetric positive definite (Cholesky) and
           ``G^{-1} B`` is solved exactly. Default of this package (exact, reproducible across BLAS).
pinv32     float32 throughout and ``pinv(G) @ B`` with ``torch.linalg.pinv``'s default cut-off
           (singular values below ``max(m, n) * eps_float32 * sigma_max`` are dropped). This is the
           fedcof reference code (``federate_classes.py``, ``Init_FT_LP``) and the protocol of the fedcof
           paper's tables. On an unshrunk Gram the cut-off acts as an extra, data-dependent regulariser.
solve32    float32 LU solve: the official Fed3R code (``torch.linalg.solve`` on float32 ``A``).
pinv64     float64 pseudo-inverse with the same relative cut-off rule (eps of float64); useful when the
           Gram is rank deficient (e.g. FedCOF with ``gamma = 0`` and ``d > N``).
=========  =========================================================================================

The precision also applies to the client statistics (clients compute in the solver's dtype, as the
reference code computes float32 tensors) and to the head, which is evaluated in its own dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.linalg

from benchmark.errors import ConfigError

Solver = Literal["solve64", "pinv32", "solve32", "pinv64"]
SOLVERS: tuple[str, ...] = ("solve64", "pinv32", "solve32", "pinv64")

#: torch.nn.functional.normalize's default ``eps``: rows with a smaller norm are divided by it (so a zero
#: row stays zero), exactly what the reference code does for absent classes.
NORMALISE_EPS = 1e-12

_EVAL_CHUNK = 8192


def check_solver(solver: str) -> str:
    """Validate a solver name (see the module table); unknown names raise :class:`ConfigError`."""
    if solver not in SOLVERS:
        raise ConfigError(f"unknown solver {solver!r}", f"use one of: {', '.join(SOLVERS)}")
    return solver


def solver_dtype(solver: str) -> np.dtype:
    """The floating dtype clients and server use under ``solver`` (float32 for the reference solvers)."""
    return np.dtype(np.float32) if check_solver(solver).endswith("32") else np.dtype(np.float64)


@dataclass(frozen=True, eq=False)
class LinearHead:
    """A linear classifier ``logits = X @ W.T + b``; ``W`` is (C, d), ``b`` is (C,)."""

    W: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        if self.W.ndim != 2 or self.b.shape != (self.W.shape[0],):
            raise ValueError(f"LinearHead: W {self.W.shape} and b {self.b.shape} do not match")

    @property
    def num_classes(self) -> int:
        return int(self.W.shape[0])

    @property
    def dim(self) -> int:
        return int(self.W.shape[1])

    def logits(self, features: np.ndarray) -> np.ndarray:
        """``features @ W.T + b`` in the head's dtype (float32 heads evaluate like the torch reference)."""
        x = np.asarray(features, dtype=self.W.dtype)
        return x @ self.W.T + self.b

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Top-1 class per row (``argmax``; ties go to the lowest class index, as ``torch.max``).

        Non-finite logits are refused (:class:`ConfigError`): ``argmax`` of NaN is class 0, which would be
        scored as a plausible accuracy.
        """
        out = np.empty(len(features), dtype=np.int64)
        for start in range(0, len(features), _EVAL_CHUNK):
            logits = self.logits(features[start : start + _EVAL_CHUNK])
            if not np.all(np.isfinite(logits)):
                what = "the features" if not np.all(np.isfinite(features)) else "the head's weights"
                raise ConfigError(
                    f"the head's logits hold NaN/inf (from {what}); refusing to score them",
                    "re-extract non-finite features; a non-finite head means its fit failed (check the "
                    "solver and its shrinkage)",
                )
            out[start : start + _EVAL_CHUNK] = logits.argmax(1)
        return out


def evaluate(head: LinearHead, features: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy of ``head`` on ``(features, labels)``, in percent (0-100)."""
    labels = np.asarray(labels)
    if len(labels) == 0:
        raise ConfigError("evaluate: the test set is empty", "pass at least one test sample")
    if features.shape[0] != len(labels) or features.shape[1] != head.dim:
        raise ConfigError(
            f"evaluate: features {features.shape} do not match labels ({len(labels)},) / head dim {head.dim}",
            "pass test features of the head's dimension, one label per row",
        )
    if not np.all(np.isfinite(features)):
        raise ConfigError(
            f"evaluate: the test features hold {int((~np.isfinite(features)).sum())} NaN/inf value(s); "
            "refusing to score them (argmax of NaN is class 0)",
            "re-extract the test features (flb extract refuses non-finite features)",
        )
    return float(100.0 * np.mean(head.predict(features) == labels))


def row_normalise(W: np.ndarray) -> np.ndarray:
    """Divide each row by ``max(||row||_2, 1e-12)`` (``torch.nn.functional.normalize``, dim=1)."""
    norms = np.linalg.norm(W, axis=1, keepdims=True)
    return W / np.maximum(norms, W.dtype.type(NORMALISE_EPS))


def _pinv(G: np.ndarray) -> np.ndarray:
    """Pseudo-inverse by SVD with torch.linalg.pinv's default tolerance ``max(m, n) * eps * sigma_1``.

    The SVD is LAPACK's divide-and-conquer ``gesdd`` (SciPy's build: the same algorithm as ``numpy.linalg.svd``,
    about twice as fast here at d = 1280). It stays an SVD even for a symmetric ``G``: on an unshrunk Gram the
    cut-off drops most directions (974 of 1280 for Fed3R on CIFAR-100 MobileNetV2 features), so which ones
    survive depends on the decomposition's float32 round-off. The SVD route lands within 0.01 points of
    ``torch.linalg.pinv`` (the reference code) there, an eigendecomposition (``hermitian=True``) 0.05 away.
    """
    u, s, vt = scipy.linalg.svd(G, full_matrices=False, lapack_driver="gesdd", check_finite=False)
    cutoff = max(G.shape) * np.finfo(G.dtype).eps * (s[0] if s.size else 0.0)
    keep = s > cutoff
    s_inv = np.zeros_like(s)
    s_inv[keep] = 1.0 / s[keep]
    return (vt.T * s_inv) @ u.T


def solve_gram(G: np.ndarray, B: np.ndarray, solver: str) -> np.ndarray:
    """``G^{-1} B`` for a symmetric (d, d) Gram ``G`` and a (d, C) right-hand side, by ``solver``.

    ``solve64`` refuses a Gram that is not numerically positive definite (Cholesky fails, or its pivots
    bound the condition number above ``1 / (d * eps)``) with a :class:`ConfigError` naming the fix
    (positive shrinkage / ridge, or a pseudo-inverse solver), rather than returning a meaningless solution.
    """
    check_solver(solver)
    dtype = solver_dtype(solver)
    G = np.asarray(G, dtype=dtype)
    B = np.asarray(B, dtype=dtype)
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(B))):
        raise ConfigError(
            "solve_gram: the Gram matrix or the class sums contain NaN/inf", "check the features"
        )
    if solver.startswith("pinv"):
        return _pinv(G) @ B
    if solver == "solve32":
        try:
            return np.linalg.solve(G, B)
        except np.linalg.LinAlgError:
            raise ConfigError(
                "solve_gram(solve32): the Gram matrix is singular", "use a ridge lam > 0 or solver='pinv32'"
            ) from None
    fix = "use gamma/lam/ridge > 0, or solver='pinv64' (or the reference 'pinv32')"
    try:
        chol = np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        raise ConfigError("solve_gram(solve64): the Gram matrix is not positive definite", fix) from None
    piv = np.abs(np.diag(chol))
    if piv.size and (piv.min() / piv.max()) ** 2 < G.shape[0] * np.finfo(dtype).eps:
        raise ConfigError("solve_gram(solve64): the Gram matrix is numerically singular", fix)
    try:
        return np.linalg.solve(G, B)
    except np.linalg.LinAlgError:  # passed the pivot test by a hair, but LU hits an exact zero pivot
        raise ConfigError("solve_gram(solve64): the Gram matrix is numerically singular", fix) from None
