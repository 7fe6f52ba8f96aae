"""fedcof's training curves: Figs. 4 and 7 (LP after the multi-round initialisation, on cached features) and
Fig. 3 (fine-tuning of the whole model after it), drawn by :func:`benchmark.curve_plots.draw_curves` (the
initialisation stage dotted, a star where training starts, as the paper's captions describe).

* **Fig. 7** (caption line 824; App. K line 814: LP after initialisation, SqueezeNet, three datasets): the
  CIFAR-100 panel, training protocol ``fedcof_cifar100_lp`` (:mod:`benchmark.fl.protocols`: App. J/K, 200
  FLSim epochs = 800 rounds of 30 of 100 clients, Dirichlet 0.1, seeds 0-4), accuracy vs rounds. Reading: Table 6's
  Fed-LP on CIFAR-100 (line 830, 59.9 +- 0.2; same protocol, 200 rounds). Migrated from the legacy
  ``benchmark.workflow.FIGURES`` entry of the same name.
* **Fig. 4** (caption line 420): the same runs vs rounds and vs communication (the paper's middle panel); the
  paper's panels are Cars (ViT-B/16) and iNat-120K (SqueezeNet), which we do not have: a substitute, marked.
* **Fig. 3** (caption line 388): FedAdam / FedAvg from a random head and FedAdam after FedNCM / Fed3R / FedCOF,
  ImageNet-R and CUB200 (Stanford Cars has no public download), protocols ``fedcof_<dataset>_ft``
  (benchmark/protocols/fl_train.yaml, Table 4 / App. J), 3 seeds. Full-model training: planned only where
  training is allowed (:func:`benchmark.runners.fl_train.training_allowed`). Readings: Table 4 (lines
  403-410), 100 rounds.

LP curves cost minutes per run (20 runs): Figs. 4 and 7 run in the full tier only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmark.errors import ConfigError
from benchmark.figures import fedcof_data  # module attribute: a test replaces is_substitute
from benchmark.figures.fedcof_data import unavailable
from benchmark.figures.registry import DrawnFigure, Reading
from benchmark.fl.train_protocols import get_train_protocol
from benchmark.jobs import FLRunJob, partition_tag
from benchmark.runners._features import run_preprocess
from benchmark.runners.fl_train import FLTrainJob, lr_source, training_allowed
from benchmark.tables.availability import choose_weights

LP_PROTOCOL = "fedcof_cifar100_lp"
LP_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: Series label -> method of ``fedcof_cifar100_lp`` (the legacy FIGURES entry's series).
LP_SERIES: dict[str, str] = {
    "Fed-LP": "fed_lp",
    "FedNCM+LP": "fedncm_lp",
    "Fed3R+LP": "fed3r_lp",
    "FedCOF+LP": "fedcof_lp",
}
#: fedcof Table 6 (line 833): Fed-LP, CIFAR-100, SqueezeNet, 200 rounds, 5 seeds.
PAPER_FED_LP = (59.9, 0.2, "fedcof:830")


def lp_unavailable(config: Mapping[str, Any]) -> str | None:
    if config.get("tier") == "ci":
        return (
            "LP curves: 20 FedAvg-LP runs of 200 rounds (4 methods x 5 seeds, minutes each on a CPU): full tier "
            "only (--config tier=full)"
        )

    return unavailable(config)


def lp_series(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per series label, the curve files of its seeds (outputs of the ``fl_run`` rule)."""
    from benchmark.fl.protocols import get_protocol  # local: heavy import (scipy, torch, torchvision)

    fl = get_protocol(LP_PROTOCOL)
    weights, why = choose_weights(fl.backbone, config.get("data_root"), config.get("weights_dir"))
    if weights is None:
        raise ConfigError(f"fedcof LP figures: {why}", "provide the weights (FLB_WEIGHTS_DIR)")
    part: dict[str, Any] = {"scheme": fl.partition_scheme, "num_clients": fl.num_clients}
    if fl.alpha is not None:
        part["alpha"] = fl.alpha

    def curve(method: str, seed: int) -> str:
        return FLRunJob(fl.dataset, fl.backbone, weights, run_preprocess(fl.preprocess, config),
                        config.get("precision", "fp32"), "all",
                        partition_tag(part), fl.name, method, seed).curve_path  # fmt: skip

    return {label: [curve(m, s) for s in LP_SEEDS] for label, m in LP_SERIES.items()}


def lp_inputs(config: Mapping[str, Any]) -> list[str]:
    return [c for cs in lp_series(config).values() for c in cs]


def _final(series: Mapping[str, list[str]], label: str) -> float | None:
    """Mean over seeds of the last evaluated accuracy of ``label``'s training stage."""
    from benchmark.curves import INIT_STAGE, as_frame  # local: heavy import (pandas, torch)

    finals = []
    for path in series.get(label, []):
        f = as_frame(path)
        ev = f[(f["stage"] != INIT_STAGE) & ~f["accuracy"].isna()]
        if len(ev):
            finals.append(float(ev["accuracy"].iloc[-1]))
    return sum(finals) / len(finals) if finals else None


