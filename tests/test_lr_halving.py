"""Successive halving over a learning-rate grid (issue 28): the rung arithmetic, the search's rule (survivors,
ties, NaN, diverged points, where it differs from the full grid), the round loop's resumable stop that the rungs
use (a stopped and continued run equals an uninterrupted one, bit for bit), the reading of a checkpoint's history
at a rung, and the plan's ``lr_search`` option."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import peek_checkpoint, save_checkpoint
from benchmark.federated.history import RoundRecord
from benchmark.federated.loop import RoundLimit, RoundLimitReached, round_limit
from benchmark.fl.lr_halving import Progress, Rung, agrees_with_grid, rounds_spent, rungs, successive_halving
from benchmark.fl.train_protocols import get_train_protocol
from benchmark.fl.train_tuning import _seen, history_score
from benchmark.runners.fl_train import FLTrainJob, HalvingSettings, LRChoiceJob, LRHalvingJob, lr_source
from benchmark.workflow import validate_config

# ------------------------------------------------------------------------------------------------ rungs


def test_rungs_of_the_papers_grids():
    """9 points (FedAvg / FedProx), eta 3: 9 to R/9, 3 to R/3, 1 to R (rounded up to the evaluation interval);
    20 points (FedAdam): one rung more. Point-rounds: 7R/3 and 70R/27 instead of 9R and 20R."""
    assert rungs(9, 27) == [Rung(3, 9), Rung(9, 3), Rung(27, 1)]
    assert rounds_spent(rungs(9, 27)) == 9 * 3 + 3 * 6 + 1 * 18 == 63
    assert rungs(20, 27) == [Rung(1, 20), Rung(3, 7), Rung(9, 3), Rung(27, 1)]
    assert rounds_spent(rungs(20, 27)) == 70
    assert rungs(9, 800, interval=4) == [Rung(92, 9), Rung(268, 3), Rung(800, 1)]  # multiples of 4
    assert rungs(9, 27, keep=2) == [Rung(3, 9), Rung(9, 3), Rung(27, 2)]
    assert rungs(1, 27) == [Rung(27, 1)] and rungs(3, 27, keep=3) == [Rung(27, 3)]
    assert rungs(9, 4) == [Rung(1, 9), Rung(2, 3), Rung(4, 1)]
    assert rungs(9, 2) == [Rung(1, 3), Rung(2, 1)]  # too few rounds for three rungs: merged


@pytest.mark.parametrize(("kw", "match"), [({"eta": 1}, "eta"), ({"keep": 0}, "keep"), ({"interval": 0}, "interval")])
def test_bad_rung_settings_are_one_error(kw, match):
    with pytest.raises(ConfigError, match=match):
        rungs(9, 27, **kw)


# ------------------------------------------------------------------------------------------------ the search
GRID = [(lr, 1.0) for lr in (0.1, 0.07, 0.05, 0.03, 0.01, 0.007, 0.005, 0.003, 0.001)]


def _curves(final: dict[float, float], speed: dict[float, float]) -> dict[tuple[float, float], list[float]]:
    """Best-so-far validation accuracy per round (1..27) of each point: rises to ``final`` at ``speed``."""
    out = {}
    for p in GRID:
        f, s = final[p[0]], speed[p[0]]
        out[p] = [f * (1 - math.exp(-s * r)) for r in range(1, 28)]
    return out


class _Trainer:
    """``advance`` for :func:`successive_halving` over fixed curves; counts the rounds trained per point."""

    def __init__(self, curves, diverge_at=None):
        self.curves, self.diverge_at, self.trained = curves, diverge_at or {}, {p: 0 for p in curves}

    def __call__(self, p, rounds):
        d = self.diverge_at.get(p[0])
        if d is not None and d <= rounds:
            self.trained[p] = d
            return Progress(self.curves[p][d - 2] if d > 1 else math.nan, d, diverged=True)
        assert rounds > self.trained[p]  # always continues, never repeats
        self.trained[p] = rounds
        return Progress(self.curves[p][rounds - 1], rounds)


def _full_grid_choice(curves):
    return max(GRID, key=lambda p: (curves[p][-1], -GRID.index(p)))


def test_it_picks_the_full_grids_point_when_the_winner_leads_early():
    final = dict(zip([p[0] for p in GRID], [60, 62, 65, 70, 74, 72, 68, 64, 55], strict=True))
    curves = _curves(final, dict.fromkeys(final, 0.3))
    trainer = _Trainer(curves)
    out = successive_halving(GRID, rungs(9, 27), trainer)
    assert out.finalists == [_full_grid_choice(curves)] == [(0.01, 1.0)]
    assert out.rounds_spent == 63 == sum(trainer.trained.values())
    assert [r["rounds"] for r in out.rungs] == [3, 9, 27] and len(out.eliminated) == 8
    assert {(e["client_lr"], e["rung"]) for e in out.eliminated if e["rung"] == 1} == {(0.03, 1), (0.007, 1)}


def test_it_can_differ_when_the_grids_winner_starts_slowly_and_the_record_shows_where():
    """The smallest rate learns slowest but ends highest: eliminated at the first rung, so the search picks
    another point; agrees_with_grid names the rung where the full grid's winner fell."""
    final = dict(zip([p[0] for p in GRID], [60, 62, 65, 70, 74, 72, 68, 64, 80], strict=True))
    speed = {**dict.fromkeys(final, 0.3), 0.001: 0.1}
    curves = _curves(final, speed)
    out = successive_halving(GRID, rungs(9, 27), _Trainer(curves))
    assert _full_grid_choice(curves) == (0.001, 1.0) and out.finalists == [(0.01, 1.0)]
    h = {"choice": {"client_lr": 0.01, "server_lr": 1.0}, "search": {"eliminated": out.eliminated}}
    g = {"choice": {"client_lr": 0.001, "server_lr": 1.0}}
    cmp = agrees_with_grid(h, g)
    assert not cmp["agree"] and cmp["grid_winner_eliminated_at"]["rung"] == 0


