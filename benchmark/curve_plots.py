"""Drawing accuracy curves of several methods overlaid: vs rounds, vs communication, vs compute (legate2023
Fig. 1; fedcof Fig. 3-4, 7), from run results or curve CSVs (:mod:`benchmark.curves`).

Uses matplotlib's object API with the Agg canvas directly (no pyplot, no global backend switch), so it is
safe in headless workers and tests. Only evaluated rounds are plotted. Round 0 (the starting model) is
included, so a two-stage curve starts at its stage-1 accuracy and cost. A closed-form initialisation stage
(``stage == "init"`` rows, fedcof Fig. 4) is drawn dotted and the start of training is marked with a star,
as in fedcof Fig. 4. Several runs (seeds) under one label are averaged at each evaluated round, with the
min-max band shaded. ``flb plot`` (:mod:`benchmark.apps.plots`) is the command line of this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmark.curves import AXES, AXIS_LABELS, INIT_STAGE, Axis, CurveLike, mean_curve
from benchmark.errors import ConfigError
from benchmark.io import atomic_path


def draw_curves(
    results: Mapping[str, CurveLike | Sequence[CurveLike]],
    *,
    axes: Sequence[Axis] = ("round", "communication", "compute"),
    title: str | None = None,
    log_cost: bool = True,
) -> Figure:
    """One figure (Agg canvas) with a panel per axis in ``axes``, every label of ``results`` overlaid.

    ``results`` maps a label to one run or a list of runs (seeds: mean line, min-max band). A run is a
    :class:`RunResult`, a curve frame or a curve CSV path. Cost axes are log-scaled when ``log_cost`` (costs
    span orders of magnitude between LP and FT); zero-cost points (round 0) are then dropped from those
    panels. :func:`benchmark.curves.curves_data` gives the plotted values as a tidy frame.
    """
    if not results:
        raise ConfigError("plot_curves got no results", "pass at least one label -> run")
    for x in axes:
        if x not in AXES:
            raise ConfigError(f"unknown x axis {x!r}", f"use one of: {', '.join(AXES)}")
    fig = Figure(figsize=(5.0 * len(axes), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    colours = [f"C{i}" for i in range(10)]
    for j, x in enumerate(axes):
        ax = fig.add_subplot(1, len(axes), j + 1)
        logx = x in ("communication", "compute") and log_cost
        for i, (label, runs) in enumerate(results.items()):
            runs_list = list(runs) if isinstance(runs, list | tuple) else [runs]
            colour = colours[i % len(colours)]
            stages = mean_curve(runs_list, x)
            first = True
            for stage, (xs, mean, lo, hi) in stages.items():
                keep = xs > 0 if logx else np.ones_like(xs, dtype=bool)
                xs, mean, lo, hi = xs[keep], mean[keep], lo[keep], hi[keep]
                if xs.size == 0:
                    continue
                style = ":" if stage == INIT_STAGE else "-"
                ax.plot(
                    xs, mean, style, color=colour, label=label if first else None,
                    marker="." if len(xs) < 30 else None,
                )  # fmt: skip
                if len(runs_list) > 1:
                    ax.fill_between(xs, lo, hi, color=colour, alpha=0.2, linewidth=0)
                if stage != INIT_STAGE and INIT_STAGE in stages:
                    ax.plot(xs[:1], mean[:1], "*", color=colour, markersize=11)
                first = False
        if logx:
            ax.set_xscale("log")
        ax.set_xlabel(AXIS_LABELS[x])
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, alpha=0.3)
        if j == 0:
            ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def plot_curves(
    results: Mapping[str, CurveLike | Sequence[CurveLike]],
    path: str | Path,
    *,
    axes: Sequence[Axis] = ("round", "communication", "compute"),
    title: str | None = None,
    log_cost: bool = True,
) -> Path:
    """Save :func:`draw_curves` of ``results`` as one PNG at ``path`` (atomically); returns the path."""
    fig = draw_curves(results, axes=axes, title=title, log_cost=log_cost)
    dest = Path(path)
    with atomic_path(dest, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    return dest
