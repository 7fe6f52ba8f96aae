"""A reduced CPU configuration of FT and FedNCM+FT (legate2023 §4 / Table 2, CIFAR-10 x32 rows), pinned.

Full fine-tuning of SqueezeNet on 224 px CIFAR-10 over 100 clients is far beyond a 2-core CPU (one forward
+ backward pass runs at ~17 images/s there). This configuration keeps every mechanism of the protocol --
real CIFAR-10 images, the substitute pre-trained SqueezeNet 1.1, a Dirichlet(0.1) per-client partition,
partial participation, FedAvg over the whole network, FedNCM as stage 1 with legate2023's random bias,
best-on-test selection, legate2023 App. A cost accounting -- and shrinks the scale so that one run takes
seconds:

=====================  ===================================  ==================================================
knob                   here                                 paper (legate2023 §4, Table 4)
=====================  ===================================  ==================================================
images                 32 x 32 (``legate2023_cifar32``)     224 x 224 (the x32 rows of Table 2 use 32 x 32)
train / test           100 / 100 per class (stratified)     50,000 / 10,000
clients, participation 10, 50 % (5 per round)               100, 30 %
rounds                 10 real rounds, eval every round     200 (FLSim epochs: 800 rounds)
batch, lr              16, 0.001 (App. B grid value)        64, tuned
=====================  ===================================  ==================================================

Its numbers are **pinned** (``expected/pinned/fl_reduced_ft_cifar10x32.json``), not compared with the
paper: they guard the FT path of the engine against unnoticed changes. They are written only by::

    flb pin-reduced --write-pinned

and ``flb pin-reduced`` (without the flag) reruns and compares, as the test
``tests/test_fl_reduced.py`` does.

Portability (issue 9). The guard runs in **float64** (``ReducedConfig.dtype``: model, inputs and the FedNCM
statistics in double; the inputs are preprocessed in float32 and cast exactly) on one scoped torch thread. In
float32, another CPU's kernels (AVX2 vs AVX-512 blocking, another summation order) change the last bits of
every convolution; 10 rounds of SGD amplify that to 0.5 accuracy points (FedNCM+FT 33.3 vs 32.8 on an
Intel Xeon). In float64 the same rounding differences start 2^29 times smaller and stay far below anything a
change of the engine does. The guard then compares

* exactly what no CPU can change: the inputs' identities (data checksums, subset and partition hashes, the
  sha256 of the preprocessed float32 input tensors, the weights' sha256), the rounds, the bytes and compute
  counters, and the best round where the pinned curve's maximum is unambiguous;
* the per-round test accuracy, test loss and training loss within a tolerance that is **measured**, not
  chosen: :func:`measure_tolerance` reruns the pinned configuration under changes that must not count as a
  difference (other torch thread counts: other reduction orders; every initial parameter moved one float64
  ulp up: the size of a kernel's rounding difference) and takes :data:`TOLERANCE_MULTIPLE` times the largest
  deviation, with the floors of :data:`TOLERANCE_FLOOR`. The measurement (variants, deviations, CPU model) is
  stored in the pinned file and redone by ``flb pin-reduced --measure-tolerance``.

The cost counters keep ``bytes_per_float = 4`` (legate2023 App. A's float32 wire): float64 is how the guard
computes, not what it models.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import TensorDataset

from benchmark.data.partition import make_partition
from benchmark.data.registry import load_dataset
from benchmark.data.subsets import stratified_indices
from benchmark.errors import BenchmarkError, ConfigError
from benchmark.features.preprocess import get_preprocess
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import RunResult
from benchmark.fl.train_protocols import get_train_protocol
from benchmark.io import atomic_write_json, sha256_bytes
from benchmark.jobs import partition_tag, run_jobs
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.runners.fl_train import FLTrainJob

ROOT = Path(__file__).resolve().parents[2]
PINNED_PATH = ROOT / "expected" / "pinned" / "fl_reduced_ft_cifar10x32.json"
REGENERATE = "flb pin-reduced --write-pinned"
METHODS: tuple[str, ...] = ("ft", "fedncm_ft")

#: The comparison tolerance is :data:`TOLERANCE_MULTIPLE` times the largest deviation that
#: :func:`measure_tolerance` finds between the pinned run and its harmless variants, but at least
#: :data:`TOLERANCE_FLOOR`. The multiple covers CPUs whose kernels differ more than the variants do (another
#: vector width reorders every sum). The floors: losses to 1e-9 relative, so that a measurement that finds
#: (near) bit-identical runs does not demand bit-identity from another CPU; accuracy to 0.1 points = one of the
#: 1,000 test images, since an image whose top-2 logit margin lies within the rounding drift may flip.
#: Measured on the pinning machine (AMD EPYC, AVX-512; stored in the pinned file): 2 and 4 threads are
#: bit-identical to 1 (float64 CPU convolutions and GEMMs split the outputs, not the sums); one ulp on every
#: initial parameter moves the losses by <= 7e-15 relative after 10 rounds and no prediction; so the floor
#: applies. Cross-check from the float32 rerun: float32 moves the losses by 1.4e-2 relative (0.9 points), and
#: scaled by the float64/float32 rounding ratio 2^-29 that is 2.6e-11, 40x below the floor. A real regression
#: moves the losses by 2.7e-3 (client lr 1 % off) to 5.7e-2 (a client dropped from aggregation) within three
#: rounds: 6 to 8 orders of magnitude above the floor (tests/test_fl_reduced.py).
TOLERANCE_MULTIPLE = 100.0
TOLERANCE_FLOOR = {"loss_rtol": 1e-9, "accuracy_abs": 0.1}


@dataclass(frozen=True)
class Variant:
    """A change of how the pinned configuration is computed that must *not* count as a difference."""

    name: str
    threads: int | None = None
    """torch threads instead of ``ReducedConfig.threads`` (another reduction order in the kernels)."""
    init_ulps: int = 0
    """Move every initial parameter this many ulps of the run's dtype (``np.nextafter``; +1 = up)."""
    dtype: str | None = None
    """Another compute dtype; reported for information, never used for the tolerance."""
    informative: bool = False
    """Recorded in the measurement but not used to set the tolerance (the float32 reference)."""


