"""Throughput of a FedBABU round, per-client loop and vectorised, against centralised training, in one run.

Issue 12's target: on a GPU, a FedBABU round of many small clients (fedbabu §3: 100 clients of 500 CIFAR
images, batches of 50) executed by :func:`benchmark.pfl.vectorised.local_updates_vectorised` reaches >= 60 % of
the images/s of *centralised* training of the same network with one batch of the same total size. Run from
the repository root (needs only torch and numpy besides the package; the checkout is put on ``sys.path`` when
the package is not installed)::

    python tools/pfl_bench.py --out DIR                                  # GPU defaults: DIR/pfl_bench.json
    python tools/pfl_bench.py --out DIR --device cpu --model 4convnet --clients 10 --images-per-client 100
    python tools/pfl_bench.py --out DIR --device cpu --model 4convnet --clients 10 --images-per-client 100 \
        --threads 1 --modes loop,bare,central --layouts contiguous,channels_last      # issue 27's CPU ratios
    python tools/pfl_bench.py --out DIR --device cpu --model 4convnet --clients 10 --images-per-client 500 \
        --threads 1 --modes loop,procs --layouts channels_last --no-check      # two client processes vs the loop

What one run measures, on synthetic uint8 32x32 images (``--clients * --images-per-client`` of them, random
labels of ``--num-classes`` classes: throughput does not depend on the pixels) held on the device as
:class:`~benchmark.federated.images.DeviceImages` and augmented there (crop + flip + CIFAR-100 normalisation, the
trainer's path), network ``--model`` from :mod:`benchmark.pfl.models` (random initialisation, float32):

* ``loop``: :meth:`PFLTrainer.train_round` of FedBABU with every client sampled (``participation=1``),
  ``--epochs`` local epochs of batches of ``--batch-size``, one client after the other;
* ``vectorised``: the same rounds with ``client_exec="vectorised"`` (:mod:`benchmark.pfl.vectorised`), chunks of
  ``--chunk`` clients (default: all of them);
* ``central``: SGD with momentum over every parameter of the same network on batches of ``clients *
  min(batch_size, images_per_client)`` images (what one lock-step step of all clients processes), drawn and
  augmented the same way, as many images as one round.

* ``procs``: the loop's rounds with ``client_procs = --procs`` (:mod:`benchmark.pfl.client_pool`: the clients
  in forked CPU processes of one thread each; ratio ``procs_to_loop``, against the loop run with ``--threads``);

* ``bare``: the same network's forward + backward + SGD step (momentum, every parameter) on pre-made float
  tensors of ``--batch-size`` images (no gather, no augmentation, no optimiser set-up per client): the floor
  under the trainer's step, as many images as one round (issue 27).

Every mode runs in each memory layout of ``--layouts`` (``contiguous``, ``channels_last``: the trainer's
``PFLConfig.channels_last``, the model's weights in NHWC; ``bare`` and ``central`` convert their model and
inputs the same way); the results of a layout other than ``contiguous`` are named ``<mode>/<layout>``.

Issue 27 also asks how far the step is from the machine: the JSON carries ``flops``, the network's FLOPs per
training image (forward + backward, counted by ``torch.utils.flop_counter.FlopCounterMode`` on one batch:
convolutions and matrix products, 2 per multiply-add) and ``peak``, the device's measured throughput of a large
3x3 conv2d (``--peak-batch`` x 64 x 32 x 32 -> 64 channels, both layouts) and of an ``--peak-matmul``-square
matmul, each the best of ``--peak-repeats`` timed calls after a warm-up (GFLOP/s; ``peak_gflops`` is the
largest). Each mode's ``gflops`` is images/s x FLOPs per image.

Ratios (``ratios``), all computed in the same process: ``<mode>_to_central``, ``<mode>_to_bare`` (images/s
over the bare step's, same layout: how much the trainer's gathers, augmentation and per-client set-up cost),
``<mode>_to_peak`` (achieved GFLOP/s over ``peak_gflops``) and ``<mode>_channels_last_to_contiguous``.

``--repeats N`` runs every mode and layout (and the peak kernels) N times, interleaved, so that a machine whose
load drifts slows all of them alike: each ratio is the median of the N repeats' ratios (``ratios_by_repeat``:
each repeat's, every ratio within a repeat taken against that repeat's own peak), each mode's images/s the
median of its repeats (``repeats_images_per_s``), the peak the best of every repeat.

Each federated mode runs one warm-up round, then ``--rounds`` timed rounds (the device synchronised around
each); ``central`` one warm-up step, then the steps of ``--rounds`` rounds' images. Images/s counts training
images (``clients * images_per_client * epochs`` per round). The JSON records the machine
(:func:`benchmark.provenance.machine`), torch, the device and its settings (TF32, cuDNN benchmark), the
config, each mode's times, images/s and peak GPU memory (or ``oom``), the ratios vectorised/central and
loop/central, and ``check``: the broadcast body after one round of each execution from the same start, in
float64 over the first ``--check-clients`` clients (max |difference|, the difference's norm relative to the
update's, which must stay below 1e-8, and whether the FedBABU heads stayed bit-identical); the exit status
is 1 when the check fails.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

try:
    import benchmark  # noqa: F401
except ModuleNotFoundError:  # a checkout without the package installed (a lent GPU machine): use it in place
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.federated.images import NORMALISATION, DeviceImages
from benchmark.io import atomic_write_json
from benchmark.pfl.client_pool import ClientPool
from benchmark.pfl.models import build_model
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.trainer import PFLConfig, PFLTrainer
from benchmark.pfl.vectorised import loop_reason
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.timing import peak_gib, reset_peak_memory, sync, timed

MODELS = ("mobilenet_cifar", "4convnet")
MODES = ("loop", "vectorised", "central", "bare", "procs")
LAYOUTS = ("contiguous", "channels_last")
TARGET = 0.60  # issue 12: vectorised round >= 60 % of centralised images/s
CHECK_BOUND = (
    1e-8  # float64 loop vs vectorised, norm of the gap / norm of the update (measured ~1e-14 on CPU)
)


# ------------------------------------------------------------------------------------------------ inputs
def synthetic(n: int, num_classes: int, seed: int, device: torch.device) -> DeviceImages:
    """``n`` random uint8 32x32 RGB images with random labels on ``device`` (CIFAR-100 normalisation)."""
    g = torch.Generator().manual_seed(seed)
    mean, std = NORMALISATION["cifar100"]
    return DeviceImages(
        torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8).to(device),
        torch.randint(0, num_classes, (n,), generator=g).to(device),
        torch.tensor(mean, device=device).view(1, -1, 1, 1),
        torch.tensor(std, device=device).view(1, -1, 1, 1),
    )


def make_trainer(
    args: argparse.Namespace, train: DeviceImages, test: DeviceImages, mode: str, layout: str = "contiguous"
) -> PFLTrainer:
    """FedBABU, every client sampled, ``args.epochs`` epochs, clients executed as ``mode`` (``loop`` /
    ``vectorised`` in chunks of ``args.chunk``), the model in memory ``layout``."""
    k, n = args.clients, args.images_per_client
    split = ClientSplit(
        tuple(np.arange(i * n, (i + 1) * n) for i in range(k)), tuple(np.arange(0) for _ in range(k))
    )
    cfg = PFLConfig(
        dataset="cifar100",
        model=args.model,
        algorithm="fedbabu",
        clients=k,
        participation=1.0,
        local_epochs=args.epochs,
        rounds=10**6,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        client_exec="loop" if mode == "procs" else mode,
        client_procs=args.procs if mode == "procs" else 1,
        vector_chunk=args.chunk,
        channels_last=layout == "channels_last",
    )
    return PFLTrainer(cfg, train, test, split, args.num_classes, progress=False)


# ------------------------------------------------------------------------------------------------ timing
def run_round(trainer: PFLTrainer, r: int) -> None:
    """Round ``r`` of every client at the constant lr."""
    trainer.train_round(r, np.arange(trainer.cfg.clients), trainer.cfg.lr)


def images_per_round(args: argparse.Namespace) -> int:
    return args.clients * args.images_per_client * args.epochs


def memory_format(layout: str) -> torch.memory_format:
    return torch.channels_last if layout == "channels_last" else torch.contiguous_format


def time_federated(
    args: argparse.Namespace, mode: str, train: DeviceImages, test: DeviceImages, layout: str = "contiguous"
) -> dict[str, Any]:
    """One warm-up and ``args.rounds`` timed FedBABU rounds executed as ``mode``, the model in ``layout``."""
    device = train.images.device
    rec: dict[str, Any] = {
        "mode": mode,
        "layout": layout,
        "chunk": args.chunk if mode == "vectorised" else None,
    }
    reset_peak_memory(device)
    try:
        trainer = make_trainer(args, train, test, mode, layout)
        if mode == "vectorised":
            rec["fallback"] = loop_reason(trainer)
        if mode == "procs":  # the pool run() opens around its rounds
            rec["procs"] = args.procs
            with ClientPool(trainer, args.procs) as trainer.pool:
                times = timed(lambda r: run_round(trainer, r), args.rounds, device)
        else:
            times = timed(lambda r: run_round(trainer, r), args.rounds, device)
    except torch.OutOfMemoryError:
        return {**rec, "status": "oom", "peak_mem_gib": peak_gib(device)}
    return {**rec, "status": "ok", "round_s": [round(t, 5) for t in times], "images_per_round": images_per_round(args),
            "images_per_s": round(images_per_round(args) * len(times) / sum(times), 1), "peak_mem_gib": peak_gib(device)}  # fmt: skip


def time_central(args: argparse.Namespace, train: DeviceImages, layout: str = "contiguous") -> dict[str, Any]:
    """Centralised SGD (momentum, every parameter) on batches of ``clients * client batch`` images."""
    device = train.images.device
    batch = args.clients * min(args.batch_size, args.images_per_client)
    steps = math.ceil(images_per_round(args) / batch) * args.rounds
    rec: dict[str, Any] = {"mode": "central", "layout": layout, "batch": batch, "steps": steps}
    fmt = memory_format(layout)
    reset_peak_memory(device)
    try:
        torch.manual_seed(args.seed)
        model = build_model(args.model, args.num_classes).to(device, memory_format=fmt).train()
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        g = torch.Generator().manual_seed(args.seed + 1)
        n = len(train.labels)
        rows = torch.randint(0, n, (steps + 1, batch), generator=g).to(device)
        crops = torch.randint(0, 9, (steps + 1, batch, 2), generator=g).to(device)
        flips = (torch.rand(steps + 1, batch, generator=g) < 0.5).to(device)

        def step(s: int) -> None:
            x, y = train.train_batch(rows[s], crops[s], flips[s])
            loss = torch.nn.functional.cross_entropy(model(x.contiguous(memory_format=fmt)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        step(0)  # warm-up (cuDNN autotuning)
        sync(device)
        t0 = time.perf_counter()
        for s in range(1, steps + 1):
            step(s)
        sync(device)
        wall = time.perf_counter() - t0
    except torch.OutOfMemoryError:
        return {**rec, "status": "oom", "peak_mem_gib": peak_gib(device)}
    return {**rec, "status": "ok", "wall_s": round(wall, 5), "images": steps * batch,
            "images_per_s": round(steps * batch / wall, 1), "peak_mem_gib": peak_gib(device)}  # fmt: skip


def bare_model(args: argparse.Namespace, device: torch.device, layout: str) -> torch.nn.Module:
    torch.manual_seed(args.seed)
    return build_model(args.model, args.num_classes).to(device, memory_format=memory_format(layout)).train()


def bare_batches(
    args: argparse.Namespace, device: torch.device, layout: str, count: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` pre-made float32 batches of ``--batch-size`` normalised-looking images and labels."""
    g = torch.Generator().manual_seed(args.seed + 3)
    x = torch.randn(count, args.batch_size, 3, 32, 32, generator=g).to(device)
    x = torch.stack([b.contiguous(memory_format=memory_format(layout)) for b in x.unbind(0)])
    return x, torch.randint(0, args.num_classes, (count, args.batch_size), generator=g).to(device)


