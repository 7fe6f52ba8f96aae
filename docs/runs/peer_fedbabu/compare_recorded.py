"""Build the fedbabu peer comparisons of issue 26 that use this suite's recorded runs (the full protocol,
CIFAR-10 4convNet, s = 10, f = 0.1, tau = 10, 32 rounds, seed 0) and the released code's outputs written by
``benchmark/peers/drivers/fedbabu_driver.py`` into this folder.

    PYTHONPATH=. python docs/runs/peer_fedbabu/compare_recorded.py RECORDED_RESULTS_DIR

``RECORDED_RESULTS_DIR``: the ``results/runs/pfl/cifar10/4convnet-bnbatch/shards-10-K100-p0`` folder holding the
recorded training records, models and personalisation files (``results/...`` here).

Writes ``comparison-*.json`` / ``.md`` beside this script (:class:`benchmark.peers.compare.PeerComparison`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from benchmark.peers.compare import AgreementRule, PeerComparison, SideRun, render
from benchmark.peers.fedbabu import DIFFERENCES, OFFICIAL_URL

HERE = Path(__file__).parent
RUN = "f0.1-tau10-R32-m0.9-hl1-default-mudefault/best/seed0"
COMMIT = "e34c15b42882"


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def trained_model_comparison(recorded: Path, algo: str) -> PeerComparison | None:
    """The released evaluation (every client) and personalisation (the first n clients) of the model this
    suite trained, beside this suite's recorded ones of the same model."""
    theirs_path = HERE / f"theirs_personalise_ours_trained_{algo}.json"
    if not theirs_path.is_file():
        return None
    theirs = _read(theirs_path)
    rec = _read(recorded / algo / f"{RUN}.json")
    pers = _read(recorded / algo / RUN / "personalised-full-e5-lr0.001-m0.9.json")
    n = len(theirs["clients"])
    ours_init = rec["initial"]["per_client"]
    ours_pers = pers["per_client"][:n]
    extra_o = {f"client {i} initial": float(a) for i, a in enumerate(ours_init)}
    extra_t = {f"client {i} initial": float(a) for i, a in enumerate(theirs["initial_per_client"])}
    po, pt = float(np.mean(ours_pers)), float(theirs["personalised_mean"])
    diffs = np.asarray(theirs["personalised_per_client"]) - np.asarray(ours_pers)
    se = float(diffs.std(ddof=1) / np.sqrt(n))
    ours = SideRun("ours", 0, (), (), float(np.mean(ours_init)), extra=extra_o,
                   command=f"recorded pfl_train + pfl_eval ({algo}, s=10, tau=10, best, seed 0)")  # fmt: skip
    their = SideRun("theirs", 0, (), (), float(theirs["initial_mean"]), extra=extra_t,
                    command="driver mode personalise: test_img_local_all + analysis.ipynb cell 2 on our model")  # fmt: skip
    return PeerComparison(
        family="fedbabu", config_name=f"trained-model-{algo}-s10-tau10",
        config={"model": "ours, recorded (H200), best round", "algorithm": algo, "shards": 10, "tau": 10,
                "rounds": 32, "personalised_clients": n, "ft_epochs": 5, "ft_lr": 1e-3},
        seeds=(0,), official_repo=OFFICIAL_URL, official_commit=COMMIT, ours=(ours,), theirs=(their,),
        rule=AgreementRule("identical", atol=0.0), differences=DIFFERENCES,
        notes=(
            "final / client i initial: the released test_img_local_all on the same weights (deterministic): "
            "rule identical",
            f"personalised (5-epoch fine-tuning, lr 1e-3) of the first {n} clients: ours {po:.2f}, theirs {pt:.2f}, "
            f"paired difference {pt - po:+.2f} (standard error over clients {se:.2f}); the fine-tuning batches differ "
            "(torch's generator vs epoch_plan), so this is compared within its noise, not by the identical rule",
        ),
    )  # fmt: skip


def main(argv: list[str]) -> int:
    recorded = Path(argv[1])
    for algo in ("fedbabu", "fedavg"):
        comp = trained_model_comparison(recorded, algo)
        if comp is None:
            continue
        out = HERE / f"comparison-{comp.config_name}.json"
        out.write_text(json.dumps(comp.to_dict(), indent=1))
        out.with_suffix(".md").write_text(render(comp))
        print(out, comp.outcome().status)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