#: What :func:`measure_tolerance` reruns. ``float32`` shows the size of the drift the float64 guard avoids.
VARIANTS: tuple[Variant, ...] = (
    Variant("threads_2", threads=2),
    Variant("threads_4", threads=4),
    Variant("init_plus_1ulp", init_ulps=1),
    Variant("init_minus_1ulp", init_ulps=-1),
    Variant("float32", dtype="float32", informative=True),
)


@dataclass(frozen=True)
class ReducedConfig:
    """The reduced configuration (module docstring table)."""

    dataset: str = "cifar10"
    backbone: str = "squeezenet1_1"
    weights: str = "substitute"
    preprocess: str = "legate2023_cifar32"
    train_per_class: int = 100
    test_per_class: int = 100
    subset_seed: int = 0
    num_clients: int = 10
    alpha: float = 0.1
    participation: float = 0.5
    rounds: int = 10
    batch_size: int = 16
    client_lr: float = 0.001
    """A value of legate2023's App. B grid. 0.01 (also on the grid) makes FedNCM+FT diverge to NaN here:
    the unit-norm FedNCM rows times the large pooled-feature norms give very large initial logits."""
    threads: int = 1
    dtype: str = "float64"
    """Compute dtype of the guard (model, inputs, FedNCM statistics): float64 keeps other CPUs' rounding
    differences ~1e-10 after 10 rounds, where float32's reach 0.5 accuracy points (module docstring)."""
    fedncm_bias: str = "random"
    """legate2023 code: the FedNCM head keeps nn.Linear's random bias (papers-code.md §1.4)."""

    def fl_config(self, seed: int) -> FLConfig:
        """Engine configuration (legate2023 reference defaults for everything not listed)."""
        return FLConfig(
            method="ft",
            num_clients=self.num_clients,
            participation=self.participation,
            rounds=self.rounds,
            batch_size=self.batch_size,
            client_lr=self.client_lr,
            eval_every=1,
            selection="best_on_test",
            seed=seed,
            device="cpu",
            progress=False,
        )


@dataclass
class ReducedData:
    """Preprocessed tensors and identities of the reduced configuration."""

    clients: list[TensorDataset]
    test: TensorDataset
    train_x: torch.Tensor
    train_y: torch.Tensor
    client_indices: list[np.ndarray]
    identity: dict[str, Any]


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block, restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _preprocess(images: np.ndarray, split: str, preset: str) -> torch.Tensor:
    """uint8 NHWC -> normalised float32 NCHW with the preset's frozen flip (FLSim: drawn once per image)."""
    pre = get_preprocess(preset)
    raw = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)
    flips = torch.from_numpy(pre.flip_mask(len(images), split))
    return pre(raw, flips).contiguous()


