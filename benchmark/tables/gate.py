"""Exit statuses of paper-table targets, and the CI gate over all of them.

* ``flb verdict <target>`` (run by the Snakemake target rule ``<target>``, after the assembly job wrote every
  output): prints the one-screen summary of :mod:`benchmark.tables.summary` and exits 1 only when a cell
  ``FAIL``s (or ``SUBSTITUTE-FAIL``s) that ``expected/known_findings.yaml`` does not list, with the same
  per-cell rule as the gate (:func:`failure_problem`); a documented FAIL is not a crash.
* ``flb ci-gate results/checks/*.json``: prints every target's verdict counts, then compares the failing
  cells with ``expected/known_findings.yaml`` and exits 1 when

  - a cell FAILs that the findings file does not list (with that verdict), or
  - a listed finding no longer occurs: its cell was checked in a tier the entry applies to and its verdict
    is another one (it passes now, it is NOT RUN, or it fails differently), or its table was not checked at
    all (pass every checks file, or ``--partial`` for a subset).

  This is strict-xfail bookkeeping: the list has to follow the results in both directions.

The findings file (``expected/known_findings.yaml``) lists observations, never edits of reported values::

    findings:
    - cell: legate2023/table2#cub200/ft/comm_gb     # ReportedCell.key
      verdict: FAIL                                 # FAIL or SUBSTITUTE-FAIL, as the checks file has it
      kind: paper-inconsistency                     # see FINDING_KINDS
      reason: Eq. 4 with torchvision's SqueezeNet 1.1 count does not give the printed GB; ...
      tiers: [ci, full]                             # optional; default: every tier
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.expected import load_all
from benchmark.schema import parse_yaml
from benchmark.tables.spec import list_specs, load_spec
from benchmark.tables.summary import VERDICTS, summary_lines

FAILING = ("FAIL", "SUBSTITUTE-FAIL")
DEPARTURE_PASSING = ("PASS*", "SUBSTITUTE-PASS*")  # a match only under a named departure (benchmark.verdict)
TIERS = ("ci", "full")
#: Why a cell may fail and still be accepted.
FINDING_KINDS = {
    "paper-inconsistency": "the paper's printed value does not follow from its own stated formula or inputs",
    "protocol-difference": "our protocol differs from the paper's in a documented way",
    "substitute-weights": "the run uses substitute weights (not the paper's checkpoint)",
    "data-unavailable": "the value depends on data that is not on this machine (e.g. a partition to replay)",
    "released-code-agrees": "the paper's released code, run beside ours on the same configuration, computes our "
    "value, not the printed one (flb peer; docs/peers.md)",
    "unexplained": "reproduced under the paper's protocol and still off; no explanation found yet",
}
DEFAULT_FINDINGS = Path(__file__).resolve().parents[2] / "expected" / "known_findings.yaml"
_KEYS = {"cell", "verdict", "kind", "reason", "tiers"}


@dataclass(frozen=True)
class Finding:
    """One known failing cell."""

    cell: str
    verdict: str
    kind: str
    reason: str
    tiers: tuple[str, ...] = TIERS


def load_findings(path: str | Path | None = None) -> list[Finding]:
    """Read and validate the findings file; one :class:`ConfigError` naming the entry and field otherwise."""
    p = Path(path) if path else DEFAULT_FINDINGS
    if not p.is_file():
        raise ConfigError(f"findings file {p} does not exist", "create it (see benchmark/tables/gate.py)")
    raw = parse_yaml(p.read_text(), str(p))
    if not isinstance(raw, Mapping) or not isinstance(raw.get("findings"), list):
        raise ConfigError(f"{p}: top level must be a mapping with a list 'findings'", "see gate.py")
    keys = {c.key for t in load_all() for c in t.cells}
    out: list[Finding] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw["findings"]):
        where = f"{p}: findings[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} is not a mapping", "write cell, verdict, kind, reason")
        unknown = set(entry) - _KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}", f"use only {sorted(_KEYS)}")
        for field in ("cell", "verdict", "kind", "reason"):
            if not isinstance(entry.get(field), str) or not entry[field].strip():
                raise ConfigError(f"{where}: field {field!r} is missing or empty", "every finding needs it")
        cell = entry["cell"]
        if cell not in keys:
            raise ConfigError(f"{where}: cell {cell!r} is not a cell of expected/", "use ReportedCell.key")
        if cell in seen:
            raise ConfigError(f"{where}: cell {cell!r} is listed twice", "keep one entry per cell")
        seen.add(cell)
        if entry["verdict"] not in FAILING:
            raise ConfigError(f"{where}: verdict {entry['verdict']!r}", f"use one of {', '.join(FAILING)}")
        if entry["kind"] not in FINDING_KINDS:
            raise ConfigError(f"{where}: kind {entry['kind']!r}", f"use one of {', '.join(FINDING_KINDS)}")
        tiers = tuple(entry.get("tiers") or TIERS)
        if not set(tiers) <= set(TIERS):
            raise ConfigError(f"{where}: tiers {list(tiers)}", f"use a subset of {list(TIERS)}")
        out.append(Finding(cell, entry["verdict"], entry["kind"], " ".join(entry["reason"].split()), tiers))
    return out


def read_checks(path: str | Path) -> dict[str, Any]:
    """A ``results/checks/<target>.json`` file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"checks file {p} does not exist", "build the table target first")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p} is not valid JSON ({exc.msg})", "rebuild the table target") from exc
    for field in ("target", "cells"):
        if field not in data:
            raise ConfigError(f"{p}: missing field {field!r}", "rebuild the table target")
    return data


