"""Run jhoon-oh/FedBABU's released code on a configuration given as JSON, and print what it computed as JSON
(issue 26, ``flb peer fedbabu``; ``docs/peers/fedbabu.md``).

This script is this suite's code. It runs **inside the released code's environment**: it is started as a
subprocess with the user's checkout first on ``sys.path`` and that checkout's folder as ``repo`` in the spec,
and it never imports ``benchmark`` (the released code's environment need not have this suite's dependencies).
Nothing of the released code is copied here: the script imports the checkout's modules and calls them.

Modes (``spec["mode"]``):

* ``train`` -- the released ``main_fed.py`` (``main_ditto.py`` for ``algorithm: ditto``) itself, executed as
  ``__main__`` (``runpy``) with its own argument parser fed the spec's values, then the personalisation of
  ``analysis.ipynb`` cell 2 re-expressed by calling the checkout's functions (``test_img_local``,
  ``DatasetSplit``; the fine-tuning loop is the notebook's: SGD with the body/head groups at the fine-tuning lr,
  momentum, no weight decay, batch ``local_bs``, shuffled augmented training data, ``ft_epochs`` passes; not for
  Ditto, whose script saves no ``best_model.pt`` and reports its personal models as they stand). Run-time shims
  (no file of the checkout is edited):

  - ``utils.train_utils.get_data`` is replaced by a function that builds torchvision's CIFAR-10/100 from
    ``data_root`` with ``download=False`` (the released code downloads into ``./data``) with the released
    code's own transforms (``trans_cifar10_train`` / ``..._val``), and returns the spec's client index lists
    (``partition: {"train": [[...]...], "test": [[...]...]}``, e.g. this suite's) -- or, with
    ``partition: "theirs"``, the released ``noniid`` partition (Python's ``random`` seeded by the spec's
    ``python_random_seed`` so that a run can be repeated; the released code never seeds it);
  - ``utils.train_utils.get_model`` calls the released one (so torch's generator advances as in the released
    run) and then loads ``init_state`` (a state dict in the released code's key names) when the spec gives one;
  - with ``augment: false`` the training transform is the test transform (no crop / flip), and with
    ``shuffle: false`` the DataLoaders that ``models.Update`` builds do not shuffle: together they make a round
    a deterministic function of the initial weights and the sampled clients (used to compare a whole round);
  - ``client_schedule`` (a list of the rounds' client lists): while ``main_fed.py`` runs, ``np.random.choice``
    called with a ``range`` population (its client draw) returns the next round's clients, so both sides can
    train the same clients (restored afterwards);
  - the working directory is ``workdir`` (``main_fed.py`` writes ``./save/...``).

  Output: per-round test accuracy (``results.csv``'s ``acc_test``, the size-weighted mean over all clients of
  ``test_img_local_all``), the best round, the per-client initial / personalised accuracies of
  ``best_model.pt`` (what the notebook reads), and the per-client accuracies of the last round's models.

* ``eval`` -- ``models.test.test_img_local_all`` (per client, ``return_all=True``, and the weighted mean) on
  one state dict (``state``) for every client of the spec's partition: a deterministic component (batch-
  statistics BN in eval, test batches of ``bs`` in index order).

* ``personalise`` -- the notebook's initial accuracy of every client and personalisation of the first
  ``personalise.clients`` clients, on one given state (``state``; e.g. a model this suite trained).

* ``aggregate`` -- ``models.Fed.FedAvg`` (the released code's mean of state dicts) of the state dicts in
  ``states`` (a list of paths), saved to ``out_state``.

* ``local`` -- one ``models.Update.LocalUpdate.train`` of ``state`` on one client's training indices
  (``client``), with ``body_lr`` / ``head_lr``, saved to ``out_state`` (with ``augment``/``shuffle`` false it
  is deterministic).

* ``per_fedavg_step`` -- ``main_per_fedavg.py``'s per-round evaluation on one given state: each client's
  copy takes the released ``one_sgd_step`` on one client's test images (the loop variable the released code
  passes; ``source``) or on its own (``source: "own"``), then ``test_img_local_all``.

Usage: ``python fedbabu_driver.py SPEC.json`` (writes ``spec["out"]`` and prints the same JSON on the last
line of stdout).
"""

