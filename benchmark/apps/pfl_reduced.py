"""A reduced CPU configuration of FedBABU and FedAvg (fedbabu §3, CIFAR-10 / 4convNet), pinned, run through
the ``pfl`` runner's jobs (:class:`~benchmark.runners.pfl.PFLTrainJob`, :class:`~benchmark.runners.pfl.PFLEvalJob`).

=====================  ==========================================  ==========================================
knob                   here                                        paper (fedbabu §3, App. Tables 13-15)
=====================  ==========================================  ==========================================
data, network          real CIFAR-10, 4convNet, shards s=2         the same
clients                100 (500 train / 100 test each)             100
participation, tau     f = 0.02 (2 clients per round), tau = 1     f in {0.1, 1.0}, tau in {1, 4, 10}
rounds                 4 (lr x0.1 after rounds 2 and 3)            320 / tau
evaluated clients      the first 10 (initial and personalised)     all 100
fine-tuning            1 epoch, full network, lr 1e-3, m 0.9       5 epochs (Table 4)
arithmetic             float64, one torch thread                   float32
=====================  ==========================================  ==========================================

Every mechanism runs: the reference's shards dealing, per-client test sets from the clients' own classes,
augmentation, body-only local updates with the head at lr 0, unweighted averaging of the body, per-round
evaluation of each client with batch-statistics BatchNorm, best-round selection, per-client fine-tuning.
Its numbers are **pinned** in ``expected/pinned/pfl_reduced_cifar10_4convnet.json`` (never compared with the
paper), written only by ``python -m benchmark.apps.pfl_reduced --write-pinned``; the test
``tests/test_pfl_reduced.py`` reruns and compares.

Portability: float64 on one thread (as ``benchmark/apps/reduced.py`` argues for the FT guard); compared
exactly: the data checksums and partition hash, the selected round; within a **measured** tolerance: the
per-round training loss and weighted test accuracy and the per-client initial / personalised accuracies.
:func:`measure_tolerance` reruns with 2 torch threads and takes ``TOLERANCE_MULTIPLE`` times the largest
deviation, with floors (loss 1e-9 relative; accuracy 0.1 points on the 1,000-image weighted mean, 1 point =
one image for a per-client value).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from contextlib import chdir
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.apps.reduced import torch_threads
from benchmark.io import atomic_write_json
from benchmark.jobs import run_jobs
from benchmark.provenance import machine, package_versions
from benchmark.runners.pfl import PFLEvalJob, PFLTrainJob

ROOT = Path(__file__).resolve().parents[2]
PINNED_PATH = ROOT / "expected" / "pinned" / "pfl_reduced_cifar10_4convnet.json"
REGENERATE = "python -m benchmark.apps.pfl_reduced --write-pinned"
ALGORITHMS = ("fedbabu", "fedavg")
KNOBS = {"pfl_dtype": "float64", "pfl_eval_clients": 10, "device": "cpu", "progress": False}
TOLERANCE_MULTIPLE = 100.0
TOLERANCE_FLOOR = {"loss_rtol": 1e-9, "accuracy_abs": 0.1, "client_accuracy_abs": 1.0}


def jobs(algorithm: str) -> tuple[Any, Any]:
    """The training job and the personalisation job of the reduced configuration."""
    base = dict(dataset="cifar10", model="4convnet", bn="batch", scheme="shards", scheme_param="2", clients=100,
                server_fraction="0", algorithm=algorithm, participation="0.02", local_epochs=1, rounds=4,
                momentum="0.9", head_lr="1", head_init="default", prox_mu="default", selection="best", seed=0)  # fmt: skip
    return PFLTrainJob(**base), PFLEvalJob(**base, evaluation="personalised", ft_part="full", ft_epochs=1,
                                          ft_lr="0.001", ft_momentum="0.9")  # fmt: skip


def compute(threads: int = 1, data_root: str | None = None) -> dict[str, Any]:
    """Run both algorithms through the runner's jobs in a scratch directory; the values the guard compares."""
    root = data_root or os.environ.get("FLB_DATA_ROOT")
    config = {**KNOBS, "data_root": str(Path(root).resolve()) if root else None}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, chdir(tmp), torch_threads(threads):
        for alg in ALGORITHMS:
            train, pers = jobs(alg)
            run_jobs([pers], config)
            rec = json.loads(Path(train.path).read_text())
            pr = json.loads(Path(pers.path).read_text())
            out[alg] = {
                "data_checksum": rec["data_checksum"], "partition_hash": rec["partition_hash"],
                "selected_round": rec["selected_round"],
                "train_loss": [h["train_loss"] for h in rec["history"]],
                "test_accuracy": [h["test_accuracy"] for h in rec["history"]],
                "initial": rec["initial"]["per_client"], "personalised": pr["per_client"],
            }  # fmt: skip
    return out


