"""The first-order ceiling of a zeroth-order cell (issue 26, point 3): the same model fine-tuned by
backpropagation on the same examples, lr and step chosen on the same validation set.

MeZO (Malladi et al. 2023, Table 1 "FT") compares with full fine-tuning by Adam on the same k-shot examples
(RoBERTa-large: batch 8, 1,000 steps, lr grid {1e-5, 5e-5}, checkpoint chosen on the dev set). Here: every
parameter of the substitute classifier (encoder + the FedNCM-initialised head, as FedMeZO starts), AdamW
(``weight_decay`` 0), batch ``batch_size`` drawn from a seeded permutation per epoch of the union of the
clients' examples (centralised: the ceiling, not a federated method), dropout on in training (the encoder's
train mode), ``steps`` steps per lr, validation before training and every ``val_every`` steps, the (lr, step)
chosen by :func:`benchmark.zo.validation.choose` and the test set read once at it. The result is an
:class:`~benchmark.zo.validation.LRSelection` whose rounds are steps.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from benchmark.errors import ConfigError
from benchmark.seeding import numpy_rng
from benchmark.zo.text_model import TextTensors, accuracy, accuracy_and_loss
from benchmark.zo.validation import LRSelection, ValCurve, ValPoint, choose, status_of, validation_points


@dataclass(frozen=True)
class FirstOrderConfig:
    """The ceiling's fine-tuning: lr grid, steps per lr (the budget), batch size, validation cadence."""

    grid: tuple[float, ...]
    steps: int
    batch_size: int = 8
    val_every: int = 25
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.grid or min(self.grid) <= 0 or self.steps < 1 or self.batch_size < 1:
            raise ConfigError(
                f"FirstOrderConfig grid={self.grid}, steps={self.steps}, batch={self.batch_size}",
                "give positive learning rates, steps >= 1 and batch_size >= 1",
            )


def union(parts: Sequence[TextTensors]) -> TextTensors:
    """The clients' examples as one set (client order), right-padded to the longest."""
    parts = [p for p in parts if len(p)]
    if not parts:
        raise ConfigError("no training examples", "give the clients some data")
    width = max(p.input_ids.shape[1] for p in parts)

    def pad(t: torch.Tensor) -> torch.Tensor:
        return F.pad(t, (0, width - t.shape[1]))

    return TextTensors(
        torch.cat([pad(p.input_ids) for p in parts]),
        torch.cat([pad(p.attention_mask) for p in parts]),
        torch.cat([p.labels for p in parts]),
    )


def batches(n: int, batch_size: int, steps: int, seed: int) -> list[np.ndarray]:
    """``steps`` batches of indices: a fresh seeded permutation of ``range(n)`` per epoch, cut in order."""
    rng = numpy_rng(seed, "first-order-batches")
    out: list[np.ndarray] = []
    while len(out) < steps:
        perm = rng.permutation(n)
        out += [perm[i : i + batch_size] for i in range(0, n, batch_size)]
    return out[:steps]


def finetune_curve(
    model: nn.Module, train: TextTensors, val: TextTensors, lr: float, config: FirstOrderConfig
) -> tuple[ValCurve, dict[int, dict[str, torch.Tensor]]]:
    """Fine-tune ``model`` in place at ``lr``; the validation curve and the weights at its best point."""
    start = time.time()
    due = set(validation_points(config.val_every, config.steps))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    torch.manual_seed(config.seed)  # dropout masks: the only draw from the global generator
    points = [ValPoint(0, *accuracy_and_loss(model, val))]
    states = {0: copy.deepcopy(model.state_dict())}  # the curve's best point's weights only (memory)
    for step, index in enumerate(batches(len(train), config.batch_size, config.steps, config.seed), start=1):
        part = train.subset(index)
        model.train()
        loss = F.cross_entropy(model(part.input_ids, part.attention_mask).float(), part.labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step in due:
            points.append(ValPoint(step, *accuracy_and_loss(model, val), float(loss.detach())))
            if ValCurve(lr, tuple(points)).best().round == step:
                states = {step: copy.deepcopy(model.state_dict())}
    model.eval()
    return ValCurve(lr, tuple(points), (), time.time() - start), states


def first_order_selection(
    make_model, train: TextTensors, val: TextTensors, test: TextTensors, config: FirstOrderConfig
) -> LRSelection:
    """Every lr of the grid from a fresh ``make_model()``; the (lr, step) chosen on validation; test there."""
    curves, best_state, best = [], None, None
    for lr in config.grid:
        model = make_model()
        curve, states = finetune_curve(model, train, val, lr, config)
        curves.append(curve)
        chosen = choose(curves)
        if best is None or chosen != best:
            best = chosen
            if chosen.lr == lr:  # a new best is a point of the newest curve, and that curve's best point
                best_state = states[chosen.round]
        del states
    assert best is not None
    model = make_model()
    if best_state is not None:
        model.load_state_dict(best_state)
    return LRSelection(
        method=f"first-order (AdamW, batch {config.batch_size}, all parameters)", grid=tuple(config.grid), unit="steps",
        rounds=config.steps, val_every=config.val_every, val_split="", val_examples=len(val),
        curves=tuple(curves), chosen=best, initial_val_accuracy=curves[0].points[0].accuracy,
        status=status_of(curves, best), test_accuracy=accuracy(model, test), test_examples=len(test),
        budget={"steps_per_lr": config.steps, "batch_size": config.batch_size, "train_examples": len(train),
                "curve_wall_s": sum(c.wall_s for c in curves)},
    )  # fmt: skip
