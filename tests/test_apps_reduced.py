"""The reduced CPU configuration of FT / FedNCM+FT (benchmark/apps/reduced.py, ``flb pin-reduced``) against its pinned values.

The pinned file is never rewritten here: a difference fails, and only ``flb pin-reduced
--write-pinned`` regenerates it (expected/pinned/README.md). The guard runs in float64 and compares the
trajectories within a tolerance measured by ``--measure-tolerance`` (stored in the pinned file); the last test
shows that real regressions still exceed it by orders of magnitude.
"""

from __future__ import annotations

import copy
import json
from contextlib import chdir
from dataclasses import asdict, replace

import pytest
import torch

from benchmark.apps import reduced
from benchmark.fl import engine
from benchmark.io import sha256_bytes


@pytest.fixture(scope="module")
def pinned() -> dict:
    return json.loads(reduced.PINNED_PATH.read_text())


def test_pinned_file_is_a_pinned_record_of_the_current_configuration(pinned: dict) -> None:
    assert pinned["kind"] == "pinned" and pinned["regenerate"] == reduced.REGENERATE
    rc = reduced.ReducedConfig()
    assert pinned["reduced_config"] == asdict(rc) and rc.dtype == "float64"
    cfg = rc.fl_config(0).to_dict()
    cfg.pop("seed")
    # a change of the configuration (or of FLConfig's defaults) without regenerating the pins fails here
    assert pinned["fl_config"] == cfg
    want = sha256_bytes(json.dumps({"reduced": asdict(rc), "fl": cfg}, sort_keys=True).encode())
    assert pinned["config_hash"] == want
    assert set(pinned["values"]) == set(reduced.METHODS) and pinned["seeds"] == [0]
    # the tolerance is the one its recorded measurement implies under the code's multiple and floors
    m = pinned["tolerance_measurement"]
    assert m["multiple"] == reduced.TOLERANCE_MULTIPLE and m["floor"] == reduced.TOLERANCE_FLOOR
    assert set(m["variants"]) == {v.name for v in reduced.VARIANTS}
    assert pinned["tolerance"] == m["tolerance"] == reduced.tolerance_from(m)
    for where in (pinned["machine"], m["machine"]):
        assert "unknown" not in where and "cpu (" in where  # the CPU model is recorded


def test_tolerance_comes_from_the_measurement() -> None:
    run = {"ft": {"0": {"accuracy": [10.0, 20.0], "test_loss": [2.0, 1.0], "train_loss": [None, 1.5]}}}
    same = copy.deepcopy(run)
    assert reduced.deviation(run, same) == {"max_accuracy_abs": 0.0, "max_loss_rel": 0.0}
    other = copy.deepcopy(run)
    other["ft"]["0"]["test_loss"][1] = 1.0 + 3e-12
    other["ft"]["0"]["accuracy"][1] = 20.1
    dev = reduced.deviation(run, other)
    assert dev["max_loss_rel"] == pytest.approx(3e-12) and dev["max_accuracy_abs"] == pytest.approx(0.1)
    nan = copy.deepcopy(run)
    nan["ft"]["0"]["train_loss"][1] = None
    assert reduced.deviation(run, nan)["max_loss_rel"] == float("inf")
    m = {"multiple": 100.0, "floor": {"loss_rtol": 1e-9, "accuracy_abs": 0.1}}
    quiet = {"a": {"max_loss_rel": 0.0, "max_accuracy_abs": 0.0, "informative": False}}
    assert reduced.tolerance_from({**m, "variants": quiet}) == {"loss_rtol": 1e-9, "accuracy_abs": 0.1}
    loud = {
        "a": {"max_loss_rel": 1e-10, "max_accuracy_abs": 0.0, "informative": False},
        "b": {"max_loss_rel": 4e-11, "max_accuracy_abs": 0.2, "informative": False},
        "float32": {"max_loss_rel": 1e-2, "max_accuracy_abs": 5.0, "informative": True},  # never used
    }
    tol = reduced.tolerance_from({**m, "variants": loud})
    assert tol == {"loss_rtol": pytest.approx(1e-8), "accuracy_abs": pytest.approx(20.0)}


