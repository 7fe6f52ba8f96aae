"""Accuracy curves of several methods overlaid: vs rounds, vs communication, vs compute (legate2023 Fig. 1;
fedcof Fig. 3-4, 7), from run results or from the curve CSVs that ``flb fl-run --curve`` writes.

Uses matplotlib's object API with the Agg canvas directly (no pyplot, no global backend switch), so it is
safe in headless workers and tests. Only evaluated rounds are plotted. Round 0 (the starting model) is
included, so a two-stage curve starts at its stage-1 accuracy and cost. A closed-form initialisation stage
(``stage == "init"`` rows, fedcof Fig. 4) is drawn dotted and the start of training is marked with a star,
as in fedcof Fig. 4. Several runs (seeds) under one label are averaged at each evaluated round, with the
min-max band shaded.

Command line::

    flb plot --out fig.png [--title T] [--axes round,communication,compute] \
        "LP=run-s0-curve.csv,run-s1-curve.csv" "FedNCM+LP=..."
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmark.errors import BenchmarkError, ConfigError
from benchmark.fl.engine import RunResult
from benchmark.io import atomic_path

Axis = Literal["round", "communication", "compute", "wall"]
AXES: tuple[str, ...] = ("round", "communication", "compute", "wall")
_LABELS = {
    "round": "communication rounds",
    "communication": "total communication (GB, up + down, 10^9 bytes)",
    "compute": "client compute (F = one forward pass of one sample)",
    "wall": "wall time (s)",
}
INIT_STAGE = "init"

CurveLike = RunResult | pd.DataFrame | str | Path


def as_frame(curve: CurveLike) -> pd.DataFrame:
    """A curve as a DataFrame with ``round, stage, accuracy`` (percent), ``uplink_bytes, downlink_bytes,
    compute_f, wall_s``: from a :class:`RunResult`, a frame, or a curve CSV path."""
    if isinstance(curve, RunResult):
        from benchmark.fl.jobs import curve_frame

        return curve_frame(curve, method="", seed=0)
    if isinstance(curve, str | Path):
        from benchmark.fl.jobs import read_curve

        return read_curve(curve)
    if isinstance(curve, pd.DataFrame):
        need = {"round", "stage", "accuracy", "uplink_bytes", "downlink_bytes", "compute_f"}
        missing = sorted(need - set(curve.columns))
        if missing:
            raise ConfigError(f"curve frame lacks columns {missing}", "use benchmark.fl.jobs.curve_frame")
        out = curve.copy()
        out["stage"] = out["stage"].fillna("").astype(str)
        return out
    raise ConfigError(f"cannot plot a {type(curve).__name__}", "pass a RunResult, a DataFrame or a curve CSV")


def x_values(frame: pd.DataFrame, x: str) -> np.ndarray:
    """The x coordinate of every row of ``frame`` for axis ``x``."""
    if x == "round":
        return frame["round"].to_numpy(dtype=float)
    if x == "communication":
        return (
            frame["uplink_bytes"].to_numpy(dtype=float) + frame["downlink_bytes"].to_numpy(dtype=float)
        ) / 1e9
    if x == "compute":
        return frame["compute_f"].to_numpy(dtype=float)
    if x == "wall":
        return frame["wall_s"].to_numpy(dtype=float)
    raise ConfigError(f"unknown x axis {x!r}", f"use one of: {', '.join(AXES)}")


def curve(result: CurveLike, x: Axis) -> tuple[list[float], list[float]]:
    """``(xs, accuracy %)`` of the evaluated rows of one run against axis ``x`` (all stages)."""
    f = as_frame(result)
    ev = f[~f["accuracy"].isna()]
    return [float(v) for v in x_values(ev, x)], [float(v) for v in ev["accuracy"]]


def mean_curve(curves: Sequence[CurveLike], x: Axis) -> dict[str, tuple[np.ndarray, ...]]:
    """Per stage: ``(xs, mean, min, max)`` of the accuracy over runs, at the evaluated rounds they share.

    x is averaged too (cost axes can differ slightly between seeds, e.g. client sizes, and a training stage
    that follows a closed-form initialisation starts at a seed-dependent round); runs must evaluate the same
    rounds relative to the start of the stage (same protocol), otherwise a :class:`ConfigError` says which.
    """
    frames = [as_frame(c) for c in curves]
    out: dict[str, tuple[np.ndarray, ...]] = {}
    stages = list(dict.fromkeys(s for f in frames for s in f["stage"]))
    for stage in stages:
        per = []
        for f in frames:
            ev = f[(f["stage"] == stage) & ~f["accuracy"].isna()]
            per.append((ev["round"].to_numpy(), x_values(ev, x), ev["accuracy"].to_numpy(dtype=float)))
        # a stage may start at another round per seed (the init stage's length depends on the seed's
        # arrival schedule): align on the rounds *within* the stage, average x as well
        rel = [p[0] - p[0][0] if len(p[0]) else p[0] for p in per]
        if any(len(r) != len(rel[0]) or not np.array_equal(r, rel[0]) for r in rel):
            if stage == INIT_STAGE:  # init rounds depend on the seed's arrival schedule: plot the first run
                per = per[:1]
            else:
                raise ConfigError(
                    f"runs evaluate different rounds in stage {stage!r}", "average runs of one protocol"
                )
        xs = np.mean([p[1] for p in per], axis=0)
        ys = np.array([p[2] for p in per])
        out[stage] = (xs, ys.mean(0), ys.min(0), ys.max(0))
    return out


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
    panels. :func:`curves_data` gives the plotted values as a tidy frame.
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
        ax.set_xlabel(_LABELS[x])
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


def curves_data(results: Mapping[str, CurveLike | Sequence[CurveLike]], x: Axis = "round") -> pd.DataFrame:
    """Tidy plotted values of :func:`draw_curves` on axis ``x``: ``series, stage, x, y`` (mean accuracy over
    the runs), ``y_lo, y_hi`` (min, max) and ``n_seeds`` (runs under the label; an init stage whose rounds
    differ between seeds is the first run's, as drawn)."""
    rows = []
    for label, runs in results.items():
        runs_list = list(runs) if isinstance(runs, list | tuple) else [runs]
        for stage, (xs, mean, lo, hi) in mean_curve(runs_list, x).items():
            n = len(runs_list)
            for a, m, lo_, hi_ in zip(xs, mean, lo, hi, strict=True):
                rows.append({"series": label, "stage": stage, "x": float(a), "y": float(m), "y_lo": float(lo_),
                             "y_hi": float(hi_), "n_seeds": n})  # fmt: skip
    return pd.DataFrame(rows, columns=["series", "stage", "x", "y", "y_lo", "y_hi", "n_seeds"])


def _parse_series(items: Sequence[str]) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"expected LABEL=curve.csv[,curve.csv...], got {item!r}", "name each series")
        label, paths = item.split("=", 1)
        files = [Path(p) for p in paths.split(",") if p]
        if not label or not files:
            raise ConfigError(f"empty label or file list in {item!r}", "write LABEL=a.csv,b.csv")
        missing = [str(p) for p in files if not p.is_file()]
        if missing:
            raise ConfigError(
                f"curve file(s) not found: {', '.join(missing)}", "run flb fl-run --curve first"
            )
        out.setdefault(label, []).extend(files)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``flb plot`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flb plot", description=__doc__.splitlines()[0])
    ap.add_argument("series", nargs="+", help="LABEL=curve.csv[,curve.csv...] (several files = seeds)")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default=None)
    ap.add_argument(
        "--axes", default="round,communication,compute", help=f"comma-separated of {', '.join(AXES)}"
    )
    ap.add_argument("--linear-cost", action="store_true", help="linear (not log) cost axes")
    args = ap.parse_args(argv)
    try:
        series = _parse_series(args.series)
        axes = [a for a in args.axes.split(",") if a]
        out = plot_curves(series, args.out, axes=axes, title=args.title, log_cost=not args.linear_cost)  # type: ignore[arg-type]
    except BenchmarkError as err:
        print(f"plots: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
