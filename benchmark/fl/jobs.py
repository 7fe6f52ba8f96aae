"""The job steps of federated training on a pre-trained backbone: one run in; its tidy rows, per-round curve and
record out. Two job kinds share this one layer (issue 25: each thing once):

* **LP on cached features** (``flb fl-run``, the ``lp_features`` runner's :class:`benchmark.jobs.FLRunJob`)::

      flb fl-run --protocol legate2023_cifar10 --method lp \
          --train results/features/.../all/train.json --test results/features/.../all/test.json \
          --partition results/partitions/cifar10-dirichlet0.1-k100-seed0.json --seed 0 \
          --out results/runs/fl/legate2023_cifar10-lp-seed0.csv \
          [--curve ...-curve.csv] [--record ...-record.json] [--set rounds=5 ...] [--device cpu] [--no-progress]

  :func:`load_inputs` reads the feature pointers of one backbone (:func:`benchmark.pipeline.extract_step`) and a
  partition of their train split (:func:`benchmark.pipeline.partition_step`) and checks them against a protocol of
  :mod:`benchmark.fl.protocols`; :func:`run_fl_job` runs one of its methods; :func:`fl_run_step` writes the outputs.
* **Full-model training on images** (the ``fl_train`` runner's jobs): :class:`TrainRequest` -> :func:`run_training`
  -> :func:`train_step`. The protocol's images stay on the training device as uint8 and are preprocessed there
  (:mod:`benchmark.fl.image_data`); the partition is the ``partition`` job's; the backbone is pre-trained (random
  for Random); the method runs under the protocol's algorithm (:mod:`benchmark.fl.methods`), checkpointed every few
  rounds, so a killed run resumes where it stopped. ``holdout="validation"`` is the tuning variant
  (:mod:`benchmark.fl.train_tuning`): a stratified share of every class of the training split is held out
  (``validation`` stream of seed 0), the partition is drawn on the rest with the protocol's scheme, and "test"
  accuracy is measured on the held-out images, never on the test set.

A two-stage method (FedNCM, Fed3R, FedCOF, then LP or FT) starts from :func:`closed_form_init`'s head, fitted on
the clients' features (cached ones, or the run's own body for full-model training). Stage-1 costs (fedcof Fig. 4):
uplink = the statistics the clients send (:mod:`benchmark.closed_form`, 4 bytes per float), downlink 0 (the
pre-trained body is shared beforehand, as in legate2023 Eq. 3-4), compute = one forward pass per training sample of
the clients seen (1F each).

Outputs (:meth:`JobOutcome.write`, all atomic, each with a checksum sidecar ``<file>.sha256``:
:func:`benchmark.io.atomic_path`; :func:`benchmark.curves.read_curve` and :func:`benchmark.tidy.read_tidy` check it
and the file's structure before anything is parsed):

* ``out`` - tidy CSV (:data:`benchmark.tidy.TIDY_COLUMNS`; ``paper``/``table``/``cell`` left empty for the
  caller), one row per metric (:func:`tidy_rows`):

  ===========================  ========  ========================================================================
  metric                       unit      value
  ===========================  ========  ========================================================================
  ``accuracy``                 percent   the protocol's reported accuracy (``selection``: best-on-test or last)
  ``accuracy_best``            percent   best test accuracy over the evaluations of the training stage
  ``accuracy_last``            percent   test accuracy after the last round
  ``uplink_bytes``             bytes     total client -> server bytes (all stages, legate2023 App. A accounting)
  ``downlink_bytes``           bytes     total server -> client bytes
  ``compute_f``                F         total client compute, F = one forward pass of one sample (App. A)
  ``rounds``                   rounds    communication rounds of the training stage actually run
  ``best_round``               rounds    round of the best evaluation (absolute round index)
  ``client_lr``, ``server_lr`` lr        full-model training only: the learning rates used
  ``train_images_per_s``       img/s     full-model training only: training throughput
  ``*_bytes_measured``         bytes     full-model training only: the tensors that crossed the wire, counted
  ===========================  ========  ========================================================================

* ``curve`` - one row per round (:func:`benchmark.curves.curve_frame`): ``round, stage, accuracy`` (percent, empty
  where not evaluated), ``test_loss, train_loss, uplink_bytes, downlink_bytes, compute_f`` (cumulative), ``wall_s``
  (cumulative), ``method, seed``. A closed-form initialisation contributes its rounds first (``stage = init``);
  the training stage's first row is the starting head.
* ``record`` - JSON: the protocol, the engine configuration, run metadata (device, precision, throughput, peak
  memory), the closed-form stage, the inputs' identities, the summary, commit, versions, machine
  (:func:`run_record`); full-model training adds the learning-rate choice and its source.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from benchmark import closed_form
from benchmark.curves import CURVE_COLUMNS, curve_frame, read_curve, write_curve  # noqa: F401  (re-exported)
from benchmark.data.partition import PartitionData, load_partition_for, make_partition
from benchmark.data.subsets import validation_split
from benchmark.errors import ConfigError
from benchmark.features.pointer import load_train_test, partition_data_of
from benchmark.features.preprocess import PreprocessName, get_preprocess
from benchmark.federated.checkpoint import CheckpointSpec
from benchmark.federated.history import Costs, RoundRecord
from benchmark.federated.precision import precision_from
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import RunResult, resolve_device
from benchmark.fl.image_data import ImageSet, keep_if_fits
from benchmark.fl.lp_features import CachedFeatures, run_lp_features
from benchmark.fl.methods import closed_form_head, init_head, run_method
from benchmark.fl.protocols import MethodSpec, Protocol, get_protocol
from benchmark.fl.train_protocols import TrainMethod, TrainProtocol, get_train_protocol
from benchmark.io import atomic_write_json, sha256_bytes
from benchmark.models.backbones import create_backbone
from benchmark.pipeline import split_labels
from benchmark.provenance import git_commit, machine, package_versions, peak_rss_mb
from benchmark.seeding import check_seed
from benchmark.tidy import make_row, write_tidy

TRAIN_STAGE = "lp"
INIT_STAGE = "init"
Holdout = Literal["test", "validation"]


# ------------------------------------------------------------------------------------------------ outcome
@dataclass
class JobOutcome:
    """What one job computed: the run, its protocol and engine configuration, the tidy rows, the curve, the record
    and the closed-form stage's description (``None`` without one)."""

    result: RunResult
    protocol: Protocol | TrainProtocol
    config: FLConfig
    rows: list[dict[str, Any]]
    curve: pd.DataFrame
    record: dict[str, Any]
    init: dict[str, Any] | None = None

    def write(
        self, out: str | Path, curve: str | Path | None = None, record: str | Path | None = None
    ) -> None:
        """Write the curve and the record where a path is given, then the tidy rows ``out`` (each atomically)."""
        if curve is not None:
            write_curve(self.curve, curve)
        if record is not None:
            atomic_write_json(record, self.record, checksum=True)
        write_tidy(self.rows, out)


