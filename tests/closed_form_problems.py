"""Random closed-form problems shared by tests/test_closed_form.py and tests/contracts/test_closed_form_contract.py:
one generator and one hypothesis strategy, so that the two suites draw the same problems (issue 25: one helper,
not two copies)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: Absolute tolerance of a federated head against its centralised reference (float32 features).
TOL = 1e-6

#: (seed, N, d, C, K) of :func:`make_problem`.
problems = st.tuples(
    st.integers(0, 2**31 - 1),  # seed
    st.integers(2, 40),  # N
    st.integers(1, 6),  # d
    st.integers(1, 5),  # C
    st.integers(1, 8),  # K
)
hyp = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_problem(seed: int, n: int, d: int, c: int, k: int, *, shift: float = 1.0):
    """Gaussian classes, a random partition into k clients (some may be empty) in random client order."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n).astype(np.int64)
    centres = rng.normal(0.0, shift, (c, d))
    features = (centres[labels] + rng.normal(0.0, 1.0, (n, d))).astype(np.float32)
    owner = rng.integers(0, k, n)
    clients = [rng.permutation(np.flatnonzero(owner == j)) for j in rng.permutation(k)]
    return features, labels, clients
