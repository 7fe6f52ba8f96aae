"""fedcof's figures (Goswami et al., FedCOF; ../shared/papers/002_*.txt), every one registered in
:mod:`benchmark.figures.registry`.

* **Fig. 1** (line 47): iNaturalist-Users-120K, MobileNetV2: data we do not have (``flb data list``).
* **Fig. 2** (line 209): a diagram of the method.
* **Fig. 3** (line 388): fine-tuning (FedAdam / FedAvg) after the multi-round initialisation on ImageNet-R,
  CUB200, Cars: full-model training (:mod:`benchmark.figures.fedcof_curves`), runs only where training is
  allowed.
* **Fig. 4** (line 420): LP (FedAvg) after the multi-round initialisation; the paper's panels are Cars
  (ViT-B/16) and iNat-120K; drawn on CIFAR-100 with the substitute SqueezeNet (marked), the init stage dotted,
  a star at the start of LP, vs rounds and vs communication.
* **Fig. 5** (line 424): FedCOF vs clients and heterogeneity; multiple means per client
  (:mod:`benchmark.figures.fedcof_ablation`, closed form).
* **Fig. 6** (line 800): Fed3R vs FedCOF communication, arithmetic (:mod:`benchmark.figures.fedcof_cost`).
* **Fig. 7** (line 824): LP after initialisation, SqueezeNet, three datasets; the CIFAR-100 panel is drawn.
* **Fig. 8** (line 904): multiple means, means per class and diagonal / spherical covariances on ImageNet-R:
  data we do not have.
* **Figs. 9-10** (lines 942, 946): noisy class counts (App. N), closed form
  (:mod:`benchmark.figures.fedcof_noise`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from benchmark.figures.registry import FigureSpec, register_figure


def _lazy(module: str, attr: str):
    """``module.attr`` resolved at call time (keeps ``import benchmark.figures.fedcof`` light)."""

    def call(config: Mapping[str, Any]):
        return getattr(importlib.import_module(module), attr)(config)

    call.__name__ = f"{module.rsplit('.', 1)[-1]}.{attr}"
    return call


def _parts(module: str, draw: str, inputs: str, unavailable: str) -> dict[str, Any]:
    """A figure's ``draw``, ``inputs`` and ``unavailable``: the functions of those names in ``module`` (:func:`_lazy`)."""
    return {"draw": _lazy(module, draw), "inputs": _lazy(module, inputs), "unavailable": _lazy(module, unavailable)}


def _figure(number: int, line: int, title: str, **fields: Any) -> None:
    """Register fedcof's Fig. ``number`` (``fedcof_fig<number>``), its caption at ``line``; ``fields``: the rest of
    its :class:`FigureSpec`."""
    register_figure(FigureSpec(f"fedcof_fig{number}", "fedcof", f"Fig. {number}", line, title, **fields))


_NOISE = "benchmark.figures.fedcof_noise"
_ABL = "benchmark.figures.fedcof_ablation"
_CURVES = "benchmark.figures.fedcof_curves"

_figure(1, 47,
    title="Accuracy vs communication, MobileNetV2 on iNaturalist-Users-120K",
    reason="needs iNaturalist-Users-120K (no public download: `flb data list`), and MobileNetV2 features of it",
)  # fmt: skip
_figure(2, 209,
    title="FedCOF overview: clients send class means and counts; the server estimates covariances",
    reason="a diagram of the method (no data)",
)  # fmt: skip
_figure(3, 388,
    title="Fine-tuning (FedAdam, FedAvg) after FedNCM / Fed3R / FedCOF initialisation vs from a random head",
    **_parts(_CURVES, "draw_fig3", "fig3_inputs", "fig3_unavailable"),
)  # fmt: skip
_figure(4, 420,
    title="LP (FedAvg) after the multi-round initialisation, vs rounds and communication "
    "(substitute: CIFAR-100, substitute SqueezeNet; the paper: Cars ViT-B/16, iNat-120K)",
    **_parts(_CURVES, "draw_fig4", "lp_inputs", "lp_unavailable"),
)  # fmt: skip
_figure(5, 424,
    title="FedCOF vs number of clients and Dirichlet alpha; several means per client "
    "(CIFAR-100, substitute SqueezeNet: the caption names no dataset)",
    **_parts(_ABL, "draw", "inputs", "unavailable"),
)  # fmt: skip
_figure(6, 800,
    title="Uplink communication of Fed3R vs FedCOF / FedNCM vs number of clients (100 classes per client)",
    draw=_lazy("benchmark.figures.fedcof_cost", "draw"),
)  # fmt: skip
_figure(7, 824,
    title="LP (FedAvg) after a training-free initialisation, CIFAR-100 panel (substitute SqueezeNet)",
    **_parts(_CURVES, "draw_fig7", "lp_inputs", "lp_unavailable"),
)  # fmt: skip
_figure(8, 904,
    title="FedCOF with several means per client, means per class, diagonal / spherical covariances (ImageNet-R)",
    reason="needs ImageNet-R with the fedcof split (absent here: `flb data fetch imagenet_r`, and the paper's "
    "train/test split is not published); the several-means ablation is drawn on CIFAR-100 in fedcof_fig5",
)  # fmt: skip
_figure(9, 942,
    title="FedCOF with noisy class counts (uniform, Gaussian, Laplace) vs epsilon, CIFAR-100, "
    "100 clients, Dirichlet 0.1 (substitute SqueezeNet)",
    **_parts(_NOISE, "draw_fig9", "inputs_fig9", "unavailable"),
)  # fmt: skip
_figure(10, 946,
    title="Class counts of one client, real and noisy (uniform, Laplace; epsilon = 0.1), CIFAR-100",
    **_parts(_NOISE, "draw_fig10", "inputs_fig10", "unavailable"),
)  # fmt: skip
