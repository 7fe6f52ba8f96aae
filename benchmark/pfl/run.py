"""The steps the ``pfl`` runner's jobs call: federated training of one configuration, and the evaluation of its
selected model (initial, personalised after fine-tuning, or head-free NCM), each writing per-client files.

Outputs of :func:`train_step` (``out`` = the job's record path ``.../seed<k>.json``):

* ``<out>`` -- the record: config, partition fingerprint, history (per round: lr, train loss, weighted test
  accuracy, wall time), the selected round, best and last accuracy, per-client **initial** accuracies of the
  selected model, machine, versions, git commit, wall time;
* ``<base>.model.pt`` -- the selected state (broadcast entries and every client's personal entries), which the
  evaluation jobs fine-tune (a checkpoint of this suite, loaded with ``weights_only=True`` after its sha256 in
  the record is checked);
* ``<base>.curve.csv`` -- the per-round curve (plotted beside the tables), from the round loop's rows
  (:class:`~benchmark.federated.history.RoundRecord`: cumulative communication and compute as each round
  counted them) and the record's percent accuracies.

The record, the curve and the evaluation JSON carry a checksum sidecar (``<file>.sha256``,
:func:`benchmark.io.atomic_path`), checked when they are read back.

:func:`eval_step` writes the per-client accuracies of one evaluation (``initial``, ``personalised`` with a
:class:`~benchmark.pfl.personalise.FineTune`, or ``ncm_cosine`` / ``ncm_euclidean``) as JSON, with its lineage:
the training record it read, the sha256 of the model bytes it evaluated (checked against the record before
loading), the partition hash and the run's random-stream scheme (:mod:`benchmark.pfl.streams`).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from benchmark.data.registry import load_dataset
from benchmark.devices import pick_device
from benchmark.errors import ConfigError, CorruptFileError, DataMissingError
from benchmark.federated.history import RoundRecord
from benchmark.federated.images import DeviceImages
from benchmark.federated.progress import CountProgress
from benchmark.io import atomic_path, atomic_write_bytes, atomic_write_json, read_verified_json, sha256_bytes
from benchmark.pfl.algorithms import get_algorithm
from benchmark.pfl.centralised import CENTRALISED, run_centralised
from benchmark.pfl.executor import choose_executor, resumed_choice
from benchmark.pfl.local import client_accuracies, weighted_mean
from benchmark.pfl.local_only import train_local_only
from benchmark.pfl.models import build_model, place_model
from benchmark.pfl.partition import ClientSplit, make_partitioner
from benchmark.pfl.personalise import (
    FineTune,
    PerFedAvgStep,
    ncm_accuracy,
    per_fedavg_step,
    personalise,
    summary,
)
from benchmark.pfl.procedures.per_fedavg import PROCEDURE_OPTIONS
from benchmark.pfl.trainer import PFLConfig, PFLResult, PFLTrainer
from benchmark.pfl.vectorised import model_reason, personalise_vectorised
from benchmark.provenance import git_commit, machine, package_versions


def resolve_device(device: str | None) -> torch.device:
    """The config's ``device`` (``auto`` / empty: CUDA when available, else CPU)."""
    return pick_device(None if device == "auto" else device)


def load_run_data(
    cfg: PFLConfig, partition: dict[str, Any], device: torch.device, data_root: str | None
) -> tuple[DeviceImages, DeviceImages, ClientSplit, dict[str, Any]]:
    """The train / test splits on ``device`` and the client partition (a function of the config and seed)."""
    tr = load_dataset(cfg.dataset, "train", data_root)
    te = load_dataset(cfg.dataset, "test", data_root)
    split = make_partitioner(num_clients=cfg.clients, **partition)(tr.labels, te.labels, cfg.streams)
    fingerprint = hashlib.sha256()
    for part in (*split.train, *split.test, split.server):
        fingerprint.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
    meta = {
        "data_checksum": {"train": tr.checksum, "test": te.checksum},
        "partition_hash": fingerprint.hexdigest(),
        "num_classes": int(tr.num_classes),
    }
    train = DeviceImages.from_split(tr, cfg.dataset, device)
    return train, DeviceImages.from_split(te, cfg.dataset, device), split, meta


def _provenance() -> dict[str, Any]:
    return {"machine": machine(), "versions": package_versions(), "git_commit": git_commit()}


