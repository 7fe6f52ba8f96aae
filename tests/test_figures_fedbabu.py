"""fedbabu's figures in the registry (benchmark/figures/fedbabu.py): every figure catalogued at its caption line,
the cheap data-distribution figures (Figs. 10, 11, 14) drawn from the real labels."""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmark.figures.registry import PAPER_FILES, list_figures
from tests.conftest import ROOT

FEDBABU = list_figures(paper="fedbabu")
PAPER = ROOT.parent / "shared" / "papers" / PAPER_FILES["fedbabu"]
PAPER_TEXT = PAPER.read_text().splitlines() if PAPER.is_file() else []
needs_paper = pytest.mark.skipif(not PAPER_TEXT, reason=f"no paper text at {PAPER}")
CI = {"tier": "ci"}


@needs_paper
def test_every_figure_of_fedbabu_is_registered() -> None:
    captions = {int(m.group(1)) for line in PAPER_TEXT for m in re.finditer(r"Figure (\d+): ", line)}
    assert captions == set(range(1, 17))
    assert {int(s.label.split()[-1]) for s in FEDBABU} == captions
    assert len({s.name for s in FEDBABU}) == 16


@needs_paper
@pytest.mark.parametrize("spec", FEDBABU, ids=lambda s: s.name)
def test_caption_line_holds_the_figure(spec) -> None:
    assert spec.name == f"fedbabu_fig{spec.label.split()[-1]}"
    assert f"{spec.label}:" in PAPER_TEXT[spec.line - 1]
    if spec.draw is None:
        assert len(spec.reason) > 20 and spec.why_not(CI) == spec.reason


@pytest.mark.parametrize("name", ["fedbabu_fig10", "fedbabu_fig11", "fedbabu_fig14"])
def test_partition_figures_run_in_the_ci_tier(name) -> None:
    spec = next(s for s in FEDBABU if s.name == name)
    assert spec.why_not(CI) is None and spec.inputs(CI) == []


@pytest.fixture(scope="module")
def config(real_data_root) -> dict:
    return {**CI, "data_root": str(real_data_root)}


def test_fig14_shards_of_cifar10(config) -> None:
    from benchmark.figures.fedbabu_partitions import draw_fig14

    drawn = draw_fig14(config)
    assert len(drawn.figure.axes) == 2
    for s in (10, 2):
        rows = drawn.data[drawn.data["series"] == f"s={s}"]
        per_client = rows.groupby("x")["count"].sum()
        assert len(per_client) == 10 and (per_client == 5000).all()  # 50,000 images over 10 clients
        assert rows.groupby("x")["y"].nunique().max() <= s  # at most s classes (App. R)
    readings = {r.series.split(":")[0] + r.series.split(":")[1][:7]: r for r in drawn.readings}
    assert readings["s=10 images"].ours == readings["s=10 images"].paper == 500
    assert readings["s=2 images"].ours == readings["s=2 images"].paper == 2500
    assert all(r.ours <= r.paper for r in drawn.readings if "classes" in r.series)
    assert all(r.source == "fedbabu:836" for r in drawn.readings)


def test_dirichlet_figures(config) -> None:
    from benchmark.figures import fedbabu_partitions as parts

    drawn = parts.draw_dirichlet("fedbabu_fig11")(config)
    assert len([a for a in drawn.figure.axes if a.get_xlabel() == "client"]) == 2
    totals = drawn.data.groupby("series")["count"].sum()
    assert totals["train"] == 50000 and totals["test"] == 10000
    assert (drawn.data[drawn.data["series"] == "train"].groupby("x")["count"].sum() == 500).all()
    # smaller beta, fewer classes per client (App. H: "the lower beta implies the larger heterogeneity")
    labels = parts.Labels.load("cifar100", config)
    classes = {b: np.mean((parts.dirichlet_counts(labels, b)[0] > 0).sum(1)) for b in (1.0, 0.5)}
    assert classes[0.5] < classes[1.0]
    fig11_classes = drawn.data[drawn.data["series"] == "train"].groupby("x")["y"].nunique().mean()
    assert fig11_classes == pytest.approx(classes[0.5])