def _lp_figure(config: Mapping[str, Any], axes: tuple[str, ...], title: str, notes: tuple[str, ...]):
    import pandas as pd  # local: heavy import (pandas)

    from benchmark.curve_plots import draw_curves  # local: heavy import (matplotlib, pandas, torch)
    from benchmark.curves import curves_data  # local: heavy import (pandas, torch)

    series = lp_series(config)
    fig = draw_curves(series, axes=axes, title=title)  # type: ignore[arg-type]
    reading = Reading("Fed-LP", "final", PAPER_FED_LP[0], _final(series, "Fed-LP"), PAPER_FED_LP[2])
    ax = fig.axes[0]
    last_round = max(float(x) for x in ax.get_lines()[0].get_xdata()) if ax.get_lines() else 200.0
    ax.errorbar([last_round], [PAPER_FED_LP[0]], yerr=[PAPER_FED_LP[1]], fmt="*", color="C0", markersize=12,
                markeredgecolor="k", label=f"paper, Fed-LP (Table 6): {PAPER_FED_LP[0]}")  # fmt: skip
    ax.legend(fontsize="small")
    data = pd.concat(
        [curves_data(series, x).assign(axis=x) for x in axes],
        ignore_index=True,  # type: ignore[arg-type]
    )
    all_notes = list(notes)
    all_notes.append(
        "Protocol fedcof_cifar100_lp (App. J/K): FedAvg-LP '200 rounds' run as the fedcof code's 200 FLSim "
        "epochs (each a pass over the 100 clients in rounds of 30: 4 rounds, 800 in all; protocol notes), "
        "Dirichlet 0.1, seeds 0-4; the initialisation stage (dotted) is the multi-round closed form of path B "
        "of the fedcof code. Mean line, min-max band over seeds."
    )
    if fedcof_data.is_substitute(config):
        all_notes.append(fedcof_data.SUBSTITUTE_NOTE)
    return DrawnFigure(fig, data, (reading,), tuple(all_notes))


def draw_fig7(config: Mapping[str, Any]):
    return _lp_figure(
        config,
        ("round",),
        "fedcof Fig. 7 (CIFAR-100 panel):\nLP after a training-free initialisation",
        ("Only the CIFAR-100 panel of the three SqueezeNet panels (the others' data is absent here).",),
    )


def draw_fig4(config: Mapping[str, Any]):
    return _lp_figure(
        config,
        ("round", "communication"),
        "fedcof Fig. 4 (substitute CIFAR-100 / SqueezeNet): LP after the multi-round initialisation",
        (
            "Departure: the paper's Fig. 4 panels are Cars (ViT-B/16) and iNat-120K (SqueezeNet), data we do not "
            "have; drawn on CIFAR-100 with the runs of Fig. 7. The paper's iNat statements (line 429: Fed-LP "
            "27.3% after 5000 rounds, FedCOF+LP 34% in < 1000 rounds) have no counterpart here.",
        ),
    )


# --- Fig. 3: full-model fine-tuning ------------------------------------------------------------------------

FT_DATASETS: dict[str, str] = {"ImageNet-R": "fedcof_imagenet_r_ft", "CUB200": "fedcof_cub200_ft"}
FT_SEEDS: tuple[int, ...] = (0, 1, 2)  # caption: "average accuracy of 3 random seeds"
#: Series label -> (method, algorithm) of the fedcof_<dataset>_ft protocols.
FT_SERIES: dict[str, tuple[str, str]] = {
    "FedAvg": ("ft", "fedavg"),
    "FedAdam": ("ft", "fedadam"),
    "FedNCM+FedAdam": ("fedncm_ft", "fedadam_init"),
    "Fed3R+FedAdam": ("fed3r_ft", "fedadam_init"),
    "FedCOF+FedAdam": ("fedcof_ft", "fedadam_init"),
}
#: CUB200 after FedNCM has its own client lr (App. J): the protocol's algorithm for it.
_FT_OVERRIDE = {("CUB200", "FedNCM+FedAdam"): ("fedncm_ft", "fedadam_init_fedncm")}
#: fedcof Table 4 (lines 403-410): accuracy after 100 rounds, 3 seeds; series -> dataset -> value.
PAPER_TABLE4: dict[str, dict[str, float]] = {
    "FedAvg": {"ImageNet-R": 30.0, "CUB200": 30.3},
    "FedAdam": {"ImageNet-R": 38.8, "CUB200": 46.4},
    "FedNCM+FedAdam": {"ImageNet-R": 44.7, "CUB200": 50.2},
    "Fed3R+FedAdam": {"ImageNet-R": 45.9, "CUB200": 51.2},
    "FedCOF+FedAdam": {"ImageNet-R": 46.0, "CUB200": 55.7},
}
_TABLE4_LINES = {
    "FedAvg": 403,
    "FedAdam": 404,
    "FedNCM+FedAdam": 408,
    "Fed3R+FedAdam": 409,
    "FedCOF+FedAdam": 410,
}