def train_step(
    cfg: PFLConfig,
    partition: dict[str, Any],
    out: str | Path,
    *,
    device: str | None = None,
    data_root: str | None = None,
    checkpoint: Path | None = None,
    checkpoint_every: int = 5,
    progress: bool = True,
    sibling_out: str | Path | None = None,
    choose_exec: bool = False,
    exec_cache: Path | list[Path] | None = None,
) -> dict[str, Any]:
    """Train ``cfg`` on the ``partition`` (``make_partitioner`` keywords) and write the three outputs.

    ``choose_exec`` (the workflow's ``train_exec: auto``): the client executor is the one measured fastest for
    this model, batch size and device (:func:`benchmark.pfl.executor.choose_executor`, cached under
    the first writable of the ``exec_cache`` folders), not ``cfg.client_exec``; a run that resumes a checkpoint
    keeps the checkpoint's executor (:func:`benchmark.pfl.executor.resumed_choice`). The record's
    ``executor_choice`` says which and from what. With ``cfg.client_procs`` above 1 nothing is measured: worker
    processes run the per-client loop.

    ``sibling_out``: also write the outputs of the job that differs only by its model selection (``best`` /
    ``last``) to that record path. Training does not depend on the selection (it only decides which of the two
    kept states is written), so those files are the ones that job would write, its wall time aside."""
    prov = _provenance()  # the code that runs: taken before training (a long run may outlive a commit)
    dev = resolve_device(device)
    train, test, split, meta = load_run_data(cfg, partition, dev, data_root)
    choice = None
    if choose_exec and cfg.client_procs == 1 and cfg.algorithm not in CENTRALISED and cfg.algorithm != "local_only":
        choice = resumed_choice(cfg, dev, checkpoint) or choose_executor(cfg, dev, meta["num_classes"], exec_cache)
        cfg = replace(cfg, client_exec=choice.executor)
    init_state = None
    if cfg.init_model is not None:
        cfg, init_state = warm_start(cfg, meta)
    trainer = PFLTrainer(cfg, train, test, split, meta["num_classes"], progress=progress, init_state=init_state)
    if cfg.algorithm in CENTRALISED:
        res = run_centralised(trainer, CENTRALISED[cfg.algorithm])
    elif cfg.algorithm == "local_only":
        res = train_local_only(trainer)
    else:
        res = trainer.run(checkpoint=checkpoint, checkpoint_every=checkpoint_every)
    common = {"partition": partition, "meta": meta, "device": str(dev), "prov": prov,
              "executor_choice": None if choice is None else choice.to_dict()}  # fmt: skip
    record = _write_outputs(trainer, Path(out), res, common)
    if sibling_out is not None:
        if res.other is None:
            raise ConfigError(
                f"{cfg.algorithm} keeps one model only", "run the other selection's job on its own"
            )
        sibling = replace(
            res,
            config=replace(cfg, selection="last" if cfg.selection == "best" else "best"),
            selected=res.other,
            other_selection_accuracy=weighted_mean(res.client_accuracy, trainer.eval_split()),
            extra={**res.extra, "sibling_of": str(out)},
        )
        _write_outputs(trainer, Path(sibling_out), sibling, common)
    if checkpoint is not None and Path(checkpoint).is_file():
        Path(checkpoint).unlink()
    return record


#: The configuration a warm start's source training must share with the run it starts (the network, its
#: numerics, the clients and the seed); the partition is compared by its hash.
WARM_START_SHARED = ("dataset", "model", "bn", "head_init", "clients", "seed", "dtype")


def warm_start(cfg: PFLConfig, meta: dict[str, Any]) -> tuple[PFLConfig, dict[str, torch.Tensor]]:
    """The selected model of the training ``cfg.init_model`` (its record; the model bytes checked against it by
    :func:`load_selected`), as the initial state of ``cfg``'s run, and ``cfg`` with that model's sha256 (part of
    the run's checkpoint identity, so a checkpoint made from another source model is refused on resumption). The source must be a training of
    the same setting (:data:`WARM_START_SHARED`, the same partition) that keeps one global model (FedAvg's: no
    personal entries)."""
    record, sel = load_selected(cfg.init_model)
    theirs = record.get("config") or {}
    ours = cfg.to_dict()
    differs = [k for k in WARM_START_SHARED if theirs.get(k) != ours.get(k)]
    if record.get("partition_hash") != meta["partition_hash"]:
        differs.append("partition")
    if differs:
        raise ConfigError(
            f"init_model {cfg.init_model} was trained on another setting ({', '.join(differs)} differ)",
            "start from the training of the same dataset, model, partition and seed",
        )
    if sel["personal"] or sel["init_personal"]:
        raise ConfigError(f"init_model {cfg.init_model} keeps personal entries ({theirs.get('algorithm')})",
                          "start from a training that aggregates the whole model (FedAvg)")  # fmt: skip
    return replace(cfg, init_model_sha256=record["model_sha256"]), dict(sel["broadcast"])


