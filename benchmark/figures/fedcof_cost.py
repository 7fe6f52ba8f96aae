"""fedcof Fig. 6 (App. I, caption line 800): uplink communication of Fed3R vs FedCOF / FedNCM as the number of
clients grows, every client holding 100 classes, for d = 512 (SqueezeNet), 768 (ViT-B/16), 1280 (MobileNetV2).

Pure arithmetic of :mod:`benchmark.costs` (no new formula): Fed3R is :func:`~benchmark.costs.comm.fed3r_traffic`
(the fedcof repo's variant, a d x d Gram plus the class sums of the present classes, fedcof Table 1),
FedCOF and FedNCM :func:`~benchmark.costs.comm.fedcof_traffic` / :func:`~benchmark.costs.comm.fedncm_traffic`
(one d-vector per present class), all under the paper's convention :data:`benchmark.costs.conventions.FEDCOF`
(4-byte floats, uplink only, counts not charged, MB = 10^6 bytes; App. I lines 796-803).

The paper prints no value for Fig. 6: App. I (line 794) states its trends only (Fed3R grows with d and with
the number of clients; FedCOF costs what FedNCM costs and grows linearly in both), so the figure has no
readings; the claims catalogue checks the trends. The range of client counts is ours (the caption gives none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmark.costs import conventions as cv
from benchmark.costs.comm import fed3r_traffic, fedcof_traffic, fedncm_traffic
from benchmark.figures.registry import DrawnFigure

#: Feature dimensions of the caption: backbone -> d.
FIG6_DIMS: dict[str, int] = {"SqueezeNet": 512, "ViT-B/16": 768, "MobileNetV2": 1280}
#: Classes each client holds (the caption's assumption).
FIG6_CLASSES_PER_CLIENT = 100
#: Client counts on the x axis (ours: the caption states none).
FIG6_CLIENTS: tuple[int, ...] = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


def _mb(floats: float) -> float:
    conv = cv.FEDCOF
    return floats * conv.bytes_per_float / conv.unit_bytes


def fig6_data(
    clients: Sequence[int] = FIG6_CLIENTS,
    dims: Mapping[str, int] = FIG6_DIMS,
    classes_per_client: int = FIG6_CLASSES_PER_CLIENT,
) -> pd.DataFrame:
    """Tidy rows ``series, method, backbone, d, x`` (clients), ``y`` (MB, uplink): Fed3R, FedCOF, FedNCM."""
    rows = []
    for backbone, d in dims.items():
        for k in clients:
            present = [classes_per_client] * int(k)
            costs = {
                "Fed3R": fed3r_traffic(present, d).uplink_floats,
                "FedCOF": fedcof_traffic(present, d, counts_charged=cv.FEDCOF.counts_charged).uplink_floats,
                "FedNCM": fedncm_traffic(present, d, counts_charged=cv.FEDCOF.counts_charged).uplink_floats,
            }
            for method, floats in costs.items():
                rows.append(
                    {"series": f"{method} (d={d}, {backbone})", "method": method, "backbone": backbone,
                     "d": d, "x": int(k), "y": _mb(floats)}
                )  # fmt: skip
    return pd.DataFrame(rows)


def draw_fig6(data: pd.DataFrame) -> Figure:
    """Log-log lines: Fed3R solid per d, FedCOF (= FedNCM) dashed per d, one colour per d."""
    fig = Figure(figsize=(6.4, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for i, (d, block) in enumerate(data.groupby("d", sort=True)):
        colour = f"C{i}"
        backbone = block["backbone"].iloc[0]
        for method, style in (("Fed3R", "-o"), ("FedCOF", "--s")):
            b = block[block["method"] == method].sort_values("x")
            label = f"{method}, d = {d} ({backbone})" + (" = FedNCM" if method == "FedCOF" else "")
            ax.plot(b["x"], b["y"], style, color=colour, label=label, markersize=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of clients (100 classes per client)")
    ax.set_ylabel("total uplink communication (MB, 10^6 bytes, fp32)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.suptitle("fedcof Fig. 6: Fed3R vs FedCOF / FedNCM communication", fontsize="medium")
    return fig


def draw(config: Mapping[str, Any]):
    """The registry's ``draw`` of ``fedcof_fig6``."""
    data = fig6_data()
    fedcof = data[data["method"] == "FedCOF"]["y"].to_numpy()
    fedncm = data[data["method"] == "FedNCM"]["y"].to_numpy()
    assert np.array_equal(fedcof, fedncm)  # one message (fedcof Table 1): drawn once
    notes = (
        "Arithmetic only (benchmark.costs.comm under the fedcof convention: fp32, uplink only, counts not "
        "charged, MB = 10^6 bytes); Fed3R is the fedcof repo's variant (d^2 Gram + present-class sums).",
        "The paper prints no values for Fig. 6 (App. I states the trends only); the client range "
        f"{FIG6_CLIENTS[0]}-{FIG6_CLIENTS[-1]} is ours.",
        "FedCOF and FedNCM send the same message: their curves coincide (the FedCOF line stands for both).",
    )
    return DrawnFigure(draw_fig6(data), data[["series", "x", "y"]], (), notes)
