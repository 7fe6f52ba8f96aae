"""Feature-extraction throughput (images/s) at 224 px: bare backbone forward vs end-to-end extraction.

End-to-end = batched resize + normalise of uint8 CIFAR images, forward, pool, write into the feature cache
(CIFAR decoding is the unpickle, done once at load). Target (issue 2): end-to-end >= 85% of the bare
forward throughput at the same batch size and precision. End-to-end also runs at ``batch_size="auto"`` (8 on a
CPU) beside 64, for the ratio that chose the CPU's auto batch (``AUTO_BATCH_SIZE``). Run:

    python -m pytest tests/bench/test_bench_extract.py --benchmark-only --benchmark-json=results/bench/extract.json

Set ``FLB_BENCH_IMAGES`` to change the number of images per round (default 128; on a GPU use more).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from benchmark.data.registry import DatasetSplit
from benchmark.features import extract as ex
from benchmark.features.cache import FeatureCache
from benchmark.features.preprocess import get_preprocess
from benchmark.models.backbones import create_backbone

pytestmark = pytest.mark.bench
N = int(os.environ.get("FLB_BENCH_IMAGES", "128"))
BATCH = 64


def _images(n: int) -> DatasetSplit:
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    return DatasetSplit("bench", "test", np.zeros(n, dtype=np.int64), ("x",), "bench", images=imgs)


def _timed(
    benchmark, run, kind: str, backbone: str, precision: str, device: torch.device, images: int,
    batch: int = BATCH,
) -> None:
    """Time ``run`` (3 rounds, after its warm-up) and record what was measured: ``images`` per run, per second."""
    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update(
        kind=kind,
        backbone=backbone,
        precision=precision,
        batch=batch,
        device=str(device),
        images_per_s=images / benchmark.stats.stats.median,
    )


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("backbone", ["squeezenet1_1", "mobilenet_v2", "resnet18"])
def test_bare_forward(benchmark, machine_info, backbone, precision) -> None:
    dev = ex.pick_device()
    model, _ = create_backbone(backbone, "random")
    body = ex.prepare_body(model.body, dev)
    # The input already lives on the device: "bare" means the forward alone, without any host-to-device copy
    # (end-to-end ships uint8 32 px images and resizes on the device, so it must not be charged for 224 px floats).
    x = torch.randn(BATCH, 3, 224, 224, device=dev)
    n_batches = max(1, N // BATCH)

    def run() -> None:
        with torch.inference_mode():
            for _ in range(n_batches):
                ex.forward_features(body, x, dev, precision)
        if dev.type == "cuda":
            torch.cuda.synchronize()

    with torch.inference_mode():
        ex.forward_features(body, x, dev, precision)  # warm-up
    _timed(benchmark, run, "bare_forward", backbone, precision, dev, n_batches * BATCH)


@pytest.mark.parametrize("batch", [BATCH, "auto"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("backbone", ["squeezenet1_1", "mobilenet_v2", "resnet18"])
def test_end_to_end_extraction(benchmark, machine_info, tmp_path, backbone, precision, batch) -> None:
    data = _images(max(BATCH, N // BATCH * BATCH))
    pre = get_preprocess("legate2023_cifar")
    counter = iter(range(10**6))

    def run() -> None:
        ex.extract_features(
            data,
            backbone,
            "random",
            pre,
            precision=precision,
            batch_size=batch,
            cache=FeatureCache(tmp_path / str(next(counter))),
            progress=False,
        )

    run()  # warm-up
    dev = ex.pick_device()
    _timed(benchmark, run, "end_to_end", backbone, precision, dev, len(data), ex.resolve_batch_size(batch, dev))
