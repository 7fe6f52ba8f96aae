"""``flb peer fedbabu``: jhoon-oh/FedBABU's released code beside this suite's ``pfl`` runner (issue 26, point 1;
``docs/peers/fedbabu.md``).

Both sides get the same inputs (:mod:`benchmark.peers.fedbabu_inputs`): this suite's shards partition of the
seed (client train / test index lists), this suite's initial 4convNet weights of the seed (renamed to the
released ``CNNCifar`` keys) and, with ``same_clients``, this suite's per-round client draws. The released side
runs ``main_fed.py`` itself and the personalisation of ``analysis.ipynb`` cell 2 through the driver
``drivers/fedbabu_driver.py`` (a subprocess in the released code's environment); this suite's side runs
:class:`~benchmark.pfl.trainer.PFLTrainer` and :func:`~benchmark.pfl.personalise.personalise` on the same
configuration.

Configurations (CIFAR-10, 4convNet, K = 100 clients, shards s = 10, f = 0.1, lr 0.1, momentum 0.9, batch 50,
lr x 0.1 after R/2 and 3R/4, selection ``best`` on the clients' test sets as the released ``best_model.pt``;
personalisation 5 epochs at lr 1e-3):

* ``eval-identity`` -- deterministic components only: the accuracy of every client's model holding the seed's
  initial weights on its own test set (released ``test_img_local_all`` vs :func:`~benchmark.pfl.local.
  client_accuracies`), rule ``identical`` (atol 0: per-client counts equal). Seconds.
* ``loop-identity`` -- the whole loop made deterministic on both sides: no augmentation, no shuffling (the
  released DataLoaders without shuffle, its training transform = its test transform; this suite's
  ``epoch_plan(augment=False, shuffle=False)``), the same clients per round; tau = 1, 2 rounds (the lr drop after round 1), FedBABU
  (the algorithm whose head handling is the subtle part), 1 fine-tuning epoch on the first 5 clients; rule ``identical``
  within 0.25 point (the aggregations' float32 rounding flips a few borderline predictions). Minutes.
* ``tiny`` -- tau = 1, 3 rounds, FedBABU and FedAvg, personalisation of the first 10 clients; rule
  ``seed_spread`` (k = 2, floor = one test image of the personalised clients). CPU minutes.
* ``paper-s10-tau10`` -- the full protocol of the fedbabu Table 12/13 cells (tau = 10, 32 rounds, every client
  personalised): about 80 min per algorithm and side on one CPU thread.

What a side reports per seed (:class:`~benchmark.peers.compare.SideRun`): ``initial`` = the notebook's
"initial" (mean over the personalised clients of the selected model's accuracy), ``final`` = the personalised
mean (Table 13's cell), the per-round size-weighted test accuracy, and extras (``best_round_accuracy``,
``last_accuracy``). With two algorithms the second's quantities are extras prefixed ``fedavg:``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from benchmark.errors import BenchmarkError, ConfigError
from benchmark.peers.compare import AgreementRule, Difference, PeerComparison, SideRun
from benchmark.peers.fedbabu_inputs import client_schedule, write_inputs
from benchmark.peers.registry import PeerFamily, PeerRequest, register
from benchmark.peers.run import official_commit

OFFICIAL_URL = "https://github.com/jhoon-oh/FedBABU"
DRIVER = Path(__file__).parent / "drivers" / "fedbabu_driver.py"

_BASE: dict[str, Any] = {
    "dataset": "cifar10", "model": "4convnet", "released_model": "cnn", "num_classes": 10, "clients": 100,
    "shards": 10, "participation": 0.1, "lr": 0.1, "momentum": 0.9, "batch_size": 50, "eval_batch": 128,
    "ft_epochs": 5, "ft_lr": 1e-3, "same_clients": False, "augment": True, "shuffle": True,
}  # fmt: skip

CONFIGS: dict[str, Mapping[str, Any]] = {
    "tiny": {**_BASE, "kind": "train", "algorithms": ("fedbabu", "fedavg"), "local_epochs": 1, "rounds": 3,
             "ft_clients": 10},
    "loop-identity": {
        **_BASE, "kind": "train", "algorithms": ("fedbabu",), "local_epochs": 1, "rounds": 2, "ft_epochs": 1,
        "ft_clients": 5, "same_clients": True, "augment": False, "shuffle": False,
    },
    "eval-identity": {**_BASE, "kind": "eval", "algorithms": ("fedbabu",), "local_epochs": 0, "rounds": 0,
                      "ft_clients": None},
    "paper-s10-tau10": {**_BASE, "kind": "train", "algorithms": ("fedbabu", "fedavg"), "local_epochs": 10,
                        "rounds": 32, "ft_clients": None},
    # main_ditto.py beside ditto_reference, the whole loop deterministic as loop-identity; 3 rounds so that a
    # round starts from personal models averaged and reset twice; what main_ditto.py reports (its personal
    # models, not fine-tuned): no personalisation on either side
    "ditto-loop-identity": {
        **_BASE, "kind": "train", "algorithms": ("ditto",), "local_epochs": 1, "rounds": 3, "ft_clients": None,
        "personalise": False, "same_clients": True, "augment": False, "shuffle": False,
    },
}  # fmt: skip

#: This suite's algorithm for a released script run as written: ``main_ditto.py`` is ``ditto_reference``
#: (benchmark/pfl/procedures/ditto.py; the paper's Ditto, ``ditto``, keeps the personal models).
OURS = {"ditto": "ditto_reference"}

#: Components of the two sides that differ on these configurations (docs/peers/fedbabu.md).
DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "client sampling",
        "np.random.choice(range(K), m, replace=False) from numpy's global generator "
        "seeded by --seed, in drawn order",
        "FedBABUSampler: a generator keyed by (seed, round), sorted",
        "different clients per round at the same seed (seed-level); same_clients=True feeds ours to theirs",
    ),
    Difference(
        "batch order and augmentation",
        "DataLoader(shuffle=True) and torchvision RandomCrop(32, pad 4) + "
        "RandomHorizontalFlip on PIL images, from torch's global generator",
        "epoch_plan: permutation, crop offsets and flips keyed by (seed, round, client, epoch), applied "
        "to uint8 tensors (same crop / flip arithmetic)",
        "different batches at the same seed (seed-level)",
    ),
    Difference(
        "shards partition",
        "utils/sampling.noniid: Python's random (never seeded) shuffles the label rows",
        "benchmark.pfl.partition: numpy generator of the seed",
        "none here: both sides get ours",
    ),
    Difference(
        "initial weights",
        "CNNCifar built from torch's generator seeded by --seed",
        "build_model after torch.manual_seed(seed)",
        "none here: both sides get ours",
    ),
    Difference(
        "aggregation arithmetic",
        "float32 running sum over the sampled clients, then torch.div by m",
        "float64 mean of the stacked states, cast to float32",
        "float32 rounding of the running sum: |diff| <= m eps max|w_i| per entry (tests/test_peer_fedbabu.py)",
    ),
    Difference(
        "personalisation batches",
        "DataLoader(shuffle=True) over the augmented client data, torch's "
        "global generator continuing after training",
        "epoch_plan keyed by (seed, 0xF7, client, epoch)",
        "seed-level",
    ),
    Difference(
        "selected model for personalisation",
        "best_model.pt = client 0's model at the best round",
        "the best round's broadcast + each client's personal entries",
        "none for FedAvg / FedBABU (every client holds the same model)",
    ),
    Difference(
        "data",
        "torchvision CIFAR10 (download into ./data)",
        "the suite's loader of the same pickles",
        "none: the driver reads the data root's pickles (checked against MANIFEST.sha256)",
    ),
)

INSTALL = (
    "git clone https://github.com/jhoon-oh/FedBABU /path/FedBABU (no install step; its scripts are run from "
    "the checkout). It needs torch, torchvision, numpy, pandas and scipy, which this suite's environment has; "
    "nothing of the checkout is edited: the driver (benchmark/peers/drivers/fedbabu_driver.py) runs its "
    "main_fed.py with run-time shims (data root with download=False, the given client lists and initial "
    "weights, CPU) and re-expresses the notebook's personalisation by calling its functions. CIFAR-10 is read "
    "from $FLB_DATA_ROOT (torchvision layout)."
)


class PeerRunError(BenchmarkError):
    """The released code's driver failed."""


