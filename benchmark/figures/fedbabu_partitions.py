"""fedbabu's data-distribution figures, drawn from this suite's own partitioners (:mod:`benchmark.pfl.partition`)
on the real CIFAR labels: no training, seconds of CPU, so they run in every tier.

* **Figure 14** (App. R, caption line 839, text line 836): "examples of data distribution of users according to
  the shards per user": 10 clients, CIFAR-10, ``s = 10`` (left) and ``s = 2`` (right). Drawn with
  :class:`~benchmark.pfl.partition.ShardsPartitioner` (10 clients; the paper's runs use 100), one stacked bar of
  training images per class for each client. The paper states the shard sizes (500 images for s = 10, 2,500 for
  s = 2) and the class bound (at most s classes per client): those are the readings, ours measured on the split.
* **Figures 10 and 11** (App. H, both captions on line 704, text line 702): the train and test data
  distributions of the Dirichlet non-IID CIFAR-100 of Table 18 (100 clients), ``beta = 1.0`` and ``0.5``. Drawn
  with :class:`~benchmark.pfl.partition.DirichletPartitioner` (the partition Table 18's cells train on), one
  marker per (client, class) whose area is the number of images. Departure: the paper calls the setting
  "unbalanced"; the reference repository has no Dirichlet code and our partitioner gives every client 500
  training and 100 test images (:mod:`benchmark.pfl.partition`), so only the class mix varies.

The pfl runner has no partition rule (a run partitions in memory, ``benchmark.pfl.run.load_run_data``), so the
figures compute the partition in ``draw`` from the dataset labels: ``inputs`` is empty and the data identity
(dataset checksum, partitioner, seed) goes into the notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.data.registry import load_dataset
from benchmark.figures.registry import DrawnFigure, Reading
from benchmark.pfl.partition import DirichletPartitioner, ShardsPartitioner

#: The partition seed (a run's seed 0: the partition of seed-0 runs).
SEED = 0
#: fedbabu App. R (line 836): 10 clients of CIFAR-10, s = 10 (left) and s = 2 (right).
FIG14_CLIENTS = 10
FIG14_SHARDS = (10, 2)
#: fedbabu App. H / Table 18 (line 704): 100 clients of CIFAR-100.
DIRICHLET_CLIENTS = 100
#: Figure name -> beta (captions on line 704).
DIRICHLET_BETAS = {"fedbabu_fig10": 1.0, "fedbabu_fig11": 0.5}


@dataclass(frozen=True)
class Labels:
    """The train / test labels of one dataset, its class names and its identity (checksums)."""

    dataset: str
    train: np.ndarray
    test: np.ndarray
    class_names: tuple[str, ...]
    checksum: str

    @classmethod
    def load(cls, dataset: str, config: Mapping[str, Any]) -> Labels:
        root = config.get("data_root")
        tr = load_dataset(dataset, "train", root)
        te = load_dataset(dataset, "test", root)
        return cls(dataset, np.asarray(tr.labels, dtype=np.int64), np.asarray(te.labels, dtype=np.int64),
                   tuple(tr.class_names), f"train {tr.checksum[:12]}, test {te.checksum[:12]}")  # fmt: skip

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


def class_counts(labels: np.ndarray, parts: tuple[np.ndarray, ...], num_classes: int) -> np.ndarray:
    """``(clients, classes)`` image counts of each client's index set."""
    return np.stack([np.bincount(labels[p], minlength=num_classes) for p in parts])


def _tidy(counts: np.ndarray, series: str) -> list[dict[str, Any]]:
    return [{"series": series, "x": i, "y": c, "count": int(counts[i, c])}
            for i, c in zip(*np.nonzero(counts), strict=True)]  # fmt: skip


# ------------------------------------------------------------------------------------------------ Figure 14
def shard_splits(labels: Labels) -> dict[int, np.ndarray]:
    """s -> the ``(clients, classes)`` training counts of the Figure 14 partition with s shards per client."""
    out = {}
    for s in FIG14_SHARDS:
        split = ShardsPartitioner(FIG14_CLIENTS, s)(labels.train, labels.test, SEED)
        out[s] = class_counts(labels.train, split.train, labels.num_classes)
    return out


def fig14_readings(counts: dict[int, np.ndarray]) -> tuple[Reading, ...]:
    """App. R (line 836): shard size 500 (s = 10) / 2,500 (s = 2), and at most s classes per client; ours from
    the split (a client holds s shards, so its images / s is its shard size)."""
    paper_shard = {10: 500.0, 2: 2500.0}
    out = []
    for s, c in counts.items():
        out.append(Reading(f"s={s}: images per shard", None, paper_shard[s], float(c.sum(1).mean() / s),
                           "fedbabu:836"))  # fmt: skip
        out.append(Reading(f"s={s}: classes per client, at most (paper: the bound; ours: the largest)", None, float(s), float((c > 0).sum(1).max()),
                           "fedbabu:836"))  # fmt: skip
    return tuple(out)


