"""The static HTML report (benchmark/site, issue 14) on the small synthetic inputs of tests/data/site/."""

from __future__ import annotations

import html
import shutil
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmark.errors import ConfigError
from benchmark.report import Stamp, paper_of_target
from benchmark.site import render
from benchmark.site.build import MARKER, PAGES, build_site, main
from benchmark.site.inputs import Cell, load_figure_status, load_figures

FIXTURE = Path(__file__).parent / "data" / "site"
ROOT = Path(__file__).resolve().parents[1]
STAMP = Stamp("2026-01-01 00:00 UTC", "test machine", "0123456789abcdef", "flb site (test)")


def build(tmp_path: Path, results: Path | None = None, **kw) -> Path:
    """The fixture's site in ``tmp_path/site`` (no workflow config: figure status from the registry is off)."""
    kw.setdefault("findings", FIXTURE / "findings.yaml")
    kw.setdefault("records", FIXTURE / "runs")
    return build_site(results or FIXTURE / "results", tmp_path / "site", stamp=STAMP, **kw)


def read(site: Path, page: str) -> str:
    return (site / page).read_text()


def test_every_page_is_written(tmp_path):
    site = build(tmp_path)
    assert sorted(p.name for p in site.glob("*.html")) == sorted(PAGES)
    assert (site / MARKER).is_file()
    assert (site / "assets" / "figures" / "fedcof_fig9.png").read_bytes() == (
        FIXTURE / "results" / "figures" / "fedcof_fig9.png"
    ).read_bytes()


def test_the_pages_share_one_style_sheet(tmp_path):
    """The CSS is written once, style.css beside the pages, and every page links it instead of repeating it."""
    site = build(tmp_path)
    assert (site / render.STYLESHEET).read_text() == render.CSS
    for name in PAGES:
        text = read(site, name)
        assert '<link rel="stylesheet" href="style.css">' in text and "<style" not in text, name


@pytest.mark.parametrize("name", PAGES)
def test_the_committed_snapshot_is_what_the_renderer_writes(name):
    """docs/report/ (a snapshot of a CI-tier build) has the structure the renderer writes now: each page is
    render.page() of its own title, navigation and body, and its style.css is render.CSS."""
    import re

    snapshot = ROOT / "docs" / "report"
    assert (snapshot / render.STYLESHEET).read_text() == render.CSS
    text = (snapshot / name).read_text(encoding="utf-8")
    title = re.search(r"<title>(.*?)</title>", text)
    body = re.search(r"<main>\n(.*)\n</main></body></html>\n$", text, re.S)
    assert title and body, name
    title_text = html.unescape(title.group(1))
    assert render.page(title_text, body.group(1), here=name) == text


def test_the_css_lives_in_one_place():
    """The committed snapshot's style.css is a link to the package's style sheet, not a second copy (issue 25)."""
    committed = ROOT / "docs" / "report" / render.STYLESHEET
    assert committed.is_symlink() and committed.resolve() == render.STYLESHEET_SOURCE.resolve()


def test_verdict_badges_have_their_classes(tmp_path):
    page = read(build(tmp_path), "legate2023.html")
    for verdict, cls in [
        ("PASS", "v-pass"),
        ("SUBSTITUTE-PASS", "v-subpass"),
        ("PASS*", "v-star"),
        ("FAIL", "v-fail"),
        ("SUBSTITUTE-FAIL", "v-subfail"),
    ]:
        assert f'<td><span class="badge {cls}">{verdict}</span></td>' in page, verdict
    assert render.VERDICT_CLASS["SUBSTITUTE-PASS*"] == "v-star"
    assert render.VERDICT_CLASS["DOES NOT HOLD"] == "v-fail"


def test_text_is_escaped(tmp_path):
    site = build(tmp_path)
    page = read(site, "legate2023.html")
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; P = 746,424" in page
    fedcof = read(site, "fedcof.html")
    assert "<b>outperforms</b>" not in fedcof and "&lt;b&gt;outperforms&lt;/b&gt;" in fedcof
    assert "&lt;fixture&gt;" in page  # the finding's reason