def tidy_rows(
    res: RunResult, rounds: int, extra: Sequence[tuple[str, Any, str]] = (), *, wall_s: float, **labels: Any
) -> list[dict[str, Any]]:
    """The tidy rows of one run (module docstring table), each labelled with ``labels`` (dataset, model, method,
    seed, ...) and the provenance; ``extra`` ``(metric, value, unit)`` rows follow, those valued ``None`` left out."""
    labels |= {"git_commit": git_commit(), "versions": package_versions(), "machine": machine()}
    labels |= {"wall_s": round(wall_s, 3), "peak_rss_mb": round(peak_rss_mb(), 1)}
    metrics = [
        ("accuracy", 100.0 * res.reported_acc, "percent"),
        ("accuracy_best", 100.0 * res.best_acc, "percent"),
        ("accuracy_last", 100.0 * res.last_acc, "percent"),
        ("uplink_bytes", res.costs.uplink_bytes, "bytes"),
        ("downlink_bytes", res.costs.downlink_bytes, "bytes"),
        ("compute_f", res.costs.compute_f, "F"),
        ("rounds", rounds, "rounds"),
        ("best_round", res.best_round, "rounds"),
        *extra,
    ]
    rows = []
    for m, v, unit in metrics:
        if v is None:
            continue
        value = round(float(v), 4) if unit in ("percent", "img/s") else (float(v) if unit == "lr" else int(v))
        rows.append(make_row(**labels, metric=m, value=value, unit=unit))
    return rows


