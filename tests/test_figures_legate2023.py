"""legate2023's figure catalogue (benchmark/figures/legate2023*.py): every figure registered at its caption,
its copies in the thesis / workshop version real captions, availability by config, and the drawing on tiny
synthetic inputs (no runs, no data)."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from matplotlib.figure import Figure

from benchmark.figures import legate2023_draw as draw
from benchmark.figures import legate2023_runs as runs
from benchmark.figures.registry import PAPER_FILES, DrawnFigure, Reading, get_figure, list_figures
from benchmark.papers import papers_dir

PAPERS = papers_dir()  # FLB_PAPERS_DIR, else the shared/papers above the checkout (a worktree sits deeper)
SPECS = list_figures(paper="legate2023")


def _lines(paper: str) -> list[str]:
    path = PAPERS / PAPER_FILES[paper]
    if not path.is_file():
        pytest.skip(f"paper text {path} not here")
    return path.read_text(encoding="utf-8").splitlines()


def test_every_figure_of_the_paper_is_registered():
    assert [s.name for s in SPECS] == [f"legate2023_fig{i}" for i in range(1, 8)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_caption_line_holds_the_figure(spec):
    number = spec.label.removeprefix("Fig. ")
    assert spec.label == f"Fig. {number}"
    assert _lines("legate2023")[spec.line - 1].startswith(f"Figure {number}:")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_copies_name_real_captions(spec):
    for copy in spec.copies:
        paper, _, label = copy.partition(" ")
        number = label.removeprefix("Figure ")
        caption = re.compile(rf"^\*?Figure {re.escape(number)}[.:]")
        assert any(caption.match(line) for line in _lines(paper)), copy


def test_thesis_and_workshop_copies_are_all_named():
    named = {c for s in SPECS for c in s.copies}
    thesis = {f"bernier2024 Figure 3.{i}" for i in range(1, 11)} | {"bernier2024 Figure A.1"}
    workshop = {f"legate2023ws Figure {i}" for i in (1, 2, 3, 4, 6)}
    assert thesis | workshop <= named


def _here(monkeypatch):
    """Pretend the CIFAR-10 features can be had (the availability logic, not this machine's data)."""
    monkeypatch.setattr(runs, "features_reason", lambda config: None)
    monkeypatch.setattr(runs, "weights", lambda config: "substitute")


def test_training_figures_need_training(monkeypatch):
    _here(monkeypatch)
    ci = {"tier": "ci", "ci_training": ["legate2023_cifar10/lp"], "device": None}
    why = {s.name: s.why_not(ci) for s in SPECS}
    assert (
        why["legate2023_fig1"] is None and why["legate2023_fig3"] is None and why["legate2023_fig6"] is None
    )
    for name in ("legate2023_fig4", "legate2023_fig5", "legate2023_fig7"):
        assert why[name] and "device=cuda" in why[name]
    assert why["legate2023_fig2"] and "DistilBERT" in why["legate2023_fig2"]
    cuda = {"tier": "full", "device": "cuda"}
    assert [s.name for s in SPECS if s.why_not(cuda) is not None] == ["legate2023_fig2"]


def test_fedncm_runs_every_setting_and_lp_only_where_a_protocol_exists(monkeypatch):
    _here(monkeypatch)
    full = {"tier": "full"}
    for a in runs.ALPHAS:
        fr = runs.fedncm_runs(full, runs.Setting(alpha=a))
        assert fr.runs and len(fr.jobs) == 3 and f"alpha{a}" in fr.jobs[0].path
    assert runs.lp_runs(full, runs.PRIMARY).runs
    swept = runs.lp_runs(full, runs.Setting(clients=1000))  # the sweep protocols of fl.yaml
    assert swept.runs and swept.jobs[0].protocol == "legate2023_cifar10_k1000"
    off = runs.lp_runs(full, runs.Setting(clients=300))
    assert not off.runs and "fl.yaml" in off.reason
    ci = {"tier": "ci", "ci_training": []}
    assert not runs.lp_runs(ci, runs.PRIMARY).runs
    assert len(runs.fedncm_runs(ci, runs.Setting(alpha=0.01)).jobs) == 1  # CI: one seed off the primary
    assert len(runs.fedncm_runs(ci, runs.PRIMARY).jobs) == 3
    assert not runs.train_runs(full, runs.PRIMARY, "FT").runs  # no device=cuda
    assert runs.train_runs({"device": "cuda"}, runs.PRIMARY, "FedNCM+FT").runs


def _fake_runs(monkeypatch, values):
    """series_runs / seed_values answering from ``values[(series, setting)]`` (missing: not run)."""
    _here(monkeypatch)

    def series_runs(config, series, setting):
        if (series, setting) in values:
            return runs.SeriesRuns(series, setting, jobs=(object(),))  # type: ignore[arg-type]
        return runs.SeriesRuns(series, setting, reason="not in this test")

    monkeypatch.setattr(runs, "series_runs", series_runs)
    monkeypatch.setattr(runs, "seed_values", lambda r: values.get((r.series, r.setting), []))
    monkeypatch.setattr(runs.SeriesRuns, "paths", lambda self: ["x.csv"])


def test_fig3_draw_on_synthetic_runs(monkeypatch):
    s = runs.Setting
    values = {("FedNCM", s(alpha=a)): [64.0, 65.0, 66.0] for a in runs.ALPHAS}
    values[("LP", runs.PRIMARY)] = [80.0, 82.0]
    _fake_runs(monkeypatch, values)
    drawn = get_figure("legate2023_fig3").draw({"tier": "full"})
    assert isinstance(drawn, DrawnFigure) and isinstance(drawn.figure, Figure)
    d = drawn.data
    assert sorted(d["series"].unique()) == ["FedNCM", "LP"]
    lp = d[d["series"] == "LP"].iloc[0]
    assert (lp["x"], lp["y"], lp["y_lo"], lp["y_hi"], lp["n_seeds"]) == (0.1, 81.0, 80.0, 82.0, 2)
    readings = {r.series: r for r in drawn.readings}
    assert (
        readings["LP"].paper == 82.5
        and readings["LP"].ours == 81.0
        and readings["LP"].source == "legate2023:158"
    )
    assert readings["FT"].ours is None
    assert any(n.startswith("FT at alpha=0.1") and "NOT RUN" in n for n in drawn.notes)


def test_draw_sweep_puts_points_and_readings():
    data = pd.DataFrame(
        {"series": ["FedNCM", "FedNCM"], "x": [100, 200], "y": [64.0, 64.0], "y_lo": [63.0, 64.0],
         "y_hi": [65.0, 64.0], "n_seeds": [3, 1]}
    )  # fmt: skip
    fig = draw.draw_sweep(
        data, xs=[100, 200, 500], xlabel="K", title="t", readings=[Reading("FedNCM", 100, 64.8, 64.0, "legate2023:159")],
        caption=["NOT RUN: LP"],
    )  # fmt: skip
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["100", "200", "500"]
    labels = ax.get_legend_handles_labels()[1]
    assert "FedNCM (ours, 1-3 seeds)" in labels and "FedNCM (paper, legate2023:159)" in labels
    fig.canvas.draw()


def _curve(seed: int, rounds: int = 4) -> pd.DataFrame:
    return pd.DataFrame(
        {"round": range(rounds + 1), "stage": "lp", "accuracy": [10.0 + 10 * r + seed for r in range(rounds + 1)],
         "test_loss": 1.0, "train_loss": 1.0, "uplink_bytes": [1e8 * r for r in range(rounds + 1)],
         "downlink_bytes": [1e8 * r for r in range(rounds + 1)], "compute_f": [1e4 * r for r in range(rounds + 1)],
         "wall_s": 0.0, "method": "lp", "seed": seed}
    )  # fmt: skip


def test_draw_curves_truncates_and_averages():
    pts = draw.curve_points({"LP": [_curve(0), _curve(2)], "Random": [_curve(0, rounds=10)]})
    lp = pts[(pts["series"] == "LP") & (pts["axis"] == "round")]
    assert list(lp["y"]) == [11.0, 21.0, 31.0, 41.0, 51.0] and lp["y_lo"].iloc[0] == 10.0
    comm = pts[(pts["series"] == "LP") & (pts["axis"] == "communication")]
    assert comm["x"].iloc[-1] == pytest.approx(0.8)  # GB, up + down
    singles = pd.DataFrame({"series": ["FedNCM"] * 3, "axis": ["round", "communication", "compute"],
                            "x": [1.0, 4.1e-3, 5e4], "y": [64.6] * 3})  # fmt: skip
    fig = draw.draw_curves(pts, title="t", singles=singles, max_round=4.0,
                           readings=[Reading("LP", None, 82.5, None, "legate2023:158")])  # fmt: skip
    random_line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "Random (ours, 1 seeds)")
    assert max(random_line.get_xdata()) == 4.0  # truncated at the other methods' last round
    full = draw.draw_curves(pts, title="t")
    random_full = next(ln for ln in full.axes[0].get_lines() if ln.get_label() == "Random (ours, 1 seeds)")
    assert max(random_full.get_xdata()) == 10.0


def test_draw_grids_one_panel_per_method():
    g = pd.DataFrame({"client_lr": [0.1, 0.1, 0.01, 0.01], "server_lr": [1e-3, 1e-4, 1e-3, 1e-4],
                      "y": [80.0, float("nan"), 85.0, 70.0]})  # fmt: skip
    fig = draw.draw_grids({"FT": g, "FedNCM+FT": g.assign(y=g["y"] + 1)}, title="t")
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["FT", "FedNCM+FT"]
    texts = [t.get_text() for t in panels[0].texts]
    assert sorted(texts) == sorted(["80.0", "div.", "85.0", "70.0"])
