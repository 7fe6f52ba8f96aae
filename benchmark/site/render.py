"""HTML of the report's pages (issue 14): every text goes through :func:`html.escape`; the CSS is one file,
:data:`STYLESHEET` beside the pages, that every page links (issue 25: the pages no longer repeat it); links are
relative (the site is opened offline, from any folder). No JavaScript: NOT RUN cells, long provenance lists and
evidence fold into ``<details>``.

Verdict colours follow the README's reading of the verdicts (``expected/README.md``): PASS green,
SUBSTITUTE-PASS light green, PASS* (a match only under a named departure) amber, FAIL red, SUBSTITUTE-FAIL
orange, NOT RUN grey; claims: HOLDS green, DOES NOT HOLD red, NOT RUN grey.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from benchmark.claims.model import VERDICTS as CLAIM_VERDICTS
from benchmark.expected import PAPERS
from benchmark.report import VERDICTS, Stamp
from benchmark.site.inputs import (
    PAPER_TITLES,
    Cell,
    Claim,
    Figure,
    FigureNotRun,
    FindingView,
    Inputs,
    TableReport,
)
from benchmark.site.sources import Source

#: verdict -> CSS class (colours in :data:`CSS`).
VERDICT_CLASS: Mapping[str, str] = {
    "PASS": "v-pass",
    "SUBSTITUTE-PASS": "v-subpass",
    "PASS*": "v-star",
    "SUBSTITUTE-PASS*": "v-star",
    "FAIL": "v-fail",
    "SUBSTITUTE-FAIL": "v-subfail",
    "NOT RUN": "v-notrun",
    "HOLDS": "v-pass",
    "DOES NOT HOLD": "v-fail",
}

#: The site's style sheet, written once beside the pages (:func:`benchmark.site.build.write_site`): :data:`CSS`.
STYLESHEET = "style.css"

#: The CSS itself lives in one file, ``benchmark/site/style.css`` (issue 25); ``docs/report/style.css`` is a
#: link to it.
STYLESHEET_SOURCE = Path(__file__).with_name(STYLESHEET)
CSS = STYLESHEET_SOURCE.read_text(encoding="utf-8")


def e(value: object) -> str:
    """HTML-escaped text of ``value`` (quotes too: safe inside attributes)."""
    return escape("" if value is None else str(value), quote=True)


def anchor(text: str) -> str:
    """An id safe in HTML and URLs."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def badge(verdict: str, count: int | None = None, *, recorded: int | bool = 0) -> str:
    """A verdict badge; ``recorded``: for one cell, ``PASS (recorded)``; for a count, how many of the cells rest
    on recorded runs (``PASS 12 (3 recorded)``, issue 24)."""
    cls = VERDICT_CLASS.get(verdict, "v-notrun")
    zero = " zero" if count == 0 else ""
    text = verdict if count is None else f"{verdict} {count}"
    if recorded is True or (count is None and recorded):
        text += " (recorded)"
    elif recorded:
        text += f" ({recorded} recorded)"
    return f'<span class="badge {cls}{zero}">{e(text)}</span>'


def counts_badges(
    counts: Mapping[str, int], *, skip_zero: bool = False, recorded: Mapping[str, int] | None = None
) -> str:
    rec = recorded or {}
    return " ".join(badge(k, v, recorded=rec.get(k, 0)) for k, v in counts.items() if v or not skip_zero)


def recorded_counts(tables: Sequence[Any]) -> dict[str, int]:
    """The recorded cells of ``tables`` per verdict (:meth:`benchmark.site.inputs.TableReport.recorded_counts`)."""
    out: dict[str, int] = {}
    for t in tables:
        for k, v in t.recorded_counts().items():
            out[k] = out.get(k, 0) + v
    return out


#: A paper with no ``claims/<paper>.yaml`` while other papers' claims were built.
NO_CLAIMS = "No claim of this paper is catalogued in claims/ (no claims/<paper>.yaml)."


