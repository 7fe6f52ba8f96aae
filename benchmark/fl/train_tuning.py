"""Choosing a learning rate the paper tuned without printing it (legate2023 App. B grids), on a validation split.

Every grid point is one training run of the method on the training split minus a stratified validation share
(:func:`benchmark.data.subsets.validation_split`, seed 0), evaluated on that share with the protocol's own
selection rule (best-on-validation for best-on-test protocols), never on the test set
(:class:`benchmark.runners.fl_train.FLTuneJob`). :func:`choose_lr` takes the point with the highest selected
validation accuracy; ties go to the first point in grid order. The record keeps every point's accuracy, so the
choice can be audited, and may be committed to ``benchmark/fl/lr_grid/train/`` to skip re-tuning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.io import atomic_write_json
from benchmark.provenance import git_commit, machine


def choose_lr(
    points: Sequence[tuple[float, float, Path]], *, out: str | Path, what: Mapping[str, Any]
) -> dict[str, Any]:
    """Read each grid point's tidy CSV (``accuracy`` on validation) and write the choice JSON to ``out``."""
    from benchmark.tidy import read_tidy  # local: heavy import (pandas)

    grid: list[dict[str, Any]] = []
    for client_lr, server_lr, path in points:
        rows = read_tidy(path)
        acc = rows[rows["metric"] == "accuracy"]["value"]
        if acc.empty:
            raise ConfigError(f"{path}: no accuracy row", "delete it and re-run that grid point")
        value = float(acc.iloc[0])
        grid.append(
            {"client_lr": client_lr, "server_lr": server_lr, "val_accuracy": value, "file": str(path)}
        )
    finite = [g for g in grid if not math.isnan(g["val_accuracy"])]
    if not finite:
        raise ConfigError(f"every grid point of {dict(what)} diverged (NaN accuracy)", "widen the grid")
    best = max(finite, key=lambda g: g["val_accuracy"])  # ties: the first in grid order
    record = {
        **dict(what),
        "choice": {"client_lr": best["client_lr"], "server_lr": best["server_lr"]},
        "val_accuracy": best["val_accuracy"],
        "selection": "highest selected validation accuracy; ties: first in grid order",
        "grid": grid,
        "git_commit": git_commit(),
        "machine": machine(),
    }
    atomic_write_json(out, record, checksum=True)
    return record
