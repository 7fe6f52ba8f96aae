"""Benchmarks record the machine they ran on with every figure."""

from __future__ import annotations

import os
import platform

import pytest

from benchmark.provenance import cpu_isa, cpu_model


@pytest.fixture
def machine_info(benchmark) -> dict:
    import torch

    info = {
        "machine": platform.machine(),
        "processor": cpu_model(),
        "cpu_isa": cpu_isa(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "hostname": platform.node(),
    }
    benchmark.extra_info.update(info)
    return info