def deviation(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """Largest relative loss / absolute accuracy deviations between two :func:`compute` results."""
    loss = acc = client = 0.0
    for alg in ALGORITHMS:
        x, y = np.asarray(a[alg]["train_loss"]), np.asarray(b[alg]["train_loss"])
        loss = max(loss, float(np.max(np.abs(x - y) / np.abs(x))))
        acc = max(acc, float(np.max(np.abs(np.subtract(a[alg]["test_accuracy"], b[alg]["test_accuracy"])))))
        for key in ("initial", "personalised"):
            client = max(client, float(np.max(np.abs(np.subtract(a[alg][key], b[alg][key])))))
    return {"loss_rtol": loss, "accuracy_abs": acc, "client_accuracy_abs": client}


def measure_tolerance(reference: dict[str, Any], data_root: str | None = None) -> dict[str, Any]:
    """Rerun with 2 threads; tolerance = multiple x deviation, floored (module docstring)."""
    dev = deviation(reference, compute(threads=2, data_root=data_root))
    tol = {k: max(TOLERANCE_MULTIPLE * dev[k], TOLERANCE_FLOOR[k]) for k in TOLERANCE_FLOOR}
    return {"variants": ["2 torch threads"], "deviation": dev, "multiple": TOLERANCE_MULTIPLE,
            "floor": TOLERANCE_FLOOR, "tolerance": tol, "machine": machine()}  # fmt: skip


def compare(pinned: dict[str, Any], computed: dict[str, Any]) -> list[str]:
    """Differences beyond the pinned tolerance (empty: the guard holds)."""
    tol = pinned["tolerance_measurement"]["tolerance"]
    out = []
    for alg in ALGORITHMS:
        want, got = pinned["values"][alg], computed[alg]
        for key in ("data_checksum", "partition_hash", "selected_round"):
            if want[key] != got[key]:
                out.append(f"{alg}.{key}: pinned {want[key]!r}, computed {got[key]!r}")
        x, y = np.asarray(want["train_loss"]), np.asarray(got["train_loss"])
        if x.shape != y.shape or np.any(np.abs(x - y) > tol["loss_rtol"] * np.abs(x)):
            out.append(f"{alg}.train_loss: pinned {x.tolist()}, computed {y.tolist()}")
        if np.any(
            np.abs(np.subtract(want["test_accuracy"], got["test_accuracy"])) > tol["accuracy_abs"] + 1e-9
        ):
            out.append(
                f"{alg}.test_accuracy: pinned {want['test_accuracy']}, computed {got['test_accuracy']}"
            )
        for key in ("initial", "personalised"):
            d = np.abs(np.subtract(want[key], got[key]))
            if d.size and d.max() > tol["client_accuracy_abs"] + 1e-9:
                out.append(f"{alg}.{key}: per-client accuracies differ by up to {d.max():.2f} points")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--write-pinned", action="store_true", help="recompute, measure the tolerance, write the pin"
    )
    args = ap.parse_args(argv)
    computed = compute()
    if args.write_pinned:
        doc = {"kind": "pinned", "what": "benchmark/apps/pfl_reduced.py", "regenerate": REGENERATE,
               "knobs": KNOBS, "jobs": {a: [j.path for j in jobs(a)] for a in ALGORITHMS}, "values": computed,
               "tolerance_measurement": measure_tolerance(computed), "machine": machine(),
               "versions": package_versions()}  # fmt: skip
        atomic_write_json(PINNED_PATH, doc)
        print(f"wrote {PINNED_PATH}")
        return 0
    diff = compare(json.loads(PINNED_PATH.read_text()), computed)
    print("\n".join(diff) if diff else "pfl reduced guard: OK")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
