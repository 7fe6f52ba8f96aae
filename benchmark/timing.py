"""Timing helpers of the benchmark scripts (``tools/fl_train_bench.py``, ``tools/pfl_bench.py``): device
synchronisation around a timed call, peak GPU memory. CPU: the synchronisation is a no-op and no memory peak is
recorded. :func:`bench_machine`: where the numbers were measured."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from benchmark.provenance import cpu_description


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device) -> float | None:
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 3) if device.type == "cuda" else None


def timed(fn: Callable[[int], object], repeats: int, device: torch.device) -> list[float]:
    """Seconds of ``fn(1) .. fn(repeats)`` after the warm-up call ``fn(0)`` (the device synchronised around each)."""
    times = []
    for r in range(repeats + 1):
        sync(device)
        t0 = time.perf_counter()
        fn(r)
        sync(device)
        if r > 0:
            times.append(time.perf_counter() - t0)
    return times


def cuda_properties(device: torch.device) -> dict[str, Any]:
    """The GPU a benchmark ran on (name, memory, compute capability, CUDA and cuDNN versions); empty off CUDA."""
    if device.type != "cuda":
        return {}
    p = torch.cuda.get_device_properties(device)
    return {
        "gpu": p.name,
        "gpu_memory_gib": round(p.total_memory / 2**30, 1),
        "capability": f"{p.major}.{p.minor}",
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


def bench_machine(device: torch.device, **extra: Any) -> dict[str, Any]:
    """Where a benchmark's numbers were measured: host, CPU, Python, torch, torchvision and numpy versions, then
    ``extra`` (in its order), the device and torch's CPU threads (a script adds its own fields, then
    :func:`cuda_properties`)."""
    import torchvision  # local: heavy import (torchvision); pfl_bench's record names it, its run does not load it

    return {
        "hostname": platform.node(),
        "machine": platform.machine(),
        "cpu": cpu_description(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": np.__version__,
        **extra,
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
    }
