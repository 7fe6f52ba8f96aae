"""fedcof's figures in the registry (benchmark/figures/fedcof*.py): every caption catalogued at its line,
drawable ones declare their inputs, the cheap draws on tiny synthetic inputs, and the count noise of App. N."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark.closed_form.stats import CountNoise, class_means_message, client_rng
from benchmark.figures import fedcof_ablation as abl
from benchmark.figures import fedcof_cost, fedcof_curves, fedcof_noise
from benchmark.figures.registry import PAPER_FILES, DrawnFigure, list_figures
from benchmark.papers import papers_dir

PAPER = papers_dir() / PAPER_FILES["fedcof"]  # FLB_PAPERS_DIR, else the shared/papers above the checkout
FEDCOF_FIGURES = list_figures(paper="fedcof")


def test_every_fedcof_figure_is_registered() -> None:
    assert [s.name for s in FEDCOF_FIGURES] == [f"fedcof_fig{i}" for i in range(1, 11)]
    undrawable = {s.name for s in FEDCOF_FIGURES if not s.drawable}
    assert undrawable == {"fedcof_fig1", "fedcof_fig2", "fedcof_fig8"}


@pytest.mark.parametrize("spec", FEDCOF_FIGURES, ids=lambda s: s.name)
def test_caption_line_and_inputs(spec, real_data_root, real_weights_dir) -> None:
    if not PAPER.is_file():
        pytest.skip(f"no paper text at {PAPER}")
    number = re.fullmatch(r"Fig\. (\d+)", spec.label).group(1)  # type: ignore[union-attr]
    line = PAPER.read_text().splitlines()[spec.line - 1]
    assert re.search(rf"Figure {number}\.", line), line[:80]
    if not spec.drawable:
        assert spec.reason and spec.why_not({}) == spec.reason
        return
    cfg = {
        "data_root": str(real_data_root),
        "weights_dir": str(real_weights_dir),
        "tier": "full",
        "device": "cuda",
    }
    assert spec.why_not(cfg) is None
    files = spec.inputs(cfg)
    assert all(isinstance(p, str) and p.startswith("results/") for p in files)
    assert bool(files) == (spec.name != "fedcof_fig6")  # Fig. 6 is arithmetic: no inputs


def test_ci_tier_runs_the_cheap_figures_only(real_data_root, real_weights_dir) -> None:
    cfg = {"data_root": str(real_data_root), "weights_dir": str(real_weights_dir), "tier": "ci"}
    runs = {s.name for s in FEDCOF_FIGURES if s.why_not(cfg) is None}
    assert runs == {"fedcof_fig5", "fedcof_fig6", "fedcof_fig9", "fedcof_fig10"}
    assert "device=cuda" in (fedcof_curves.fig3_unavailable(cfg) or "")


# --- Fig. 6: arithmetic -------------------------------------------------------------------------------


def test_fig6_costs_follow_the_fedcof_convention() -> None:
    drawn = fedcof_cost.draw({})
    assert isinstance(drawn, DrawnFigure) and drawn.readings == ()
    d = fedcof_cost.fig6_data()
    at = d.set_index(["method", "d", "x"])["y"]
    # Fed3R: K (d^2 + 100 d) floats, FedCOF: K * 100 * d floats (counts not charged), 4 bytes, MB = 1e6
    assert at[("Fed3R", 512, 100)] == pytest.approx(100 * (512**2 + 100 * 512) * 4 / 1e6)
    assert at[("FedCOF", 1280, 1000)] == pytest.approx(1000 * 100 * 1280 * 4 / 1e6)
    for dim in (512, 768, 1280):
        assert (
            d[(d.method == "Fed3R") & (d.d == dim)]["y"].to_numpy()
            > d[(d.method == "FedCOF") & (d.d == dim)]["y"].to_numpy()
        ).all()
    fedcof = d[d.method == "FedCOF"].set_index(["d", "x"])["y"]
    # FedCOF is linear in d and in the number of clients
    assert np.allclose(
        fedcof.xs(1280, level="d").to_numpy() / fedcof.xs(512, level="d").to_numpy(), 1280 / 512
    )
    per_client = fedcof.xs(512, level="d")
    assert np.allclose(
        per_client.to_numpy() / per_client.index.to_numpy(), per_client.iloc[0] / per_client.index[0]
    )
    assert np.array_equal(d[d.method == "FedCOF"]["y"].to_numpy(), d[d.method == "FedNCM"]["y"].to_numpy())


# --- App. N: count noise ------------------------------------------------------------------------------


def test_count_noise_vanishes_as_epsilon_grows_and_clips_at_zero() -> None:
    counts = np.array([1.0, 5.0, 40.0, 300.0])
    rng = lambda: np.random.default_rng(0)
    assert np.array_equal(CountNoise("uniform", 1.0).perturb(counts, rng()), counts)
    for kind in ("gaussian", "laplace"):
        assert np.allclose(CountNoise(kind, 1e12).perturb(counts, rng()), counts, atol=1e-4)
        heavy = CountNoise(kind, 1e-3).perturb(counts, rng())
        assert (heavy >= 0).all() and not np.allclose(heavy, counts)
    uni = CountNoise("uniform", 0.1).perturb(counts, rng())
    assert (np.abs(uni - counts) <= 0.9 * counts + 1e-9).all()


def test_clipped_class_is_not_sent() -> None:
    x = np.random.default_rng(0).normal(size=(60, 3)).astype(np.float32)
    y = np.repeat([0, 1, 2], 20)
    noise = CountNoise("laplace", 1e-4)  # scale 1e4: about half the counts clip
    msg = class_means_message(0, x, y, np.dtype(np.float32), noise=noise, seed=3)
    expected = noise.perturb(np.array([20.0, 20.0, 20.0]), client_rng(3, 0, 1))
    assert np.array_equal(msg.classes, np.flatnonzero(expected > 0))
    assert np.allclose(msg.counts, expected[expected > 0])


# --- Figs. 9, 10, 5 on tiny synthetic features ---------------------------------------------------------


def _blobs(n_classes=4, per=40, d=6, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(n_classes, d))
    y = np.repeat(np.arange(n_classes), per)
    x = (centres[y] + rng.normal(size=(len(y), d))).astype(np.float32)
    return x, y


def _clients(n, k, seed):
    perm = np.random.default_rng(seed).permutation(n)
    return [np.sort(c) for c in np.array_split(perm, k)]


def test_fig9_rows_and_draw_on_synthetic_features() -> None:
    x, y = _blobs()
    xt, yt = _blobs(seed=1)
    parts = {s: _clients(len(y), 5, s) for s in (0, 1)}
    rows = fedcof_noise.fig9_rows(x, y, xt, yt, parts, 4, epsilons=(0.1, 1.0), kinds=("uniform", "laplace"),
                                  options={"gamma": 1.0})  # fmt: skip
    assert len(rows) == 2 * (1 + 2 * 2)
    clean = rows[rows.noise == fedcof_noise.NO_NOISE].set_index("seed")["accuracy"]
    eps1 = rows[(rows.noise == "uniform") & (rows.epsilon == 1.0)].set_index("seed")["accuracy"]
    assert np.allclose(clean, eps1)  # uniform eps = 1 is no noise
    wild = fedcof_noise.fig9_rows(
        x, y, xt, yt, parts, 4, epsilons=(1e-4,), kinds=("laplace",), options={"gamma": 1.0}
    )
    wild = wild[wild.noise == "laplace"].set_index("seed")["accuracy"]
    assert not np.allclose(clean, wild)  # the noise reaches the FedCOF clients
    data = fedcof_noise.summarise(rows)
    assert set(data.columns) >= {"series", "x", "y", "y_lo", "y_hi", "n_seeds"} and (data.n_seeds == 2).all()
    fig = fedcof_noise.draw_fig9_figure(data)
    assert len(fig.axes) == 1


def test_fig10_counts_of_one_client() -> None:
    _, y = _blobs(per=30)
    client = np.arange(0, 70)  # classes 0, 1 (30 each) and 10 of class 2
    rows = fedcof_noise.fig10_rows(y, client, 4, epsilon=1.0, kinds=("uniform",), seeds=(0, 1, 2))
    assert sorted(rows.cls.unique()) == [0, 1, 2]
    assert np.array_equal(rows.noisy, rows.real)  # eps = 1: the real counts
    rows = fedcof_noise.fig10_rows(y, client, 4, epsilon=0.1, kinds=("uniform", "laplace"), seeds=(0, 1, 2))
    data = fedcof_noise.summarise_fig10(rows)
    real = data[data.series == "real"].set_index("x")["y"]
    assert real.to_dict() == {0: 30.0, 1: 30.0, 2: 10.0}
    assert (data[data.series != "real"]["n_seeds"] == 3).all()
    assert len(fedcof_noise.draw_fig10_figure(data).axes) == 2


def test_fig5_rows_readings_and_draw() -> None:
    x, y = _blobs(per=60)
    xt, yt = _blobs(seed=1)
    g = abl.Fig5Grid(clients=(2, 4), alphas=(0.1,), means_clients=(2,), means=(1, 2), seeds=(0,))
    parts = {(k, a, s): _clients(len(y), k, s) for k, a, s in g.partitions()}
    rows = abl.fig5_rows(x, y, xt, yt, parts, 4, g, fedcof={"gamma": 1.0})
    assert set(rows.panel) == {"clients", "means"}
    assert len(rows[(rows.panel == "clients")]) == 2 * 2  # FedCOF and FedNCM at 2 and 4 clients
    data = abl.summarise(rows)
    assert {"FedCOF 1 mean", "FedCOF 2 means", "FedCOF alpha=0.1", "FedNCM alpha=0.1"} <= set(data.series)
    reads = abl.readings(data)
    assert reads[0]["paper"] == 2.6 and reads[0]["ours"] is None  # no 10-client setting in this grid
    assert len(abl.draw_fig5_figure(data, reads).axes) == 2


def test_fig5_ci_grid_is_reduced_and_names_its_partitions() -> None:
    assert abl.grid({"tier": "ci"}) is abl.CI_GRID and abl.grid({}) is abl.FULL_GRID
    parts = abl.CI_GRID.partitions()
    assert (100, 0.1, 0) in parts and len(parts) == 5 and len(abl.FULL_GRID.partitions()) > 50


# --- Figs. 4, 7: LP curves (synthetic curve files) -----------------------------------------------------


def _curve(path: Path, final: float, init: bool) -> str:
    from benchmark.fl.jobs import CURVE_COLUMNS

    rows = []
    if init:
        rows += [
            {"round": r, "stage": "init", "accuracy": 40.0 + r, "uplink_bytes": 1e6 * (r + 1)}
            for r in range(3)
        ]
    start = 3 if init else 0
    rows += [{"round": start + r, "stage": "lp", "accuracy": final - 10 + r, "uplink_bytes": 1e7 * (r + 1)}
             for r in range(11)]  # fmt: skip
    df = pd.DataFrame(rows)
    for c in CURVE_COLUMNS:
        if c not in df:
            df[c] = 0.0
    df["downlink_bytes"] = df["uplink_bytes"]
    df[list(CURVE_COLUMNS)].to_csv(path, index=False)
    return str(path)


def test_lp_figures_draw_curves_with_init_stage_and_reading(tmp_path, monkeypatch) -> None:
    series = {label: [_curve(tmp_path / f"{i}-{s}.csv", 50.0 + i, label != "Fed-LP") for s in range(2)]
              for i, label in enumerate(fedcof_curves.LP_SERIES)}  # fmt: skip
    monkeypatch.setattr(fedcof_curves, "lp_series", lambda config: series)
    monkeypatch.setattr("benchmark.figures.fedcof_data.is_substitute", lambda config: True)
    fig7 = fedcof_curves.draw_fig7({})
    (reading,) = fig7.readings
    assert reading.paper == 59.9 and reading.ours == pytest.approx(50.0)  # Fed-LP's last LP accuracy
    assert set(fig7.data.stage) == {"init", "lp"} and (fig7.data.n_seeds == 2).all()
    fig4 = fedcof_curves.draw_fig4({})
    assert len(fig4.figure.axes) == 2 and set(fig4.data["axis"]) == {"round", "communication"}
    assert any("Departure" in n for n in fig4.notes)


def test_lp_series_are_the_migrated_fig7_runs(real_data_root, real_weights_dir) -> None:
    cfg = {"data_root": str(real_data_root), "weights_dir": str(real_weights_dir), "precision": "fp32"}
    series = fedcof_curves.lp_series(cfg)
    assert list(series) == ["Fed-LP", "FedNCM+LP", "Fed3R+LP", "FedCOF+LP"]
    assert all(len(v) == 5 and all(p.endswith(".curve.csv") for p in v) for v in series.values())
    assert (
        "/dirichlet_fedcof-alpha0.1-num_clients100/fedcof_cifar100_lp/fedcof_lp/seed4.curve.csv"
        in series["FedCOF+LP"][4]
    )


def test_fig3_plans_ft_runs_only_where_training_is_allowed(real_data_root, real_weights_dir) -> None:
    cfg = {"data_root": str(real_data_root), "weights_dir": str(real_weights_dir), "device": "cuda"}
    assert fedcof_curves.fig3_unavailable(cfg) is None
    assert fedcof_curves.fig3_unavailable({}) is not None
    jobs = fedcof_curves.fig3_jobs(cfg)
    assert len(jobs) == 2 * 5 and all(len(v) == 3 for v in jobs.values())
    assert jobs[("CUB200", "FedNCM+FedAdam")][0].algorithm == "fedadam_init_fedncm"
    assert len(fedcof_curves.fig3_inputs(cfg)) == 30
    assert all(p.endswith(".csv") and not p.endswith(".curve.csv") for p in fedcof_curves.fig3_inputs(cfg))