def _claims_absent(claims, inputs) -> str:
    """The overview's claims cell of a paper without verdicts: none in its file, none catalogued, or not built."""
    if claims is not None:
        return "none"
    return "not built" if inputs.claims_missing else "none catalogued"


def missing(what: str, command: str) -> str:
    """The line a section shows when its inputs do not exist."""
    return f'<p class="missing">{e(what)} not built: <code>{e(command)}</code></p>'


def page(title: str, body: str, *, here: str) -> str:
    """A whole page: head linking the style sheet (:data:`STYLESHEET`), the navigation bar, ``body``."""
    links = [
        ("index.html", "Overview"),
        *((f"{p}.html", p) for p in PAPERS),
        ("provenance.html", "Provenance"),
    ]
    here_attr = ' class="here"'
    nav = "".join(f'<a href="{e(h)}"{here_attr if h == here else ""}>{e(t)}</a>' for h, t in links)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f'<title>{e(title)}</title><link rel="stylesheet" href="{STYLESHEET}"></head>\n'
        f"<body><nav>{nav}</nav><main>\n{body}\n</main></body></html>\n"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "") -> str:
    """A table; ``rows`` hold ready HTML (escape before)."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cell) + "</tr>" for rows_cell in ([*r] for r in rows))
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def td(text: object, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{e(text)}</td>"


def fmt(x: float | None, spec: str = "+.4g") -> str:
    return "" if x is None else format(x, spec)


def stamp_html(stamp: Stamp) -> str:
    return (
        f'<p class="stamp">Built {e(stamp.when)} by <code>{e(stamp.command)}</code> at commit '
        f"<code>{e(stamp.commit[:12])}</code> on {e(stamp.machine)}.</p>"
    )


# ---------------------------------------------------------------------------------------------------- tables


def _cell_row(c: Cell) -> list[str]:
    tol = "" if c.tolerance is None else f"± {c.tolerance:.4g}"
    text = " — ".join(t for t in (c.recorded, c.note, c.reason if c.reason != c.note else "") if t)
    return [
        td(c.row),
        td(c.column),
        td(c.ours, "num"),
        td(c.paper, "num"),
        td(fmt(c.delta), "num"),
        td(tol, "num"),
        f"<td>{badge(c.verdict, recorded=bool(c.recorded))}</td>",
        td(text, "note"),
    ]


def not_run_groups(cells: Sequence[Cell]) -> list[tuple[str, list[Cell]]]:
    """NOT RUN cells grouped by reason, the largest group first."""
    groups: dict[str, list[Cell]] = {}
    for c in cells:
        if c.verdict == "NOT RUN":
            groups.setdefault(c.reason or "(no reason recorded)", []).append(c)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


NO_CELLS = '<span class="muted">no reported cells</span>'


def table_section(t: TableReport, *, provenance: bool = True) -> str:
    """One table target: counts, the cells that ran, the NOT RUN cells folded by reason; ``provenance``: link to
    its tidy rows on the provenance page (only when it has some)."""
    ran = [c for c in t.cells if c.verdict != "NOT RUN"]
    tier = f" · tier <code>{e(t.tier)}</code>" if t.tier else ""
    parts = [
        f'<h3 id="{anchor(t.target)}"><code>{e(t.target)}</code></h3>',
        f"<p>{counts_badges(t.counts(), skip_zero=True, recorded=t.recorded_counts()) or NO_CELLS}{tier}"
        + (f' · <a href="provenance.html#tidy-{anchor(t.target)}">provenance</a>' if provenance else "")
        + "</p>",
    ]
    if ran:
        parts.append(
            table(
                ["row", "column", "ours", "paper", "Δ", "tolerance", "verdict", "note / reason"],
                map(_cell_row, ran),
            )
        )
    groups = not_run_groups(t.cells)
    if groups:
        n = sum(len(g) for _, g in groups)
        inner = "".join(
            f"<details><summary>{len(cells)} cell(s): {e(reason[:160])}{'…' if len(reason) > 160 else ''}</summary>"
            f'<div><p class="small">{e(reason)}</p>'
            + table(
                ["row", "column", "paper"], ([td(c.row), td(c.column), td(c.paper, "num")] for c in cells)
            )
            + "</div></details>"
            for reason, cells in groups
        )
        parts.append(
            f'<details class="notrun"><summary>{badge("NOT RUN", n)} cell(s) not run, '
            f"{len(groups)} reason(s)</summary><div>{inner}</div></details>"
        )
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------------- figures


def figure_section(f: Figure, asset: str | None) -> str:
    line = f" (line {f.line})" if f.line else ""
    head = f'<h3 id="fig-{anchor(f.name)}">{e(f.label)}{e(line)} · <code>{e(f.name)}</code></h3>'
    if f.title:
        head += f"<p>{e(f.title)}</p>"
    if f.copies:
        head += f'<p class="small muted">Also printed as: {e(", ".join(f.copies))}</p>'
    img = (
        f'<figure><img src="{e(asset)}" alt="{e(f.label)}: {e(f.title or f.name)}"></figure>'
        if asset
        else '<p class="missing">PNG missing beside the manifest: rebuild the figure.</p>'
    )
    side: list[str] = []
    if f.readings:
        side.append(
            "<h4>Readings (paper vs ours)</h4>"
            + table(
                ["series", "x", "paper", "ours", "Δ", "source"],
                (
                    [
                        td(r.series),
                        td("" if r.x is None else r.x, "num"),
                        td(fmt(r.paper, ".4g"), "num"),
                        td(fmt(r.ours, ".4g"), "num"),
                        td(fmt(None if r.ours is None or r.paper is None else r.ours - r.paper), "num"),
                        td(r.source),
                    ]
                    for r in f.readings
                ),
            )
        )
    elif f.manifest:
        side.append('<p class="muted">The paper prints no values for this figure (no readings).</p>')
    else:
        side.append('<p class="muted">No manifest: a PNG built before figures had manifests (no readings, no '
                    f"provenance). Rebuild: <code>{e('snakemake --cores 1 ' + f.name)}</code></p>")  # fmt: skip
    if f.notes:
        side.append("<h4>Notes</h4><ul>" + "".join(f"<li>{e(n)}</li>" for n in f.notes) + "</ul>")
    if f.manifest:
        side.append(f'<p class="small"><a href="provenance.html#figure-{anchor(f.name)}">provenance</a></p>')
    return head + f'<div class="figrow">{img}<div>{"".join(side)}</div></div>'


def _figure_label(f: FigureNotRun) -> str:
    """The figure's label; with the copies other documents print of it (``legate2023 Fig. 3 = bernier2024 ...``)."""
    return f"{f.paper} {f.label} = {', '.join(f.copies)}" if f.copies else f.label