def _tensor_sha256(t: torch.Tensor) -> str:
    """sha256 of a tensor's bytes (the float32 preprocessed inputs: elementwise IEEE operations only, so
    every CPU computes the same bits)."""
    return sha256_bytes(t.contiguous().numpy().tobytes())


def _dtype(name: str) -> torch.dtype:
    if name not in ("float32", "float64"):
        raise ConfigError(
            f"reduced dtype must be float32 or float64, got {name!r}", "fix ReducedConfig.dtype"
        )
    return getattr(torch, name)


def load_reduced_data(rc: ReducedConfig, seed: int, data_root: str | Path | None = None) -> ReducedData:
    """Stratified subsets of the real CIFAR-10 splits, preprocessed once, partitioned over the clients.

    The frozen flip is drawn over the *subset's* indices (as if the subset were the dataset), the partition
    from the run seed's ``partition`` stream.
    """
    out = {}
    for split, per_class in (("train", rc.train_per_class), ("test", rc.test_per_class)):
        data = load_dataset(rc.dataset, split, data_root)
        idx = stratified_indices(data.labels, per_class, rc.subset_seed)
        assert data.images is not None
        x = _preprocess(data.images[idx], split, rc.preprocess)
        y = torch.as_tensor(np.asarray(data.labels)[idx], dtype=torch.long)
        out[split] = (x, y, idx, data.checksum)
    x, y, idx, checksum = out["train"]
    part = make_partition("dirichlet", y.numpy(), seed, num_clients=rc.num_clients, alpha=rc.alpha)
    clients_idx = [np.array(c, dtype=np.int64) for c in part.clients]
    clients = [TensorDataset(x[torch.as_tensor(c)], y[torch.as_tensor(c)]) for c in clients_idx]
    xt, yt, idx_t, checksum_t = out["test"]
    identity = {
        "train_inputs_sha256": _tensor_sha256(x),
        "test_inputs_sha256": _tensor_sha256(xt),
        "train_checksum": checksum,
        "test_checksum": checksum_t,
        "train_subset_sha256": sha256_bytes(np.asarray(idx, dtype=np.int64).tobytes()),
        "test_subset_sha256": sha256_bytes(np.asarray(idx_t, dtype=np.int64).tobytes()),
        "partition_sha256": part.sha256,
        "client_sizes": [len(c) for c in clients_idx],
    }
    return ReducedData(clients, TensorDataset(xt, yt), x, y, clients_idx, identity)


def create_model(rc: ReducedConfig, seed: int, weights_dir: str | Path | None = None) -> tuple[Any, Any]:
    """The pre-trained backbone with a fresh 10-class head (run seed's ``model_init`` stream), in ``rc.dtype``;
    returns the model and its weights' identity."""
    from benchmark.models.backbones import create_backbone  # local: heavy import (torchvision)

    model, ident = create_backbone(
        rc.backbone, rc.weights, num_classes=10, seed=rc.fl_config(seed).seeds.int_seed("model_init"),
        weights_dir=str(weights_dir) if weights_dir else None,
    )  # fmt: skip
    return model.to(_dtype(rc.dtype)), ident


#: The reduced configuration as a training protocol of the ``fl_train`` runner (benchmark/protocols/fl_train.yaml):
#: the guard runs through the runner's job, the path that produces the paper's training cells.
RUNNER_PROTOCOL = "reduced_cifar10_32"
#: The ReducedConfig fields a run may vary (tolerance variants; the regression test's client lr); every other
#: field is the protocol's (tests/test_fl_train_job.py checks that the two agree).
RUNNER_KNOBS: tuple[str, ...] = ("threads", "dtype", "client_lr")


def runner_job(method: str, seed: int, rc: ReducedConfig | None = None) -> Any:
    """The ``fl_train`` job of ``method`` / ``seed`` in the reduced configuration (its partition job is an input)."""
    rc = rc or ReducedConfig()
    proto = get_train_protocol(RUNNER_PROTOCOL)
    return FLTrainJob(
        dataset=rc.dataset, model=rc.backbone, weights=rc.weights, preprocess=proto.preprocess,
        subset=f"stratified{rc.train_per_class}", protocol=RUNNER_PROTOCOL, algorithm="fedavg", method=method,
        train_precision="fp32", ptag=partition_tag(proto.partition()), lr_from="stated", seed=seed,
    )  # fmt: skip