def time_bare(args: argparse.Namespace, device: torch.device, layout: str = "contiguous") -> dict[str, Any]:
    """Forward + backward + SGD step (momentum 0.9, every parameter, one optimiser for the whole run) on
    pre-made tensors of ``--batch-size`` images: as many images as ``--rounds`` rounds, after one warm-up step."""
    steps = math.ceil(images_per_round(args) / args.batch_size) * args.rounds
    rec: dict[str, Any] = {"mode": "bare", "layout": layout, "batch": args.batch_size, "steps": steps}
    reset_peak_memory(device)
    try:
        model = bare_model(args, device, layout)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        xs, ys = bare_batches(args, device, layout, min(steps + 1, 8))  # a few batches, reused in turn

        def step(s: int) -> None:
            loss = torch.nn.functional.cross_entropy(model(xs[s % len(xs)]), ys[s % len(ys)])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        step(0)
        sync(device)
        t0 = time.perf_counter()
        for s in range(1, steps + 1):
            step(s)
        sync(device)
        wall = time.perf_counter() - t0
    except torch.OutOfMemoryError:
        return {**rec, "status": "oom", "peak_mem_gib": peak_gib(device)}
    images = steps * args.batch_size
    return {**rec, "status": "ok", "wall_s": round(wall, 5), "images": images,
            "images_per_s": round(images / wall, 1), "peak_mem_gib": peak_gib(device)}  # fmt: skip