def test_not_run_cells_are_folded_by_reason(tmp_path):
    cells = [
        Cell(f"k{i}", "r", "c", "", "1", None, None, "NOT RUN", "", reason)
        for i, reason in enumerate(["B", "A", "A", ""])
    ]
    groups = render.not_run_groups(cells)
    assert [(r, len(cs)) for r, cs in groups] == [("A", 2), ("(no reason recorded)", 1), ("B", 1)]
    page = read(build(tmp_path), "legate2023.html")
    assert page.count('<details class="notrun">') == 1
    assert "<summary>2 cell(s): needs a GPU: reason A</summary>" in page
    assert "<summary>1 cell(s): dataset files absent: reason B</summary>" in page
    # the cells that ran are in the visible table, the NOT RUN ones only inside the fold
    visible = page.split('<details class="notrun">')[0]
    assert "Flowers102" not in visible and "Random" in visible


def test_targets_go_to_their_papers(tmp_path):
    assert paper_of_target({"target": "table2", "cells": []}) == "legate2023"
    assert paper_of_target({"target": "legate2023ws_table1", "cells": []}) == "legate2023ws"
    assert paper_of_target({"target": "x", "cells": [{"key": "fedbabu/table3#a"}]}) == "fedbabu"
    site = build(tmp_path)
    assert 'id="table2"' in read(site, "legate2023.html")
    assert 'id="fedcof_table2"' in read(site, "fedcof.html")
    assert "table2" not in read(site, "fedbabu.html").split('id="tables"')[1].split("</section>")[0]