from __future__ import annotations

import copy
import json
import os
import random
import runpy
import sys
import time
from pathlib import Path

ALGORITHMS = {  # the released scripts' (--local_upt_part, --aggr_part)
    "fedavg": ("full", "full"),
    "fedbabu": ("body", "body"),
    "fedper": ("full", "body"),
    "lg_fedavg": ("full", "head"),
    "ditto": ("full", "full"),  # main_ditto.py reads neither switch
}
#: The released script of an algorithm (``main_fed.py`` for the others).
SCRIPTS = {"ditto": "main_ditto.py"}


def _prepare(spec: dict) -> None:
    repo = str(Path(spec["repo"]).resolve())
    if repo not in sys.path:
        sys.path.insert(0, repo)
    import torch

    torch.set_num_threads(int(spec.get("threads", 1)))


def _datasets(spec: dict):
    """torchvision's CIFAR from ``data_root`` (never downloaded) with the released transforms."""
    from torchvision import datasets
    from utils import train_utils

    name = spec.get("dataset", "cifar10")
    cls, tr, te = {
        "cifar10": (datasets.CIFAR10, train_utils.trans_cifar10_train, train_utils.trans_cifar10_val),
        "cifar100": (datasets.CIFAR100, train_utils.trans_cifar100_train, train_utils.trans_cifar100_val),
    }[name]
    if not spec.get("augment", True):
        tr = te
    root = Path(spec["data_root"])
    if _manifest_checked(root, cls.base_folder, [f for f, _ in cls.train_list + cls.test_list]):
        # the files match the data root's sha256 manifest; torchvision's md5 check would reject a rebuilt
        # CIFAR-10 whose pickles lack the ``filenames`` key (same images, labels and order)
        cls = type(cls.__name__, (cls,), {"_check_integrity": lambda self: True})
    return cls(root, train=True, download=False, transform=tr), cls(
        root, train=False, download=False, transform=te
    )


def _manifest_checked(root: Path, folder: str, names: list[str]) -> bool:
    """Whether ``root/MANIFEST.sha256`` lists every file ``folder/name`` with its sha256 (raises on a mismatch;
    False without a manifest, leaving torchvision's own md5 check)."""
    import hashlib

    manifest = root / "MANIFEST.sha256"
    if not manifest.is_file():
        return False
    want = {}
    for line in manifest.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            want[name.strip()] = digest
    for name in names:
        rel = f"{folder}/{name}"
        if rel not in want:
            return False
        got = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        if got != want[rel]:
            raise RuntimeError(f"{root / rel}: sha256 {got} is not the manifest's {want[rel]}")
    return True


def _partition(spec: dict, dataset_train, dataset_test):
    import numpy as np

    part = spec["partition"]
    if part == "theirs":
        from utils.sampling import noniid

        random.seed(int(spec.get("python_random_seed", spec.get("seed", 1))))
        s, k = int(spec["shard_per_user"]), int(spec["num_users"])
        train, rand_set_all = noniid(dataset_train, k, s, 0.0)
        test, _ = noniid(dataset_test, k, s, 0.0, rand_set_all=rand_set_all)
    else:
        if isinstance(part, str):  # a JSON file of {"train": [...], "test": [...]}
            part = json.loads(Path(part).read_text())
        train = {i: np.asarray(v, dtype=int) for i, v in enumerate(part["train"])}
        test = {i: np.asarray(v, dtype=int) for i, v in enumerate(part["test"])}
    return train, test


def _no_shuffle_loaders() -> None:
    """``models.Update``'s DataLoaders without shuffling (``shuffle: false``)."""
    import models.Update as upd
    from torch.utils.data import DataLoader

    class _Ordered(DataLoader):
        def __init__(self, *args, **kwargs):
            kwargs["shuffle"] = False
            super().__init__(*args, **kwargs)

    upd.DataLoader = _Ordered


