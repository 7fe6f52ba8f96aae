"""Peer family ``legate2023``: FT, FedNCM+FT and LP of legate2023 (Legate et al. 2023, "Guiding the last layer
in federated learning with pre-trained models") beside GwenLegate/GuidingLastLayerFLPretrain on FLSim (issue 26).

Both sides get the same inputs: the same CIFAR-10 images (loaded and verified by this suite, written to an
``.npz``), the same client index lists (this suite's ``dirichlet`` partition of a stratified pool, the
legate2023 sharder's algorithm, seeded), the same substitute SqueezeNet 1.1 weights, the same federation
(clients, clients per round, rounds, local epochs, batch size, client / server optimiser and learning rates).
The released code runs unchanged inside its own environment through
:mod:`benchmark.peers.drivers.legate2023_driver` (its run-time shims are listed there and in
``docs/peers/legate2023.md``); this suite's side runs the fl runner's library path
(:func:`benchmark.fl.methods.run_method`, FedNCM from :mod:`benchmark.closed_form`, LP on the body's features
through :mod:`benchmark.fl.lp_features`) on the same clients.

Configurations (each a CPU-minutes run):

* ``tiny``: FedNCM+FT, FT and LP under FedAvg, seed spread (the released code cannot be made to see the same
  batches: its resize is PIL on uint8 and its flips come from torch's stream, see :data:`DIFFERENCES`);
* ``tiny-fedadam``: the same three under FedAdam (the released code has FedAvg, FedAvgM and FedAdam; it has
  **no FedProx**: its README lists ``--mu``, ``options.py`` has none);
* ``tiny-fedncm-head``: the deterministic component, identical rule: the FedNCM head this suite computes
  (:func:`benchmark.closed_form.run_method` ``fedncm``) from the very features and labels the released code's
  FedNCM loop saw (captured by the driver), and the accuracy of that head with the released code's bias on
  the released code's test features, against the head and init accuracy the released code printed.

What a side reports per seed (:class:`~benchmark.peers.compare.SideRun`): the first variant of the config as
``initial`` / ``rounds`` / ``final`` and every variant as extras ``<variant> initial|round r|final``. ``final``
is each side's own reporting rule: the released code's ``final_acc`` is the last round (its "best" state is
an alias of the live weights, papers-code.md §1.6); this suite's side is run with ``selection="last"`` and
also reports its best-on-test as ``<variant> best``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.errors import BenchmarkError, ConfigError
from benchmark.peers.compare import AgreementRule, Difference, PeerComparison, SideRun
from benchmark.peers.registry import PeerFamily, PeerRequest, register

OFFICIAL_URL = "https://github.com/GwenLegate/GuidingLastLayerFLPretrain"
DRIVER = Path(__file__).resolve().parent / "drivers" / "legate2023_driver.py"
#: Released-code runs at once (each a single-threaded subprocess), beside this suite's side in-process.
PARALLEL_THEIRS = 2
#: This suite's runs at once (worker processes).
PARALLEL_OURS = 2


#: Fresh interpreters for our workers: forking after the released-code threads started can deadlock.
_SPAWN = multiprocessing.get_context("spawn")


def _own_session() -> None:
    """Worker initialiser: one torch thread, and a session of its own (like each released-code subprocess)."""
    import torch  # local: heavy import (torch)

    os.setsid()
    torch.set_num_threads(1)

_BASE: dict[str, Any] = {
    "dataset": "cifar10",
    "backbone": "squeezenet1_1",
    "weights": "substitute",
    "preprocess": "legate2023_cifar",
    "train_per_class": 30,  # a stratified pool of 300 training images ...
    "num_clients": 10,  # ... split over 10 clients (30 each) by the legate2023 sharder's algorithm
    "alpha": 0.5,
    "partition_seed": 0,
    "test_per_class": 20,  # 200 test images (> 128: the released inference() divides by the batch index)
    "flsim_epochs": 2,  # FLSim epochs: x ceil(K/m) = 2 real rounds each, evaluated after each epoch
    "clients_per_round": 5,
    "local_epochs": 1,
    "batch_size": 16,
    "client_lr": 0.003,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {**_BASE, "fl_algorithm": "fedavg", "server_lr": 1.0, "variants": ["ncm+ft", "ft", "lp"],
             "rule": "seed_spread"},
    "tiny-fedadam": {**_BASE, "fl_algorithm": "fedadam", "server_lr": 0.001, "variants": ["ncm+ft", "ft", "lp"],
                     "rule": "seed_spread"},
    "tiny-fedncm-head": {**_BASE, "fl_algorithm": "fedavg", "server_lr": 1.0, "flsim_epochs": 1,
                         "train_per_class": 50, "test_per_class": 30, "variants": ["ncm+ft"], "rule": "identical"},
}  # fmt: skip

#: Every component known to differ between the released code and this suite on these configurations.
DIFFERENCES: tuple[Difference, ...] = (
    Difference("FedNCM head bias", "random nn.Linear init U(+-1/sqrt(512)), never zeroed",
               "0 (legate2023 §3.2; closed_form protocol 'legate2023')",
               "shifts FedNCM logits by up to 0.044; changes some init predictions"),
    Difference("resize to 224 px", "PIL Resize(224) on uint8, then ToTensor", "bilinear antialiased interpolate on "
               "float tensors (preset legate2023_cifar)", "under one grey level per pixel; moves features and "
               "some predictions"),
    Difference("flips the FedNCM class means see", "a fresh random flip per image in a shuffled DataLoader "
               "(torch stream, seeded here by the driver)", "the run's frozen flip mask (the same images the "
               "clients train on)", "different train features for the class means"),
    Difference("flips during training", "drawn once per image when the data provider is built (frozen), from "
               "torch's global stream", "frozen mask from the preset's flip stream (seeded per run seed in this "
               "comparison)", "same distribution, other draws"),
    Difference("head init (FT, LP)", "torch nn.Linear init from torch's global stream",
               "nn.Linear's init law drawn from the run's model_init numpy stream", "same law, other draws"),
    Difference("client sampling", "FLSim UniformlyRandomActiveUserSelector (torch.multinomial; seeded here "
               "with user_selector_seed, unseeded in the released code)", "ClientSampler on the run's "
               "client_sampling stream", "other clients per round"),
    Difference("reported accuracy", "final_acc = last round (the kept 'best' state aliases the live weights)",
               "selection='last' here (the suite's FT default is best_on_test; both recorded)",
               "none on this config"),
    Difference("evaluation cadence", "once per FLSim epoch (every ceil(K/m) rounds)", "eval_every = ceil(K/m)",
               "none"),
    Difference("batch order", "fixed: each client's rows in its index-list order, never reshuffled",
               "fixed (client_shuffle=False), same order", "none"),
    Difference("BatchNorm buffers", "never federated (server steps parameters only)", "bn_stats=frozen_global",
               "none for SqueezeNet (no BatchNorm)"),
    Difference("LP under FedAdam", "server Adam also steps the frozen body (zero grad + weight decay 1e-5)",
               "body untouched (frozen_params='untouched')", "body drifts by ~lr per round in theirs (fedadam only)"),
    Difference("LP compute path", "full model forward every step, body frozen", "cached body features "
               "(same arithmetic up to float rounding)", "none beyond rounding"),
    Difference("FedProx", "absent from the released code (README lists --mu, options.py has none)",
               "prox_mu option", "not compared"),
)  # fmt: skip

INSTALL = (
    "git clone https://github.com/GwenLegate/GuidingLastLayerFLPretrain; python3 -m venv --system-site-packages "
    "ENV (or a .pth pointing at an environment with torch/torchvision/pandas/scikit-learn/safetensors); "
    "ENV/bin/pip install --no-deps flsim==0.1.0 opacus omegaconf hydra-core antlr4-python3-runtime==4.9.3. "
    "wandb and tensorboard are not needed: the driver stubs them, and makes FLSim's configs importable on "
    "Python 3.11 (identity hash for its dataclasses). Pass ENV/bin/python as --python and the checkout as "
    "--official-repo."
)


# ------------------------------------------------------------------------------------------------ inputs
def _setting(config: Mapping[str, Any]) -> dict[str, Any]:
    k, m = int(config["num_clients"]), int(config["clients_per_round"])
    per_epoch = math.ceil(k / min(m, k))
    return {"rounds": int(config["flsim_epochs"]) * per_epoch, "eval_every": per_epoch}


def prepare_inputs(config: Mapping[str, Any], workdir: Path, data_root: str | None = None) -> dict[str, Any]:
    """The shared inputs: the train pool and test subset (uint8 HWC, verified by this suite's loader), the
    client index lists into the pool, written to ``workdir/inputs.npz``; returns them in memory too."""
    from benchmark.data.partition import make_partition  # local: heavy import (pandas, scipy)
    from benchmark.data.registry import load_dataset  # local: heavy import (torchvision)
    from benchmark.data.subsets import stratified_indices  # local: heavy import (numpy data)

    tr = load_dataset(config["dataset"], "train", data_root)
    te = load_dataset(config["dataset"], "test", data_root)
    if tr.images is None or te.images is None:
        raise ConfigError(f"{config['dataset']} is not an in-memory image dataset", "use cifar10")
    ytr, yte = np.asarray(tr.labels, dtype=np.int64), np.asarray(te.labels, dtype=np.int64)
    pool = stratified_indices(ytr, int(config["train_per_class"]), 0)
    test = stratified_indices(yte, int(config["test_per_class"]), 0)
    part = make_partition("dirichlet", ytr[pool], int(config["partition_seed"]),
                          num_clients=int(config["num_clients"]), alpha=float(config["alpha"]))  # fmt: skip
    clients = [np.asarray(c, dtype=np.int64) for c in part.clients]
    inputs = {
        "train_images": np.ascontiguousarray(tr.images[pool]), "train_labels": ytr[pool],
        "test_images": np.ascontiguousarray(te.images[test]), "test_labels": yte[test],
        "clients": clients, "pool": pool, "test": test, "train_checksum": tr.checksum,
        "partition_sha256": part.sha256,
    }  # fmt: skip
    workdir.mkdir(parents=True, exist_ok=True)
    np.savez(workdir / "inputs.npz", **{k: inputs[k] for k in ("train_images", "train_labels", "test_images",
                                                                 "test_labels")})  # fmt: skip
    return inputs


def weights_file() -> Path:
    """The substitute SqueezeNet 1.1 file, after this suite's sha256 check."""
    from benchmark.models.backbones import backbone_spec  # local: heavy import (torch, torchvision)
    from benchmark.models.weights import load_substitute, weights_dir  # local: heavy import (torch)

    spec = backbone_spec("squeezenet1_1").substitute
    assert spec is not None
    load_substitute(spec)  # verifies the sha256
    return weights_dir(None) / spec.filename


# ------------------------------------------------------------------------------------------------ theirs
def run_theirs(
    request: PeerRequest, config: Mapping[str, Any], variant: str, seed: int, inputs: Mapping[str, Any],
    *, dump: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Run the released code once (the driver, in ``request.python``); its log goes to the workdir."""
    tag = f"theirs-{variant.replace('+', '_')}-{config['fl_algorithm']}-seed{seed}"
    wd = request.workdir
    spec = {
        "src": str(Path(request.official_repo) / "src"), "data": str(wd / "inputs.npz"),
        "clients": [c.tolist() for c in inputs["clients"]], "weights": str(weights_file()),
        "algorithm": variant, "fl_algorithm": config["fl_algorithm"], "client_lr": config["client_lr"],
        "server_lr": config["server_lr"], "epochs": config["flsim_epochs"],
        "clients_per_round": config["clients_per_round"], "local_epochs": config["local_epochs"],
        "batch_size": config["batch_size"], "seed": seed, "threads": request.threads,
        "out": str(wd / f"{tag}.json"),
    }  # fmt: skip
    if dump:
        spec["dump"] = str(wd / f"{tag}.dump.npz")
    spec_path, out_path = wd / f"{tag}.spec.json", wd / f"{tag}.json"
    if out_path.is_file() and spec_path.is_file() and json.loads(spec_path.read_text()) == spec:
        out = json.loads(out_path.read_text())  # the same spec already ran in this workdir: reuse its result
        out.setdefault("command", f"(reused) {tag}.spec.json")
        return out
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "OMP_NUM_THREADS": str(request.threads), "MKL_NUM_THREADS": str(request.threads)}
    t0 = time.perf_counter()
    with open(wd / f"{tag}.log", "w") as log:
        proc = subprocess.run([request.python, str(DRIVER), str(wd / f"{tag}.spec.json")], cwd=wd, env=env,
                              stdout=log, stderr=subprocess.STDOUT, check=False, start_new_session=True)  # fmt: skip
    if proc.returncode != 0:
        tail = (wd / f"{tag}.log").read_text()[-600:]
        raise BenchmarkError(
            f"the released legate2023 code failed ({tag}, exit {proc.returncode}): ...{tail}",
            f"see {wd / f'{tag}.log'}; docs/peers/legate2023.md lists the environment it needs",
        )
    out = json.loads(out_path.read_text())
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    out["command"] = f"{request.python} {DRIVER.name} {tag}.spec.json  # federated_main.py {' '.join(out['cli'])}"
    out_path.write_text(json.dumps(out, indent=1))
    return out


# ------------------------------------------------------------------------------------------------ ours
def run_ours(config: Mapping[str, Any], variant: str, seed: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """This suite's fl runner path on the same clients: FT / FedNCM+FT on the model, LP on the body's
    features (module docstring)."""
    import torch  # local: heavy import (torch)

    from benchmark.closed_form import run_method as closed_form_method  # local: heavy import (scipy)
    from benchmark.closed_form.protocols import paper_protocol_options  # local: heavy import (yaml catalogue)
    from benchmark.features.preprocess import get_preprocess  # local: heavy import (torch)
    from benchmark.fl.config import FLConfig  # local: heavy import (torch)
    from benchmark.fl.image_data import ImageSet  # local: heavy import (torch)
    from benchmark.fl.jobs import body_features  # local: heavy import (pandas, torch)
    from benchmark.fl.lp_features import CachedFeatures  # local: heavy import (torch)
    from benchmark.fl.methods import run_method  # local: heavy import (torch)
    from benchmark.models.backbones import create_backbone  # local: heavy import (torchvision)

    s = _setting(config)
    algo = config["fl_algorithm"]
    base = variant.split("+")[-1]
    method = {"ft": "ft", "lp": "lp", "ncm+ft": "head_ft", "ncm+lp": "head_lp"}[variant]
    cfg = FLConfig(
        method=method, num_clients=int(config["num_clients"]),
        participation=int(config["clients_per_round"]) / int(config["num_clients"]), rounds=s["rounds"],
        local_epochs=int(config["local_epochs"]), batch_size=int(config["batch_size"]),
        client_lr=float(config["client_lr"]), server_opt=algo, server_lr=float(config["server_lr"]),
        selection="last", eval_every=s["eval_every"], seed=seed, device="cpu", progress=False,
    )  # fmt: skip
    t0 = time.perf_counter()
    pre = get_preprocess(config["preprocess"], flip_seed=seed)
    to_nchw = lambda a: torch.from_numpy(np.ascontiguousarray(a)).permute(0, 3, 1, 2)
    train = ImageSet(to_nchw(inputs["train_images"]), inputs["train_labels"], pre, "train")
    test = ImageSet(to_nchw(inputs["test_images"]), inputs["test_labels"], pre, "test")
    clients = list(inputs["clients"])
    model, _ = create_backbone(config["backbone"], config["weights"], num_classes=10,
                               seed=cfg.seeds.int_seed("model_init"))  # fmt: skip
    kw: dict[str, Any] = {}
    initial = None
    feats = None
    if variant.startswith("ncm+") or base == "lp":
        f_tr, f_te = body_features(model, train), body_features(model, test)
        feats = CachedFeatures(torch.from_numpy(f_tr), torch.from_numpy(inputs["train_labels"]), clients,
                               torch.from_numpy(f_te), torch.from_numpy(inputs["test_labels"]), num_classes=10)  # fmt: skip
    if variant.startswith("ncm+"):
        assert feats is not None
        opts = paper_protocol_options("fedncm", paper="legate2023", model_name=config["backbone"])
        res = closed_form_method("fedncm", feats.train_x.numpy(), feats.train_y.numpy(), feats.test_x.numpy(),
                                 feats.test_y.numpy(), clients, 10, **opts)  # fmt: skip
        initial = float(res.accuracy)
        kw["closed_form"] = (res.head.W, res.head.b)
    if base == "lp":
        kw["features"] = feats
    else:
        kw.update(model=model, clients=[train.subset(c) for c in clients], test=test)
    result = run_method(cfg, **kw)
    rows = [r for r in result.evaluated() if r.round > 0]
    first = [r for r in result.evaluated() if r.round == 0]
    if initial is None and first:
        initial = 100.0 * first[0].test_acc
    return {
        "seed": seed, "rounds": [int(r.round) for r in rows], "accuracy": [100.0 * r.test_acc for r in rows],
        "initial": initial, "final": 100.0 * result.last_acc, "best": 100.0 * result.best_acc,
        "wall_s": round(time.perf_counter() - t0, 1),
        "command": f"benchmark.fl.methods.run_method({cfg.method}, {algo}, seed={seed})",
    }  # fmt: skip


def run_ours_cached(
    config: Mapping[str, Any], variant: str, seed: int, inputs: Mapping[str, Any], workdir: Path
) -> dict[str, Any]:
    """:func:`run_ours`, its result kept in ``workdir`` with the setting it ran (reused when both match)."""
    tag = f"ours-{variant.replace('+', '_')}-{config['fl_algorithm']}-seed{seed}"
    key = {k: v for k, v in config.items() if k != "variants"} | {"variant": variant, "seed": seed,
                                                                   "partition": inputs["partition_sha256"]}
    path = Path(workdir) / f"{tag}.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return saved["result"]
    result = run_ours(config, variant, seed, inputs)
    path.write_text(json.dumps({"key": key, "result": result}, indent=1))
    return result


# ------------------------------------------------------------------------------------------------ comparison
def side_run(side: str, seed: int, variants: Mapping[str, Mapping[str, Any]], algo: str) -> SideRun:
    """One :class:`SideRun` from the per-variant results of one side and seed (module docstring)."""
    extra: dict[str, float] = {}
    for name, r in variants.items():
        key = f"{name}/{algo}"
        if r.get("initial") is not None:
            extra[f"{key} initial"] = float(r["initial"])
        extra.update({f"{key} round {rd}": float(a) for rd, a in zip(r["rounds"], r["accuracy"], strict=True)})
        extra[f"{key} final"] = float(r["final"])
    main = next(iter(variants.values()))
    notes = tuple(f"{n}: best-on-test {r['best']:.2f}" for n, r in variants.items() if r.get("best") is not None)
    return SideRun(
        side=side, seed=seed, rounds=tuple(main["rounds"]), accuracy=tuple(main["accuracy"]),
        final=float(main["final"]), initial=main.get("initial"), extra=extra,
        wall_s=float(sum(r.get("wall_s", 0.0) for r in variants.values())),
        command=" ; ".join(str(r.get("command", "")) for r in variants.values()), notes=notes,
    )  # fmt: skip


def fedncm_head_check(dump: Mapping[str, np.ndarray], printed_initial: float) -> tuple[dict[str, float], dict[str, float]]:
    """The identical check (config ``tiny-fedncm-head``): this suite's FedNCM on the features the released
    FedNCM loop saw, against the head it set; the accuracy of our W with their bias on their test features,
    against the init accuracy it printed. Returns (ours, theirs) quantities."""
    from benchmark.closed_form import run_method as closed_form_method  # local: heavy import (scipy)
    from benchmark.closed_form.protocols import paper_protocol_options  # local: heavy import (yaml catalogue)

    x, y = np.asarray(dump["ncm_features"]), np.asarray(dump["ncm_labels"])
    x_te, y_te = np.asarray(dump["test_features"]), np.asarray(dump["test_labels"])
    opts = paper_protocol_options("fedncm", paper="legate2023", model_name="squeezenet1_1")
    res = closed_form_method("fedncm", x, y, x_te, y_te, [np.arange(len(y))], int(dump["head_weight"].shape[0]),
                             **opts)  # fmt: skip
    w_ours = np.asarray(res.head.W, dtype=np.float32)
    w_theirs = np.asarray(dump["head_weight"], dtype=np.float32)
    max_diff = float(np.abs(w_ours - w_theirs).max())
    logits = x_te @ w_ours.T + np.asarray(dump["head_bias"], dtype=np.float32)
    acc = 100.0 * float((logits.argmax(1) == y_te).mean())
    ours = {"initial": acc, "head W equal within 1e-6": float(max_diff <= 1e-6),
            "bias-0 head accuracy": float(res.accuracy)}  # fmt: skip
    theirs = {"initial": float(printed_initial), "head W equal within 1e-6": 1.0}
    return ours, theirs


def run(request: PeerRequest) -> PeerComparison:
    """``flb peer legate2023``: both sides on ``request.config_name`` for every seed."""
    from benchmark.peers.run import official_commit  # local: heavy import (ledger)

    config = CONFIGS[request.config_name]
    inputs = prepare_inputs(config, request.workdir, os.environ.get("FLB_DATA_ROOT"))
    algo = config["fl_algorithm"]
    ours_runs, theirs_runs = [], []
    notes: list[str] = [
        f"train pool {len(inputs['train_labels'])} images (stratified, seed 0), partition sha256 "
        f"{inputs['partition_sha256'][:16]}, test {len(inputs['test_labels'])} images; substitute weights",
        "the released code runs unchanged; run-time shims: see benchmark/peers/drivers/legate2023_driver.py",
    ]
    if config["rule"] == "identical":
        for seed in request.seeds:
            t = run_theirs(request, config, "ncm+ft", seed, inputs, dump=True)
            dump = np.load(t["dump"])
            qo, qt = fedncm_head_check(dump, float(t["initial"]))
            extra_o = {k: v for k, v in qo.items() if k != "initial" and k in qt}
            extra_t = {k: v for k, v in qt.items() if k != "initial"}
            ours_runs.append(SideRun("ours", seed, (), (), final=qo["initial"], initial=qo["initial"],
                                     extra=extra_o, command="benchmark.closed_form.run_method('fedncm') on the "
                                     "captured features", notes=(f"bias-0 FedNCM accuracy on their test features "
                                     f"{qo['bias-0 head accuracy']:.2f}",)))  # fmt: skip
            theirs_runs.append(SideRun("theirs", seed, (), (), final=float(t["initial"]), initial=float(t["initial"]),
                                       extra=extra_t, wall_s=t["wall_s"], command=t["command"]))  # fmt: skip
        rule = AgreementRule("identical", atol=0.0)
        notes.append("identical: our FedNCM from the features their FedNCM loop saw; 'final' here = the init "
                     "accuracy (no training rounds)")
    else:
        # The released code's runs go to PARALLEL_THEIRS subprocesses, ours to PARALLEL_OURS worker processes
        # (each its own session: one single-threaded process per run on a shared machine).
        jobs = [(v, seed) for seed in request.seeds for v in config["variants"]]
        with ThreadPoolExecutor(max_workers=PARALLEL_THEIRS) as pool, \
                ProcessPoolExecutor(max_workers=PARALLEL_OURS, mp_context=_SPAWN, initializer=_own_session) as workers:
            futures = {job: pool.submit(run_theirs, request, config, job[0], job[1], inputs) for job in jobs}
            mine = {job: workers.submit(run_ours_cached, config, job[0], job[1], inputs, request.workdir)
                    for job in jobs}  # fmt: skip
            ours = {job: f.result() for job, f in mine.items()}
            theirs = {job: f.result() for job, f in futures.items()}
        for seed in request.seeds:
            theirs_runs.append(side_run("theirs", seed, {v: theirs[(v, seed)] for v in config["variants"]}, algo))
            ours_runs.append(side_run("ours", seed, {v: ours[(v, seed)] for v in config["variants"]}, algo))
        rule = AgreementRule("seed_spread", k=2.0, floor=100.0 / len(inputs["test_labels"]))
    public = {k: v for k, v in config.items() if k != "rule"} | _setting(config)
    return PeerComparison(
        family="legate2023", config_name=request.config_name, config=public, seeds=tuple(request.seeds),
        official_repo=OFFICIAL_URL, official_commit=official_commit(Path(request.official_repo)),
        ours=tuple(ours_runs), theirs=tuple(theirs_runs), rule=rule, differences=DIFFERENCES,
        notes=tuple(notes),
    )  # fmt: skip


FAMILY = register(
    PeerFamily(
        name="legate2023", paper="legate2023", official_url=OFFICIAL_URL, configs=CONFIGS, run=run,
        install=INSTALL, default_seeds=(0, 1),
    )
)
