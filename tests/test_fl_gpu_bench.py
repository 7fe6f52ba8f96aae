"""The standalone FT throughput script (benchmark/fl/gpu_bench.py): runs on CPU at toy size, its vectorised
round equals the per-client loop, and it imports nothing but torch / torchvision / numpy."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from benchmark.fl import gpu_bench


def test_gpu_bench_runs_and_vectorised_round_equals_loop(tmp_path) -> None:
    before = torch.get_num_threads()
    try:
        rc = gpu_bench.main([
            "--out", str(tmp_path), "--device", "cpu", "--image-size", "32", "--clients-per-round", "3",
            "--batch", "4", "--steps", "2", "--rounds", "1", "--chunks", "1,2,3", "--amp", "off", "--threads", "1",
        ])  # fmt: skip
    finally:
        torch.set_num_threads(before)
    assert rc == 0
    doc = json.loads((tmp_path / "gpu_bench.json").read_text())
    assert [(r["mode"], r["chunk"]) for r in doc["results"]] == [
        ("loop", 1), ("vectorised", 1), ("vectorised", 2), ("vectorised", 3)
    ]  # fmt: skip
    assert all(r["status"] == "ok" and r["images_per_round"] == 3 * 2 * 4 for r in doc["results"])
    assert all(r["images_per_s"] > 0 and "speedup_vs_loop" in r for r in doc["results"])
    # same round, same arithmetic: float32 summation order only
    check = doc["check"]
    assert check["status"] == "ok" and check["max_update"] > 0 and check["relative"] < 1e-4
    assert doc["machine"]["device"] == "cpu" and doc["machine"]["torch"] == torch.__version__


def test_gpu_bench_needs_only_torch_torchvision_numpy() -> None:
    code = (
        "import sys, benchmark.fl.gpu_bench; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('benchmark', 'pandas', 'snakemake', 'jsonschema', 'yaml', 'safetensors', 'matplotlib')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # benchmark.provenance (the CPU model of the record) uses the standard library only
    assert out.strip() == "['benchmark', 'benchmark.fl', 'benchmark.fl.gpu_bench', 'benchmark.provenance']"