def figures_not_run(items: Sequence[FigureNotRun]) -> str:
    if not items:
        return ""
    not_built = '<span class="badge v-notrun zero">not built</span>'
    rows = (
        [f'<td id="fig-{anchor(f.name)}">{e(_figure_label(f))}</td>', f"<td><code>{e(f.name)}</code></td>",
         td(f.line or "", "num"), f"<td>{not_built if f.runnable else badge('NOT RUN')}</td>", td(f.reason, "note")]
        for f in items
    )  # fmt: skip
    return "<h3>Figures not built here</h3>" + table(["figure", "target", "line", "status", "reason"], rows)


# ---------------------------------------------------------------------------------------------------- claims


def _evidence(c: Claim) -> str:
    if not c.evidence:
        return ""
    rows = (
        [td(ev.operand), td(ev.source), td(fmt(ev.mean, ".4g"), "num"), td(fmt(ev.std, ".3g"), "num"),
         td("" if ev.n is None else ev.n, "num"), td(", ".join(map(str, ev.values[:12])) + (" …" if len(ev.values) > 12 else ""), "note")]
        for ev in c.evidence
    )  # fmt: skip
    return (
        "<details><summary>evidence</summary>"
        + table(["operand", "source", "mean", "std", "n", "values"], rows)
        + "</details>"
    )


