"""tools/mezo_bench.py on a tiny random BERT (CPU): the JSON record has its fields and the machine, the ratios
are positive, the overhead accounting matches what ``mezo_step`` does, the memory subprocess runs on the
parent's exact weights and sees MeZO's parameter copy. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tool_scripts import load_tool

from benchmark.errors import ConfigError
from benchmark.zo import mezo
from benchmark.zo.mezo import ZOConfig, mezo_step, parameters_sha256

pytest.importorskip("transformers")

mezo_bench = load_tool("mezo_bench")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = ["--encoder", "tiny-bert", "--weights", "random", "--data", "synthetic", "--threads", "1"]


def run_bench(out: Path, flags: str) -> dict:
    """``tools/mezo_bench.py`` at toy size (:data:`TINY`) with ``flags`` (words separated by spaces), writing into
    ``out``; it must succeed: its record ``mezo_bench.json``."""
    assert mezo_bench.main(["--out", str(out), *TINY, *flags.split()]) == 0
    return json.loads((out / "mezo_bench.json").read_text())


def test_mezo_bench_runs_on_cpu_and_records_everything(tmp_path) -> None:
    doc = run_bench(
        tmp_path,
        "--batch-sizes 4,8 --repeats 1 --memory-batch-sizes 8 --memory-modes mezo_copy --memory-steps 1 "
        "--k-shots 5 --clients 3 --fed-rounds 2 --test-limit 6 --total-rounds 100 --chunk 3",
    )
    assert (
        doc["machine"]
        and doc["torch"] == torch.__version__
        and doc["git_commit"]
        and "torch=" in doc["versions"]
    )
    assert doc["device"]["device"] == "cpu" and doc["device"]["torch_threads"] == 1
    assert doc["model"]["encoder"] == "tiny-bert" and doc["model"]["trainable_params"] > 0
    assert doc["target"] == {"forward2_over_step": 0.8} and doc["zo"]["step_work"] == mezo_bench.STEP_WORK
    assert [t["sentences"] for t in doc["throughput"]] == [4, 8] and doc["config"]["chunk"] == 3
    for t in doc["throughput"]:
        assert set(t["median_s"]) == {
            "forward2",
            "step_copy",
            "step_inplace",
            "z_regen",
            "direction",
            "snapshot",
            "copy_back",
        }
        assert all(len(v) == 1 and v[0] > 0 for v in t["times_s"].values())
        for restore in ("copy", "inplace"):
            r = t[restore]
            want = t["median_s"]["forward2"] / r["step_s"]  # both rounded to 10 µs: ms-sized times here
            assert r["ratio"] > 0 and r["ratio"] == pytest.approx(want, rel=0.05)
            parts = r["overhead_parts_s"]
            assert set(parts) == {"z_regen", "add", "snapshot_and_copies", "rest"}
            assert sum(parts.values()) == pytest.approx(r["overhead_s"], abs=5e-5)
        assert t["inplace"]["overhead_parts_s"]["snapshot_and_copies"] == 0
    (mem,) = doc["memory"]
    assert (
        mem["sentences"] == 8 and mem["measure"] == "rss_increase_mib" and set(mem["modes"]) == {"mezo_copy"}
    )
    probe = mem["modes"]["mezo_copy"]
    assert probe["status"] == "ok", probe.get("stderr_tail")
    assert probe["steps"] == 1 and probe["rss_peak_mib"] >= probe["rss_baseline_mib"] > 0
    assert probe["rss_increase_mib"] >= 0 and probe["cuda_increase_gib"] is None
    (fed,) = doc["fedmezo"]
    assert (fed["k_shot"], fed["clients"], fed["num_z"], fed["total_rounds"], fed["chunk"]) == (
        5,
        3,
        2,
        100,
        3,
    )
    assert fed["tokens"] <= fed["padded_tokens"]
    assert len(fed["round_s"]) == 2 and all(t > 0 for t in fed["round_s"]) and fed["eval_s"] > 0
    assert fed["projected_hours"] == pytest.approx(fed["mean_round_s"] * 100 / 3600, abs=1e-3)
    md = (tmp_path / "mezo_bench.md").read_text()
    assert "| 8 |" in md and "mezo_copy" in md and "projected h for 2,621 rounds" in md


def test_step_work_is_what_mezo_step_does(monkeypatch) -> None:
    """STEP_WORK (direction passes, snapshots, copies of one num_z=1 step) is counted on the real code, so the
    overhead breakdown follows benchmark.zo.mezo if it changes."""
    calls = {"directions": 0, "snapshots": 0, "copies": 0}

    def counting(name, fn):
        def wrapped(*a, **k):
            calls[name] += 1
            return fn(*a, **k)

        return wrapped

    monkeypatch.setattr(mezo, "add_direction_", counting("directions", mezo.add_direction_))
    monkeypatch.setattr(mezo, "_snapshot", counting("snapshots", mezo._snapshot))
    monkeypatch.setattr(mezo, "_copy_back", counting("copies", mezo._copy_back))
    built = mezo_bench.build_model(mezo_bench.ModelSpec("tiny-bert", "random"), torch.device("cpu"))
    batch = mezo_bench.synthetic_data(4, built.arch.vocab_size, 0)
    for restore, work in mezo_bench.STEP_WORK.items():
        calls.update(dict.fromkeys(calls, 0))
        mezo_step(built.model, [batch], 3, ZOConfig(lr=1e-6, num_z=1, restore=restore))
        assert calls == work, restore


def test_probe_model_is_the_parents_bit_for_bit(tmp_path) -> None:
    spec = mezo_bench.ModelSpec("tiny-bert", "random", seed=3)
    built = mezo_bench.build_model(spec, torch.device("cpu"))
    mezo_step(
        built.model, [mezo_bench.synthetic_data(4, 1000, 1)], 5, ZOConfig(lr=1e-2, num_z=1)
    )  # moved weights
    mezo_bench.save_tensors(built.model, tmp_path / "m.pt")
    loaded = mezo_bench.load_model(spec, tmp_path / "m.pt", torch.device("cpu"))
    assert parameters_sha256(loaded) == parameters_sha256(built.model)
    assert all(torch.equal(a, b) for a, b in zip(loaded.buffers(), built.model.buffers(), strict=True))
    data = mezo_bench.synthetic_data(5, 1000, 2)
    with torch.no_grad():
        assert torch.equal(
            loaded(data.input_ids, data.attention_mask), built.model(data.input_ids, data.attention_mask)
        )
    other = mezo_bench.ModelSpec("tiny-bert", "random", classes=3)
    with pytest.raises(RuntimeError):  # a head of another shape cannot take these tensors
        mezo_bench.load_model(other, tmp_path / "m.pt", torch.device("cpu"))


def test_retoken_keeps_lengths_and_stays_in_the_vocabulary() -> None:
    data = mezo_bench.synthetic_data(20, 30522, 0)
    out = mezo_bench.retoken(data, 50265, 1, seed=7)
    assert torch.equal(out.attention_mask, data.attention_mask) and torch.equal(out.labels, data.labels)
    real = out.attention_mask.bool()
    assert int(out.input_ids[real].min()) >= 4 and int(out.input_ids[real].max()) < 50265
    assert bool((out.input_ids[~real] == 1).all())
    assert torch.equal(mezo_bench.retoken(data, 50265, 1, seed=7).input_ids, out.input_ids)


def test_bad_options_are_one_clear_error() -> None:
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="cuda"):
            mezo_bench.resolve_device("cuda")
    with pytest.raises(ConfigError, match="weights"):
        mezo_bench.ModelSpec("tiny-bert", "pretrained")
    with pytest.raises(ConfigError, match="memory mode"):
        mezo_bench.Probe(mezo_bench.ModelSpec("tiny-bert", "random"), "m", "b", "backprop_sgdd", "cpu")
    with pytest.raises(SystemExit):
        mezo_bench.parse_args(["--out", "x", "--parts", "speed"])


@pytest.mark.slow
def test_memory_probes_see_the_parameter_copy(tmp_path) -> None:
    """A tiny BERT with a large vocabulary (8.0M parameters, 30 MiB; 7.7M in the word embeddings): on top of
    inference, restore="inplace" holds one z of the largest parameter, restore="copy" also the snapshot of
    every parameter (measured here: +28 and +59 MiB over inference's +17)."""
    spec = mezo_bench.ModelSpec("tiny-bert", "random", tiny_vocab=60_000, tiny_hidden=128)
    built = mezo_bench.build_model(spec, torch.device("cpu"))
    batch = mezo_bench.synthetic_data(8, 60_000, 0)
    rec = mezo_bench.measure_memory(
        spec,
        built.model,
        batch,
        ["inference", "mezo_copy", "mezo_inplace"],
        torch.device("cpu"),
        steps=1,
        threads=1,
    )
    modes = rec["modes"]
    assert all(m["status"] == "ok" and m["peak_reset"] for m in modes.values()), modes
    params_mib = built.identity["trainable_mib"]
    largest_mib = built.identity["largest_param"] * 4 / 2**20
    inc = {k: m["rss_increase_mib"] for k, m in modes.items()}
    assert inc["mezo_copy"] - inc["mezo_inplace"] > 0.8 * params_mib, inc  # the snapshot
    assert 0.8 * largest_mib < inc["mezo_inplace"] - inc["inference"] < 1.5 * largest_mib, (
        inc
    )  # one z at a time
    assert modes["mezo_copy"]["increase_vs_inference"] > 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_mezo_bench_cuda_path(tmp_path) -> None:
    doc = run_bench(
        tmp_path,
        "--device cuda --batch-sizes 8 --repeats 1 --memory-batch-sizes 8 --memory-modes inference,mezo_copy "
        "--k-shots 5 --clients 3 --fed-rounds 1 --test-limit 6",
    )
    assert doc["device"]["gpu"] and doc["memory"][0]["measure"] == "cuda_increase_gib"
    assert all(m["cuda_increase_gib"] > 0 for m in doc["memory"][0]["modes"].values())
