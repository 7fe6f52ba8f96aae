"""Benchmarks of the partitioners at CIFAR scale (run with ``pytest -m bench --benchmark-only``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmark.data.partition import make_partition

CASES = [
    ("dirichlet", 10, {"num_clients": 100, "alpha": 0.1}),
    ("dirichlet", 100, {"num_clients": 100, "alpha": 0.1}),
    ("dirichlet_per_class", 100, {"num_clients": 100, "alpha": 0.1}),
    ("iid", 100, {"num_clients": 100}),
]


@pytest.mark.bench
@pytest.mark.parametrize(("scheme", "num_classes", "params"), CASES, ids=lambda v: str(v))
def test_bench_partition_cifar_scale(benchmark: Any, scheme: str, num_classes: int, params: dict) -> None:
    labels = np.repeat(np.arange(num_classes, dtype=np.int64), 50_000 // num_classes)
    part = benchmark(make_partition, scheme, labels, 0, **params)
    assert part.num_clients == 100
