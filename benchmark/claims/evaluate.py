"""Evaluate claims on our results (check-report cells, figure data) and on the paper's printed values.

Per claim: each setting's operands are resolved; any NOT RUN operand makes the claim NOT RUN (reason copied
from the first such operand, with the count); otherwise the kind's evaluator decides each setting and the
claim HOLDS iff at least ``rule.fraction`` of the settings hold. The same rule run on the cells' ``paper``
values gives ``paper_verdict`` (null when an operand is figure data, which carries no printed values).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.claims.catalogue import fill, setting_label, spec_figures, spec_keys
from benchmark.claims.kinds import KINDS
from benchmark.claims.model import DOES_NOT_HOLD, HOLDS, NOT_RUN, VERDICTS, Claim, ClaimResult, NotRun
from benchmark.claims.sources import OURS, PAPER, CheckIndex, FigureStore, Resolver, evidence
from benchmark.io import atomic_write_json


def _typed_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in rule.items():
        if isinstance(v, str) and k != "direction":
            out[k] = float(v)
        else:
            out[k] = v
    return out


def _unit_mismatch(ops: Mapping[str, Any], resolver: Resolver) -> list[NotRun]:
    """A NOT RUN when the table cells of one setting's operands are in different metrics (a paper may print one
    column in GB and the next row in Mb: legate2023ws Table 1); compared numbers must share their unit."""
    metrics: dict[str, str] = {}
    for r in ops.values():
        for key in getattr(r, "keys", ()):
            metric = (resolver.checks.cells.get(key) or {}).get("metric")
            if metric:
                metrics.setdefault(str(metric), key)
    if len(metrics) < 2:
        return []
    listed = ", ".join(f"{key} is {metric}" for metric, key in metrics.items())
    return [NotRun(f"operands in different units ({listed}): a claim compares like with like", tuple(metrics.values()))]


def _run(claim: Claim, resolver: Resolver) -> tuple[str, str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(verdict, reason, evidence, per-setting records) of ``claim`` under ``resolver``'s mode."""
    kind = KINDS[claim.kind]
    ev: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    not_run: list[str] = []
    held = decided = 0
    failing: list[str] = []
    for setting in claim.settings:
        label = setting_label(setting)
        ops = {name: resolver.resolve(spec) for name, spec in fill(dict(claim.operands), setting).items()}
        suffix = f"[{label}]" if setting else ""
        ev.extend(evidence(f"{name}{suffix}", r) for name, r in ops.items())
        missing = [r for r in ops.values() if isinstance(r, NotRun)] or _unit_mismatch(ops, resolver)
        if missing:
            not_run.append(missing[0].reason)
            rows.append({"setting": label, "verdict": NOT_RUN, "detail": missing[0].reason})
            continue
        out = kind.evaluate(ops, _typed_rule(fill(dict(claim.rule), setting)))
        decided += 1
        held += out.holds
        rows.append(
            {"setting": label, "verdict": HOLDS if out.holds else DOES_NOT_HOLD, "detail": out.detail}
        )
        if not out.holds:
            failing.append(f"{label}: {out.detail}" if setting else out.detail)
    total = len(claim.settings)
    if not_run:
        more = f" (and {len(not_run) - 1} more setting(s) not run)" if len(not_run) > 1 else ""
        part = f"; {held}/{decided} of the settings that ran hold" if decided else ""
        return NOT_RUN, f"{not_run[0]}{more}{part}", ev, rows
    need = float(claim.rule["fraction"])
    verdict = HOLDS if held / total >= need - 1e-12 else DOES_NOT_HOLD
    summary = f"{held}/{total} setting(s) hold (need {need:.0%})"
    if total == 1:
        summary = rows[0]["detail"]
    elif failing:
        summary += "; not holding: " + "; ".join(failing[:4]) + (" ..." if len(failing) > 4 else "")
    return verdict, summary, ev, rows


def evaluate_claim(claim: Claim, checks: CheckIndex, figures: FigureStore) -> ClaimResult:
    """``claim`` on our values (verdict) and on the paper's printed values (paper_verdict)."""
    verdict, reason, ev, rows = _run(claim, Resolver(checks, figures, OURS))
    keys: list[str] = []
    figs: list[str] = []
    for setting in claim.settings:
        for spec in fill(dict(claim.operands), setting).values():
            keys.extend(k for k in spec_keys(spec) if k not in keys)
            figs.extend(f for f in spec_figures(spec) if f not in figs)
    if figs:
        p_verdict: str | None = None
        p_reason = "operands include figure data, which carries no printed paper values"
    else:
        pv, p_reason, _, _ = _run(claim, Resolver(checks, figures, PAPER))
        p_verdict = None if pv == NOT_RUN else pv
    return ClaimResult(
        claim,
        verdict,
        reason,
        KINDS[claim.kind].describe(claim.rule),
        tuple(ev),
        tuple(rows),
        tuple(keys),
        tuple(figs),
        p_verdict,
        p_reason,
    )


def evaluate_paper(claims: list[Claim], checks: CheckIndex, figures: FigureStore) -> dict[str, Any]:
    """The results/claims/<paper>.json document for one paper's claims."""
    results = [evaluate_claim(c, checks, figures) for c in claims]
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    paper_counts = {v: sum(r.paper_verdict == v for r in results) for v in (HOLDS, DOES_NOT_HOLD)}
    return {
        "paper": claims[0].paper if claims else "",
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "counts": counts,
        "paper_counts": paper_counts,
        "claims": [r.to_json() for r in results],
    }


def write_reports(
    catalogue: Mapping[str, list[Claim]], checks: CheckIndex, figures: FigureStore, out: str | Path
) -> dict[str, dict[str, Any]]:
    """Evaluate every paper's claims and write ``out/<paper>.json`` atomically; returns the documents."""
    docs = {paper: evaluate_paper(claims, checks, figures) for paper, claims in catalogue.items()}
    for paper, doc in docs.items():
        atomic_write_json(Path(out) / f"{paper}.json", doc)
    return docs