def test_compare_flags_every_kind_of_change(pinned: dict) -> None:
    """The comparison the slow tests rely on can fail: perturb each pinned quantity beyond tolerance."""
    same = {"values": copy.deepcopy(pinned["values"]), "identity": copy.deepcopy(pinned["identity"])}
    assert reduced.compare(pinned, same) == []
    tol = pinned["tolerance"]
    ncm = pinned["values"]["fedncm_ft"]["0"]
    off_best = next(r for r in ncm["rounds"] if r not in reduced._near_best_rounds(ncm, tol["accuracy_abs"]))
    edits = {
        "accuracy": lambda v: v["accuracy"].__setitem__(3, v["accuracy"][3] + 2 * tol["accuracy_abs"]),
        "test_loss": lambda v: v["test_loss"].__setitem__(
            -1, v["test_loss"][-1] * (1 + 3 * tol["loss_rtol"])
        ),
        "train_loss": lambda v: v["train_loss"].__setitem__(
            1, v["train_loss"][1] * (1 - 3 * tol["loss_rtol"])
        ),
        "uplink_bytes": lambda v: v.__setitem__("uplink_bytes", v["uplink_bytes"] + 4),
        "compute_f": lambda v: v.__setitem__("compute_f", v["compute_f"] - 1),
        "best_round": lambda v: v.__setitem__("best_round", off_best),
        "rounds": lambda v: v["rounds"].append(11),
    }
    for key, edit in edits.items():
        got = copy.deepcopy(same)
        edit(got["values"]["fedncm_ft"]["0"])
        problems = reduced.compare(pinned, got)
        assert len(problems) == 1 and key in problems[0], (key, problems)
    # within tolerance: no difference
    got = copy.deepcopy(same)
    v = got["values"]["ft"]["0"]
    v["test_loss"] = [x * (1 + 0.5 * tol["loss_rtol"]) for x in v["test_loss"]]
    v["accuracy"] = [a + 0.5 * tol["accuracy_abs"] for a in v["accuracy"]]
    assert reduced.compare(pinned, got) == []
    for key in ("partition_sha256", "train_inputs_sha256", "test_inputs_sha256"):
        got = copy.deepcopy(same)
        got["identity"]["0"][key] = "0" * 64
        assert any("inputs differ" in p for p in reduced.compare(pinned, got)), key
    got = copy.deepcopy(same)
    del got["values"]["ft"]["0"]
    assert reduced.compare(pinned, got) == ["ft seed 0: not recomputed"]
    # a 3-round rerun is compared with the pinned curves' first 4 rows only
    short = copy.deepcopy(same)
    for per_seed in short["values"].values():
        for v in per_seed.values():
            for k in ("rounds", *reduced.CURVE_KEYS):
                v[k] = v[k][:4]
    assert reduced.compare(pinned, short, rounds=3) == []
    short["values"]["ft"]["0"]["test_loss"][2] *= 1 + 3 * tol["loss_rtol"]
    assert len(reduced.compare(pinned, short, rounds=3)) == 1


@pytest.fixture(scope="module")
def recomputed(pinned: dict, real_data_root, real_weights_dir, tmp_path_factory) -> dict:
    """The pinned configuration rerun on real CIFAR-10 (float64, one thread; about 40 s a method on one core),
    once for the tests of this file."""
    with chdir(tmp_path_factory.mktemp("reduced")):  # the runner's partition job writes results/partitions/ here
        return reduced.compute_all(pinned["seeds"], data_root=real_data_root, weights_dir=real_weights_dir)


