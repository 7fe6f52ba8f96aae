"""The reduced FedBABU / FedAvg configuration (benchmark/apps/pfl_reduced.py), run through the ``pfl`` runner's
jobs, against its pinned values (expected/pinned/pfl_reduced_cifar10_4convnet.json; never rewritten here)."""

from __future__ import annotations

import copy
import json

import pytest

from benchmark.apps import pfl_reduced


@pytest.fixture(scope="module")
def pinned() -> dict:
    return json.loads(pfl_reduced.PINNED_PATH.read_text())


def test_pinned_file_records_its_configuration_and_measured_tolerance(pinned: dict) -> None:
    assert pinned["kind"] == "pinned" and pinned["regenerate"] == pfl_reduced.REGENERATE
    assert pinned["knobs"] == pfl_reduced.KNOBS
    assert pinned["jobs"] == {a: [j.path for j in pfl_reduced.jobs(a)] for a in pfl_reduced.ALGORITHMS}
    m = pinned["tolerance_measurement"]
    assert m["multiple"] == pfl_reduced.TOLERANCE_MULTIPLE and m["floor"] == pfl_reduced.TOLERANCE_FLOOR
    assert m["tolerance"] == {k: max(m["multiple"] * m["deviation"][k], m["floor"][k]) for k in m["floor"]}
    assert "cpu (" in pinned["machine"]


def test_compare_catches_a_moved_value(pinned: dict) -> None:
    moved = copy.deepcopy(pinned["values"])
    assert pfl_reduced.compare(pinned, moved) == []
    moved["fedbabu"]["train_loss"][1] *= 1 + 1e-6
    moved["fedavg"]["personalised"][3] += 2.0
    diff = pfl_reduced.compare(pinned, moved)
    assert any("fedbabu.train_loss" in d for d in diff) and any("fedavg.personalised" in d for d in diff)


@pytest.mark.slow
@pytest.mark.realdata
def test_the_reduced_runs_through_the_runner_equal_the_pins(pinned: dict, real_data_root) -> None:
    computed = pfl_reduced.compute(data_root=str(real_data_root))
    assert pfl_reduced.compare(pinned, computed) == []
    # FedBABU's head never moved: its personalised accuracy rests on a body trained under a fixed random head
    assert computed["fedbabu"]["selected_round"] >= 1
