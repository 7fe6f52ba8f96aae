"""tools/pfl_bench.py runs on a CPU at toy size and writes its JSON record: the machine, torch, device and
config, images/s of the loop and vectorised FedBABU rounds and of centralised training with the same total
batch, their ratios, and a float64 loop-vs-vectorised check that passes; it imports nothing beyond torch /
numpy and the package."""

from __future__ import annotations

import json

import pytest
import torch
from tool_scripts import NOT_ON_A_GPU_MACHINE, heavy_imports, load_tool

pfl_bench = load_tool("pfl_bench")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_pfl_bench_runs_on_cpu_and_records_everything(tmp_path) -> None:
    rc = pfl_bench.main([
        "--out", str(tmp_path), "--device", "cpu", "--model", "4convnet", "--clients", "3",
        "--images-per-client", "60", "--rounds", "1", "--chunk", "2", "--num-classes", "10",
    ])  # fmt: skip
    assert rc == 0
    doc = json.loads((tmp_path / "pfl_bench.json").read_text())
    assert doc["machine"] and doc["torch"] == torch.__version__ and doc["device"]["device"] == "cpu"
    assert doc["git_commit"] and "torch=" in doc["versions"]
    cfg = doc["config"]
    got = [cfg[k] for k in ("model", "clients", "images_per_client", "epochs", "chunk", "batch_size")]
    assert got == ["4convnet", 3, 60, 1, 2, 50]
    res = doc["results"]
    assert set(res) == {"loop", "vectorised", "central"}
    assert all(r["status"] == "ok" and r["images_per_s"] > 0 for r in res.values())
    assert res["loop"]["images_per_round"] == res["vectorised"]["images_per_round"] == 180
    assert len(res["loop"]["round_s"]) == len(res["vectorised"]["round_s"]) == 1
    assert res["vectorised"]["fallback"] is None and res["vectorised"]["chunk"] == 2
    assert (res["central"]["batch"], res["central"]["steps"], res["central"]["images"]) == (150, 2, 300)
    for mode in ("loop", "vectorised"):
        want = res[mode]["images_per_s"] / res["central"]["images_per_s"]
        assert doc["ratios"][f"{mode}_to_central"] == pytest.approx(want, abs=1e-4)
    assert doc["target"] == {"vectorised_to_central": 0.60}
    chk = doc["check"]
    assert chk["status"] == "ok" and chk["dtype"] == "float64" and chk["clients"] == 3 and chk["passed"]
    assert chk["max_update"] > 0 and chk["norm_relative"] < 1e-8 and chk["fedbabu_heads_bit_identical"]


def test_pfl_bench_imports_only_what_a_gpu_machine_has() -> None:
    assert heavy_imports("pfl_bench", (*NOT_ON_A_GPU_MACHINE, "torchvision")) == []
