"""NOT RUN reasons are typed values rendered once (issue 25, benchmark/reasons.py).

A reason's kinds round-trip through the JSON the plan and checks files store; a reason of an unknown kind
cannot be built; its text is today's text, byte for byte; the one-screen summary and the report guard read
the typed fields, never the text; the plan file keeps the typed reason; a spec states a typed one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.errors import BenchmarkError, ConfigError, UnknownNameError
from benchmark.reasons import (
    NotRunReason,
    ReasonKind,
    needs_training,
    not_implemented_method,
    outside_ci_tier,
    reason_from_json,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", list(ReasonKind))
def test_every_kind_round_trips_through_json(kind) -> None:
    """Each kind survives to_dict -> JSON -> from_dict unchanged, and so does its rendered text."""
    reason = NotRunReason(kind, "cifar100", f"the {kind.value} statement", "run `flb x` here", "flb x", ("a note",))
    back = reason_from_json(json.loads(json.dumps(reason.to_dict())))
    assert back == reason and back.kind is kind and back.render() == reason.render()
    assert NotRunReason(kind.value, "x", "y").kind is kind  # the stored value builds the same kind
    assert reason_from_json(None) is None


@pytest.mark.parametrize("kind", ["budget", "needs_training", "", None, 3])
def test_a_reason_cannot_be_built_from_an_unknown_kind(kind) -> None:
    with pytest.raises(UnknownNameError, match="unknown NOT RUN reason kind"):
        NotRunReason(kind, "x", "y")
    with pytest.raises(UnknownNameError, match="use one of: missing data, missing weights"):
        NotRunReason.from_dict({"kind": kind, "missing": "x", "detail": "y"})


def test_a_malformed_reason_is_one_error() -> None:
    with pytest.raises(ConfigError, match="'detail' must be a non-empty string"):
        NotRunReason(ReasonKind.NO_VALUE, "a value", "  ")
    with pytest.raises(ConfigError, match="is not in its fix"):  # the command is the one its fix names
        NotRunReason(ReasonKind.MISSING_DATA, "cifar10", "absent", "run `flb data fetch cifar10`", "flb data fetch x")
    with pytest.raises(ConfigError, match="unknown fields"):
        NotRunReason.from_dict({"kind": "no value", "missing": "x", "detail": "y", "text": "z"})
    with pytest.raises(ConfigError, match="needs kind, missing and detail"):
        NotRunReason.from_dict({"kind": "no value", "detail": "y"})


def test_render_is_todays_text() -> None:
    """The one render method gives the text the producers wrote before the reasons were typed (the tables,
    checks and README compare byte for byte)."""
    assert outside_ci_tier("cifar100 x mobilenet_v2", "too slow").render() == (
        "outside the CI tier (cifar100 x mobilenet_v2: too slow); runs with --config tier=full"
    )
    assert needs_training("full-backbone training", "full-model training (p: ft under fedavg) needs a GPU: 1 h").render() == (
        "full-model training (p: ft under fedavg) needs a GPU: 1 h; run with --config device=cuda or the slurm "
        "profile (or cpu_training=true to train on this CPU)"
    )  # fmt: skip
    assert not_implemented_method("fedbabu_parts", "the pfl runner").render() == (
        "method 'fedbabu_parts' is not implemented by the pfl runner"
    )
    stale = needs_training("toy", "toy training needs a GPU").with_note("the ledger's record is stale, not used: r (x)")
    assert stale.render().endswith("train on this CPU); the ledger's record is stale, not used: r (x)")


def _checks(cells: list[dict]) -> dict:
    return {"target": "table2", "tier": "ci", "cells": [
        {"key": f"legate2023/table2#c{i}", "verdict": "NOT RUN", **c} for i, c in enumerate(cells)
    ]}  # fmt: skip


def test_the_summary_counts_by_kind_not_by_text() -> None:
    """The summary groups by the typed field: a text that reads like another kind does not move a cell, and
    two texts of one kind and item are one group."""
    from benchmark.tables.summary import summary_lines

    data = NotRunReason(ReasonKind.MISSING_DATA, "cub200", "dataset files absent: cub200: x")
    gpu = needs_training("full-backbone training", "dataset files absent: looks like data, is training")
    gpu2 = needs_training("full-backbone training", "full-model training (other cell) needs a GPU: 2 h")
    cells = [{"reason": r.render(), "not_run": r.to_dict()} for r in (data, gpu, gpu2)]
    lines = summary_lines(_checks(cells), [])
    assert "        2  needs full-backbone training (GPU; estimates in the table's reasons)" in lines
    assert "        1  no data for cub200" in lines
    assert any(line.startswith("  to fill it: snakemake --cores all table2 --config device=cuda") for line in lines)
    # the kind decides: the same text under another kind is another group
    relabelled = [{**c, "not_run": {**c["not_run"], "kind": "not implemented"}} for c in cells]
    assert "        3  not implemented in this suite" in summary_lines(_checks(relabelled), [])


def test_report_guard_reads_the_cell_filter_from_the_typed_reason() -> None:
    from benchmark.report_guard import build_config

    why = NotRunReason(ReasonKind.NOT_SELECTED, "^(cifar10)/.*", "not selected by cell_filter='^(cifar10)/.*'")
    cells = [{"verdict": "NOT RUN", "reason": "not selected by cell_filter='other'", "not_run": why.to_dict()}]
    assert build_config({"tier": "ci", "cells": cells}).cell_filter == "^(cifar10)/.*"
    assert build_config({"tier": "ci", "cells": [{**cells[0], "not_run": None}]}).cell_filter is None


def test_the_plan_file_keeps_the_typed_reason(tmp_path) -> None:
    """table4's cells are NOT RUN by its spec's typed reason; write_plan/read_plan give the same value."""
    from benchmark.tables.plan import make_plan, read_plan, write_plan

    plan = make_plan("table4", {"tier": "ci"})
    path = write_plan(plan, tmp_path)
    stored = json.loads(path.read_text())["cells"][0]["not_run"]
    assert stored["kind"] == "not a result" and "reason" not in json.loads(path.read_text())["cells"][0]
    back = read_plan("table4", tmp_path, path)
    assert [c.not_run for c in back.cells] == [c.not_run for c in plan.cells]
    assert back.cells[0].reason == "protocol table (rounds per method); used as an input of the cost model, not a result"


def test_a_spec_states_a_typed_reason(tmp_path) -> None:
    """A spec's not_run_reason text is a 'no runner' reason; the mapping form names its kind; an unknown kind
    is one error naming the file and the line."""
    from benchmark.tables.spec import load_spec

    assert load_spec("table4").not_run_reason.kind is ReasonKind.NOT_A_RESULT
    assert load_spec("table2").not_run_reason.kind is ReasonKind.NO_RUNNER
    text = (ROOT / "paper_tables" / "table4.yaml").read_text()
    assert "  kind: not a result\n" in text
    (tmp_path / "table4.yaml").write_text(text.replace("  kind: not a result\n", "  kind: budget\n"))
    with pytest.raises(BenchmarkError, match=r"table4\.yaml:\d+: field 'not_run_reason': unknown NOT RUN reason kind"):
        load_spec("table4", tmp_path)


def test_a_figures_reason_stays_text(tmp_path) -> None:
    """Figures keep text reasons: the planner's typed reason reaches them rendered (FLB_OFFLINE=1: conftest)."""
    from benchmark.figures.legate2023_runs import features_reason

    why = features_reason({"data_root": str(tmp_path)})
    assert isinstance(why, str) and why.startswith("dataset files absent: cifar10") and "flb data fetch cifar10" in why
