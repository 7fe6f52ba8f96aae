"""FT throughput of one federated round on a GPU: plain per-client loop vs clients vectorised with torch.func.

Standalone on purpose: it needs only torch, torchvision and numpy (a lent GPU machine has neither snakemake
nor the suite's other dependencies), and from this package only :mod:`benchmark.provenance` (standard
library), found in the checkout when the package is not installed. Run from the repository root::

    python tools/gpu_bench.py --out DIR            # writes DIR/gpu_bench.json (and prints a table)

What is measured (legate2023 §4 FT setting, synthetic data): one FedAvg round of full fine-tuning of
SqueezeNet 1.1 (torchvision architecture, the suite's head: global average pool -> Linear(512, C), no
dropout) for ``m`` clients per round (30 = 30 % of 100), each running ``steps`` local SGD steps of batch
``B`` (64) on 224 x 224 inputs, then the example-weighted average (all clients equal here).

* ``loop`` - what :class:`benchmark.fl.engine.ModelTrainer` does: clients one after the other on one
  working copy of the model (load global weights, SGD steps, accumulate the delta).
* ``vectorised`` - ``chunk`` clients at a time as one batched computation: their weights are stacked
  ``(chunk, ...)`` and ``torch.func.vmap(grad(loss))`` runs every client's own step at once (convolutions
  with per-client weights become grouped convolutions). The arithmetic is the same per-client SGD.

Reported per mode: images/s over the timed rounds (after one warm-up round), seconds per round, peak GPU
memory (``torch.cuda.max_memory_allocated``), or ``oom``. ``check`` compares the global weights after one
round of both modes from the same start (fp32, TF32 off): the max absolute and relative difference, i.e.
whether the vectorised path computes the same round. Weights: random init (seeded) by default; ``--weights
FILE`` loads the substitute SqueezeNet features (safetensors, keys ``features.*``; needs ``safetensors``).
Throughput does not depend on the weight values. ``--device cpu`` with small sizes is the CI smoke test.
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

import torch
import torchvision
from torch import nn
from torch.nn import functional as F

try:
    from benchmark.timing import bench_machine, cuda_properties
except ModuleNotFoundError:  # a checkout without the package installed (a lent GPU machine): use it in place
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmark.timing import bench_machine, cuda_properties


class PooledHead(nn.Module):
    """SqueezeNet 1.1 ``features`` -> global average pool -> Linear(512, C) (legate2023 code's model)."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.features = torchvision.models.squeezenet1_1(weights=None).features
        self.head = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


def build_model(num_classes: int, seed: int, weights: str | None) -> nn.Module:
    """The model with seeded random init, optionally the substitute features loaded."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = PooledHead(num_classes)
    if weights:
        from safetensors.torch import load_file

        state = {k: v for k, v in load_file(weights).items() if k.startswith("features.")}
        missing = set(k for k in model.state_dict() if k.startswith("features.")) - set(state)
        if missing:
            raise SystemExit(f"gpu_bench: {weights} lacks {len(missing)} features.* tensors")
        model.load_state_dict(state, strict=False)
    return model


def make_pool(
    m: int, batch: int, size: int, classes: int, device: torch.device, seed: int
) -> tuple[torch.Tensor, ...]:
    """One synthetic batch per client ``(m, B, 3, S, S)`` and labels ``(m, B)``, reused every step."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(m, batch, 3, size, size, generator=g).to(device)
    y = torch.randint(0, classes, (m, batch), generator=g).to(device)
    return x, y


def _autocast(device: torch.device, amp: bool):
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp)


def round_loop(
    model: nn.Module, work: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float, amp: bool
) -> None:
    """One FedAvg round, clients one after the other (the engine's model path); updates ``model``."""
    dev = x.device
    gparams = dict(model.named_parameters())
    acc = {n: torch.zeros_like(p) for n, p in gparams.items()}
    for k in range(x.shape[0]):
        work.load_state_dict(model.state_dict())
        params = list(work.parameters())
        for _ in range(steps):
            with _autocast(dev, amp):
                logits = work(x[k])
            loss = F.cross_entropy(logits.float(), y[k])
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads, strict=True):
                    p.sub_(g, alpha=lr)
        with torch.no_grad():
            for (n, p), q in zip(gparams.items(), work.parameters(), strict=True):
                acc[n].add_(p - q)
    with torch.no_grad():
        for n, p in gparams.items():
            p.sub_(acc[n] / x.shape[0])