def claim_block(c: Claim, figures: frozenset[str] = frozenset()) -> str:
    """One claim: verdict, quote with document:line, statement, rule, evidence; links to its figure when the
    page shows it (``figures``)."""
    where = f"{c.document}:{c.line}" if c.line else c.document
    extra = []
    if c.figure:
        name = f"<code>{e(c.figure)}</code>"
        extra.append(
            f'figure <a href="#fig-{anchor(c.figure)}">{name}</a>'
            if c.figure in figures
            else f"figure {name}"
        )
    if c.tables:
        extra.append("tables " + ", ".join(f"<code>{e(t)}</code>" for t in c.tables))
    return (
        f'<div class="claim" id="claim-{anchor(c.id)}"><p>{badge(c.verdict)} <strong>{e(c.id)}</strong> '
        f'<span class="muted small">{e(where)} · {e(c.kind)}</span></p>'
        f"<blockquote>{e(c.quote)}</blockquote>"
        f"<p>{e(c.statement)}</p>"
        + (f'<p class="small">Rule: <code>{e(c.rule)}</code></p>' if c.rule else "")
        + (f'<p class="small muted">{e(c.reason)}</p>' if c.reason else "")
        + (f'<p class="small">{" · ".join(extra)}</p>' if extra else "")
        + _evidence(c)
        + "</div>"
    )


def claim_counts(claims: Sequence[Claim]) -> dict[str, int]:
    out = dict.fromkeys(CLAIM_VERDICTS, 0)
    for c in claims:
        out[c.verdict] = out.get(c.verdict, 0) + 1
    return out


# ---------------------------------------------------------------------------------------------------- findings


def finding_groups(items: Sequence[FindingView]) -> list[tuple[str, str, list[FindingView]]]:
    """Findings grouped by (kind, reason), in file order: many cells share one explanation."""
    groups: dict[tuple[str, str], list[FindingView]] = {}
    for f in items:
        groups.setdefault((f.kind, f.reason), []).append(f)
    return [(kind, reason, fs) for (kind, reason), fs in groups.items()]


def findings_table(items: Sequence[FindingView]) -> str:
    """The known findings, one block per explanation: kind, reason, then its cells with their current state
    (verdict now, ours, paper, Δ)."""

    def state(f: FindingView) -> str:
        if f.current is None:
            return '<td class="note">cell not checked in this run</td>'
        now = badge(f.current.verdict)
        same = (
            ""
            if f.current.verdict == f.verdict
            else f' <span class="small">(listed as {e(f.verdict)})</span>'
        )
        return f"<td>{now}{same}</td>"

    blocks = []
    for kind, reason, fs in finding_groups(items):
        rows = (
            [f'<td class="key"><code>{e(f.cell)}</code></td>', state(f),
             td(f.current.ours if f.current else "", "num"), td(f.current.paper if f.current else "", "num"),
             td(fmt(f.current.delta) if f.current else "", "num")]
            for f in fs
        )  # fmt: skip
        blocks.append(
            f'<div class="finding"><p><span class="badge kind">{e(kind)}</span> {len(fs)} cell(s)</p>'
            f"<p>{e(reason)}</p>" + table(["cell", "verdict now", "ours", "paper", "Δ"], rows) + "</div>"
        )
    return "".join(blocks)


# ---------------------------------------------------------------------------------------------------- pages


