"""The validation jobs' steps (issue 26): one FedMeZO curve per learning rate, the selection over them, and
the first-order ceiling; each writes one JSON record (atomically, with a checksum sidecar).

* :func:`curve_step`: :func:`benchmark.zo.validation.validation_curve` of one lr (the run's log kept);
* :func:`select_step`: :func:`~benchmark.zo.validation.choose` over the curves, then the chosen model rebuilt
  from the initial one by replaying its log up to the chosen round, and the **test set read once**, there;
* :func:`first_order_step`: :func:`benchmark.zo.first_order.first_order_selection`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from benchmark.errors import ConfigError
from benchmark.io import atomic_write_json, read_verified_json
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.zo.fedmezo import FedMeZOConfig, replay
from benchmark.zo.history import LogEntry
from benchmark.zo.mezo import ZOConfig, parameters_sha256
from benchmark.zo.run import ZORunSpec, build_model
from benchmark.zo.text_model import accuracy
from benchmark.zo.transport import WireFormat
from benchmark.zo.validation import (
    Choice,
    LRSelection,
    ValCurve,
    ValPoint,
    choose,
    status_of,
    validation_curve,
)


def _provenance() -> dict[str, Any]:
    return {"machine": machine(), "versions": package_versions(), "git_commit": git_commit()}


def _zo(spec: ZORunSpec) -> ZOConfig:
    return ZOConfig(lr=spec.lr, eps=spec.eps, num_z=spec.num_z)


def _val(task, spec: ZORunSpec):
    if task.val is None:
        raise ConfigError(f"run spec without a validation set ({spec.val_split!r})", "set val_split")
    return task.val


def curve_step(
    spec: ZORunSpec, val_every: int, out: str | Path, *, data_root=None, progress: bool = True
) -> dict:
    """One lr's validation curve (``spec.rounds`` FedMeZO rounds, no test evaluation) written to ``out``."""
    prov = _provenance()
    torch.manual_seed(0)
    start = time.time()
    enc, task, model, clients, _test = build_model(spec, "cpu", data_root)
    cfg = FedMeZOConfig(_zo(spec), rounds=spec.rounds, seed=spec.seed, eval_every=0, wire=WireFormat())
    curve = validation_curve(model, clients, _val(task, spec), cfg, val_every, progress=progress,
                             label=f"val-curve lr={spec.lr:g}")  # fmt: skip
    record = {
        "spec": asdict(spec), "val_every": val_every, "curve": asdict(curve),
        "params_sha256": parameters_sha256(model), "encoder": asdict(enc.identity), "task": task.identity,
        "torch_threads": torch.get_num_threads(), "wall_s": time.time() - start, **prov,
    }  # fmt: skip
    atomic_write_json(Path(out), record, checksum=True)
    return record


def curve_from_dict(raw: dict[str, Any]) -> ValCurve:
    return ValCurve(
        lr=float(raw["lr"]),
        points=tuple(ValPoint(**p) for p in raw["points"]),
        log=tuple(LogEntry(int(e["round"]), int(e["seed"]), tuple(e["average"])) for e in raw["log"]),
        wall_s=float(raw.get("wall_s", 0.0)),
    )


def selection_from_dict(raw: dict[str, Any]) -> LRSelection:
    """The :class:`LRSelection` a selection record holds (its ``selection`` key)."""
    return LRSelection(**{
        **raw,
        "grid": tuple(raw["grid"]),
        "curves": tuple(curve_from_dict(c) for c in raw["curves"]),
        "chosen": Choice(**raw["chosen"]),
        "notes": tuple(raw.get("notes", ())),
    })  # fmt: skip


def select_step(
    spec: ZORunSpec, curve_paths: list[str], val_every: int, out: str | Path, *, data_root=None
) -> dict[str, Any]:
    """Choose (lr, round) over the curves of ``curve_paths``, rebuild the chosen model (initial model + the
    chosen curve's log up to the round), read the test set once there; write the selection to ``out``."""
    prov = _provenance()
    start = time.time()
    records = [read_verified_json(p) for p in curve_paths]
    curves = tuple(curve_from_dict(r["curve"]) for r in records)
    chosen = choose(curves)
    status = status_of(curves, chosen)
    run = next(c for c in curves if c.lr == chosen.lr)
    enc, task, model, _clients, test = build_model(spec, "cpu", data_root)
    replay(model, run.log[: chosen.round], ZOConfig(lr=chosen.lr, eps=spec.eps, num_z=spec.num_z))
    test_acc = accuracy(model, test)
    val = _val(task, spec)
    passes = 2 * spec.num_z * spec.rounds
    train_n = sum(task.identity["client_sizes"])
    sel = LRSelection(
        method=spec.method, grid=tuple(c.lr for c in curves), rounds=spec.rounds, val_every=val_every,
        val_split=str(task.identity.get("val_split")), val_examples=len(val), curves=curves, chosen=chosen,
        initial_val_accuracy=curves[0].points[0].accuracy, status=status, test_accuracy=test_acc,
        test_examples=len(test),
        budget={"rounds_per_lr": spec.rounds, "forward_passes_per_lr": passes,
                "train_examples": train_n, "example_passes_per_lr": passes * train_n,
                "curve_wall_s": sum(c.wall_s for c in curves)},
        notes=(f"selection run on the alpha={spec.alpha:g} partition; FedMeZO's update does not depend on it",
               "test read once, at the chosen point (model rebuilt by replaying the chosen run's log)"),
    )  # fmt: skip
    record = {
        "spec": asdict(spec), "selection": asdict(sel), "summary": sel.summary(),
        "chosen_params_sha256": parameters_sha256(model), "curve_records": list(curve_paths),
        "encoder": asdict(enc.identity), "task": task.identity, "wall_s": time.time() - start, **prov,
    }  # fmt: skip
    atomic_write_json(Path(out), record, checksum=True)
    return record


def first_order_step(spec: ZORunSpec, config, out: str | Path, *, data_root=None) -> dict[str, Any]:
    """The first-order ceiling (:func:`benchmark.zo.first_order.first_order_selection`) on the examples of
    ``spec``'s task, from the same FedNCM-initialised model; written to ``out``."""
    from benchmark.zo.first_order import first_order_selection, union

    prov = _provenance()
    start = time.time()
    torch.manual_seed(0)
    enc, task, model, clients, test = build_model(spec, "cpu", data_root)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def fresh():
        model.load_state_dict(initial)
        return model

    sel = first_order_selection(fresh, union(clients), _val(task, spec), test, config)
    sel = dataclasses.replace(sel, val_split=str(task.identity.get("val_split")))
    record = {
        "spec": asdict(spec), "first_order": asdict(config), "selection": asdict(sel), "summary": sel.summary(),
        "encoder": asdict(enc.identity), "task": task.identity, "torch_threads": torch.get_num_threads(),
        "wall_s": time.time() - start, **prov,
    }  # fmt: skip
    atomic_write_json(Path(out), record, checksum=True)
    return record
