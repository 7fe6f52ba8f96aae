"""Claims as checks (benchmark/claims, claims/*.yaml): loader errors, each kind's evaluator on synthetic
check reports (HOLDS / DOES NOT HOLD / NOT RUN), quotes on their lines, the CLI end to end, and the catalogue
against the real results/checks when present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmark.claims import (
    DOES_NOT_HOLD,
    HOLDS,
    NOT_RUN,
    CheckIndex,
    FigureStore,
    check_keys,
    evaluate_claim,
    load_catalogue,
    load_file,
    papers_dir,
    quote_on_line,
)
from benchmark.claims.cli import main
from benchmark.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
CATALOGUE = REPO / "claims"
PAPERS = papers_dir() if (papers_dir() / "README.md").is_file() else None
REAL_CHECKS = REPO / "results" / "checks" if (REPO / "results" / "checks").is_dir() else None


# ------------------------------------------------------------------------------------------------ fixtures
def _cell(key: str, ours: list[float] | None, paper: float | None, reason: str = "") -> dict[str, Any]:
    return {
        "key": key,
        "ours": ours or [],
        "paper": paper,
        "verdict": "NOT RUN" if not ours else "PASS",
        "reason": reason or None,
    }


def _checks(tmp: Path, cells: list[dict[str, Any]]) -> Path:
    folder = tmp / "checks"
    folder.mkdir(exist_ok=True)
    by_target: dict[str, list[dict[str, Any]]] = {}
    for c in cells:
        by_target.setdefault(c["key"].split("#")[0].replace("/", "_"), []).append(c)
    for target, cs in by_target.items():
        (folder / f"{target}.json").write_text(json.dumps({"target": target, "tier": "ci", "cells": cs}))
    return folder


def _claims(tmp: Path, entries: list[dict[str, Any]], name: str = "toy") -> Path:
    folder = tmp / "claims"
    folder.mkdir(exist_ok=True)
    base = {"line": 13, "quote": "Covariances for Free", "statement": "s"}  # on its line (flb claims checks it)
    (folder / f"{name}.yaml").write_text(
        yaml.safe_dump({"paper": name, "document": "fedcof", "claims": [{**base, **e} for e in entries]})
    )
    return folder


def _eval(tmp: Path, entry: dict[str, Any], cells: list[dict[str, Any]], figures: Path | None = None):
    folder = _claims(tmp, [{"id": "c", **entry}])
    claims = load_file(folder / "toy.yaml")
    checks = CheckIndex(_checks(tmp, cells))
    check_keys(claims, checks)
    return evaluate_claim(claims[0], checks, FigureStore(figures))


A, B = "toy/t1#a", "toy/t1#b"


# ---------------------------------------------------------------------------------------------- ordering
def test_ordering_welch_rule(tmp_path: Path) -> None:
    entry = {"kind": "ordering", "operands": {"a": A, "b": B}}
    held = _eval(tmp_path, entry, [_cell(A, [80.0, 80.2, 79.8], 85.0), _cell(B, [78.0, 78.1, 77.9], 84.0)])
    assert held.verdict == HOLDS and held.paper_verdict == HOLDS
    assert "SE" in held.rule_text and "Welch" in held.rule_text
    # a mean difference of 1 point inside the seed noise (SE ~ 1.2): DOES NOT HOLD, numbers in the reason
    noisy = _eval(tmp_path, entry, [_cell(A, [80.0, 83.0, 77.0], 85.0), _cell(B, [79.0, 79.1, 78.9], 86.0)])
    assert noisy.verdict == DOES_NOT_HOLD and "d=1" in noisy.reason
    assert noisy.paper_verdict == DOES_NOT_HOLD  # 85 < 86 on the paper's own numbers
    # one seed a side: plain comparison
    single = _eval(tmp_path, entry, [_cell(A, [80.0], 85.0), _cell(B, [79.9], 84.0)])
    assert single.verdict == HOLDS and "no spread" in single.reason


def test_ordering_not_run_copies_the_reason(tmp_path: Path) -> None:
    entry = {"kind": "ordering", "operands": {"a": A, "b": B}}
    r = _eval(tmp_path, entry, [_cell(A, None, 85.0, reason="needs a GPU"), _cell(B, [1.0], 84.0)])
    assert r.verdict == NOT_RUN and "needs a GPU" in r.reason and A in r.reason
    assert r.paper_verdict == HOLDS  # the paper's numbers are still checked


def test_ordering_fraction_over_settings(tmp_path: Path) -> None:
    cells = [
        _cell(f"toy/t1#{s}/{m}", [v], v)
        for s, (x, y) in {"s1": (2, 1), "s2": (2, 1), "s3": (1, 2)}.items()
        for m, v in (("a", x), ("b", y))
    ]
    entry = {
        "kind": "ordering",
        "settings": ["s1", "s2", "s3"],
        "operands": {"a": "toy/t1#{setting}/a", "b": "toy/t1#{setting}/b"},
    }
    assert _eval(tmp_path, entry, cells).verdict == DOES_NOT_HOLD
    r = _eval(tmp_path, {**entry, "rule": {"fraction": 0.6}}, cells)
    assert r.verdict == HOLDS and "2/3" in r.reason and len(r.settings) == 3


def test_absent_report_is_not_run_but_unknown_key_in_present_report_is_an_error(tmp_path: Path) -> None:
    entry = {"kind": "ordering", "operands": {"a": A, "b": "other/t9#x"}}
    r = _eval(tmp_path, entry, [_cell(A, [1.0], 1.0)])
    assert r.verdict == NOT_RUN and "no such cell" in r.reason
    with pytest.raises(ConfigError, match=r"toy.yaml: claim 'c': field 'operands.b'.*typo"):
        _eval(
            tmp_path, {"kind": "ordering", "operands": {"a": A, "b": "toy/t1#typo"}}, [_cell(A, [1.0], 1.0)]
        )


# ------------------------------------------------------------------------------------------------ within
def test_within_equivalence(tmp_path: Path) -> None:
    entry = {"kind": "within", "operands": {"a": A, "b": B}, "rule": {"tol": 1.0}}
    assert _eval(tmp_path, entry, [_cell(A, [50.0, 50.1], 50), _cell(B, [50.3], 52)]).verdict == HOLDS
    r = _eval(tmp_path, entry, [_cell(A, [50.0, 50.1], 50), _cell(B, [51.5], 52)])
    assert r.verdict == DOES_NOT_HOLD and r.paper_verdict == DOES_NOT_HOLD
    # the 2-SE band counts: means 0.5 apart but noisy seeds
    assert _eval(tmp_path, entry, [_cell(A, [48.0, 52.0], 50), _cell(B, [50.5], 50)]).verdict == DOES_NOT_HOLD
    assert _eval(tmp_path, entry, [_cell(A, None, 50), _cell(B, [50.5], 50)]).verdict == NOT_RUN


# ---------------------------------------------------------------------------------------------- monotone
def _figure(tmp: Path, name: str, x: list[Any], **series: list[float]) -> Path:
    """``<tmp>/figures/<name>.csv``: each of ``series`` (name -> its y at each of ``x``), in turn; the folder."""
    folder = tmp / "figures"
    folder.mkdir(exist_ok=True)
    rows = "".join(f"{s},{xi},{yi}\n" for s, ys in series.items() for xi, yi in zip(x, ys, strict=True))
    (folder / f"{name}.csv").write_text("series,x,y\n" + rows)
    return folder


def test_monotone_on_figure_data(tmp_path: Path) -> None:
    figs = _figure(tmp_path, "fig", [1, 2, 3], up=[10.0, 11.0, 12.5], bumpy=[10.0, 9.0, 12.0])
    entry = {
        "kind": "monotone",
        "operands": {"series": {"figure": "fig", "series": "{setting}"}},
        "rule": {"direction": "non_decreasing"},
    }
    assert _eval(tmp_path, {**entry, "settings": ["up"]}, [], figs).verdict == HOLDS
    r = _eval(tmp_path, {**entry, "settings": ["bumpy"]}, [], figs)
    assert r.verdict == DOES_NOT_HOLD and "wrong-way" in r.reason
    assert r.paper_verdict is None  # figure data has no printed paper values
    assert (
        _eval(
            tmp_path,
            {**entry, "settings": ["bumpy"], "rule": {"direction": "non_decreasing", "slack": 1.5}},
            [],
            figs,
        ).verdict
        == HOLDS
    )
    missing = _eval(tmp_path, {**entry, "settings": ["up"]}, [], tmp_path / "nowhere")
    assert missing.verdict == NOT_RUN and "figure fig not built: snakemake --cores all fig" in missing.reason
    assert "no series 'down'" in _eval(tmp_path, {**entry, "settings": ["down"]}, [], figs).reason


def test_monotone_on_cells(tmp_path: Path) -> None:
    keys = [f"toy/t1#e{i}" for i in range(3)]
    entry = {
        "kind": "monotone",
        "operands": {"series": {"cells": keys, "x": [0, 1, 2]}},
        "rule": {"direction": "non_increasing"},
    }
    r = _eval(tmp_path, entry, [_cell(k, [v], p) for k, v, p in zip(keys, (3, 2, 1), (1, 2, 3), strict=True)])
    assert r.verdict == HOLDS and r.paper_verdict == DOES_NOT_HOLD


# ------------------------------------------------------------------------------------------ fewer_rounds
def test_fewer_rounds_cells_and_curves(tmp_path: Path) -> None:
    entry = {"kind": "fewer_rounds", "operands": {"a": A, "b": B}}
    assert _eval(tmp_path, entry, [_cell(A, [200.0], 200), _cell(B, [500.0], 500)]).verdict == HOLDS
    r = _eval(tmp_path, entry, [_cell(A, [500.0], 1000), _cell(B, [500.0], 500)])
    assert r.verdict == DOES_NOT_HOLD and r.paper_verdict == DOES_NOT_HOLD
    assert (
        _eval(
            tmp_path, {**entry, "rule": {"strict": False}}, [_cell(A, [500.0], 1000), _cell(B, [500.0], 500)]
        ).verdict
        == HOLDS
    )
    figs = _figure(tmp_path, "curves", [10, 20, 30], fast=[50.0, 70.0, 72.0], slow=[30.0, 60.0, 71.0])
    curves = {
        "kind": "fewer_rounds",
        "operands": {
            "a": {"figure": "curves", "series": "fast"},
            "b": {"figure": "curves", "series": "slow"},
        },
    }
    assert _eval(tmp_path, {**curves, "rule": {"target": 65}}, [], figs).verdict == HOLDS
    assert _eval(tmp_path, {**curves, "rule": {"target": 80}}, [], figs).verdict == DOES_NOT_HOLD  # a never
    swapped = {
        "kind": "fewer_rounds",
        "operands": {"a": curves["operands"]["b"], "b": curves["operands"]["a"]},
        "rule": {"target": 65},
    }
    assert _eval(tmp_path, swapped, [], figs).verdict == DOES_NOT_HOLD


# -------------------------------------------------------------------------------------- cost, ratio, bound
def test_cost_ratio_bound(tmp_path: Path) -> None:
    cells = [_cell(A, [5.9, 5.91], 5.9), _cell(B, [110.2, 110.3], 110.2)]
    assert (
        _eval(tmp_path, {"kind": "cost", "operands": {"a": A, "b": B}, "rule": {"factor": 10}}, cells).verdict
        == HOLDS
    )
    assert (
        _eval(
            tmp_path, {"kind": "cost", "operands": {"a": A, "b": B}, "rule": {"factor": 100}}, cells
        ).verdict
        == DOES_NOT_HOLD
    )
    r = _eval(
        tmp_path, {"kind": "ratio", "operands": {"a": B, "b": A}, "rule": {"min": 18, "max": 19}}, cells
    )
    assert r.verdict == HOLDS and "a/b=18.6" in r.reason
    bound = {"kind": "bound", "operands": {"a": A}, "rule": {"scale": 0.5, "max": 3.0}}
    assert _eval(tmp_path, bound, cells).verdict == HOLDS
    assert _eval(tmp_path, {**bound, "rule": {"scale": 1.0, "max": 3.0}}, cells).verdict == DOES_NOT_HOLD


def test_operands_in_different_units_are_not_compared(tmp_path: Path) -> None:
    """legate2023ws Table 1 prints FedNCM's communication in Mb and LP's in GB: never compared as numbers."""
    entry = {"kind": "cost", "operands": {"a": A, "b": B}, "rule": {"factor": 100}}
    cells = [{**_cell(A, [32.8], 319.0), "metric": "comm_mb"}, {**_cell(B, [0.82], 149.3), "metric": "comm_gb"}]
    r = _eval(tmp_path, entry, cells)
    assert r.verdict == NOT_RUN and r.paper_verdict is None
    assert "different units" in r.reason and "comm_mb" in r.reason and "comm_gb" in r.reason
    same = [{**c, "metric": "comm_gb"} for c in cells]
    assert _eval(tmp_path, entry, same).verdict == DOES_NOT_HOLD  # 32.8 x 100 > 0.82: compared


def test_diff_and_constant_operands(tmp_path: Path) -> None:
    C = "toy/t1#c"
    entry = {"kind": "within", "operands": {"a": {"diff": [A, B]}, "b": {"value": 4.6}}, "rule": {"tol": 0.1}}
    r = _eval(tmp_path, entry, [_cell(A, [85.4], 85.4), _cell(B, [82.5], 82.5), _cell(C, [1.0], 1.0)])
    assert r.verdict == DOES_NOT_HOLD and r.paper_verdict == DOES_NOT_HOLD  # 2.9, not 4.6


# -------------------------------------------------------------------------------------------- loader errors
@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        ({"kind": "bigger", "operands": {"a": A, "b": B}}, "kind", "unknown kind 'bigger'"),
        ({"kind": "ordering", "operands": {"a": A}}, "operands", "ordering takes"),
        ({"kind": "ordering", "operands": {"a": A, "b": "nokey"}}, "operands.b", "not a check-cell key"),
        (
            {"kind": "ordering", "operands": {"a": A, "b": B}, "rule": {"marg": 1}},
            "rule.marg",
            "unknown parameter",
        ),
        (
            {"kind": "monotone", "operands": {"series": {"cells": [A, B], "x": [1, 2]}}},
            "rule.direction",
            "required",
        ),
        (
            {"kind": "monotone", "operands": {"series": A}, "rule": {"direction": "non_decreasing"}},
            "operands.series",
            "needs a curve",
        ),
        ({"kind": "ordering", "operands": {"a": "toy/t#{dataset}", "b": B}}, "operands", "template field"),
        ({"kind": "ordering", "operands": {"a": A, "b": B}, "line": 0}, "line", "not a 1-based line"),
        ({"kind": "ordering", "operands": {"a": A, "b": B}, "document": "nature2030"}, "document", "unknown"),
        ({"kind": "ratio", "operands": {"a": A, "b": B}}, "rule", "needs min or max"),
        ({"kind": "ordering", "operands": {"a": {"value": "x"}, "b": B}}, "operands.a", "not a number"),
    ],
)
def test_loader_errors_name_file_claim_and_field(
    tmp_path: Path, entry: dict, field: str, message: str
) -> None:
    folder = _claims(tmp_path, [{"id": "bad-claim", **entry}])
    with pytest.raises(ConfigError) as err:
        load_file(folder / "toy.yaml")
    text = str(err.value)
    assert (
        "toy.yaml" in text and "claim 'bad-claim'" in text and f"field '{field}'" in text and message in text
    )


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    _claims(tmp_path, [{"id": "x", "kind": "ordering", "operands": {"a": A, "b": B}}], "one")
    _claims(tmp_path, [{"id": "x", "kind": "ordering", "operands": {"a": A, "b": B}}], "two")
    with pytest.raises(ConfigError, match="duplicate"):
        load_catalogue(tmp_path / "claims")


# ------------------------------------------------------------------------------------------- the catalogue
def test_catalogue_size_and_papers() -> None:
    catalogue = load_catalogue(CATALOGUE)
    assert {"legate2023", "legate2023ws", "fedcof", "bernier2024", "fedbabu"} <= set(catalogue)
    assert sum(len(c) for c in catalogue.values()) >= 25
    assert all(len(catalogue[p]) >= 5 for p in ("legate2023", "fedcof", "bernier2024", "fedbabu"))


@pytest.mark.skipif(PAPERS is None, reason="../shared/papers not found")
def test_every_quote_is_on_its_line() -> None:
    assert PAPERS is not None
    wrong = [
        f"{c.id} ({c.document}:{c.line})"
        for claims in load_catalogue(CATALOGUE).values()
        for c in claims
        if not quote_on_line(c.quote, c.document, c.line)
    ]
    assert not wrong, f"quotes not on their stated line: {wrong}"


# -------------------------------------------------------------------------------------------------- the CLI
def test_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = _claims(
        tmp_path,
        [
            {"id": "holds", "kind": "ordering", "operands": {"a": A, "b": B}},
            {"id": "fails", "kind": "ordering", "operands": {"a": B, "b": A}},
            {"id": "notrun", "kind": "ordering", "operands": {"a": A, "b": "toy/t1#c"}},
        ],
    )
    checks = _checks(
        tmp_path, [_cell(A, [2.0], 1.0), _cell(B, [1.0], 2.0), _cell("toy/t1#c", None, 0.0, "no GPU")]
    )
    out = tmp_path / "out"
    assert main(["--checks", str(checks), "--out", str(out), "--catalogue", str(cat)]) == 0
    doc = json.loads((out / "toy.json").read_text())
    assert doc["counts"] == {"HOLDS": 1, "DOES NOT HOLD": 1, "NOT RUN": 1}
    by_id = {c["id"]: c for c in doc["claims"]}
    assert by_id["holds"]["paper_verdict"] == DOES_NOT_HOLD and by_id["fails"]["paper_verdict"] == HOLDS
    assert by_id["notrun"]["reason"].endswith("no GPU")
    for c in doc["claims"]:
        assert {
            "id",
            "paper",
            "document",
            "line",
            "quote",
            "statement",
            "kind",
            "rule",
            "verdict",
            "reason",
            "evidence",
            "figure",
            "tables",
            "paper_verdict",
        } <= set(c)
        assert c["evidence"][0].keys() >= {"operand", "source", "values", "mean", "std", "n"}
    shown = capsys.readouterr().out
    assert "toy" in shown and "fails" in shown
    bad = _claims(tmp_path, [{"id": "typo", "kind": "ordering", "operands": {"a": A, "b": "toy/t1#zzz"}}])
    assert main(["--checks", str(checks), "--out", str(out), "--catalogue", str(bad)]) == 2
    assert "claim 'typo'" in capsys.readouterr().err


@pytest.mark.skipif(REAL_CHECKS is None, reason="no results/checks of a CI-tier run")
def test_catalogue_on_the_real_check_reports(tmp_path: Path) -> None:
    """Every key exists in its report (or its report is absent), and the cheap closed-form / cost claims get
    real verdicts."""
    assert REAL_CHECKS is not None
    out = tmp_path / "claims"
    assert main(["--checks", str(REAL_CHECKS), "--out", str(out), "--catalogue", str(CATALOGUE)]) == 0
    docs = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(docs) >= {"legate2023", "fedcof", "bernier2024", "fedbabu"}
    decided = sum(d["counts"]["HOLDS"] + d["counts"]["DOES NOT HOLD"] for d in docs.values())
    assert decided >= 5
    verdict = {c["id"]: c["verdict"] for d in docs.values() for c in d["claims"]}
    if verdict["legate2023-abstract-ncm-comm-orders-of-magnitude"] != NOT_RUN:
        assert verdict["legate2023-abstract-ncm-comm-orders-of-magnitude"] == HOLDS
    paper = {c["id"]: c["paper_verdict"] for d in docs.values() for c in d["claims"]}
    assert paper["fedcof-t3-cub-gains-over-fed3r"] == DOES_NOT_HOLD  # 79.4 - 77.7 = 1.7, printed as 2.2
