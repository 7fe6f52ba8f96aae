"""Full-model federated training throughput against centralised training of the same model, in one run.

Issue 11's performance targets (one H100, SqueezeNet 1.1 at 224 px, 30 clients x 500 images per round): a
federated round reaches >= 70 % of the images/s of *centralised* training of the same model at the same
precision with one batch of the same total size; peak GPU memory <= 40 GB; one CIFAR-10 FT seed (800 rounds,
legate2023 §4 / Table 4) <= 15 min. Run from the repository root (imports the package, needs only torch,
torchvision, numpy and tqdm; the checkout is put on ``sys.path`` when the package is not installed)::

    python tools/fl_train_bench.py --out DIR                    # GPU defaults: writes DIR/fl_train_bench.json
    python tools/fl_train_bench.py --out DIR --device cpu --clients 2 --per-client 64 --image-size 32 \\
        --test-size 256 --chunks 1,2                            # CPU smoke size (well under a minute)

What one run measures, on synthetic uint8 images at ``--stored-size`` (32: CIFAR) held on the device in an
:class:`~benchmark.fl.image_data.ImageSet`, preprocessed there (frozen flip, bilinear resize to
``--image-size``, CIFAR-10 normalisation: the legate2023 CIFAR preset), model SqueezeNet 1.1 from
:mod:`benchmark.models.backbones` (random weights: throughput does not depend on their values):

* ``central``: centralised SGD on batches of ``clients * batch`` images (the images one round step of all
  clients processes), drawn from the same ImageSet, ``torch.optim.SGD`` (foreach), same precision;
* ``loop`` / ``vectorised`` (each chunk of ``--chunks``): one FedAvg round through the engine's trainers
  (:class:`benchmark.fl.engine.ModelTrainer`, :class:`benchmark.fl.vectorised.VectorisedTrainer`), every
  client sampled (``clients`` of ``per-client`` images, batch ``batch``, one local epoch: with 500 images and
  batch 64 that is 7 full batches and one of 52);
* ``eval``: :meth:`ModelTrainer.evaluate` on ``--test-size`` test images (the reference batch 128).
* ``kept`` (with ``--modes ...,kept``): the ``loop`` round on images preprocessed once and kept on the device
  (:meth:`ImageSet.keep_preprocessed`, issue 28), and ``kept_check``: whether its batches equal the per-batch
  preprocessing bit for bit on this device (``torch.equal`` over every client's first batch and the test set).

Per precision (``fp32``: float32 with TF32 off, the suite's numerics for paper tables, ``flb harvest``'s default
``tf32=false``; ``tf32``: float32 weights with TF32 convolutions and matmuls, PyTorch's default for
convolutions; ``bf16``: bfloat16 autocast, ``FLConfig.amp``, TF32 off; each row records its ``tf32`` flag; before
2026-11-26 ``fp32`` meant what ``tf32`` means now, and the machine's ``tf32`` field says so) and memory layout, each mode reports images/s over ``--rounds`` timed rounds
after one warm-up round (the device synchronised around each), its ratio to ``central`` at the same
precision and layout, the peak GPU memory (``torch.cuda.max_memory_allocated``) or ``oom``, and the projected
wall time of one CIFAR-10 FT seed: ``--total-rounds`` rounds plus an evaluation of ``--eval-images`` test
images every ``--eval-every`` rounds and after the last (the evaluation time is scaled from ``--test-size``).
``check`` compares one round of ``loop`` and of the largest chunk from the same start in float32 with TF32
off (max |difference| relative to the largest update). The JSON records the machine, GPU, torch and the git
commit (:mod:`benchmark.provenance`).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

try:
    import benchmark  # noqa: F401
except ModuleNotFoundError:  # a checkout without the package installed (a lent GPU machine): use it in place
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.features.preprocess import CIFAR10_MEAN, CIFAR10_STD, Preprocess
from benchmark.federated.images import to_device_index
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import ModelTrainer
from benchmark.fl.image_data import ImageSet
from benchmark.fl.vectorised import VectorisedTrainer
from benchmark.io import atomic_write_json
from benchmark.models.backbones import create_backbone
from benchmark.provenance import git_commit, package_versions
from benchmark.timing import bench_machine, cuda_properties, peak_gib, reset_peak_memory, timed

PRECISIONS = ("fp32", "tf32", "bf16")
LAYOUTS = ("contiguous", "channels_last")


@contextmanager
def numerics(precision: str) -> Iterator[bool]:
    """TF32 for convolutions and matmuls on only under ``tf32`` (module docstring); restored after. Yields the
    flag the timed code ran with."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    on = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    try:
        yield on
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# ------------------------------------------------------------------------------------------------ inputs
def preprocess_for(image_size: int, stored: int) -> Preprocess:
    """legate2023's CIFAR preset (frozen flip, bilinear resize, CIFAR-10 constants) at ``image_size``."""
    resize = None if image_size == stored else image_size
    return Preprocess(f"bench_cifar{image_size}", resize, None, CIFAR10_MEAN, CIFAR10_STD, "frozen")


