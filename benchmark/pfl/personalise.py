"""Personalisation of a trained federated model, client by client (fedbabu §3, Algorithm 2; reference
``analysis.ipynb``, cells 2 and 4).

* **initial**: each client's selected model (broadcast entries + its personal entries) on its test set;
* **personalised**: a *copy* for each client, fine-tuned for ``epochs`` (5, Table 4; varied in Table 6) with
  SGD lr 1e-3 (the reference notebook; the paper does not state it), momentum 0.9, no weight decay, batch 50,
  on the client's augmented training data, training ``part`` = ``full`` (the reference), ``body`` or ``head``
  (Table 4; the other part gets lr 0), then evaluated. ``part`` = ``sequential`` is Algorithm 2's FINE-TUNE
  for FedRep (lines 17 and 20-21): ``epochs`` epochs of the head alone, then one epoch of the body alone, one
  SGD throughout as FedRep's local update (:func:`benchmark.pfl.procedures.fedrep.fedrep_update`; the body epoch
  draws the batches keyed ``epochs``). No client's fine-tuning touches another client's model or the federated
  state.
* **ncm** (Table 12, "without classifier"): class templates = mean body feature of the client's (augmented,
  as the reference) training images per class (in index order, batches of 128); a test image gets the class
  of the nearest template: by cosine similarity over the client's classes (the paper, §5.1; the default) or
  by Euclidean ``cdist`` (the reference notebook; evaluation ``ncm_euclidean``). The reference returns a *count* of correct images that equals a
  percentage only with 100 test images per client; here it is a percentage.

* **per_fedavg_step** (``pfl_per_fedavg_eval: released_step``): the released ``main_per_fedavg.py``'s evaluation
  of Per-FedAvg (:func:`per_fedavg_step`), in place of the fine-tuning.

Random draws (the fine-tuning's batches, the templates' crops) come from the run's streams ``seed``
(:mod:`benchmark.pfl.streams`: ``data_order/fine_tune`` keyed by client and epoch, ``data_order/ncm_crops`` by
client; a bare seed is the keyed scheme).

Summary statistics are the mean and the **population** std (``np.std``, ddof 0) across clients, as the
reference prints them and the paper reports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from benchmark.errors import ConfigError
from benchmark.federated.images import DeviceImages, epoch_plan
from benchmark.pfl.local import LocalSGD, State, client_accuracies, clone_state, sgd_epochs, sgd_step
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.procedures.fedrep import fedrep_update
from benchmark.pfl.streams import FINE_TUNE, NCM_CROPS, PER_FEDAVG_STEP, PFLStreams, as_streams

#: What a fine-tuning trains: both parts jointly (``full``, Algorithm 2 line 16), one part (``body`` / ``head``,
#: Table 4), or FedRep's head epochs then one body epoch (``sequential``, Algorithm 2 lines 17 and 20-21).
PARTS = ("full", "body", "head", "sequential")


@dataclass(frozen=True)
class FineTune:
    """fedbabu's personalisation: ``part`` in :data:`PARTS`, ``epochs``, lr, momentum, batch size."""

    part: str = "full"
    epochs: int = 5
    lr: float = 1e-3
    momentum: float = 0.9
    batch_size: int = 50

    def __post_init__(self) -> None:
        if self.part not in PARTS and not (self.part == "none" and self.epochs == 0):
            raise ConfigError(f"fine-tuning part {self.part!r}", f"use one of: {', '.join(PARTS)}")

    def tag(self) -> str:
        return f"{self.part}-e{self.epochs}-lr{self.lr:g}-m{self.momentum:g}"

    def local_sgd(self, streams: int | PFLStreams) -> LocalSGD:
        """The fine-tuning as a local update (no weight decay; the part not tuned at lr 0)."""
        body = self.lr if self.part in ("full", "body", "sequential") else 0.0
        head = self.lr if self.part in ("full", "head", "sequential") else 0.0
        return LocalSGD(self.epochs, self.batch_size, body, head, self.momentum, 0.0, as_streams(streams))


def personalise(
    model: torch.nn.Module,
    train: DeviceImages,
    test: DeviceImages,
    split: ClientSplit,
    states: Callable[[int], State],
    ft: FineTune,
    seed: int | PFLStreams,
    eval_batch: int = 128,
    clients: list[int] | None = None,
) -> np.ndarray:
    """Per-client accuracy (percent) after fine-tuning each client's copy (module docstring). ``states(i)``
    must return a fresh dict (it is loaded, never mutated)."""
    out = []
    for i in clients if clients is not None else range(split.num_clients):
        model.load_state_dict(states(i))
        if ft.epochs > 0 and ft.part == "sequential":
            fedrep_update(model, train, split.train[i], ft.local_sgd(seed), (FINE_TUNE, i))
        elif ft.epochs > 0:
            sgd_epochs(model, train, split.train[i], ft.local_sgd(seed), (FINE_TUNE, i))
        tuned = clone_state(model)
        out.append(client_accuracies(model, test, (split.test[i],), lambda _j, s=tuned: s, eval_batch)[0])
    return np.asarray(out)


@dataclass(frozen=True)
class PerFedAvgStep:
    """The adaptation of the released Per-FedAvg evaluation (:func:`per_fedavg_step`): ``source`` is the client
    whose test images every client adapts on, ``lr`` and ``beta`` the two steps' learning rates."""

    source: int
    lr: float
    beta: float
    momentum: float = 0.9
    batch_size: int = 50


