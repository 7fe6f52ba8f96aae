"""Full-model FL training: one round through the engine's trainers (per-client loop, vectorised clients) vs
centralised SGD on one batch of the same total size, same model, same on-device preprocessing.

The setting of ``tools/fl_train_bench.py`` (which is the tool to use on a GPU: one run, every mode and
precision, ratios, peak memory and the 800-round projection in one JSON); this is its pytest-benchmark form for
the figures kept with the others. On CUDA: SqueezeNet 1.1, 30 clients x 500 uint8 32 px images resized to
224 px on the device, batch 64, fp32. On a CPU (no GPU): 2 clients x 64 images at 32 px, one torch thread.
Run with ``python -m pytest tests/bench/test_bench_fl_train.py --benchmark-only``; images/s in ``extra_info``.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from benchmark.fl.engine import ModelTrainer
from benchmark.fl.vectorised import VectorisedTrainer

_spec = importlib.util.spec_from_file_location(
    "fl_train_bench", Path(__file__).resolve().parents[2] / "tools" / "fl_train_bench.py"
)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")
ARGS = argparse.Namespace(
    clients=30 if CUDA else 2,
    per_client=500 if CUDA else 64,
    batch=64,
    stored_size=32,
    image_size=224 if CUDA else 32,
    num_classes=10,
    test_size=10_000 if CUDA else 256,
    total_rounds=800,
    lr=0.01,
    seed=0,
)
CHUNK = 10 if CUDA else 2


@pytest.fixture(autouse=True)
def _threads(benchmark: Any):
    before = torch.get_num_threads()
    if not CUDA:
        torch.set_num_threads(1)  # the 2-core development box: a second thread mostly waits (tests/bench)
    benchmark.extra_info["torch_threads_used"] = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


@pytest.mark.bench
@pytest.mark.parametrize("mode", ["central", "loop", "vectorised"])
def test_bench_fl_round_vs_centralised(benchmark, machine_info, mode: str) -> None:
    if CUDA:
        torch.backends.cudnn.benchmark = True
    train, test = tool.synthetic_sets(ARGS, DEVICE, "contiguous")
    if mode == "central":
        batch = ARGS.clients * ARGS.batch
        model = tool.model_for(ARGS, DEVICE, "contiguous").train()
        opt = torch.optim.SGD(model.parameters(), lr=ARGS.lr, foreach=True)
        rows = torch.randint(0, len(train), (batch,), generator=torch.Generator().manual_seed(0)).to(DEVICE)

        def run() -> None:
            x, y = train.batch_rows(rows)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            _sync()

        images = batch
    else:
        n = ARGS.per_client
        clients = [train.subset(np.arange(k * n, (k + 1) * n)) for k in range(ARGS.clients)]
        cfg = tool.fl_config(ARGS, DEVICE, "fp32", "contiguous", client_exec=mode, vector_chunk=CHUNK)
        cls = VectorisedTrainer if mode == "vectorised" else ModelTrainer
        trainer = cls(tool.model_for(ARGS, DEVICE, "contiguous"), clients, test, cfg, train_part="all")
        ids = np.arange(ARGS.clients)

        def run() -> None:
            trainer.train_round(0, ids, ARGS.lr)
            _sync()

        images = ARGS.clients * n
    run()  # warm-up
    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update(
        mode=mode,
        chunk=CHUNK if mode == "vectorised" else None,
        device=str(DEVICE),
        images_per_call=images,
        images_per_s=images / benchmark.stats.stats.median,
        config={k: v for k, v in vars(ARGS).items()},
    )
