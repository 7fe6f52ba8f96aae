"""One full-model federated training run on real images: the step behind the ``fl_train`` runner's jobs.

``train_step`` loads the protocol's images (resident on the training device as uint8, preprocessed there:
:mod:`benchmark.fl.image_data`), the partition the ``partition`` job drew on the same split, the backbone
(pre-trained, or random for Random), optionally the closed-form head of a two-stage method (FedNCM, Fed3R,
FedCOF fitted on the cached features of the same backbone and preprocessing: :func:`benchmark.fl.jobs.closed_form_init`),
and runs the protocol's method under the protocol's algorithm through the engine (:mod:`benchmark.fl.methods`),
checkpointing every few rounds so that a killed run resumes where it stopped.

Outputs (atomic): the tidy rows (:func:`benchmark.fl.jobs.tidy_rows`'s metrics, plus the *measured* uplink /
downlink bytes next to the arithmetic ones), the per-round curve (:func:`benchmark.curves.curve_frame`) and a
JSON record (protocol, engine configuration, learning-rate choice and its source, run metadata: device,
precision, throughput, peak memory; inputs' identities; commit; machine).

``holdout="validation"`` is the tuning variant (:mod:`benchmark.fl.train_tuning`): a stratified share of
every class of the training split is held out (``validation`` stream of seed 0), the partition is drawn on
the rest with the protocol's scheme, and "test" accuracy is measured on the held-out images, never on the
test set.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from benchmark.curves import curve_frame, write_curve
from benchmark.data.partition import PartitionData, load_partition_for, make_partition
from benchmark.data.subsets import validation_split
from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec
from benchmark.federated.history import Costs
from benchmark.federated.precision import precision_from
from benchmark.fl.engine import RunResult, resolve_device
from benchmark.fl.image_data import ImageSet
from benchmark.fl.lp_features import CachedFeatures
from benchmark.fl.methods import run_method
from benchmark.fl.train_protocols import TrainProtocol, get_train_protocol
from benchmark.io import atomic_write_json, sha256_bytes
from benchmark.provenance import git_commit, machine, package_versions, peak_rss_mb
from benchmark.tidy import make_row, write_tidy

Holdout = Literal["test", "validation"]


@dataclass(frozen=True)
class TrainRequest:
    """Everything one run needs, resolved by the job (paths are the job's input files)."""

    protocol: str
    method: str
    algorithm: str
    seed: int
    weights: str = "substitute"
    subset: str = "all"
    partition: Path | None = None
    """The partition job's file (client indices into the train split); ``None`` only for ``validation``."""
    client_lr: float | None = None
    server_lr: float | None = None
    lr_choice: Mapping[str, Any] = field(default_factory=dict)
    holdout: Holdout = "test"
    device: str = "auto"
    amp: bool = False
    client_exec: str = "loop"
    vector_chunk: int = 10
    channels_last: bool = False
    checkpoint: Path | None = None
    checkpoint_every: int = 20
    data_root: str | None = None
    weights_dir: str | None = None
    progress: bool = True
    dtype: str | None = None
    """Compute dtype instead of the protocol's (the pinned guard's float32 reference variant only)."""
    init_ulps: int = 0
    """Move every initial parameter this many float ulps (the pinned guard's tolerance measurement only)."""
    hash_inputs: bool = False
    """Record the sha256 of the preprocessed float32 inputs (small configurations: it preprocesses every image)."""


@dataclass
class TrainOutcome:
    result: RunResult
    protocol: TrainProtocol
    rows: list[dict[str, Any]]
    curve: Any
    record: dict[str, Any]


# ------------------------------------------------------------------------------------------------ inputs
def _split(proto: TrainProtocol, split: str, subset: str, root: str | None):
    from benchmark.pipeline import split_labels  # local: heavy import (scipy, torchvision)

    return split_labels(proto.dataset, split, subset, 0, root)


def _image_set(data: Any, proto: TrainProtocol, split: str, device: torch.device, req: TrainRequest):
    """The split's images, resident on ``device`` as uint8 (:class:`benchmark.fl.image_data.ImageSet`)."""
    dtype = proto.precision.dtype
    if data.images is not None:  # in-memory datasets (CIFAR): exactly the split (and subset) loaded here
        images = torch.from_numpy(np.ascontiguousarray(data.images)).permute(0, 3, 1, 2)
        return ImageSet(
            images, data.labels, proto.preprocess, split, device=device, dtype=dtype, channels_last=req.channels_last
        )  # fmt: skip
    # folder datasets: decoded and resized once on the device (ImageSet.from_registry)
    return ImageSet.from_registry(
        proto.dataset, split, proto.preprocess, data_root=req.data_root, subset=req.subset, device=device,
        dtype=dtype, channels_last=req.channels_last,
    )  # fmt: skip


def _validation_clients(proto: TrainProtocol, labels: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, str]:
    """Clients drawn on the training rows minus a stratified validation share (tuning only)."""
    keep, val = validation_split(labels, proto.val_fraction, 0)
    part = make_partition(proto.partition_scheme, labels[keep], 0, **{
        k: v for k, v in proto.partition().items() if k != "scheme"
    })  # fmt: skip
    return [keep[np.asarray(c, dtype=np.int64)] for c in part.clients], val, part.sha256


def _model(proto: TrainProtocol, method: str, num_classes: int, seed_cfg: Any, req: TrainRequest):
    from benchmark.models.backbones import create_backbone  # local: heavy import (torchvision)

    pretrained = proto.method(method).pretrained
    model, ident = create_backbone(
        proto.backbone, req.weights if pretrained else "random", num_classes=num_classes,
        seed=seed_cfg.seeds.int_seed("model_init"), weights_dir=req.weights_dir,
    )  # fmt: skip
    return model.to(dtype=proto.precision.dtype), ident


# ------------------------------------------------------------------------------------------------ the run
def run_training(req: TrainRequest) -> TrainOutcome:
    """Run ``req`` (module docstring) and return the result, tidy rows, curve and record."""
    proto = get_train_protocol(req.protocol)
    if req.dtype is not None:
        proto = replace(proto, dtype=req.dtype)
    precision_from(dtype=proto.dtype, amp=req.amp)  # the one policy: an unknown value fails here, by name
    spec = proto.method(req.method)
    proto.algorithm(req.algorithm)
    cfg = proto.fl_config(
        req.method, req.algorithm, seed=req.seed, client_lr=req.client_lr, server_lr=req.server_lr,
        device=req.device, amp=req.amp, progress=req.progress,
    )  # fmt: skip
    cfg = _with_exec(cfg, req)
    device = resolve_device(cfg)
    wall0 = time.perf_counter()
    train = _split(proto, "train", req.subset, req.data_root)
    labels = np.asarray(train.labels, dtype=np.int64)
    ident: dict[str, Any] = {"train_checksum": train.checksum, "subset": req.subset}
    if req.holdout == "validation":
        clients_idx, eval_idx, part_sha = _validation_clients(proto, labels)
        ident["validation"] = {
            "fraction": proto.val_fraction,
            "rows": int(eval_idx.size),
            "partition": part_sha,
        }
        train_set = _image_set(train, proto, "train", device, req)
        eval_set = train_set.subset(eval_idx)
    else:
        eval_idx = None
        if req.partition is None:
            raise ConfigError("a test-holdout training run needs the partition file", "pass partition=")
        record = PartitionData(proto.dataset, req.subset, "train", len(labels), train.checksum)
        part = load_partition_for(req.partition, record, req.partition)
        clients_idx = [np.asarray(c, dtype=np.int64) for c in part.clients]
        ident["partition"] = {"sha256": part.sha256, "seed": part.seed, "scheme": part.scheme,
                              "params": dict(part.params)}  # fmt: skip
        test = _split(proto, "test", req.subset, req.data_root)
        ident["test_checksum"] = test.checksum
        train_set = _image_set(train, proto, "train", device, req)
        eval_set = _image_set(test, proto, "test", device, req)
    if len(clients_idx) != proto.num_clients:
        raise ConfigError(
            f"{req.partition}: {len(clients_idx)} clients but protocol {proto.name!r} has {proto.num_clients}",
            "rebuild the partition for this protocol",
        )
    clients = [train_set.subset(c) for c in clients_idx]
    num_classes = int(train.num_classes)
    model, weights_ident = _model(proto, req.method, num_classes, cfg, req)
    ident["weights"] = asdict(weights_ident)
    if req.init_ulps:
        nudge_parameters(model, req.init_ulps)
    if req.hash_inputs:
        ident["train_inputs_sha256"] = inputs_sha256(train_set)
        ident["eval_inputs_sha256"] = inputs_sha256(eval_set)

    closed_form = stage1 = None
    init_info: dict[str, Any] | None = None
    history: list[Any] = []
    if spec.init is not None:
        head, history, stage1, init_info = _init_head(
            spec, cfg, proto, model, train_set, eval_set, clients_idx
        )
        closed_form = (head["weight"], head["bias"])
    checkpoint = _checkpoint(req)
    t_train = time.perf_counter()
    res = run_method(
        cfg, model=model, clients=clients, test=eval_set, closed_form=closed_form, stage1_costs=stage1,
        **({"checkpoint": checkpoint} if checkpoint is not None else {}),
    )  # fmt: skip
    train_s = time.perf_counter() - t_train
    wall = time.perf_counter() - wall0
    curve = curve_frame(res, method=req.method, seed=req.seed)
    if history:  # the closed-form rounds go first in the curve (stage "init")
        init = replace(res, history=history)
        curve = pd.concat([curve_frame(init, method=req.method, seed=req.seed), curve], ignore_index=True)
    images = sum(len(c) for c in clients) / proto.num_clients * proto.clients_per_round * cfg.local_epochs
    throughput = images * cfg.rounds / train_s if train_s > 0 else float("nan")
    meta = {
        **res.meta,
        "train_wall_s": round(train_s, 3),
        "train_images_per_s": round(throughput, 1),
        "peak_gpu_mb": _peak_gpu_mb(device),
    }
    rows = _rows(res, proto, req, cfg, ident, wall, meta)
    rec = {
        "protocol": proto.to_dict(),
        "method": req.method,
        "algorithm": req.algorithm,
        "seed": req.seed,
        "holdout": req.holdout,
        "lr_choice": dict(req.lr_choice),
        "config": res.config,
        "meta": _jsonable(meta),
        "init": _jsonable(init_info),
        "inputs": _jsonable(ident),
        "summary": {
            "reported_acc": res.reported_acc, "best_acc": res.best_acc, "best_round": res.best_round,
            "last_acc": res.last_acc, "costs": asdict(res.costs),
        },
        "git_commit": git_commit(),
        "versions": package_versions(),
        "machine": machine(),
    }  # fmt: skip
    return TrainOutcome(res, proto, rows, curve, rec)


def _with_exec(cfg: Any, req: TrainRequest) -> Any:
    """The execution knobs (vectorised clients, channels_last) where the engine has them."""
    names = {f.name for f in fields(cfg)}
    knobs = {
        "client_exec": req.client_exec,
        "vector_chunk": req.vector_chunk,
        "channels_last": req.channels_last,
    }
    return replace(cfg, **{k: v for k, v in knobs.items() if k in names})


def _checkpoint(req: TrainRequest) -> Any:
    if req.checkpoint is None:
        return None
    return CheckpointSpec(Path(req.checkpoint), every=req.checkpoint_every)


@torch.no_grad()
def nudge_parameters(model: torch.nn.Module, ulps: int) -> None:
    """Move every parameter ``ulps`` units in the last place of its dtype (``np.nextafter``, in place): the
    pinned guard's tolerance measurement (``TrainRequest.init_ulps``, ``flb pin-reduced``)."""
    for p in model.parameters():
        a = p.detach().numpy()
        for _ in range(abs(ulps)):
            a = np.nextafter(a, np.inf if ulps > 0 else -np.inf)
        p.copy_(torch.from_numpy(np.ascontiguousarray(a)))


@torch.no_grad()
def inputs_sha256(images: Any) -> str:
    """sha256 of every preprocessed input of ``images`` as float32 (elementwise IEEE operations: the same bits
    on every CPU; a float64 set holds float32 values cast exactly)."""
    x, _ = images.batch(np.arange(len(images)))
    return sha256_bytes(x.float().contiguous().cpu().numpy().tobytes())


@torch.no_grad()
def body_features(model: torch.nn.Module, images: Any, batch_size: int = 256) -> np.ndarray:
    """Features of every image of ``images`` through the frozen pre-trained body (eval mode), in the run's
    dtype: the inputs of the closed-form head of a two-stage method."""
    model.eval()
    n = len(images)
    out = [model.body(images.batch(np.arange(s, min(n, s + batch_size)))[0]) for s in range(0, n, batch_size)]
    return torch.cat(out).cpu().numpy() if out else np.zeros((0, 0))


def _init_head(
    spec: Any, cfg: Any, proto: TrainProtocol, model: torch.nn.Module, train_set: Any, eval_set: Any,
    clients_idx: list[np.ndarray],
):  # fmt: skip
    """Stage 1 (legate2023 §3.2, fedcof §4.3): the closed-form head fitted on the pre-trained body's features of
    the clients' own training images, computed here with the run's model, preprocessing and dtype (one
    forward pass over the training set, as the reference code does), evaluated on ``eval_set``
    (:func:`benchmark.fl.jobs.closed_form_init`). float64 runs solve in float64."""
    from benchmark.fl.jobs import FLInputs, closed_form_init  # local: heavy import (scipy, torchvision)
    from benchmark.fl.protocols import MethodSpec  # local: heavy import (scipy, torchvision)

    f_tr, f_ev = body_features(model, train_set), body_features(model, eval_set)
    y_tr = train_set.labels.cpu().numpy().astype(np.int64)
    y_ev = eval_set.labels.cpu().numpy().astype(np.int64)
    classes = int(max(y_tr.max(), y_ev.max())) + 1
    feats = CachedFeatures(
        torch.from_numpy(f_tr), torch.from_numpy(y_tr), clients_idx, torch.from_numpy(f_ev), torch.from_numpy(y_ev),
        num_classes=classes,
    )  # fmt: skip
    inputs = FLInputs(feats, {}, {}, None, (f_tr, y_tr), (f_ev, y_ev))
    mspec = MethodSpec(
        client_lr=1.0, lr_source="-", init=spec.init, init_options=spec.init_options,
        init_participation=spec.init_participation,
    )  # fmt: skip
    overrides = {"solver": "solve64"} if proto.precision.dtype == torch.float64 else {}
    return closed_form_init(mspec, inputs, replace(cfg, head_bias="as_given"), proto.backbone, overrides)


def _peak_gpu_mb(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)


def _rows(res: RunResult, proto: TrainProtocol, req: TrainRequest, cfg: Any, ident: Mapping[str, Any],
          wall: float, meta: Mapping[str, Any]) -> list[dict[str, Any]]:  # fmt: skip
    """Tidy rows: accuracies (reported / best / last), costs (arithmetic and measured), rounds, throughput."""
    part = ident.get("partition", {})
    common = dict(
        dataset=proto.dataset, model=proto.backbone, weights=ident["weights"].get("source", req.weights),
        weights_sha256=ident["weights"].get("sha256"), method=req.method, fl_algorithm=req.algorithm,
        partition=proto.partition_scheme, alpha=proto.alpha, clients=proto.num_clients,
        participation=proto.participation, seed=req.seed, status="ok", data_checksum=ident.get("train_checksum"),
        partition_hash=part.get("sha256"), features_key=None, git_commit=git_commit(), versions=package_versions(),
        machine=machine(), wall_s=round(wall, 3), peak_rss_mb=round(peak_rss_mb(), 1),
    )  # fmt: skip
    costs: Costs = res.costs
    metrics = [
        ("accuracy", 100.0 * res.reported_acc, "percent"),
        ("accuracy_best", 100.0 * res.best_acc, "percent"),
        ("accuracy_last", 100.0 * res.last_acc, "percent"),
        ("uplink_bytes", costs.uplink_bytes, "bytes"),
        ("downlink_bytes", costs.downlink_bytes, "bytes"),
        ("compute_f", costs.compute_f, "F"),
        ("rounds", cfg.rounds, "rounds"),
        ("best_round", res.best_round, "rounds"),
        ("client_lr", cfg.client_lr, "lr"),
        ("server_lr", cfg.server_lr, "lr"),
        ("train_images_per_s", meta.get("train_images_per_s"), "img/s"),
    ]
    for name in ("uplink_bytes_measured", "downlink_bytes_measured"):
        if hasattr(costs, name):
            metrics.append((name, getattr(costs, name), "bytes"))
    out = []
    for m, v, unit in metrics:
        if v is None:
            continue
        value = round(float(v), 4) if unit in ("percent", "img/s") else (float(v) if unit == "lr" else int(v))
        out.append(make_row(**common, metric=m, value=value, unit=unit))
    return out


def train_step(req: TrainRequest, *, out: str | Path, curve: str | Path, record: str | Path) -> TrainOutcome:
    """Run ``req`` and write the tidy rows ``out``, the curve and the record (all atomically)."""
    outcome = run_training(req)
    write_curve(outcome.curve, curve)
    atomic_write_json(record, outcome.record, checksum=True)
    write_tidy(outcome.rows, out)
    return outcome


def _jsonable(obj: Any) -> Any:
    from benchmark.fl.jobs import _jsonable as conv  # local: heavy import (scipy, torchvision)

    return conv(obj)
