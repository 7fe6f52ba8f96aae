"""fedcof Figs. 9 and 10 (App. N, lines 908-946): FedCOF when clients perturb their class counts.

The perturbation is :class:`benchmark.closed_form.stats.CountNoise` (App. N Eq. 26,
``n~ = max(n + sigma, 0)``, a clipped class is not sent; uniform ``U(-(1-eps) n, (1-eps) n)``, Gaussian
``N(0, 1/eps)`` read as a variance, Laplace with scale ``1/eps``), applied by the FedCOF client
(:func:`~benchmark.closed_form.stats.class_means_message`) with the random stream of ``(seed, client)``.

* **Fig. 9** (caption line 942): FedCOF accuracy vs eps in {0.1, 0.3, 0.5, 0.7, 0.9} per noise type, CIFAR-100,
  SqueezeNet, 100 clients, Dirichlet alpha = 0.1, five seeds ("each generating different noise": seed s is
  both the partition seed and the noise seed), mean and standard deviation (ddof 0, not stated). Beside it
  the noise-free FedCOF on the same partitions, and the paper's noise-free value of the same setting
  (Table 3, line 331: 56.1 +- 0.2) as the reading. The paper prints no value of the noisy runs.
* **Fig. 10** (caption line 946): the class counts of one client (client 0 of partition seed 0; the paper does
  not say which), real and noisy with eps = 0.1, uniform (left) and Laplace (right), mean +- std over the
  noise seeds 0-4 (a clipped count counts as 0: the server receives nothing).

Every fit is a closed-form FedCOF on cached features (about 0.2 s on CIFAR-100): Fig. 9 costs 80 fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmark.figures import fedcof_data as fd
from benchmark.figures.registry import DrawnFigure, Reading

#: The paper's noise grid (App. N, line 924).
EPSILONS: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
NOISE_KINDS: tuple[str, ...] = ("uniform", "gaussian", "laplace")
ALPHA = 0.1
NUM_CLIENTS = 100
#: Fig. 10: the client drawn and the noise intensity of the caption.
FIG10_CLIENT = 0
FIG10_EPSILON = 0.1
FIG10_KINDS: tuple[str, ...] = ("uniform", "laplace")
#: fedcof Table 3 (line 331): FedCOF, CIFAR-100, SqueezeNet, 100 clients, alpha 0.1, five seeds.
PAPER_NOISE_FREE = (56.1, 0.2, "fedcof:331")
NO_NOISE = "no noise"


def unavailable(config: Mapping[str, Any]) -> str | None:
    return fd.unavailable(config)


def _partitions(seeds: Sequence[int]) -> list:
    return [fd.partition_job(ALPHA, NUM_CLIENTS, s) for s in seeds]


def inputs_fig9(config: Mapping[str, Any]) -> list[str]:
    return fd.inputs(config, _partitions(fd.PAPER_SEEDS))


def inputs_fig10(config: Mapping[str, Any]) -> list[str]:
    return fd.inputs(config, _partitions(fd.PAPER_SEEDS[:1]))


def fig9_rows(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    partitions: Mapping[int, Sequence[np.ndarray]],
    num_classes: int,
    *,
    epsilons: Sequence[float] = EPSILONS,
    kinds: Sequence[str] = NOISE_KINDS,
    options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One row per (noise kind or ``no noise``, eps, seed): FedCOF test accuracy (percent) with the counts
    perturbed by ``CountNoise(kind, eps)`` under noise seed = partition seed."""
    from benchmark.closed_form import run_methods  # local: heavy import (scipy, torch, torchvision)

    base = dict(options or {})
    rows = []
    for seed, clients in partitions.items():
        settings: list[tuple[str, float | None, dict[str, Any] | None]] = [(NO_NOISE, None, None)]
        settings += [(k, float(e), {"kind": k, "epsilon": float(e)}) for k in kinds for e in epsilons]
        for kind, eps, noise in settings:
            opts = {**base, "seed": int(seed)}
            if noise is not None:
                opts["noise"] = noise
            res = run_methods({"fedcof": opts}, train_x, train_y, test_x, test_y, list(clients), num_classes)
            rows.append(
                {"noise": kind, "epsilon": eps, "seed": int(seed), "accuracy": float(res["fedcof"].accuracy)}
            )
    return pd.DataFrame(rows)


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Tidy plotted data: ``series`` (noise kind), ``x`` (eps; NaN for no noise), ``y`` (mean accuracy),
    ``y_lo``/``y_hi`` (mean -+ std over seeds, ddof 0), ``n_seeds``."""
    g = rows.groupby(["noise", "epsilon"], dropna=False)["accuracy"]
    out = g.agg(y="mean", sd=lambda v: float(np.std(v, ddof=0)), n_seeds="count").reset_index()
    out = out.rename(columns={"noise": "series", "epsilon": "x"})
    out["y_lo"] = out["y"] - out["sd"]
    out["y_hi"] = out["y"] + out["sd"]
    return out[["series", "x", "y", "y_lo", "y_hi", "n_seeds"]]


def draw_fig9_figure(data: pd.DataFrame, paper: tuple[float, float, str] | None = PAPER_NOISE_FREE) -> Figure:
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    markers = {"uniform": "o", "gaussian": "s", "laplace": "^"}
    for i, kind in enumerate(NOISE_KINDS):
        b = data[data["series"] == kind].sort_values("x")
        if b.empty:
            continue
        ax.errorbar(
            b["x"], b["y"], yerr=[b["y"] - b["y_lo"], b["y_hi"] - b["y"]], fmt=f"-{markers[kind]}",
            color=f"C{i}", capsize=3, label=f"{kind} noise",
        )  # fmt: skip
    clean = data[data["series"] == NO_NOISE]
    if not clean.empty:
        y, lo, hi = (float(clean[c].iloc[0]) for c in ("y", "y_lo", "y_hi"))
        ax.axhline(y, color="k", linestyle="--", linewidth=1, label=f"no noise (ours): {y:.2f}")
        ax.axhspan(lo, hi, color="k", alpha=0.08, linewidth=0)
    if paper is not None:
        ax.plot([1.0], [paper[0]], "*", color="C3", markersize=12,
                label=f"paper, no noise (Table 3): {paper[0]}")  # fmt: skip
        ax.errorbar([1.0], [paper[0]], yerr=[paper[1]], color="C3", capsize=3)
    ax.set_xlabel("epsilon (lower = more noise)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_xticks([*EPSILONS, 1.0], [*(str(e) for e in EPSILONS), "none"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.suptitle(
        "fedcof Fig. 9: FedCOF with noisy class counts (CIFAR-100, 100 clients, Dir 0.1)", fontsize="medium"
    )
    return fig


def draw_fig9(config: Mapping[str, Any]):
    """The registry's ``draw`` of ``fedcof_fig9``."""
    s = fd.load_setting(config)
    parts = {job.seed: fd.load_clients(s, job) for job in _partitions(fd.PAPER_SEEDS)}
    rows = fig9_rows(
        s.train_x, s.train_y, s.test_x, s.test_y, parts, fd.NUM_CLASSES, options=fd.fedcof_options()
    )
    data = summarise(rows)
    clean = data[data["series"] == NO_NOISE]
    ours = float(clean["y"].iloc[0]) if not clean.empty else None
    readings = (Reading(NO_NOISE, None, PAPER_NOISE_FREE[0], ours, PAPER_NOISE_FREE[2]),)
    notes = [
        "FedCOF as fedcof Table 3 (path A of the fedcof code: gamma 1, float32 pinv); seed s = partition seed = "
        "noise seed; std over the 5 seeds with ddof 0 (the paper does not say).",
        "Gaussian noise N(0, 1/eps) read with 1/eps as the variance; noisy counts kept real (not rounded); a "
        "clipped class sends neither mean nor count (App. N).",
        "The paper prints no value for the noisy runs; its noise-free value of the same setting (Table 3) is "
        "the reading, drawn as a star at 'none'.",
    ]
    if fd.is_substitute(config):
        notes.append(fd.SUBSTITUTE_NOTE)
    return DrawnFigure(draw_fig9_figure(data), data, readings, tuple(notes))


