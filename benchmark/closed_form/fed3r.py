"""Fed3R: federated ridge regression from client Gram matrices, in its two reference forms.

* ``fed3r_fedcof`` - the fedcof repo's re-implementation (papers-code.md 2.4; used in fedcof's tables):
  clients send ``G_k = F_k^T F_k`` and class sums ``B_k``; no bias;
  ``W = rownorm(((sum_k G_k + lam I)^{-1} B)^T)`` with ``lam = 0.01``. The reference inverts with float32
  ``pinv`` (``solver="pinv32"``).
* ``fed3r_official`` - Erosinho13/Fed3R (papers-code.md 3): features get a bias column of ones,
  ``A = lam I_{d+1} + sum x~ x~^T`` (the ridge also penalises the bias), ``b = sum x~ onehot(y)^T``,
  ``W~ = A^{-1} b``; then each class column's ``d`` feature weights are divided by their L2 norm and the
  bias by the same norm (a zero norm becomes 1e-6). The reference solves in float32
  (``solver="solve32"``).

Both are exact: for any partition they equal the centralised ridge solution on the union of the data
(up to the solver's rounding). A class with no sample gets a zero weight row and zero bias.
"""

from __future__ import annotations

import numpy as np

from benchmark.closed_form.centralised import ridge_head
from benchmark.closed_form.heads import LinearHead, row_normalise, solve_gram, solver_dtype
from benchmark.closed_form.registry import CentralisedReference, head_of, register_plan
from benchmark.closed_form.stats import (
    AugmentedGramMessage,
    GramMessage,
    MethodPlan,
    augmented_gram_message,
    gram_message,
)
from benchmark.errors import ConfigError

#: ``normalize_W`` in the official Fed3R code replaces a zero class-column norm by this value.
OFFICIAL_ZERO_NORM = 1e-6


def _check_lam(lam: float) -> float:
    if not lam >= 0:
        raise ConfigError(f"fed3r lam must be >= 0, got {lam}", "the papers use lam = 0.01")
    return float(lam)


class Fed3RServer:
    """fedcof-repo Fed3R server: ``G = sum_k G_k``, ``B = sum_k B_k``; head ``rownorm((G + lam I)^-1 B)``."""

    def __init__(self, num_classes: int, dim: int, *, lam: float = 0.01, solver: str = "solve64") -> None:
        self.lam = _check_lam(lam)
        self.solver = solver
        dtype = solver_dtype(solver)
        self.gram = np.zeros((dim, dim), dtype=dtype)
        self.class_sums = np.zeros((num_classes, dim), dtype=dtype)

    def add(self, message: GramMessage) -> None:
        """Fold in ``G_k`` and the class sums of one client."""
        self.gram += message.gram
        self.class_sums[message.classes] += message.sums

    def head(self) -> LinearHead:
        """Ridge solution, rows L2-normalised, no bias (fedcof repo ``Fed3RServer``)."""
        a = self.gram + self.lam * np.eye(self.gram.shape[0], dtype=self.gram.dtype)
        w = solve_gram(a, self.class_sums.T, self.solver).T
        return LinearHead(row_normalise(w), np.zeros(w.shape[0], dtype=w.dtype))


class Fed3ROfficialServer:
    """Official Fed3R server: ``A = lam I_{d+1} + sum_k A_k``, ``b = sum_k b_k``, ``W~ = A^{-1} b``."""

    def __init__(self, num_classes: int, dim: int, *, lam: float = 0.01, solver: str = "solve64") -> None:
        self.lam = _check_lam(lam)
        self.solver = solver
        dtype = solver_dtype(solver)
        self.a = self.lam * np.eye(dim + 1, dtype=dtype)
        self.b = np.zeros((dim + 1, num_classes), dtype=dtype)

    def add(self, message: AugmentedGramMessage) -> None:
        """Fold in one client's ``A_k`` and ``b_k``."""
        self.a += message.a
        self.b += message.b

    def head(self) -> LinearHead:
        """``W~ = A^{-1} b``; feature columns and bias divided by the feature column norms (normalize_W)."""
        w = solve_gram(self.a, self.b, self.solver)
        weights, bias = w[:-1], w[-1]
        norms = np.linalg.norm(weights, axis=0)
        norms[norms == 0.0] = OFFICIAL_ZERO_NORM
        return LinearHead((weights / norms).T, bias / norms)


def plan_fed3r_fedcof(
    num_classes: int, dim: int, *, lam: float = 0.01, solver: str = "solve64"
) -> MethodPlan:
    """fedcof-repo Fed3R server and client message (``G_k``, class sums; papers-code.md 2.4, the "Fed3R"
    rows of fedcof Table 3)."""
    dtype = solver_dtype(solver)
    server = Fed3RServer(num_classes, dim, lam=lam, solver=solver)
    return MethodPlan(server, dtype, lambda k, x, y, m: gram_message(k, x, y, dtype, m), needs_gram=True)


def plan_fed3r_official(
    num_classes: int, dim: int, *, lam: float = 0.01, solver: str = "solve64"
) -> MethodPlan:
    """Official Fed3R server and client message (``A_k``, dense ``b_k``; Erosinho13/Fed3R ``src/fed3r.py``,
    papers-code.md 3)."""
    dtype = solver_dtype(solver)
    server = Fed3ROfficialServer(num_classes, dim, lam=lam, solver=solver)
    return MethodPlan(
        server,
        dtype,
        lambda k, x, y, m: augmented_gram_message(k, x, y, num_classes, dtype, m),
        needs_gram=True,
    )


fit_fed3r_fedcof = register_plan(
    "fed3r_fedcof",
    summary="Fed3R as in the fedcof repo: no bias, rownorm((G + lam I)^-1 B)",
    plan=plan_fed3r_fedcof,
    reference=CentralisedReference(ridge_head, ({"lam": 0.01}, {"lam": 1.0})),
)
fit_fed3r_official = register_plan(
    "fed3r_official",
    summary="official Fed3R: bias column, lam I_{d+1} ridge, column-normalised",
    plan=plan_fed3r_official,
    reference=CentralisedReference(
        lambda x, y, c, lam=0.01: ridge_head(x, y, c, lam=lam, bias=True), ({"lam": 0.01}, {"lam": 1.0})
    ),
)


#: The heads of :func:`fit_fed3r_fedcof` and :func:`fit_fed3r_official` (options ``lam``, ``solver``).
fed3r_fedcof = head_of(fit_fed3r_fedcof)
fed3r_official = head_of(fit_fed3r_official)