def paper_page(
    paper: str,
    inputs: Inputs,
    stamp: Stamp,
    assets: Mapping[str, str],
    source_ids: frozenset[str] = frozenset(),
) -> str:
    """One paper's page: its tables, figures, claims and known findings. ``assets``: figure name -> image path
    relative to the site; ``source_ids``: anchors of the provenance page (links only to those)."""
    tables = inputs.tables_of(paper)
    figures = inputs.figures_of(paper)
    not_run = inputs.not_run_of(paper)
    claims = inputs.claims.get(paper)
    findings = inputs.findings_of(paper)
    toc = " ".join(
        f'<a href="#{h}">{e(t)}</a>' for h, t in (("tables", "Tables"), ("figures", "Figures"), ("claims", "Claims"), ("findings", "Known findings"))
    )  # fmt: skip
    body = [
        f"<h1>{e(paper)}</h1><p>{e(PAPER_TITLES.get(paper, ''))}</p>",
        stamp_html(stamp),
        f'<p class="toc">{toc}</p>',
    ]
    # tables
    sec = ['<section id="tables"><h2>Tables</h2>']
    if inputs.tables_missing:
        sec.append(missing("Tables", inputs.tables_missing))
    elif not tables:
        sec.append('<p class="muted">No table target of this paper has a check report.</p>')
    else:
        total: dict[str, int] = dict.fromkeys(VERDICTS, 0)
        for t in tables:
            for k, v in t.counts().items():
                total[k] = total.get(k, 0) + v
        sec.append(f"<p>All tables: {counts_badges(total)}</p>")
        sec.append(
            '<p class="small">'
            + " ".join(f'<a href="#{anchor(t.target)}">{e(t.target)}</a>' for t in tables)
            + "</p>"
        )
        sec += [table_section(t, provenance=f"tidy-{anchor(t.target)}" in source_ids) for t in tables]
    sec.append("</section>")
    body += sec
    # figures
    sec = ['<section id="figures"><h2>Figures</h2>']
    if inputs.registry_missing:
        sec.append(f'<p class="missing">{e(inputs.registry_missing)}</p>')
    if not figures and not not_run:
        sec.append(missing("Figures", "snakemake --cores 1 all_figures"))
    sec += [figure_section(f, assets.get(f.name)) for f in figures]
    sec.append(figures_not_run(not_run))
    sec.append("</section>")
    body += sec
    # claims
    sec = ['<section id="claims"><h2>Claims</h2>']
    if claims is None and not inputs.claims_missing:
        sec.append(f'<p class="muted">{NO_CLAIMS}</p>')
    elif claims is None:
        sec.append(missing("Claims", inputs.claims_missing))
    elif not claims:
        sec.append('<p class="muted">The claims catalogue has no claim of this paper.</p>')
    else:
        sec.append(f"<p>{counts_badges(claim_counts(claims))}</p>")
        shown = frozenset(f.name for f in figures) | frozenset(f.name for f in not_run)
        sec += [claim_block(c, shown) for c in claims]
    sec.append("</section>")
    body += sec
    # findings
    sec = ['<section id="findings"><h2>Known findings</h2>']
    if inputs.findings_missing:
        sec.append(f'<p class="missing">{e(inputs.findings_missing)}</p>')
    elif not findings:
        sec.append('<p class="muted">No known finding concerns this paper.</p>')
    else:
        sec.append(
            f"<p>{len(findings)} failing cell(s) of this paper are documented in "
            "<code>expected/known_findings.yaml</code> (observations, never edits of the paper's values).</p>"
        )
        sec.append(findings_table(findings))
    sec.append("</section>")
    body += sec
    return page(f"{paper}: reproducibility report", "\n".join(body), here=f"{paper}.html")


