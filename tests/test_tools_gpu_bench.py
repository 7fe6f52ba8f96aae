"""The standalone FT throughput script (tools/gpu_bench.py): runs on CPU at toy size, its vectorised round
equals the per-client loop, it imports nothing but torch / torchvision / numpy (and benchmark.timing and
benchmark.provenance, which need no more), and it runs from a checkout without the package installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch
from tool_scripts import load_tool, tool_path

SCRIPT = tool_path("gpu_bench")
gpu_bench = load_tool("gpu_bench")


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
        f"import sys; sys.path.insert(0, {str(SCRIPT.parent)!r}); import gpu_bench; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('benchmark', 'pandas', 'snakemake', 'jsonschema', 'yaml', 'safetensors', 'matplotlib')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # benchmark.timing (the machine of the record) uses torch, torchvision, numpy and benchmark.provenance (the
    # CPU model), which uses the standard library only
    assert out.strip() == "['benchmark', 'benchmark.provenance', 'benchmark.timing']"


def test_gpu_bench_runs_from_a_checkout_without_the_package(tmp_path) -> None:
    """A lent GPU machine has the checkout and torch, not the installed package: the script finds
    benchmark.provenance beside itself (the first import of benchmark is made to fail; no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        "import builtins, runpy, sys; real = builtins.__import__\n"
        "def imp(name, *a, **k):\n"
        "    if name.startswith('benchmark') and not getattr(imp, 'ok', False):\n"
        "        imp.ok = True; raise ModuleNotFoundError(name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = imp\n"
        f"sys.argv = ['gpu_bench.py', '--help']; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert "usage: python tools/gpu_bench.py" in run.stdout
