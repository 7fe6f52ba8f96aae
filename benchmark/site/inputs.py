"""Everything the report shows, read from ``results/`` into frozen dataclasses (issue 14).

Sources, each optional (a missing one becomes a "not built: <command>" line on the pages, never a crash):

* ``results/checks/<target>.json`` (:func:`benchmark.report.load_checks`): one check report per table target;
  the target's paper is the prefix of its cells' keys (``fedcof/table2#...``); bare ``tableN`` targets are
  legate2023 (``shared/papers/README.md``).
* ``results/claims/<paper>.json``: the claims verdicts (``flb claims``).
* ``results/figures/NAME.json`` manifests beside ``NAME.png`` (``flb figure``), plus the registry's
  :func:`benchmark.figures.registry.figure_status` for the figures that cannot run under the config. The
  registry import is guarded: without it the figures that were built are still shown.
* ``expected/known_findings.yaml`` (:func:`benchmark.tables.gate.load_findings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.expected import PAPERS
from benchmark.figures.registry import natural_key
from benchmark.report import VERDICTS, _ours, is_recorded, load_checks, paper_of_target
from benchmark.tables.gate import load_findings
from benchmark.workflow import load_config

#: Short titles of the five documents (``shared/papers/README.md``), for headings.
PAPER_TITLES: Mapping[str, str] = {
    "legate2023": "Guiding The Last Layer in Federated Learning with Pre-Trained Models (NeurIPS 2023)",
    "legate2023ws": "Guiding The Last Layer … (ICML 2023 FL workshop version)",
    "fedcof": "Covariances for Free: Exploiting Mean Distributions for FL with Pre-Trained Models (FedCOF)",
    "bernier2024": "Bernier: Efficient Fine-Tuning Strategies for Federated Learning (MSc thesis, 2024)",
    "fedbabu": "FedBABU: Toward Enhanced Representation for Federated Image Classification (ICLR 2022)",
}
TABLES_COMMAND = "snakemake --cores all all_tables"
CLAIMS_COMMAND = "flb claims --checks results/checks --figures results/figures --out results/claims"


def figure_command(name: str) -> str:
    """How one figure is built (the Snakemake target of the same name, ``flb figure`` inside)."""
    return f"snakemake --cores 1 {name}"


@dataclass(frozen=True)
class Cell:
    """One reported cell of a check report, formatted for display (numbers as the report module prints them)."""

    key: str
    row: str
    column: str
    ours: str
    paper: str
    delta: float | None
    tolerance: float | None
    verdict: str
    note: str
    reason: str
    recorded: str = ""  # the label of the recorded runs its verdict rests on (issue 24); empty: computed in the build


@dataclass(frozen=True)
class TableReport:
    """One table target's check report."""

    target: str
    paper: str
    tier: str
    cells: tuple[Cell, ...]

    def counts(self) -> dict[str, int]:
        """Cells per verdict, every verdict of :data:`benchmark.report.VERDICTS` present (0 if none)."""
        out = dict.fromkeys(VERDICTS, 0)
        for c in self.cells:
            out[c.verdict] = out.get(c.verdict, 0) + 1
        return out

    def recorded_counts(self) -> dict[str, int]:
        """Of :meth:`counts`, the cells whose verdict rests on recorded runs (shown apart)."""
        out: dict[str, int] = {}
        for c in self.cells:
            if c.recorded:
                out[c.verdict] = out.get(c.verdict, 0) + 1
        return out


@dataclass(frozen=True)
class Evidence:
    """One operand of a claim's rule with the values it was computed from."""

    operand: str
    source: str
    values: tuple[Any, ...]
    mean: float | None
    std: float | None
    n: int | None


@dataclass(frozen=True)
class Claim:
    """One claim verdict of ``results/claims/<paper>.json``."""

    id: str
    document: str
    line: int | None
    quote: str
    statement: str
    kind: str
    rule: str
    verdict: str
    reason: str
    evidence: tuple[Evidence, ...]
    figure: str | None
    tables: tuple[str, ...]


