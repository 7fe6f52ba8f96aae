"""Successive halving over a paper's learning-rate grid: the same choice as the full grid for a fraction of its
training, when the grid's winner is not a late starter (issue 28).

The full grid (:mod:`benchmark.fl.train_tuning`) trains every grid point for the protocol's ``R`` rounds on the
validation split and takes the highest selected validation accuracy. Successive halving (Jamieson & Talwalkar
2016; Li et al. 2018's inner loop) trains all ``n`` points for a short rung, keeps the best ``1/eta`` of them,
trains the survivors further, and so on; the last rung trains the survivors to the full ``R`` rounds, and the
choice is made among those full-length runs **by the full grid's rule** (:func:`benchmark.fl.train_tuning.choose_lr`:
highest selected validation accuracy, ties to the first in grid order).

* **Rungs** (:func:`rungs`): the survivors of rung ``k + 1`` are ``max(ceil(n_k / eta), keep)``; the last rung
  has at most ``keep`` points and runs ``R`` rounds; rung ``k`` runs ``R / eta^(K - k)`` rounds, rounded up to a
  multiple of the evaluation interval (so its score is an evaluation the full run also makes) and at least one
  interval. Example, 9 points, ``eta = 3``, ``keep = 1``: 9 points to ``R/9``, 3 to ``R/3``, 1 to ``R``.
* **A point continues; it never restarts.** Rung ``k`` runs the grid point's own training with a
  :class:`~benchmark.federated.loop.RoundLimit`; its checkpoint is written at the stop, and the next rung resumes
  it. A survivor's full-length run is therefore the very run the full grid makes of that point, bit for bit
  (same file, same numbers), and the total training is ``sum_k n_k (r_k - r_{k-1})`` rounds: 9 points, ``eta =
  3``: ``7R/3`` instead of ``9R`` (3.9x less); 20 points: ``70R/27`` instead of ``20R`` (7.7x less).
* **A rung's score** is the selection rule applied to the evaluations so far (best: the highest so far; last:
  the latest). With the best-so-far rule a point's score only rises, so a point eliminated at rung ``k`` would
  have had to overtake the survivors later.
* **Non-finite loss**: a point whose training loss becomes NaN or infinite stops at once (its weights are lost);
  its score is what it reached before, final (it trains no more). It keeps competing with that score, as in the
  full grid, where its later evaluations (chance level) do not raise its best.

**Where it can differ from the full grid.** Only when the full grid's winner ranks below the survivors at some
rung: a slow starter (typically the smallest learning rates, whose accuracy rises late) or a point whose best
validation accuracy comes late under the ``last`` rule. The record keeps every rung's scores and every
eliminated point, so such a case shows; a full grid of the same cell gives the exact comparison
(:func:`agrees_with_grid`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.errors import ConfigError

#: Points are (client_lr, server_lr) pairs in grid order.
Point = tuple[float, float]


@dataclass(frozen=True)
class Rung:
    """One rung: ``points`` of the grid trained to ``rounds`` rounds (of the full ``R``)."""

    rounds: int
    points: int


def rungs(n: int, full_rounds: int, *, eta: int = 3, keep: int = 1, interval: int = 1) -> list[Rung]:
    """The rungs of a search over ``n`` points (module docstring). ``interval``: the evaluation interval in
    rounds; every rung but the last ends on one. One point (or ``keep >= n``) is one rung of ``R`` rounds."""
    if eta < 2:
        raise ConfigError(f"halving eta {eta} must be an integer >= 2", "e.g. eta=3")
    if keep < 1:
        raise ConfigError(f"halving keep {keep} must be >= 1 (the full-length runs the rule picks among)", "e.g. keep=1")
    if n < 1 or full_rounds < 1 or interval < 1:
        raise ConfigError(f"a search needs points, rounds and an interval >= 1 (got {n}, {full_rounds}, {interval})",
                          "check the protocol's grid and rounds")  # fmt: skip
    counts = [n]
    while counts[-1] > keep:
        counts.append(max(math.ceil(counts[-1] / eta), keep))
    steps = len(counts) - 1
    out: list[Rung] = []
    for k, count in enumerate(counts):
        if k == steps:
            rounds = full_rounds
        else:
            raw = full_rounds / eta ** (steps - k)
            rounds = min(max(interval, math.ceil(raw / interval) * interval), full_rounds)
        if out and rounds <= out[-1].rounds:  # too few rounds to separate the rungs: merge into the later one
            out.pop()
        out.append(Rung(rounds, count))
    return out


def rounds_spent(plan: Sequence[Rung]) -> int:
    """Point-rounds the search trains (points continue from the previous rung)."""
    total, before = 0, 0
    for r in plan:
        total += r.points * (r.rounds - before)
        before = r.rounds
    return total


@dataclass(frozen=True)
class Progress:
    """Where one point stands after a rung: its score (selected validation accuracy, percent; NaN when it has
    none), the rounds trained, and whether it stopped for a non-finite loss (``diverged``: final)."""

    score: float
    rounds: int
    diverged: bool = False


@dataclass
class Search:
    """The outcome of :func:`successive_halving`: every rung's scores, the eliminated points, the full-length
    survivors (in grid order) and the training spent."""

    rungs: list[dict[str, Any]] = field(default_factory=list)
    eliminated: list[dict[str, Any]] = field(default_factory=list)
    finalists: list[Point] = field(default_factory=list)
    rounds_spent: int = 0


def _rank_key(order: dict[Point, int], progress: dict[Point, Progress]) -> Callable[[Point], tuple[int, float, int]]:
    def key(p: Point) -> tuple[int, float, int]:
        s = progress[p].score
        return (1 if math.isnan(s) else 0, 0.0 if math.isnan(s) else -s, order[p])  # NaN last

    return key


def successive_halving(points: Sequence[Point], plan: Sequence[Rung],
                       advance: Callable[[Point, int], Progress]) -> Search:  # fmt: skip
    """Run the search: ``advance(point, rounds)`` trains ``point`` on to ``rounds`` rounds (continuing) and says
    where it stands. Survivors of each rung: the ``next rung's points`` best scores (NaN last, ties to the
    first in grid order); a diverged point is not trained again (its score is final) but keeps competing."""
    if len(set(points)) != len(points):
        raise ConfigError("the learning-rate grid has a repeated point", "fix the protocol's grid")
    order = {p: i for i, p in enumerate(points)}
    alive = list(points)
    progress: dict[Point, Progress] = {}
    out = Search()
    for k, rung in enumerate(plan):
        trained = 0
        for p in alive:
            prev = progress.get(p)
            if prev is not None and prev.diverged:
                continue
            progress[p] = advance(p, rung.rounds)
            trained += progress[p].rounds - (prev.rounds if prev else 0)
        out.rounds_spent += trained
        scores = [{"client_lr": p[0], "server_lr": p[1], "val_accuracy": progress[p].score,
                   "rounds": progress[p].rounds, "diverged": progress[p].diverged} for p in alive]  # fmt: skip
        last = k == len(plan) - 1
        keep = len(alive) if last else plan[k + 1].points
        ranked = sorted(alive, key=_rank_key(order, progress))
        survivors = sorted(ranked[:keep], key=order.__getitem__)
        for p in ranked[keep:]:
            out.eliminated.append({"client_lr": p[0], "server_lr": p[1], "rung": k, "rounds": progress[p].rounds,
                                   "val_accuracy": progress[p].score, "diverged": progress[p].diverged})  # fmt: skip
        out.rungs.append({"rung": k, "rounds": rung.rounds, "points": scores, "trained_rounds": trained,
                          "kept": [list(p) for p in survivors]})  # fmt: skip
        alive = survivors
    out.finalists = alive
    return out


def agrees_with_grid(search_record: dict[str, Any], grid_record: dict[str, Any]) -> dict[str, Any]:
    """Compare a halving choice with a full-grid choice of the same cell (both records as written): whether the
    choices agree, the grid winner's fate in the search (the rung where it was eliminated, if it was), and the
    grid's accuracies of the finalists."""
    h, g = search_record["choice"], grid_record["choice"]
    win = (float(g["client_lr"]), float(g["server_lr"]))
    fate = next((e for e in search_record["search"]["eliminated"]
                 if (float(e["client_lr"]), float(e["server_lr"])) == win), None)  # fmt: skip
    return {"agree": (float(h["client_lr"]), float(h["server_lr"])) == win,
            "halving": [h["client_lr"], h["server_lr"]], "grid": [g["client_lr"], g["server_lr"]],
            "grid_winner_eliminated_at": fate}  # fmt: skip

