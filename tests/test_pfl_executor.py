"""The pfl client executor chosen from a measurement (issue 27, benchmark/pfl/executor.py): an algorithm that
cannot run in lock-step gets the loop unmeasured; otherwise one calibration round of each executor decides
(lock-step only above MARGIN x the loop), the result is cached per key and reused, a read-only cache only
costs a new measurement, and a training with ``choose_exec`` runs and records the choice. Never a speed
threshold: the timings are faked where the decision is tested, and only checked to exist where real."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmark.federated.images import NORMALISATION, DeviceImages
from benchmark.pfl import executor, run
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.trainer import PFLConfig, PFLTrainer
from benchmark.runners.pfl import measured_executor

pytestmark = pytest.mark.usefixtures("one_torch_thread")
CPU = torch.device("cpu")


def _cfg(**kw) -> PFLConfig:
    base = {"dataset": "cifar10", "model": "4convnet", "algorithm": "fedbabu", "clients": 4, "participation": 0.5,
            "local_epochs": 1, "rounds": 1, "batch_size": 2, "selection": "last", "vector_chunk": 10}  # fmt: skip
    return PFLConfig(**{**base, **kw})


def _fake(monkeypatch, loop: float, vec: float) -> list[int]:
    calls: list[int] = []

    def fake(cfg, device, num_classes):
        calls.append(1)
        return {"loop_images_per_s": loop, "vectorised_images_per_s": vec}

    monkeypatch.setattr(executor, "measure", fake)
    return calls


def test_an_algorithm_without_lock_step_gets_the_loop_unmeasured(monkeypatch) -> None:
    monkeypatch.setattr(executor, "_round_seconds", lambda *a: pytest.fail("measured"))
    got = executor.choose_executor(_cfg(algorithm="fedrep"), CPU, 10)
    assert (got.executor, got.source, got.loop_images_per_s) == ("loop", "ineligible", None)
    assert "fedrep" in got.reason


@pytest.mark.parametrize(("vec", "want"), [(200.0, "vectorised"), (104.0, "loop"), (50.0, "loop")])
def test_lock_step_only_when_measured_faster_by_the_margin(monkeypatch, tmp_path, vec, want) -> None:
    _fake(monkeypatch, 100.0, vec)
    got = executor.choose_executor(_cfg(), CPU, 10, tmp_path)
    assert (got.executor, got.source, got.loop_images_per_s, got.vectorised_images_per_s) == (
        want, "measured", 100.0, vec)  # fmt: skip


def test_the_choice_is_cached_per_key_and_reused(monkeypatch, tmp_path) -> None:
    calls = _fake(monkeypatch, 100.0, 300.0)
    first = executor.choose_executor(_cfg(), CPU, 10, tmp_path)
    (stored,) = (tmp_path / "pfl_executor").glob("*.json")
    assert json.loads(stored.read_text())["key"] == executor.calibration_key(_cfg(), CPU) == first.key
    again = executor.choose_executor(_cfg(), CPU, 10, tmp_path)
    assert again.source == "cached" and again.executor == first.executor == "vectorised" and len(calls) == 1
    other = executor.choose_executor(_cfg(batch_size=4), CPU, 10, tmp_path)  # another key: measured
    assert other.source == "measured" and len(calls) == 2
    stored.write_text("{not json")  # a damaged cache entry: measured again, rewritten
    assert executor.choose_executor(_cfg(), CPU, 10, tmp_path).source == "measured" and len(calls) == 3
    assert json.loads(stored.read_text())["executor"] == "vectorised"


def test_a_read_only_cache_only_costs_a_new_measurement(monkeypatch, tmp_path) -> None:
    calls = _fake(monkeypatch, 100.0, 10.0)

    def refuse(*a, **k):
        raise PermissionError("read-only")

    monkeypatch.setattr(executor, "atomic_write_json", refuse)
    for _ in range(2):
        assert executor.choose_executor(_cfg(), CPU, 10, tmp_path).source == "measured"
    assert len(calls) == 2


def test_a_read_only_first_cache_folder_falls_back_to_the_next(monkeypatch, tmp_path) -> None:
    calls = _fake(monkeypatch, 100.0, 10.0)
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    write = executor.atomic_write_json

    def refuse_ro(path, doc):
        if ro in path.parents:
            raise PermissionError(f"read-only: {path}")
        write(path, doc)

    monkeypatch.setattr(executor, "atomic_write_json", refuse_ro)
    first = executor.choose_executor(_cfg(), CPU, 10, [ro, rw])
    again = executor.choose_executor(_cfg(), CPU, 10, [ro, rw])
    assert (first.source, again.source, len(calls)) == ("measured", "cached", 1)
    assert not ro.exists() and len(list((rw / "pfl_executor").iterdir())) == 1


def test_a_real_calibration_times_both_executors(tmp_path) -> None:
    got = executor.choose_executor(_cfg(clients=6, participation=0.5, vector_chunk=2), CPU, 10, tmp_path)
    assert got.source == "measured" and got.executor in ("loop", "vectorised")
    assert got.loop_images_per_s > 0 and got.vectorised_images_per_s > 0 and got.key["clients"] == 2
    assert got.key["threads"] == torch.get_num_threads() and got.key["batch_size"] == 2


def test_measured_executor_needs_auto_and_the_workflow_key() -> None:
    assert measured_executor({"train_exec": "auto", "pfl_measure_exec": True})
    assert measured_executor({"pfl_measure_exec": True})
    assert not measured_executor({})  # a config built in code (the pinned reduced guard): the device rule
    assert not measured_executor({"train_exec": "loop", "pfl_measure_exec": True})
    assert not measured_executor({"train_exec": "auto", "pfl_measure_exec": False})


def _images(n: int, seed: int) -> DeviceImages:
    g = torch.Generator().manual_seed(seed)
    mean, std = NORMALISATION["cifar10"]
    return DeviceImages(torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8),
                        torch.randint(0, 10, (n,), generator=g), torch.tensor(mean).view(1, -1, 1, 1),
                        torch.tensor(std).view(1, -1, 1, 1))  # fmt: skip


@pytest.mark.parametrize("vec", [300.0, 10.0])
def test_train_step_runs_and_records_the_measured_executor(monkeypatch, tmp_path, vec) -> None:
    split = ClientSplit(tuple(np.arange(i * 4, (i + 1) * 4) for i in range(4)),
                        tuple(np.arange(i * 2, (i + 1) * 2) for i in range(4)))  # fmt: skip
    meta = {"data_checksum": {}, "partition_hash": "x", "num_classes": 10}
    monkeypatch.setattr(run, "load_run_data", lambda *a: (_images(16, 0), _images(8, 1), split, meta))
    _fake(monkeypatch, 100.0, vec)
    rec = run.train_step(_cfg(client_exec="loop"), {}, tmp_path / "r.json", device="cpu", progress=False,
                         choose_exec=True, exec_cache=tmp_path / "cache")  # fmt: skip
    want = "vectorised" if vec > 100 else "loop"
    assert rec["config"]["client_exec"] == want and rec["executor_choice"]["executor"] == want
    assert rec["executor_choice"]["vectorised_images_per_s"] == vec
    plain = run.train_step(_cfg(), {}, tmp_path / "p.json", device="cpu", progress=False)
    assert plain["executor_choice"] is None and plain["config"]["client_exec"] == "loop"


def test_a_resumed_run_keeps_the_executor_of_its_checkpoint(monkeypatch, tmp_path) -> None:
    """A checkpoint parked on a machine that chose the loop resumes with the loop on one that would measure
    lock-step faster (an H200 refused a CPU-parked checkpoint on 2026-11-27 before this rule)."""
    split = ClientSplit(tuple(np.arange(i * 4, (i + 1) * 4) for i in range(4)),
                        tuple(np.arange(i * 2, (i + 1) * 2) for i in range(4)))  # fmt: skip
    meta = {"data_checksum": {}, "partition_hash": "x", "num_classes": 10}
    monkeypatch.setattr(run, "load_run_data", lambda *a: (_images(16, 0), _images(8, 1), split, meta))
    ck = tmp_path / "ck.pt"
    _fake(monkeypatch, 100.0, 10.0)  # the first machine measures the loop faster
    real_round = PFLTrainer.train_round

    def stopped_in_round_two(self, round_idx, clients, lr):  # the harvest's budget stops the run after round 1
        if round_idx >= 1:
            raise KeyboardInterrupt
        return real_round(self, round_idx, clients, lr)

    monkeypatch.setattr(PFLTrainer, "train_round", stopped_in_round_two)
    with pytest.raises(KeyboardInterrupt):
        run.train_step(_cfg(rounds=2), {}, tmp_path / "a.json", device="cpu", progress=False, checkpoint=ck,
                       checkpoint_every=1, choose_exec=True, exec_cache=tmp_path / "c1")  # fmt: skip
    assert ck.is_file() and executor.resumed_choice(_cfg(rounds=2), CPU, ck).executor == "loop"
    assert executor.resumed_choice(_cfg(rounds=2), CPU, tmp_path / "none.pt") is None
    monkeypatch.setattr(PFLTrainer, "train_round", real_round)
    _fake(monkeypatch, 100.0, 300.0)  # the second machine would choose lock-step
    again = run.train_step(_cfg(rounds=2), {}, tmp_path / "b.json", device="cpu", progress=False, checkpoint=ck,
                           checkpoint_every=1, choose_exec=True, exec_cache=tmp_path / "c2")  # fmt: skip
    assert again["config"]["client_exec"] == "loop"
    assert again["executor_choice"]["source"] == "resumed" and str(ck) in again["executor_choice"]["reason"]
    fresh = run.train_step(_cfg(rounds=2), {}, tmp_path / "c.json", device="cpu", progress=False,
                           choose_exec=True, exec_cache=tmp_path / "c2")  # fmt: skip
    assert fresh["config"]["client_exec"] == "vectorised"
