"""MeZO's own step on a small model (issue 26, ``flb peer mezo``): the released trainer's step methods, bound to
a stand-in for the trainer object.

princeton-nlp/MeZO's ``large_models/trainer.py`` subclasses the Hugging Face ``Trainer`` of transformers 4.28,
which current Python and transformers cannot import. The four methods that make a MeZO step,
``zo_perturb_parameters``, ``zo_forward``, ``zo_step`` and ``zo_update`` of its trainer class, use nothing of
that ``Trainer`` but a few attributes (``args.zo_eps``, ``args.non_diff``, ``args.n_gpu``,
``args.gradient_accumulation_steps``, ``args.weight_decay``, ``_prepare_inputs``,
``compute_loss_context_manager``, ``compute_loss``, ``_get_learning_rate``, ``lr_scheduler.step``) and the
modules ``torch`` and ``np``. So this driver reads the trainer file **from the user's checkout at run time**,
takes those four function definitions out of its class with :mod:`ast` (nothing else of the file is executed,
nothing of it is kept in this repository), compiles them with ``torch`` and ``numpy`` as their globals, and
binds them to :class:`StandIn`, which has exactly those attributes:

* ``compute_loss(model, inputs)`` is the loss the suite's side uses (:func:`benchmark.zo.text_model.mean_loss`:
  mean cross-entropy accumulated in float64), returned as a float64 tensor, as the trainer's ``compute_loss``
  returns the model's loss; every value it returns is kept (the step's loss pair);
* the learning rate is constant (MeZO's runs use a constant schedule), ``lr_scheduler.step`` does nothing.

A step is what the trainer's loop does: ``zo_step(model, inputs)`` then ``zo_update(model)``; the step's seed is
the trainer's own ``np.random.randint(1000000000)`` from numpy's global generator, seeded here with the run
seed (Hugging Face's ``set_seed`` seeds it the same way); it is read back from ``zo_random_seed`` after each
step and given to the suite's side. Run as a script: ``python mezo_driver.py SPEC.json`` writes the result
JSON named in the spec. The driver imports this suite (:mod:`benchmark.peers.mezo` builds the model and the
examples) and runs in its environment: the four methods need only torch and numpy.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

TRAINER_FILE = "large_models/trainer.py"
TRAINER_CLASS = "OurTrainer"
STEP_METHODS = ("zo_perturb_parameters", "zo_forward", "zo_step", "zo_update")


def step_methods(checkout: str | Path) -> dict[str, Callable[..., Any]]:
    """The four step methods of the trainer class in ``checkout``, compiled on their own (module docstring)."""
    path = Path(checkout) / TRAINER_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass a checkout of princeton-nlp/MeZO")
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == TRAINER_CLASS), None)
    if cls is None:
        raise LookupError(f"{path} defines no class {TRAINER_CLASS}")
    found = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in STEP_METHODS]
    missing = sorted(set(STEP_METHODS) - {n.name for n in found})
    if missing:
        raise LookupError(f"{path}: {TRAINER_CLASS} has no {', '.join(missing)}")
    namespace: dict[str, Any] = {"torch": torch, "np": np}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)
    return {name: namespace[name] for name in STEP_METHODS}


class StandIn:
    """What the four methods read of their trainer (module docstring)."""

    def __init__(self, loss: Callable[[torch.nn.Module, Any], float], lr: float, eps: float,
                 weight_decay: float = 0.0) -> None:  # fmt: skip
        self.args = types.SimpleNamespace(
            zo_eps=eps, non_diff=False, n_gpu=1, gradient_accumulation_steps=1, weight_decay=weight_decay
        )
        self.lr_scheduler = types.SimpleNamespace(step=lambda: None)
        self._loss = loss
        self._lr = lr
        self.losses: list[float] = []

    def _prepare_inputs(self, inputs: Any) -> Any:
        return inputs

    def compute_loss_context_manager(self):
        return contextlib.nullcontext()

    def compute_loss(self, model: torch.nn.Module, inputs: Any) -> torch.Tensor:
        value = float(self._loss(model, inputs))
        self.losses.append(value)
        return torch.tensor(value, dtype=torch.float64)

    def _get_learning_rate(self) -> float:
        return self._lr


def bind(checkout: str | Path, stand_in: StandIn) -> StandIn:
    """``stand_in`` with the released step methods bound to it."""
    for name, fn in step_methods(checkout).items():
        setattr(stand_in, name, types.MethodType(fn, stand_in))
    return stand_in


def params_sha256(model: torch.nn.Module) -> str:
    """sha256 over every parameter's name and bytes in ``named_parameters()`` order."""
    h = hashlib.sha256()
    for name, param in model.named_parameters():
        h.update(name.encode())
        h.update(param.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def their_steps(checkout: str | Path, model: torch.nn.Module, inputs: Any,
                loss: Callable[[torch.nn.Module, Any], float], *, steps: int, lr: float, eps: float,
                weight_decay: float = 0.0, seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """``steps`` MeZO steps of the released code on ``model`` (in place) with one batch ``inputs``: per step
    the seed, the loss pair and the projected gradient; the parameters' sha256 before and after."""
    trainer = bind(checkout, StandIn(loss, lr, eps, weight_decay))
    np.random.seed(seed)
    torch.manual_seed(seed)
    start = time.time()
    before = params_sha256(model)
    rows = []
    for step in range(1, steps + 1):
        n = len(trainer.losses)
        loss1 = trainer.zo_step(model, inputs)
        trainer.zo_update(model)
        pair = trainer.losses[n:]
        rows.append({"step": step, "seed": int(trainer.zo_random_seed), "loss1": float(loss1),
                     "loss2": pair[1], "projected_grad": float(trainer.projected_grad)})  # fmt: skip
    return {"steps": rows, "params_sha256_before": before, "params_sha256": params_sha256(model),
            "wall_s": time.time() - start}  # fmt: skip


def main(argv: list[str]) -> int:
    """``mezo_driver.py SPEC.json``: build the spec's case (:func:`benchmark.peers.mezo.build_case`), run the
    released steps on it, write the result JSON to ``spec["out"]``."""
    spec = json.loads(Path(argv[1]).read_text())
    torch.set_num_threads(int(spec.get("threads", 1)))
    from benchmark.peers.mezo import build_case  # this suite's model and examples (module docstring)

    model, batch, loss = build_case(spec["case"])
    result = their_steps(spec["checkout"], model, batch, loss, steps=int(spec["steps"]), lr=float(spec["lr"]),
                         eps=float(spec["eps"]), weight_decay=float(spec.get("weight_decay", 0.0)),
                         seed=int(spec["seed"]))  # fmt: skip
    if spec.get("save_params"):
        torch.save({k: v.detach().clone() for k, v in model.named_parameters()}, spec["save_params"])
    Path(spec["out"]).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
