"""The tolerance policy of ``expected/README.md`` as code: one verdict per reported cell.

Verdicts (:class:`Status`):

* ``PASS`` / ``FAIL`` -- accuracy with the paper's own weights:
  pass iff ``|ours - paper| <= max(2 * sqrt(sigma_paper**2 + sigma_ours**2), 1.0)`` points.
* ``SUBSTITUTE-PASS`` / ``SUBSTITUTE-FAIL`` -- accuracy with substitute weights: pass iff ``|ours - paper| <= 3.0``
  points, whatever the standard deviations.
* cost and count cells (bytes, FLOPs, F units, MB, GB, rounds, counts): pass iff our value, rounded to the
  printed precision of the paper's string, equals the printed number (``PASS``/``FAIL``, or the
  ``SUBSTITUTE-`` form when the run used substitute weights).
* ``PASS*`` / ``SUBSTITUTE-PASS*`` -- the value matches only under a named departure from the paper's stated
  setup (``benchmark/costs/conventions.py``: participation ignored, Table 4 rounds swapped, compute counted in
  dataset passes, a head bias charged, ...); the reason names the departure(s). Counted apart from ``PASS``
  everywhere: the paper's stated setup alone does not give the printed number.
* ``NOT RUN`` -- a cell whose protocol cannot run here; it always carries the reason and is never a pass.

Definitions used throughout (also written in ``expected/README.md``):

* ``sigma_ours`` is the sample standard deviation (ddof=1) of our per-seed values; with one seed it is
  defined as 0.0 (no spread can be estimated, so the tolerance rests on ``sigma_paper`` and the 1-point
  floor), and :attr:`Verdict.n_ours` records the single seed.
* ``sigma_paper`` is the paper's std only when it is a spread over **seeds** (``std_over: seeds``). A std
  over clients (FedBABU reports the spread of per-client accuracies) or of unknown meaning describes
  something else than the uncertainty of the mean and is not used (taken as 0).
* Floating-point comparisons allow 1e-9 slack so that e.g. a difference of exactly 1.0 point passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from enum import StrEnum

from benchmark.errors import ConfigError
from benchmark.expected import ReportedCell, parse_printed_number, truncated_thousands_agree
from benchmark.reasons import NotRunReason, ReasonKind

__all__ = [
    "ACCURACY_FLOOR",
    "DEPARTURE_PASSES",
    "SIGMA_FACTOR",
    "SUBSTITUTE_TOLERANCE",
    "Status",
    "Verdict",
    "accuracy_tolerance",
    "judge",
    "ours_stats",
    "paper_seed_std",
    "round_like_printed",
    "shown_status",
]

#: Minimum accuracy tolerance in points, with the paper's own weights.
ACCURACY_FLOOR = 1.0
#: Multiplier of the combined standard deviation.
SIGMA_FACTOR = 2.0
#: Flat accuracy tolerance in points when substitute weights are used.
SUBSTITUTE_TOLERANCE = 3.0
_SLACK = 1e-9


class Status(StrEnum):
    """The seven verdicts; the value is how a report prints them."""

    PASS = "PASS"
    FAIL = "FAIL"
    SUBSTITUTE_PASS = "SUBSTITUTE-PASS"
    SUBSTITUTE_FAIL = "SUBSTITUTE-FAIL"
    NOT_RUN = "NOT RUN"
    PASS_DEPARTURE = "PASS*"
    SUBSTITUTE_PASS_DEPARTURE = "SUBSTITUTE-PASS*"


#: Verdicts that match the printed value only under a named departure from the stated setup.
DEPARTURE_PASSES = (Status.PASS_DEPARTURE, Status.SUBSTITUTE_PASS_DEPARTURE)


@dataclass(frozen=True)
class Verdict:
    """The judgement of one cell.

    ``delta`` is ``ours_mean - paper_mean``; ``tolerance`` is the bound it was held to (for exact cells:
    half a unit of the last printed digit, informational, the decision is the rounded equality shown in
    ``ours_printed``). ``paper_std_used`` is the paper std that entered the tolerance (0.0 when it is not a
    seed std). Fields are ``None`` where they do not apply (a NOT RUN cell has no ``ours_*``).
    """

    cell: str
    status: Status
    rule: str
    paper_mean: float | None
    paper_std_used: float | None
    ours_mean: float | None
    ours_std: float | None
    n_ours: int
    delta: float | None
    tolerance: float | None
    ours_printed: str | None = None
    reason: str | None = None
    #: The typed reason of a NOT RUN cell (``reason`` is its text); ``None`` otherwise.
    not_run: NotRunReason | None = None

    @property
    def passed(self) -> bool:
        """True when our value matches the printed one: PASS, SUBSTITUTE-PASS and their ``*`` forms (which
        match only under a named departure, see :attr:`departed`); never for NOT RUN."""
        return self.status in (Status.PASS, Status.SUBSTITUTE_PASS, *DEPARTURE_PASSES)

    @property
    def departed(self) -> bool:
        """True for PASS* / SUBSTITUTE-PASS*: a match only under a named departure."""
        return self.status in DEPARTURE_PASSES


def ours_stats(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean, sample std (ddof=1; 0.0 for a single seed) and count of our per-seed values.

    Raises :class:`ConfigError` on an empty sequence or a non-finite value.
    """
    xs = [float(v) for v in values]
    if not xs:
        raise ConfigError("ours_values is empty", "pass one value per seed, or not_run_reason")
    if not all(math.isfinite(x) for x in xs):
        raise ConfigError(
            f"ours_values contains a non-finite value: {xs}", "a failed run is NOT RUN, with its reason"
        )
    n = len(xs)
    mean = math.fsum(xs) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    return mean, std, n