# ------------------------------------------------------------------------------------------------ FLOPs
def flops_per_image(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """FLOPs of one training image (forward + backward of a ``--batch-size`` batch, divided by it), counted by
    :class:`torch.utils.flop_counter.FlopCounterMode` (convolutions and matrix products; 2 per multiply-add)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = bare_model(args, device, "contiguous")
    x, y = bare_batches(args, device, "contiguous", 1)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(model(x[0]), y[0]).backward()
    total = int(counter.get_total_flops())
    return {"per_image": total / args.batch_size, "batch": args.batch_size, "counted_by": "FlopCounterMode"}


def _best_seconds(fn: Any, repeats: int, device: torch.device) -> float:
    return min(timed(lambda _r: fn(), repeats, device))


def measured_peak(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """GFLOP/s of a 3x3 conv2d (``--peak-batch`` x 64 x 32 x 32 -> 64, stride 1, padding 1; contiguous and
    channels-last) and of an ``--peak-matmul`` square matmul in float32, each the best of ``--peak-repeats``."""
    g = torch.Generator().manual_seed(args.seed + 4)
    n, c, hw, k = args.peak_batch, 64, 32, 3
    x = torch.randn(n, c, hw, hw, generator=g).to(device)
    w = torch.randn(c, c, k, k, generator=g).to(device)
    conv_flops = 2 * n * c * c * k * k * hw * hw
    out: dict[str, Any] = {"conv_shape": [n, c, hw, hw, c, k], "matmul_n": args.peak_matmul,
                           "repeats": args.peak_repeats}  # fmt: skip
    with torch.no_grad():
        for layout in LAYOUTS:
            fmt = memory_format(layout)
            xl, wl = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
            sec = _best_seconds(lambda xl=xl, wl=wl: torch.nn.functional.conv2d(xl, wl, padding=1),
                                args.peak_repeats, device)  # fmt: skip
            out[f"conv_{layout}_gflops"] = round(conv_flops / sec / 1e9, 2)
        m = args.peak_matmul
        a, b = torch.randn(m, m, generator=g).to(device), torch.randn(m, m, generator=g).to(device)
        sec = _best_seconds(lambda: a @ b, args.peak_repeats, device)
        out["matmul_gflops"] = round(2 * m**3 / sec / 1e9, 2)
    out["peak_gflops"] = max(v for k_, v in out.items() if k_.endswith("_gflops"))
    return out


def result_key(mode: str, layout: str) -> str:
    return mode if layout == "contiguous" else f"{mode}/{layout}"


def ratios_of(results: dict[str, dict[str, Any]], flops: float, peak: float) -> dict[str, float]:
    """The ratios of the module docstring, for every pair of results that ran (``status`` ok)."""
    ok = {k: r for k, r in results.items() if r.get("status") == "ok"}
    out: dict[str, float] = {}
    for key, rec in ok.items():
        mode, _, layout = key.partition("/")
        name = key.replace("/", "_")
        for base in ("central", "bare"):
            ref = ok.get(result_key(base, layout or "contiguous"))
            if ref is not None and mode != base:
                out[f"{name}_to_{base}"] = round(rec["images_per_s"] / ref["images_per_s"], 4)
        if flops and peak:
            out[f"{name}_to_peak"] = round(rec["images_per_s"] * flops / 1e9 / peak, 4)
        if mode == "procs" and (ref := ok.get(result_key("loop", layout or "contiguous"))) is not None:
            out[f"{name}_to_loop"] = round(rec["images_per_s"] / ref["images_per_s"], 4)
        if layout:
            ref = ok.get(mode)
            if ref is not None:
                out[f"{mode}_{layout}_to_contiguous"] = round(rec["images_per_s"] / ref["images_per_s"], 4)
    return out


def merge_repeats(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """One record per mode over the repeats: the last repeat's, with the median images/s and GFLOP/s and the
    list of each repeat's images/s (``repeats_images_per_s``); a repeat that did not run (``oom``) wins."""
    out: dict[str, dict[str, Any]] = {}
    for key in runs[0]:
        recs = [r[key] for r in runs]
        bad = [r for r in recs if r.get("status") != "ok"]
        if bad:
            out[key] = bad[0]
            continue
        ips = [r["images_per_s"] for r in recs]
        out[key] = {**recs[-1], "images_per_s": round(float(np.median(ips)), 1), "repeats_images_per_s": ips,
                    "gflops": round(float(np.median([r["gflops"] for r in recs])), 3)}  # fmt: skip
    return out


def merge_peaks(peaks: list[dict[str, Any]]) -> dict[str, Any]:
    """The best of each kernel's GFLOP/s over the repeats (each repeat's list under ``by_repeat``)."""
    out = dict(peaks[0])
    for k in out:
        if k.endswith("_gflops"):
            out[k] = max(p[k] for p in peaks)
    return {**out, "by_repeat": [p["peak_gflops"] for p in peaks]}


def check(args: argparse.Namespace, train: DeviceImages, test: DeviceImages) -> dict[str, Any]:
    """Round 0 of the loop and of the vectorised execution from the same start, in float64, over the first
    ``--check-clients`` clients: how far apart the broadcast bodies are, relative to the update, and whether
    every FedBABU head stayed bit-identical. float64 because float32 itself is off the exact round by ~1e-2
    of the update here (random images and labels, batch-statistics BN; the loop as much as the vectorised
    execution), which would hide a real departure; the two executions agree to ~1e-14 in float64."""
    sub = argparse.Namespace(**{**vars(args), "clients": min(args.clients, args.check_clients)})
    if sub.chunk is not None:
        sub.chunk = min(sub.chunk, sub.clients)
    data = DeviceImages(train.images, train.labels, train.mean.double(), train.std.double())
    try:
        runs = {}
        for mode in ("loop", "vectorised"):
            t = make_trainer(sub, data, test, mode)
            t.model.double()
            t.broadcast = {k: v.double() for k, v in t.broadcast.items()}
            t.init_personal = {k: v.double() for k, v in t.init_personal.items()}
            start = dict(t.broadcast)
            run_round(t, 0)
            runs[mode] = t
        a, b = runs["loop"].broadcast, runs["vectorised"].broadcast
        vec = runs["vectorised"]
        with torch.no_grad():
            gap = torch.cat([(a[k] - b[k]).flatten() for k in a])
            update = torch.cat([(a[k] - start[k]).flatten() for k in a])
            heads = all(torch.equal(vec.personal[i][k], vec.init_personal[k]) for i in vec.personal
                        for k in vec.init_personal)  # fmt: skip
    except torch.OutOfMemoryError:
        return {"status": "oom"}
    rel = float(gap.norm() / update.norm())
    return {"status": "ok", "dtype": "float64", "clients": sub.clients, "chunk": sub.chunk,
            "max_abs_diff": float(gap.abs().max()), "max_update": float(update.abs().max()), "norm_relative": rel,
            "bound": CHECK_BOUND, "fedbabu_heads_bit_identical": heads,
            "passed": bool(rel < CHECK_BOUND and heads)}  # fmt: skip


# ------------------------------------------------------------------------------------------------ report
def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"device": str(device), "torch_threads": torch.get_num_threads(),
                            "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                                     "cudnn": torch.backends.cudnn.allow_tf32},
                            "cudnn_benchmark": torch.backends.cudnn.benchmark}  # fmt: skip
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), capability=f"{p.major}.{p.minor}",
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())  # fmt: skip
    return info


