"""tools/pfl_bench.py runs on a CPU at toy size and writes its JSON record: the machine, torch, device and
config, images/s of the loop and vectorised FedBABU rounds, of centralised training with the same total
batch and of the bare forward+backward+SGD step, the network's FLOPs per image and the measured conv/matmul
peak, their ratios (computed from the recorded numbers: never a speed threshold), per memory layout and over
interleaved repeats, and a float64 loop-vs-vectorised check that passes; it imports nothing beyond torch /
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
        "--peak-batch", "2", "--peak-matmul", "64", "--peak-repeats", "1",
    ])  # fmt: skip
    assert rc == 0
    doc = json.loads((tmp_path / "pfl_bench.json").read_text())
    assert doc["machine"] and doc["torch"] == torch.__version__ and doc["device"]["device"] == "cpu"
    assert doc["git_commit"] and "torch=" in doc["versions"]
    cfg = doc["config"]
    got = [cfg[k] for k in ("model", "clients", "images_per_client", "epochs", "chunk", "batch_size")]
    assert got == ["4convnet", 3, 60, 1, 2, 50]
    res = doc["results"]
    assert set(res) == {"loop", "vectorised", "central", "bare"}
    assert all(r["status"] == "ok" and r["images_per_s"] > 0 for r in res.values())
    assert res["loop"]["images_per_round"] == res["vectorised"]["images_per_round"] == 180
    assert len(res["loop"]["round_s"]) == len(res["vectorised"]["round_s"]) == 1
    assert res["vectorised"]["fallback"] is None and res["vectorised"]["chunk"] == 2
    assert (res["central"]["batch"], res["central"]["steps"], res["central"]["images"]) == (150, 2, 300)
    assert (res["bare"]["batch"], res["bare"]["steps"], res["bare"]["images"]) == (50, 4, 200)
    for mode in ("loop", "vectorised"):
        want = res[mode]["images_per_s"] / res["central"]["images_per_s"]
        assert doc["ratios"][f"{mode}_to_central"] == pytest.approx(want, abs=1e-4)
    assert doc["target"] == {"vectorised_to_central": 0.60}
    chk = doc["check"]
    assert chk["status"] == "ok" and chk["dtype"] == "float64" and chk["clients"] == 3 and chk["passed"]
    assert chk["max_update"] > 0 and chk["norm_relative"] < 1e-8 and chk["fedbabu_heads_bit_identical"]


def _convnet4_flops_per_image(classes: int = 10) -> int:
    """Forward + backward FLOPs of one 4convNet image, by hand: 2 per multiply-add; the backward computes
    each layer's weight gradient and, except for the first conv (the input needs no gradient), its input's."""
    convs = [2 * 9 * cin * 64 * hw * hw for cin, hw in ((3, 32), (64, 16), (64, 8), (64, 4))]
    forward = sum(convs) + 2 * 256 * classes
    return 3 * forward - convs[0]


def test_pfl_bench_ratios_per_layout_against_bare_and_peak(tmp_path) -> None:
    rc = pfl_bench.main([
        "--out", str(tmp_path), "--device", "cpu", "--model", "4convnet", "--clients", "2",
        "--images-per-client", "20", "--rounds", "1", "--num-classes", "10", "--batch-size", "10",
        "--modes", "loop,bare", "--layouts", "contiguous,channels_last", "--no-check", "--repeats", "2",
        "--peak-batch", "2", "--peak-matmul", "64", "--peak-repeats", "1",
    ])  # fmt: skip
    assert rc == 0
    doc = json.loads((tmp_path / "pfl_bench.json").read_text())
    assert doc["flops"]["per_image"] == _convnet4_flops_per_image() and doc["flops"]["batch"] == 10
    peak = doc["peak"]
    gflops = [peak[k] for k in ("conv_contiguous_gflops", "conv_channels_last_gflops", "matmul_gflops")]
    assert all(g > 0 for g in gflops) and peak["peak_gflops"] == max(gflops) and len(peak["by_repeat"]) == 2
    res = doc["results"]
    assert set(res) == {"loop", "bare", "loop/channels_last", "bare/channels_last"}
    assert all(rec["layout"] == ("channels_last" if "/" in k else "contiguous") for k, rec in res.items())
    for rec in res.values():
        assert rec["status"] == "ok" and len(rec["repeats_images_per_s"]) == 2
        assert rec["images_per_s"] == pytest.approx(sum(rec["repeats_images_per_s"]) / 2, abs=0.06)
    by_repeat = doc["ratios_by_repeat"]
    assert len(by_repeat) == 2
    for r, run in enumerate(by_repeat):  # each repeat's ratios from that repeat's numbers
        want = {"loop_to_bare", "loop_to_peak", "bare_to_peak", "loop_channels_last_to_bare",
                "loop_channels_last_to_peak", "bare_channels_last_to_peak", "loop_channels_last_to_contiguous",
                "bare_channels_last_to_contiguous"}  # fmt: skip
        assert set(run) == want
        ips = {k: v["repeats_images_per_s"][r] for k, v in res.items()}
        p = peak["by_repeat"][r]
        assert run["loop_to_bare"] == pytest.approx(ips["loop"] / ips["bare"], abs=1e-4)
        assert run["loop_channels_last_to_bare"] == pytest.approx(
            ips["loop/channels_last"] / ips["bare/channels_last"], abs=1e-4
        )
        assert run["loop_to_peak"] == pytest.approx(
            ips["loop"] * doc["flops"]["per_image"] / 1e9 / p, abs=1e-4
        )
        assert run["bare_channels_last_to_contiguous"] == pytest.approx(
            ips["bare/channels_last"] / ips["bare"], abs=1e-4
        )
    for k, v in doc["ratios"].items():  # the median of two repeats: their mean
        assert v == pytest.approx((by_repeat[0][k] + by_repeat[1][k]) / 2, abs=1e-4)


def test_pfl_bench_imports_only_what_a_gpu_machine_has() -> None:
    assert heavy_imports("pfl_bench", (*NOT_ON_A_GPU_MACHINE, "torchvision")) == []


def test_pfl_bench_times_the_client_processes_against_the_loop(tmp_path) -> None:
    rc = pfl_bench.main([
        "--out", str(tmp_path), "--device", "cpu", "--model", "4convnet", "--clients", "4",
        "--images-per-client", "20", "--rounds", "1", "--num-classes", "10", "--batch-size", "10",
        "--modes", "loop,procs", "--procs", "2", "--threads", "1", "--no-check",
        "--peak-batch", "2", "--peak-matmul", "64", "--peak-repeats", "1",
    ])  # fmt: skip
    assert rc == 0
    doc = json.loads((tmp_path / "pfl_bench.json").read_text())
    res = doc["results"]
    assert res["procs"]["status"] == "ok" and res["procs"]["procs"] == 2
    assert doc["ratios"]["procs_to_loop"] == pytest.approx(
        res["procs"]["images_per_s"] / res["loop"]["images_per_s"], abs=1e-3
    )