def run_via_runner(
    method: str,
    seed: int = 0,
    *,
    rc: ReducedConfig | None = None,
    data: ReducedData | None = None,
    data_root: str | Path | None = None,
    weights_dir: str | Path | None = None,
    init_ulps: int = 0,
    keep_preprocessed: str = "auto",
) -> tuple[RunResult, dict[str, Any]]:
    """One reduced run of ``method`` (``ft`` or ``fedncm_ft``) through the ``fl_train`` runner's job
    (:func:`runner_job`): its partition job is run (or reused), then the job's own request is trained in this
    process, in ``rc.dtype`` on ``rc.threads`` threads; ``init_ulps`` moves every initial parameter that many
    ulps (:func:`benchmark.fl.jobs.nudge_parameters`; tolerance measurement only); ``keep_preprocessed``: the
    request's (:func:`benchmark.fl.image_data.keep_if_fits`; the same result either way). Returns the result and
    the run identity, after checking that the runner saw exactly the inputs :func:`load_reduced_data`
    describes."""
    from benchmark.fl.jobs import run_training  # local: heavy import (pandas)

    rc = rc or ReducedConfig()
    fixed = {k: v for k, v in asdict(rc).items() if k not in RUNNER_KNOBS}
    if fixed != {k: v for k, v in asdict(ReducedConfig()).items() if k not in RUNNER_KNOBS}:
        raise ConfigError(
            f"the runner's protocol {RUNNER_PROTOCOL} fixes every ReducedConfig field but {', '.join(RUNNER_KNOBS)}",
            "change the protocol in benchmark/protocols/fl_train.yaml (and re-pin) instead",
        )
    if method not in METHODS:
        raise ConfigError(f"reduced method must be one of {', '.join(METHODS)}, got {method!r}", "")
    job = runner_job(method, seed, rc)
    config = {"data_root": str(data_root) if data_root else None, "device": "cpu", "progress": False}
    with torch_threads(rc.threads):
        data = data or load_reduced_data(rc, seed, data_root)
        run_jobs(list(job.inputs()), config)
        req = replace(
            job.request(config), weights_dir=str(weights_dir) if weights_dir else None, init_ulps=init_ulps,
            dtype=rc.dtype, client_lr=rc.client_lr, hash_inputs=True, checkpoint=None,
            keep_preprocessed=keep_preprocessed,
        )  # fmt: skip
        out = run_training(req)
    seen = out.record["inputs"]
    want = (
        data.identity["train_inputs_sha256"],
        data.identity["test_inputs_sha256"],
        data.identity["partition_sha256"],
    )
    got = (seen["train_inputs_sha256"], seen["eval_inputs_sha256"], seen["partition"]["sha256"])
    if got != want:
        raise BenchmarkError(
            f"the fl_train runner trained on other inputs than the reduced configuration: {got} != {want}"
        )
    info: dict[str, Any] = {"weights": seen["weights"], **data.identity}
    if out.record.get("init"):
        info["fedncm_accuracy"] = out.record["init"]["accuracy"]
    return out.result, info


def summary(res: RunResult) -> dict[str, Any]:
    """The pinned numbers of one run: per-round curve, selection, costs."""
    return {
        "rounds": [r.round for r in res.history],
        "accuracy": [round(100.0 * r.test_acc, 6) for r in res.history],
        "test_loss": [float(r.test_loss) for r in res.history],  # full precision: the tolerance is ~1e-9
        "train_loss": [None if r.train_loss != r.train_loss else float(r.train_loss) for r in res.history],
        "reported_accuracy": round(100.0 * res.reported_acc, 6),
        "best_round": res.best_round,
        "last_accuracy": round(100.0 * res.last_acc, 6),
        "uplink_bytes": res.costs.uplink_bytes,
        "downlink_bytes": res.costs.downlink_bytes,
        "compute_f": res.costs.compute_f,
    }