def test_diverged_points_stop_keep_their_score_and_nan_ranks_last_ties_go_first_in_grid_order():
    final = {**dict.fromkeys([p[0] for p in GRID], 50.0), 0.07: 90.0}
    curves = _curves(final, dict.fromkeys(final, 0.3))  # equal curves but 0.07's: ties everywhere
    trainer = _Trainer(curves, diverge_at={0.1: 1, 0.07: 3})
    calls: list[tuple[float, int]] = []

    def advance(p, rounds):
        calls.append((p[0], rounds))
        return trainer(p, rounds)

    out = successive_halving(GRID, rungs(9, 27), advance)
    first = {p["client_lr"]: p for p in out.rungs[0]["points"]}
    assert first[0.1]["diverged"] and math.isnan(first[0.1]["val_accuracy"])  # no evaluation before it diverged
    assert first[0.07]["diverged"] and first[0.07]["rounds"] == 3 and first[0.07]["val_accuracy"] == curves[(0.07, 1.0)][1]
    # 0.07's score (reached before it diverged) is the best: it survives; equal scores: the first in grid order
    assert out.rungs[0]["kept"] == [[0.07, 1.0], [0.05, 1.0], [0.03, 1.0]]
    assert [e["client_lr"] for e in out.eliminated[:6]] == [0.01, 0.007, 0.005, 0.003, 0.001, 0.1]  # NaN last
    assert (0.07, 9) not in calls and (0.07, 3) in calls  # diverged: never trained again ...
    assert {p["client_lr"]: p["rounds"] for p in out.rungs[1]["points"]}[0.07] == 3  # ... but still ranked
    assert out.finalists == [(0.05, 1.0)]


# ------------------------------------------------------------------------------------------------ the loop
def test_a_run_stopped_at_rungs_and_continued_equals_an_uninterrupted_run(tmp_path: Path):
    """The rung stop writes the checkpoint at its round whatever the cadence (every 2 rounds; stops at 1 and 3),
    and the continued run is bit for bit the uninterrupted one (FedAdam: the server optimiser's state too)."""
    from tests.test_fl_checkpoint import assert_same_run, run_case

    ckpt = tmp_path / "run.ckpt"
    for stop in (1, 3):
        with round_limit(RoundLimit(stop)), pytest.raises(RoundLimitReached) as info:
            run_case("ft_fedadam", ckpt)
        assert info.value.rounds == stop and not info.value.diverged
        assert peek_checkpoint(ckpt)["round"] == stop
        assert [r.round for r in info.value.history][-1] == stop
    res, model, seen = run_case("ft_fedadam", ckpt)
    assert seen == [4, 5, 6]
    ref, ref_model, _ = run_case("ft_fedadam", None)
    assert_same_run((res, model), (ref, ref_model))
    with round_limit(RoundLimit(2)):  # a finished run under a limit: nothing to stop, nothing trained
        _, _, seen = run_case("ft_fedadam", ckpt)
    assert seen == []


def test_a_non_finite_loss_stops_at_once(tmp_path: Path, monkeypatch):
    import benchmark.fl.engine as engine
    from tests.test_fl_checkpoint import run_case

    real = engine.ModelTrainer.train_round

    def nan_from_round_2(self, r, clients, lr):
        stats = real(self, r, clients, lr)
        return replace(stats, train_loss=math.nan) if r >= 1 else stats

    monkeypatch.setattr(engine.ModelTrainer, "train_round", nan_from_round_2)
    with round_limit(RoundLimit(None, stop_nonfinite=True)), pytest.raises(RoundLimitReached) as info:
        run_case("ft_fedavg", tmp_path / "run.ckpt")
    assert info.value.diverged and info.value.rounds == 2
    _, _, seen = run_case("ft_fedavg", tmp_path / "run.ckpt")  # without the limit a NaN loss trains on
    assert seen == [3, 4, 5, 6]


def _row(r: int, acc: float, loss: float = 1.0, stage: str = "train") -> dict:
    return RoundRecord(r, stage, acc, 1.0, loss, 0, 0, 0, 0.0, 0.0).as_dict()


class _Tune:
    def __init__(self, path: Path):
        self.path = path

    def checkpoint_file(self) -> Path:
        return self.path


