"""The figure registry (benchmark/figures): every figure of the five documents is catalogued with its caption's
line, drawable figures say why they do not run under a config, and ``flb figure`` writes PNG, PDF, data and a
manifest atomically (issue 14)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.figures import registry, render
from benchmark.figures.registry import (
    DrawnFigure,
    FigureSpec,
    Reading,
    figure_status,
    get_figure,
    list_figures,
)
from benchmark.papers import line_text, papers_dir

HAVE_PAPERS = (papers_dir() / "README.md").is_file()
SPECS = list_figures()


def _number(label: str) -> str:
    return re.search(r"(\d+(?:\.\d+)?)", label).group(1)


def test_every_document_has_catalogued_figures() -> None:
    assert {s.paper for s in SPECS} == {"legate2023", "fedcof", "bernier2024", "fedbabu"}
    captions = {"legate2023": 7, "fedcof": 10, "bernier2024": 3, "fedbabu": 16}  # ch. 3 of the thesis: copies
    assert {p: len(list_figures(paper=p)) for p in captions} == captions
    assert len({s.name for s in SPECS}) == len(SPECS)


@pytest.mark.skipif(not HAVE_PAPERS, reason="../shared/papers not present")
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_caption_line_names_the_figure(spec: FigureSpec) -> None:
    text = line_text(spec.paper, spec.line)
    n = re.escape(_number(spec.label))
    assert re.search(rf"Fig(?:ure|\.)?\*?\s*{n}\b", text), (
        f"{spec.paper}:{spec.line} is not {spec.label}: {text[:80]}"
    )


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_name_is_a_target_and_undrawable_ones_say_why(spec: FigureSpec) -> None:
    assert re.fullmatch(r"[a-z0-9]+_fig[0-9_]+", spec.name)
    if not spec.drawable:
        assert spec.why_not({}) == spec.reason and len(spec.reason) > 10


def test_figure_status_covers_the_registry() -> None:
    status = figure_status({"tier": "ci"})
    assert [st.spec.name for st in status] == [s.name for s in SPECS]
    assert all(st.reason is None or st.reason for st in status)


def test_unknown_figure_names_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="bernier2024_fig4_3"):
        get_figure("nofig")


def test_registering_a_second_figure_under_one_name_is_refused() -> None:
    spec = get_figure("bernier2024_fig4_1")
    other = FigureSpec(
        name=spec.name, paper="fedcof", label="Fig. 1", line=1, title="t", reason="a duplicate"
    )
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register_figure(other)


def test_a_figure_without_draw_must_say_why() -> None:
    with pytest.raises(ConfigError, match="no draw and no reason"):
        FigureSpec(name="x_fig1", paper="fedcof", label="Fig. 1", line=1, title="t")


# ---------------------------------------------------------------------------------------------- render
def _toy_draw(config):
    fig = Figure(figsize=(3, 2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [10.0, 20.0, config.get("last", 30.0)])
    data = pd.DataFrame({"series": ["a"] * 3, "x": [0, 1, 2], "y": [10.0, 20.0, 30.0]})
    return DrawnFigure(fig, data, (Reading("a", 2, 31.0, 30.0, "fedcof:388"),), ("a toy",))


@pytest.fixture()
def toy(monkeypatch, tmp_path):
    src = tmp_path / "input.csv"
    src.write_text("x\n1\n")
    spec = FigureSpec(
        name="toy_fig1", paper="fedcof", label="Fig. 1", line=47, title="toy", draw=_toy_draw,
        inputs=lambda c: [str(src)], unavailable=lambda c: None if c.get("ok", True) else "needs ok",
    )  # fmt: skip
    monkeypatch.setitem(registry._REGISTRY, spec.name, spec)
    return spec


def test_render_writes_png_pdf_data_and_manifest(toy, tmp_path) -> None:
    out = tmp_path / "figs" / "toy_fig1.png"
    record = render.render("toy_fig1", {}, out)
    for suffix in (".png", ".pdf", ".csv", ".json"):
        assert out.with_suffix(suffix).stat().st_size > 0
    assert (
        out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.with_suffix(".pdf").read_bytes()[:4] == b"%PDF"
    )
    manifest = json.loads(out.with_suffix(".json").read_text())
    assert manifest == json.loads(json.dumps(record))
    assert set(manifest) == set(render.MANIFEST_KEYS)
    assert manifest["readings"] == [
        {"series": "a", "x": 2, "paper": 31.0, "ours": 30.0, "source": "fedcof:388"}
    ]
    import hashlib

    assert manifest["inputs"][0]["sha256"] == hashlib.sha256(b"x\n1\n").hexdigest()
    assert pd.read_csv(out.with_suffix(".csv"))["y"].tolist() == [10.0, 20.0, 30.0]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp files left


def test_render_refuses_a_figure_that_does_not_run(toy, tmp_path) -> None:
    with pytest.raises(ConfigError, match="needs ok"):
        render.render("toy_fig1", {"ok": False}, tmp_path / "out" / "toy_fig1.png")
    assert not (tmp_path / "out").exists()


def test_render_names_a_missing_input(toy, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(registry._REGISTRY, "toy_fig1", FigureSpec(
        name="toy_fig1", paper="fedcof", label="Fig. 1", line=47, title="toy", draw=_toy_draw,
        inputs=lambda c: [str(tmp_path / "absent.csv")],
    ))  # fmt: skip
    with pytest.raises(ConfigError, match=r"absent\.csv"):
        render.render("toy_fig1", {}, tmp_path / "toy_fig1.png")


def test_flb_figure_list_and_draw(toy, tmp_path, capsys) -> None:
    assert render.main(["--list", "--config-json", "{}"]) == 0
    listing = capsys.readouterr().out
    assert "toy_fig1" in listing and "bernier2024_fig4_1" in listing and "NOT RUN: a diagram" in listing
    out = tmp_path / "toy_fig1.png"
    assert render.main(["toy_fig1", "--out", str(out), "--config-json", "{}"]) == 0
    assert Path(out).is_file()
    assert render.main(["toy_fig1", "--out", str(tmp_path / "x.png"), "--config-json", '{"ok": false}']) == 2