def _args(spec: dict):
    """An ``argparse.Namespace`` as the released ``args_parser`` builds it from the spec's values."""
    from utils.options import args_parser

    local_upt, aggr = ALGORITHMS[spec["algorithm"]]
    argv = [
        SCRIPTS.get(spec["algorithm"], "main_fed.py"), "--dataset", spec.get("dataset", "cifar10"), "--model", spec.get("model", "cnn"),
        "--num_classes", str(spec.get("num_classes", 10)), "--shard_per_user", str(spec.get("shard_per_user", 10)),
        "--epochs", str(spec["rounds"]), "--lr", str(spec.get("lr", 0.1)), "--num_users", str(spec["num_users"]),
        "--frac", str(spec["frac"]), "--local_ep", str(spec["local_ep"]), "--local_bs", str(spec.get("local_bs", 50)),
        "--bs", str(spec.get("bs", 128)), "--results_save", spec.get("results_save", "run1"),
        "--local_upt_part", local_upt, "--aggr_part", aggr, "--momentum", str(spec.get("momentum", 0.9)),
        "--wd", str(spec.get("wd", 0.0)), "--gpu", "-1", "--seed", str(spec.get("seed", 1)),
    ]  # fmt: skip
    saved = sys.argv
    sys.argv = argv
    try:
        args = args_parser()
    finally:
        sys.argv = saved
    import torch

    args.device = torch.device(
        "cpu"
    )  # what main_fed.py sets for --gpu -1 (other modes build models directly)
    return args, argv


def _load_state(path: str):
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def _test_all(nets, args, dataset_test, dict_users_test):
    from models.test import test_img_local_all

    accs, _ = test_img_local_all(nets, args, dataset_test, dict_users_test, return_all=True)
    mean, _ = test_img_local_all(nets, args, dataset_test, dict_users_test, return_all=False)
    return [float(a) for a in accs], float(mean)


def personalise(state, args, dataset_train, dataset_test, dict_users_train, dict_users_test, ft_epochs, ft_lr,
                momentum, clients=None, shuffle=True):  # fmt: skip
    """``analysis.ipynb`` cell 2, per client: a copy of the model with ``state``, its test accuracy
    (``test_img_local``), then ``ft_epochs`` passes of SGD (body and head groups at ``ft_lr``, ``momentum``) over
    its shuffled training data in batches of ``args.local_bs`` (the released ``DatasetSplit``), and its test
    accuracy again."""
    import torch
    from models.test import test_img_local
    from models.Update import DatasetSplit
    from torch import nn
    from torch.utils.data import DataLoader
    from utils.train_utils import get_model

    net = get_model(args)
    criterion = nn.CrossEntropyLoss()
    before, after = [], []
    for user in clients if clients is not None else range(args.num_users):
        net_local = copy.deepcopy(net)
        net_local.load_state_dict(state, strict=True)
        acc, _ = test_img_local(net_local, dataset_test, args, user_idx=user, idxs=dict_users_test[user])
        before.append(float(acc))
        net_local.train()
        loader = DataLoader(
            DatasetSplit(dataset_train, dict_users_train[user]), batch_size=args.local_bs, shuffle=shuffle
        )
        body = [p for n, p in net_local.named_parameters() if "linear" not in n]
        head = [p for n, p in net_local.named_parameters() if "linear" in n]
        opt = torch.optim.SGD(
            [{"params": body, "lr": ft_lr}, {"params": head, "lr": ft_lr}], momentum=momentum
        )
        for _ in range(ft_epochs):
            for images, labels in loader:
                net_local.zero_grad()
                loss = criterion(net_local(images), labels)
                loss.backward()
                opt.step()
        acc, _ = test_img_local(net_local, dataset_test, args, user_idx=user, idxs=dict_users_test[user])
        after.append(float(acc))
    return before, after