@pytest.mark.slow
@pytest.mark.realdata
def test_reduced_ft_and_fedncm_ft_reproduce_the_pinned_values(pinned: dict, recomputed: dict) -> None:
    """The rerun equals the pinned values within the measured tolerance."""
    computed = recomputed
    assert reduced.compare(pinned, computed) == []
    ft, ncm = computed["values"]["ft"]["0"], computed["values"]["fedncm_ft"]["0"]
    # FedNCM+FT starts from exactly the FedNCM head: round 0 is the closed-form classifier's own accuracy.
    # Both sides come from this run on this machine (not from the pinned file); they differ only in the
    # float32 copy of W (closed_form_head, <= 6e-8 relative; FedNCM's features and W are non-negative, so no
    # cancellation) and in the library that evaluates (torch vs numpy, float64). Measured: the smallest top-2
    # logit margin of the 1,000 test images under the FedNCM head is 1.9e-6 of the largest |logit|, 30x that.
    assert ncm["accuracy"][0] == pytest.approx(ncm["fedncm_accuracy"], abs=1e-9)
    # the stage-1 (FedNCM) uplink is counted on top of FT's: same FT traffic, plus the class statistics
    assert ncm["downlink_bytes"] == ft["downlink_bytes"] and ncm["uplink_bytes"] > ft["uplink_bytes"]
    assert ncm["compute_f"] == ft["compute_f"] + 1000  # + one forward pass per training image (App. A)


class _DropFirstClient(engine.DeltaAccumulator):
    """A regression: the first sampled client of every round trains (and is paid for) but is not aggregated."""

    def add(self, delta, weight) -> None:  # type: ignore[no-untyped-def]
        self._seen = getattr(self, "_seen", 0) + 1
        if self._seen > 1:
            super().add(delta, weight)


@pytest.mark.slow
@pytest.mark.realdata
def test_the_guard_still_catches_real_regressions(
    pinned: dict, recomputed: dict, real_data_root, real_weights_dir, monkeypatch, tmp_path
) -> None:
    """FT through the runner against the pinned curves' first three rounds: the unchanged engine agrees (the
    module's rerun, the same :func:`reduced.run_via_runner` call); a client lr 10 % off, or one client per round left
    out of the aggregation, is flagged far beyond tolerance.

    (BatchNorm buffers aggregated by mistake cannot be shown here: SqueezeNet 1.1 has no BatchNorm, so
    ``bn_stats`` changes nothing in this configuration -- asserted below; tests/test_fl_engine.py covers it.)
    """
    monkeypatch.chdir(tmp_path)  # the runner's partition job writes results/partitions/... here
    rc = reduced.ReducedConfig()
    data = reduced.load_reduced_data(rc, 0, real_data_root)
    tol = pinned["tolerance"]

    def first_rounds(summary: dict, info: dict) -> tuple[list[str], dict]:
        first = {k: v[:4] for k, v in summary.items() if k in ("rounds", *reduced.CURVE_KEYS)}
        got = {"values": {"ft": {"0": first}}, "identity": {"0": info}}
        want = {k: pinned["values"]["ft"]["0"][k][:4] for k in ("rounds", *reduced.CURVE_KEYS)}
        return reduced.compare(pinned, got, rounds=3), reduced.deviation({"ft": {"0": want}}, got["values"])

    def check(rc_run: reduced.ReducedConfig) -> tuple[list[str], dict]:
        res, info = reduced.run_via_runner(
            "ft", 0, rc=rc_run, data=data, data_root=real_data_root, weights_dir=real_weights_dir
        )
        return first_rounds(reduced.summary(res), info)

    problems, _ = first_rounds(recomputed["values"]["ft"]["0"], recomputed["identity"]["0"])
    assert problems == []
    problems, dev = check(replace(rc, client_lr=1.1 * rc.client_lr))
    assert problems and dev["max_loss_rel"] > 1e3 * tol["loss_rtol"], dev
    with monkeypatch.context() as mp:
        mp.setattr(engine, "DeltaAccumulator", _DropFirstClient)
        problems, dev = check(rc)
    assert problems and dev["max_loss_rel"] > 1e3 * tol["loss_rtol"], dev
    model, _ = reduced.create_model(rc, 0, real_weights_dir)
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())
    assert not any(b.is_floating_point() for b in model.buffers())  # nothing bn_stats="aggregate" could send