def synthetic_sets(args: argparse.Namespace, device: torch.device, layout: str) -> tuple[ImageSet, ImageSet]:
    """Train (``clients * per_client``) and test (``test_size``) uint8 images on the device."""
    g = torch.Generator().manual_seed(args.seed)
    s, n = args.stored_size, args.clients * args.per_client
    pre = preprocess_for(args.image_size, s)
    cl = layout == "channels_last"

    def make(count: int, split: str) -> ImageSet:
        images = torch.randint(0, 256, (count, 3, s, s), generator=g, dtype=torch.uint8)
        labels = torch.randint(0, args.num_classes, (count,), generator=g)
        return ImageSet(images, labels, pre, split, device=device, channels_last=cl)

    return make(n, "train"), make(args.test_size, "test")


def fl_config(
    args: argparse.Namespace, device: torch.device, precision: str, layout: str, **kw: Any
) -> FLConfig:
    return FLConfig(
        method="ft",
        num_clients=args.clients,
        participation=1.0,
        rounds=args.total_rounds,
        batch_size=args.batch,
        client_lr=args.lr,
        device=str(device),
        amp=precision == "bf16",
        channels_last=layout == "channels_last",
        progress=False,
        **kw,
    )


def model_for(args: argparse.Namespace, device: torch.device, layout: str) -> torch.nn.Module:
    model, _ = create_backbone("squeezenet1_1", "random", num_classes=args.num_classes, seed=args.seed)
    model = model.to(device)
    return model.to(memory_format=torch.channels_last) if layout == "channels_last" else model


# ------------------------------------------------------------------------------------------------ timing
def time_central(
    args: argparse.Namespace, device: torch.device, precision: str, layout: str, train: ImageSet
) -> dict[str, Any]:
    """Centralised SGD on batches of ``clients * batch`` images of the same ImageSet (same preprocessing)."""
    batch = args.clients * args.batch
    rec: dict[str, Any] = {"mode": "central", "chunk": None, "precision": precision, "layout": layout}
    rec["batch"] = batch
    reset_peak_memory(device)
    try:
        model = model_for(args, device, layout).train()
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, foreach=True)
        g = torch.Generator().manual_seed(args.seed + 1)
        steps = args.central_steps + 1
        rows = to_device_index(torch.randint(0, len(train), (steps, batch), generator=g).numpy(), device)
        autocast = (
            torch.autocast(device_type="cuda", dtype=torch.bfloat16)
            if precision == "bf16" and device.type == "cuda"
            else nullcontext()
        )
        it = iter(range(10**9))

        def step() -> None:
            x, y = train.batch_rows(rows[next(it) % steps])
            with autocast:
                logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        step()  # warm-up (cuDNN autotuning)
        times = timed(lambda _r: step(), args.central_steps, device)
    except torch.OutOfMemoryError:
        return {**rec, "status": "oom", "peak_mem_gib": peak_gib(device)}
    return {
        **rec,
        "status": "ok",
        "step_s": [round(t, 5) for t in times],
        "images_per_s": round(batch * len(times) / sum(times), 1),
        "peak_mem_gib": peak_gib(device),
    }