def fig10_rows(
    labels: np.ndarray,
    client: np.ndarray,
    num_classes: int,
    *,
    client_id: int = FIG10_CLIENT,
    epsilon: float = FIG10_EPSILON,
    kinds: Sequence[str] = FIG10_KINDS,
    seeds: Sequence[int] = fd.PAPER_SEEDS,
) -> pd.DataFrame:
    """Rows ``kind, seed, cls, real, noisy`` for the classes client ``client_id`` holds: its real count and
    the noisy count its FedCOF message carries under noise seed ``seed`` (0 when clipped, i.e. not sent)."""
    # local: heavy import (scipy, torch, torchvision)
    from benchmark.closed_form.stats import CountNoise, client_rng

    counts = np.bincount(np.asarray(labels)[np.asarray(client, dtype=np.int64)], minlength=num_classes)
    classes = np.flatnonzero(counts)
    real = counts[classes].astype(np.float64)
    rows = []
    for kind in kinds:
        noise = CountNoise(kind, float(epsilon))  # type: ignore[arg-type]
        for seed in seeds:
            noisy = noise.perturb(real, client_rng(int(seed), int(client_id), 1))
            for c, n, m in zip(classes, real, noisy, strict=True):
                rows.append(
                    {"kind": kind, "seed": int(seed), "cls": int(c), "real": float(n), "noisy": float(m)}
                )
    return pd.DataFrame(rows)