def per_fedavg_step(
    model: torch.nn.Module,
    test: DeviceImages,
    split: ClientSplit,
    states: Callable[[int], State],
    step: PerFedAvgStep,
    seed: int | PFLStreams,
    eval_batch: int = 128,
    clients: list[int] | None = None,
) -> np.ndarray:
    """Per-client accuracy after the released evaluation of Per-FedAvg (jhoon-oh/FedBABU ``main_per_fedavg.py``,
    e34c15b, "SGD one step with testset"; ``models/Update.py: LocalUpdatePerFedAvg.one_sgd_step``).

    Each client's copy of its model (``states(i)``) takes, in train mode, one SGD step (momentum
    ``step.momentum``, the released 0.9) at ``step.lr`` on a batch of ``step.batch_size`` test images of client
    ``step.source``, then one step at ``step.beta`` on the next batch of them (no restore between them: the second
    step's momentum carries the first gradient), and is tested on its own test images. The batches are the
    first two of a shuffle of the source's test images (the released ``DataLoader(shuffle=True)``, re-created for
    every client; where one batch holds them all, the second is the first of a fresh shuffle, as the released
    ``StopIteration`` handler takes it), drawn from ``data_order/per_fedavg_step`` keyed by the client adapted.

    The released loop passes ``dict_users_test[idx]`` with ``idx`` the last client its training loop visited:
    the same client's test images for every client (:func:`benchmark.pfl.run.per_fedavg_step_of` names it from
    the run's sampler). fedbabu's text describes a support / query split of each client's test set instead (the
    discussion of its Table 5), without its proportions or number of steps; that is not implemented. Departure
    from the released loop: one evaluation of the selected model, not one per round with the best round on the
    test sets kept."""
    streams = as_streams(seed)
    dev = test.images.device
    src = torch.as_tensor(split.test[step.source], device=dev)
    out = []
    for i in clients if clients is not None else range(split.num_clients):
        model.load_state_dict(states(i))
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=step.lr, momentum=step.momentum)
        first, second = _two_batches(len(src), step.batch_size, streams.batches(PER_FEDAVG_STEP, i))
        sgd_step(model, opt, *test.test_batch(src[first.to(dev)]))
        opt.param_groups[0]["lr"] = step.beta
        sgd_step(model, opt, *test.test_batch(src[second.to(dev)]))
        adapted = clone_state(model)
        out.append(client_accuracies(model, test, (split.test[i],), lambda _j, s=adapted: s, eval_batch)[0])
    return np.asarray(out)


def _two_batches(n: int, batch: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The first two batches a shuffling loader over ``n`` items yields, a fresh shuffle when one runs out."""
    if n == 0:
        raise ConfigError("the Per-FedAvg evaluation's source client has no test images", "check the partition")
    order = torch.randperm(n, generator=gen)
    if n > batch:
        return order[:batch], order[batch : 2 * batch]
    return order, torch.randperm(n, generator=gen)[:batch]


def ncm_accuracy(
    model: torch.nn.Module,
    train: DeviceImages,
    test: DeviceImages,
    split: ClientSplit,
    states: Callable[[int], State],
    num_classes: int,
    seed: int | PFLStreams,
    batch: int = 128,
    metric: str = "cosine",
) -> np.ndarray:
    """Per-client nearest-class-mean accuracy on body features (module docstring)."""
    out = []
    model.eval()
    dev = train.images.device
    with torch.no_grad():
        for i in range(split.num_clients):
            model.load_state_dict(states(i))
            feats, labels = [], []
            idx = torch.as_tensor(split.train[i], device=dev)
            for pos, crop, flip in epoch_plan(len(idx), batch, as_streams(seed).batches(NCM_CROPS, i), shuffle=False):
                x, y = train.train_batch(idx[pos.to(dev)], crop.to(dev), flip.to(dev))
                feats.append(model.features(x))
                labels.append(y)
            f, y = torch.cat(feats), torch.cat(labels)
            templates = torch.full((num_classes, f.shape[1]), -99.0, device=dev)
            present = torch.zeros(num_classes, dtype=torch.bool, device=dev)
            for c in y.unique():
                templates[c] = f[y == c].mean(0)
                present[c] = True
            tidx = torch.as_tensor(split.test[i], device=dev)
            correct = 0
            for s in range(0, len(tidx), batch):
                x, yt = test.test_batch(tidx[s : s + batch])
                correct += int((_nearest(model.features(x), templates, present, metric) == yt).sum())
            out.append(100.0 * correct / max(len(tidx), 1))
    return np.asarray(out)


def _nearest(f: torch.Tensor, templates: torch.Tensor, present: torch.Tensor, metric: str) -> torch.Tensor:
    """Class of the nearest template: ``cosine`` (the paper, §5.1: highest cosine similarity, over the classes
    the client has) or ``euclidean`` (the reference: ``cdist`` to every row, absent classes at -99)."""
    if metric == "euclidean":
        return torch.cdist(f, templates).argmin(1)
    if metric != "cosine":
        raise ValueError(f"ncm metric {metric!r}: use cosine or euclidean")
    sim = torch.nn.functional.normalize(f, dim=1) @ torch.nn.functional.normalize(templates, dim=1).T
    return sim.masked_fill(~present, float("-inf")).argmax(1)


def summary(acc: np.ndarray) -> tuple[float, float]:
    """Mean and population std (ddof 0) across clients."""
    return float(np.mean(acc)), float(np.std(acc))