def time_federated(
    args: argparse.Namespace,
    device: torch.device,
    precision: str,
    layout: str,
    mode: str,
    chunk: int,
    data: tuple[ImageSet, ImageSet],
) -> dict[str, Any]:
    """One warm-up + ``args.rounds`` timed FedAvg rounds through the engine's trainer, then the evaluation."""
    train, test = data
    rec: dict[str, Any] = {"mode": mode, "chunk": chunk if mode == "vectorised" else None}
    rec.update(precision=precision, layout=layout)
    if mode == "kept":  # fresh copies of the same images (same seed), kept preprocessed; the shared sets stay as they are
        fresh = synthetic_sets(args, device, layout)
        for d in fresh:
            d.keep_preprocessed()
        rows = torch.arange(0, len(train), args.per_client, device=device)
        rec["kept_check"] = bool(
            torch.equal(fresh[0].batch_rows(rows)[0], train.batch_rows(rows)[0])
            and torch.equal(fresh[1].batch(np.arange(len(test)))[0], test.batch(np.arange(len(test)))[0])
        )
        train, test = fresh
    clients = [
        train.subset(np.arange(k * args.per_client, (k + 1) * args.per_client)) for k in range(args.clients)
    ]
    cfg = fl_config(args, device, precision, layout, client_exec="loop" if mode == "kept" else mode, vector_chunk=chunk)
    reset_peak_memory(device)
    try:
        cls = VectorisedTrainer if mode == "vectorised" else ModelTrainer
        trainer = cls(model_for(args, device, layout), clients, test, cfg, train_part="all")
        ids = np.arange(args.clients)
        examples: list[int] = []
        counter = iter(range(10**9))

        def one_round() -> None:
            examples.append(trainer.train_round(next(counter), ids, args.lr).num_examples)

        times = timed(lambda _r: one_round(), args.rounds, device)
        peak = peak_gib(device)
        eval_times = timed(lambda _r: trainer.evaluate(), 1, device)
    except torch.OutOfMemoryError:
        return {**rec, "status": "oom", "peak_mem_gib": peak_gib(device)}
    round_s = sum(times) / len(times)
    eval_s = eval_times[0] * args.eval_images / args.test_size
    evals = math.ceil(args.total_rounds / args.eval_every) + 1  # every eval_every rounds, the last, round 0
    return {
        **rec,
        "status": "ok",
        "round_s": [round(t, 4) for t in times],
        "images_per_round": examples[-1],
        "images_per_s": round(examples[-1] / round_s, 1),
        "peak_mem_gib": peak,
        "eval_s": round(eval_times[0], 4),
        "eval_images_per_s": round(args.test_size / eval_times[0], 1),
        "seed_projection_min": round((args.total_rounds * round_s + evals * eval_s) / 60.0, 2),
    }


def check_equivalence(args: argparse.Namespace, device: torch.device, chunk: int) -> dict[str, Any]:
    """One round of the loop and of ``chunk`` vectorised clients from the same start: float32 with TF32 off on
    a GPU, float64 on a CPU (where the two agree exactly on the development machine; float32 CPU kernels
    differ by ~1e-3 of an update between grouped and single convolutions of a random SqueezeNet)."""
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    dtype = torch.float32 if device.type == "cuda" else torch.float64
    try:
        data = synthetic_sets(args, device, "contiguous")
        for d in data:
            d.dtype = dtype
        clients = [
            data[0].subset(np.arange(k * args.per_client, (k + 1) * args.per_client))
            for k in range(args.clients)
        ]
        start = model_for(args, device, "contiguous").to(dtype)
        models = {}
        for mode in ("loop", "vectorised"):
            cfg = fl_config(args, device, "fp32", "contiguous", client_exec=mode, vector_chunk=chunk)
            cls = VectorisedTrainer if mode == "vectorised" else ModelTrainer
            models[mode] = copy.deepcopy(start)
            cls(models[mode], clients, data[1], cfg, train_part="all").train_round(
                0, np.arange(args.clients), args.lr
            )
        with torch.no_grad():
            pairs = list(zip(models["loop"].parameters(), models["vectorised"].parameters(), strict=True))
            diff = max(float((p - q).abs().max()) for p, q in pairs)
            moved = max(
                float((p - s).abs().max()) for (p, _), s in zip(pairs, start.parameters(), strict=True)
            )
    except torch.OutOfMemoryError:
        return {"status": "oom", "chunk": chunk}
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return {
        "status": "ok",
        "chunk": chunk,
        "dtype": str(dtype).removeprefix("torch."),
        "max_abs_diff": diff,
        "max_update": moved,
        "relative": diff / moved,
    }


# ------------------------------------------------------------------------------------------------ report
def machine(device: torch.device) -> dict[str, Any]:
    """Where the numbers were measured (and with what)."""
    info = bench_machine(device, versions=package_versions(), git_commit=git_commit())
    info["tf32"] = {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32}
    info.update(cuda_properties(device))
    return info