def compute_all(
    seeds: Sequence[int] = (0,),
    *,
    rc: ReducedConfig | None = None,
    variant: Variant | None = None,
    data_root: str | Path | None = None,
    weights_dir: str | Path | None = None,
    methods: Sequence[str] = METHODS,
) -> dict[str, Any]:
    """Every method for every seed: ``{"values": {method: {seed: summary}}, "identity": ..., "wall_s": ...}``.

    ``variant`` (tolerance measurement) changes the thread count, the dtype or the initial parameters' last bits.
    """
    rc = rc or ReducedConfig()
    init_ulps = 0
    if variant is not None:
        rc = replace(rc, threads=variant.threads or rc.threads, dtype=variant.dtype or rc.dtype)
        init_ulps = variant.init_ulps
    values: dict[str, dict[str, Any]] = {m: {} for m in methods}
    ident: dict[str, Any] = {}
    t0 = time.perf_counter()
    for seed in seeds:
        with torch_threads(rc.threads):
            data = load_reduced_data(rc, seed, data_root)
        for method in methods:
            res, info = run_via_runner(
                method, seed, rc=rc, data=data, data_root=data_root, weights_dir=weights_dir, init_ulps=init_ulps
            )  # fmt: skip
            values[method][str(seed)] = summary(res)
            ident[str(seed)] = {k: v for k, v in info.items() if k != "fedncm_accuracy"}
            if "fedncm_accuracy" in info:
                values[method][str(seed)]["fedncm_accuracy"] = round(info["fedncm_accuracy"], 6)
    return {"values": values, "identity": ident, "wall_s": round(time.perf_counter() - t0, 1)}


ACCURACY_KEYS = ("accuracy", "reported_accuracy", "last_accuracy", "fedncm_accuracy")
LOSS_KEYS = ("test_loss", "train_loss")
CURVE_KEYS = ("accuracy", *LOSS_KEYS)


def _floats(v: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray([np.nan if x is None else x for x in np.atleast_1d(v)], float))


def deviation(reference: dict[str, Any], other: dict[str, Any]) -> dict[str, float]:
    """Largest |difference| of the accuracies (points) and largest relative difference of the losses between
    two :func:`compute_all` value sets, over every method, seed and round (a NaN on one side only: inf)."""
    acc, loss = 0.0, 0.0
    for method, per_seed in reference.items():
        for seed, want in per_seed.items():
            got = other[method][seed]
            for key in ACCURACY_KEYS + LOSS_KEYS:
                if key not in want:
                    continue
                a, b = _floats(got[key]), _floats(want[key])
                if a.shape != b.shape:
                    return {"max_accuracy_abs": float("inf"), "max_loss_rel": float("inf")}
                both_nan = np.isnan(a) & np.isnan(b)
                d = np.where(both_nan, 0.0, np.abs(a - b))
                d = np.where(np.isnan(d), np.inf, d)
                if key in LOSS_KEYS:
                    loss = max(loss, float(np.max(d / np.where(both_nan, 1.0, np.abs(b)), initial=0.0)))
                else:
                    acc = max(acc, float(np.max(d, initial=0.0)))
    return {"max_accuracy_abs": acc, "max_loss_rel": loss}


def tolerance_from(measurement: dict[str, Any]) -> dict[str, float]:
    """The comparison tolerance a measurement implies: ``multiple x`` the worst non-informative deviation,
    at least the floor (:data:`TOLERANCE_MULTIPLE`, :data:`TOLERANCE_FLOOR`)."""
    used = [v for v in measurement["variants"].values() if not v["informative"]]
    if not used:
        raise ConfigError(
            "the tolerance measurement has no variant to measure with", "run every VARIANTS entry"
        )
    mult, floor = measurement["multiple"], measurement["floor"]
    return {
        "loss_rtol": max(mult * max(v["max_loss_rel"] for v in used), floor["loss_rtol"]),
        "accuracy_abs": max(mult * max(v["max_accuracy_abs"] for v in used), floor["accuracy_abs"]),
    }