def mode_train(spec: dict) -> dict:
    import numpy as np
    import torch
    from utils import train_utils

    repo = Path(spec["repo"]).resolve()
    workdir = Path(spec["workdir"]).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    dataset_train, dataset_test = _datasets(spec)
    dict_train, dict_test = _partition(spec, dataset_train, dataset_test)
    if not spec.get("shuffle", True):
        _no_shuffle_loaders()

    released_get_model = train_utils.get_model

    def get_data(args, env="fed"):
        return dataset_train, dataset_test, dict_train, dict_test

    def get_model(args):
        net = released_get_model(args)
        if spec.get("init_state"):
            net.load_state_dict(_load_state(spec["init_state"]), strict=True)
        return net

    train_utils.get_data, train_utils.get_model = get_data, get_model

    schedule = spec.get("client_schedule")
    args, argv = _args(spec)
    real_choice = np.random.choice
    if schedule is not None:
        # main_fed.py draws each round's clients with np.random.choice(range(K), m, replace=False); while it
        # runs, a call with a range as population returns the spec's next round instead (other calls unchanged).
        rounds = iter(schedule)

        def choice(a, *rest, **kw):
            if isinstance(a, range):
                return np.asarray(next(rounds), dtype=int)
            return real_choice(a, *rest, **kw)

        np.random.choice = choice
    cwd, saved_argv = os.getcwd(), sys.argv
    os.chdir(workdir)
    sys.argv = argv
    t0 = time.perf_counter()
    try:
        g = runpy.run_path(str(repo / SCRIPTS.get(spec["algorithm"], "main_fed.py")), run_name="__main__")
    finally:
        os.chdir(cwd)
        sys.argv = saved_argv
        np.random.choice = real_choice
    train_wall = time.perf_counter() - t0
    args = g["args"]
    base = workdir / g["base_dir"] / g["algo_dir"]
    import pandas as pd

    res = pd.read_csv(base / "results.csv")
    last_clients, last_mean = _test_all(g["net_local_list"], args, dataset_test, dict_test)
    if spec["algorithm"] in SCRIPTS:
        # main_ditto.py rolls every client's model back to the new global after its last test: its last round's
        # own measure (the personal models before the rollback) is results.csv's last acc_test; the
        # rolled-back models' accuracy (the final global's) is kept beside it
        out_extra = {"rolled_back_accuracy": last_mean, "rolled_back_per_client": last_clients}
        last_mean, last_clients = float(res["acc_test"].iloc[-1]), None
    else:
        out_extra = {}
    out = {
        "mode": "train",
        "argv": argv,
        "rounds": [int(e) + 1 for e in res["epoch"]],
        "accuracy": [float(a) for a in res["acc_test"]],
        "train_loss": [float(a) for a in res["loss_avg"]],
        "best_round": int(g["best_epoch"]) + 1,
        "best_accuracy": float(g["best_acc"]),
        "last_accuracy": last_mean,
        "last_per_client": last_clients,
        "train_wall_s": train_wall,
        **out_extra,
    }
    if spec.get("out"):  # the training's results, before the (long) personalisation
        Path(spec["out"]).with_suffix(".train.json").write_text(json.dumps(out))
    ft = spec.get("personalise")
    if ft:
        best_state = torch.load(base / "best_model.pt", map_location="cpu", weights_only=True)
        t1 = time.perf_counter()
        before, after = personalise(best_state, args, dataset_train, dataset_test, dict_train, dict_test,
                                    int(ft.get("epochs", 5)), float(ft.get("lr", 1e-3)),
                                    float(ft.get("momentum", 0.9)),
                                    list(range(int(ft["clients"]))) if ft.get("clients") else None,
                                    bool(spec.get("shuffle", True)))  # fmt: skip
        out.update({
            "initial_per_client": before, "personalised_per_client": after,
            "initial_mean": float(np.mean(before)), "initial_std": float(np.std(before)),
            "personalised_mean": float(np.mean(after)), "personalised_std": float(np.std(after)),
            "personalise_wall_s": time.perf_counter() - t1,
        })  # fmt: skip
    if ft and ft.get("last"):  # the same personalisation of the last round's model (fedbabu App. A: the paper
        # reports the last model; the notebook reads best_model.pt)
        last_state = copy.deepcopy(g["net_local_list"][0].state_dict())
        t1 = time.perf_counter()
        before, after = personalise(last_state, args, dataset_train, dataset_test, dict_train, dict_test,
                                    int(ft.get("epochs", 5)), float(ft.get("lr", 1e-3)),
                                    float(ft.get("momentum", 0.9)),
                                    list(range(int(ft["clients"]))) if ft.get("clients") else None)  # fmt: skip
        out.update({
            "last_initial_per_client": before, "last_personalised_per_client": after,
            "last_initial_mean": float(np.mean(before)), "last_personalised_mean": float(np.mean(after)),
            "last_personalised_std": float(np.std(after)), "last_personalise_wall_s": time.perf_counter() - t1,
        })  # fmt: skip
    if spec.get("save_last"):
        torch.save(g["net_local_list"][0].state_dict(), workdir / "last_client0.pt")
    return out