def _write_outputs(trainer: PFLTrainer, out: Path, res: PFLResult, common: dict[str, Any]) -> dict[str, Any]:
    """The record, the selected model and the curve of one training job (module docstring)."""
    cfg, sel = res.config, res.selected
    base = str(out).removesuffix(".json")
    model_path = Path(base + ".model.pt")
    buffer = io.BytesIO()  # a file object: the archive's records do not depend on the file name
    model = {
        "broadcast": {k: v.cpu() for k, v in sel.state.items()},
        "personal": {str(i): {k: v.cpu() for k, v in s.items()} for i, s in sel.personal.items()},
        "init_personal": {k: v.cpu() for k, v in trainer.init_personal.items()},
    }
    torch.save(model, buffer)
    atomic_write_bytes(model_path, buffer.getbuffer())
    if cfg.algorithm != "local_only":  # local-only has no rounds: no curve
        with atomic_path(base + ".curve.csv", checksum=True) as tmp:
            curve_frame(cfg, res.records, res.history).to_csv(tmp, index=False)
    mean, std = summary(sel.clients)
    record = {
        "kind": "pfl_train",
        "config": cfg.to_dict(),
        "partition": common["partition"],
        **common["meta"],
        "device": common["device"],
        "executor_choice": common["executor_choice"],
        "selected_round": sel.round,
        "selection": cfg.selection,
        **res.extra,
        "initial": {"per_client": [float(a) for a in sel.clients], "mean": mean, "std_ddof0": std},
        "other_selection_accuracy": res.other_selection_accuracy,
        "history": res.history,
        "model_file": model_path.name,
        "model_sha256": sha256_bytes(buffer.getbuffer()),
        "random_streams": cfg.streams.scheme,
        "wall_s": res.wall_s,
        **common["prov"],
    }
    atomic_write_json(out, record, checksum=True)
    return record


def curve_frame(cfg: PFLConfig, records: list[RoundRecord], history: list[dict[str, Any]]) -> pd.DataFrame:
    """The per-round curve in the suite's curve format (``benchmark.apps.plots``): ``round, stage, accuracy``
    (percent, weighted over the evaluated clients: the record's history), ``train_loss``, cumulative
    ``uplink_bytes`` / ``downlink_bytes`` (the aggregated entries, float32, sent by and to each sampled client:
    FedBABU sends the body only) and ``compute_f`` (forward = 1 F per image, backward = 2 F: 3 F per training
    image) as the round loop counted them (:class:`~benchmark.pfl.trainer.PFLTrainer.train_round`)."""
    accuracy = {row["round"]: row.get("test_accuracy") for row in history}
    rows = [
        {
            "round": rec.round,
            "stage": rec.stage,
            "accuracy": accuracy.get(rec.round),
            "test_loss": None,
            "train_loss": rec.train_loss,
            "uplink_bytes": float(rec.uplink_bytes),
            "downlink_bytes": float(rec.downlink_bytes),
            "compute_f": float(rec.compute_f),
            "wall_s": rec.wall_s,
            "method": cfg.algorithm,
            "seed": cfg.seed,
        }
        for rec in records
    ]
    return pd.DataFrame(rows)


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
        raise DataMissingError(
            f"{model_path} (the selected model of {record_path}) is missing", rerun
        ) from None
    if sha256_bytes(data) != record["model_sha256"]:
        raise CorruptFileError(
            f"{model_path} is damaged or truncated (sha256 mismatch with {record_path})", rerun
        )
    return record, torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def per_fedavg_step_of(cfg: PFLConfig, done: int, momentum: float = 0.9) -> PerFedAvgStep:
    """The released Per-FedAvg evaluation after ``done`` rounds of the run ``cfg``
    (:func:`benchmark.pfl.personalise.per_fedavg_step`): the source is the last client the run's sampler drew in
    that round (the released loop's leftover ``idx``); ``lr`` the round's lr after the decay that round ends
    with (the released loop decays before it evaluates); ``beta`` the algorithm's meta-step lr there (the
    paper's Per-FedAvg: that lr, fedbabu App. A.3; the reference's: 0.1, what the released evaluation passes)."""
    opts = PROCEDURE_OPTIONS.get(get_algorithm(cfg.algorithm).procedure)
    if opts is None:
        raise ConfigError(f"evaluation per_fedavg_step of a {cfg.algorithm} run", "it evaluates Per-FedAvg runs only")
    if not 1 <= done <= cfg.rounds:
        raise ConfigError(f"Per-FedAvg evaluation after round {done}", f"a round in 1..{cfg.rounds}")
    lr = cfg.lr_at(done)
    source = int(cfg.sampler().drawn(done - 1)[-1])
    return PerFedAvgStep(source, lr, float(opts.beta_at(lr)), momentum, cfg.batch_size)


