"""fedbabu's centralised accuracy curves (Figures 2-9), drawn from :class:`~benchmark.runners.pfl_central.
CentralCurveJob` records: test accuracy after every epoch of one network trained on the whole training set.

* by **update part** (full / body / head, PyTorch's default head): Fig. 2 (MobileNet, CIFAR-100; §5.1, line 109),
  Fig. 4 (4convNet, CIFAR-10; App. F.1, line 545), Fig. 6 (ResNet18, CIFAR-100; App. G.1, line 657), Fig. 8
  (ResNet50, line 663);
* by **head initialisation** when only the body trains: Fig. 3 (line 471), Fig. 5 (548), Fig. 7 (660), Fig. 9
  (666). The paper's Fig. 3 shows more initialisations (footnote 13: PyTorch's initialisers and 'similar');
  :func:`benchmark.pfl.models.build_model` offers three: ``default`` (He-uniform, the paper's choice),
  ``orthogonal`` and ``similar_rows`` (App. B's 'similar': uniform on [0.45, 0.55], unit rows). The legend
  carries the head's mean cosine similarity between rows, as the paper's parentheses.

Budget: the paper's 160 epochs (lr x0.1 after 80 and 120) unless ``fedbabu_central_epochs``; all 50,000 training
images unless ``fedbabu_central_train_images`` (a reduced CPU run; both are in the records' paths and the notes).
These are training runs: NOT RUN unless ``training_allowed(config)`` (``device=cuda`` or ``cpu_training=true``).
The paper prints no value of these curves in its text; the figures have no readings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmark.figures.fedbabu_partitions import new_figure
from benchmark.figures.registry import DrawnFigure
from benchmark.io import read_verified_json
from benchmark.ledger import all_recorded
from benchmark.runners.fl_train import training_allowed
from benchmark.runners.pfl_central import CentralCurveJob

#: The paper's budget (§5.1, line 106).
PAPER_EPOCHS = 160


@dataclass(frozen=True)
class CentralFigure:
    """One centralised figure: network, dataset, and whether it varies the update part or the head init."""

    model: str
    dataset: str
    varies: str  # "part" | "head_init"

    def series(self) -> dict[str, tuple[str, str]]:
        """Legend label -> (part, head_init)."""
        if self.varies == "part":
            return {"full": ("full", "default"), "body": ("body", "default"), "head": ("head", "default")}
        return {"He-uniform (PyTorch default)": ("body", "default"), "orthogonal": ("body", "orthogonal"),
                "similar rows": ("body", "similar_rows")}  # fmt: skip


CENTRAL_FIGURES: dict[str, CentralFigure] = {
    "fedbabu_fig2": CentralFigure("mobilenet_cifar", "cifar100", "part"),
    "fedbabu_fig3": CentralFigure("mobilenet_cifar", "cifar100", "head_init"),
    "fedbabu_fig4": CentralFigure("4convnet", "cifar10", "part"),
    "fedbabu_fig5": CentralFigure("4convnet", "cifar10", "head_init"),
    "fedbabu_fig6": CentralFigure("resnet18_cifar", "cifar100", "part"),
    "fedbabu_fig7": CentralFigure("resnet18_cifar", "cifar100", "head_init"),
    "fedbabu_fig8": CentralFigure("resnet50_cifar", "cifar100", "part"),
    "fedbabu_fig9": CentralFigure("resnet50_cifar", "cifar100", "head_init"),
}
#: Rough CPU cost per epoch of 50,000 images on this suite's 2-core CPU (docs/fedbabu.md: 4convNet ~860 img/s,
#: MobileNet ~190 img/s; ResNets not measured, at least MobileNet's).
_CPU_HOURS_PER_RUN = {"4convnet": 160 * 50_000 / 860 / 3600, "mobilenet_cifar": 160 * 50_000 / 190 / 3600}


def budget(config: Mapping[str, Any]) -> tuple[int, str]:
    """(epochs, train_images) of the runs under ``config``."""
    epochs = int(config.get("fedbabu_central_epochs") or PAPER_EPOCHS)
    images = config.get("fedbabu_central_train_images")
    return epochs, "all" if images in (None, "", "all") else str(int(images))


def figure_jobs(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Legend label -> the :class:`~benchmark.runners.pfl_central.CentralCurveJob` of each series."""
    fig = CENTRAL_FIGURES[name]
    epochs, images = budget(config)
    return {label: CentralCurveJob(fig.dataset, fig.model, part, init, epochs, images, 0)
            for label, (part, init) in fig.series().items()}  # fmt: skip


