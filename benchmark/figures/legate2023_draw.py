"""Drawing of legate2023's figures from tidy inputs (no file reading here): sweeps (Figs. 3, 4, 6), accuracy
curves vs rounds / communication / compute (Figs. 1, 7) and learning-rate grids (Fig. 5).

matplotlib's object API on the Agg canvas (as :mod:`benchmark.curve_plots`). Every plot puts the paper's
printed value beside ours: a hollow diamond (sweeps) or a dotted horizontal line (curves), labelled with its
source line. A series drawn here is one colour in every figure (:data:`COLOURS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmark.figures.registry import Reading

#: One colour per paper method, the same in every legate2023 figure.
COLOURS: dict[str, str] = {"FedNCM": "C0", "LP": "C1", "FT": "C2", "FedNCM+FT": "C3", "Random": "C7"}


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _caption(fig: Figure, lines: Sequence[str]) -> None:
    """Small print under the plot (series not run, departures): shown on the figure itself."""
    if lines:
        share = min(0.5, (0.13 * len(lines) + 0.08) / fig.get_figheight())
        fig.get_layout_engine().set(rect=(0, share, 1, 1 - share))
        fig.text(0.01, share - 0.01, "\n".join(lines), fontsize=7, va="top", ha="left")


def draw_sweep(
    data: pd.DataFrame,
    *,
    xs: Sequence[Any],
    xlabel: str,
    title: str,
    readings: Sequence[Reading] = (),
    caption: Sequence[str] = (),
) -> Figure:
    """Accuracy of each series against a swept setting (categorical x in the order ``xs``), mean over seeds
    with the min-max range as error bar; the paper's readings as hollow diamonds at their x."""
    fig = _figure(6.4, 4.4 + 0.14 * len(caption))
    ax = fig.add_subplot(1, 1, 1)
    pos = {x: i for i, x in enumerate(xs)}
    for series, grp in data.groupby("series", sort=False):
        grp = grp.assign(p=grp["x"].map(pos)).sort_values("p")
        colour = COLOURS.get(str(series), "k")
        lo, hi = int(grp["n_seeds"].min()), int(grp["n_seeds"].max())
        seeds = f"{lo} seed{'s' if lo != 1 else ''}" if lo == hi else f"{lo}-{hi} seeds"
        yerr = np.vstack([grp["y"] - grp["y_lo"], grp["y_hi"] - grp["y"]])
        ax.errorbar(grp["p"], grp["y"], yerr=yerr, color=colour, marker="o", capsize=3,
                    label=f"{series} (ours, {seeds})")  # fmt: skip
    seen: set[str] = set()
    for r in readings:
        if r.x not in pos:
            continue
        colour = COLOURS.get(r.series, "k")
        label = f"{r.series} (paper, {r.source})" if r.series not in seen else None
        seen.add(r.series)
        ax.plot([pos[r.x]], [r.paper], marker="D", markersize=9, markerfacecolor="none", markeredgecolor=colour,
                markeredgewidth=1.6, linestyle="none", label=label)  # fmt: skip
    ax.set_xticks(range(len(xs)), [f"{x:g}" if isinstance(x, float | int) else str(x) for x in xs])
    ax.set_xlim(-0.4, len(xs) - 0.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy (%)")
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    _caption(fig, caption)
    return fig


#: x axes of the curve figures (as legate2023 Fig. 1: rounds, communication, compute).
CURVE_AXES = ("round", "communication", "compute")
_AXIS_LABELS = {
    "round": "communication rounds",
    "communication": "total communication (GB, up + down)",
    "compute": "client compute (F, forward passes of one sample)",
}


def curve_points(curves: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """Tidy mean curves (``series, axis, stage, x, y, y_lo, y_hi, n_seeds``) of each series' runs (seeds),
    per x axis, from :func:`benchmark.curves.mean_curve`."""
    from benchmark.curves import mean_curve  # local: heavy import (torch)

    rows = []
    for series, runs in curves.items():
        for axis in CURVE_AXES:
            for stage, (xs, mean, lo, hi) in mean_curve(list(runs), axis).items():  # type: ignore[arg-type]
                for x, y, a, b in zip(xs, mean, lo, hi, strict=True):
                    rows.append({"series": series, "axis": axis, "stage": stage, "x": float(x), "y": float(y),
                                 "y_lo": float(a), "y_hi": float(b), "n_seeds": len(runs)})  # fmt: skip
    return pd.DataFrame(rows, columns=["series", "axis", "stage", "x", "y", "y_lo", "y_hi", "n_seeds"])


def draw_curves(
    points: pd.DataFrame,
    *,
    title: str,
    singles: pd.DataFrame | None = None,
    readings: Sequence[Reading] = (),
    max_round: float | None = None,
    caption: Sequence[str] = (),
) -> Figure:
    """Three panels (accuracy vs rounds, communication, compute) of the mean curves in ``points``
    (:func:`curve_points`), min-max band over seeds; ``singles`` (``series, axis, x, y``) are one-shot methods
    drawn as a star (FedNCM: one round); ``readings`` are the paper's final accuracies, dotted lines.
    Cost axes are logarithmic (zero-cost points are dropped there); ``max_round`` truncates every panel at
    that round's cost, as the paper's Fig. 1 truncates Random (Fig. 7 shows it whole)."""
    fig = _figure(15.0, 4.6 + 0.14 * len(caption))
    axes = [fig.add_subplot(1, 3, j + 1) for j in range(3)]
    for ax, axis in zip(axes, CURVE_AXES, strict=True):
        log = axis != "round"
        sub = points[points["axis"] == axis]
        for series, grp in sub.groupby("series", sort=False):
            colour = COLOURS.get(str(series), "k")
            first = True
            for stage, s in grp.groupby("stage", sort=False):
                if max_round is not None:
                    rounds = points[(points["series"] == series) & (points["axis"] == "round")
                                    & (points["stage"] == stage)]["x"].to_numpy()  # fmt: skip
                    s = s.iloc[: int(np.searchsorted(rounds, max_round, side="right"))]
                if log:
                    s = s[s["x"] > 0]
                if s.empty:
                    continue
                style = ":" if stage == "init" else "-"
                n = int(s["n_seeds"].max())
                ax.plot(
                    s["x"],
                    s["y"],
                    style,
                    color=colour,
                    label=f"{series} (ours, {n} seeds)" if first else None,
                )
                if n > 1:
                    ax.fill_between(s["x"], s["y_lo"], s["y_hi"], color=colour, alpha=0.2, linewidth=0)
                first = False
        if singles is not None and not singles.empty:
            for _, r in singles[singles["axis"] == axis].iterrows():
                if log and r["x"] <= 0:
                    continue
                ax.plot([r["x"]], [r["y"]], "*", markersize=13, color=COLOURS.get(r["series"], "k"),
                        label=f"{r['series']} (ours, one round)")  # fmt: skip
        for r in readings:
            ax.axhline(r.paper, color=COLOURS.get(r.series, "k"), linestyle=(0, (1, 2)), linewidth=1.2,
                       label=f"{r.series} final, paper ({r.source})")  # fmt: skip
        if log:
            ax.set_xscale("log")
        ax.set_xlabel(_AXIS_LABELS[axis])
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=11)
    _caption(fig, caption)
    return fig


def draw_grids(grids: Mapping[str, pd.DataFrame], *, title: str, caption: Sequence[str] = ()) -> Figure:
    """One heat map per panel title of ``grids`` (frames ``client_lr, server_lr, y``): accuracy over the
    (server lr x client lr) grid, each cell annotated; one colour scale for all panels."""
    fig = _figure(5.2 * max(1, len(grids)), 4.4 + 0.14 * len(caption))
    values = pd.concat(list(grids.values()))["y"] if grids else pd.Series(dtype=float)
    vmin, vmax = (float(values.min()), float(values.max())) if len(values.dropna()) else (0.0, 100.0)
    im = None
    axes = []
    for j, (name, g) in enumerate(grids.items()):
        ax = fig.add_subplot(1, len(grids), j + 1)
        axes.append(ax)
        cs = sorted(g["client_lr"].unique())
        ss = sorted(g["server_lr"].unique())
        mat = np.full((len(ss), len(cs)), np.nan)
        for _, r in g.iterrows():
            mat[ss.index(r["server_lr"]), cs.index(r["client_lr"])] = r["y"]
        im = ax.imshow(mat, origin="lower", cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
        for (i, k), v in np.ndenumerate(mat):
            ax.text(k, i, "div." if np.isnan(v) else f"{v:.1f}", ha="center", va="center", fontsize=7,
                    color="w" if np.isnan(v) or v < (vmin + vmax) / 2 else "k")  # fmt: skip
        ax.set_xticks(range(len(cs)), [f"{c:g}" for c in cs])
        ax.set_yticks(range(len(ss)), [f"{s:g}" for s in ss])
        ax.set_xlabel("client learning rate")
        ax.set_ylabel("server learning rate")
        ax.set_title(name, fontsize=10)
    if im is not None:
        fig.colorbar(im, ax=axes, label="accuracy (%)")
    fig.suptitle(title, fontsize=11)
    _caption(fig, caption)
    return fig
