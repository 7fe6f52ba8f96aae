"""Successive halving vs the full learning-rate grid on a CPU-sized configuration (issue 28).

    python -m tools.lr_halving_demo --workdir DIR --out docs/runs/lr_halving_cpu/result.json \
        [--protocol halving_demo_cifar10_32] [--methods ft fedncm_ft] [--algorithm fedavg] [--eta 3] [--keep 2]

For each method: the :class:`~benchmark.runners.fl_train.LRHalvingJob` first (its rungs stop each grid point and
continue it from its checkpoint), then the full grid's :class:`~benchmark.runners.fl_train.LRChoiceJob`, whose
grid points continue the halving's checkpoints to full length (bit for bit the runs a fresh grid makes:
:mod:`benchmark.federated.checkpoint`), so the comparison costs the full grid once. Writes, per method, both
choices, whether they agree, the eliminated points with the full grid's accuracy of each, the point-rounds
each search trained and the wall time, plus the machine. Runs in ``--workdir`` (its own ``results/``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from benchmark.fl.lr_halving import agrees_with_grid
from benchmark.fl.train_protocols import get_train_protocol
from benchmark.io import atomic_write_json
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.runners.fl_train import LRChoiceJob, LRHalvingJob
from benchmark.tables.availability import choose_weights
from benchmark.workflow import load_config


def run_method(protocol: str, method: str, algorithm: str, eta: int, keep: int, config: dict) -> dict:
    proto = get_train_protocol(protocol)
    weights, why = choose_weights(proto.backbone, config.get("data_root"), config.get("weights_dir"))
    if weights is None:
        raise SystemExit(f"no weights for {proto.backbone}: {why}")
    fields = {"dataset": proto.dataset, "model": proto.backbone, "weights": weights, "preprocess": proto.preprocess,
              "subset": proto.subset, "protocol": protocol, "algorithm": algorithm, "method": method,
              "train_precision": "fp32"}  # fmt: skip
    halving = LRHalvingJob(**fields, eta=eta, keep=keep)
    t0 = time.perf_counter()
    halving.execute(config)
    t_halving = time.perf_counter() - t0
    grid = LRChoiceJob(**fields)
    t0 = time.perf_counter()
    for point in grid.grid():
        point.execute(config)
    grid.execute(config)
    t_grid_rest = time.perf_counter() - t0
    h = json.loads(Path(halving.path).read_text())
    g = json.loads(Path(grid.path).read_text())
    full = {(p["client_lr"], p["server_lr"]): p["val_accuracy"] for p in g["grid"]}
    eliminated = [{**e, "full_grid_val_accuracy": full[(e["client_lr"], e["server_lr"])]}
                  for e in h["search"]["eliminated"]]  # fmt: skip
    return {"method": method, "algorithm": algorithm, "comparison": agrees_with_grid(h, g),
            "halving_choice": h["choice"], "halving_val_accuracy": h["val_accuracy"],
            "grid_choice": g["choice"], "grid_val_accuracy": g["val_accuracy"],
            "grid": g["grid"], "rungs": h["search"]["rungs"], "eliminated": eliminated,
            "point_rounds": {"halving": h["search"]["point_rounds_trained"],
                             "full_grid": h["search"]["full_grid_point_rounds"]},
            "wall_s": {"halving": round(t_halving, 1), "grid_after_halving": round(t_grid_rest, 1)}}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--protocol", default="halving_demo_cifar10_32")
    ap.add_argument("--methods", nargs="+", default=["ft", "fedncm_ft"])
    ap.add_argument("--algorithm", default="fedavg")
    ap.add_argument("--eta", type=int, default=3)
    ap.add_argument("--keep", type=int, default=2)
    args = ap.parse_args()
    out = args.out.resolve()
    config = {**load_config(), "device": "cpu", "progress": False}
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(args.workdir)
    results = [run_method(args.protocol, m, args.algorithm, args.eta, args.keep, config) for m in args.methods]
    import torch

    atomic_write_json(out, {"protocol": args.protocol, "eta": args.eta, "keep": args.keep, "methods": results,
                            "machine": machine(), "torch_threads": torch.get_num_threads(),
                            "git_commit": git_commit(), "versions": package_versions()})  # fmt: skip
    for r in results:
        c = r["comparison"]
        print(f"{r['method']}: halving {c['halving']} / grid {c['grid']}: {'AGREE' if c['agree'] else 'DIFFER'}; "
              f"point-rounds {r['point_rounds']['halving']} vs {r['point_rounds']['full_grid']}")  # fmt: skip


if __name__ == "__main__":
    main()
