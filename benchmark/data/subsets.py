"""Seeded, stratified subsets of a split (the smoke target and small CI configurations)."""

from __future__ import annotations

import numpy as np

from benchmark.errors import ConfigError
from benchmark.seeding import numpy_rng


def stratified_indices(labels: np.ndarray, per_class: int, seed: int = 0) -> np.ndarray:
    """``per_class`` indices of every class, drawn without replacement, returned sorted (dataset order)."""
    if per_class < 1:
        raise ConfigError(
            f"per_class must be >= 1, got {per_class}", "set a positive number of samples per class"
        )
    rng = numpy_rng(seed, "subset")
    picks = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        if len(idx) < per_class:
            raise ConfigError(
                f"class {c} has only {len(idx)} samples, {per_class} requested", "lower the per-class count"
            )
        picks.append(rng.choice(idx, size=per_class, replace=False))
    return np.sort(np.concatenate(picks))


def parse_subset(spec: str) -> tuple[str, int]:
    """``"all"`` or ``"stratified<N>"`` -> (kind, N)."""
    if spec == "all":
        return "all", 0
    n = spec[len("stratified") :]
    if spec.startswith("stratified") and n.isdigit() and n[0] != "0":
        return "stratified", int(n)
    raise ConfigError(
        f"unknown subset {spec!r}", "use 'all' or 'stratified<N>' (N >= 1 samples per class, no leading zero)"
    )