def table(results: list[dict[str, Any]]) -> str:
    """The results as a fixed-width text table."""
    head = f"{'mode':<11}{'chunk':>6} {'prec':<5} {'layout':<14}{'img/s':>10}{'vs central':>11}{'peak GiB':>10}{'seed min':>10}"
    lines = [head, "-" * len(head)]
    for r in results:
        ok = r["status"] == "ok"
        ratio = r.get("ratio_to_central")
        peak = r.get("peak_mem_gib")
        lines.append(
            f"{r['mode']:<11}{r['chunk'] if r['chunk'] is not None else '-':>6} {r['precision']:<5} {r['layout']:<14}"
            f"{r['images_per_s'] if ok else r['status']:>10}"
            f"{f'{ratio:.3f}' if ratio is not None else '-':>11}"
            f"{peak if peak is not None else '-':>10}"
            f"{r.get('seed_projection_min', '-'):>10}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python tools/fl_train_bench.py`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="python tools/fl_train_bench.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for fl_train_bench.json")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--clients", type=int, default=30, help="clients per round (all sampled)")
    ap.add_argument("--per-client", type=int, default=500, help="images per client")
    ap.add_argument("--batch", type=int, default=64, help="client batch size")
    ap.add_argument("--stored-size", type=int, default=32, help="side of the stored uint8 images")
    ap.add_argument("--image-size", type=int, default=224, help="side after the on-device resize")
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per mode (after one warm-up round)")
    ap.add_argument("--central-steps", type=int, default=8, help="timed centralised steps (after warm-up)")
    ap.add_argument("--modes", default="loop,vectorised")
    ap.add_argument("--chunks", default="5,10,15,30", help="clients per vectorised chunk (comma-separated)")
    ap.add_argument("--precisions", default="fp32,bf16", help=f"any of {','.join(PRECISIONS)}")
    ap.add_argument("--layouts", default="contiguous", help=f"any of {','.join(LAYOUTS)}")
    ap.add_argument("--test-size", type=int, default=10_000, help="test images evaluated (timed once)")
    ap.add_argument("--eval-images", type=int, default=10_000, help="test images of the projected seed")
    ap.add_argument("--eval-every", type=int, default=4, help="rounds between evaluations (projection)")
    ap.add_argument("--total-rounds", type=int, default=800, help="rounds of the projected seed")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--no-check", action="store_true", help="skip the loop-vs-vectorised check")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    precisions = [p for p in args.precisions.split(",") if p]
    layouts = [x for x in args.layouts.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    chunks = sorted({int(c) for c in args.chunks.split(",") if c})
    for name, got, allowed in (("precision", precisions, PRECISIONS), ("layout", layouts, LAYOUTS)):
        if not set(got) <= set(allowed):
            ap.error(f"{name} must be among {allowed}, got {got}")
    if not set(modes) <= {"loop", "vectorised", "kept"}:
        ap.error(f"modes must be among loop, vectorised, kept, got {modes}")
    if device.type != "cuda" and {"bf16", "tf32"} & set(precisions):
        print("bf16 autocast and TF32 apply on CUDA only (FLConfig.amp): timing fp32 only on this device")
        precisions = [p for p in precisions if p not in ("bf16", "tf32")] or ["fp32"]
    results: list[dict[str, Any]] = []
    for layout in layouts:
        data = synthetic_sets(args, device, layout)
        for precision in precisions:
            with numerics(precision) as tf32:
                central = time_central(args, device, precision, layout, data[0])
                batch = [central]
                if "loop" in modes:
                    batch.append(time_federated(args, device, precision, layout, "loop", 1, data))
                if "kept" in modes:
                    batch.append(time_federated(args, device, precision, layout, "kept", 1, data))
                if "vectorised" in modes:
                    batch += [
                        time_federated(args, device, precision, layout, "vectorised", c, data)
                        for c in chunks
                        if c <= args.clients
                    ]
            for r in batch:
                r["tf32"] = tf32
                if r["status"] == "ok" and central["status"] == "ok":
                    r["ratio_to_central"] = round(r["images_per_s"] / central["images_per_s"], 4)
                print(json.dumps(r), flush=True)
            results += batch
        del data
    fitting = [c for c in chunks if c <= args.clients]
    check = (
        {"status": "skipped"}
        if args.no_check or "vectorised" not in modes or not fitting
        else check_equivalence(args, device, max(fitting))
    )
    doc = {
        "what": "full-model FL round (engine trainers) vs centralised training of the same model, same precision, "
        "one batch of clients * batch images (tools/fl_train_bench.py)",
        "machine": machine(device),
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "model": "squeezenet1_1 (benchmark.models.backbones), random weights, 10-class head",
        "data": f"synthetic uint8 {args.stored_size}x{args.stored_size} on the device, resized to {args.image_size}",
        "targets": {"ratio_to_central": 0.70, "peak_mem_gib": 40, "seed_projection_min": 15},
        "results": results,
        "check": check,
    }
    out = Path(args.out)
    atomic_write_json(out / "fl_train_bench.json", doc)
    print(table(results))
    print(f"check: {json.dumps(check)}")
    print(f"wrote {out / 'fl_train_bench.json'}")
    ok = check.get("status") != "ok" or (math.isfinite(check["relative"]) and check["relative"] < 1e-3)
    ok = ok and all(r.get("kept_check", True) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