def mode_eval(spec: dict) -> dict:
    dataset_train, dataset_test = _datasets(spec)
    _dict_train, dict_test = _partition(spec, dataset_train, dataset_test)
    spec = {**spec, "rounds": 1, "num_users": len(dict_test)}
    args, _ = _args(spec)
    from utils.train_utils import get_model

    net = get_model(args)
    net.load_state_dict(_load_state(spec["state"]), strict=True)
    nets = [net] * len(dict_test)
    per_client, mean = _test_all(nets, args, dataset_test, dict_test)
    return {"mode": "eval", "per_client": per_client, "mean": mean}


def mode_aggregate(spec: dict) -> dict:
    import torch
    from models.Fed import FedAvg

    states = [_load_state(p) for p in spec["states"]]
    torch.save(FedAvg(states), spec["out_state"])
    return {"mode": "aggregate", "out_state": spec["out_state"], "clients": len(states)}


def mode_local(spec: dict) -> dict:
    import torch
    from models.Update import LocalUpdate

    dataset_train, dataset_test = _datasets(spec)
    dict_train, _ = _partition(spec, dataset_train, dataset_test)
    if not spec.get("shuffle", True):
        _no_shuffle_loaders()
    args, _ = _args({**spec, "rounds": 1, "num_users": len(dict_train)})
    torch.manual_seed(int(spec.get("seed", 1)))
    from utils.train_utils import get_model

    net = get_model(args)
    net.load_state_dict(_load_state(spec["state"]), strict=True)
    local = LocalUpdate(args=args, dataset=dataset_train, idxs=dict_train[int(spec["client"])])
    w, loss = local.train(net=net, body_lr=float(spec["body_lr"]), head_lr=float(spec["head_lr"]))
    torch.save(w, spec["out_state"])
    return {"mode": "local", "out_state": spec["out_state"], "loss": float(loss)}


def mode_personalise(spec: dict) -> dict:
    """``analysis.ipynb`` cell 2 on a given state (e.g. a model trained by this suite): every client's initial
    accuracy (``test_img_local``), then the fine-tuning of the first ``personalise.clients`` clients."""
    import numpy as np
    import torch

    dataset_train, dataset_test = _datasets(spec)
    dict_train, dict_test = _partition(spec, dataset_train, dataset_test)
    args, _ = _args({**spec, "rounds": 1, "num_users": len(dict_test)})
    torch.manual_seed(int(spec.get("seed", 1)))
    state = _load_state(spec["state"])
    nets = []
    from utils.train_utils import get_model

    net = get_model(args)
    net.load_state_dict(state, strict=True)
    nets = [net] * len(dict_test)
    initial, mean = _test_all(nets, args, dataset_test, dict_test)
    ft = spec.get("personalise") or {}
    clients = list(range(int(ft.get("clients") or len(dict_test))))
    before, after = personalise(state, args, dataset_train, dataset_test, dict_train, dict_test,
                                int(ft.get("epochs", 5)), float(ft.get("lr", 1e-3)), float(ft.get("momentum", 0.9)),
                                clients, bool(spec.get("shuffle", True)))  # fmt: skip
    return {
        "mode": "personalise", "initial_per_client": initial, "initial_weighted": mean,
        "initial_mean": float(np.mean(initial)), "clients": clients, "before_per_client": before,
        "personalised_per_client": after, "personalised_mean": float(np.mean(after)),
    }  # fmt: skip