def summarise_fig10(rows: pd.DataFrame) -> pd.DataFrame:
    """Tidy data: ``series`` (``real`` or ``<kind> eps=...``), ``x`` (class), ``y`` mean, ``y_lo``/``y_hi``
    (mean -+ std over the noise seeds, ddof 0), ``n_seeds``."""
    real = rows.drop_duplicates("cls")[["cls", "real"]]
    out = [pd.DataFrame({"series": "real", "x": real["cls"], "y": real["real"], "y_lo": real["real"],
                         "y_hi": real["real"], "n_seeds": 1})]  # fmt: skip
    for kind, block in rows.groupby("kind", sort=False):
        g = block.groupby("cls")["noisy"]
        m, sd, n = g.mean(), g.std(ddof=0), g.count()
        out.append(pd.DataFrame({"series": f"{kind} noise", "x": m.index, "y": m.values, "y_lo": (m - sd).values,
                                 "y_hi": (m + sd).values, "n_seeds": n.values}))  # fmt: skip
    return pd.concat(out, ignore_index=True)


def draw_fig10_figure(data: pd.DataFrame, epsilon: float = FIG10_EPSILON) -> Figure:
    kinds = [s for s in data["series"].unique() if s != "real"]
    fig = Figure(figsize=(5.2 * max(1, len(kinds)), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    real = data[data["series"] == "real"].sort_values("x")
    pos = np.arange(len(real))
    for j, kind in enumerate(kinds):
        ax = fig.add_subplot(1, len(kinds), j + 1)
        b = data[data["series"] == kind].set_index("x").loc[real["x"]]
        ax.bar(pos - 0.2, real["y"], width=0.4, color="C7", label="real")
        ax.bar(pos + 0.2, b["y"], width=0.4, color=f"C{j}", yerr=[b["y"] - b["y_lo"], b["y_hi"] - b["y"]],
               capsize=2, label=f"{kind}, eps = {epsilon}")  # fmt: skip
        ax.set_xticks(pos, [str(int(c)) for c in real["x"]], fontsize="x-small", rotation=90)
        ax.set_xlabel("class (CIFAR-100 label, classes the client holds)")
        ax.set_ylabel("class count")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"fedcof Fig. 10: class counts of client {FIG10_CLIENT}, real vs noisy (mean +- std, 5 seeds)",
                 fontsize="medium")  # fmt: skip
    return fig


def draw_fig10(config: Mapping[str, Any]):
    """The registry's ``draw`` of ``fedcof_fig10``."""
    from benchmark.features.pointer import load_features  # local: heavy import (torch)

    tr_job, _ = fd.feature_jobs(config)
    ptr, tr = load_features(tr_job.path, "train")
    s = fd.Setting(tr.features, tr.labels, tr.features[:0], tr.labels[:0], ptr, tr_job.path)
    clients = fd.load_clients(s, _partitions(fd.PAPER_SEEDS[:1])[0])
    data = summarise_fig10(fig10_rows(tr.labels, clients[FIG10_CLIENT], fd.NUM_CLASSES))
    notes = [
        f"Client {FIG10_CLIENT} of partition seed 0 (Dirichlet 0.1, 100 clients); the paper does not say which "
        "client it draws. Noise seeds 0-4, the streams the FedCOF clients of Fig. 9 use; clipped counts are 0.",
        "The paper prints no values for Fig. 10.",
    ]
    return DrawnFigure(draw_fig10_figure(data), data, (), tuple(notes))