def test_missing_parts_say_how_to_build_them(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(FIXTURE / "results" / "checks", results / "checks")
    site = build(tmp_path, results, findings=None, records=None)
    page = read(site, "fedcof.html")
    assert "Claims not built: <code>flb claims --checks results/checks" in page
    assert "Figures not built: <code>snakemake --cores 1 all_figures</code>" in page
    assert "no findings file given" in page
    assert "Claims not built" in read(site, "index.html")
    empty = tmp_path / "empty"
    empty.mkdir()
    site = build_site(empty, tmp_path / "site2", stamp=STAMP)
    assert "Tables not built: <code>snakemake --cores all all_tables</code>" in read(site, "index.html")


def test_claims_show_verdict_quote_and_evidence(tmp_path):
    page = read(build(tmp_path), "fedcof.html")
    assert '<span class="badge v-pass">HOLDS</span> <strong>fedcof-c1</strong>' in page
    assert "002_8e3ac9d01cb44bea.txt:942" in page
    assert '<span class="badge v-fail">DOES NOT HOLD</span>' in page
    assert '<span class="badge v-notrun">NOT RUN</span> <strong>fedcof-c3</strong>' in page
    assert '<a href="#fig-fedcof_fig9">' in page  # the figure is on the page: linked
    assert "<summary>evidence</summary>" in page and "fedcof_table2" in page
    # claims were built, but none of legate2023's is in the fixture: said as such, not as "not built"
    assert "Claims not built" not in read(build(tmp_path), "legate2023.html")
    assert "No claim of this paper is catalogued" in read(tmp_path / "site", "legate2023.html")


def test_figures_readings_and_registry_status(tmp_path, monkeypatch):
    page = read(build(tmp_path), "fedcof.html")
    assert '<img src="assets/figures/fedcof_fig9.png"' in page
    assert "fedcof:942" in page and "57.1" in page and "-1.73" in page
    # the registry's status: absent -> said; present -> unrunnable figures NOT RUN with its reason
    monkeypatch.setitem(sys.modules, "benchmark.figures.registry", None)
    figures = load_figures(FIXTURE / "results" / "figures")
    assert load_figure_status({}, figures)[1].startswith("the figure registry is not available")

    @dataclass(frozen=True)
    class Spec:
        name: str
        paper: str
        label: str
        line: int
        copies: tuple[str, ...] = ()

    @dataclass(frozen=True)
    class Status:
        spec: Spec
        reason: str | None

    fake = types.ModuleType("benchmark.figures.registry")
    fake.figure_status = lambda config: [
        Status(Spec("fedcof_fig9", "fedcof", "Fig. 9", 940), None),
        Status(Spec("fedcof_fig2", "fedcof", "Fig. 2", 300), "a diagram (no data)"),
        Status(Spec("fedbabu_fig3", "fedbabu", "Figure 3", 400), None),
    ]
    monkeypatch.setitem(sys.modules, "benchmark.figures.registry", fake)
    not_run, why = load_figure_status({}, figures)
    assert why is None
    assert [(f.name, f.reason, f.runnable) for f in not_run] == [
        ("fedcof_fig2", "a diagram (no data)", False),
        ("fedbabu_fig3", "not built: snakemake --cores 1 fedbabu_fig3", True),
    ]
    site = build_site(FIXTURE / "results", tmp_path / "site3", config={}, stamp=STAMP)
    assert "a diagram (no data)" in read(site, "fedcof.html")
    assert "1 built, 1 not run, 0 not built" in read(site, "index.html")


def test_findings_show_the_cells_current_state(tmp_path):
    page = read(build(tmp_path), "legate2023.html")
    block = page.split('id="findings"')[1]
    assert "paper-inconsistency" in block
    assert "<code>legate2023/table2#cifar10/random/comm_gb</code>" in block
    assert '<span class="badge v-fail">FAIL</span>' in block and "1746.28" in block and "1803.71" in block


def test_provenance_lists_fresh_and_recorded_sources(tmp_path):
    site = build(tmp_path)
    page = read(site, "provenance.html")
    fresh, recorded = page.split('id="fresh"')[1].split('id="recorded"')
    assert 'id="tidy-fedcof_table2"' in fresh and "1258caa06583" in fresh and "f2" * 32 in fresh
    assert 'id="figure-fedcof_fig9"' in fresh and "ab" * 32 in fresh
    assert 'id="record-demo_cpu"' in recorded and "A demo record (test fixture)" in recorded
    assert "53" * 32 in recorded and "cd" * 32 in recorded and "aa4da26fc0bd" in recorded
    assert "ignored" not in recorded  # histories (lists) are not walked
    assert 'href="provenance.html#tidy-fedcof_table2"' in read(site, "fedcof.html")
    assert "provenance.html#tidy-table2" not in read(site, "legate2023.html")  # no tidy rows: no dead link


def test_no_external_urls(tmp_path):
    site = build(tmp_path)
    for page in site.glob("*.html"):
        text = page.read_text()
        assert "http://" not in text and "https://" not in text and "<script" not in text, page.name


def test_output_is_replaced_atomically_and_only_if_ours(tmp_path):
    site = build(tmp_path)
    (site / "stale.html").write_text("old")
    build(tmp_path)
    assert not (site / "stale.html").exists()
    assert not list(tmp_path.glob(".site.*"))  # no temporary folder left behind
    other = tmp_path / "notasite"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a site built by `flb site`"):
        build_site(FIXTURE / "results", other, stamp=STAMP)
    assert (other / "keep.txt").is_file()


def test_cli(tmp_path, capsys):
    from benchmark.apps import dispatch

    out = tmp_path / "report"
    args = ["site", "--results", str(FIXTURE / "results"), "--findings", str(FIXTURE / "findings.yaml")]
    assert dispatch([*args, "--records", str(FIXTURE / "runs"), "--out", str(out)]) == 0
    assert (out / "index.html").is_file()
    assert main(["--results", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("flb: error: results folder")


def test_a_figure_shows_on_the_pages_of_the_documents_that_print_it_again() -> None:
    from benchmark.site.inputs import Figure, FigureNotRun, Inputs

    fig = Figure("legate2023_fig3", "legate2023", "Fig. 3", 252, "t", None, copies=("bernier2024 Figure 3.7",))
    nr = FigureNotRun("legate2023_fig5", "legate2023", "Fig. 5", 262, "GPU", False, ("bernier2024 Figure 3.9",))
    inputs = Inputs((), None, {}, None, (fig,), (nr,), None, (), None)
    assert inputs.figures_of("bernier2024") == [fig] == inputs.figures_of("legate2023")
    assert inputs.not_run_of("bernier2024") == [nr] and inputs.figures_of("fedcof") == []