def _rounded(value: float, printed: str, truncated: bool, column_decimals: int | None) -> Decimal:
    """``value`` at the printed precision: :meth:`PrintedNumber.rounded` (the one rounding rule), or for a
    ``truncated`` paper string rounded to ``column_decimals`` and then cut, as the text conversion did."""
    p = parse_printed_number(printed)
    if not truncated:
        return p.rounded(value)
    if column_decimals is None:
        raise ConfigError(f"truncated printed value {printed!r} needs column_decimals", "see expected/README.md")
    scaled = Decimal(repr(float(value))).scaleb(-p.exponent)
    scaled = scaled.quantize(Decimal(1).scaleb(-column_decimals), rounding=ROUND_HALF_UP)
    return scaled.quantize(Decimal(1).scaleb(-p.decimals), rounding=ROUND_DOWN)


def round_like_printed(
    value: float, printed: str, *, truncated: bool = False, column_decimals: int | None = None
) -> str:
    """``value`` written at the precision of the paper string ``printed`` (same exponent / ``k`` / decimals).

    Rounds half up. For a ``truncated`` paper string (cut by the text conversion) the value is first rounded
    to ``column_decimals`` and then cut (rounded down) to the printed decimals, as the conversion did.
    """
    p = parse_printed_number(printed)
    text = f"{_rounded(value, printed, truncated, column_decimals):f}"
    if printed.endswith("k"):
        return f"{text}k"
    if "×10^" in printed:
        return f"{text}×10^{p.exponent}"
    return text


def judge(
    cell: ReportedCell,
    ours_values: Sequence[float] | None,
    *,
    substitute: bool,
    not_run_reason: NotRunReason | None,
    departures: Sequence[str] = (),
) -> Verdict:
    """Verdict for one reported cell (tolerance policy of ``expected/README.md``).

    ``ours_values``: our result per seed, in the cell's unit (accuracy in percent points, GB for
    ``comm_gb``...), or ``None`` together with a ``not_run_reason`` (a typed
    :class:`~benchmark.reasons.NotRunReason`). Giving both, or neither, is a :class:`ConfigError`: a cell is
    either run or explicitly not run. ``substitute`` marks a run with
    substitute weights (the flat 3-point rule for accuracy; the SUBSTITUTE- label for every cell).
    An illegible paper value cannot be judged and gives NOT RUN with that reason.

    ``departures``: the named departures from the paper's stated setup under which ``ours_values`` were
    computed (``benchmark/costs/conventions.py``). A match under any is ``PASS*`` (or ``SUBSTITUTE-PASS*``)
    with the names in ``reason``; a printed ``k`` value that our value gives only when cut, not rounded,
    adds ``printed_truncated`` (:func:`benchmark.expected.truncated_thousands_agree`).
    """
    if not_run_reason is not None:
        if not isinstance(not_run_reason, NotRunReason):
            raise ConfigError(f"{cell.key}: not_run_reason must be a NotRunReason, got {not_run_reason!r}",
                              "say why it cannot run with a typed reason (benchmark/reasons.py)")  # fmt: skip
        if ours_values is not None:
            raise ConfigError(
                f"{cell.key}: both ours_values and not_run_reason given", "a cell is either run or not run"
            )
        return _not_run(cell, not_run_reason)
    if ours_values is None:
        raise ConfigError(
            f"{cell.key}: no ours_values and no not_run_reason", "pass the per-seed values or a reason"
        )
    mean, std, n = ours_stats(ours_values)
    if cell.mean is None:
        why = NotRunReason(ReasonKind.ILLEGIBLE, "the printed value", f"paper value illegible (raw: {cell.raw!r})")
        return _not_run(cell, why, ours=(mean, std, n))
    delta = mean - cell.mean
    if cell.comparison == "exact":
        ours_printed = round_like_printed(
            mean, cell.printed, truncated=cell.truncated, column_decimals=cell.column_decimals
        )
        p = parse_printed_number(cell.printed)
        ok = _rounded(mean, cell.printed, cell.truncated, cell.column_decimals) == p.mantissa
        unit = 1.0 if cell.truncated else 0.5
        deps = list(departures)
        if not ok and not cell.truncated and truncated_thousands_agree(mean, cell.printed):
            ok, unit = True, 1.0
            deps.append("printed_truncated")
            ours_printed = f"{cell.printed} (cut from {mean:,.0f})"
        tol = unit * float(Decimal(1).scaleb(p.exponent - p.decimals))
        return _verdict(cell, _status(ok, substitute, deps), "exact-at-printed-precision", None, (mean, std, n),
                        delta, tol, departures=deps, ours_printed=ours_printed)  # fmt: skip
    paper_std = paper_seed_std(cell)
    if substitute:
        tol = SUBSTITUTE_TOLERANCE
        rule = "substitute-accuracy"
    else:
        tol = accuracy_tolerance(paper_std, std)
        rule = "accuracy"
    ok = abs(delta) <= tol + _SLACK
    return _verdict(cell, _status(ok, substitute, departures), rule, paper_std, (mean, std, n), delta, tol,
                    departures=departures)  # fmt: skip