def _model_on_state(spec: dict):
    """The data, the spec's partition, the released arguments and the released network holding ``state`` (the
    modes that evaluate a given state; torch seeded with the spec's ``seed`` before the network is built)."""
    import torch
    from utils.train_utils import get_model

    dataset_train, dataset_test = _datasets(spec)
    dict_train, dict_test = _partition(spec, dataset_train, dataset_test)
    args, _ = _args({**spec, "rounds": 1, "num_users": len(dict_test)})
    torch.manual_seed(int(spec.get("seed", 1)))
    net = get_model(args)
    net.load_state_dict(_load_state(spec["state"]), strict=True)
    return dataset_train, dataset_test, dict_train, dict_test, args, net


def mode_ncm(spec: dict) -> dict:
    """``analysis.ipynb`` cell 4 on a given state: per client, the released ``distance_test_img_local``
    (class templates from the client's augmented training features, nearest by Euclidean ``cdist``); it returns
    a count of correct test images, reported here as a percentage of the client's test images."""
    import numpy as np
    import torch
    from models.test import distance_test_img_local

    dataset_train, dataset_test, dict_train, dict_test, args, net = _model_on_state(spec)
    net.eval()
    out = []
    with torch.no_grad():
        for user in range(len(dict_test)):
            correct = distance_test_img_local(net, dataset_train, dataset_test, args, user_idx=user,
                                              train_idxs=dict_train[user], test_idxs=dict_test[user])  # fmt: skip
            out.append(100.0 * correct / len(dict_test[user]))
    return {"mode": "ncm", "per_client": out, "mean": float(np.mean(out)), "std": float(np.std(out))}


def mode_per_fedavg_step(spec: dict) -> dict:
    """``main_per_fedavg.py``'s evaluation of a round ("SGD one step with testset", then ``test_img_local_all``)
    on one given state (e.g. a Per-FedAvg model this suite trained): every client's copy of ``state`` takes
    ``models.Update.LocalUpdatePerFedAvg(dataset_test, idxs).one_sgd_step(lr, beta)`` and is tested on its own
    test images. ``idxs`` is what the released loop passes, ``dict_users_test[idx]`` with ``idx`` the loop
    variable its training loop left behind: the test images of one client, the same for every client
    (``source``: that client's id). ``source: "own"`` gives each client its own test images instead (what the
    paper's text describes, without its support / query split). ``lr`` is the round's learning rate (the
    released schedule's 0.001 after its two decays), ``beta`` 0.1 as the released call passes."""
    import numpy as np
    from models.Update import LocalUpdatePerFedAvg

    _dataset_train, dataset_test, _dict_train, dict_test, args, net = _model_on_state(spec)
    source = spec["source"]
    nets = []
    for user in range(len(dict_test)):
        src = user if source == "own" else int(source)
        local = LocalUpdatePerFedAvg(args=args, dataset=dataset_test, idxs=dict_test[src])
        adapted = copy.deepcopy(net)
        adapted.load_state_dict(local.one_sgd_step(net=copy.deepcopy(net), lr=float(spec["lr"]),
                                                   beta=float(spec.get("beta", 0.1))))  # fmt: skip
        nets.append(adapted)
    per_client, weighted = _test_all(nets, args, dataset_test, dict_test)
    return {"mode": "per_fedavg_step", "source": source, "lr": float(spec["lr"]),
            "beta": float(spec.get("beta", 0.1)), "per_client": per_client, "weighted": weighted,
            "mean": float(np.mean(per_client)), "std": float(np.std(per_client))}  # fmt: skip


MODES = {
    "train": mode_train,
    "eval": mode_eval,
    "aggregate": mode_aggregate,
    "local": mode_local,
    "personalise": mode_personalise,
    "ncm": mode_ncm,
    "per_fedavg_step": mode_per_fedavg_step,
}


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    _prepare(spec)
    t0 = time.perf_counter()
    out = MODES[spec.get("mode", "train")](spec)
    out["wall_s"] = time.perf_counter() - t0
    out["torch"] = __import__("torch").__version__
    if spec.get("out"):
        Path(spec["out"]).write_text(json.dumps(out))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
