"""Peer family legate2023 (issue 26): the deterministic component (the FedNCM head from the features the released
code's FedNCM loop saw), the family's registration and the released code's run-time shims.

Tests that need the released code skip with a reason when the checkout or its environment is absent; point
``FLB_LEGATE2023_REPO`` at a checkout of GwenLegate/GuidingLastLayerFLPretrain and ``FLB_LEGATE2023_PYTHON`` at
an interpreter with FLSim 0.1.0 (docs/peers/legate2023.md) to run them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmark.peers import legate2023
from benchmark.peers.compare import AgreementRule
from benchmark.peers.registry import get_family

PEERS = Path(__file__).resolve().parents[1].parent / "peers"  # ../peers beside the checkout
REPO = Path(os.environ.get("FLB_LEGATE2023_REPO", PEERS / "GuidingLastLayerFLPretrain"))
PYTHON = os.environ.get("FLB_LEGATE2023_PYTHON", str(PEERS.parent / "peerenv" / "flsim" / "bin" / "python"))


def _needs_env() -> None:
    if not Path(PYTHON).is_file():
        pytest.skip(f"no FLSim environment at {PYTHON} (set FLB_LEGATE2023_PYTHON)")


def _needs_checkout() -> None:
    _needs_env()
    if not (REPO / "src" / "federated_main.py").is_file():
        pytest.skip(f"no GuidingLastLayerFLPretrain checkout at {REPO} (set FLB_LEGATE2023_REPO)")


def _released_ncm(x: np.ndarray, y: np.ndarray, classes: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A dump as the driver writes it, with the head set the way the released loop sets it: per-sample
    float32 sums, divided by the counts, rows L2-normalised, random nn.Linear bias kept."""
    sums = np.zeros((classes, x.shape[1]), np.float32)
    counts = np.zeros(classes, np.float32)
    for f, t in zip(x, y, strict=True):
        sums[t] += f
        counts[t] += 1
    means = sums / counts[:, None]
    w = means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
    bias = rng.uniform(-1 / np.sqrt(x.shape[1]), 1 / np.sqrt(x.shape[1]), classes).astype(np.float32)
    return {"ncm_features": x, "ncm_labels": y, "head_weight": w.astype(np.float32), "head_bias": bias}


def test_fedncm_head_from_the_same_features_is_identical_and_a_wrong_head_is_caught():
    rng = np.random.default_rng(0)
    classes, d = 4, 16
    x = rng.random((60, d), dtype=np.float32) + np.repeat(np.eye(classes, d, dtype=np.float32), 15, 0)
    y = np.repeat(np.arange(classes), 15)
    perm = rng.permutation(60)  # the released loop sees a shuffled loader
    dump = _released_ncm(x[perm], y[perm], classes, rng)
    x_te = rng.random((40, d), dtype=np.float32) + np.repeat(np.eye(classes, d, dtype=np.float32), 10, 0)
    y_te = np.repeat(np.arange(classes), 10)
    dump |= {"test_features": x_te, "test_labels": y_te}
    logits = x_te @ dump["head_weight"].T + dump["head_bias"]
    printed = 100.0 * float((logits.argmax(1) == y_te).mean())
    ours, theirs = legate2023.fedncm_head_check(dump, printed)
    assert ours["head W equal within 1e-6"] == theirs["head W equal within 1e-6"] == 1.0
    assert ours["initial"] == theirs["initial"] == printed
    # a head that is not the normalised class means (e.g. unnormalised) is caught
    wrong = dict(dump, head_weight=dump["head_weight"] * 1.001)
    assert legate2023.fedncm_head_check(wrong, printed)[0]["head W equal within 1e-6"] == 0.0


def test_family_is_registered_with_its_configs_rules_and_differences():
    fam = get_family("legate2023")
    assert fam.default_config == "tiny"
    assert set(fam.configs) == {"tiny", "tiny-fedadam", "tiny-fedncm-head"}
    assert legate2023.CONFIGS["tiny-fedncm-head"]["rule"] == "identical"
    assert all(c["test_per_class"] * 10 > 128 for c in fam.configs.values())  # inference() divides by batch_idx
    names = {d.component for d in legate2023.DIFFERENCES}
    assert {"FedNCM head bias", "resize to 224 px", "flips the FedNCM class means see", "reported accuracy",
            "BatchNorm buffers", "batch order", "FedProx"} <= names  # fmt: skip
    assert legate2023._setting(fam.configs["tiny"]) == {"rounds": 4, "eval_every": 2}
    AgreementRule("seed_spread", floor=100.0 / 200)  # the tiny floor: one test image


def test_driver_shim_makes_flsim_configs_importable_on_this_python():
    _needs_env()
    driver = legate2023.DRIVER
    code = (
        "import importlib.util, sys; spec = importlib.util.spec_from_file_location('d', sys.argv[1]); "
        "d = importlib.util.module_from_spec(spec); spec.loader.exec_module(d); "
        "restore = d._hashable_configs(('flsim',)); import flsim.configs; restore(); print('ok')"
    )
    out = subprocess.run([PYTHON, "-c", code, str(driver)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-800:]


@pytest.mark.slow
def test_released_fedncm_head_equals_ours_on_the_features_it_saw(tmp_path):
    """End to end on the released code (minutes on one core): its FedNCM head and init accuracy, from a
    run on 2 x 10 images and 130 test images, equal ours computed from the features its loop saw."""
    _needs_checkout()
    from benchmark.peers.registry import PeerRequest

    config = {**legate2023.CONFIGS["tiny-fedncm-head"], "train_per_class": 2, "num_clients": 2,
              "clients_per_round": 2, "test_per_class": 13, "flsim_epochs": 1}  # fmt: skip
    inputs = legate2023.prepare_inputs(config, tmp_path, os.environ.get("FLB_DATA_ROOT"))
    req = PeerRequest("legate2023", "tiny-fedncm-head", (0,), REPO, tmp_path, PYTHON)
    t = legate2023.run_theirs(req, config, "ncm+ft", 0, inputs, dump=True)
    ours, theirs = legate2023.fedncm_head_check(np.load(t["dump"]), float(t["initial"]))
    assert ours["head W equal within 1e-6"] == 1.0
    assert ours["initial"] == theirs["initial"]
