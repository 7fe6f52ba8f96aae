"""Issue 26: FedMeZO's lr and round chosen on a validation set, the test read once at the choice, the
first-order ceiling, and a cell that says NOT RUN with its curves when zeroth-order tuning does not move."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmark.io import atomic_write_json
from benchmark.peers.mezo import build_case
from benchmark.zo.data import k_shot_dev_indices, k_shot_indices
from benchmark.zo.fedmezo import FedMeZOConfig, replay
from benchmark.zo.first_order import FirstOrderConfig, batches, first_order_selection, union
from benchmark.zo.mezo import ZOConfig
from benchmark.zo.text_model import accuracy_and_loss
from benchmark.zo.validation import Choice, ValCurve, ValPoint, choose, status_of, validation_curve

TOY = {"kind": "toy", "examples": 24, "length": 5, "vocab": 30, "hidden": 6, "seed": 0}


def test_k_shot_dev_set_is_disjoint_from_the_k_shot_training_set():
    labels = np.repeat([0, 1], 50)
    train = k_shot_indices(labels, 16, seed=3)
    dev = k_shot_dev_indices(labels, 16, 3, train)
    assert len(dev) == 32 and not set(dev) & set(train)
    assert np.bincount(labels[dev]).tolist() == [16, 16]
    assert np.array_equal(dev, k_shot_dev_indices(labels, 16, 3, train))  # seeded
    assert np.array_equal(train, k_shot_indices(labels, 16, seed=3))  # the training draw is unchanged


def _curve(lr, points):
    return ValCurve(lr, tuple(ValPoint(r, a, v) for r, a, v in points))


def test_choice_and_status():
    flat = [_curve(lr, [(0, 60.0, 0.69), (10, 60.0, 0.69)]) for lr in (1e-7, 1e-6)]
    assert choose(flat) == Choice(1e-7, 0, 60.0, 0.69)
    assert status_of(flat, choose(flat)) == "flat"
    worse = [*flat, _curve(1e-3, [(0, 60.0, 0.69), (10, 55.0, 0.70), (20, 60.0, 0.68)])]
    assert choose(worse) == Choice(1e-3, 20, 60.0, 0.68)  # tie on accuracy: the lower loss
    assert status_of(worse, choose(worse)) == "no-gain"
    better = [*worse, _curve(4e-3, [(0, 60.0, 0.69), (10, 61.0, 0.69), (20, 61.0, 0.60)])]
    assert choose(better) == Choice(4e-3, 20, 61.0, 0.60)
    assert status_of(better, choose(better)) == "improves"


def test_validation_curve_keeps_the_log_that_rebuilds_each_point():
    model, data, _ = build_case(TOY)
    clients = [data.subset(range(0, 10)), data.subset(range(10, 16))]
    val = data.subset(range(16, 24))
    fresh, _, _ = build_case(TOY)
    cfg = FedMeZOConfig(ZOConfig(lr=0.5, eps=1e-3), rounds=4, seed=1)
    curve = validation_curve(model, clients, val, cfg, val_every=2)
    assert [p.round for p in curve.points] == [0, 2, 4] and len(curve.log) == 4
    assert curve.points[0].train_loss is None and curve.points[1].train_loss is not None
    replay(fresh, curve.log[:2], cfg.zo)  # what the selection does before reading the test set
    assert accuracy_and_loss(fresh, val) == (curve.points[1].accuracy, curve.points[1].loss)
    with pytest.raises(Exception, match="eval_every"):
        validation_curve(model, clients, val, FedMeZOConfig(cfg.zo, rounds=1, eval_every=1), val_every=1)


def test_first_order_ceiling_chooses_on_validation():
    _model, data, _ = build_case(TOY)
    train, val, test = data.subset(range(0, 12)), data.subset(range(12, 18)), data.subset(range(18, 24))
    assert len(union([train.subset(range(0, 5)), train.subset(range(5, 12))])) == 12
    assert [len(b) for b in batches(12, 5, 4, 0)] == [5, 5, 2, 5]

    def make():
        return build_case(TOY)[0]

    sel = first_order_selection(make, train, val, test, FirstOrderConfig((1e-3, 1e-1), steps=4, batch_size=4,
                                                                            val_every=2))  # fmt: skip
    assert sel.chosen == choose(sel.curves) and sel.chosen.lr in (1e-3, 1e-1)
    assert sel.unit == "steps" and sel.test_accuracy is not None


def test_validated_cell_is_not_run_with_its_curves_when_nothing_moves(tmp_path, monkeypatch):
    """No zeroth-order point beats round 0 on validation: the cell is NOT RUN, its reason lists every curve."""
    from benchmark.runners import fedmezo as r

    monkeypatch.chdir(tmp_path)
    cfg = {"zo_k_shot": 16, "zo_eval_every": 25}
    job = r.validated_job("sst2", 0.1, 200, 0, cfg)
    sel_path = job.selection().path
    curves = [{"lr": lr, "points": [{"round": 0, "accuracy": 65.9, "loss": 0.69, "train_loss": None},
                                    {"round": 200, "accuracy": 65.9, "loss": 0.69, "train_loss": 0.6}],
               "log": [], "wall_s": 0.0} for lr in (1e-7, 1e-3)]  # fmt: skip
    chosen = {"lr": 1e-7, "round": 0, "val_accuracy": 65.9, "val_loss": 0.69}
    atomic_write_json(Path(sel_path), {"selection": {"curves": curves}}, checksum=True)
    record = {"final_accuracy": None, "initial_accuracy": 64.36, "encoder": {"name": "x"},
              "selection": {"record": sel_path, "chosen": chosen, "status": "flat", "summary": "flat summary",
                            "grid": [1e-7, 1e-3], "budget_rounds": 200, "val_split": "dev", "val_examples": 872,
                            "initial_val_accuracy": 65.9, "test_accuracy_at_selection": 64.36}}  # fmt: skip
    atomic_write_json(Path(job.path), record, checksum=True)
    plan = SimpleNamespace(cell=SimpleNamespace(id="sst2/fedmezo/acc", metric="accuracy", protocol={"rounds": 2621}),
                           dataset="sst2", model="all-minilm-l6-v2", method="fedmezo", jobs=(job,))  # fmt: skip
    spec = SimpleNamespace(paper="bernier2024", table="table4_1")
    result = r.FedMeZORunner().collect(spec, plan, {}, {})
    assert result.not_run is not None and not result.values
    assert "lr 1e-07: 65.90@0 65.90@200" in result.reason and "lr 0.001" in result.reason
    record["selection"]["status"] = "improves"
    record["final_accuracy"] = 66.0
    atomic_write_json(Path(job.path), record, checksum=True)
    assert r.FedMeZORunner().collect(spec, plan, {}, {}).values == [66.0]


def test_validation_jobs_round_trip_through_their_wildcards():
    """The workflow rebuilds each job from its output path's wildcards (every field is in its pattern)."""
    import dataclasses
    import re

    from benchmark.runners import fedmezo as r

    run = r.validated_job("sst2", 0.1, 200, 0, {"zo_k_shot": 16, "zo_eval_every": 25})
    for job in (run, run.selection(), *run.selection().curves(), r.first_order_job("sst2", 0, {"zo_k_shot": 16})):
        fields = dataclasses.asdict(job)
        assert set(re.findall(r"{(\w+)}", job.PATTERN)) == set(fields), job.KIND
        assert type(job).from_wildcards({k: str(v) for k, v in fields.items()}) == job