@dataclass(frozen=True)
class Reading:
    """A value the paper prints for a figure, beside ours (the manifest's ``readings``)."""

    series: str
    x: Any
    paper: float | None
    ours: float | None
    source: str


@dataclass(frozen=True)
class Figure:
    """A built figure: its manifest (``png`` is the file beside it, ``None`` if absent). ``manifest`` is False for
    a PNG found without a manifest (built before figures had manifests): only its name and file are known."""

    name: str
    paper: str
    label: str
    line: int | None
    title: str
    png: Path | None
    readings: tuple[Reading, ...] = ()
    notes: tuple[str, ...] = ()
    copies: tuple[str, ...] = ()
    inputs: tuple[tuple[str, str], ...] = ()
    provenance: Mapping[str, Any] = field(default_factory=dict)
    manifest: bool = True


@dataclass(frozen=True)
class FigureNotRun:
    """A registered figure that has no files: ``reason`` from the registry, or how to build it."""

    name: str
    paper: str
    label: str
    line: int | None
    reason: str
    runnable: bool  # True: runnable under the config, just not built
    copies: tuple[str, ...] = ()


@dataclass(frozen=True)
class FindingView:
    """A known finding with the current state of its cell (``None``: the cell was not checked)."""

    cell: str
    paper: str
    verdict: str
    kind: str
    reason: str
    tiers: tuple[str, ...]
    current: Cell | None


@dataclass(frozen=True)
class Inputs:
    """All that the pages show. ``None`` / a ``*_missing`` text means the part was not built, and says how."""

    tables: tuple[TableReport, ...]
    tables_missing: str | None
    claims: Mapping[str, tuple[Claim, ...]]  # paper -> claims (papers without a claims file absent)
    claims_missing: str | None
    figures: tuple[Figure, ...]
    figures_not_run: tuple[FigureNotRun, ...]
    registry_missing: str | None
    findings: tuple[FindingView, ...]
    findings_missing: str | None

    def tables_of(self, paper: str) -> list[TableReport]:
        return [t for t in self.tables if t.paper == paper]

    def figures_of(self, paper: str) -> list[Figure]:
        """The paper's figures, and those of other documents it prints again (``copies``: the thesis's ch. 3)."""
        return [f for f in self.figures if _shown_on(f, paper)]

    def not_run_of(self, paper: str) -> list[FigureNotRun]:
        return [f for f in self.figures_not_run if _shown_on(f, paper)]

    def findings_of(self, paper: str) -> list[FindingView]:
        return [f for f in self.findings if f.paper == paper]


def _shown_on(f: Figure | FigureNotRun, paper: str) -> bool:
    return f.paper == paper or any(c.split(" ", 1)[0] == paper for c in f.copies)


def paper_of_name(name: str) -> str | None:
    """The paper a file stem such as ``bernier2024_fig4_2`` belongs to (the longest paper id it starts with)."""
    prefixes = sorted((p for p in PAPERS if name.startswith(p + "_")), key=len, reverse=True)
    return prefixes[0] if prefixes else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return " / ".join(str(v) for v in value)
    return str(value)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ours_text(c: Mapping[str, Any]) -> str:
    """Our value as the results pages print it (:func:`benchmark.report._ours`: accuracy with its ± over
    seeds); other metrics (costs, counts) with 6 significant digits, not 4 decimals of a 1e8."""
    mean = _float(c.get("ours_mean"))
    if c.get("metric") == "accuracy" or mean is None:
        return _ours(c)
    return f"{mean:.6g}"


