"""Training curves: the per-round curve format every training job writes (``flb fl-run --curve``, the
``fl_train`` runner, pfl's runs), reading it back, and the averaged curves the plots and figures draw.

A curve has one row per round (:data:`CURVE_COLUMNS`): ``round, stage, accuracy`` (percent, empty where not
evaluated), ``test_loss, train_loss``, the cumulative ``uplink_bytes, downlink_bytes, compute_f, wall_s`` and
``method, seed``. A closed-form initialisation contributes its rounds first (``stage == "init"``,
:data:`INIT_STAGE`). :func:`write_curve` writes it with a checksum sidecar; :func:`read_curve` checks the
sidecar and the columns before anything is parsed.

:func:`mean_curve` averages several runs (seeds) of one label at each evaluated round (min-max band), against
rounds, communication, compute or wall time (:func:`x_values`); :func:`curves_data` is that as a tidy frame.
Drawing is :mod:`benchmark.curve_plots` (matplotlib). These moved here from ``benchmark/apps/plots.py`` and
``benchmark/fl/jobs.py`` so that tables and figures reach them without importing an application (issue 25).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias

import numpy as np
import pandas as pd

from benchmark.errors import ConfigError, DataMissingError
from benchmark.io import atomic_path, read_verified_csv

if TYPE_CHECKING:
    from benchmark.fl.engine import RunResult

CURVE_COLUMNS: tuple[str, ...] = (
    "round", "stage", "accuracy", "test_loss", "train_loss", "uplink_bytes", "downlink_bytes", "compute_f",
    "wall_s", "method", "seed",
)  # fmt: skip


def curve_frame(res: RunResult, *, method: str, seed: int) -> pd.DataFrame:
    """The per-round curve of ``res`` (columns :data:`CURVE_COLUMNS`, accuracy in percent)."""
    rows = [
        {
            "round": r.round,
            "stage": r.stage,
            "accuracy": 100.0 * r.test_acc,
            "test_loss": r.test_loss,
            "train_loss": r.train_loss,
            "uplink_bytes": r.uplink_bytes,
            "downlink_bytes": r.downlink_bytes,
            "compute_f": r.compute_f,
            "wall_s": r.wall_s,
            "method": method,
            "seed": seed,
        }
        for r in res.history
    ]
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


#: Curve columns that must hold a number in every row (the others may be empty: not evaluated, NaN).
CURVE_NUMERIC: tuple[str, ...] = ("round", "uplink_bytes", "downlink_bytes", "compute_f")


def write_curve(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write a curve CSV atomically with its checksum sidecar (NaN written as empty)."""
    dest = Path(path)
    with atomic_path(dest, checksum=True) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.10g")
    return dest


def read_curve(path: str | Path) -> pd.DataFrame:
    """Read a curve CSV written by :func:`write_curve`: checked against its sidecar, complete (every line has
    every field, numbers where numbers belong) and with the curve columns; one clear error naming it if not."""
    if not Path(path).is_file():
        raise DataMissingError(
            f"curve file {path} does not exist", "run the training job that writes it first"
        )
    df = read_verified_csv(
        path, nonempty=CURVE_NUMERIC, numeric=(*CURVE_NUMERIC, "accuracy", "test_loss", "train_loss", "wall_s"),
        keep_default_na=True,
    )  # fmt: skip
    missing = [c for c in CURVE_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"{path} is not an FL curve file: missing columns {missing}", "regenerate it")
    df["stage"] = df["stage"].fillna("").astype(str)
    return df


Axis = Literal["round", "communication", "compute", "wall"]
AXES: tuple[str, ...] = ("round", "communication", "compute", "wall")
AXIS_LABELS = {
    "round": "communication rounds",
    "communication": "total communication (GB, up + down, 10^9 bytes)",
    "compute": "client compute (F = one forward pass of one sample)",
    "wall": "wall time (s)",
}
INIT_STAGE = "init"

CurveLike: TypeAlias = "RunResult | pd.DataFrame | str | Path"


def _is_run_result(obj: object) -> bool:
    """Whether ``obj`` is a :class:`~benchmark.fl.engine.RunResult`, without importing the engine (torch): an
    instance exists only once its module is loaded, and the table step, which plots curve files, never loads it."""
    engine = sys.modules.get("benchmark.fl.engine")
    return engine is not None and isinstance(obj, engine.RunResult)


def as_frame(curve: CurveLike) -> pd.DataFrame:
    """A curve as a DataFrame with ``round, stage, accuracy`` (percent), ``uplink_bytes, downlink_bytes,
    compute_f, wall_s``: from a :class:`RunResult`, a frame, or a curve CSV path."""
    if _is_run_result(curve):
        return curve_frame(curve, method="", seed=0)
    if isinstance(curve, str | Path):
        return read_curve(curve)
    if isinstance(curve, pd.DataFrame):
        need = {"round", "stage", "accuracy", "uplink_bytes", "downlink_bytes", "compute_f"}
        missing = sorted(need - set(curve.columns))
        if missing:
            raise ConfigError(f"curve frame lacks columns {missing}", "use benchmark.curves.curve_frame")
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
    that follows a closed-form initialisation starts at a seed-dependent round). Rounds are counted from the
    start of the stage (its first row, evaluated or not); the runs must span the same rounds of it (same
    protocol), otherwise a :class:`ConfigError` says which. Where they evaluated different rounds of it (a run
    recorded before the pfl runner evaluated only where its selection needs, beside one recorded after: every
    round against the last, fedbabu seeds 0 and 1 of 2026-12-07), the curve is at the rounds every run evaluated.
    """
    frames = [as_frame(c) for c in curves]
    out: dict[str, tuple[np.ndarray, ...]] = {}
    stages = list(dict.fromkeys(s for f in frames for s in f["stage"]))
    for stage in stages:
        per, spans = [], []
        for f in frames:
            rows = f[f["stage"] == stage]
            start = rows["round"].min() if len(rows) else 0
            ev = rows[~rows["accuracy"].isna()]
            spans.append(rows["round"].max() - start if len(rows) else None)
            per.append((ev["round"].to_numpy() - start, x_values(ev, x), ev["accuracy"].to_numpy(dtype=float)))
        # a stage may start at another round per seed (the init stage's length depends on the seed's
        # arrival schedule): align on the rounds *within* the stage, average x as well
        rel = [p[0] for p in per]
        if any(len(r) != len(rel[0]) or not np.array_equal(r, rel[0]) for r in rel):
            shared = np.array(sorted(set.intersection(*(set(r.tolist()) for r in rel))))
            if stage == INIT_STAGE:  # init rounds depend on the seed's arrival schedule: plot the first run
                per = per[:1]
            elif len(set(spans)) > 1 or not len(shared):
                raise ConfigError(
                    f"runs evaluate different rounds in stage {stage!r}", "average runs of one protocol"
                )
            else:  # one protocol, evaluated at other rounds: the rounds every run evaluated
                per = [tuple(a[np.isin(r, shared)] for a in p) for p, r in zip(per, rel, strict=True)]
        xs = np.mean([p[1] for p in per], axis=0)
        ys = np.array([p[2] for p in per])
        out[stage] = (xs, ys.mean(0), ys.min(0), ys.max(0))
    return out


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
