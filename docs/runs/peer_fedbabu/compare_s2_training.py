"""The released FedBABU training at s = 2 (issue 27: the peer comparison of the fedbabu cells above the paper)
beside this suite's recorded run of the same configuration: CIFAR-10 4convNet, K = 100, shards s = 2, f = 0.1,
tau = 10, 32 rounds, seed 0's partition, initial weights and per-round clients on both sides.

    PYTHONPATH=. python docs/runs/peer_fedbabu/compare_s2_training.py

Reads ``theirs_fedbabu_s2_tau10_sameclients.train.json`` (written by ``benchmark/peers/drivers/fedbabu_driver.py``
from ``spec_fedbabu_s2_tau10_sameclients.json``) and the recorded training of the ledger; prints a markdown
table, round by round, and the summary.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
RECORD = Path("runs/pfl_train/586978ec68736003/files/results/runs/pfl/cifar10/4convnet-bnbatch/shards-2-K100-p0/"
              "fedbabu/f0.1-tau10-R32-m0.9-hl1-default-mudefault/last/seed0")  # fmt: skip


def main() -> None:
    theirs = json.loads((HERE / "theirs_fedbabu_s2_tau10_sameclients.train.json").read_text())
    ours_run = json.loads(RECORD.with_suffix(".json").read_text())
    with RECORD.with_suffix(".curve.csv").open() as f:
        ours = {int(r["round"]): float(r["accuracy"]) for r in csv.DictReader(f) if r["accuracy"]}
    rounds = [int(r) for r in theirs["rounds"]]
    print("| round | released `main_fed.py` | ours, CPU record |")
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
        print(f"| best model, first {len(theirs['initial_per_client'])} clients: initial / personalised | "
              f"{theirs['initial_mean']:.2f} / {theirs['personalised_mean']:.2f} | |")  # fmt: skip
    print()
    print(f"released minus ours over {len(d)} rounds: mean {d.mean():+.2f}, largest {d[np.abs(d).argmax()]:+.2f} "
          f"points; rounds 1-16 mean {d[:16].mean():+.2f}; rounds 17-32 mean {d[16:].mean():+.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