def main(argv: Sequence[str] | None = None) -> int:
    """``python tools/pfl_bench.py`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="python tools/pfl_bench.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for pfl_bench.json")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--model", default="mobilenet_cifar", choices=MODELS)
    ap.add_argument("--clients", type=int, default=100, help="clients of the round (all sampled)")
    ap.add_argument("--images-per-client", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=1, help="local epochs per round")
    ap.add_argument("--batch-size", type=int, default=50, help="client batch size (the reference's 50)")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per mode (after one warm-up round)")
    ap.add_argument("--chunk", type=int, default=None, help="clients per vectorised chunk (default: all)")
    ap.add_argument("--procs", type=int, default=2, help="worker processes of the procs mode (one thread each)")
    ap.add_argument("--num-classes", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--modes", default="loop,vectorised,central,bare", help=f"among {', '.join(MODES)}")
    ap.add_argument("--layouts", default="contiguous", help=f"memory layouts, among {', '.join(LAYOUTS)}")
    ap.add_argument("--peak-batch", type=int, default=64, help="images of the peak-throughput conv2d")
    ap.add_argument("--peak-matmul", type=int, default=1024, help="side of the peak-throughput matmul")
    ap.add_argument("--peak-repeats", type=int, default=5, help="timed calls of each peak kernel (best kept)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="interleaved repeats of every mode and layout (and of the peak); ratios: their median")  # fmt: skip
    ap.add_argument("--no-check", action="store_true", help="skip the loop-vs-vectorised check")
    ap.add_argument("--check-clients", type=int, default=10, help="clients of the float64 check round")
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    layouts = [lay for lay in args.layouts.split(",") if lay]
    if not set(modes) <= set(MODES):
        ap.error(f"modes must be among {', '.join(MODES)}; got {modes}")
    if not layouts or not set(layouts) <= set(LAYOUTS):
        ap.error(f"layouts must be among {', '.join(LAYOUTS)}; got {layouts}")
    for name in ("clients", "images_per_client", "epochs", "batch_size", "rounds", "peak_batch", "peak_matmul",
                 "peak_repeats", "repeats"):  # fmt: skip
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be positive")
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    train = synthetic(args.clients * args.images_per_client, args.num_classes, args.seed, device)
    test = synthetic(1, args.num_classes, args.seed + 2, device)
    flops = flops_per_image(args, device)
    peaks: list[dict[str, Any]] = []
    runs: list[dict[str, dict[str, Any]]] = []
    for repeat in range(
        args.repeats
    ):  # interleaved: every mode and layout once per repeat (a loaded machine)
        peaks.append(measured_peak(args, device))
        print(json.dumps({"repeat": repeat, "flops": flops, "peak": peaks[-1]}), flush=True)
        runs.append({})
        for layout in layouts:
            for mode in modes:
                if mode == "central":
                    rec = time_central(args, train, layout)
                elif mode == "bare":
                    rec = time_bare(args, device, layout)
                else:
                    rec = time_federated(args, mode, train, test, layout)
                if rec.get("status") == "ok":
                    rec["gflops"] = round(rec["images_per_s"] * flops["per_image"] / 1e9, 3)
                runs[-1][result_key(mode, layout)] = rec
                print(json.dumps(rec), flush=True)
    results, peak = merge_repeats(runs), merge_peaks(peaks)
    by_repeat = [ratios_of(r, flops["per_image"], p["peak_gflops"]) for r, p in zip(runs, peaks, strict=True)]
    ratios = {k: round(float(np.median([r[k] for r in by_repeat])), 4) for k in by_repeat[0]
              if all(k in r for r in by_repeat)}  # fmt: skip
    chk = {"status": "skipped"} if args.no_check or "vectorised" not in modes else check(args, train, test)
    doc = {
        "what": "FedBABU round (benchmark.pfl.trainer), per-client loop and vectorised (benchmark.pfl.vectorised), "
        "vs centralised training of the same network with one batch of clients x client batch images, vs its bare "
        "forward+backward+SGD step on pre-made tensors, vs the device's measured conv/matmul GFLOP/s "
        "(tools/pfl_bench.py)",
        "machine": machine(),
        "torch": torch.__version__,
        "versions": package_versions(),
        "git_commit": git_commit(),
        "device": device_info(device),
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "data": f"synthetic uint8 32x32, {args.num_classes} classes, on the device; crop + flip + normalise there",
        "flops": flops,
        "peak": peak,
        "results": results,
        "ratios": ratios,
        "ratios_by_repeat": by_repeat,
        "target": {"vectorised_to_central": TARGET},
        "check": chk,
    }
    out = Path(args.out) / "pfl_bench.json"
    atomic_write_json(out, doc)
    print(json.dumps({"ratios": ratios, "check": chk}))
    print(f"wrote {out}")
    return 0 if chk.get("status") != "ok" or chk["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