def run_record(
    res: RunResult, about: Mapping[str, Any], *, meta: Any, init: Any, inputs: Any
) -> dict[str, Any]:
    """The JSON record of one run: ``about`` (protocol, method, seed, ...), the engine configuration, ``meta``,
    the closed-form stage ``init``, the ``inputs``' identities, the summary and the provenance."""
    summary = {"reported_acc": res.reported_acc, "best_acc": res.best_acc, "best_round": res.best_round}
    summary |= {"last_acc": res.last_acc, "costs": asdict(res.costs)}
    return {
        **about,
        "config": res.config,
        "meta": jsonable(meta),
        "init": jsonable(init),
        "inputs": jsonable(inputs),
        "summary": summary,
        "git_commit": git_commit(),
        "versions": package_versions(),
        "machine": machine(),
    }


def partition_identity(part: Any) -> dict[str, Any]:
    """What a record says of the partition a run used (:class:`benchmark.data.partition.Partition`)."""
    return {"sha256": part.sha256, "seed": part.seed, "scheme": part.scheme, "params": dict(part.params)}


def jsonable(obj: Any) -> Any:
    """Numpy scalars/arrays -> plain JSON values (recursively)."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


# ------------------------------------------------------------------------------------------------ stage 1
def closed_form_init(
    spec: MethodSpec | TrainMethod,
    features: CachedFeatures,
    cfg: FLConfig,
    backbone: str,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[dict[str, np.ndarray], list[RoundRecord], Costs, dict[str, Any]]:
    """Fit ``spec.init`` on the clients' ``features`` (multi-round when ``spec.init_participation``).

    ``overrides`` replace options of the paper protocol (e.g. ``solver="solve64"`` for float64 features).
    FedNCM with a random bias (``legate2023-code``) draws it from the run's ``fedncm_bias`` stream.

    Returns the start head (:func:`benchmark.fl.methods.closed_form_head`, copied exactly), one curve row per
    initialisation round (accuracy of the head after that round), the stage-1 costs (module doc) and a
    description. The round schedule is drawn from the run's ``init_schedule`` stream.
    """
    assert spec.init is not None
    x_tr, y_tr, x_te, y_te = (
        t.numpy() for t in (features.train_x, features.train_y, features.test_x, features.test_y)
    )
    clients = list(features.client_indices)
    opts = closed_form.paper_protocol_options(spec.init, paper=spec.init_options, model_name=backbone)
    if spec.init == "fedcof":
        opts["seed"] = cfg.seeds.int_seed("init_noise")
    if spec.init == "fedncm" and opts.get("bias") in ("torch_default_init", "random"):
        opts["seed"] = cfg.seeds.int_seed("fedncm_bias")
    opts.update(overrides or {})
    sched_seed = cfg.seeds.int_seed("init_schedule")
    t0 = time.perf_counter()
    res = closed_form.run_method(
        spec.init, x_tr, y_tr, x_te, y_te, clients, features.classes,
        participation=spec.init_participation, schedule_seed=sched_seed, **opts,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    uplink = np.asarray(res.uplink_floats, dtype=np.int64)
    sizes = features.client_sizes()
    if spec.init_participation is not None:
        part = closed_form.participation_schedule(
            len(clients), participation=spec.init_participation, seed=sched_seed
        )
        schedule = [s.new for s in part]
        accs = [r["accuracy"] for r in res.extra["rounds"]]
    else:
        schedule, accs = [np.arange(len(clients))], [res.accuracy]
    rows: list[RoundRecord] = []
    up = comp = 0
    for r, (new, acc) in enumerate(zip(schedule, accs, strict=True)):
        up += int(uplink[new].sum()) * cfg.bytes_per_float
        comp += int(sizes[new].sum())
        last = r == len(schedule) - 1
        rows.append(
            RoundRecord(
                round=r + 1, stage=INIT_STAGE, test_acc=acc / 100.0, test_loss=float("nan"),
                train_loss=float("nan"), uplink_bytes=up, downlink_bytes=0, compute_f=comp,
                wall_s=wall if last else float("nan"), frozen_drift=float("nan"),
                clients=tuple(int(k) for k in new),
            )
        )  # fmt: skip
    head = closed_form_head(res.head.W, res.head.b, cfg)
    info = {
        "method": spec.init,
        "options": dict(opts),
        "paper_options": spec.init_options,
        "participation": spec.init_participation,
        "schedule_seed": sched_seed,
        "rounds": len(schedule),
        "all_clients_seen": bool(res.extra.get("all_clients_seen", True)),
        "accuracy": res.accuracy,
        "uplink_bytes": up,
        "wall_s": wall,
    }
    return head, rows, Costs(uplink_bytes=up, downlink_bytes=0, compute_f=comp, wall_s=wall), info


# ------------------------------------------------------------------------------------------------ LP on features
@dataclass
class FLInputs:
    """Cached features of one run with the identities of the files they came from."""

    features: CachedFeatures
    train_pointer: dict[str, Any]
    test_pointer: dict[str, Any]
    partition: Any  # benchmark.data.partition.Partition

    @property
    def train_np(self) -> tuple[np.ndarray, np.ndarray]:
        """The train split's features and labels as numpy arrays (the same memory)."""
        return self.features.train_x.numpy(), self.features.train_y.numpy()

    @property
    def test_np(self) -> tuple[np.ndarray, np.ndarray]:
        """The test split's features and labels as numpy arrays (the same memory)."""
        return self.features.test_x.numpy(), self.features.test_y.numpy()


