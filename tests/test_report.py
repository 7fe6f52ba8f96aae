"""The README Results section is generated from check reports: counts, ran cells, markers, bad input."""

from __future__ import annotations

import json

import pytest

from benchmark.errors import ConfigError
from benchmark.report import END, START, load_checks, replace_section, results_section, update_readme


def _cell(verdict: str, **kw) -> dict:
    base = {"cell": "x", "row": ["CIFAR-100", "FedCOF"], "column": ["SqueezeNet"], "metric": "accuracy",
            "printed": "42.0±0.3", "ours": [40.0, 41.0], "ours_mean": 40.5, "ours_std": 0.7071,
            "delta": -1.5, "verdict": verdict}  # fmt: skip
    return {**base, **kw}


def _write(tmp_path, target: str, cells: list[dict]) -> None:
    d = tmp_path / "checks"
    d.mkdir(exist_ok=True)
    (d / f"{target}.json").write_text(json.dumps({"target": target, "cells": cells}))


def test_section_counts_and_lists_only_cells_that_ran(tmp_path) -> None:
    _write(
        tmp_path, "fedcof_table3",
        [_cell("SUBSTITUTE-PASS"), _cell("PASS*"), _cell("NOT RUN", ours_mean=None, delta=None)],
    )  # fmt: skip
    _write(tmp_path, "table8", [_cell("NOT RUN", ours_mean=None, delta=None)])
    reports = load_checks(tmp_path / "checks")
    text = results_section(reports, when="2026-11-23", machine="m", commit="abc", command="snakemake x")
    assert (
        "Totals: PASS 0, PASS* 1, SUBSTITUTE-PASS 1, SUBSTITUTE-PASS* 0, FAIL 0, SUBSTITUTE-FAIL 0, NOT RUN 2."
        in text
    )
    assert "| target        |   PASS |   PASS* |" in text  # PASS* has its own column
    assert "### fedcof_table3" in text and "### table8" not in text
    assert "40.50 ± 0.71" in text and "-1.5" in text
    assert "| table8 " in text  # counted in the summary even though nothing ran


def test_replace_section_keeps_the_rest_and_is_idempotent() -> None:
    readme = "# Title\n\nintro\n"
    once = replace_section(readme, "## Results\nA\n")
    assert once.startswith("# Title\n\nintro\n") and START in once and once.rstrip().endswith(END)
    twice = replace_section(once + "\n## After\n", "## Results\nB\n")
    assert "A\n" not in twice and "B\n" in twice and twice.endswith("## After\n")
    assert twice.count(START) == 1


def test_update_readme_writes_between_markers(tmp_path) -> None:
    _write(tmp_path, "table2", [_cell("FAIL")])
    readme = tmp_path / "README.md"
    readme.write_text(f"# X\n\n{START}\nold\n{END}\n\n## Tail\n")
    update_readme(readme, tmp_path / "checks")
    text = readme.read_text()
    assert "old" not in text and "| table2 " in text and text.endswith("## Tail\n")


@pytest.mark.parametrize("content", ["{not json", json.dumps({"cells": []}), json.dumps([1, 2])])
def test_bad_check_report_is_one_clear_error(tmp_path, content) -> None:
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(ConfigError, match=r"bad\.json"):
        load_checks(tmp_path)


def test_no_reports_and_half_markers_are_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no check reports"):
        load_checks(tmp_path)
    with pytest.raises(ConfigError, match="markers"):
        replace_section(f"# X\n{START}\n", "s")