def draw_fig14(config: Mapping[str, Any]) -> DrawnFigure:
    import pandas as pd  # local: heavy import (pandas)

    labels = Labels.load("cifar10", config)
    counts = shard_splits(labels)
    fig, axes = new_figure(1, len(counts), figsize=(5.2 * len(counts), 3.8))
    colours = _class_colours(labels.num_classes)
    for ax, (s, c) in zip(axes, counts.items(), strict=True):
        clients = np.arange(c.shape[0])
        bottom = np.zeros(c.shape[0])
        for k in range(labels.num_classes):
            ax.bar(clients, c[:, k], bottom=bottom, color=colours[k], width=0.8,
                   label=labels.class_names[k], edgecolor="white", linewidth=0.3)  # fmt: skip
            bottom += c[:, k]
        ax.set_title(f"s = {s}: {s * FIG14_CLIENTS} shards of {int(c.sum() / (s * FIG14_CLIENTS))} images")
        ax.set_xlabel("client")
        ax.set_ylabel("training images")
        ax.set_xticks(clients)
    axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), title="class")
    fig.suptitle("fedbabu Fig. 14: CIFAR-10 over 10 clients by shards per client (this suite's partitioner)")
    rows = [r for s, c in counts.items() for r in _tidy(c, f"s={s}")]
    data = pd.DataFrame(rows)
    data["class_name"] = [labels.class_names[int(k)] for k in data["y"]]
    notes = (
        f"Drawn from benchmark.pfl.partition.ShardsPartitioner on the real CIFAR-10 labels ({labels.checksum}), "
        f"seed {SEED}, 10 clients as in the paper's example (its runs use 100); data: series = s, x = client, "
        "y = class, count = training images.",
        "Partition departure (benchmark.pfl.partition): seeded numpy draws; the reference shuffles with unseeded "
        "Python random, so its example differs in which client holds which classes.",
    )
    return DrawnFigure(fig, data, fig14_readings(counts), notes)


# ------------------------------------------------------------------------------------------- Figures 10-11
def dirichlet_counts(labels: Labels, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``(clients, classes)`` train and test counts of Table 18's Dirichlet partition with ``beta``."""
    split = DirichletPartitioner(DIRICHLET_CLIENTS, beta)(labels.train, labels.test, SEED)
    return (class_counts(labels.train, split.train, labels.num_classes),
            class_counts(labels.test, split.test, labels.num_classes))  # fmt: skip


def draw_dirichlet(name: str):
    beta = DIRICHLET_BETAS[name]

    def draw(config: Mapping[str, Any]) -> DrawnFigure:
        import pandas as pd  # local: heavy import (pandas)

        labels = Labels.load("cifar100", config)
        train, test = dirichlet_counts(labels, beta)
        fig, axes = new_figure(1, 2, figsize=(11, 5))
        for ax, (split, c) in zip(axes, (("train", train), ("test", test)), strict=True):
            im = ax.imshow(c.T, origin="lower", aspect="auto", cmap="Reds", interpolation="nearest")
            fig.colorbar(im, ax=ax, label="images", shrink=0.85)
            lo, hi = int(c.sum(1).min()), int(c.sum(1).max())
            ax.set_title(f"{split}: {int(c.sum())} images, {lo if lo == hi else f'{lo}-{hi}'} per client")
            ax.set_xlabel("client")
            ax.set_ylabel("class")
        fig.suptitle(f"fedbabu Fig. {name.removeprefix('fedbabu_fig')}: Dirichlet (beta = {beta}) CIFAR-100 over "
                     f"{DIRICHLET_CLIENTS} clients")  # fmt: skip
        data = pd.DataFrame(_tidy(train, "train") + _tidy(test, "test"))
        present = (train > 0).sum(1)
        notes = (
            f"Drawn from benchmark.pfl.partition.DirichletPartitioner(beta={beta}) on the real CIFAR-100 labels "
            f"({labels.checksum}), seed {SEED}, {DIRICHLET_CLIENTS} clients: the partition Table 18's cells use; "
            "data: series = split, x = client, y = class, count = images.",
            "Departure: the paper calls the setting unbalanced; this suite's partitioner (the reference repository "
            "has none) gives every client 500 training and 100 test images, so only the class mix varies.",
            f"Classes per client (train): {int(present.min())}-{int(present.max())}, mean {present.mean():.1f}; "
            f"the largest class share of a client: {float((train.max(1) / train.sum(1)).mean()):.3f} on average.",
            f"The {DIRICHLET_CLIENTS} x 500 training images are all of CIFAR-100, so the last clients draw from the "
            f"classes left over (benchmark.pfl.partition renormalises away exhausted classes): the last 10 clients "
            f"hold {present[-10:].mean():.1f} classes on average, the first 90 {present[:-10].mean():.1f}.",
        )
        return DrawnFigure(fig, data, (), notes)

    return draw


def new_figure(rows: int, cols: int, figsize: tuple[float, float]):
    """A matplotlib figure on the Agg canvas (object API, no pyplot) and its ``rows * cols`` axes, flat."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # local: heavy import (matplotlib)
    from matplotlib.figure import Figure  # local: heavy import (matplotlib)

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, list(axes.ravel())


def _class_colours(n: int) -> list[Any]:
    from matplotlib import colormaps  # local: heavy import (matplotlib)

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]
