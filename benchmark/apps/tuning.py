"""Client learning-rate grid on a validation split of the training set (never the test set).

legate2023 tunes the FedAvg client lr per dataset and method on {0.1, 0.07, 0.05, 0.03, 0.01, 0.007, 0.005,
0.003, 0.001} (App. B) but, for CIFAR-10, takes the values of Nguyen et al. (2023) without printing them. The
papers do not say on which data they selected (FLSim's eval set is the test set, papers-code.md §1.6). This
module selects honestly:

1. hold out a stratified ``val_fraction`` of every class of the *training* features (seeded stream
   ``validation``);
2. partition the rest over the protocol's K clients with the protocol's scheme (seeded ``partition``);
3. run the protocol's method for every lr of the grid, evaluating on the held-out split, with the protocol's
   own rounds, participation and selection rule (best-on-validation for ``best_on_test`` protocols);
4. choose the lr with the highest selected validation accuracy (ties: the first in grid order).

The record (every lr's best / last validation accuracy, the split, the partition hash, the inputs' identity)
is written as JSON; the protocol then states the chosen lr and a test checks that the two agree. Command::

    flb tune-lr --protocol legate2023_cifar10 --method lp \
        --train results/features/cifar10/.../all/train.json --out benchmark/fl/lr_grid/legate2023_cifar10-lp.json
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.data.partition import make_partition
from benchmark.data.subsets import validation_split
from benchmark.errors import BenchmarkError, ConfigError
from benchmark.features.pointer import load_features
from benchmark.fl.jobs import FLInputs, run_fl_job
from benchmark.fl.lp_features import CachedFeatures
from benchmark.fl.protocols import get_protocol
from benchmark.io import atomic_write_json
from benchmark.pipeline import parse_kv
from benchmark.provenance import git_commit, machine, package_versions

#: legate2023 App. B: the FedAvg client-lr grid for CIFAR-10, CUB, Cars and EuroSAT.
LEGATE2023_FEDAVG_GRID: tuple[float, ...] = (0.1, 0.07, 0.05, 0.03, 0.01, 0.007, 0.005, 0.003, 0.001)

#: The recorded grids stay beside the protocols that cite them (``benchmark/fl/protocols.py`` ``lr_source``).
LR_GRID_DIR = Path(__file__).resolve().parents[1] / "fl" / "lr_grid"


def lr_grid_search(
    protocol: str,
    method: str,
    train: str | Path,
    *,
    grid: Sequence[float] = LEGATE2023_FEDAVG_GRID,
    seed: int = 0,
    val_fraction: float = 0.1,
    overrides: Mapping[str, Any] | None = None,
    device: str = "auto",
    progress: bool = True,
) -> dict[str, Any]:
    """Run the grid (module docstring) and return the JSON-ready record."""
    proto = get_protocol(protocol)
    proto.method(method)
    if overrides:
        proto = proto.with_overrides(method, overrides)
    if not grid:
        raise ConfigError("the lr grid is empty", "pass at least one learning rate")
    ptr, fs = load_features(train, "train")  # the test split is never an input of the grid
    for key, want in (("dataset", proto.dataset), ("backbone", proto.backbone)):
        if ptr.get(key) != want:
            raise ConfigError(f"{train}: field {key!r} is {ptr.get(key)!r}, protocol expects {want!r}", "")
    x = np.ascontiguousarray(fs.features, dtype=np.float32)
    y = np.asarray(fs.labels, dtype=np.int64)
    rows, val = validation_split(y, val_fraction, seed)
    params: dict[str, Any] = {"num_clients": proto.num_clients}
    if proto.alpha is not None:
        params["alpha"] = proto.alpha
    part = make_partition(proto.partition_scheme, y[rows], seed, **params)
    feats = CachedFeatures(
        torch.from_numpy(x[rows]),
        torch.from_numpy(y[rows]),
        [np.asarray(c, dtype=np.int64) for c in part.clients],
        torch.from_numpy(x[val]),
        torch.from_numpy(y[val]),
        num_classes=int(ptr["num_classes"]),
    )
    inputs = FLInputs(feats, ptr, ptr, part)
    results = []
    t0 = time.perf_counter()
    for lr in grid:
        t = time.perf_counter()
        job = run_fl_job(
            proto,
            method,
            inputs,
            seed=seed,
            overrides={"client_lr": float(lr)},
            device=device,
            progress=progress,
        )
        r = job.result
        results.append(
            {
                "client_lr": float(lr),
                "val_selected": 100.0 * r.reported_acc,
                "val_best": 100.0 * r.best_acc,
                "val_best_round": r.best_round,
                "val_last": 100.0 * r.last_acc,
                "wall_s": round(time.perf_counter() - t, 2),
            }
        )
    best = max(range(len(results)), key=lambda i: (results[i]["val_selected"], -i))
    return {
        "kind": "lr_grid",
        "protocol": proto.name,
        "method": method,
        "overrides": dict(overrides or {}),
        "grid": [float(g) for g in grid],
        "grid_source": "legate2023 App. B (FedAvg)" if tuple(grid) == LEGATE2023_FEDAVG_GRID else "custom",
        "selection": proto.selection,
        "chosen_client_lr": results[best]["client_lr"],
        "results": results,
        "validation": {
            "fraction": val_fraction,
            "seed": seed,
            "stream": "validation",
            "train_rows": int(rows.size),
            "val_rows": int(val.size),
        },
        "partition": {
            "scheme": part.scheme,
            "params": dict(part.params),
            "seed": seed,
            "sha256": part.sha256,
        },
        "rounds": proto.real_rounds(method),
        "train_features": {
            k: ptr.get(k) for k in ("dataset", "backbone", "key_digest", "file_sha256", "weights")
        },
        "run_seed": seed,
        "wall_s": round(time.perf_counter() - t0, 1),
        "git_commit": git_commit(),
        "versions": package_versions(),
        "machine": machine(),
        "torch_threads": torch.get_num_threads(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``flb tune-lr`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flb tune-lr", description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", required=True)
    ap.add_argument("--method", required=True)
    ap.add_argument("--train", required=True, help="train feature pointer JSON")
    ap.add_argument("--out", required=True, help="JSON record to write")
    ap.add_argument("--grid", default=",".join(str(g) for g in LEGATE2023_FEDAVG_GRID))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--set", action="append", default=[], help="protocol override key=value")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        grid = [float(g) for g in args.grid.split(",") if g]
        rec = lr_grid_search(
            args.protocol, args.method, args.train, grid=grid, seed=args.seed, val_fraction=args.val_fraction,
            overrides=parse_kv(args.set), device=args.device, progress=not args.no_progress,
        )  # fmt: skip
    except (BenchmarkError, ValueError) as err:
        print(f"tuning: error: {err}", file=sys.stderr)
        return 2
    atomic_write_json(args.out, rec)
    for r in rec["results"]:
        print(f"lr {r['client_lr']:<7g} val {r['val_selected']:.2f}% (last {r['val_last']:.2f}%)")
    print(f"chosen client_lr {rec['chosen_client_lr']} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
