"""tools/fl_train_bench.py runs on a CPU at toy size, writes its JSON record (machine, commit, every mode with
its ratio to centralised training and the seed projection), its loop-vs-vectorised check agrees exactly in
float64, and it imports nothing beyond torch / torchvision / numpy / tqdm and the package."""

from __future__ import annotations

import json

import torch
from tool_scripts import heavy_imports, load_tool

fl_train_bench = load_tool("fl_train_bench")


def test_fl_train_bench_runs_on_cpu_and_records_everything(tmp_path) -> None:
    before = torch.get_num_threads()
    try:
        rc = fl_train_bench.main([
            "--out", str(tmp_path), "--device", "cpu", "--clients", "3", "--per-client", "10", "--batch", "4",
            "--image-size", "32", "--stored-size", "8", "--test-size", "8", "--rounds", "1", "--central-steps", "1",
            "--chunks", "2,3,9", "--threads", "1", "--total-rounds", "8", "--eval-every", "4",
            "--modes", "loop,kept,vectorised",
        ])  # fmt: skip
    finally:
        torch.set_num_threads(before)
    assert rc == 0
    doc = json.loads((tmp_path / "fl_train_bench.json").read_text())
    res = doc["results"]
    # bf16 is CUDA-only (FLConfig.amp): a CPU run times fp32; chunks larger than the round are skipped
    assert [(r["mode"], r["chunk"], r["precision"]) for r in res] == [
        ("central", None, "fp32"), ("loop", None, "fp32"), ("kept", None, "fp32"), ("vectorised", 2, "fp32"),
        ("vectorised", 3, "fp32"),
    ]  # fmt: skip
    assert res[2]["kept_check"] is True  # kept batches are the per-batch preprocessing, bit for bit
    assert all(r["status"] == "ok" and r["images_per_s"] > 0 and r["ratio_to_central"] > 0 for r in res)
    assert all(r["tf32"] is False for r in res)  # fp32 is TF32 off (the suite's numerics), recorded per row
    assert res[0]["batch"] == 12 and all(r["images_per_round"] == 30 for r in res[1:])
    for r in res[1:]:  # 8 rounds + (8 / 4 + 1) evaluations of 10,000 images (scaled from the 8 timed)
        want = (8 * sum(r["round_s"]) / len(r["round_s"]) + 3 * r["eval_s"] * 10_000 / 8) / 60
        assert abs(r["seed_projection_min"] - want) <= 0.01
    check = doc["check"]
    assert check["status"] == "ok" and check["dtype"] == "float64" and check["chunk"] == 3
    assert check["max_update"] > 0 and check["relative"] < 1e-9
    m = doc["machine"]
    assert (
        m["device"] == "cpu"
        and m["torch"] == torch.__version__
        and m["git_commit"]
        and "unknown" not in m["cpu"]
    )
    assert doc["targets"] == {"ratio_to_central": 0.70, "peak_mem_gib": 40, "seed_projection_min": 15}


def test_fl_train_bench_imports_only_what_a_gpu_machine_has() -> None:
    assert heavy_imports("fl_train_bench") == []
