"""The claim kinds: one evaluator each, with its statistical rule stated in words (``describe``).

Every evaluator decides one *setting* (e.g. one dataset x model) from resolved operands; the claim's verdict
aggregates the settings: HOLDS iff the fraction of settings that hold is at least ``fraction`` (default 1.0:
all). A setting with an operand NOT RUN makes the whole claim NOT RUN (the per-setting outcomes are still
recorded). Rules (defaults; every parameter can be overridden per claim under ``rule:``):

* ``ordering`` (a > b): d = mean(a) - mean(b); SE(d) = sqrt(s_a^2/n_a + s_b^2/n_b) (Welch) over the sides with
  two or more values (a side with one value, a closed-form cell or a constant adds nothing). HOLDS iff
  d > margin and d > z * SE(d) (z = 2). With no spread on either side: d > margin. A negative margin reads
  "not worse than |margin|" ("competitive or superior").
* ``within`` (|a - b| <= tol): equivalence: HOLDS iff |d| + z * SE(d) <= tol_eff, tol_eff = max(tol,
  rel_tol * |mean(b)|): the 2-SE interval of the difference lies inside +-tol_eff.
* ``monotone`` (series non-increasing / non-decreasing in x, in x order): every step may go the wrong way by at
  most slack + z * SE(step), SE(step) = sqrt(se_i^2 + se_{i+1}^2); ``strict`` further requires every step to
  move the right way by more than 0.
* ``fewer_rounds`` (a needs fewer rounds than b): with round cells (points), mean(a) * factor < mean(b)
  (``strict``) or <=; with curves, rounds(c) = first x where y >= target; a curve that never reaches target
  needs infinitely many rounds (a never -> DOES NOT HOLD; b never and a does -> HOLDS).
* ``cost`` (a costs at most b / factor): mean(a) * factor <= mean(b) (< with ``strict``); means only, cost
  cells are deterministic up to partition noise.
* ``ratio`` (min <= mean(a) / mean(b) <= max): means only.
* ``bound`` (min <= scale * mean(a) <= max): a derived quantity of one operand against a stated number
  (e.g. scalars per client per round = GB * 1e9 / (rounds * clients)).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmark.claims.model import Curve, Sample, SettingOutcome

POINT, CURVE, EITHER = "point", "curve", "either"


@dataclass(frozen=True)
class Kind:
    """A registered kind: its operands (name -> shape), rule defaults, required rule params, evaluator."""

    name: str
    operands: Mapping[str, str]
    defaults: Mapping[str, Any]
    required: tuple[str, ...]
    evaluate: Callable[[Mapping[str, Any], Mapping[str, Any]], SettingOutcome]
    describe: Callable[[Mapping[str, Any]], str]
    doc: str


KINDS: dict[str, Kind] = {}

COMMON = {"fraction": 1.0}


def register_kind(kind: Kind) -> Kind:
    KINDS[kind.name] = kind
    return kind


def _diff_se(a: Sample, b: Sample) -> float:
    return math.sqrt(sum(s.se**2 for s in (a, b) if s.has_spread))


def _spread(a: Sample, b: Sample) -> bool:
    return a.has_spread or b.has_spread


def _agg(rule: Mapping[str, Any]) -> str:
    f = float(rule["fraction"])
    return "in every setting" if f >= 1.0 else f"in at least {f:.0%} of the settings"


def _g(x: Any) -> str:
    """Four significant digits; a templated (per-setting) parameter is shown as written."""
    try:
        return f"{float(x):.4g}"
    except (TypeError, ValueError):
        return str(x)


# ------------------------------------------------------------------------------------------------ ordering
def _ordering(ops: Mapping[str, Any], rule: Mapping[str, Any]) -> SettingOutcome:
    a, b = ops["a"], ops["b"]
    d, se, margin, z = a.mean - b.mean, _diff_se(a, b), float(rule["margin"]), float(rule["z"])
    if _spread(a, b):
        ok = d > margin and d > z * se
        return SettingOutcome(
            ok, f"a={_g(a.mean)} b={_g(b.mean)} d={_g(d)} margin={_g(margin)} {z:g}*SE={_g(z * se)}"
        )
    return SettingOutcome(
        d > margin, f"a={_g(a.mean)} b={_g(b.mean)} d={_g(d)} margin={_g(margin)} (no spread)"
    )


register_kind(
    Kind(
        "ordering",
        {"a": POINT, "b": POINT},
        {"margin": 0.0, "z": 2.0},
        (),
        _ordering,
        lambda r: (
            f"per setting d = mean(a) - mean(b); HOLDS iff d > {_g(r['margin'])} and, when a side has "
            f">= 2 values, d > {_g(r['z'])} x SE(d) (Welch SE over the sides with >= 2 values); claim "
            f"HOLDS iff this holds {_agg(r)}"
        ),
        "a > b (optionally by a margin), over settings",
    )
)


# -------------------------------------------------------------------------------------------------- within
def _within(ops: Mapping[str, Any], rule: Mapping[str, Any]) -> SettingOutcome:
    a, b = ops["a"], ops["b"]
    d, se, z = a.mean - b.mean, _diff_se(a, b), float(rule["z"])
    tol = max(float(rule["tol"]), float(rule["rel_tol"]) * abs(b.mean))
    ok = abs(d) + z * se <= tol
    return SettingOutcome(
        ok, f"a={_g(a.mean)} b={_g(b.mean)} |d|={_g(abs(d))} {z:g}*SE={_g(z * se)} tol={_g(tol)}"
    )


register_kind(
    Kind(
        "within",
        {"a": POINT, "b": POINT},
        {"tol": 0.0, "rel_tol": 0.0, "z": 2.0},
        (),
        _within,
        lambda r: (
            f"per setting HOLDS iff |mean(a) - mean(b)| + {_g(r['z'])} x SE(d) <= max({_g(r['tol'])}, "
            f"{_g(r['rel_tol'])} x |mean(b)|) (equivalence: the {_g(r['z'])}-SE interval of the "
            f"difference inside the tolerance); claim HOLDS iff this holds {_agg(r)}"
        ),
        "|a - b| <= tol (points or relative), over settings",
    )
)


# ------------------------------------------------------------------------------------------------ monotone
def _monotone(ops: Mapping[str, Any], rule: Mapping[str, Any]) -> SettingOutcome:
    c: Curve = ops["series"]
    sign = -1.0 if rule["direction"] == "non_increasing" else 1.0
    slack, z, strict = float(rule["slack"]), float(rule["z"]), bool(rule["strict"])
    if len(c.ys) < 2:
        return SettingOutcome(False, f"series has {len(c.ys)} point(s): nothing to order")
    bad = []
    for i in range(len(c.ys) - 1):
        step = sign * (c.ys[i + 1] - c.ys[i])  # > 0: the claimed direction
        allowed = slack + z * math.sqrt(c.ses[i] ** 2 + c.ses[i + 1] ** 2)
        if step < -allowed or (strict and step <= 0):
            bad.append(f"x {c.xs[i]}->{c.xs[i + 1]}: {_g(c.ys[i])}->{_g(c.ys[i + 1])}")
    ys = ", ".join(f"{x}:{_g(y)}" for x, y in zip(c.xs, c.ys, strict=True))
    return SettingOutcome(not bad, f"y = [{ys}]" + (f"; wrong-way steps: {'; '.join(bad)}" if bad else ""))


register_kind(
    Kind(
        "monotone",
        {"series": CURVE},
        {"slack": 0.0, "z": 2.0, "strict": False},
        ("direction",),
        _monotone,
        lambda r: (
            f"per setting, in x order, every step of the series is {r.get('direction')} up to a wrong-way "
            f"move of {_g(r['slack'])} + {_g(r['z'])} x SE(step)"
            + (" and every step moves strictly the claimed way" if r.get("strict") else "")
            + f"; claim HOLDS iff this holds {_agg(r)}"
        ),
        "a series is non-increasing / non-decreasing over x",
    )
)


# -------------------------------------------------------------------------------------------- fewer_rounds
def rounds_to(c: Curve, target: float) -> float | str | None:
    """The first x at which the curve reaches ``target`` (None: never)."""
    for x, y in zip(c.xs, c.ys, strict=True):
        if y >= target:
            return x
    return None


def _fewer_rounds(ops: Mapping[str, Any], rule: Mapping[str, Any]) -> SettingOutcome:
    a, b = ops["a"], ops["b"]
    factor, strict = float(rule["factor"]), bool(rule["strict"])
    if isinstance(a, Sample) and isinstance(b, Sample):
        ra, rb = a.mean, b.mean
        ok = ra * factor < rb if strict else ra * factor <= rb
        return SettingOutcome(ok, f"rounds a={_g(ra)} b={_g(rb)}")
    if rule.get("target") is None:
        return SettingOutcome(False, "curves need rule.target")
    target = float(rule["target"])
    ra, rb = rounds_to(a, target), rounds_to(b, target)
    detail = f"target {_g(target)}: a reaches it at x={ra}, b at x={rb}"
    if ra is None:
        return SettingOutcome(False, detail + " (a never)")
    if rb is None:
        return SettingOutcome(True, detail + " (b never)")
    fa, fb = float(ra), float(rb)
    return SettingOutcome(fa * factor < fb if strict else fa * factor <= fb, detail)


register_kind(
    Kind(
        "fewer_rounds",
        {"a": EITHER, "b": EITHER},
        {"factor": 1.0, "strict": True, "target": None},
        (),
        _fewer_rounds,
        lambda r: (
            "per setting, rounds(c) = the round cell's mean, or for a curve the first x where y >= "
            f"{r.get('target')}; HOLDS iff {_g(r['factor'])} x rounds(a) "
            f"{'<' if r.get('strict') else '<='} rounds(b) (a curve never reaching the target: infinitely "
            f"many rounds); claim HOLDS iff this holds {_agg(r)}"
        ),
        "a reaches the target (or converges) in fewer rounds than b",
    )
)


# ---------------------------------------------------------------------------------------- cost, ratio, bound
def _cost(ops: Mapping[str, Any], rule: Mapping[str, Any]) -> SettingOutcome:
    a, b = ops["a"], ops["b"]
    factor = float(rule["factor"])
    ok = a.mean * factor < b.mean if rule["strict"] else a.mean * factor <= b.mean
    ratio = b.mean / a.mean if a.mean else math.inf
    return SettingOutcome(ok, f"a={_g(a.mean)} b={_g(b.mean)} b/a={_g(ratio)} factor={_g(factor)}")


register_kind(
    Kind(
        "cost",
        {"a": POINT, "b": POINT},
        {"factor": 1.0, "strict": False},
        (),
        _cost,
        lambda r: (
            f"per setting HOLDS iff {_g(r['factor'])} x mean(a) {'<' if r.get('strict') else '<='} "
            f"mean(b) (means; cost cells are deterministic); claim HOLDS iff this holds {_agg(r)}"
        ),
        "a's cost is at most b's (by a factor)",
    )
)


def _bounds(value: float, rule: Mapping[str, Any]) -> bool:
    lo, hi = rule.get("min"), rule.get("max")
    return (lo is None or value >= float(lo)) and (hi is None or value <= float(hi))


def _bounds_text(rule: Mapping[str, Any], what: str) -> str:
    lo, hi = rule.get("min"), rule.get("max")
    parts = (
        ([f"{_g(lo)} <="] if lo is not None else []) + [what] + ([f"<= {_g(hi)}"] if hi is not None else [])
    )
    return " ".join(parts)


def _ratio(ops: Mapping[str, Any], rule: Mapping[str, Any]) -> SettingOutcome:
    a, b = ops["a"], ops["b"]
    r = a.mean / b.mean if b.mean else math.inf
    return SettingOutcome(_bounds(r, rule), f"a={_g(a.mean)} b={_g(b.mean)} a/b={_g(r)}")


register_kind(
    Kind(
        "ratio",
        {"a": POINT, "b": POINT},
        {"min": None, "max": None},
        (),
        _ratio,
        lambda r: (
            f"per setting HOLDS iff {_bounds_text(r, 'mean(a)/mean(b)')}; claim HOLDS iff this holds {_agg(r)}"
        ),
        "min <= a/b <= max",
    )
)


def _bound(ops: Mapping[str, Any], rule: Mapping[str, Any]) -> SettingOutcome:
    a = ops["a"]
    v = float(rule["scale"]) * a.mean
    return SettingOutcome(_bounds(v, rule), f"a={_g(a.mean)} scale*a={_g(v)}")


register_kind(
    Kind(
        "bound",
        {"a": POINT},
        {"scale": 1.0, "min": None, "max": None},
        (),
        _bound,
        lambda r: (
            f"per setting HOLDS iff {_bounds_text(r, _g(r['scale']) + ' x mean(a)')}; claim HOLDS iff "
            f"this holds {_agg(r)}"
        ),
        "min <= scale * a <= max (a derived quantity against a stated number)",
    )
)
