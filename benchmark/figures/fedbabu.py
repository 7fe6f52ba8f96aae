"""fedbabu's figures (Oh et al., ICLR 2022; ``../shared/papers/004_*.txt``), all 16, registered in
:mod:`benchmark.figures.registry`. Lines are the captions' 1-based lines.

Drawn here:

* **Fig. 14** (line 839) and **Figs. 10-11** (line 704, one line for both): the data distributions of the
  shards and Dirichlet partitions, from this suite's partitioners on the real labels
  (:mod:`benchmark.figures.fedbabu_partitions`; seconds of CPU, every tier).
* **Figs. 2-9** (lines 109, 471, 545, 548, 657-666): centralised test-accuracy curves by update part
  (full / body / head) and, body only, by head initialisation, from centralised training runs
  (:mod:`benchmark.figures.fedbabu_central`); training, so NOT RUN unless ``training_allowed(config)``.

Catalogued with the reason they are not drawn: Fig. 1 (a diagram), Fig. 12 (layer-wise similarity between
clients during fine-tuning), Fig. 13 (in-class / out-of-class accuracy during local updates), Figs. 15-16 (t-SNE
of trained models): what the pfl runs would have to record is in each reason.
"""

from __future__ import annotations

from benchmark.figures import fedbabu_central as central
from benchmark.figures import fedbabu_partitions as parts
from benchmark.figures.registry import FigureSpec, register_figure

PAPER = "fedbabu"

register_figure(FigureSpec(
    name="fedbabu_fig1", paper=PAPER, label="Figure 1", line=30,
    title="FedAvg vs FedBABU local update and aggregation (decision boundaries of the head)",
    reason="a diagram of the two algorithms' local update and aggregation (no data)",
))  # fmt: skip

# ------------------------------------------------------------------ centralised curves (training runs)
_CENTRAL = {  # name -> (line, title)
    "fedbabu_fig2": (
        109,
        "MobileNet, CIFAR-100, centralised: test accuracy vs epoch by update part (full / body / head)",
    ),
    "fedbabu_fig3": (
        471,
        "MobileNet, CIFAR-100, centralised, body only: test accuracy vs epoch by head initialisation",
    ),
    "fedbabu_fig4": (
        545,
        "4convNet, CIFAR-10, centralised: test accuracy vs epoch by update part (full / body / head)",
    ),
    "fedbabu_fig5": (
        548,
        "4convNet, CIFAR-10, centralised, body only: test accuracy vs epoch by head initialisation",
    ),
    "fedbabu_fig6": (
        657,
        "ResNet18, CIFAR-100, centralised: test accuracy vs epoch by update part (full / body / head)",
    ),
    "fedbabu_fig7": (
        660,
        "ResNet18, CIFAR-100, centralised, body only: test accuracy vs epoch by head initialisation",
    ),
    "fedbabu_fig8": (
        663,
        "ResNet50, CIFAR-100, centralised: test accuracy vs epoch by update part (full / body / head)",
    ),
    "fedbabu_fig9": (
        666,
        "ResNet50, CIFAR-100, centralised, body only: test accuracy vs epoch by head initialisation",
    ),
}
for _name, (_line, _title) in _CENTRAL.items():
    register_figure(FigureSpec(
        name=_name, paper=PAPER, label=f"Figure {_name.removeprefix('fedbabu_fig')}", line=_line, title=_title,
        draw=central.draw(_name), inputs=central.inputs(_name), unavailable=central.unavailable(_name),
    ))  # fmt: skip

# ------------------------------------------------------------------------------ data distributions (every tier)
for _number, _beta in ((10, "1.0"), (11, "0.5")):
    register_figure(FigureSpec(
        name=f"fedbabu_fig{_number}", paper=PAPER, label=f"Figure {_number}", line=704,
        title=f"Dirichlet (beta = {_beta}) CIFAR-100 over 100 clients: train / test images per client and class "
              "(this suite's partitioner, real labels)",
        draw=parts.draw_dirichlet(f"fedbabu_fig{_number}"),
    ))  # fmt: skip
register_figure(FigureSpec(
    name="fedbabu_fig14", paper=PAPER, label="Figure 14", line=839,
    title="CIFAR-10 over 10 clients with s = 10 and s = 2 shards per client: training images per client and "
          "class (this suite's partitioner, real labels)",
    draw=parts.draw_fig14,
))  # fmt: skip

# ------------------------------------------------------------------------------------ not drawable here
_FINETUNE_RECORD = (
    "the pfl evaluation records (benchmark/pfl/personalise.py) keep only each client's accuracy after "
    "fine-tuning"
)
register_figure(FigureSpec(
    name="fedbabu_fig12", paper=PAPER, label="Figure 12", line=750,
    title="Layer-wise cosine similarity between clients' models during 20 fine-tuning epochs (FedAvg, FedBABU; "
          "MobileNet, CIFAR-100, f = 0.1, tau = 10)",
    reason=(
        f"not recorded: {_FINETUNE_RECORD}; the figure needs, per fine-tuning epoch (20, App. K) and per layer, "
        "the cosine similarity between the clients' fine-tuned parameters (or the per-client states per epoch), "
        "from MobileNet CIFAR-100 FedAvg / FedBABU runs (f = 0.1, tau = 10)"
    ),
))  # fmt: skip
register_figure(FigureSpec(
    name="fedbabu_fig13", paper=PAPER, label="Figure 13", line=813,
    title="In-class / out-of-class test accuracy during federated training by heterogeneity (s = 100, 50, 10; "
          "FedAvg, FedBABU; CIFAR-100)",
    reason=(
        "not recorded: the pfl training records (benchmark/pfl/run.py history) hold one accuracy per round, of the "
        "aggregated model on the clients' own test sets (in-class only); App. P needs, per local epoch and right "
        "after broadcast, each selected client's accuracy on the whole 10,000-image test set split into its "
        "in-class and out-of-class images, for s = 100, 50 and 10 (MobileNet, f = 0.1, tau = 10)"
    ),
))  # fmt: skip
_TSNE = (
    "needs the trained FedAvg and FedBABU models of CIFAR-10 (4convNet, s = 2) and CIFAR-100 (MobileNet, s = 10), "
    "f = 0.1, tau = 10 (not trained here; the only CPU runs, docs/runs/fedbabu_cpu, are 4convNet CIFAR-10 s = 10 "
    "and their model states are not kept) and a t-SNE of their test representations (the paper used t-SNE-CUDA); a qualitative picture "
    "with no value to compare"
)
register_figure(FigureSpec(
    name="fedbabu_fig15", paper=PAPER, label="Figure 15", line=870,
    title="t-SNE of FedAvg / FedBABU representations (CIFAR-10 s = 2, CIFAR-100 s = 10)", reason=_TSNE,
))  # fmt: skip
register_figure(FigureSpec(
    name="fedbabu_fig16", paper=PAPER, label="Figure 16", line=873,
    title="t-SNE of FedAvg / FedBABU representations of the 'vehicle' sub-classes", reason=_TSNE,
))  # fmt: skip
