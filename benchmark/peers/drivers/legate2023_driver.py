"""Run legate2023's released code (GwenLegate/GuidingLastLayerFLPretrain on FLSim) on OUR clients and weights.

This script is this suite's code; it runs **inside the released code's environment** (FLSim 0.1.0, hydra,
omegaconf, opacus), started by :mod:`benchmark.peers.legate2023` as a subprocess with the checkout's ``src/``
on ``sys.path``. It does not import ``benchmark``.

Usage: ``python legate2023_driver.py SPEC.json``. The spec (written by the family module) names:

* ``src``: the checkout's ``src`` folder; ``data``: an ``.npz`` with ``train_images`` (N, 32, 32, 3 uint8),
  ``train_labels``, ``test_images``, ``test_labels`` (the images this suite loaded and verified);
* ``clients``: one list of row indices into ``train_images`` per client (this suite's partition);
* ``weights``: the substitute SqueezeNet 1.1 ``features.*`` safetensors file;
* ``algorithm`` (``ft`` | ``ncm+ft`` | ``lp`` | ``ncm+lp``), ``fl_algorithm`` (``fedavg`` | ``fedadam`` |
  ``fedavgm``: the three the released code has; it has no FedProx), ``client_lr``, ``server_lr``, ``epochs``
  (FLSim epochs: ``epochs * ceil(K/m)`` real rounds), ``clients_per_round``, ``local_epochs``, ``batch_size``,
  ``seed``, ``out`` (the result JSON), optionally ``dump`` (an ``.npz`` for the FedNCM features, below).

It then runs the released ``federated_main.main`` **unchanged**, with its command line set from the spec
(``--model squeezenet --dataset cifar --ncm ... --algorithm ... --fl_algorithm ...``), after these run-time
replacements (all in this file; nothing of the released code is edited or copied):

1. Python 3.11 rejects FLSim's dataclass configs that use another config *instance* as a default
   (``ValueError: mutable default ... PerExampleGaussianDurationDistributionConfig``): while FLSim and the
   checkout are imported, ``dataclasses.dataclass`` gives every class it makes in those modules the identity
   hash (``object.__hash__``), which is what Python <= 3.10 allowed (one shared default instance).
2. ``wandb`` is not installed: a stub module with no-op functions (the code calls it only when
   ``cfg.wandb.activate``, which stays False). ``tensorboard`` is not installed either: a
   ``torch.utils.tensorboard.SummaryWriter`` that discards the scalars the metrics reporter writes.
3. Data: ``utils.CIFAR10`` becomes a dataset over the spec's images (PIL images, as torchvision's class gives,
   so the released code's own ``Resize(224)`` / flip / normalise transforms run on PIL uint8), and
   ``utils.DirichletSharder`` a sharder that hands each client exactly its index list (in list order) and
   the test set to one evaluation user (evaluation concatenates users anyway).
4. Model: ``federated_main.squeezenet1_1`` builds torchvision's SqueezeNet 1.1 and loads the substitute
   ``features`` weights (the released code asks torchvision for ``SqueezeNet1_1_Weights.DEFAULT``, which
   cannot be had here); the code then replaces the classifier itself.
5. Seeds: the released code seeds nothing but ``random.seed(2137)``. Here ``torch``, ``numpy`` and ``random``
   are seeded with the spec's seed before ``main`` runs and FLSim's uniform client selector gets
   ``user_selector_seed=seed`` (it otherwise seeds its generator from the OS), so a run is repeatable; what
   the seed varies (head init, flips, client draws) is what an unseeded run varies.
6. Recording (read-only wrappers): ``federated_main.inference`` (the init and final accuracies it prints),
   ``utils.MetricsReporter.report_metrics`` (each evaluation during training), and, with ``dump``, the
   features and labels the FedNCM loop saw (a forward hook on ``model.features`` and a ``DataLoader``
   subclass that keeps the label batches of the training-set loader), the head after initialisation and
   the test set's features through the released test transform.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import random
import sys
import time
import types
from pathlib import Path


def _hashable_configs(prefixes: tuple[str, ...]):
    """Shim 1 (module docstring): wrap ``dataclasses.dataclass`` so classes of modules starting with one of
    ``prefixes`` keep an identity hash. Returns a function that restores the original."""
    original = dataclasses.dataclass

    def patched(cls=None, /, **kw):
        def wrap(c):
            out = original(c, **kw)
            if getattr(out, "__hash__", None) is None and str(out.__module__).startswith(prefixes):
                out.__hash__ = object.__hash__
            return out

        return wrap if cls is None else wrap(cls)

    dataclasses.dataclass = patched
    return lambda: setattr(dataclasses, "dataclass", original)


def _stub_wandb() -> None:
    """Shim 2: a ``wandb`` module whose functions do nothing."""
    mod = types.ModuleType("wandb")
    for name in ("init", "log", "login", "watch", "finish"):
        setattr(mod, name, lambda *a, **k: None)
    mod.config = types.SimpleNamespace(update=lambda *a, **k: None)
    sys.modules.setdefault("wandb", mod)


def _stub_tensorboard() -> None:
    """Shim 2b: ``torch.utils.tensorboard`` needs the ``tensorboard`` package (not installed); the released
    metrics reporter only writes scalars to it, so a ``SummaryWriter`` that discards them stands in."""
    if "tensorboard" in sys.modules:
        return
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        class SummaryWriter:
            def __init__(self, *a, **k):
                pass

            def __getattr__(self, name):
                return lambda *a, **k: None

        mod = types.ModuleType("torch.utils.tensorboard")
        mod.SummaryWriter = SummaryWriter
        sys.modules["torch.utils.tensorboard"] = mod


def _cli(spec: dict) -> list[str]:
    """The released code's command line for ``spec`` (options.py flags)."""
    algo = spec["algorithm"]
    ncm = algo.startswith("ncm+")
    base = algo.split("+")[-1]
    return [
        "federated_main.py", "--model", "squeezenet", "--pretrained", "1", "--dataset", "cifar",
        "--ncm", "1" if ncm else "0", "--algorithm", base, "--fl_algorithm", spec["fl_algorithm"],
        "--epochs", str(spec["epochs"]), "--num_clients", str(len(spec["clients"])),
        "--clients_per_round", str(spec["clients_per_round"]), "--local_ep", str(spec["local_epochs"]),
        "--local_bs", str(spec["batch_size"]), "--client_lr", repr(float(spec["client_lr"])),
        "--server_lr", repr(float(spec["server_lr"])), "--optimizer", "sgd",
    ]  # fmt: skip


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    src = str(Path(spec["src"]).resolve())
    sys.path.insert(0, src)
    own_modules = tuple(p.stem for p in Path(src).glob("*.py"))
    restore = _hashable_configs(("flsim", *own_modules))
    _stub_wandb()
    _stub_tensorboard()

    import numpy as np
    import torch
    from PIL import Image

    seed = int(spec["seed"])
    threads = int(spec.get("threads", 1))
    torch.set_num_threads(threads)
    try:
        fm = importlib.import_module("federated_main")  # imports flsim, utils, sync_trainer, config
        utils = importlib.import_module("utils")
    finally:
        restore()
    import torchvision
    from flsim.active_user_selectors.simple_user_selector import UniformlyRandomActiveUserSelectorConfig
    from safetensors.torch import load_file

    data = np.load(spec["data"])
    train_x, train_y = data["train_images"], data["train_labels"].astype(np.int64)
    test_x, test_y = data["test_images"], data["test_labels"].astype(np.int64)
    clients = [[int(i) for i in c] for c in spec["clients"]]

    class SpecCIFAR(torch.utils.data.Dataset):
        """Shim 3: the spec's images in torchvision CIFAR10's shape (PIL image, int label; ``targets``)."""

        def __init__(self, root=None, train=True, download=False, transform=None):
            self.train = bool(train)
            self.images = train_x if train else test_x
            self.targets = [int(t) for t in (train_y if train else test_y)]
            self.transform = transform

        def __len__(self):
            return len(self.targets)

        def __getitem__(self, i):
            img = Image.fromarray(self.images[i])
            return (self.transform(img) if self.transform else img), self.targets[i]

    class IndexListSharder:
        """Shim 3: each client gets exactly its index list; any other set (the test set) is one user."""

        def __init__(self, **kwargs):
            pass

        def shard_rows(self, rows):
            rows = list(rows)
            if len(rows) == len(train_y):
                for k, idx in enumerate(clients):
                    yield str(k), [rows[i] for i in idx]
            else:
                yield "0", rows

    def substitute_squeezenet(weights=None, **kwargs):
        """Shim 4: torchvision's SqueezeNet 1.1 with the substitute ``features`` weights."""
        model = torchvision.models.squeezenet1_1()
        state = load_file(spec["weights"])
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or any(k.startswith("features.") for k in missing):
            raise SystemExit(f"substitute weights do not fit SqueezeNet 1.1: {missing} {unexpected}")
        return model

    utils.CIFAR10 = SpecCIFAR
    utils.DirichletSharder = IndexListSharder
    fm.squeezenet1_1 = substitute_squeezenet
    fm.UniformlyRandomActiveUserSelectorConfig = lambda **kw: UniformlyRandomActiveUserSelectorConfig(
        **{"user_selector_seed": seed, **kw}
    )

    record: dict = {"inference": [], "evals": []}
    original_inference = fm.inference

    def recording_inference(model, loader, device):
        if spec.get("dump") and not record["inference"]:  # the first call: right after FedNCM init
            head = model.classifier[2]
            record["ncm_head"] = (head.weight.detach().numpy().copy(), head.bias.detach().numpy().copy())
            record["test_side"] = _test_features(model, loader)
        acc, loss = original_inference(model, loader, device)
        record["inference"].append({"accuracy": 100.0 * float(acc), "loss": float(loss)})
        return acc, loss

    fm.inference = recording_inference
    original_report = utils.MetricsReporter.report_metrics

    def recording_report(self, reset, stage, extra_metrics=None, **kwargs):
        metrics, better = original_report(self, reset, stage, extra_metrics=extra_metrics, **kwargs)
        if getattr(stage, "name", str(stage)) == "EVAL":
            record["evals"].append(float(metrics[self.ACCURACY]))
        return metrics, better

    utils.MetricsReporter.report_metrics = recording_report

    dump = spec.get("dump")
    seen = {"labels": [], "features": [], "active": False, "model": None}
    if dump:
        plain_loader = torch.utils.data.DataLoader

        class RecordingLoader(plain_loader):
            """Keeps the label batches of the training-set loader (the FedNCM loop's) in iteration order."""

            def __iter__(self):
                is_train = isinstance(self.dataset, SpecCIFAR) and self.dataset.train
                seen["active"] = is_train
                for images, labels in super().__iter__():
                    if is_train:
                        seen["labels"].append(labels.clone())
                    yield images, labels
                seen["active"] = False

        torch.utils.data.DataLoader = RecordingLoader
        built = fm.squeezenet1_1

        def hooked(weights=None, **kwargs):
            model = built(weights=weights, **kwargs)
            model.features.register_forward_hook(
                lambda m, i, o: seen["features"].append(torch.nn.functional.adaptive_avg_pool2d(o.detach(), 1).flatten(1))
                if seen["active"] else None
            )
            seen["model"] = model
            return model

        fm.squeezenet1_1 = hooked

    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    sys.argv = _cli(spec)
    cfg = fm.fl_config_from_json(fm.json_config)
    fm.set_cfg_from_cl(cfg)
    fm.validata_dataset_params(cfg)
    t0 = time.perf_counter()
    fm.main(cfg, use_cuda_if_available=False)
    wall = time.perf_counter() - t0

    k, m = len(clients), int(spec["clients_per_round"])
    per_epoch = math.ceil(k / min(m, k))
    evals = record["evals"]
    inf = record["inference"]
    out = {
        "seed": seed,
        "cli": sys.argv[1:],
        "rounds_per_flsim_epoch": per_epoch,
        "rounds": [per_epoch * (i + 1) for i in range(len(evals))],
        "accuracy": evals,
        "initial": inf[0]["accuracy"] if inf else None,
        "final": inf[1]["accuracy"] if len(inf) > 1 else None,
        "best_eval": max(evals) if evals else None,
        "inference": inf,
        "wall_s": round(wall, 2),
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "flsim": _version("flsim"), "python": sys.version.split()[0]},
    }  # fmt: skip
    if dump and seen["model"] is not None:
        feats = torch.cat(seen["features"]).numpy() if seen["features"] else np.zeros((0, 512), np.float32)
        labels = torch.cat(seen["labels"]).numpy() if seen["labels"] else np.zeros(0, np.int64)
        w, b = record["ncm_head"]
        x_te, y_te = record["test_side"]
        np.savez(dump, ncm_features=feats, ncm_labels=labels, head_weight=w, head_bias=b, test_features=x_te,
                 test_labels=y_te)
        out["dump"] = dump
    Path(spec["out"]).write_text(json.dumps(out, indent=1))


def _test_features(model, loader):
    """512-d pooled ``model.features`` of every test image through the released test loader (its own
    transform, no flip, in order), in eval mode without gradients."""
    import numpy as np
    import torch

    model.eval()
    xs, ys = [], []
    with torch.no_grad():
        for images, labels in loader:
            xs.append(torch.nn.functional.adaptive_avg_pool2d(model.features(images), 1).flatten(1))
            ys.append(labels)
    return torch.cat(xs).numpy(), torch.cat(ys).numpy().astype(np.int64)


def _version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "unknown"


if __name__ == "__main__":
    main(sys.argv[1])
