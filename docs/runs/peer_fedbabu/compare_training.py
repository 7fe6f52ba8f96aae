"""A released FedBABU training beside this suite's recorded run of the same configuration (issue 27: the peer
comparison of the fedbabu cells above the paper): CIFAR-10 4convNet, K = 100, f = 0.1, tau = 10, 32 rounds,
seed 0's partition, initial weights and per-round clients on both sides.

    PYTHONPATH=. python docs/runs/peer_fedbabu/compare_training.py THEIRS.train.json RECORD_STEM

``THEIRS.train.json`` is written by ``benchmark/peers/drivers/fedbabu_driver.py`` (mode ``train``) from a
``spec_*.json`` of this folder; ``RECORD_STEM`` is the recorded training's result without its suffix (its
``.json`` and ``.curve.csv`` are read). Prints a markdown table, round by round, and the summary. The runs
compared so far:

* FedBABU s = 2: ``theirs_fedbabu_s2_tau10_sameclients.train.json`` and ``runs/pfl_train/586978ec68736003/files/
  results/runs/pfl/cifar10/4convnet-bnbatch/shards-2-K100-p0/fedbabu/f0.1-tau10-R32-m0.9-hl1-default-mudefault/
  last/seed0``;
* FedAvg s = 5: ``theirs_fedavg_s5_tau10_sameclients.train.json`` and ``runs/pfl_train/62582baff92a8a03/files/
  results/runs/pfl/cifar10/4convnet-bnbatch/shards-5-K100-p0/fedavg/f0.1-tau10-R32-m0.9-hl1-default-mudefault/
  last/seed0``.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("theirs", type=Path, help="the driver's <name>.train.json")
    parser.add_argument("record", type=Path, help="the recorded result, without .json / .curve.csv")
    args = parser.parse_args()
    theirs = json.loads(args.theirs.read_text())
    ours_run = json.loads(args.record.with_suffix(".json").read_text())
    with args.record.with_suffix(".curve.csv").open() as f:
        ours = {int(r["round"]): float(r["accuracy"]) for r in csv.DictReader(f) if r["accuracy"]}
    rounds = [int(r) for r in theirs["rounds"]]
    print("| round | released `main_fed.py` | ours, recorded |")
    print("|---|---|---|")
    diffs = []
    for r, a in zip(rounds, theirs["accuracy"], strict=True):
        print(f"| {r} | {a:.2f} | {ours[r]:.2f} |")
        diffs.append(a - ours[r])
    d = np.asarray(diffs)
    print(f"| best (round) / last | **{theirs['best_accuracy']:.2f} ({theirs['best_round']}) / "
          f"{theirs['last_accuracy']:.2f}** | {ours_run['best_accuracy']:.2f} ({ours_run['best_round']}) / "
          f"{ours_run['last_accuracy']:.2f} |")  # fmt: skip
    if "initial_mean" in theirs:
        print(f"| best model, {len(theirs['initial_per_client'])} clients: initial / personalised | "
              f"{theirs['initial_mean']:.2f} / {theirs['personalised_mean']:.2f} | |")  # fmt: skip
    print()
    half = len(d) // 2
    print(f"released minus ours over {len(d)} rounds: mean {d.mean():+.2f}, largest {d[np.abs(d).argmax()]:+.2f} "
          f"points; rounds 1-{half} mean {d[:half].mean():+.2f}; rounds {half + 1}-{len(d)} mean "
          f"{d[half:].mean():+.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
