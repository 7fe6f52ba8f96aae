"""One zeroth-order (or SLoRA) run as a job step: build the task and model, train, write the record.

The record (JSON, written atomically) holds the run's configuration, the encoder's and the data's
identities, the accuracy before training (FedNCM head) and after the last round, the measured traffic next
to the thesis's arithmetic (Eq. 6 / Eq. 7), provenance (commit taken at start, machine, versions) and the
wall time; the per-round curve goes to ``<record>.curve.csv``. A FedMeZO run checkpoints its log
(``(seed, average)`` per round: with the initial model, the log *is* the model) every ``checkpoint_every``
rounds and resumes by replaying it. The checkpoint is sealed (:func:`benchmark.io.write_sealed`: its sha256
is checked before it is parsed, so a flipped digit of a seed or an average is an error, not another model);
the record and the curve carry a checksum sidecar (:func:`benchmark.io.atomic_path`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from benchmark.errors import ConfigError
from benchmark.io import atomic_path, atomic_write_json, read_sealed, write_sealed
from benchmark.zo.transport import THESIS_NUMBER_BYTES, WireFormat, eq6_bytes_per_round

ZO_METHODS = ("fedmezo", "mezo", "distmezo")
METHODS = (*ZO_METHODS, "slora")


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

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"zeroth-order method {self.method!r}", f"use one of {METHODS}")


def _provenance() -> dict[str, Any]:
    from benchmark.provenance import git_commit, machine, package_versions

    return {"machine": machine(), "versions": package_versions(), "git_commit": git_commit()}


def build_model(spec: ZORunSpec, device: str, data_root: str | Path | None):
    """The encoder, the task, and the classifier with its FedNCM head (from the clients' feature sums)."""
    from benchmark.zo.data import prepare_task
    from benchmark.zo.encoders import load_encoder
    from benchmark.zo.text_model import TextClassifier, ncm_head_

    enc = load_encoder(spec.encoder, device="cpu")
    task = prepare_task(
        spec.dataset, enc.tokenizer, clients=spec.clients, alpha=spec.alpha, seed=spec.seed, k_shot=spec.k_shot,
        max_length=spec.max_length, data_root=data_root, test_limit=spec.test_limit,
    )  # fmt: skip
    model = TextClassifier(enc.model, enc.spec.hidden, task.classes, enc.spec.pooling, enc.spec.normalize)
    model = model.to(device).eval()
    clients = [c.to(device) for c in task.clients]
    test = task.test.to(device)
    ncm_head_(model, clients, scale=spec.head_scale)
    return enc, task, model, clients, test


def _zo_config(spec: ZORunSpec):
    from benchmark.zo.fedmezo import FedMeZOConfig
    from benchmark.zo.mezo import ZOConfig

    zo = ZOConfig(lr=spec.lr, eps=spec.eps, num_z=spec.num_z)
    return FedMeZOConfig(
        zo, rounds=spec.rounds, seed=spec.seed, eval_every=spec.eval_every, wire=WireFormat()
    )


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write a FedMeZO checkpoint (JSON, sealed)."""
    write_sealed(path, (json.dumps(state, indent=2, sort_keys=True, default=str) + "\n").encode())


def _load_checkpoint(path: Path | None, spec: ZORunSpec) -> dict[str, Any]:
    """A FedMeZO checkpoint: ``{"spec", "log", "rounds", "initial_accuracy"}`` (empty when absent); its
    sha256 is checked first (a corrupt, truncated or unsealed one is a ``CorruptFileError`` naming it)."""
    if path is None or not path.is_file():
        return {}
    payload = read_sealed(path, kind="checkpoint", fix=f"delete {path} to restart the run from round 0")
    try:
        saved = json.loads(payload)
        ok = saved["spec"] == asdict(spec) and len(saved["log"]) == len(saved["rounds"])
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ConfigError(
            f"checkpoint {path} is unreadable ({err})", f"delete {path} to start afresh"
        ) from err
    if not ok:
        raise ConfigError(
            f"checkpoint {path} belongs to another run (or is inconsistent)", f"delete {path} to start afresh"
        )
    return saved


def _printer(spec: ZORunSpec, enabled: bool):
    start = time.time()

    def progress(done: int, total: int, rec) -> None:
        if enabled and (done % max(total // 50, 1) == 0 or rec.test_accuracy is not None or done == total):
            acc = f" acc {rec.test_accuracy:.2f}" if rec.test_accuracy is not None else ""
            print(f"[{spec.method} {spec.dataset} a={spec.alpha:g}] round {done}/{total} loss "
                  f"{rec.train_loss:.4f}{acc} ({time.time() - start:.0f} s)", flush=True)  # fmt: skip

    return progress


def run_zo(
    spec: ZORunSpec, model, clients, test, *, checkpoint: Path | None, checkpoint_every: int, progress
):
    """Dispatch to FedMeZO (resumable from its log), centralised MeZO or DistMeZO; returns (result, log)."""
    from benchmark.zo.centralised import run_mezo
    from benchmark.zo.distmezo import DistMeZOConfig, run_distmezo
    from benchmark.zo.fedmezo import LogEntry, replay, run_fedmezo
    from benchmark.zo.history import ZORound

    fed = _zo_config(spec)
    if spec.method == "mezo":
        return run_mezo(model, clients, fed, test, progress=progress), None
    if spec.method == "distmezo":
        return run_distmezo(
            model, clients, DistMeZOConfig(fed, spec.local_steps), test, progress=progress
        ), None
    saved = _load_checkpoint(checkpoint, spec)
    log = [LogEntry(int(e[0]), int(e[1]), tuple(float(x) for x in e[2])) for e in saved.get("log", [])]
    earlier = [ZORound(**{**r, "projected": tuple(r["projected"])}) for r in saved.get("rounds", [])]
    replay(model, log, fed.zo)
    history = list(earlier)
    initial = {"value": saved.get("initial_accuracy")}

    def after_round(full_log, rec) -> None:
        history.append(rec)
        if checkpoint is not None and (len(full_log) % checkpoint_every == 0 or len(full_log) == spec.rounds):
            _save_checkpoint(checkpoint, {
                "spec": asdict(spec), "log": [[e.round, e.seed, list(e.average)] for e in full_log],
                "rounds": [asdict(r) for r in history], "initial_accuracy": initial["value"],
            })  # fmt: skip

    if not log and spec.eval_every > 0:
        from benchmark.zo.text_model import accuracy

        initial["value"] = accuracy(model, test)
    result, log = run_fedmezo(model, clients, replace(fed, eval_every=spec.eval_every), test, start_log=log,
                              progress=progress, after_round=after_round)  # fmt: skip
    result.rounds = history
    result.initial_accuracy = initial["value"]
    return result, log


def _slora(spec: ZORunSpec, model, clients, test, progress_enabled: bool) -> dict[str, Any]:
    from benchmark.zo.slora import SLoRAConfig, run_slora

    cfg = SLoRAConfig(
        rounds=spec.rounds, priming_fraction=spec.priming_fraction, density=spec.density, rank=spec.rank,
        lr=spec.lr, local_steps=spec.local_steps, batch_size=spec.batch_size, optimizer=spec.optimizer,
        seed=spec.seed, eval_every=spec.eval_every,
    )  # fmt: skip
    start = time.time()

    def progress(event) -> None:
        rec = getattr(event, "record", None)
        if progress_enabled and rec is not None and event.kind == "round":
            acc = f" acc {rec.test_accuracy:.2f}" if rec.test_accuracy is not None else ""
            print(f"[slora {spec.dataset} a={spec.alpha:g}] round {rec.round + 1}/{spec.rounds} stage {rec.stage} "
                  f"loss {rec.train_loss:.4f}{acc} ({time.time() - start:.0f} s)", flush=True)  # fmt: skip

    res = run_slora(model, clients, test, cfg, progress=progress)
    return {
        "final_accuracy": res.final_accuracy,
        "best_accuracy": max(
            [r.test_accuracy for r in res.history if r.test_accuracy is not None], default=None
        ),
        "rounds": [asdict(r) for r in res.history],
        "traffic": {
            "uplink_bytes": res.uplink_bytes,
            "downlink_bytes": res.downlink_bytes,
            "eq7_uplink_bytes": res.arithmetic_bytes,
        },
        "trainable_params_stage2": res.trainable_params_stage2,
    }


def _traffic(spec: ZORunSpec, result) -> dict[str, Any]:
    t = result.traffic
    rounds = max(len(result.rounds), 1)
    numbers = (t.uplink_numbers + t.downlink_numbers) / rounds
    return {
        "uplink_bytes": t.uplink_bytes, "downlink_bytes": t.downlink_bytes,
        "uplink_numbers": t.uplink_numbers, "downlink_numbers": t.downlink_numbers,
        "rounds_measured": len(result.rounds), "numbers_per_round": numbers,
        "wire_bytes_per_round": (t.uplink_bytes + t.downlink_bytes) / rounds,
        "thesis_bytes_per_round": numbers * THESIS_NUMBER_BYTES,
        "eq6_bytes_per_round": eq6_bytes_per_round(spec.clients, spec.num_z),
        "wire": asdict(WireFormat()),
    }  # fmt: skip


def train_step(
    spec: ZORunSpec, out: str | Path, *, device: str | None = None, data_root: str | Path | None = None,
    checkpoint: Path | None = None, checkpoint_every: int = 50, progress: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Run ``spec`` and write its record to ``out`` (and the curve beside it)."""
    from benchmark.devices import pick_device
    from benchmark.zo.mezo import parameters_sha256

    prov = _provenance()  # the code that runs, taken before training
    dev = str(pick_device(device))
    torch.manual_seed(0)  # nothing here draws from the global RNG; fixed anyway for third-party code
    start = time.time()
    enc, task, model, clients, test = build_model(spec, dev, data_root)
    initial = None
    if spec.method == "slora":
        body = _slora(spec, model, clients, test, progress)
    else:
        result, log = run_zo(spec, model, clients, test, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                             progress=_printer(spec, progress))  # fmt: skip
        initial = result.initial_accuracy
        body = {
            "final_accuracy": result.final_accuracy, "best_accuracy": result.best_accuracy,
            "rounds": [asdict(r) for r in result.rounds], "traffic": _traffic(spec, result),
            "params_sha256": parameters_sha256(model), "extra": result.extra,
            "log_sha256": _log_digest(log) if log is not None else None,
        }  # fmt: skip
    record = {
        "spec": asdict(spec), "method": spec.method, "dataset": spec.dataset, "initial_accuracy": initial,
        **body,
        "encoder": asdict(enc.identity), "encoder_params": enc.spec.params, "task": task.identity,
        "head_init": f"FedNCM class means x {spec.head_scale:g}", "device": dev,
        "torch_threads": torch.get_num_threads(), "wall_s": time.time() - start, **prov,
    }  # fmt: skip
    out = Path(out)
    with atomic_path(str(out).removesuffix(".json") + ".curve.csv", checksum=True) as tmp:
        _write_curve(tmp, record["rounds"])
    atomic_write_json(out, record, checksum=True)
    return record


def _log_digest(log) -> str:
    import hashlib

    text = json.dumps([[e.round, e.seed, list(e.average)] for e in log])
    return hashlib.sha256(text.encode()).hexdigest()


def _write_curve(path: Path, rounds: list[dict[str, Any]]) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "train_loss", "test_accuracy", "uplink_bytes", "downlink_bytes"])
        for r in rounds:
            acc = r.get("test_accuracy")
            w.writerow([r["round"] + 1, r.get("train_loss"), "" if acc is None else acc,
                        r.get("uplink_bytes", 0), r.get("downlink_bytes", 0)])  # fmt: skip