# ------------------------------------------------------------------ centralised curves (Figs. 2-9)
CENTRAL = [f"fedbabu_fig{n}" for n in range(2, 10)]


@pytest.mark.parametrize("name", CENTRAL)
def test_central_figures_need_training(name) -> None:
    spec = next(s for s in FEDBABU if s.name == name)
    reason = spec.why_not({**CI, "use_records": False})
    assert reason is not None and "cpu_training=true" in reason
    recorded = name in ("fedbabu_fig4", "fedbabu_fig5")  # runs/ records their runs (issue 24)
    assert (spec.why_not(CI) is None) is recorded
    assert spec.why_not({"cpu_training": True}) is None and spec.why_not({"device": "cuda"}) is None
    paths = spec.inputs({"cpu_training": True})
    assert len(paths) == 3 and all(p.startswith("results/runs/pfl_central/") for p in paths)
    assert all("/e160-nall/" in p for p in paths)  # the paper's budget by default


def test_central_series() -> None:
    from benchmark.figures.fedbabu_central import figure_jobs

    cfg = {"cpu_training": True, "fedbabu_central_epochs": 3, "fedbabu_central_train_images": 500}
    parts = {(j.part, j.head_init) for j in figure_jobs(cfg, "fedbabu_fig4").values()}
    assert parts == {("full", "default"), ("body", "default"), ("head", "default")}
    inits = {(j.part, j.head_init) for j in figure_jobs(cfg, "fedbabu_fig5").values()}
    assert inits == {("body", "default"), ("body", "orthogonal"), ("body", "similar_rows")}
    job = figure_jobs(cfg, "fedbabu_fig4")["full"]
    assert (job.model, job.dataset, job.epochs, job.train_images) == ("4convnet", "cifar10", 3, "500")
    assert {j.model for j in figure_jobs(cfg, "fedbabu_fig8").values()} == {"resnet50_cifar"}


def test_head_row_cosine() -> None:
    import torch

    from benchmark.runners.pfl_central import head_row_cosine

    assert head_row_cosine(torch.eye(10, 64)) == pytest.approx(0.0)
    assert head_row_cosine(torch.ones(10, 64)) == pytest.approx(1.0)
    torch.manual_seed(0)
    assert abs(head_row_cosine(torch.empty(100, 1024).uniform_(-1, 1))) < 0.01  # App. B: nearly orthogonal


def test_central_draw_from_records(tmp_path, monkeypatch) -> None:
    """The figure reads its three records; a reduced budget is said in the notes."""
    import json

    from benchmark.figures.fedbabu_central import draw, figure_jobs

    monkeypatch.chdir(tmp_path)
    cfg = {"cpu_training": True, "fedbabu_central_epochs": 2, "fedbabu_central_train_images": 100}
    for k, job in enumerate(figure_jobs(cfg, "fedbabu_fig5").values()):
        rec = {
            "history": [{"epoch": e, "test_accuracy": 10.0 * e + k} for e in (1, 2)],
            "head_row_cosine": 0.1 * k,
            "config": {"milestones": [1, 1]},
            "train_images": 100,
            "test_images": 10000,
        }
        (tmp_path / job.path).parent.mkdir(parents=True)
        (tmp_path / job.path).write_text(json.dumps(rec))
    drawn = draw("fedbabu_fig5")(cfg)
    assert len(drawn.data) == 6 and set(drawn.data["x"]) == {1, 2}
    assert any("REDUCED BUDGET: 2 epochs" in n for n in drawn.notes)
    assert [t.get_text() for t in drawn.figure.axes[0].get_legend().get_texts()][1] == "orthogonal (0.10)"
