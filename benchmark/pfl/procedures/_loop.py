"""Pieces the local procedures share: a client's augmented batches (the reference's ``DataLoader`` over
``DatasetSplit``, drawn by :func:`~benchmark.pfl.data.epoch_plan`), one SGD step, and the checks of the
configuration knobs a procedure does not implement."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from benchmark.errors import ConfigError
from benchmark.pfl.data import DeviceImages, epoch_plan

if TYPE_CHECKING:
    from benchmark.pfl.algorithms import Algorithm
    from benchmark.pfl.trainer import PFLConfig

Batch = tuple[torch.Tensor, torch.Tensor]


def epoch_batches(
    data: DeviceImages, idx: np.ndarray, batch_size: int, seed: int, *keys: int
) -> Iterator[Batch]:
    """One pass over the client's images ``idx``: shuffled, cropped and flipped by the draws keyed by
    ``(seed, *keys)`` (the last batch may be short, as the reference's ``DataLoader``)."""
    dev = data.images.device
    idx_t = torch.as_tensor(idx, device=dev)
    for pos, crop, flip in epoch_plan(len(idx), batch_size, seed, *keys):
        yield data.train_batch(idx_t[pos.to(dev)], crop.to(dev), flip.to(dev))


def batch_stream(
    data: DeviceImages, idx: np.ndarray, batch_size: int, seed: int, *keys: int
) -> Iterator[Batch]:
    """Batches without end: pass ``p`` (0, 1, ...) is :func:`epoch_batches` keyed by ``(*keys, p)`` -- the
    reference's ``next(it)`` that re-creates the ``DataLoader`` iterator (a fresh shuffle) when it runs out."""
    if len(idx) == 0:
        raise ConfigError("a client without training images", "re-partition so that every client has data")
    p = 0
    while True:
        yield from epoch_batches(data, idx, batch_size, seed, *keys, p)
        p += 1


def sgd_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy on ``(x, y)``, backward, one optimiser step; the (detached) loss."""
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def mean_loss(losses: list[torch.Tensor]) -> float:
    return float(torch.stack(losses).mean()) if losses else float("nan")


def clone_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def require(
    cfg: PFLConfig, algo: Algorithm, method: str, *, aggregate: tuple[str, ...], weight_decay: bool
) -> None:
    """One :class:`ConfigError` for a knob ``method`` does not implement: a proximal term, a head lr ratio, weight
    decay (unless ``weight_decay``), or an aggregated part other than ``aggregate``."""
    mu = cfg.prox_mu if cfg.prox_mu is not None else algo.prox_mu
    if mu:
        raise ConfigError(f"{method}: prox_mu={mu}", "leave prox_mu unset (FedProx is its own algorithm)")
    if cfg.head_lr_ratio != 1.0:
        raise ConfigError(
            f"{method}: head_lr_ratio={cfg.head_lr_ratio}", "use 1.0 (the procedure sets its own lrs)"
        )
    if cfg.weight_decay and not weight_decay:
        raise ConfigError(f"{method}: weight_decay={cfg.weight_decay}",
                          "use 0 (the reference's procedure has no weight decay)")  # fmt: skip
    if algo.aggregate_part not in aggregate:
        raise ConfigError(
            f"{method}: aggregate_part={algo.aggregate_part!r}", f"use one of {list(aggregate)}"
        )
