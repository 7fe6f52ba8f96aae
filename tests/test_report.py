"""The README Results totals and the per-target pages are generated from check reports: counts, ran cells,
reasons of the cells not run, links, markers, stale pages, bad input."""

from __future__ import annotations

import json

import pytest

from benchmark.errors import ConfigError
from benchmark.report import (
    END,
    PAGE_MARK,
    START,
    Stamp,
    load_checks,
    page_texts,
    replace_section,
    results_section,
    target_page,
    update_readme,
)


def _cell(verdict: str, **kw) -> dict:
    base = {"cell": "x", "row": ["CIFAR-100", "FedCOF"], "column": ["SqueezeNet"], "metric": "accuracy",
            "printed": "42.0±0.3", "ours": [40.0, 41.0], "ours_mean": 40.5, "ours_std": 0.7071,
            "delta": -1.5, "verdict": verdict}  # fmt: skip
    return {**base, **kw}


def _write(tmp_path, target: str, cells: list[dict]) -> None:
    d = tmp_path / "checks"
    d.mkdir(exist_ok=True)
    (d / f"{target}.json").write_text(json.dumps({"target": target, "cells": cells}))


def test_section_counts_every_target_and_lists_no_cells(tmp_path) -> None:
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
    assert "- fedcof: PASS 0, PASS* 1, SUBSTITUTE-PASS 1," in text  # one totals line per paper
    assert "| target" not in text and "table8" not in text  # only totals: no row per target (issue 14)
    assert "###" not in text and "40.50" not in text  # the cells are on the pages, not in the README
    linked = results_section(
        reports, when="2026-11-23", machine="m", commit="abc", command="x", pages="docs/results",
        extra_totals=["Claims: HOLDS 3."], report_link="docs/report/index.html",
    )  # fmt: skip
    assert "[docs/results/README.md](docs/results/README.md)" in linked and "Claims: HOLDS 3." in linked
    assert "[docs/report/index.html](docs/report/index.html)" in linked


def test_page_lists_cells_that_ran_and_groups_the_others_by_reason() -> None:
    report = {
        "target": "fedcof_table3",
        "tier": "ci",
        "cells": [
            _cell("SUBSTITUTE-PASS", note="substitute SqueezeNet"),
            _cell("PASS*"),
            _cell("NOT RUN", ours_mean=None, delta=None, reason="no data: cub200"),
            _cell("NOT RUN", ours_mean=None, delta=None, reason="no data: cub200"),
            _cell("NOT RUN", ours_mean=None, delta=None, reason="no weights: vit_b16"),
        ],
    }
    page = target_page(report, Stamp("2026-11-23", "m", "abcdef0123456789", "snakemake x"))
    assert page.startswith(PAGE_MARK + "\n# Results: fedcof_table3\n")
    assert "at commit `abcdef012345`" in page and "(tier `ci`)" in page
    assert "40.50 ± 0.71" in page and "-1.5" in page and "substitute SqueezeNet" in page
    assert "| no data: cub200     |       2 |" in page and "| no weights: vit_b16 |       1 |" in page
    assert "NOT RUN 3." in page


def test_pages_never_delete_a_page_and_list_the_unrefreshed_ones(tmp_path) -> None:
    """issue 23: a page it did not regenerate is kept (a build of one target must not delete the others)."""
    from benchmark.report import unrefreshed_pages
    from benchmark.report_guard import write_together

    def write_pages(reports):  # what `flb report --readme` writes beside the README (update_readme)
        files = page_texts(reports, folder, stamp)
        write_together(files)
        return list(files)

    stamp = Stamp("now", "m", "abc", "x")
    folder = tmp_path / "pages"
    write_pages([{"target": "old", "cells": []}])
    (folder / "hand.md").write_text("# written by hand\n")
    written = write_pages([{"target": "table2", "cells": [_cell("FAIL")]}])
    assert written == [folder / "README.md", folder / "table2.md"]
    assert sorted(p.name for p in folder.glob("*.md")) == ["README.md", "hand.md", "old.md", "table2.md"]
    assert unrefreshed_pages(folder, written) == [folder / "old.md"]  # generated, not refreshed; hand.md is not ours
    assert "| [table2](./table2.md) " in (folder / "README.md").read_text()


def test_replace_section_keeps_the_rest_and_is_idempotent() -> None:
    readme = "# Title\n\nintro\n"
    once = replace_section(readme, "## Results\nA\n")
    assert once.startswith("# Title\n\nintro\n") and START in once and once.rstrip().endswith(END)
    twice = replace_section(once + "\n## After\n", "## Results\nB\n")
    assert "A\n" not in twice and "B\n" in twice and twice.endswith("## After\n")
    assert twice.count(START) == 1


def test_update_readme_writes_between_markers_and_the_pages(tmp_path) -> None:
    _write(tmp_path, "table2", [_cell("FAIL")])
    readme = tmp_path / "README.md"
    readme.write_text(f"# X\n\n{START}\nold\n{END}\n\n## Tail\n")
    update_readme(readme, tmp_path / "checks")
    text = readme.read_text()
    assert "old" not in text and "docs/results/README.md" in text and text.endswith("## Tail\n")
    assert "| [table2](./table2.md) " in (tmp_path / "docs" / "results" / "README.md").read_text()
    page = (tmp_path / "docs" / "results" / "table2.md").read_text()
    assert "| CIFAR-100 / FedCOF | SqueezeNet | 40.50 ± 0.71 |" in page and "FAIL" in page


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


def test_extra_totals_count_claims_and_figures(tmp_path) -> None:
    from benchmark.report import extra_totals

    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "fedcof.json").write_text(json.dumps({"claims": [
        {"verdict": "HOLDS", "paper_verdict": "HOLDS"}, {"verdict": "NOT RUN", "paper_verdict": "DOES NOT HOLD"},
        {"verdict": "DOES NOT HOLD"},
    ]}))  # fmt: skip
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "bernier2024_fig4_3.json").write_text("{}")
    lines = extra_totals(claims, figures)
    assert lines[0].startswith("Claims (3 catalogued in `claims/`, 1 papers): HOLDS 1, DOES NOT HOLD 1, NOT RUN 1;")
    assert lines[0].endswith("1 do not hold.")
    assert ": 1 drawn (each with the run budget in its notes)," in lines[1]
    assert extra_totals(None, None) == []


def test_figure_totals_count_only_the_builds_own_figures(tmp_path) -> None:
    """A manifest left in results/figures by a build with another configuration (a full-tier figure beside a
    CI build) is not counted as drawn by this build; the line says how many were left out."""
    from benchmark.report import extra_totals

    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "fedbabu_fig4.json").write_text(json.dumps({"built_with": "tier=ci"}))
    (figures / "fedcof_fig4.json").write_text(json.dumps({"built_with": "tier=full"}))
    (figures / "fedcof_fig7.json").write_text("{}")  # too old to say: not counted
    line = extra_totals(None, figures, built_with="tier=ci")[0]
    assert ": 1 drawn (each with the run budget in its notes)," in line
    assert "(2 manifest(s) from a build with another configuration left out)." in line
    assert ": 3 drawn" in extra_totals(None, figures)[0]  # no configuration given: every manifest


def test_a_drawn_figure_names_the_configuration_it_was_built_with() -> None:
    from benchmark.report_guard import config_build

    assert config_build({"tier": "ci"}).label == "tier=ci"
    assert config_build({"tier": "full", "cpu_training": True}).label == "tier=full cpu_training=true"