def index_page(inputs: Inputs, stamp: Stamp) -> str:
    body = [
        "<h1>Reproducibility report</h1>",
        stamp_html(stamp),
        "<p>Verdicts follow <code>expected/README.md</code>: <code>SUBSTITUTE-*</code> cells used substitute "
        "weights (indicative, not a reproduction); <code>PASS*</code> matches only under a named departure from "
        "the paper's stated setup. Every number's source is on the "
        '<a href="provenance.html">provenance</a> page.</p>',
    ]
    if inputs.tables_missing:
        body.append(missing("Tables", inputs.tables_missing))
    rows = []
    for p in PAPERS:
        counts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
        for t in inputs.tables_of(p):
            for k, v in t.counts().items():
                counts[k] = counts.get(k, 0) + v
        claims = inputs.claims.get(p)
        built = [f for f in inputs.figures_of(p) if f.manifest]
        nr = inputs.not_run_of(p)
        figs = (
            f"{len(built)} built, {sum(not f.runnable for f in nr)} not run, {sum(f.runnable for f in nr)} not built"
            + (f", {len(inputs.figures_of(p)) - len(built)} without manifest" if len(inputs.figures_of(p)) > len(built) else "")
        )  # fmt: skip
        rows.append([
            f'<td><a href="{e(p)}.html"><strong>{e(p)}</strong></a><br><span class="small muted">{e(PAPER_TITLES.get(p, ""))}</span></td>',
            td(len(inputs.tables_of(p)), "num"),
            f"<td>{counts_badges(counts, skip_zero=True, recorded=recorded_counts(inputs.tables_of(p))) or '—'}</td>",
            f"<td>{counts_badges(claim_counts(claims)) if claims else _claims_absent(claims, inputs)}</td>",
            td(figs),
            td(len(inputs.findings_of(p)), "num"),
        ])  # fmt: skip
    body.append(
        "<section><h2>Papers</h2>"
        + table(["paper", "tables", "table verdicts (cells)", "claims", "figures", "known findings"], rows)
        + "</section>"
    )
    if inputs.claims_missing:
        body.append(missing("Claims", inputs.claims_missing))
    total: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    for t in inputs.tables:
        for k, v in t.counts().items():
            total[k] = total.get(k, 0) + v
    body.append(f"<section><h2>All cells</h2><p>{counts_badges(total, recorded=recorded_counts(inputs.tables))}</p></section>")
    return page("Reproducibility report", "\n".join(body), here="index.html")


def _sha_list(pairs: Sequence[tuple[str, str]], what: str) -> str:
    if not pairs:
        return '<span class="muted">—</span>'
    items = "".join(f'<li>{e(label)}: <span class="sha">{e(sha)}</span></li>' for label, sha in pairs)
    if len(pairs) <= 3:
        return f"<ul>{items}</ul>"
    return f"<details><summary>{len(pairs)} {e(what)}</summary><ul>{items}</ul></details>"


def provenance_page(sources: Sequence[Source], stamp: Stamp) -> str:
    body = [
        "<h1>Provenance</h1>",
        stamp_html(stamp),
        "<p><strong>fresh</strong>: written by this checkout's last run (<code>results/tidy</code>, figure "
        "manifests); <strong>recorded</strong>: committed records of earlier runs (<code>docs/runs/*/</code>, each "
        "with a README saying how they were made).</p>",
    ]
    if not sources:
        body.append(missing("Provenance", "snakemake --cores all all_tables"))
    for kind in ("fresh", "recorded"):
        group = [s for s in sources if s.kind == kind]
        if not group:
            continue
        rows = (
            [
                f'<td id="{anchor(s.id)}"><code>{e(s.name)}</code><br><span class="small muted">{e(s.where)}</span></td>',
                td(s.description, "note"),
                td(s.rows, "num"),
                f'<td class="sha">{"<br>".join(e(c[:12]) for c in s.commits) or "—"}</td>',
                td("; ".join(s.machines), "note"),
                f"<td>{_sha_list([(v.split(';')[0], v) for v in s.versions], 'version sets') if s.versions else '—'}</td>",
                f"<td>{_sha_list(s.weights, 'weights')}</td>",
                f"<td>{_sha_list(s.data, 'data checksums')}</td>",
            ]
            for s in group
        )
        body.append(
            f'<section id="{kind}"><h2>{e(kind.capitalize())} sources ({len(group)})</h2>'
            + table(["source", "what", "rows / records", "commit", "machine", "versions", "weights sha256", "data checksums"], rows)
            + "</section>"
        )  # fmt: skip
    return page("Provenance", "\n".join(body), here="provenance.html")
