"""Which numbers one seed cannot decide (``benchmark/tables/seed_need.py``, ``flb seeds-needed``; issue 27: "a second
seed wherever one seed cannot decide the cell"): cells printing one number are grouped, the seed spread comes from
the most similar measured unit, and the rule calls a verdict undecided only where a second seed could move it."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pytest

from benchmark.runners.pfl import PFLEvalJob, PFLTrainJob
from benchmark.tables.seed_need import JudgedCell, numbers, seed_needs, spread_for, undecided

BASE = PFLTrainJob(dataset="cifar10", model="4convnet", bn="batch", scheme="shards", scheme_param="2", clients=100,
                   server_fraction="0", algorithm="fedavg", participation="0.1", local_epochs=10, rounds=32,
                   momentum="0.9", head_lr="1", head_init="default", prox_mu="default", selection="last", seed=0)  # fmt: skip
NCM = dict(evaluation="ncm_cosine", ft_part="none", ft_epochs=0, ft_lr="0", ft_momentum="0")


def _train(**fields) -> PFLTrainJob:
    return replace(BASE, **fields)


def _cell(key, job, values, paper, verdict, seeds=None) -> JudgedCell:
    jobs = tuple(replace(job, seed=s) for s in (seeds or range(len(values))))
    return JudgedCell(key, jobs, tuple(values), paper, 0.0, verdict)


def test_cells_that_print_one_number_are_one_number():
    t12 = _cell("table12#w-classifier", _train(), [22.61], 22.29, "PASS")
    t14 = _cell("table14#conv1234-linear", _train(), [22.61], 22.29, "PASS")
    ncm = _cell("table12#w-o-classifier", PFLEvalJob(**{**vars(_train()), **NCM}), [82.38], 73.54, "FAIL")
    nums = numbers([t12, t14, ncm], "pfl_train")
    assert sorted(len(n.cells) for n in nums) == [1, 2]
    assert {n.unit for n in nums} == {_train()}  # the evaluation's unit is the training it reads
    assert {n.measure for n in nums} == {("pfl_train", ""), ("pfl_eval", "ncm_cosine")}


def test_the_spread_comes_from_the_most_similar_measured_units_and_is_their_median():
    target = numbers([_cell("x", _train(local_epochs=4, rounds=80), [20.0], 26.72, "FAIL")], "pfl_train")[0]
    same = _cell("a", _train(), [22.61, 31.83], 22.29, "PASS")  # FedAvg s = 2, tau = 10: std 6.52
    same2 = _cell("b", _train(local_epochs=1, rounds=320), [44.61, 42.33], 40.48, "PASS")  # std 1.61
    other_alg = _cell("c", _train(algorithm="fedbabu"), [45.74, 46.46], 49.67, "FAIL")  # std 0.51
    other_s = _cell("d", _train(scheme_param="10"), [63.98, 63.36], 57.61, "FAIL")
    measured = numbers([same, same2, other_alg, other_s], "pfl_train")
    spread = spread_for(target, measured)
    assert spread is not None and spread.level == "same algorithm and partition"
    assert spread.std == pytest.approx((abs(22.61 - 31.83) + abs(44.61 - 42.33)) / 2 / math.sqrt(2))  # their median
    fedbabu = numbers([_cell("y", _train(algorithm="fedbabu", local_epochs=4, rounds=80), [50.9], 44.39, "FAIL")],
                      "pfl_train")[0]  # fmt: skip
    assert spread_for(fedbabu, measured).std == pytest.approx(abs(45.74 - 46.46) / math.sqrt(2))
    s5 = numbers([_cell("z", _train(scheme_param="5", algorithm="fedper"), [60.0], 55.0, "FAIL")], "pfl_train")[0]
    assert spread_for(s5, measured).level == "other algorithms and partitions"  # nothing closer is measured
    ncm = numbers([_cell("w", PFLEvalJob(**{**vars(_train()), **NCM}), [80.0], 75.0, "FAIL")], "pfl_train")[0]
    assert spread_for(ncm, measured) is None  # no NCM number has two seeds


@pytest.mark.parametrize(
    ("ours", "paper", "verdict", "sigma", "expected"),
    [
        (44.61, 40.48, "FAIL", 1.61, True),  # FedAvg s = 2, tau = 1: FAIL on seed 0, PASS on seeds 0 and 1
        (87.44, 85.14, "FAIL", 2.2, True),  # FedAvg s = 2, tau = 10, personalised: the same
        (63.98, 57.60, "FAIL", 0.44, False),  # FedAvg s = 10, tau = 10: FAIL on both seeds
        (78.17, 77.22, "PASS", 0.25, True),  # FedPer s = 10, tau = 1: 0.95 within the 1-point floor
        (77.52, 77.22, "PASS", 0.25, False),
        (60.0, 50.0, "FAIL", 3.0, True),  # |delta| - 4.24 <= 2 * 3
        (60.0, 50.0, "FAIL", 2.5, False),  # 10 - 3.54 > 5
    ],
)
def test_a_verdict_is_undecided_only_where_a_second_seed_could_move_it(ours, paper, verdict, sigma, expected):
    number = numbers([_cell("k", _train(), [ours], paper, verdict)], "pfl_train")[0]
    assert undecided(number, sigma) is expected


def test_numbers_judged_on_two_seeds_are_measured_not_listed():
    two = _cell("a", _train(), [22.61, 31.83], 22.29, "PASS")
    one = _cell("b", _train(local_epochs=1, rounds=320), [44.61], 40.48, "FAIL")
    not_run = _cell("c", _train(local_epochs=4, rounds=80), [10.0], 26.72, "NOT RUN")
    needs = seed_needs([two, one, not_run], "pfl_train")
    assert [n.number.cells[0].key for n in needs] == ["b"] and needs[0].undecided


def test_flb_seeds_needed_reads_a_builds_plans_and_checks(real_data_root, tmp_path, monkeypatch, capsys):
    """End to end on a real plan of Table 12: the CLI joins the plan's jobs with the checks' values."""
    from benchmark import seeds_cli
    from benchmark.tables.plan import make_plan, write_plan
    from benchmark.workflow import load_config

    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    cfg = load_config(overrides={"data_root": str(real_data_root), "device": "cpu", "cpu_training": True})
    plan = make_plan("fedbabu_table12", cfg)
    write_plan(plan, tmp_path)
    values = {"s-2/f-0_1/tau-10/fedavg/w-classifier": ([22.61, 31.83], "PASS"),  # measured: std 6.52
              "s-10/f-0_1/tau-10/fedavg/w-classifier": ([63.98, 63.36], "FAIL"),  # measured: std 0.44
              "s-2/f-0_1/tau-1/fedavg/w-classifier": ([44.61], "FAIL"),  # 4.13 above, s = 2's 6.52: undecided
              "s-10/f-0_1/tau-1/fedavg/w-classifier": ([71.69], "FAIL")}  # 7.90 above, s = 10's 0.44: decided
    cells = [{"key": cp.cell.key, "ours": values[cp.cell.id][0], "verdict": values[cp.cell.id][1]}
             for cp in plan.cells if cp.cell.id in values]  # fmt: skip
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "fedbabu_table12.json").write_text(json.dumps({"target": "fedbabu_table12", "cells": cells}))
    assert seeds_cli.main(["fedbabu_table12", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("1 of 2 one-seed numbers undecided")
    unit = [ln for ln in out if ln.startswith("unit ")]
    assert len(unit) == 1 and "shards-2-K100-p0/fedavg/f0.1-tau1-" in unit[0]
    assert any("--seeds 1 --only" in ln and "seed1" in ln for ln in out)
    assert seeds_cli.main(["fedbabu_table12", "--results", str(tmp_path), "--decided"]) == 0
    out = capsys.readouterr().out
    assert "decided   FAIL   +7.90" in out and "shards-10-K100-p0/fedavg/f0.1-tau1-" in out
    assert seeds_cli.main(["fedbabu_table12", "--results", str(tmp_path), "--patterns"]) == 0
    (pattern,) = capsys.readouterr().out.split()  # one undecided unit: its seed-1 output, for flb harvest --only
    assert re.fullmatch(pattern, "results/runs/pfl/cifar10/4convnet-bnbatch/shards-2-K100-p0/fedavg/"
                        "f0.1-tau1-R320-m0.9-hl1-default-mudefault/last/seed1.json")  # fmt: skip