def measure_tolerance(
    baseline: dict[str, Any],
    seeds: Sequence[int],
    *,
    variants: Sequence[Variant] = VARIANTS,
    data_root: str | Path | None = None,
    weights_dir: str | Path | None = None,
    log: Any = None,
) -> dict[str, Any]:
    """Rerun the pinned configuration under each harmless ``variant`` and record how far it moves from
    ``baseline`` (a :func:`compute_all` of the pinned configuration on this machine)."""
    out: dict[str, Any] = {}
    for v in variants:
        got = compute_all(seeds, variant=v, data_root=data_root, weights_dir=weights_dir)
        if got["identity"] != baseline["identity"]:
            raise BenchmarkError(f"tolerance variant {v.name} saw other inputs than the baseline run")
        dev = deviation(baseline["values"], got["values"])
        out[v.name] = {**asdict(v), **dev, "wall_s": got["wall_s"]}
        out[v.name].pop("name")
        if log:
            log(f"  {v.name:16s} max |d accuracy| {dev['max_accuracy_abs']:.3g} points, "
                f"max rel d loss {dev['max_loss_rel']:.3g}  ({got['wall_s']} s)")  # fmt: skip
    measurement = {
        "how": (
            "rerun of the pinned configuration per variant; max over methods, seeds, rounds of |d accuracy| "
            "(points) and |d loss| / |loss| against the baseline run on the same machine; tolerance = multiple "
            "x the worst non-informative variant, at least the floor (benchmark.apps.reduced.tolerance_from)"
        ),
        "command": "flb pin-reduced --measure-tolerance",
        "multiple": TOLERANCE_MULTIPLE,
        "floor": dict(TOLERANCE_FLOOR),
        "variants": out,
        "machine": machine(),
        "torch_version": torch.__version__,
    }
    measurement["tolerance"] = tolerance_from(measurement)
    return measurement


def pinned_document(
    computed: dict[str, Any], seeds: Sequence[int], measurement: dict[str, Any]
) -> dict[str, Any]:
    """The pinned file's content (``kind: pinned``, configuration, identities, values, measured tolerance)."""
    rc = ReducedConfig()
    cfg = rc.fl_config(0).to_dict()
    cfg.pop("seed")
    return {
        "kind": "pinned",
        "what": "legate2023 FT and FedNCM+FT, reduced CPU configuration (benchmark/apps/reduced.py); not paper values",
        "regenerate": REGENERATE,
        "reduced_config": asdict(rc),
        "config_hash": sha256_bytes(json.dumps({"reduced": asdict(rc), "fl": cfg}, sort_keys=True).encode()),
        "fl_config": cfg,
        "seeds": list(seeds),
        "identity": computed["identity"],
        "values": computed["values"],
        "tolerance": tolerance_from(measurement),
        "tolerance_measurement": measurement,
        "wall_s": computed["wall_s"],
        "git_commit": git_commit(),
        "versions": package_versions(),
        "machine": machine(),
        "torch_threads": rc.threads,
    }


def _near_best_rounds(want: dict[str, Any], tol: float) -> set[int]:
    """Rounds (after the first row) whose pinned accuracy is within ``2 tol`` of the pinned best: the rounds
    best-on-test may pick on a machine whose accuracies differ by up to ``tol``."""
    rounds, acc = want["rounds"], _floats(want["accuracy"])
    cand = [(r, a) for r, a in zip(rounds[1:], acc[1:], strict=True) if not np.isnan(a)]
    if not cand:
        return {want["best_round"]}
    best = max(a for _, a in cand)
    return {r for r, a in cand if a >= best - 2 * tol - 1e-9}


