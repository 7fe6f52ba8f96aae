"""Choosing a learning rate the paper tuned without printing it (legate2023 App. B grids), on a validation split:
the full grid (:func:`choose_lr`) or successive halving over it (:func:`run_search`, :mod:`benchmark.fl.lr_halving`).

Every grid point is one training run of the method on the training split minus a stratified validation share
(:func:`benchmark.data.subsets.validation_split`, seed 0), evaluated on that share with the protocol's own
selection rule (best-on-validation for best-on-test protocols), never on the test set
(:class:`benchmark.runners.fl_train.FLTuneJob`). :func:`choose_lr` takes the point with the highest selected
validation accuracy; ties go to the first point in grid order. The record keeps every point's accuracy, so the
choice can be audited, and may be committed to ``benchmark/fl/lr_grid/train/`` to skip re-tuning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.fl.lr_halving import Point, Progress, Rung, successive_halving
from benchmark.io import atomic_write_json
from benchmark.provenance import git_commit, machine


def choose_lr(
    points: Sequence[tuple[float, float, Path]], *, out: str | Path, what: Mapping[str, Any]
) -> dict[str, Any]:
    """Read each grid point's tidy CSV (``accuracy`` on validation) and write the choice JSON to ``out``."""
    grid: list[dict[str, Any]] = []
    for client_lr, server_lr, path in points:
        value = tidy_accuracy(path)
        grid.append(
            {"client_lr": client_lr, "server_lr": server_lr, "val_accuracy": value, "file": str(path)}
        )
    record = choice_record(grid, what)
    atomic_write_json(out, record, checksum=True)
    return record


def tidy_accuracy(path: str | Path) -> float:
    """The ``accuracy`` row of a grid point's tidy CSV (the selected validation accuracy, percent)."""
    from benchmark.tidy import read_tidy  # local: heavy import (pandas)

    rows = read_tidy(path)
    acc = rows[rows["metric"] == "accuracy"]["value"]
    if acc.empty:
        raise ConfigError(f"{path}: no accuracy row", "delete it and re-run that grid point")
    return float(acc.iloc[0])


def choice_record(grid: Sequence[Mapping[str, Any]], what: Mapping[str, Any]) -> dict[str, Any]:
    """The choice among ``grid`` (entries with ``client_lr``, ``server_lr``, ``val_accuracy``, in grid order):
    the highest validation accuracy, ties to the first; NaN (diverged) never wins."""
    finite = [g for g in grid if not math.isnan(g["val_accuracy"])]
    if not finite:
        raise ConfigError(f"every grid point of {dict(what)} diverged (NaN accuracy)", "widen the grid")
    best = max(finite, key=lambda g: g["val_accuracy"])  # ties: the first in grid order
    return {
        **dict(what),
        "choice": {"client_lr": best["client_lr"], "server_lr": best["server_lr"]},
        "val_accuracy": best["val_accuracy"],
        "selection": "highest selected validation accuracy; ties: first in grid order",
        "grid": [dict(g) for g in grid],
        "git_commit": git_commit(),
        "machine": machine(),
    }


def history_score(history: Sequence[Any], selection: str, start_round: int) -> float:
    """A stopped run's score (percent): the selection rule over the evaluated rows of its last stage after
    ``start_round`` so far (``best_on_test``: the highest; else the latest), as the finished run selects
    (:func:`benchmark.fl.engine.summarise`); NaN when none is evaluated yet."""
    if not history:
        return math.nan
    stage = history[-1].stage
    accs = [r.test_acc for r in history if r.stage == stage and r.round > start_round and not math.isnan(r.test_acc)]
    if not accs:
        return math.nan
    return 100.0 * (max(accs) if selection == "best_on_test" else accs[-1])