def test_a_rung_reads_a_checkpoint_that_is_further_on_without_training(tmp_path: Path):
    """A point trained further before (a full grid, or this search before a crash) is scored from its
    checkpoint's history cut at the rung: the rows after the stage's start, the initial evaluation excluded, as
    the finished run selects; a non-finite loss before the rung is the point's divergence."""
    rows = [_row(5, 0.9, math.nan, "init"), _row(5, 0.3, math.nan), _row(6, 0.2), _row(7, 0.5), _row(8, 0.4),
            _row(9, 0.45, math.nan), _row(10, 0.1, math.nan)]  # fmt: skip
    path = tmp_path / "p.pt"
    save_checkpoint(path, {"run": {"config": {}, "method": "ft", "stage": "", "start_round": 5, "rounds": 27},
                           "round": 5, "trainer": {}, "history": rows, "costs": {}})  # fmt: skip
    assert _seen(_Tune(path), 6, "best_on_test") is None  # not that far yet
    save_checkpoint(path, {"run": {"config": {}, "method": "ft", "stage": "", "start_round": 5, "rounds": 27},
                           "round": 5 + 3, "trainer": {}, "history": rows[:5], "costs": {}})  # fmt: skip
    assert _seen(_Tune(path), 2, "best_on_test") == Progress(50.0, 2)
    assert _seen(_Tune(path), 3, "last") == Progress(40.0, 3)
    save_checkpoint(path, {"run": {"config": {}, "method": "ft", "stage": "", "start_round": 5, "rounds": 27},
                           "round": 5, "trainer": {}, "history": rows, "costs": {}})  # fmt: skip
    state = peek_checkpoint(path)
    state["round"] = 6
    save_checkpoint(path, state)
    assert _seen(_Tune(path), 6, "best_on_test") == Progress(50.0, 4, diverged=True)
    rows_only = [RoundRecord.from_dict(r) for r in rows[:3]]
    assert history_score(rows_only, "best_on_test", 5) == pytest.approx(20.0)  # the initial evaluation is not a round


# ------------------------------------------------------------------------------------------------ the plan
def _train_job(lr_from: str) -> FLTrainJob:
    return FLTrainJob(dataset="cifar10", model="squeezenet1_1", weights="substitute", preprocess="legate2023_cifar",
                      subset="all", protocol="legate2023_cifar10", algorithm="fedadam", method="ft",
                      train_precision="fp32", ptag="p", lr_from=lr_from, seed=0)  # fmt: skip


def test_lr_search_halving_plans_a_halving_choice_of_the_same_grid():
    proto = get_train_protocol("legate2023_cifar10")
    assert lr_source(proto, "fedadam", "ft", {}) == "tuned"
    assert lr_source(proto, "fedadam", "ft", {"lr_search": "halving"}) == "halving-eta3-keep2"  # keep 2 by default
    assert lr_source(proto, "fedadam", "lp5_ft", {"lr_search": "halving"}) == "tuned"  # two round stages
    job = _train_job("halving-eta3-keep1")
    choice = job.choice()
    assert isinstance(choice, LRHalvingJob) and choice in job.inputs()
    assert choice.path.endswith("/halving-eta3-keep1.json") and (choice.eta, choice.keep) == (3, 1)
    assert len(choice.grid_choice().grid()) == 20
    assert choice.plan() == [Rung(32, 20), Rung(92, 7), Rung(268, 3), Rung(800, 1)]
    assert isinstance(_train_job("tuned").choice(), LRChoiceJob)
    assert HalvingSettings.from_lr_from("halving-eta4-keep2") == HalvingSettings(4, 2)


@pytest.mark.parametrize("bad", [{"lr_search": "random"}, {"lr_halving_eta": 1}, {"lr_halving_keep": 0}])
def test_a_bad_lr_search_setting_is_one_error(bad):
    with pytest.raises(ConfigError):
        validate_config(bad)
    if "lr_search" in bad:
        with pytest.raises(ConfigError, match="lr_search"):
            lr_source(get_train_protocol("legate2023_cifar10"), "fedavg", "ft", bad)
    with pytest.raises(ConfigError):
        HalvingSettings.from_lr_from("halving-etaX-keep1")


def test_a_not_run_cell_states_the_cost_of_the_search_it_would_run(real_data_root):
    """The NOT RUN estimate counts the learning-rate search the config asks for: the full grid, or halving's
    point-rounds (a third of the 9-point grid with keep 2)."""
    from benchmark.runners.fl_train import cell_estimate

    proto = get_train_protocol("legate2023_cifar10")
    grid = cell_estimate(proto, "ft", "fedavg", 3, str(real_data_root), 224, {})
    halving = cell_estimate(proto, "ft", "fedavg", 3, str(real_data_root), 224, {"lr_search": "halving"})
    assert "3 seed(s) + a 9-point learning-rate grid:" in grid
    assert "3 seed(s) + successive halving over a 9-point learning-rate grid (3.02 full runs):" in halving
    hours = [float(t.split("≈ ")[1].split(" GPU-hours")[0]) for t in (grid, halving)]
    assert hours[1] < hours[0] / 1.5