def paper_seed_std(cell: ReportedCell) -> float:
    """``sigma_paper``: the printed std when it is a spread over seeds, else 0 (module docstring)."""
    return cell.std if (cell.std is not None and cell.std_over == "seeds") else 0.0


def accuracy_tolerance(paper_std: float, ours_std: float) -> float:
    """The accuracy tolerance with the paper's weights: ``max(2 * sqrt(sigma_paper**2 + sigma_ours**2), 1.0)``."""
    return max(SIGMA_FACTOR * math.sqrt(paper_std**2 + ours_std**2), ACCURACY_FLOOR)


def shown_status(status: str, recorded: bool) -> str:
    """A verdict as tables, pages and the report show it: ``PASS (recorded)``, ``FAIL (recorded)``,
    ``PASS* (recorded)``... for a cell whose runs were filled from the ledger of recorded runs (issue 24), the
    plain status otherwise (and always for NOT RUN). The checks JSON keeps the plain status in ``verdict``
    (with ``provenance: recorded``), so that the gates and claims read it unchanged."""
    return f"{status} (recorded)" if recorded and status != Status.NOT_RUN else status


def _status(ok: bool, substitute: bool, departures: Sequence[str] = ()) -> Status:
    if ok and departures:
        return Status.SUBSTITUTE_PASS_DEPARTURE if substitute else Status.PASS_DEPARTURE
    if substitute:
        return Status.SUBSTITUTE_PASS if ok else Status.SUBSTITUTE_FAIL
    return Status.PASS if ok else Status.FAIL


def _departure_reason(departures: Sequence[str]) -> str:
    """``matches only under <name> (<description>), ...`` for a ``PASS*`` cell."""
    from benchmark.costs.conventions import DEPARTURES  # local: heavy import (torch, torchvision)

    names = list(dict.fromkeys(departures))
    parts = [f"{n} ({DEPARTURES[n].description})" if n in DEPARTURES else n for n in names]
    return "matches only under a departure from the stated setup: " + "; ".join(parts)


def _not_run(cell: ReportedCell, reason: NotRunReason, ours: tuple[float, float, int] | None = None) -> Verdict:
    stats = ours if ours is not None else (None, None, 0)
    return _verdict(cell, Status.NOT_RUN, "not-run", None, stats, None, None, not_run=reason)


def _verdict(
    cell: ReportedCell, status: Status, rule: str, paper_std: float | None,
    ours: tuple[float | None, float | None, int], delta: float | None, tolerance: float | None, *,
    departures: Sequence[str] = (), ours_printed: str | None = None, not_run: NotRunReason | None = None,
) -> Verdict:
    """The one place a :class:`Verdict` is made: ``ours`` is (mean, std, n); its ``reason`` is the NOT RUN
    reason's text, or for ``PASS*`` / ``SUBSTITUTE-PASS*`` the departures it matches under."""
    mean, std, n = ours
    if not_run is not None:
        reason: str | None = not_run.render()
    else:
        reason = _departure_reason(departures) if status in DEPARTURE_PASSES else None
    return Verdict(cell.key, status, rule, cell.mean, paper_std, mean, std, n, delta, tolerance, ours_printed, reason,
                   not_run)  # fmt: skip
