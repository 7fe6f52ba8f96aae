"""Accuracy curves of several methods overlaid: vs rounds, vs communication, vs compute (legate2023 Fig. 1).

Uses matplotlib's object API with the Agg canvas directly (no pyplot, no global backend switch), so it is
safe in headless workers and tests. Only evaluated rounds are plotted; round 0 (the initial model, e.g. the
FedNCM head of FedNCM+FT) is included, so a two-stage curve starts at its stage-1 accuracy and, when stage-1
costs were passed, at its stage-1 cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmark.errors import ConfigError
from benchmark.fl.engine import RunResult
from benchmark.io import atomic_path

Axis = Literal["round", "communication", "compute"]
_LABELS = {
    "round": "communication rounds",
    "communication": "total communication (GB, up + down, 10^9 bytes)",
    "compute": "client compute (F = one forward pass of one sample)",
}


def curve(result: RunResult, x: Axis) -> tuple[list[float], list[float]]:
    """``(xs, accuracy %)`` of the evaluated rows of ``result`` against axis ``x``."""
    xs: list[float] = []
    ys: list[float] = []
    for r in result.history:
        if math.isnan(r.test_acc):
            continue
        if x == "round":
            xs.append(float(r.round))
        elif x == "communication":
            xs.append((r.uplink_bytes + r.downlink_bytes) / 1e9)
        elif x == "compute":
            xs.append(float(r.compute_f))
        else:
            raise ConfigError(f"unknown x axis {x!r}", "use round, communication or compute")
        ys.append(100.0 * r.test_acc)
    return xs, ys


def plot_curves(
    results: Mapping[str, RunResult],
    path: str | Path,
    *,
    axes: Sequence[Axis] = ("round", "communication", "compute"),
    title: str | None = None,
    log_cost: bool = True,
) -> Path:
    """Save one PNG with a panel per axis in ``axes``, every method of ``results`` (label -> result)
    overlaid. Cost axes are log-scaled when ``log_cost`` (costs span orders of magnitude between LP and FT);
    zero-cost points (round 0) are then dropped from those panels. Returns the written path."""
    if not results:
        raise ConfigError("plot_curves got no results", "pass at least one label -> RunResult")
    fig = Figure(figsize=(5.0 * len(axes), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    for j, x in enumerate(axes):
        ax = fig.add_subplot(1, len(axes), j + 1)
        for label, res in results.items():
            xs, ys = curve(res, x)
            if x != "round" and log_cost:
                pts = [(a, b) for a, b in zip(xs, ys, strict=True) if a > 0]
                xs, ys = [a for a, _ in pts], [b for _, b in pts]
            ax.plot(xs, ys, label=label, marker="." if len(xs) < 30 else None)
        if x != "round" and log_cost:
            ax.set_xscale("log")
        ax.set_xlabel(_LABELS[x])
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, alpha=0.3)
        if j == 0:
            ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    dest = Path(path)
    with atomic_path(dest, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    return dest
