"""The steps the ``pfl`` runner's jobs call: federated training of one configuration, and the evaluation of its
selected model (initial, personalised after fine-tuning, or head-free NCM), each writing per-client files.

Outputs of :func:`train_step` (``out`` = the job's record path ``.../seed<k>.json``):

* ``<out>`` -- the record: config, partition fingerprint, history (per round: lr, train loss, weighted test
  accuracy, wall time), the selected round, best and last accuracy, per-client **initial** accuracies of the
  selected model, machine, versions, git commit, wall time;
* ``<base>.model.pt`` -- the selected state (broadcast entries and every client's personal entries), which the
  evaluation jobs fine-tune (a checkpoint of this suite, loaded with ``weights_only=True`` after its sha256 in
  the record is checked);
* ``<base>.curve.csv`` -- the per-round curve (plotted beside the tables).

The record, the curve and the evaluation JSON carry a checksum sidecar (``<file>.sha256``,
:func:`benchmark.io.atomic_path`), checked when they are read back.

:func:`eval_step` writes the per-client accuracies of one evaluation (``initial``, ``personalised`` with a
:class:`~benchmark.pfl.personalise.FineTune`, or ``ncm_cosine`` / ``ncm_euclidean``) as JSON.
"""

from __future__ import annotations

import hashlib
import io
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.data.registry import load_dataset
from benchmark.errors import ConfigError, CorruptFileError, DataMissingError
from benchmark.io import atomic_path, atomic_write_bytes, atomic_write_json, read_verified_json, sha256_bytes
from benchmark.pfl.centralised import train_centralised
from benchmark.pfl.data import DeviceImages
from benchmark.pfl.local_only import train_local_only
from benchmark.pfl.models import build_model
from benchmark.pfl.partition import ClientSplit, make_partitioner
from benchmark.pfl.personalise import FineTune, ncm_accuracy, personalise, summary
from benchmark.pfl.trainer import PFLConfig, PFLResult, PFLTrainer, client_accuracies, weighted_mean
from benchmark.pfl.vectorised import model_reason, personalise_vectorised
from benchmark.provenance import git_commit, machine, package_versions


def resolve_device(device: str | None) -> torch.device:
    """The config's ``device`` (``auto`` / empty: CUDA when available, else CPU)."""
    from benchmark.features.extract import pick_device  # local: heavy import (torchvision)

    return pick_device(None if device == "auto" else device)


def load_run_data(cfg: PFLConfig, partition: dict[str, Any], device: torch.device, data_root: str | None):
    """The train / test splits on ``device`` and the client partition (a function of the config and seed)."""
    tr = load_dataset(cfg.dataset, "train", data_root)
    te = load_dataset(cfg.dataset, "test", data_root)
    split = make_partitioner(num_clients=cfg.clients, **partition)(tr.labels, te.labels, cfg.seed)
    num_classes = int(tr.num_classes)
    fingerprint = hashlib.sha256()
    for part in (*split.train, *split.test, split.server):
        fingerprint.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
    meta = {"data_checksum": {"train": tr.checksum, "test": te.checksum}, "partition_hash": fingerprint.hexdigest(),
            "num_classes": num_classes}  # fmt: skip
    return (DeviceImages.from_split(tr, cfg.dataset, device), DeviceImages.from_split(te, cfg.dataset, device),
            split, meta)  # fmt: skip


def _provenance() -> dict[str, Any]:
    return {"machine": machine(), "versions": package_versions(), "git_commit": git_commit()}