def fig3_unavailable(config: Mapping[str, Any]) -> str | None:
    if not training_allowed(config):
        return (
            "full-model fine-tuning (FedAvg / FedAdam, 100-200 rounds, 5 series x 2 datasets x 3 seeds) needs a GPU: "
            "--config device=cuda (or cpu_training=true)"
        )
    return None


def fig3_jobs(config: Mapping[str, Any]) -> dict[tuple[str, str], list[Any]]:
    """(dataset label, series label) -> the :class:`~benchmark.runners.fl_train.FLTrainJob` of each seed."""
    out: dict[tuple[str, str], list[Any]] = {}
    for ds_label, name in FT_DATASETS.items():
        proto = get_train_protocol(name)
        weights, why = choose_weights(proto.backbone, config.get("data_root"), config.get("weights_dir"))
        if weights is None:
            raise ConfigError(f"fedcof Fig. 3: {why}", "provide the weights (FLB_WEIGHTS_DIR)")
        for label, (method, algorithm) in FT_SERIES.items():
            method, algorithm = _FT_OVERRIDE.get((ds_label, label), (method, algorithm))
            lr_from = lr_source(proto, algorithm, method, config)
            out[(ds_label, label)] = [
                FLTrainJob(
                    dataset=proto.dataset,
                    model=proto.backbone,
                    weights=weights,
                    preprocess=run_preprocess(proto.preprocess, config),
                    subset=proto.subset,
                    protocol=name,
                    algorithm=algorithm,
                    method=method,
                    train_precision=str(config.get("train_precision", "fp32")),
                    ptag=partition_tag(proto.partition()),
                    lr_from=lr_from,
                    seed=s,
                )
                for s in FT_SEEDS
            ]
    return out


def fig3_inputs(config: Mapping[str, Any]) -> list[str]:
    """The runs' tidy outputs (the rule's declared output; each writes its ``.curve.csv`` beside it)."""
    return [j.path for jobs in fig3_jobs(config).values() for j in jobs]


def draw_fig3(config: Mapping[str, Any]):
    import pandas as pd  # local: heavy import (pandas)
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # local: heavy import (matplotlib)
    from matplotlib.figure import Figure  # local: heavy import (matplotlib)

    from benchmark.curves import INIT_STAGE, curves_data, mean_curve  # local: heavy import (pandas, torch)

    jobs = fig3_jobs(config)
    fig = Figure(figsize=(5.2 * len(FT_DATASETS), 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    frames, readings = [], []
    for j, ds_label in enumerate(FT_DATASETS):
        ax = fig.add_subplot(1, len(FT_DATASETS), j + 1)
        series = {label: [job.curve_path for job in jobs[(ds_label, label)]] for label in FT_SERIES}
        for i, (label, paths) in enumerate(series.items()):
            colour = f"C{i}"
            stages = mean_curve(paths, "round")
            for stage, (xs, mean, lo, hi) in stages.items():
                ax.plot(xs, mean, ":" if stage == INIT_STAGE else "-", color=colour,
                        label=label if stage != INIT_STAGE else None)  # fmt: skip
                ax.fill_between(xs, lo, hi, color=colour, alpha=0.15, linewidth=0)
                if stage != INIT_STAGE and INIT_STAGE in stages:
                    ax.plot(xs[:1], mean[:1], "*", color=colour, markersize=11)
            paper = PAPER_TABLE4[label][ds_label]
            ours = _final(series, label)
            readings.append(
                Reading(f"{label} ({ds_label})", 100, paper, ours, f"fedcof:{_TABLE4_LINES[label]}")
            )
            ax.plot([100], [paper], "D", color=colour, markeredgecolor="k", markersize=6)
        frames.append(curves_data(series, "round").assign(dataset=ds_label))
        ax.set_title(ds_label)
        ax.set_xlabel("communication rounds")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", title="diamonds: Table 4 at 100 rounds", title_fontsize="x-small")
    fig.suptitle("fedcof Fig. 3: fine-tuning after initialisation vs from a random head (SqueezeNet)")
    notes = (
        "ImageNet-R and CUB200 panels (Stanford Cars has no public download); FedAdam after each initialisation "
        "(App. J learning rates), FedAvg / FedAdam from a random head; 3 seeds, mean line, min-max band.",
        "Rounds as the fl_train protocols (Table 4's caption: 100 rounds for every method; the paper's Fig. 3 "
        "trains 200 rounds from a random head).",
    )
    return DrawnFigure(fig, pd.concat(frames, ignore_index=True), tuple(readings), notes)