def cell_from_check(c: Mapping[str, Any]) -> Cell:
    """A :class:`Cell` from one record of a check report."""
    return Cell(
        key=str(c.get("key") or c.get("cell") or ""),
        row=_text(c.get("row")),
        column=_text(c.get("column")),
        ours=_ours_text(c),
        paper=_text(c.get("printed") if c.get("printed") not in (None, "") else c.get("paper")),
        delta=_float(c.get("delta")),
        tolerance=_float(c.get("tolerance")),
        verdict=str(c.get("verdict") or "NOT RUN"),
        note=_text(c.get("note")),
        reason=_text(c.get("reason")),
        recorded=_text((c.get("recorded") or {}).get("label") or "recorded") if is_recorded(c) else "",
    )


def load_tables(checks_dir: Path) -> tuple[tuple[TableReport, ...], str | None]:
    """The check reports (sorted by paper order, then target), or why there are none."""
    if not checks_dir.is_dir() or not any(checks_dir.glob("*.json")):
        return (), TABLES_COMMAND
    reports = load_checks(checks_dir)
    tables = [
        TableReport(
            target=str(r["target"]),
            paper=paper_of_target(r),
            tier=str(r.get("tier") or ""),
            cells=tuple(cell_from_check(c) for c in r["cells"]),
        )
        for r in reports
    ]
    order = {p: i for i, p in enumerate(PAPERS)}
    tables.sort(key=lambda t: (order.get(t.paper, len(order)), natural_key(t.target)))
    return tuple(tables), None


def _read_json(path: Path, what: str, fix: str) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc.msg}): {what}", fix) from exc


def load_claims(claims_dir: Path) -> tuple[dict[str, tuple[Claim, ...]], str | None]:
    """``results/claims/<paper>.json`` of every paper that has one, or why there are none."""
    if not claims_dir.is_dir() or not any(claims_dir.glob("*.json")):
        return {}, CLAIMS_COMMAND
    out: dict[str, tuple[Claim, ...]] = {}
    for path in sorted(claims_dir.glob("*.json")):
        data = _read_json(path, "a claims file", f"rebuild it: {CLAIMS_COMMAND}")
        if not isinstance(data, Mapping) or not isinstance(data.get("claims"), list):
            raise ConfigError(
                f"{path} is not a claims file (no list 'claims')", f"rebuild it: {CLAIMS_COMMAND}"
            )
        paper = str(data.get("paper") or path.stem)
        out[paper] = tuple(_claim(c) for c in data["claims"])
    return out, None


def _claim(c: Mapping[str, Any]) -> Claim:
    line = c.get("line")
    return Claim(
        id=str(c.get("id", "")),
        document=str(c.get("document", "")),
        line=int(line) if isinstance(line, int) else None,
        quote=_text(c.get("quote")),
        statement=_text(c.get("statement")),
        kind=_text(c.get("kind")),
        rule=_text(c.get("rule")),
        verdict=str(c.get("verdict") or "NOT RUN"),
        reason=_text(c.get("reason")),
        evidence=tuple(
            Evidence(
                operand=_text(e.get("operand")),
                source=_text(e.get("source")),
                values=tuple(e.get("values") or ()),
                mean=_float(e.get("mean")),
                std=_float(e.get("std")),
                n=e.get("n") if isinstance(e.get("n"), int) else None,
            )
            for e in c.get("evidence") or []
        ),
        figure=c.get("figure") or None,
        tables=tuple(str(t) for t in c.get("tables") or ()),
    )


