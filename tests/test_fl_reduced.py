"""The reduced CPU configuration of FT / FedNCM+FT (benchmark/fl/reduced.py) against its pinned values.

The pinned file is never rewritten here: a difference fails, and only ``python -m benchmark.fl.reduced
--write-pinned`` regenerates it (expected/pinned/README.md).
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict

import pytest

from benchmark.fl import reduced
from benchmark.io import sha256_bytes


@pytest.fixture(scope="module")
def pinned() -> dict:
    return json.loads(reduced.PINNED_PATH.read_text())


def test_pinned_file_is_a_pinned_record_of_the_current_configuration(pinned: dict) -> None:
    assert pinned["kind"] == "pinned" and pinned["regenerate"] == reduced.REGENERATE
    rc = reduced.ReducedConfig()
    assert pinned["reduced_config"] == asdict(rc)
    cfg = rc.fl_config(0).to_dict()
    cfg.pop("seed")
    # a change of the configuration (or of FLConfig's defaults) without regenerating the pins fails here
    assert pinned["fl_config"] == cfg
    want = sha256_bytes(json.dumps({"reduced": asdict(rc), "fl": cfg}, sort_keys=True).encode())
    assert pinned["config_hash"] == want
    assert set(pinned["values"]) == set(reduced.METHODS) and pinned["seeds"] == [0]
    assert pinned["tolerance"] == reduced.TOLERANCE


def test_compare_flags_every_kind_of_change(pinned: dict) -> None:
    """The comparison the slow test relies on can fail: perturb each pinned quantity beyond tolerance."""
    same = {"values": copy.deepcopy(pinned["values"]), "identity": copy.deepcopy(pinned["identity"])}
    assert reduced.compare(pinned, same) == []
    tol = pinned["tolerance"]
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
        "best_round": lambda v: v.__setitem__("best_round", v["best_round"] - 1),
        "rounds": lambda v: v["rounds"].append(11),
    }
    for key, edit in edits.items():
        got = copy.deepcopy(same)
        edit(got["values"]["fedncm_ft"]["0"])
        problems = reduced.compare(pinned, got)
        assert len(problems) == 1 and key in problems[0], (key, problems)
    got = copy.deepcopy(same)
    got["identity"]["0"]["partition_sha256"] = "0" * 64
    assert any("inputs differ" in p for p in reduced.compare(pinned, got))
    got = copy.deepcopy(same)
    del got["values"]["ft"]["0"]
    assert reduced.compare(pinned, got) == ["ft seed 0: not recomputed"]


@pytest.mark.slow
@pytest.mark.realdata
def test_reduced_ft_and_fedncm_ft_reproduce_the_pinned_values(
    pinned: dict, real_data_root, real_weights_dir
) -> None:
    """Reruns the pinned configuration on real CIFAR-10 (about 30 s on one core)."""
    computed = reduced.compute_all(pinned["seeds"], data_root=real_data_root, weights_dir=real_weights_dir)
    assert reduced.compare(pinned, computed) == []
    ft, ncm = computed["values"]["ft"]["0"], computed["values"]["fedncm_ft"]["0"]
    # FedNCM+FT starts from exactly the FedNCM head: round 0 is the closed-form classifier's own accuracy
    assert ncm["accuracy"][0] == pytest.approx(ncm["fedncm_accuracy"], abs=1e-9)
    # the stage-1 (FedNCM) uplink is counted on top of FT's: same FT traffic, plus the class statistics
    assert ncm["downlink_bytes"] == ft["downlink_bytes"] and ncm["uplink_bytes"] > ft["uplink_bytes"]
    assert ncm["compute_f"] == ft["compute_f"] + 1000  # + one forward pass per training image (App. A)