def eval_step(
    record_path: str | Path,
    evaluation: str,
    out: str | Path,
    *,
    ft: FineTune | None = None,
    device: str | None = None,
    data_root: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Per-client accuracies of the selected model of ``record_path`` under ``evaluation`` (``initial``,
    ``personalised`` with ``ft``, ``ncm``). With ``progress``, the clients begun so far, their rate and the time
    left go to stderr (a line every 30 s in a log: a personalisation of 100 clients takes many minutes on a
    CPU)."""
    record, sel = load_selected(record_path)
    cfg = PFLConfig(**record["config"])
    dev = resolve_device(device)
    train, test, split, meta = load_run_data(cfg, record["partition"], dev, data_root)
    if meta["partition_hash"] != record["partition_hash"]:
        raise ConfigError(
            f"the partition rebuilt for {record_path} differs from the one it was trained on",
            "re-run the training job with this code",
        )
    model = build_model(cfg.model, meta["num_classes"], bn=cfg.bn, head_init=cfg.head_init)
    model = place_model(model, dev, cfg.precision.dtype, cfg.channels_last)  # the training's layout
    train.dtype = test.dtype = cfg.precision.dtype
    n = cfg.eval_clients or split.num_clients  # reduced configurations evaluate the first clients only
    whole, step = split, None  # the Per-FedAvg step's source may be beyond the first n clients
    split = ClientSplit(split.train[:n], split.test[:n], split.server, split.label_rows)
    broadcast = {k: v.to(dev) for k, v in sel["broadcast"].items()}
    personal = {int(i): {k: v.to(dev) for k, v in s.items()} for i, s in sel["personal"].items()}
    init_personal = {k: v.to(dev) for k, v in sel["init_personal"].items()}

    bar = CountProgress(f"{evaluation} {cfg.algorithm}", n, unit="client", enabled=progress)

    def states(i: int) -> dict[str, torch.Tensor]:
        bar.update(1)  # each evaluation asks for a client's state once, when it begins that client
        return {k: v.clone() for k, v in {**broadcast, **personal.get(i, init_personal)}.items()}

    if evaluation == "initial":
        acc = client_accuracies(model, test, split.test, states, cfg.eval_batch)
    elif evaluation == "personalised" and cfg.client_exec == "vectorised" and model_reason(model) is None:
        acc = personalise_vectorised(
            model, train, test, split, states, ft or FineTune(), cfg.streams, cfg.eval_batch
        )
    elif evaluation == "personalised":
        acc = personalise(model, train, test, split, states, ft or FineTune(), cfg.streams, cfg.eval_batch)
    elif evaluation == "per_fedavg_step":
        step = per_fedavg_step_of(cfg, int(record["selected_round"]), ft.momentum if ft else 0.9)
        acc = per_fedavg_step(model, test, whole, states, step, cfg.streams, cfg.eval_batch, clients=list(range(n)))
    elif evaluation in ("ncm_cosine", "ncm_euclidean"):
        metric = evaluation.removeprefix("ncm_")
        acc = ncm_accuracy(
            model, train, test, split, states, meta["num_classes"], cfg.streams, cfg.eval_batch, metric
        )
    else:
        raise ConfigError(
            f"evaluation {evaluation!r}", "use initial, personalised, per_fedavg_step, ncm_cosine or ncm_euclidean"
        )
    bar.close()
    mean, std = summary(acc)
    result = {
        "kind": "pfl_eval",
        "evaluation": evaluation,
        "finetune": asdict(ft) if ft and evaluation == "personalised" else None,
        **({"per_fedavg_step": asdict(step)} if step else {}),
        "training_record": str(record_path),
        "model_sha256": record["model_sha256"],  # the lineage: the evaluated bytes (checked by load_selected)
        "partition_hash": meta["partition_hash"],
        "random_streams": cfg.streams.scheme,
        "selected_round": record["selected_round"],
        "per_client": [float(a) for a in acc],
        "mean": mean,
        "std_ddof0": std,
        **_provenance(),
    }
    atomic_write_json(out, result, checksum=True)
    return result