def round_vectorised(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float, amp: bool, chunk: int
) -> None:
    """One FedAvg round, ``chunk`` clients at a time through ``vmap(grad(loss))``; updates ``model``."""
    from torch.func import functional_call, grad, vmap

    dev = x.device
    gparams = {n: p.detach() for n, p in model.named_parameters()}

    def loss_fn(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        with _autocast(dev, amp):
            logits = functional_call(model, params, (xb,))
        return F.cross_entropy(logits.float(), yb)

    step = vmap(grad(loss_fn))
    acc = {n: torch.zeros_like(p) for n, p in gparams.items()}
    m = x.shape[0]
    for s in range(0, m, chunk):
        c = min(chunk, m - s)
        stacked = {n: p.unsqueeze(0).repeat(c, *([1] * p.dim())) for n, p in gparams.items()}
        for _ in range(steps):
            grads = step(stacked, x[s : s + c], y[s : s + c])
            for n in stacked:
                stacked[n].sub_(grads[n], alpha=lr)
        for n, p in gparams.items():
            acc[n].add_((p.unsqueeze(0) - stacked[n]).sum(0))
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.sub_(acc[n] / m)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_mode(
    mode: str,
    chunk: int,
    amp: bool,
    args: argparse.Namespace,
    device: torch.device,
    x: torch.Tensor,
    y: torch.Tensor,
) -> dict[str, Any]:
    """Warm-up round + ``args.rounds`` timed rounds of one mode; OOM is reported, not raised."""
    model = build_model(args.num_classes, args.seed, args.weights).to(device)
    work = build_model(args.num_classes, args.seed, args.weights).to(device) if mode == "loop" else None
    rec: dict[str, Any] = {"mode": mode, "chunk": chunk if mode == "vectorised" else 1, "amp": amp}
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    try:
        for r in range(args.rounds + 1):
            _sync(device)
            t0 = time.perf_counter()
            if mode == "loop":
                round_loop(model, work, x, y, args.steps, args.lr, amp)  # type: ignore[arg-type]
            else:
                round_vectorised(model, x, y, args.steps, args.lr, amp, chunk)
            _sync(device)
            if r > 0:
                times.append(time.perf_counter() - t0)
    except torch.OutOfMemoryError:
        rec.update(status="oom")
        return rec
    finally:
        del model, work
    images = x.shape[0] * args.steps * x.shape[1]
    rec.update(
        status="ok",
        round_s=[round(t, 4) for t in times],
        images_per_round=images,
        images_per_s=round(images * len(times) / sum(times), 1),
    )
    if device.type == "cuda":
        rec["peak_mem_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
    return rec


def check_equivalence(
    args: argparse.Namespace, device: torch.device, x: torch.Tensor, y: torch.Tensor
) -> dict[str, Any]:
    """Global weights after one round of each mode from the same start, fp32 and TF32 off."""
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        a = build_model(args.num_classes, args.seed, args.weights).to(device)
        b = build_model(args.num_classes, args.seed, args.weights).to(device)
        start = [p.detach().clone() for p in a.parameters()]
        work = build_model(args.num_classes, args.seed, args.weights).to(device)
        round_loop(a, work, x, y, args.steps, args.lr, False)
        chunk = max(c for c in args.chunk_list if c <= x.shape[0])
        try:
            round_vectorised(b, x, y, args.steps, args.lr, False, chunk)
        except torch.OutOfMemoryError:
            return {"status": "oom", "chunk": chunk}
        with torch.no_grad():
            diff = max(
                float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True)
            )
            moved = max(float((p - s).abs().max()) for p, s in zip(a.parameters(), start, strict=True))
        return {
            "status": "ok",
            "chunk": chunk,
            "max_abs_diff": diff,
            "max_update": moved,
            "relative": diff / moved,
        }
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def machine(device: torch.device) -> dict[str, Any]:
    """Where the numbers were measured."""
    return {**bench_machine(device), **cuda_properties(device)}


def main(argv: Sequence[str] | None = None) -> int:
    """``python tools/gpu_bench.py`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="python tools/gpu_bench.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for gpu_bench.json")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--clients-per-round", type=int, default=30)
    ap.add_argument("--steps", type=int, default=2, help="local SGD steps per client per round")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds (after one warm-up round)")
    ap.add_argument("--chunks", default="1,5,10,30", help="clients per vectorised step (comma-separated)")
    ap.add_argument("--amp", default="off,bf16", help="precisions to time: off, bf16 (comma-separated)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weights", default=None, help="substitute SqueezeNet features safetensors (optional)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.chunk_list = sorted({int(c) for c in args.chunks.split(",") if c})
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    x, y = make_pool(args.clients_per_round, args.batch, args.image_size, args.num_classes, device, args.seed)
    results = []
    for amp_name in [a for a in args.amp.split(",") if a]:
        amp = amp_name == "bf16"
        results.append(time_mode("loop", 1, amp, args, device, x, y))
        for c in args.chunk_list:
            if c <= args.clients_per_round:
                results.append(time_mode("vectorised", c, amp, args, device, x, y))
        for r in results[-(1 + sum(c <= args.clients_per_round for c in args.chunk_list)) :]:
            print(json.dumps(r), flush=True)
    for r in results:
        loop = next(q for q in results if q["mode"] == "loop" and q["amp"] == r["amp"])
        if r["status"] == "ok" and loop["status"] == "ok":
            r["speedup_vs_loop"] = round(r["images_per_s"] / loop["images_per_s"], 3)
    check = check_equivalence(args, device, x, y)
    print(json.dumps({"check": check}), flush=True)
    doc = {
        "what": "FT throughput of one FedAvg round, per-client loop vs vmap-vectorised clients (synthetic data)",
        "machine": machine(device),
        "config": {k: v for k, v in vars(args).items() if k not in ("out",)},
        "model": "squeezenet1_1 features + GAP + Linear(512, C)",
        "weights": args.weights or "random init (seeded)",
        "results": results,
        "check": check,
        "flops_note": "images/s counts forward+backward training images; evaluation not included",
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".gpu_bench.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out / "gpu_bench.json")
    best = max((r for r in results if r["status"] == "ok"), key=lambda r: r["images_per_s"], default=None)
    if best is not None:
        print(f"best: {best['mode']} chunk {best['chunk']} amp {best['amp']}: {best['images_per_s']} img/s")
    print(f"wrote {out / 'gpu_bench.json'}")
    return 0 if check.get("status") != "ok" or math.isfinite(check["relative"]) else 1


if __name__ == "__main__":
    sys.exit(main())