def _tier(data: Mapping[str, Any]) -> str:
    """The checks file's tier (``ci`` / ``full``), without a subset note such as ``ci (stratified100 ...)``."""
    return str(data.get("tier", "full")).split(" ", 1)[0]


def _counts(data: Mapping[str, Any]) -> str:
    """The verdicts present, by the tables' names and in their order (``PASS 3, SUBSTITUTE-PASS 2, NOT RUN 9``)."""
    counts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    for c in data["cells"]:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v)


def _cell_key(data: Mapping[str, Any], c: Mapping[str, Any]) -> str:
    if "key" in c:
        return str(c["key"])
    raise ConfigError(f"checks of {data['target']} lack cell keys", "rebuild the table target")


def failure_problem(key: str, verdict: str, tier: str, listed: Mapping[str, Finding]) -> str | None:
    """Why a failing cell is not explained by the findings (None: it is); the one rule of the gate and of
    ``flb verdict``."""
    f = listed.get(key)
    if f is None or tier not in f.tiers:
        return f"unlisted {verdict}: {key} (tier {tier}); fix it or add it to the findings file"
    if f.verdict != verdict:
        return f"{key}: listed as {f.verdict}, now {verdict} (tier {tier}); update the entry"
    return None


def split_failures(
    data: Mapping[str, Any], findings: Sequence[Finding]
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """``data``'s failing cells: (explained by ``findings``, unexplained)."""
    listed = {f.cell: f for f in findings}
    explained, unexplained = [], []
    for c in data["cells"]:
        if c["verdict"] in FAILING:
            bad = failure_problem(_cell_key(data, c), str(c["verdict"]), _tier(data), listed)
            (unexplained if bad else explained).append(c)
    return explained, unexplained


def verdict_exit(
    target: str, results: str | Path = "results", findings_path: str | Path | None = None
) -> int:
    """Print ``target``'s one-screen summary; 1 when a cell FAILs that the findings file does not explain,
    else 0 (documented FAILs included)."""
    data = read_checks(Path(results) / "checks" / f"{target}.json")
    findings = load_findings(findings_path)
    _, unexplained = split_failures(data, findings)
    stale = [p for p in gate_problems([data], findings, partial=True) if p.startswith("stale finding")]
    for line in summary_lines(data, unexplained, stale):
        print(line)
    if unexplained:
        print(f"{target}: exit 1: {len(unexplained)} FAIL(s) not explained in expected/known_findings.yaml")
        return 1
    print(f"{target}: exit 0: every FAIL is a documented finding" if _any_fail(data) else f"{target}: exit 0")
    return 0


def _any_fail(data: Mapping[str, Any]) -> bool:
    return any(c["verdict"] in FAILING for c in data["cells"])


def _target_of(key: str) -> str | None:
    paper, table = key.split("#", 1)[0].split("/table", 1)
    for t in list_specs():
        spec = load_spec(t)
        if (spec.expected_paper, spec.expected_table) == (paper, table):
            return t
    return None


def gate_problems(
    checks: Sequence[Mapping[str, Any]], findings: Sequence[Finding], *, partial: bool = False
) -> list[str]:
    """Every reason the gate fails (empty: it passes). ``checks``: the loaded checks files."""
    seen: dict[str, tuple[str, str]] = {}  # cell key -> (verdict, tier)
    targets: dict[str, str] = {}
    for data in checks:
        targets[str(data["target"])] = _tier(data)
        for c in data["cells"]:
            seen[_cell_key(data, c)] = (str(c["verdict"]), _tier(data))
    listed = {f.cell: f for f in findings}
    problems: list[str] = []
    for key, (verdict, tier) in sorted(seen.items()):
        if verdict not in FAILING:
            continue
        bad = failure_problem(key, verdict, tier, listed)
        if bad:
            problems.append(bad)
    for f in findings:
        if f.cell not in seen:
            if partial:
                continue
            target = _target_of(f.cell)
            problems.append(
                f"finding {f.cell} not checked: results/checks/{target}.json was not given"
                if target not in targets
                else f"finding {f.cell}: the checks of {target} have no such cell"
            )
            continue
        verdict, tier = seen[f.cell]
        if tier in f.tiers and verdict not in FAILING:
            problems.append(
                f"stale finding {f.cell}: listed as {f.verdict}, now {verdict} (tier {tier}); remove it"
            )
    return problems


def ci_gate(
    check_paths: Sequence[str | Path], findings_path: str | Path | None = None, *, partial: bool = False
) -> int:
    """Print every target's verdicts, then the gate's problems; 1 when there is any, else 0."""
    checks = [read_checks(p) for p in sorted(map(str, check_paths))]
    findings = load_findings(findings_path)
    failing = departed = 0
    for data in checks:
        failing += sum(c["verdict"] in FAILING for c in data["cells"])
        departed += sum(c["verdict"] in DEPARTURE_PASSING for c in data["cells"])
        print(
            f"{data['target']:<24} tier {data.get('tier', '?'):<4} {len(data['cells']):>4} cells: {_counts(data)}"
        )
    problems = gate_problems(checks, findings, partial=partial)
    for p in problems:
        print(f"ci-gate: {p}")
    status = "FAILED" if problems else "OK"
    print(
        f"ci-gate: {status}: {len(checks)} targets, {failing} FAIL + SUBSTITUTE-FAIL cells, {departed} PASS* + "
        f"SUBSTITUTE-PASS* cells (a match only under a named departure), {len(findings)} known findings, "
        f"{len(problems)} problem(s)"
    )
    return 1 if problems else 0
