"""The claim catalogue's types (issue 14: claims as checks).

A :class:`Claim` is one comparative statement of a paper, read operationally: a ``kind`` (an evaluator of
:mod:`benchmark.claims.kinds`), named operand specs (check-report cells, figure data, constants, differences),
rule parameters, and the settings it ranges over. Resolved operands are :class:`Sample` (one number per seed)
or :class:`Curve` (y over x); an operand that was not run resolves to :class:`NotRun` with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

HOLDS = "HOLDS"
DOES_NOT_HOLD = "DOES NOT HOLD"
NOT_RUN = "NOT RUN"
VERDICTS = (HOLDS, DOES_NOT_HOLD, NOT_RUN)


@dataclass(frozen=True)
class Claim:
    """One catalogue entry (``claims/<paper>.yaml``); ``operands`` and ``settings`` are still templates."""

    id: str
    paper: str  # the catalogue file's paper
    document: str  # short id of the text the quote is from (legate2023, legate2023ws, fedcof, ...)
    line: int  # 1-based line of the quote in ../shared/papers/<file>.txt
    quote: str
    statement: str
    kind: str
    operands: Mapping[str, Any]
    rule: Mapping[str, Any]  # the kind's defaults overridden by the entry's ``rule``
    settings: tuple[Mapping[str, str], ...]  # one mapping of template fields per setting ({} = no template)
    source: str  # the catalogue file, for error messages


@dataclass(frozen=True)
class Sample:
    """A point operand: ``values`` are per-seed (or per-row) numbers; ``se`` = std / sqrt(n) (0 for n < 2)."""

    values: tuple[float, ...]
    source: str
    keys: tuple[str, ...] = ()
    figure: str | None = None
    # a difference of two operands carries its own mean / se (not those of ``values``)
    mean_override: float | None = None
    se_override: float | None = None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        if self.mean_override is not None:
            return self.mean_override
        return sum(self.values) / len(self.values)

    @property
    def std(self) -> float:
        """Sample standard deviation (ddof = 1); 0 with fewer than two values."""
        if self.n < 2:
            return 0.0
        m = sum(self.values) / self.n
        return math.sqrt(sum((v - m) ** 2 for v in self.values) / (self.n - 1))

    @property
    def se(self) -> float:
        if self.se_override is not None:
            return self.se_override
        return self.std / math.sqrt(self.n) if self.n >= 2 else 0.0

    @property
    def has_spread(self) -> bool:
        """Whether an SE is known: two or more values (or a difference of operands that have one)."""
        return self.se_override is not None or self.n >= 2


@dataclass(frozen=True)
class Curve:
    """A series operand: y (mean over seeds/rows) over x, sorted by x; ``se`` per point (0 when unknown)."""

    xs: tuple[float | str, ...]
    ys: tuple[float, ...]
    ses: tuple[float, ...]
    source: str
    keys: tuple[str, ...] = ()
    figure: str | None = None


@dataclass(frozen=True)
class NotRun:
    """An operand that could not be resolved to numbers; ``reason`` says why (copied from the cell)."""

    reason: str
    keys: tuple[str, ...] = ()
    figure: str | None = None


Resolved = Sample | Curve | NotRun


@dataclass(frozen=True)
class SettingOutcome:
    """One setting's result: ``holds`` and the numbers that decided it."""

    holds: bool
    detail: str


@dataclass(frozen=True)
class ClaimResult:
    """A claim evaluated on our values and on the paper's printed values."""

    claim: Claim
    verdict: str
    reason: str
    rule_text: str
    evidence: tuple[Mapping[str, Any], ...]
    settings: tuple[Mapping[str, Any], ...]
    keys: tuple[str, ...]
    figures: tuple[str, ...]
    paper_verdict: str | None
    paper_reason: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record of results/claims/<paper>.json (its fields: claims/README.md and docs/report.md)."""
        c = self.claim
        return {
            "id": c.id,
            "paper": c.paper,
            "document": c.document,
            "line": c.line,
            "quote": c.quote,
            "statement": c.statement,
            "kind": c.kind,
            "rule": self.rule_text,
            "rule_params": dict(c.rule),
            "verdict": self.verdict,
            "reason": self.reason,
            "evidence": [dict(e) for e in self.evidence],
            "settings": [dict(s) for s in self.settings],
            "figure": self.figures[0] if self.figures else None,
            "figures": list(self.figures),
            "tables": list(self.keys),
            "paper_verdict": self.paper_verdict,
            "paper_reason": self.paper_reason,
        }
