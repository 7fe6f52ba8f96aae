"""Job-level entry point of federated training on cached features: one run -> tidy rows + a per-round curve.

This is what the table workflow calls (``flb fl-run``, :func:`fl_run_step`)::

    flb fl-run --protocol legate2023_cifar10 --method lp \
        --train results/features/.../all/train.json --test results/features/.../all/test.json \
        --partition results/partitions/cifar10-dirichlet0.1-k100-seed0.json --seed 0 \
        --out results/runs/fl/legate2023_cifar10-lp-seed0.csv \
        [--curve ...-curve.csv] [--record ...-record.json] [--set rounds=5 ...] [--device cpu] [--no-progress]

Inputs: the feature pointers written by :func:`benchmark.pipeline.extract_step` (train and test split of
one backbone), a partition written by :func:`benchmark.pipeline.partition_step` (indices into the train
split) and a protocol of :mod:`benchmark.fl.protocols` with one of its methods.

Outputs (all written atomically):

* ``out`` - tidy CSV (:data:`benchmark.tidy.TIDY_COLUMNS`; ``paper``/``table``/``cell`` left empty for the
  caller), one row per metric:

  ==================  ========  =================================================================================
  metric              unit      value
  ==================  ========  =================================================================================
  ``accuracy``        percent   the protocol's reported accuracy (``selection``: best-on-test or last round)
  ``accuracy_best``   percent   best test accuracy over the evaluations of the training stage
  ``accuracy_last``   percent   test accuracy after the last round
  ``uplink_bytes``    bytes     total client -> server bytes (all stages, legate2023 App. A accounting)
  ``downlink_bytes``  bytes     total server -> client bytes
  ``compute_f``       F         total client compute, F = one forward pass of one sample (App. A)
  ``rounds``          rounds    communication rounds of the training stage actually run
  ``best_round``      rounds    round of the best evaluation (absolute round index)
  ==================  ========  =================================================================================

* ``curve`` (optional) - one row per round: ``round, stage, accuracy`` (percent, empty where not evaluated),
  ``test_loss, train_loss, uplink_bytes, downlink_bytes, compute_f`` (cumulative), ``wall_s`` (cumulative),
  ``method, seed``. A closed-form initialisation contributes its rounds first (``stage = init``); the
  training stage is ``stage = lp``, its first row is the starting head (format: :mod:`benchmark.curves`).
* ``record`` (optional) - JSON with the protocol, the engine configuration, run metadata, input identities.

Each carries a checksum sidecar (``<file>.sha256``, :func:`benchmark.io.atomic_path`);
:func:`benchmark.curves.read_curve` and :func:`benchmark.tidy.read_tidy` check it and the file's structure
before anything is parsed.

Stage-1 costs of a closed-form initialisation (fedcof Fig. 4): uplink = the statistics the clients send
(:mod:`benchmark.closed_form`, 4 bytes per float), downlink 0 (the pre-trained body is shared beforehand,
as in legate2023 Eq. 3-4), compute = one forward pass per training sample of the clients seen (1F each).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from benchmark.closed_form import paper_protocol_options, participation_schedule, run_method
from benchmark.curves import CURVE_COLUMNS, curve_frame, read_curve, write_curve  # noqa: F401  (re-exported)
from benchmark.data.partition import load_partition_for
from benchmark.errors import ConfigError
from benchmark.features.pointer import load_train_test, partition_data_of
from benchmark.federated.history import Costs, RoundRecord
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import RunResult
from benchmark.fl.lp_features import CachedFeatures, run_lp_features
from benchmark.fl.methods import closed_form_head, init_head
from benchmark.fl.protocols import MethodSpec, Protocol, get_protocol
from benchmark.io import atomic_write_json
from benchmark.provenance import git_commit, machine, package_versions, peak_rss_mb
from benchmark.seeding import check_seed
from benchmark.tidy import make_row, write_tidy

TRAIN_STAGE = "lp"
INIT_STAGE = "init"


@dataclass
class FLInputs:
    """Cached features of one run with the identities of the files they came from."""

    features: CachedFeatures
    train_pointer: dict[str, Any]
    test_pointer: dict[str, Any]
    partition: Any  # benchmark.data.partition.Partition
    train_np: tuple[np.ndarray, np.ndarray]
    test_np: tuple[np.ndarray, np.ndarray]


@dataclass
class FLJobResult:
    """What :func:`run_fl_job` produced."""

    result: RunResult
    protocol: Protocol
    method: str
    config: FLConfig
    rows: list[dict[str, Any]]
    curve: pd.DataFrame
    init: dict[str, Any] | None = None
    inputs: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ inputs
def load_inputs(train: str | Path, test: str | Path, partition: str | Path, protocol: Protocol) -> FLInputs:
    """Read and cross-check the pointers, the partition and the protocol (one clear error per mismatch).

    The pointers go through :func:`benchmark.features.pointer.load_train_test` (split, fields, sha256, finite
    values, one extraction), the partition through :func:`benchmark.data.partition.load_partition_for`
    (drawn on these train rows).
    """
    ptr_tr, tr, ptr_te, te = load_train_test(train, test)
    expect = {"dataset": protocol.dataset, "backbone": protocol.backbone}
    for key, want in expect.items():
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
    c = int(ptr_tr["num_classes"])
    x_tr = np.ascontiguousarray(tr.features, dtype=np.float32)
    x_te = np.ascontiguousarray(te.features, dtype=np.float32)
    y_tr = np.asarray(tr.labels, dtype=np.int64)
    y_te = np.asarray(te.labels, dtype=np.int64)
    feats = CachedFeatures(
        torch.from_numpy(x_tr),
        torch.from_numpy(y_tr),
        [np.asarray(k, dtype=np.int64) for k in part.clients],
        torch.from_numpy(x_te),
        torch.from_numpy(y_te),
        num_classes=c,
    )
    return FLInputs(feats, ptr_tr, ptr_te, part, (x_tr, y_tr), (x_te, y_te))


# ------------------------------------------------------------------------------------------------ stage 1
def closed_form_init(
    spec: MethodSpec,
    inputs: FLInputs,
    cfg: FLConfig,
    backbone: str,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[dict[str, np.ndarray], list[RoundRecord], Costs, dict[str, Any]]:
    """Fit ``spec.init`` on the clients' cached features (multi-round when ``spec.init_participation``).

    ``overrides`` replace options of the paper protocol (e.g. ``solver="solve64"`` for float64 features).
    FedNCM with a random bias (``legate2023-code``) draws it from the run's ``fedncm_bias`` stream.

    Returns the LP start head (:func:`benchmark.fl.methods.closed_form_head`, copied exactly), one curve row
    per initialisation round (accuracy of the head after that round), the stage-1 costs (module doc) and a
    description. The round schedule is drawn from the run's ``init_schedule`` stream.
    """
    assert spec.init is not None
    (x_tr, y_tr), (x_te, y_te) = inputs.train_np, inputs.test_np
    clients = list(inputs.features.client_indices)
    c = inputs.features.classes
    opts = paper_protocol_options(spec.init, paper=spec.init_options, model_name=backbone)
    if spec.init == "fedcof":
        opts["seed"] = cfg.seeds.int_seed("init_noise")
    if spec.init == "fedncm" and opts.get("bias") == "random":
        opts["seed"] = cfg.seeds.int_seed("fedncm_bias")
    opts.update(overrides or {})
    sched_seed = cfg.seeds.int_seed("init_schedule")
    t0 = time.perf_counter()
    res = run_method(
        spec.init, x_tr, y_tr, x_te, y_te, clients, c,
        participation=spec.init_participation, schedule_seed=sched_seed, **opts,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    uplink = np.asarray(res.uplink_floats, dtype=np.int64)
    sizes = inputs.features.client_sizes()
    if spec.init_participation is not None:
        schedule = [
            s.new
            for s in participation_schedule(
                len(clients), participation=spec.init_participation, seed=sched_seed
            )
        ]
        accs = [r["accuracy"] for r in res.extra["rounds"]]
    else:
        schedule = [np.arange(len(clients))]
        accs = [res.accuracy]
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
        "options": {k: v for k, v in opts.items()},
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


# ------------------------------------------------------------------------------------------------ the job
def run_fl_job(
    protocol: str | Protocol,
    method: str,
    inputs: FLInputs,
    *,
    seed: int,
    overrides: Mapping[str, Any] | None = None,
    device: str = "auto",
    progress: bool = True,
) -> FLJobResult:
    """Run ``method`` of ``protocol`` (a name or a :class:`Protocol`) on ``inputs`` for run seed ``seed``.

    ``overrides`` change protocol / method fields (:meth:`Protocol.with_overrides`), e.g. ``{"rounds": 5}``
    for a smoke run; they are recorded. The partition is the caller's (its seed is its own).
    """
    proto = get_protocol(protocol) if isinstance(protocol, str) else protocol
    proto.method(method)
    if overrides:
        proto = proto.with_overrides(method, overrides)
    spec = proto.method(method)
    cfg = proto.fl_config(method, seed=seed, device=device, progress=progress)
    feats = inputs.features
    wall0 = time.perf_counter()
    if spec.init:
        head, history, costs, init_info = closed_form_init(spec, inputs, cfg, proto.backbone)
        start = len(history)
    else:
        head, history, costs, init_info, start = (
            init_head(cfg, feats.feature_dim, feats.classes),
            [],
            None,
            None,
            0,
        )
    res = run_lp_features(
        feats,
        cfg,
        head,
        method=method,
        stage=TRAIN_STAGE,
        start_round=start,
        start_costs=costs,
        history=history,
    )
    wall = time.perf_counter() - wall0
    curve = curve_frame(res, method=method, seed=seed)
    rows = tidy_rows(res, proto, method, inputs, seed=seed, wall_s=wall, train_rounds=cfg.rounds)
    ident = {
        "train": {k: inputs.train_pointer.get(k) for k in ("key_digest", "file_sha256", "subset", "num_samples")},
        "test": {k: inputs.test_pointer.get(k) for k in ("key_digest", "file_sha256", "subset", "num_samples")},
        "partition": {"sha256": inputs.partition.sha256, "seed": inputs.partition.seed,
                      "scheme": inputs.partition.scheme, "params": dict(inputs.partition.params)},
    }  # fmt: skip
    return FLJobResult(res, proto, method, cfg, rows, curve, init_info, ident)


def tidy_rows(
    res: RunResult,
    proto: Protocol,
    method: str,
    inputs: FLInputs,
    *,
    seed: int,
    wall_s: float,
    train_rounds: int,
) -> list[dict[str, Any]]:
    """The tidy rows of one run (module docstring table)."""
    ptr = inputs.train_pointer
    part = inputs.partition
    weights = ptr.get("weights") or {}
    common = dict(
        dataset=ptr["dataset"], model=ptr["backbone"], weights=weights.get("source"),
        weights_sha256=weights.get("sha256"), method=method, fl_algorithm=proto.server_opt,
        partition=part.scheme, alpha=part.params.get("alpha"), clients=part.num_clients,
        participation=proto.participation, seed=seed, status="ok", data_checksum=ptr.get("data_checksum"),
        partition_hash=part.sha256, features_key=ptr.get("key_digest"), git_commit=git_commit(),
        versions=package_versions(), machine=machine(), wall_s=round(wall_s, 3),
        peak_rss_mb=round(peak_rss_mb(), 1),
    )  # fmt: skip
    metrics = [
        ("accuracy", 100.0 * res.reported_acc, "percent"),
        ("accuracy_best", 100.0 * res.best_acc, "percent"),
        ("accuracy_last", 100.0 * res.last_acc, "percent"),
        ("uplink_bytes", res.costs.uplink_bytes, "bytes"),
        ("downlink_bytes", res.costs.downlink_bytes, "bytes"),
        ("compute_f", res.costs.compute_f, "F"),
        ("rounds", train_rounds, "rounds"),
        ("best_round", res.best_round, "rounds"),
    ]
    return [
        make_row(**common, metric=m, value=round(float(v), 4) if unit == "percent" else int(v), unit=unit)
        for m, v, unit in metrics
    ]


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
) -> FLJobResult:
    """``flb fl-run``: load the inputs, run the job, write ``out`` (tidy), ``curve`` and ``record``."""
    check_seed(seed)
    proto = get_protocol(protocol)
    proto.method(method)
    if overrides:
        proto = proto.with_overrides(method, overrides)
    inputs = load_inputs(train, test, partition, proto)
    job = run_fl_job(proto, method, inputs, seed=seed, device=device, progress=progress)
    if curve is not None:
        write_curve(job.curve, curve)
    if record is not None:
        atomic_write_json(
            record,
            {
                "protocol": proto.to_dict(),
                "protocol_name": protocol,
                "overrides": dict(overrides or {}),
                "method": method,
                "seed": seed,
                "config": job.result.config,
                "meta": _jsonable(job.result.meta),
                "init": _jsonable(job.init),
                "inputs": job.inputs,
                "summary": {
                    "reported_acc": job.result.reported_acc,
                    "best_acc": job.result.best_acc,
                    "best_round": job.result.best_round,
                    "last_acc": job.result.last_acc,
                    "costs": asdict(job.result.costs),
                },
                "git_commit": git_commit(),
                "versions": package_versions(),
                "machine": machine(),
            },
            checksum=True,
        )
    write_tidy(job.rows, out)
    return job


def _jsonable(obj: Any) -> Any:
    """Numpy scalars/arrays -> plain JSON values (recursively)."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