def load_inputs(train: str | Path, test: str | Path, partition: str | Path, protocol: Protocol) -> FLInputs:
    """Read and cross-check the pointers, the partition and the protocol (one clear error per mismatch).

    The pointers go through :func:`benchmark.features.pointer.load_train_test` (split, fields, sha256, finite
    values, one extraction), the partition through :func:`benchmark.data.partition.load_partition_for`
    (drawn on these train rows).
    """
    ptr_tr, tr, ptr_te, te = load_train_test(train, test)
    for key, want in {"dataset": protocol.dataset, "backbone": protocol.backbone}.items():
        if ptr_tr[key] != want:
            raise ConfigError(
                f"{train}: field {key!r} is {ptr_tr[key]!r} but protocol {protocol.name!r} expects {want!r}",
                f"pass features of {want} or override with --set {key}={ptr_tr[key]}",
            )
    pre = (ptr_tr.get("preprocess") or {}).get("name")
    if pre is not None and pre != protocol.preprocess:
        raise ConfigError(
            f"{train}: field 'preprocess' is {pre!r} but protocol {protocol.name!r} expects "
            f"{protocol.preprocess!r}",
            f"extract with --preprocess {protocol.preprocess} or override with --set preprocess={pre}",
        )
    part = load_partition_for(partition, partition_data_of(ptr_tr), train)
    if part.num_clients != protocol.num_clients:
        raise ConfigError(
            f"{partition}: {part.num_clients} clients but protocol {protocol.name!r} has num_clients="
            f"{protocol.num_clients}",
            f"partition over {protocol.num_clients} clients or override with --set num_clients={part.num_clients}",
        )
    if part.scheme != protocol.partition_scheme:
        raise ConfigError(
            f"{partition}: scheme {part.scheme!r} but protocol {protocol.name!r} has partition_scheme="
            f"{protocol.partition_scheme!r}",
            f"override with --set partition_scheme={part.scheme}",
        )
    alpha = part.params.get("alpha")
    if protocol.alpha is not None and (alpha is None or not math.isclose(float(alpha), protocol.alpha)):
        raise ConfigError(
            f"{partition}: alpha {alpha!r} but protocol {protocol.name!r} has alpha={protocol.alpha}",
            f"override with --set alpha={alpha}",
        )
    feats = CachedFeatures(
        torch.from_numpy(np.ascontiguousarray(tr.features, dtype=np.float32)),
        torch.from_numpy(np.asarray(tr.labels, dtype=np.int64)),
        [np.asarray(k, dtype=np.int64) for k in part.clients],
        torch.from_numpy(np.ascontiguousarray(te.features, dtype=np.float32)),
        torch.from_numpy(np.asarray(te.labels, dtype=np.int64)),
        num_classes=int(ptr_tr["num_classes"]),
    )
    return FLInputs(feats, ptr_tr, ptr_te, part)