def load_figures(figures_dir: Path) -> tuple[Figure, ...]:
    """Every ``NAME.json`` manifest under ``figures_dir`` (with its PNG), then PNGs that have no manifest."""
    out: list[Figure] = []
    if not figures_dir.is_dir():
        return ()
    seen: set[str] = set()
    for path in sorted(figures_dir.glob("*.json")):
        m = _read_json(path, "a figure manifest", f"rebuild it: {figure_command(path.stem)}")
        if not isinstance(m, Mapping) or "name" not in m:
            continue  # not a manifest (e.g. another JSON beside the figures)
        name = str(m["name"])
        png = figures_dir / str(m.get("png") or f"{name}.png")
        seen.add(name)
        out.append(
            Figure(
                name=name,
                paper=str(m.get("paper") or paper_of_name(name) or "legate2023"),
                label=_text(m.get("label")) or name,
                line=m.get("line") if isinstance(m.get("line"), int) else None,
                title=_text(m.get("title")),
                png=png if png.is_file() else None,
                readings=tuple(
                    Reading(
                        series=_text(r.get("series")),
                        x=r.get("x"),
                        paper=_float(r.get("paper")),
                        ours=_float(r.get("ours")),
                        source=_text(r.get("source")),
                    )
                    for r in m.get("readings") or []
                ),
                notes=tuple(_text(n) for n in m.get("notes") or ()),
                copies=tuple(_text(n) for n in m.get("copies") or ()),
                inputs=tuple((_text(i.get("path")), _text(i.get("sha256"))) for i in m.get("inputs") or []),
                provenance=dict(m.get("provenance") or {}),
            )
        )
    for png in sorted(figures_dir.glob("*.png")):
        paper = paper_of_name(png.stem)
        if png.stem in seen or paper is None:
            continue
        out.append(
            Figure(name=png.stem, paper=paper, label=png.stem, line=None, title="", png=png, manifest=False)
        )
    return tuple(out)


def load_figure_status(
    config: Mapping[str, Any] | None, built: Sequence[Figure]
) -> tuple[tuple[FigureNotRun, ...], str | None]:
    """The registered figures without files: the registry's reason, or "not built" with the command. The
    registry (:mod:`benchmark.figures.registry`) may be absent: then ``((), why)``."""
    try:
        from benchmark.figures.registry import figure_status  # local: absent registry = ((), why), as tested
    except ImportError as exc:
        return (), f"the figure registry is not available ({exc}); only figures already built are shown"
    if config is None:
        return (), "no workflow config could be loaded; only figures already built are shown"
    have = {f.name for f in built if f.manifest}
    out = []
    for status in figure_status(config):
        spec = status.spec
        if spec.name in have:
            continue
        runnable = status.reason is None
        reason = f"not built: {figure_command(spec.name)}" if runnable else str(status.reason)
        out.append(FigureNotRun(spec.name, spec.paper, spec.label, spec.line, reason, runnable, spec.copies))
    return tuple(out), None


def load_findings_view(
    findings_path: Path | None, tables: Sequence[TableReport]
) -> tuple[tuple[FindingView, ...], str | None]:
    """The known findings with their cells' current state, or why there are none."""
    if findings_path is None:
        return (), "no findings file given (--findings expected/known_findings.yaml)"
    if not findings_path.is_file():
        return (), f"findings file {findings_path} does not exist"
    cells = {c.key: c for t in tables for c in t.cells}
    return (
        tuple(
            FindingView(
                f.cell, f.cell.split("/", 1)[0], f.verdict, f.kind, f.reason, f.tiers, cells.get(f.cell)
            )
            for f in load_findings(findings_path)
        ),
        None,
    )


def load_config_or_none(config_path: Path | None) -> Mapping[str, Any] | None:
    """The workflow config (default ``config/config.yaml``), or ``None`` when it cannot be loaded."""
    try:
        return load_config(config_path)
    except ConfigError:
        if config_path is not None:
            raise
        return None


def load_inputs(results: Path, findings: Path | None, config: Mapping[str, Any] | None) -> Inputs:
    """Read everything under ``results`` (and the findings file) that the pages show."""
    tables, tables_missing = load_tables(results / "checks")
    claims, claims_missing = load_claims(results / "claims")
    figures = load_figures(results / "figures")
    not_run, registry_missing = load_figure_status(config, figures)
    views, findings_missing = load_findings_view(findings, tables)
    return Inputs(
        tables=tables,
        tables_missing=tables_missing,
        claims=claims,
        claims_missing=claims_missing,
        figures=figures,
        figures_not_run=not_run,
        registry_missing=registry_missing,
        findings=views,
        findings_missing=findings_missing,
    )