def _data_root() -> str | None:
    import os

    return os.environ.get("FLB_DATA_ROOT")


# ------------------------------------------------------------------------------------------------ theirs
def run_driver(spec: Mapping[str, Any], request: PeerRequest, name: str) -> dict[str, Any]:
    """Run the driver on ``spec`` in the released code's environment; its JSON (log in the workdir)."""
    spec_path = request.workdir / f"{name}.spec.json"
    out_path = request.workdir / f"{name}.out.json"
    log_path = request.workdir / f"{name}.log"
    full = {**spec, "repo": str(request.official_repo), "threads": request.threads, "out": str(out_path),
            "workdir": str(request.workdir / name)}  # fmt: skip
    spec_path.write_text(json.dumps(full))
    env = {**__import__("os").environ, "OMP_NUM_THREADS": str(request.threads), "PYTHONUNBUFFERED": "1"}
    with log_path.open("w") as log:
        proc = subprocess.run([request.python, str(DRIVER), str(spec_path)], cwd=request.workdir, env=env,
                              stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    if proc.returncode != 0 or not out_path.is_file():
        tail = log_path.read_text()[-800:]
        raise PeerRunError(f"the FedBABU driver failed ({name}, exit {proc.returncode}): {tail}",
                           f"read {log_path}; check --official-repo and --python")  # fmt: skip
    return json.loads(out_path.read_text())


def _released_spec(
    cfg: Mapping[str, Any], algorithm: str, seed: int, inputs: dict[str, Any]
) -> dict[str, Any]:
    spec = {
        "mode": "train", "data_root": _data_root() or "data", "partition": inputs["partition"],
        "init_state": inputs["init_state"], "dataset": cfg["dataset"], "model": cfg["released_model"],
        "num_classes": cfg["num_classes"], "shard_per_user": cfg["shards"], "algorithm": algorithm,
        "num_users": cfg["clients"], "frac": cfg["participation"], "local_ep": cfg["local_epochs"],
        "rounds": cfg["rounds"], "lr": cfg["lr"], "momentum": cfg["momentum"], "wd": 0.0,
        "augment": cfg["augment"], "shuffle": cfg["shuffle"],
        "local_bs": cfg["batch_size"], "bs": cfg["eval_batch"], "seed": seed,
        "personalise": {"epochs": cfg["ft_epochs"], "lr": cfg["ft_lr"], "momentum": cfg["momentum"],
                        "clients": cfg["ft_clients"]} if cfg.get("personalise", True) else None,
    }  # fmt: skip
    if cfg["same_clients"]:
        per_round = max(int(cfg["participation"] * cfg["clients"]), 1)
        spec["client_schedule"] = client_schedule(cfg["clients"], per_round, seed, cfg["rounds"])
    return spec


def theirs_train(out: Mapping[str, Any]) -> dict[str, Any]:
    """The quantities of one released training run (driver output of mode ``train``); without a
    personalisation ``final`` is the last round's accuracy and there is no ``initial``."""
    tuned = "personalised_mean" in out
    return {
        "rounds": tuple(int(r) for r in out["rounds"]), "accuracy": tuple(float(a) for a in out["accuracy"]),
        "initial": float(out["initial_mean"]) if tuned else None,
        "final": float(out["personalised_mean"] if tuned else out["last_accuracy"]),
        "extra": {"best_round_accuracy": float(out["best_accuracy"]), "last_accuracy": float(out["last_accuracy"])},
        "wall_s": float(out["wall_s"]),
    }  # fmt: skip


# -------------------------------------------------------------------------------------------------- ours
def ours_train(cfg: Mapping[str, Any], algorithm: str, seed: int, split: Any) -> dict[str, Any]:
    """This suite's pfl runner on the configuration: training (the released script's algorithm, :data:`OURS`),
    then the personalisation of the selected model (the same quantities as :func:`theirs_train`)."""
    import torch

    from benchmark.data.registry import load_dataset
    from benchmark.federated.images import DeviceImages
    from benchmark.pfl.local import client_accuracies
    from benchmark.pfl.personalise import FineTune, personalise
    from benchmark.pfl.trainer import PFLConfig, PFLTrainer

    t0 = time.perf_counter()
    pcfg = PFLConfig(dataset=cfg["dataset"], model=cfg["model"], algorithm=OURS.get(algorithm, algorithm),
                     clients=cfg["clients"],
                     participation=cfg["participation"], local_epochs=cfg["local_epochs"], rounds=cfg["rounds"],
                     batch_size=cfg["batch_size"], lr=cfg["lr"], momentum=cfg["momentum"],
                     eval_batch=cfg["eval_batch"], seed=seed, selection="best")  # fmt: skip
    dev = torch.device("cpu")
    train = DeviceImages.from_split(load_dataset(cfg["dataset"], "train", _data_root()), cfg["dataset"], dev)
    test = DeviceImages.from_split(load_dataset(cfg["dataset"], "test", _data_root()), cfg["dataset"], dev)
    trainer = PFLTrainer(pcfg, train, test, split, cfg["num_classes"], progress=False)
    with _batches(augment=cfg["augment"], shuffle=cfg["shuffle"]):
        res = trainer.run()
    hist = [h for h in res.history if "test_accuracy" in h]
    curve = {"rounds": tuple(int(h["round"]) for h in hist), "accuracy": tuple(float(h["test_accuracy"]) for h in hist)}
    extra = {"best_round_accuracy": float(res.extra["best_accuracy"]), "last_accuracy": float(res.extra["last_accuracy"])}
    if not cfg.get("personalise", True):
        return {**curve, "initial": None, "final": extra["last_accuracy"], "extra": extra,
                "wall_s": time.perf_counter() - t0}  # fmt: skip
    sel = res.selected
    clients = list(range(cfg["ft_clients"] or cfg["clients"]))

    def state(i: int) -> dict[str, Any]:
        return {**sel.state, **sel.personal.get(i, trainer.init_personal)}

    ft = FineTune(
        epochs=cfg["ft_epochs"], lr=cfg["ft_lr"], momentum=cfg["momentum"], batch_size=cfg["batch_size"]
    )
    before = client_accuracies(trainer.model, test, tuple(split.test[i] for i in clients), lambda j: state(clients[j]),
                               cfg["eval_batch"])  # fmt: skip
    with _batches(augment=cfg["augment"], shuffle=cfg["shuffle"]):
        after = personalise(trainer.model, train, test, split, state, ft, pcfg.streams, cfg["eval_batch"], clients)
    return {**curve, "initial": float(np.mean(before)), "final": float(np.mean(after)), "extra": extra,
            "wall_s": time.perf_counter() - t0}  # fmt: skip


@contextlib.contextmanager
def _batches(*, augment: bool, shuffle: bool) -> Iterator[None]:
    """This suite's local batches (:func:`benchmark.pfl.local.epoch_batches`, used by training and the
    personalisation) with augmentation and / or shuffling turned off for the duration (the released side's
    ``augment`` / ``shuffle`` spec keys): the deterministic ``loop-identity`` configuration. A no-op by default."""
    from benchmark.federated.images import epoch_plan
    from benchmark.pfl import local

    if augment and shuffle:
        yield
        return
    plan = functools.partial(epoch_plan, augment=augment, shuffle=shuffle)
    with mock.patch.object(local, "epoch_plan", plan):
        yield


def ours_eval(cfg: Mapping[str, Any], seed: int, split: Any) -> list[float]:
    """This suite's per-client accuracy of the seed's initial weights (``client_accuracies``)."""
    from benchmark.data.registry import load_dataset
    from benchmark.federated.images import DeviceImages
    from benchmark.peers.fedbabu_inputs import our_init_state
    from benchmark.pfl.local import client_accuracies
    from benchmark.pfl.models import build_model

    test = DeviceImages.from_split(load_dataset(cfg["dataset"], "test", _data_root()), cfg["dataset"], "cpu")
    init = our_init_state(cfg["model"], cfg["num_classes"], seed, rounds=cfg["rounds"])
    net = build_model(cfg["model"], cfg["num_classes"])
    return [float(a) for a in client_accuracies(net, test, split.test, lambda _i: init, cfg["eval_batch"])]


# --------------------------------------------------------------------------------------------- the family
def _merge(per_algo: dict[str, dict[str, Any]], algorithms: tuple[str, ...]) -> dict[str, Any]:
    """One side-run's fields from several algorithms: the first fills the curve, initial and final; the others'
    are extras prefixed ``<algorithm>:``."""
    first = dict(per_algo[algorithms[0]])
    extra = dict(first["extra"])
    for algo in algorithms[1:]:
        q = per_algo[algo]
        extra.update({f"{algo}:initial": q["initial"], f"{algo}:final": q["final"]})
        extra.update({f"{algo}:{k}": v for k, v in q["extra"].items()})
        extra.update({f"{algo}:round {r}": a for r, a in zip(q["rounds"], q["accuracy"], strict=True)})
    first["extra"] = extra
    first["wall_s"] = sum(q["wall_s"] for q in per_algo.values())
    return first


def rule_for(cfg: Mapping[str, Any]) -> AgreementRule:
    """``identical`` (atol 0) for the deterministic evaluation; ``seed_spread`` (k = 2, floor = one test image
    of the clients the quantity averages) for training."""
    if cfg["kind"] == "eval":
        return AgreementRule("identical", atol=0.0)
    if not (cfg["augment"] or cfg["shuffle"]):
        # the whole loop is deterministic, but the aggregations differ by float32 rounding (released: float32
        # running sum; ours: float64 mean), which flips a few borderline test predictions (measured: 3 of
        # 10,000 after round 1, 1 of the 500 images of the 5 fine-tuned clients): 0.25 point
        return AgreementRule("identical", atol=0.25)
    clients = cfg["ft_clients"] or cfg["clients"]
    return AgreementRule("seed_spread", k=2.0, floor=100.0 / clients / 100)  # 100 test images per client


def run(request: PeerRequest) -> PeerComparison:
    """Both sides of ``request``'s configuration for each seed (module docstring)."""
    cfg = CONFIGS[request.config_name]
    if not (request.official_repo / "main_fed.py").is_file():
        raise ConfigError(
            f"{request.official_repo} has no main_fed.py", f"clone {OFFICIAL_URL} and pass its path"
        )
    ours_runs, theirs_runs, notes = [], [], []
    tuned = cfg.get("personalise", True)  # the selected model personalised on both sides (Algorithm 2)
    for seed in request.seeds:
        inputs = write_inputs(request.workdir / "inputs", dataset=cfg["dataset"], model=cfg["model"],
                              num_classes=cfg["num_classes"], shards=cfg["shards"], clients=cfg["clients"],
                              seed=seed, data_root=_data_root(), rounds=cfg["rounds"])  # fmt: skip
        if cfg["kind"] == "eval":
            spec = {"mode": "eval", "data_root": _data_root() or "data", "partition": inputs["partition"],
                    "state": inputs["init_state"], "dataset": cfg["dataset"], "model": cfg["released_model"],
                    "num_classes": cfg["num_classes"], "algorithm": "fedavg", "frac": cfg["participation"],
                    "local_ep": 1, "bs": cfg["eval_batch"], "seed": seed}  # fmt: skip
            t0 = time.perf_counter()
            theirs = run_driver(spec, request, f"eval-seed{seed}")
            mine = ours_eval(cfg, seed, inputs["split"])
            wall = time.perf_counter() - t0
            per = {f"client {i}": a for i, a in enumerate(mine)}
            ours_runs.append(SideRun("ours", seed, (), (), float(np.mean(mine)), extra=per, wall_s=wall,
                                     command="benchmark.pfl.local.client_accuracies"))  # fmt: skip
            per_t = {f"client {i}": float(a) for i, a in enumerate(theirs["per_client"])}
            theirs_runs.append(SideRun("theirs", seed, (), (), float(np.mean(theirs["per_client"])), extra=per_t,
                                       wall_s=float(theirs["wall_s"]),
                                       command="models.test.test_img_local_all(return_all=True)"))  # fmt: skip
            continue
        per_ours, per_theirs = {}, {}
        for algo in cfg["algorithms"]:
            per_theirs[algo] = theirs_train(
                run_driver(_released_spec(cfg, algo, seed, inputs), request, f"{algo}-seed{seed}")
            )
            per_ours[algo] = ours_train(cfg, algo, seed, inputs["split"])
        o, t = _merge(per_ours, cfg["algorithms"]), _merge(per_theirs, cfg["algorithms"])
        script = "main_ditto.py" if cfg["algorithms"][0] in OURS else "main_fed.py"
        ours_runs.append(SideRun("ours", seed, o["rounds"], o["accuracy"], o["final"], o["initial"], o["extra"],
                                 o["wall_s"], "benchmark.pfl PFLTrainer" + (" + personalise" if tuned else "")))  # fmt: skip
        theirs_runs.append(SideRun("theirs", seed, t["rounds"], t["accuracy"], t["final"], t["initial"], t["extra"],
                                   t["wall_s"], f"{script} (runpy)" + (" + analysis.ipynb cell 2" if tuned else "")
                                   + " via the driver"))  # fmt: skip
    if cfg["kind"] == "train" and tuned:
        notes.append("final = personalised mean (Table 13), initial = the selected model's mean (Table 12 w/ "
                     f"classifier); first algorithm {cfg['algorithms'][0]}, others as prefixed extras")  # fmt: skip
    elif cfg["kind"] == "train":
        notes.append(f"{cfg['algorithms'][0]}: the released script beside this suite's "
                     f"{OURS.get(cfg['algorithms'][0], cfg['algorithms'][0])}; final = the last round's size-weighted "
                     "accuracy of the clients' models as the script tests them, not fine-tuned (what it reports)")  # fmt: skip
    return PeerComparison(
        family="fedbabu", config_name=request.config_name, config=_jsonable(cfg), seeds=tuple(request.seeds),
        official_repo=OFFICIAL_URL, official_commit=official_commit(request.official_repo),
        ours=tuple(ours_runs), theirs=tuple(theirs_runs), rule=rule_for(cfg), differences=DIFFERENCES,
        notes=tuple(notes),
    )  # fmt: skip


def _jsonable(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}


FAMILY = register(
    PeerFamily(
        name="fedbabu",
        paper="fedbabu",
        official_url=OFFICIAL_URL,
        configs=CONFIGS,
        run=run,
        install=INSTALL,
        default_seeds=(0, 1),
    )
)