def _seen(tune: Any, rounds: int, selection: str) -> Progress | None:
    """Where ``tune``'s checkpoint already stands at ``rounds`` rounds of its stage (the rows it holds, cut at that
    round, or at a non-finite loss before it), or None when it has not got that far."""
    from benchmark.federated.checkpoint import peek_checkpoint  # local: heavy import (torch)
    from benchmark.federated.history import RoundRecord

    state = peek_checkpoint(tune.checkpoint_file())
    if state is None or state["round"] < rounds:
        return None
    start = int(state["run"]["start_round"])
    rows = [RoundRecord.from_dict(d) for d in state["history"]]
    stage = rows[-1].stage if rows else ""
    kept = []
    for r in rows:
        if r.stage == stage and r.round > start + rounds:
            break
        kept.append(r)
        if r.stage == stage and r.round > start and not math.isfinite(r.train_loss):
            return Progress(history_score(kept, selection, start), r.round - start, diverged=True)
    return Progress(history_score(kept, selection, start), rounds)


def run_search(job: Any, grid: Sequence[Any], plan: Sequence[Rung], config: Any, *, out: str) -> dict[str, Any]:
    """Run the search of ``job`` (:class:`benchmark.runners.fl_train.LRHalvingJob`) over its ``grid`` (the
    :class:`~benchmark.runners.fl_train.FLTuneJob` of each point) and write its record to ``out``."""
    from benchmark.federated.loop import RoundLimit, RoundLimitReached, round_limit  # local: heavy (torch)
    from benchmark.fl.train_protocols import get_train_protocol

    proto = get_train_protocol(job.protocol)
    selection = proto.fl_config(job.method, job.algorithm, seed=0, client_lr=grid[0].client_lr,
                                server_lr=grid[0].server_lr).selection  # fmt: skip
    full = plan[-1].rounds
    by_point = {(float(g.client_lr), float(g.server_lr)): g for g in grid}

    def advance(p: Point, rounds: int) -> Progress:
        tune = by_point[p]
        seen = _seen(tune, rounds, selection)
        if seen is not None:  # trained this far before (a full grid, or this search before a crash): no training
            if rounds < full or seen.diverged:
                return seen
            if Path(tune.path).is_file():
                return Progress(tidy_accuracy(tune.path), full)
        if rounds >= full:  # the grid point's own full-length run (resumed): its outputs, as the full grid's
            tune.execute(config)
            return Progress(tidy_accuracy(tune.path), full)
        try:
            with round_limit(RoundLimit(rounds, stop_nonfinite=True)):
                tune.execute(config)
        except RoundLimitReached as stop:
            return Progress(history_score(stop.history, selection, stop.start_round), stop.rounds, stop.diverged)
        return Progress(tidy_accuracy(tune.path), full)  # pragma: no cover - a rung never reaches the end

    search = successive_halving(list(by_point), plan, advance)
    final = {(e["client_lr"], e["server_lr"]): e for e in search.rungs[-1]["points"]}
    entries = []
    for p in search.finalists:
        e = final[p]
        done = e["rounds"] >= full and not e["diverged"]
        entries.append({"client_lr": p[0], "server_lr": p[1], "val_accuracy": e["val_accuracy"],
                        "file": by_point[p].path if done else None,
                        **({} if done else {"diverged_at_round": e["rounds"]})})  # fmt: skip
    what = {"protocol": job.protocol, "algorithm": job.algorithm, "method": job.method}
    record = choice_record(entries, what)
    record["selection"] = "highest selected validation accuracy among the full-length survivors; ties: first in grid order"
    record["search"] = {
        "rule": "successive halving (benchmark/fl/lr_halving.py): keep the best 1/eta of each rung (NaN last, ties "
                "to the first in grid order), continue them from their checkpoints; the last rung runs the full "
                "rounds",
        "eta": job.eta, "keep": job.keep, "grid_points": len(grid), "full_rounds": full,
        "plan": [{"rounds": r.rounds, "points": r.points} for r in plan],
        "rungs": search.rungs, "eliminated": search.eliminated,
        "point_rounds_trained": search.rounds_spent, "full_grid_point_rounds": len(grid) * full,
    }  # fmt: skip
    atomic_write_json(out, record, checksum=True)
    return record