def _with_overrides(proto: Protocol, method: str, overrides: Mapping[str, Any] | None) -> Protocol:
    """``proto`` with ``overrides`` applied to it and ``method`` (:meth:`Protocol.with_overrides`); an unknown
    ``method`` raises naming the valid ones."""
    proto.method(method)
    return proto.with_overrides(method, overrides) if overrides else proto


def run_fl_job(
    protocol: str | Protocol,
    method: str,
    inputs: FLInputs,
    *,
    seed: int,
    overrides: Mapping[str, Any] | None = None,
    device: str = "auto",
    progress: bool = True,
) -> JobOutcome:
    """Run ``method`` of ``protocol`` (a name or a :class:`Protocol`) on ``inputs`` for run seed ``seed``.

    ``overrides`` change protocol / method fields (:meth:`Protocol.with_overrides`), e.g. ``{"rounds": 5}``
    for a smoke run; they are recorded. The partition is the caller's (its seed is its own).
    """
    proto = _with_overrides(
        get_protocol(protocol) if isinstance(protocol, str) else protocol, method, overrides
    )
    spec = proto.method(method)
    cfg = proto.fl_config(method, seed=seed, device=device, progress=progress)
    feats, part, ptr = inputs.features, inputs.partition, inputs.train_pointer
    wall0 = time.perf_counter()
    if spec.init:
        head, history, costs, init = closed_form_init(spec, feats, cfg, proto.backbone)
    else:
        head, history, costs, init = init_head(cfg, feats.feature_dim, feats.classes), [], None, None
    res = run_lp_features(
        feats, cfg, head, method=method, stage=TRAIN_STAGE, start_round=len(history), start_costs=costs,
        history=history,
    )  # fmt: skip
    weights = ptr.get("weights") or {}
    rows = tidy_rows(
        res, cfg.rounds, wall_s=time.perf_counter() - wall0, dataset=ptr["dataset"], model=ptr["backbone"],
        weights=weights.get("source"), weights_sha256=weights.get("sha256"), method=method,
        fl_algorithm=proto.server_opt, partition=part.scheme, alpha=part.params.get("alpha"),
        clients=part.num_clients, participation=proto.participation, seed=seed,
        data_checksum=ptr.get("data_checksum"), partition_hash=part.sha256, features_key=ptr.get("key_digest"),
    )  # fmt: skip
    keys = ("key_digest", "file_sha256", "subset", "num_samples")
    ident = {"train": {k: ptr.get(k) for k in keys}, "test": {k: inputs.test_pointer.get(k) for k in keys}}
    about = {"protocol": proto.to_dict(), "protocol_name": proto.name, "overrides": dict(overrides or {})}
    about |= {"method": method, "seed": seed}
    ident["partition"] = partition_identity(part)
    record = run_record(res, about, meta=res.meta, init=init, inputs=ident)
    return JobOutcome(res, proto, cfg, rows, curve_frame(res, method=method, seed=seed), record, init)