def compare(pinned: dict[str, Any], computed: dict[str, Any], *, rounds: int | None = None) -> list[str]:
    """Differences between pinned and recomputed values beyond the pinned tolerance (empty = agree).

    Exact: input identities, rounds, bytes, compute, and the best round up to accuracy ties within tolerance.
    Within ``pinned["tolerance"]``: per-round accuracy (absolute, points) and losses (relative).
    ``rounds``: ``computed`` ran only the first ``rounds`` rounds; compare the curves' first ``rounds + 1``
    rows and skip the end-of-run values (selection, cumulative costs).
    """
    problems: list[str] = []
    tol = pinned["tolerance"]
    if pinned.get("identity") != computed["identity"]:
        problems.append("inputs differ (data checksums, subsets, inputs, partition or weights): " + json.dumps(
            {"pinned": pinned.get("identity"), "now": computed["identity"]}, sort_keys=True
        ))  # fmt: skip
    for method, per_seed in pinned["values"].items():
        for seed, want in per_seed.items():
            got = computed["values"].get(method, {}).get(seed)
            where = f"{method} seed {seed}"
            if got is None:
                if rounds is None:
                    problems.append(f"{where}: not recomputed")
                continue
            if rounds is not None:
                want = {k: want[k][: rounds + 1] for k in ("rounds", *CURVE_KEYS)}
            exact = (
                ("rounds",)
                if rounds is not None
                else ("rounds", "uplink_bytes", "downlink_bytes", "compute_f")
            )
            for key in exact:
                if got[key] != want[key]:
                    problems.append(f"{where}: {key} {got[key]} != pinned {want[key]}")
            if rounds is None and got["best_round"] not in (
                near := _near_best_rounds(want, tol["accuracy_abs"])
            ):
                problems.append(f"{where}: best_round {got['best_round']} not among pinned {sorted(near)}")
            for key in ACCURACY_KEYS:
                if key not in want:
                    continue
                a, b = _floats(got[key]), _floats(want[key])
                if a.shape != b.shape or np.any(~(np.abs(a - b) <= tol["accuracy_abs"] + 1e-9)):
                    problems.append(
                        f"{where}: {key} {got[key]} != pinned {want[key]} (abs tol {tol['accuracy_abs']:.3g})"
                    )
            for key in LOSS_KEYS:
                a, b = _floats(got[key]), _floats(want[key])
                if a.shape != b.shape or not np.allclose(
                    a, b, rtol=tol["loss_rtol"], atol=0.0, equal_nan=True
                ):
                    worst = np.nanmax(np.abs(a - b) / np.abs(b)) if a.shape == b.shape else float("nan")
                    problems.append(
                        f"{where}: {key} differs by up to {worst:.3g} relative (rtol {tol['loss_rtol']:.3g}): "
                        f"{got[key]} != pinned {want[key]}"
                    )
    return problems


def _print_values(computed: dict[str, Any]) -> None:
    for method, per_seed in computed["values"].items():
        for seed, v in per_seed.items():
            print(
                f"{method:10s} seed {seed}: accuracy {v['reported_accuracy']:.2f}% (round {v['best_round']}), "
                f"last {v['last_accuracy']:.2f}%, {(v['uplink_bytes'] + v['downlink_bytes']) / 1e6:.1f} MB, "
                f"{v['compute_f']} F"
            )
    print(f"wall {computed['wall_s']} s")


def main(argv: Sequence[str] | None = None) -> int:
    """``flb pin-reduced [--write-pinned | --measure-tolerance]`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flb pin-reduced", description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--write-pinned", action="store_true",
        help=f"(re)write {PINNED_PATH.name}: values and a fresh tolerance measurement",
    )  # fmt: skip
    mode.add_argument(
        "--measure-tolerance", action="store_true",
        help="rerun the harmless variants (VARIANTS) and print the tolerance they imply; writes nothing",
    )  # fmt: skip
    ap.add_argument("--seeds", default="0", help="comma-separated run seeds (pinned: 0)")
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--weights-dir", default=None)
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
        computed = compute_all(seeds, data_root=args.data_root, weights_dir=args.weights_dir)
        _print_values(computed)
        measurement = None
        if args.write_pinned or args.measure_tolerance:
            print(f"tolerance measurement on {machine()}:")
            measurement = measure_tolerance(
                computed, seeds, data_root=args.data_root, weights_dir=args.weights_dir, log=print
            )  # fmt: skip
            print(f"implied tolerance: {json.dumps(measurement['tolerance'])}")
        if args.write_pinned:
            assert measurement is not None
            atomic_write_json(PINNED_PATH, pinned_document(computed, seeds, measurement))
            print(f"wrote {PINNED_PATH}")
            return 0
        if not PINNED_PATH.is_file():
            raise ConfigError(f"{PINNED_PATH} does not exist", f"run {REGENERATE}")
        pinned = json.loads(PINNED_PATH.read_text())
        if "tolerance_measurement" not in pinned:
            raise ConfigError(
                f"{PINNED_PATH} has no tolerance measurement (an older format)", f"run {REGENERATE}"
            )
        if measurement is not None:
            print(f"pinned tolerance:  {json.dumps(pinned['tolerance'])} "
                  f"(measured on {pinned['tolerance_measurement']['machine']})")  # fmt: skip
        problems = compare(pinned, computed)
    except BenchmarkError as err:
        print(f"reduced: error: {err}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"DIFFERS: {p}")
    print("agrees with the pinned values" if not problems else f"{len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
