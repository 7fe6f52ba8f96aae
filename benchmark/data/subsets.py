"""Seeded, stratified subsets of a split (the smoke target and small CI configurations), and the stratified
validation share that learning-rate tuning holds out of a training split."""

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


def validation_split(labels: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train_rows, val_rows)``: ``floor(fraction * n_c)`` samples of every class c go to validation (drawn
    from the ``validation`` stream of ``seed``), both sorted."""
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"val_fraction must be in (0, 1), got {fraction}", "e.g. 0.1")
    labels = np.asarray(labels)
    rng = numpy_rng(seed, "validation")
    val = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        val.append(rng.choice(idx, size=int(np.floor(fraction * idx.size)), replace=False))
    val_rows = np.sort(np.concatenate(val))
    mask = np.ones(labels.size, dtype=bool)
    mask[val_rows] = False
    return np.flatnonzero(mask), val_rows