def fl_run_step(
    *,
    protocol: str,
    method: str,
    train: str | Path,
    test: str | Path,
    partition: str | Path,
    seed: int,
    out: str | Path,
    curve: str | Path | None = None,
    record: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    device: str = "auto",
    progress: bool = True,
) -> JobOutcome:
    """``flb fl-run``: load the inputs, run the job, write ``out`` (tidy), ``curve`` and ``record``."""
    check_seed(seed)
    proto = get_protocol(protocol)
    inputs = load_inputs(train, test, partition, _with_overrides(proto, method, overrides))
    job = run_fl_job(proto, method, inputs, seed=seed, overrides=overrides, device=device, progress=progress)
    job.write(out, curve, record)
    return job


# ------------------------------------------------------------------------------------------------ full model
@dataclass(frozen=True)
class TrainRequest:
    """Everything one full-model training run needs, resolved by the job (paths are the job's input files)."""

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
    keep_preprocessed: str = "auto"
    """Preprocess the images once and keep them on the device (:func:`benchmark.fl.image_data.keep_if_fits`:
    ``auto`` where they fit on a GPU, ``on``, ``off``); the same batches either way, so not part of the result's
    identity; the decision is in the record's ``meta.kept_preprocessed``."""
    preprocess: str | None = None
    """The run's preprocessing (:class:`benchmark.features.preprocess.PreprocessName`: the protocol's preset with
    ``@seedflip`` / ``@pil``); ``None``: the protocol's preset as it is (the ``fixed`` flip stream, float resize)."""


def _image_set(
    data: Any, proto: TrainProtocol, split: str, device: torch.device, req: TrainRequest
) -> ImageSet:
    """The split's images, resident on ``device`` as uint8 (:class:`benchmark.fl.image_data.ImageSet`), with the
    run's preprocessing: ``@seedflip`` draws the train split's frozen flips from the run seed's stream (issue 26)."""
    dtype = proto.precision.dtype
    pre = PreprocessName.parse(req.preprocess or proto.preprocess)
    if pre.preset != proto.preprocess:
        raise ConfigError(
            f"preprocessing {req.preprocess!r} is not a variant of protocol {proto.name!r}'s {proto.preprocess!r}",
            f"use {proto.preprocess} with modifiers (@seedflip, @pil) or leave it out",
        )
    name = pre.for_split(split, req.seed)
    if data.images is not None:  # in-memory datasets (CIFAR): exactly the split (and subset) loaded here
        images = torch.from_numpy(np.ascontiguousarray(data.images)).permute(0, 3, 1, 2)
        return ImageSet(
            images, data.labels, get_preprocess(name), split, device=device, dtype=dtype,
            channels_last=req.channels_last,
        )  # fmt: skip
    # folder datasets: decoded and resized once on the device (ImageSet.from_registry)
    return ImageSet.from_registry(
        proto.dataset, split, name, data_root=req.data_root, subset=req.subset, device=device,
        dtype=dtype, channels_last=req.channels_last,
    )  # fmt: skip


