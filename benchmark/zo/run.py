"""One zeroth-order (or SLoRA) run as a job step: build the task and model, train, write the record.

The record (JSON, written atomically) holds the run's configuration, the encoder's and the data's
identities, the accuracy before training (FedNCM head) and after the last round, the measured traffic next
to the thesis's arithmetic (Eq. 6 / Eq. 7), provenance (commit taken at start, machine, versions) and the
wall time; the per-round curve goes to ``<record>.curve.csv``. Its shape is the one the recorded runs in
runs/ have (:class:`~benchmark.zo.history.ZORound` rows, written from the round loop's history).

FedMeZO, DistMeZO and SLoRA checkpoint through the round loop (:mod:`benchmark.federated.checkpoint`,
sealed: its sha256 is checked before it is read) every ``checkpoint_every`` rounds and resume from it
bit-identically (issue 25): FedMeZO's trainer state is the log (``(seed, average)`` per round: with the
initial model, the log *is* the model), replayed on resume; DistMeZO's the global model; SLoRA's the global
state of its stage. Centralised MeZO keeps its own loop (:mod:`benchmark.zo.centralised`) and no checkpoint.
The record and the curve carry a checksum sidecar (:func:`benchmark.io.atomic_path`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from benchmark.devices import pick_device
from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec, run_identity
from benchmark.federated.precision import ZO_PRECISION
from benchmark.io import atomic_path, atomic_write_json
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.registry import Registry
from benchmark.zo.centralised import run_mezo
from benchmark.zo.data import prepare_task
from benchmark.zo.distmezo import DistMeZOConfig, run_distmezo
from benchmark.zo.encoders import load_encoder
from benchmark.zo.fedmezo import FedMeZOConfig, run_fedmezo
from benchmark.zo.history import LogEntry, ZORunResult
from benchmark.zo.mezo import ZOConfig, parameters_sha256
from benchmark.zo.slora import SLoRAConfig, run_slora
from benchmark.zo.text_model import TextClassifier, TextTensors, ncm_head_
from benchmark.zo.transport import THESIS_NUMBER_BYTES, WireFormat, eq6_bytes_per_round

#: What a run of each method puts in its record (``initial_accuracy`` and the body), by method name: one
#: entry per algorithm of bernier2024 (FedMeZO, centralised MeZO, DistMeZO, SLoRA). A new method registers
#: here and is then a valid ``ZORunSpec.method`` (docs/extending.md).
ZO_RUNS: Registry[Callable[..., tuple[float | None, dict[str, Any]]]] = Registry("zeroth-order method")
#: The spec's fields that choose the task (:func:`~benchmark.zo.data.prepare_task`) and SLoRA's settings.
TASK_FIELDS = ("clients", "alpha", "seed", "k_shot", "max_length", "test_limit", "val_split")
SLORA_FIELDS = ("rounds", "priming_fraction", "density", "rank", "lr", "local_steps", "batch_size")
SLORA_FIELDS += ("optimizer", "seed", "eval_every")


@dataclass(frozen=True)
class ZORunSpec:
    """Everything a run depends on (the job's fields, typed)."""

    dataset: str
    encoder: str
    method: str
    clients: int
    alpha: float
    k_shot: int | None
    rounds: int
    lr: float
    seed: int
    eps: float = 1e-3
    num_z: int = 2
    local_steps: int = 1
    eval_every: int = 0
    head_scale: float = 1.0
    test_limit: int | None = None
    max_length: int = 128
    # SLoRA only
    density: float = 0.1
    priming_fraction: float = 0.2
    rank: int = 16
    batch_size: int = 16
    optimizer: str = "adamw"
    #: the validation set the task carries (:func:`~benchmark.zo.data.prepare_task`; issue 26), none by default
    val_split: str | None = None

    def __post_init__(self) -> None:
        if self.method not in ZO_RUNS:
            raise ConfigError(f"zeroth-order method {self.method!r}", f"use one of {ZO_RUNS.names()}")


def build_model(spec: ZORunSpec, device: str, data_root: str | Path | None):
    """The encoder (in :data:`~benchmark.federated.precision.ZO_PRECISION`'s dtype), the task, and the classifier
    with its FedNCM head (from the clients' feature sums)."""
    enc = load_encoder(spec.encoder, device="cpu", dtype=ZO_PRECISION.dtype)
    task_args = {k: getattr(spec, k) for k in TASK_FIELDS}
    task = prepare_task(spec.dataset, enc.tokenizer, data_root=data_root, **task_args)
    model = TextClassifier(enc.model, enc.spec.hidden, task.classes, enc.spec.pooling, enc.spec.normalize)
    model.to(device).eval()
    clients = [c.to(device) for c in task.clients]
    test = task.test.to(device)
    ncm_head_(model, clients, scale=spec.head_scale)
    return enc, task, model, clients, test


def _label(spec: ZORunSpec) -> str:
    return f"{spec.method} {spec.dataset} a={spec.alpha:g}"


def run_zo(
    spec: ZORunSpec,
    model: TextClassifier,
    clients: list[TextTensors],
    test: TextTensors,
    *,
    checkpoint: Path | None,
    checkpoint_every: int = 50,
    progress: bool = False,
) -> tuple[ZORunResult, list[LogEntry] | None]:
    """Run FedMeZO or DistMeZO (checkpointed at ``checkpoint`` and resumed from it) or centralised MeZO (no
    checkpoint); returns the result and FedMeZO's log (``None`` for the others, as their records say)."""
    zo = ZOConfig(lr=spec.lr, eps=spec.eps, num_z=spec.num_z)
    fed = FedMeZOConfig(zo, rounds=spec.rounds, seed=spec.seed, eval_every=spec.eval_every, wire=WireFormat())
    shown = {"progress": bool(progress), "label": _label(spec)}
    if spec.method == "mezo":
        return run_mezo(model, clients, fed, test, **shown), None
    saved = _checkpoint(spec, checkpoint, checkpoint_every)
    if spec.method == "distmezo":
        dist = DistMeZOConfig(fed, spec.local_steps)
        return run_distmezo(model, clients, dist, test, **shown, **saved), None
    result = run_fedmezo(model, clients, fed, test, **shown, **saved)
    return result, result.log


def _checkpoint(spec: ZORunSpec, checkpoint: Path | None, checkpoint_every: int) -> dict[str, Any]:
    """The checkpoint options of a run on the round loop: where and how often, and the run it belongs to."""
    every = CheckpointSpec(checkpoint, checkpoint_every) if checkpoint is not None else None
    identity = run_identity(asdict(spec), method=spec.method, stage="", start_round=0, rounds=spec.rounds)
    return {"checkpoint": every, "identity": identity}


def _slora(
    spec: ZORunSpec, model, clients, test, *, progress: bool, **ckpt: Any
) -> tuple[None, dict[str, Any]]:
    """SLoRA's record body (no accuracy before training is reported), checkpointed as :func:`run_zo` (``ckpt``:
    checkpoint, checkpoint_every)."""
    cfg = SLoRAConfig(**{k: getattr(spec, k) for k in SLORA_FIELDS})
    saved = _checkpoint(spec, **ckpt)
    res = run_slora(model, clients, test, cfg, show_progress=progress, label=_label(spec), **saved)
    accuracies = [r.test_accuracy for r in res.history if r.test_accuracy is not None]
    return None, {
        "final_accuracy": res.final_accuracy,
        "best_accuracy": max(accuracies, default=None),
        "rounds": [asdict(r) for r in res.history],
        "traffic": {
            "uplink_bytes": res.uplink_bytes,
            "downlink_bytes": res.downlink_bytes,
            "eq7_uplink_bytes": res.arithmetic_bytes,
        },
        "trainable_params_stage2": res.trainable_params_stage2,
    }


def _traffic(spec: ZORunSpec, result: ZORunResult) -> dict[str, Any]:
    t = result.traffic
    rounds = max(len(result.rounds), 1)
    numbers = (t.uplink_numbers + t.downlink_numbers) / rounds
    return {
        "uplink_bytes": t.uplink_bytes,
        "downlink_bytes": t.downlink_bytes,
        "uplink_numbers": t.uplink_numbers,
        "downlink_numbers": t.downlink_numbers,
        "rounds_measured": len(result.rounds),
        "numbers_per_round": numbers,
        "wire_bytes_per_round": (t.uplink_bytes + t.downlink_bytes) / rounds,
        "thesis_bytes_per_round": numbers * THESIS_NUMBER_BYTES,
        "eq6_bytes_per_round": eq6_bytes_per_round(spec.clients, spec.num_z),
        "wire": asdict(WireFormat()),
    }


def _zo(spec: ZORunSpec, model, clients, test, **run: Any) -> tuple[float | None, dict[str, Any]]:
    """The record body of FedMeZO, MeZO or DistMeZO (:func:`run_zo`, given ``run``: checkpoint, checkpoint_every,
    progress) and the accuracy before training."""
    result, log = run_zo(spec, model, clients, test, **run)
    return result.initial_accuracy, {
        "final_accuracy": result.final_accuracy,
        "best_accuracy": result.best_accuracy,
        "rounds": [asdict(r) for r in result.rounds],
        "traffic": _traffic(spec, result),
        "params_sha256": parameters_sha256(model),
        "extra": result.extra,
        "log_sha256": _log_digest(log) if log is not None else None,
    }


for _name in ("fedmezo", "mezo", "distmezo"):
    ZO_RUNS.add(_name, _zo)
ZO_RUNS.add("slora", _slora)


def train_step(
    spec: ZORunSpec,
    out: str | Path,
    *,
    device: str | None = None,
    data_root: str | Path | None = None,
    checkpoint: Path | None = None,
    checkpoint_every: int = 50,
    progress: bool = True,
    record_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``spec`` and write its record to ``out`` (and the curve beside it); ``record_extra``: more keys of
    the record (a validated run's selection)."""
    # provenance before training
    prov = {"machine": machine(), "versions": package_versions(), "git_commit": git_commit()}
    dev = str(pick_device(device))
    torch.manual_seed(0)  # nothing here draws from the global RNG; fixed anyway for third-party code
    start = time.time()
    enc, task, model, clients, test = build_model(spec, dev, data_root)
    run = {"checkpoint": checkpoint, "checkpoint_every": checkpoint_every, "progress": progress}
    initial, body = ZO_RUNS.get(spec.method)(spec, model, clients, test, **run)
    record = {
        "spec": asdict(spec),
        "method": spec.method,
        "dataset": spec.dataset,
        "initial_accuracy": initial,
        **body,
        "encoder": asdict(enc.identity),
        "encoder_params": enc.spec.params,
        "task": task.identity,
        "head_init": f"FedNCM class means x {spec.head_scale:g}",
        "device": dev,
        "torch_threads": torch.get_num_threads(),
        "wall_s": time.time() - start,
        **prov,
        **(record_extra or {}),
    }
    out = Path(out)
    with atomic_path(str(out).removesuffix(".json") + ".curve.csv", checksum=True) as tmp:
        _write_curve(tmp, record["rounds"])
    atomic_write_json(out, record, checksum=True)
    return record


def _log_digest(log: list[LogEntry]) -> str:
    text = json.dumps([[e.round, e.seed, list(e.average)] for e in log])
    return hashlib.sha256(text.encode()).hexdigest()


def _write_curve(path: Path, rounds: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "train_loss", "test_accuracy", "uplink_bytes", "downlink_bytes"])
        for r in rounds:
            acc = r.get("test_accuracy")
            row = [r["round"] + 1, r.get("train_loss"), "" if acc is None else acc]
            w.writerow([*row, r.get("uplink_bytes", 0), r.get("downlink_bytes", 0)])