def unavailable(name: str):
    def why(config: Mapping[str, Any]) -> str | None:
        if training_allowed(config) or all_recorded(figure_jobs(config, name).values(), config):
            return None  # trained here, or every run recorded (runs/, docs/ledger.md)
        fig = CENTRAL_FIGURES[name]
        hours = _CPU_HOURS_PER_RUN.get(fig.model)
        cost = (
            f"about {hours:.0f} CPU-hours per run here"
            if hours
            else "not measured here, more than MobileNet's"
        )
        return (
            f"needs 3 centralised {fig.model} trainings on {fig.dataset} for {PAPER_EPOCHS} epochs ({cost}): "
            "--config device=cuda, or cpu_training=true (fedbabu_central_epochs / fedbabu_central_train_images "
            "reduce the budget)"
        )

    return why


def inputs(name: str):
    def paths(config: Mapping[str, Any]) -> list[str]:
        return [job.path for job in figure_jobs(config, name).values()]

    return paths


def draw(name: str):
    def drawn(config: Mapping[str, Any]) -> DrawnFigure:
        import pandas as pd  # local: heavy import (pandas)

        fig_spec = CENTRAL_FIGURES[name]
        records = {label: read_verified_json(job.path) for label, job in figure_jobs(config, name).items()}
        fig, (ax,) = new_figure(1, 1, figsize=(6.0, 4.2))
        rows = []
        for label, rec in records.items():
            xs = [h["epoch"] for h in rec["history"]]
            ys = [h["test_accuracy"] for h in rec["history"]]
            shown = f"{label} ({rec['head_row_cosine']:.2f})" if fig_spec.varies == "head_init" else label
            ax.plot(xs, ys, marker="o" if len(xs) <= 20 else None, label=shown)
            rows += [{"series": label, "x": x, "y": y, "head_row_cosine": rec["head_row_cosine"]}
                     for x, y in zip(xs, ys, strict=True)]  # fmt: skip
        epochs, images = budget(config)
        what = "update part" if fig_spec.varies == "part" else "head initialisation (body trained)"
        ax.set_title(f"{fig_spec.model}, {fig_spec.dataset}, centralised: by {what}", fontsize=10)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy (%)")
        ax.legend(fontsize=8)
        any_rec = next(iter(records.values()))
        notes = [
            f"Centralised runs (benchmark/runners/pfl_central.py), seed 0, SGD lr 0.1 x0.1 after epochs "
            f"{any_rec['config']['milestones']}, momentum 0.9, batch 50, no weight decay, test accuracy on all "
            f"{any_rec['test_images']} test images after each epoch.",
        ]
        ran_on = sorted({f"{r.get('machine', '?')} ({r.get('device', '?')}), commit {r.get('git_commit', '?')}"
                         for r in records.values()})  # fmt: skip
        notes.append(f"Ran on: {'; '.join(ran_on)}.")
        if epochs != PAPER_EPOCHS or images != "all":
            notes.append(
                f"REDUCED BUDGET: {epochs} epochs (the paper: {PAPER_EPOCHS}) on {any_rec['train_images']} training "
                f"images (the paper: all {any_rec['train_images'] if images == 'all' else 'of them'}); the curves "
                "show the start of training only."
            )
        if fig_spec.varies == "head_init":
            notes.append(
                "Series not run: the paper's other initialisers (footnote 13: Xavier / He normal and uniform, ...); "
                "build_model offers default (He-uniform), orthogonal and similar_rows. Legend: the head's mean "
                "cosine similarity between rows, as the paper's parentheses."
            )
        return DrawnFigure(fig, pd.DataFrame(rows), (), tuple(notes))

    return drawn