def _training_data(
    req: TrainRequest, proto: TrainProtocol, device: torch.device
) -> tuple[ImageSet, ImageSet, list[np.ndarray], dict[str, Any], int]:
    """The training and evaluation images, each client's rows of the training images, the inputs' identities
    and the number of classes (``holdout``: module docstring)."""
    train = split_labels(proto.dataset, "train", req.subset, 0, req.data_root)
    labels = np.asarray(train.labels, dtype=np.int64)
    ident: dict[str, Any] = {"train_checksum": train.checksum, "subset": req.subset}
    if req.holdout == "validation":
        keep, val = validation_split(labels, proto.val_fraction, 0)
        params = {k: v for k, v in proto.partition().items() if k != "scheme"}
        part = make_partition(proto.partition_scheme, labels[keep], 0, **params)
        clients = [keep[np.asarray(c, dtype=np.int64)] for c in part.clients]
        ident["validation"] = {
            "fraction": proto.val_fraction,
            "rows": int(val.size),
            "partition": part.sha256,
        }
        train_set = _image_set(train, proto, "train", device, req)
        eval_set = train_set.subset(val)
    else:
        if req.partition is None:
            raise ConfigError("a test-holdout training run needs the partition file", "pass partition=")
        drawn_on = PartitionData(proto.dataset, req.subset, "train", len(labels), train.checksum)
        part = load_partition_for(req.partition, drawn_on, req.partition)
        clients = [np.asarray(c, dtype=np.int64) for c in part.clients]
        ident["partition"] = partition_identity(part)
        test = split_labels(proto.dataset, "test", req.subset, 0, req.data_root)
        ident["test_checksum"] = test.checksum
        train_set = _image_set(train, proto, "train", device, req)
        eval_set = _image_set(test, proto, "test", device, req)
    if len(clients) != proto.num_clients:
        raise ConfigError(
            f"{req.partition}: {len(clients)} clients but protocol {proto.name!r} has {proto.num_clients}",
            "rebuild the partition for this protocol",
        )
    return train_set, eval_set, clients, ident, int(train.num_classes)


def _stage1(
    spec: TrainMethod, cfg: FLConfig, proto: TrainProtocol, model: torch.nn.Module, train_set: ImageSet,
    eval_set: ImageSet, clients: list[np.ndarray],
) -> tuple[dict[str, np.ndarray], list[RoundRecord], Costs, dict[str, Any]]:  # fmt: skip
    """Stage 1 (legate2023 §3.2, fedcof §4.3): :func:`closed_form_init` on the pre-trained body's features of the
    clients' own images, computed with the run's model, preprocessing and dtype (one forward pass over the
    training set, as the reference code does), evaluated on ``eval_set``. float64 runs solve in float64."""
    f_tr, f_ev = body_features(model, train_set), body_features(model, eval_set)
    y_tr = train_set.labels.cpu().numpy().astype(np.int64)
    y_ev = eval_set.labels.cpu().numpy().astype(np.int64)
    feats = CachedFeatures(
        torch.from_numpy(f_tr), torch.from_numpy(y_tr), clients, torch.from_numpy(f_ev), torch.from_numpy(y_ev),
        num_classes=int(max(y_tr.max(), y_ev.max())) + 1,
    )  # fmt: skip
    solver = {"solver": "solve64"} if proto.precision.dtype == torch.float64 else {}
    return closed_form_init(spec, feats, replace(cfg, head_bias="as_given"), proto.backbone, solver)