def train_step(cfg: PFLConfig, partition: dict[str, Any], out: str | Path, *, device: str | None = None,
               data_root: str | None = None, checkpoint: Path | None = None, checkpoint_every: int = 5,
               progress: bool = True, sibling_out: str | Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Train ``cfg`` on the ``partition`` (``make_partitioner`` keywords) and write the three outputs.

    ``sibling_out``: also write the outputs of the job that differs only by its model selection (``best`` /
    ``last``) to that record path. Training does not depend on the selection (it only decides which of the two
    kept states is written), so those files are the ones that job would write, its wall time aside."""
    prov = _provenance()  # the code that runs: taken before training (a long run may outlive a commit)
    dev = resolve_device(device)
    train, test, split, meta = load_run_data(cfg, partition, dev, data_root)
    trainer = PFLTrainer(cfg, train, test, split, meta["num_classes"], progress=progress)
    if cfg.algorithm in CENTRALISED:
        res = _centralised(trainer, CENTRALISED[cfg.algorithm])
    elif cfg.algorithm == "local_only":
        res = train_local_only(trainer)
    else:
        res = trainer.run(checkpoint=checkpoint, checkpoint_every=checkpoint_every)
    common = {"partition": partition, "meta": meta, "device": str(dev), "extra": res.extra, "history": res.history,
              "wall_s": res.wall_s, "prov": prov}  # fmt: skip
    record = _write_outputs(trainer, Path(out), cfg, res.selected_round, res.selected_state, res.selected_personal,
                            res.client_accuracy, res.other_selection_accuracy, common)  # fmt: skip
    if sibling_out is not None:
        if res.other_state is None or res.other_client_accuracy is None:
            raise ConfigError(f"{cfg.algorithm} keeps one model only", "run the other selection's job on its own")
        other_cfg = replace(cfg, selection="last" if cfg.selection == "best" else "best")
        _write_outputs(trainer, Path(sibling_out), other_cfg, int(res.other_round or cfg.rounds), res.other_state,
                       res.other_personal or {}, res.other_client_accuracy,
                       _weighted(trainer, res.client_accuracy),
                       {**common, "extra": {**res.extra, "sibling_of": str(out)}})  # fmt: skip
    if checkpoint is not None and Path(checkpoint).is_file():
        Path(checkpoint).unlink()
    return record


def _weighted(trainer: PFLTrainer, acc: np.ndarray) -> float:
    return float(weighted_mean(acc, trainer.eval_split()))


def _write_outputs(trainer: PFLTrainer, out: Path, cfg: PFLConfig, selected_round: int, state: dict[str, Any],
                   personal: dict[int, Any], client_accuracy: np.ndarray, other_accuracy: float,
                   common: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The record, the selected model and the curve of one training job (module docstring)."""
    base = str(out).removesuffix(".json")
    model_path = Path(base + ".model.pt")
    buffer = io.BytesIO()  # a file object: the archive's records do not depend on the file name
    torch.save({"broadcast": {k: v.cpu() for k, v in state.items()},
                "personal": {str(i): {k: v.cpu() for k, v in s.items()} for i, s in personal.items()},
                "init_personal": {k: v.cpu() for k, v in trainer.init_personal.items()}}, buffer)  # fmt: skip
    atomic_write_bytes(model_path, buffer.getbuffer())
    if cfg.algorithm != "local_only":  # local-only has no rounds: no curve
        with atomic_path(base + ".curve.csv", checksum=True) as tmp:
            curve_frame(trainer, common["history"]).to_csv(tmp, index=False)
    mean, std = summary(client_accuracy)
    record = {
        "kind": "pfl_train", "config": cfg.to_dict(), "partition": common["partition"], **common["meta"],
        "device": common["device"], "selected_round": selected_round, "selection": cfg.selection, **common["extra"],
        "initial": {"per_client": [float(a) for a in client_accuracy], "mean": mean, "std_ddof0": std},
        "other_selection_accuracy": other_accuracy, "history": common["history"],
        "model_file": model_path.name, "model_sha256": sha256_bytes(buffer.getbuffer()), "wall_s": common["wall_s"],
        **common["prov"],
    }  # fmt: skip
    atomic_write_json(out, record, checksum=True)
    return record


def curve_frame(trainer: PFLTrainer, history: list[dict[str, Any]]):
    """The per-round curve in the suite's curve format (``benchmark.curves``): ``round, stage, accuracy``
    (percent, weighted over the evaluated clients), ``train_loss``, cumulative ``uplink_bytes`` /
    ``downlink_bytes`` (the aggregated entries, float32, sent by and to each sampled client: FedBABU sends the
    body only) and ``compute_f`` (forward = 1 F per image, backward = 2 F: 3 F per training image)."""
    import pandas as pd  # local: heavy import (pandas)

    cfg = trainer.cfg
    sent = sum(v.numel() * 4 for v in trainer.broadcast.values())
    up = comp = 0.0
    rows = []
    for h in history:
        r = int(h["round"]) - 1
        clients = trainer.sample(r) if cfg.algorithm not in CENTRALISED else range(cfg.clients)
        images = sum(len(trainer.split.train[int(i)]) for i in clients) * cfg.local_epochs
        up += len(clients) * sent if cfg.algorithm not in CENTRALISED else 0.0
        comp += 3.0 * images
        rows.append({"round": r + 1, "stage": cfg.algorithm, "accuracy": h.get("test_accuracy"),
                     "test_loss": None, "train_loss": h.get("train_loss"), "uplink_bytes": up, "downlink_bytes": up,
                     "compute_f": comp, "wall_s": h.get("wall_s"), "method": cfg.algorithm, "seed": cfg.seed})  # fmt: skip
    return pd.DataFrame(rows)


#: fedbabu Table 9: one model trained on the union of the clients' data for ``rounds`` epochs, F = the whole
#: network, B = the body only (:mod:`benchmark.pfl.centralised`); no model selection (the last epoch).
CENTRALISED = {"centralized_full": "full", "centralized_body": "body"}


def _centralised(trainer: PFLTrainer, part: str):

    cfg, t0 = trainer.cfg, time.perf_counter()
    state = train_centralised(cfg, trainer.train, trainer.split, part, cfg.rounds, num_classes=trainer.model.linear.out_features)
    trainer.broadcast, trainer.init_personal, trainer.personal = state, {}, {}
    acc = trainer.evaluate()
    mean = weighted_mean(acc, trainer.eval_split())
    return PFLResult(cfg, acc, cfg.rounds, [{"round": cfg.rounds, "test_accuracy": mean}], state, {}, mean,
                     time.perf_counter() - t0, extra={"best_round": cfg.rounds, "best_accuracy": mean,
                                                      "last_accuracy": mean, "centralised_part": part})  # fmt: skip


def load_selected(record_path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A training record (checked against its sidecar) and its selected state, whose sha256 (recorded in the
    record) is checked on the very bytes that are then loaded."""
    record_path = Path(record_path)
    rerun = f"delete {record_path} and re-run the training job (snakemake runs it again)"
    if not record_path.is_file():
        raise DataMissingError(f"training record {record_path} does not exist", "run the training job first")
    record = read_verified_json(record_path, fix=rerun)
    if not isinstance(record, dict) or not {"model_file", "model_sha256"} <= set(record):
        raise CorruptFileError(f"{record_path}: not a training record (no model_file / model_sha256)", rerun)
    model_path = record_path.with_name(record["model_file"])
    try:
        data = model_path.read_bytes()
    except FileNotFoundError:
        raise DataMissingError(f"{model_path} (the selected model of {record_path}) is missing", rerun) from None
    if sha256_bytes(data) != record["model_sha256"]:
        raise CorruptFileError(f"{model_path} is damaged or truncated (sha256 mismatch with {record_path})", rerun)
    return record, torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def eval_step(record_path: str | Path, evaluation: str, out: str | Path, *, ft: FineTune | None = None,
              device: str | None = None, data_root: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Per-client accuracies of the selected model of ``record_path`` under ``evaluation`` (``initial``,
    ``personalised`` with ``ft``, ``ncm``)."""
    record, sel = load_selected(record_path)
    cfg = PFLConfig(**record["config"])
    dev = resolve_device(device)
    train, test, split, meta = load_run_data(cfg, record["partition"], dev, data_root)
    if meta["partition_hash"] != record["partition_hash"]:
        raise ConfigError(f"the partition rebuilt for {record_path} differs from the one it was trained on",
                          "re-run the training job with this code")  # fmt: skip

    def vectorised_ok(m: torch.nn.Module) -> bool:
        return model_reason(m) is None

    model = build_model(cfg.model, meta["num_classes"], bn=cfg.bn, head_init=cfg.head_init)
    model = model.to(dev, getattr(torch, cfg.dtype))
    train.dtype = test.dtype = getattr(torch, cfg.dtype)
    n = cfg.eval_clients or split.num_clients  # reduced configurations evaluate the first clients only
    split = ClientSplit(split.train[:n], split.test[:n], split.server, split.label_rows)
    broadcast = {k: v.to(dev) for k, v in sel["broadcast"].items()}
    personal = {int(i): {k: v.to(dev) for k, v in s.items()} for i, s in sel["personal"].items()}
    init_personal = {k: v.to(dev) for k, v in sel["init_personal"].items()}

    def states(i: int) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in {**broadcast, **personal.get(i, init_personal)}.items()}

    if evaluation == "initial":
        acc = client_accuracies(model, test, split.test, states, cfg.eval_batch)
    elif evaluation == "personalised" and cfg.client_exec == "vectorised" and vectorised_ok(model):
        acc = personalise_vectorised(model, train, test, split, states, ft or FineTune(), cfg.seed, cfg.eval_batch)
    elif evaluation == "personalised":
        acc = personalise(model, train, test, split, states, ft or FineTune(), cfg.seed, cfg.eval_batch)
    elif evaluation in ("ncm_cosine", "ncm_euclidean"):
        metric = evaluation.removeprefix("ncm_")
        acc = ncm_accuracy(
            model, train, test, split, states, meta["num_classes"], cfg.seed, cfg.eval_batch, metric
        )
    else:
        raise ConfigError(
            f"evaluation {evaluation!r}", "use initial, personalised, ncm_cosine or ncm_euclidean"
        )
    mean, std = summary(acc)
    result = {"kind": "pfl_eval", "evaluation": evaluation, "finetune": asdict(ft) if ft else None,
              "training_record": str(record_path), "selected_round": record["selected_round"],
              "per_client": [float(a) for a in acc], "mean": mean, "std_ddof0": std, **_provenance()}  # fmt: skip
    atomic_write_json(out, result, checksum=True)
    return result