def run_training(req: TrainRequest) -> JobOutcome:
    """Run ``req`` (module docstring) and return the result, tidy rows, curve and record."""
    proto = get_train_protocol(req.protocol)
    if req.dtype is not None:
        proto = replace(proto, dtype=req.dtype)
    precision_from(dtype=proto.dtype, amp=req.amp)  # the one policy: an unknown value fails here, by name
    spec = proto.method(req.method)
    cfg = proto.fl_config(
        req.method, req.algorithm, seed=req.seed, client_lr=req.client_lr, server_lr=req.server_lr,
        device=req.device, amp=req.amp, progress=req.progress,
    )  # fmt: skip
    execution = {
        "client_exec": req.client_exec,
        "vector_chunk": req.vector_chunk,
        "channels_last": req.channels_last,
    }
    cfg = replace(cfg, **execution)
    device = resolve_device(cfg)
    wall0 = time.perf_counter()
    train_set, eval_set, clients_idx, ident, num_classes = _training_data(req, proto, device)
    kept = {"train": keep_if_fits(train_set, req.keep_preprocessed)}
    if not eval_set.shares_storage(train_set):
        kept["eval"] = keep_if_fits(eval_set, req.keep_preprocessed)
    clients = [train_set.subset(c) for c in clients_idx]
    model, weights = create_backbone(
        proto.backbone, req.weights if spec.pretrained else "random", num_classes=num_classes,
        seed=cfg.seeds.int_seed("model_init"), weights_dir=req.weights_dir,
    )  # fmt: skip
    model = model.to(dtype=proto.precision.dtype)
    ident["weights"] = asdict(weights)
    ident["preprocess"] = {"run": req.preprocess or proto.preprocess, "train": train_set.preprocess.key()}
    if req.init_ulps:
        nudge_parameters(model, req.init_ulps)
    if req.hash_inputs:
        ident["train_inputs_sha256"] = inputs_sha256(train_set)
        ident["eval_inputs_sha256"] = inputs_sha256(eval_set)
    init, history, two_stage = None, [], {}
    if spec.init is not None:
        head, history, stage1, init = _stage1(spec, cfg, proto, model, train_set, eval_set, clients_idx)
        two_stage = {"closed_form": (head["weight"], head["bias"]), "stage1_costs": stage1}
    ckpt = (
        None if req.checkpoint is None else CheckpointSpec(Path(req.checkpoint), every=req.checkpoint_every)
    )
    t_train = time.perf_counter()
    res = run_method(cfg, model=model, clients=clients, test=eval_set, checkpoint=ckpt, **two_stage)
    train_s = time.perf_counter() - t_train
    wall = time.perf_counter() - wall0
    curve = curve_frame(res, method=req.method, seed=req.seed)
    if history:  # the closed-form rounds go first in the curve (stage "init")
        first = curve_frame(replace(res, history=history), method=req.method, seed=req.seed)
        curve = pd.concat([first, curve], ignore_index=True)
    images = sum(len(c) for c in clients) / proto.num_clients * proto.clients_per_round * cfg.local_epochs
    throughput = images * cfg.rounds / train_s if train_s > 0 else float("nan")
    peak_gpu = round(torch.cuda.max_memory_allocated(device) / 2**20, 1) if device.type == "cuda" else None
    meta = {**res.meta, "train_wall_s": round(train_s, 3), "train_images_per_s": round(throughput, 1)}
    meta["peak_gpu_mb"] = peak_gpu
    meta["kept_preprocessed"] = kept
    costs = res.costs
    rows = tidy_rows(
        res, cfg.rounds,
        [("client_lr", cfg.client_lr, "lr"), ("server_lr", cfg.server_lr, "lr"),
         ("train_images_per_s", meta["train_images_per_s"], "img/s"),
         ("uplink_bytes_measured", costs.uplink_bytes_measured, "bytes"),
         ("downlink_bytes_measured", costs.downlink_bytes_measured, "bytes")],
        wall_s=wall, dataset=proto.dataset, model=proto.backbone, weights=ident["weights"].get("source", req.weights),
        weights_sha256=ident["weights"].get("sha256"), method=req.method, fl_algorithm=req.algorithm,
        partition=proto.partition_scheme, alpha=proto.alpha, clients=proto.num_clients,
        participation=proto.participation, seed=req.seed, data_checksum=ident.get("train_checksum"),
        partition_hash=ident.get("partition", {}).get("sha256"), features_key=None,
    )  # fmt: skip
    about = {"protocol": proto.to_dict(), "method": req.method, "algorithm": req.algorithm, "seed": req.seed}
    about |= {"holdout": req.holdout, "lr_choice": dict(req.lr_choice)}
    record = run_record(res, about, meta=meta, init=init, inputs=ident)
    return JobOutcome(res, proto, cfg, rows, curve, record, init)


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


def train_step(req: TrainRequest, *, out: str | Path, curve: str | Path, record: str | Path) -> JobOutcome:
    """Run ``req`` and write the tidy rows ``out``, the curve and the record (all atomically)."""
    outcome = run_training(req)
    outcome.write(out, curve, record)
    return outcome
