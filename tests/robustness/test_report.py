"""issue 23, the report: each test feeds one fault or misuse to `flb report` / `flb site` / `flb claims` /
`flb verdict` and asserts the exact error (or the correct result) and that nothing else changed."""

from __future__ import annotations

import errno
import json
import pathlib
import shutil
from pathlib import Path

import yaml

from benchmark.cli import main

ROOT = Path(__file__).resolve().parents[2]
SITE_FIXTURE = ROOT / "tests" / "data" / "site" / "results"
SUBSET_TIER = "full (stratified100 subset: not comparable with the paper)"


def _cell(key: str, verdict: str, reason: str | None = None) -> dict:
    return {"key": key, "cell": key.split("#")[1], "row": ["CIFAR-10"], "column": ["SqueezeNet"],
            "metric": "accuracy", "printed": "71.3", "ours": [70.0] if verdict != "NOT RUN" else [],
            "ours_mean": 70.0 if verdict != "NOT RUN" else None, "delta": -1.3 if verdict != "NOT RUN" else None,
            "verdict": verdict, "reason": reason}  # fmt: skip


def _checks(folder: Path, target: str, tier: str, cells: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{target}.json").write_text(json.dumps({"target": target, "tier": tier, "cells": cells}))
    return folder


def _checkout_copy(tmp_path: Path) -> Path:
    """A copy of the committed README and docs/results/ (the pages `flb report --readme` replaces)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs" / "results", tmp_path / "docs" / "results")
    return tmp_path / "README.md"


# ------------------------------------------------------------------------------------ case 1 (issue item 7)
def test_report_after_a_subset_build_keeps_committed_totals_and_pages(tmp_path, tree_guard, one_line_error,
                                                                      capsys):  # fmt: skip
    """`flb report --readme` after a build of one target with `table_subset=stratified100`: refused, naming
    what differs (the committed totals and page were built with tier=ci; the committed totals count 56 targets);
    a --command naming another tier is refused too; with --force the label is the reports' own configuration,
    only that target's page and the index are replaced and no page is deleted."""
    readme = _checkout_copy(tmp_path)
    pages = tmp_path / "docs" / "results"
    committed = sorted(p.name for p in pages.glob("*.md"))
    checks = _checks(tmp_path / "results" / "checks", "table1", SUBSET_TIER,
                     [_cell("legate2023/table1#x", "NOT RUN", "descriptive dataset table")])  # fmt: skip
    guard = tree_guard(pages, readme)

    assert main(["report", "--readme", str(readme), "--checks", str(checks)]) == 2
    assert one_line_error() == (
        "flb: error: flb report would replace committed results built otherwise: the committed totals were "
        "built with `--config tier=ci`, the check reports with `--config tier=full table_subset=stratified100`; "
        f"1 committed page(s) ({pages / 'table1.md'}) were built with `--config tier=ci`, their check reports "
        "with `--config tier=full table_subset=stratified100` (and 1 more difference(s)) -- rebuild every target "
        "as committed (`snakemake --cores all ci_tables --config tier=ci`), or pass --force to replace them "
        "anyway (pages of other targets are kept)"
    )
    guard.check()
    # the wrong command label (what `--command "... tier=ci"` did at main) is refused, not printed as the label
    assert main(["report", "--checks", str(checks), "--command", "snakemake --cores all ci_tables --config tier=ci"]) == 2
    assert one_line_error() == (
        f"flb: error: --command says tier=ci, but the check reports in {checks} were built with "
        "`--config tier=full table_subset=stratified100` (table1) -- leave --command out (the label is read "
        "from the check reports), or give the command that built them"
    )
    # check reports of two configurations: refused, both named
    _checks(checks, "table2", "ci", [_cell("legate2023/table2#y", "PASS")])
    assert main(["report", "--readme", str(readme), "--checks", str(checks)]) == 2
    assert "the check reports were built with different configurations (tier=ci: table2; tier=full " \
           "table_subset=stratified100: table1)" in one_line_error()  # fmt: skip
    guard.check()

    (checks / "table2.json").unlink()
    assert main(["report", "--readme", str(readme), "--checks", str(checks), "--force"]) == 0
    printed = capsys.readouterr().out
    assert "replaced under --force: the committed totals were built with `--config tier=ci`" in printed
    assert "kept 55 page(s) of targets without a check report here: " in printed
    text = readme.read_text()
    assert ("from the check reports of 1 target, built with `--config tier=full table_subset=stratified100` at "
            "commit") in text  # fmt: skip
    assert "Totals: PASS 0, PASS* 0, SUBSTITUTE-PASS 0, SUBSTITUTE-PASS* 0, FAIL 0, SUBSTITUTE-FAIL 0, NOT RUN 1." in text
    assert sorted(p.name for p in pages.glob("*.md")) == committed  # no page deleted
    guard.check(allow=["README.md", "table1.md"])  # the README, the index and table1's page; nothing else
    # the replaced pages record their configuration: the same reports again are no conflict
    assert main(["report", "--readme", str(readme), "--checks", str(checks)]) == 0


# ------------------------------------------------------------------------------------------------- case 3
def test_claim_quote_on_the_wrong_line_is_one_error_naming_where_it_is(tmp_path, monkeypatch, tree_guard,
                                                                       one_line_error):  # fmt: skip
    """`flb claims` (the report rule's first step): a quote cited at line 14 that is on line 13 of the text is
    one error naming the claim, its catalogue file, the cited line and the line where the words are; nothing
    is written."""
    from benchmark.papers import PAPER_FILES

    papers = tmp_path / "papers"
    papers.mkdir()
    text = ["x"] * 12 + ["Covariances for Free: Exploiting Mean Distributions"] + ["y"] * 5
    (papers / PAPER_FILES["fedcof"]).write_text("\n".join(text) + "\n")
    monkeypatch.setenv("FLB_PAPERS_DIR", str(papers))
    catalogue = tmp_path / "claims"
    catalogue.mkdir()
    entry = {"id": "cov-free", "line": 14, "quote": "Covariances  for free", "statement": "s",
             "kind": "ordering", "operands": {"a": "toy/t1#a", "b": "toy/t1#b"}}  # fmt: skip
    (catalogue / "toy.yaml").write_text(yaml.safe_dump({"paper": "toy", "document": "fedcof", "claims": [entry]}))
    checks = _checks(tmp_path / "checks", "other", "ci", [_cell("other/t9#z", "PASS")])
    out = tmp_path / "out"
    guard = tree_guard(tmp_path)

    args = ["claims", "--checks", str(checks), "--out", str(out), "--catalogue", str(catalogue)]
    assert main(args) == 2
    assert one_line_error() == (
        f"flb: error: {catalogue / 'toy.yaml'}: claim 'cov-free': quote not found on line 14 of fedcof "
        f"({PAPER_FILES['fedcof']}); it is on line 13 -- set line: 13 for that claim in {catalogue / 'toy.yaml'}"
    )
    guard.check()
    assert not out.exists()
    entry["line"] = 13  # on its line: evaluated (NOT RUN: no report of its target)
    (catalogue / "toy.yaml").write_text(yaml.safe_dump({"paper": "toy", "document": "fedcof", "claims": [entry]}))
    assert main(args) == 0
    assert json.loads((out / "toy.json").read_text())["claims"][0]["verdict"] == "NOT RUN"


# ------------------------------------------------------------------------------------------------- case 4
def test_report_from_another_directory(tmp_path, monkeypatch, tree_guard, one_line_error, capsys):
    """`flb report` run outside the repository: relative paths are read from the current folder and a folder or
    README that is not there is one error naming it (never a traceback, never an empty report); with the build's
    folder given, the repository's own files (expected/, the figure registry) are found from the package."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    checks = _checks(tmp_path / "build" / "results" / "checks", "table2", "ci",
                     [_cell("legate2023/table2#y", "PASS")])  # fmt: skip
    guard = tree_guard(tmp_path)

    assert main(["report", "--checks", str(checks), "--readme", "README.md"]) == 2
    assert one_line_error() == (
        f"flb: error: README README.md does not exist (relative paths are read from {elsewhere}) -- run "
        "`flb report` from the repository root, or pass --readme <checkout>/README.md"
    )
    assert main(["report"]) == 2
    assert one_line_error() == (
        f"flb: error: check reports folder results/checks does not exist (relative paths are read from "
        f"{elsewhere}) -- run `flb report` in the folder of the build (where results/ is), or pass --checks "
        "<build>/results/checks"
    )
    assert main(["report", "--checks", str(checks), "--figures", "results/figures"]) == 2
    assert one_line_error() == (
        f"flb: error: --figures folder results/figures does not exist (relative paths are read from {elsewhere}) "
        "-- build it first (`snakemake --cores all report` / `figures`), pass the build's folder, or leave "
        "--figures out"
    )
    guard.check()
    assert main(["report", "--checks", str(checks)]) == 0
    out = capsys.readouterr().out
    assert "Totals: PASS 1, PASS* 0, SUBSTITUTE-PASS 0," in out and "- legate2023: PASS 1," in out
    assert "built with `--config tier=ci`" in out
    guard.check()


# ------------------------------------------------------------------------------------------------- case 5
def test_console_summary_uses_the_tables_verdict_names(tmp_path, capsys):
    """`flb verdict`: the counts line names the seven verdicts as the table does, with the checks file's
    counts (3 SUBSTITUTE-PASS, not "PASS 3 ... [3 of them with substitute weights]"); a long NOT RUN reason
    is cut at a word boundary with an ellipsis, and the summary says where the full reasons are."""
    long_reason = ("the partition replay of this table needs the per-client class counts that the authors "
                   "never released alongside their code, so nothing here can rebuild it")  # fmt: skip
    cells = [_cell(f"legate2023/table2#s{i}", "SUBSTITUTE-PASS") for i in range(3)]
    cells += [_cell(f"legate2023/table2#n{i}", "NOT RUN", long_reason) for i in range(15)]
    _checks(tmp_path / "results" / "checks", "table2", "ci", cells)
    findings = tmp_path / "findings.yaml"
    findings.write_text(yaml.safe_dump({"findings": []}))

    assert main(["verdict", "table2", "--results", str(tmp_path / "results"), "--findings", str(findings)]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = json.loads((tmp_path / "results" / "checks" / "table2.json").read_text())
    assert lines[1] == "  PASS 0 | PASS* 0 | SUBSTITUTE-PASS 3 | SUBSTITUTE-PASS* 0 | FAIL 0 | SUBSTITUTE-FAIL 0 | NOT RUN 15"
    assert sum(c["verdict"] == "SUBSTITUTE-PASS" for c in counts["cells"]) == 3
    assert not any("of them with substitute weights" in line for line in lines)
    assert "  NOT RUN by reason (every reason in full: results/tables/table2.md):" in lines
    group = next(line for line in lines if line.startswith("       15  "))
    shown = group.removeprefix("       15  ")
    assert shown == "the partition replay of this table needs the per-client class counts…"
    assert long_reason.startswith(shown[:-1]) and long_reason[len(shown) - 1] == " "  # cut between words


# ------------------------------------------------------------------------------------------------- case 6
def _fail_nth_write(monkeypatch, n: int) -> None:
    """``Path.write_text`` raises ENOSPC from its ``n``-th call on (a disk that fills up mid-report)."""
    real = pathlib.Path.write_text
    calls = {"n": 0}

    def write_text(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] >= n:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


def test_disk_full_while_writing_the_report_leaves_nothing_half_written(tmp_path, monkeypatch, tree_guard,
                                                                        one_line_error):  # fmt: skip
    """Disk full while `flb site` writes the HTML report and while `flb report --readme` writes the README and
    docs/results: one error naming the folder; the previous report, README and pages are unchanged and no
    temporary file or folder is left beside them."""
    monkeypatch.setattr("benchmark.site.build.load_config_or_none", lambda _path: None)  # no registry: fast
    out = tmp_path / "report"
    site_args = ["site", "--results", str(SITE_FIXTURE), "--out", str(out), "--records", "", "--findings", ""]
    assert main(site_args) == 0
    readme = _checkout_copy(tmp_path / "checkout")
    pages = readme.parent / "docs" / "results"
    checks = _checks(tmp_path / "checks", "table1", "ci",
                     [_cell("legate2023/table1#x", "NOT RUN", "descriptive dataset table")])  # fmt: skip
    guard = tree_guard(tmp_path)

    _fail_nth_write(monkeypatch, 3)
    assert main(site_args) == 2
    assert one_line_error() == (
        f"flb: error: cannot write the report into {out}: No space left on device (nothing was changed: the "
        "previous report is intact) -- free space on that disk (or make it writable) and run the command again"
    )
    assert main(["report", "--readme", str(readme), "--checks", str(checks), "--force"]) == 2
    assert one_line_error() == (
        f"flb: error: cannot write the report into {pages}: No space left on device (nothing was changed) -- "
        "free space on that disk (or make it writable) and run the command again"
    )
    guard.check()  # nothing changed, nothing added (no .tmp file, no half site), nothing removed


def test_report_after_a_training_build_is_labelled_with_its_training_setting(tmp_path, tree_guard, one_line_error):
    """A build with `--config device=cuda` (or `cpu_training=true`) fills training cells that a plain build
    leaves NOT RUN: its totals are another configuration's, even at the same tier. The checks JSON records the
    plan's settings (`flb table`), the label names the setting, and the committed tier=ci totals are kept."""
    from benchmark.report_guard import build_config

    readme = _checkout_copy(tmp_path)
    pages = tmp_path / "docs" / "results"
    checks = tmp_path / "checks"
    checks.mkdir()
    for name, settings in (("table1", {"tier": "ci", "device": "cuda", "cpu_training": False}),
                           ("table2", {"tier": "ci", "device": None, "cpu_training": True})):  # fmt: skip
        (checks / f"{name}.json").write_text(json.dumps({"target": name, "tier": "ci", "settings": settings,
                                                         "cells": [_cell(f"legate2023/{name}#x", "PASS")]}))  # fmt: skip
    assert build_config(json.loads((checks / "table1.json").read_text())).label == "tier=ci device=cuda"
    assert build_config(json.loads((checks / "table2.json").read_text())).label == "tier=ci cpu_training=true"
    assert build_config({"tier": "ci", "settings": {"device": "cpu", "cpu_training": False}}).label == "tier=ci"
    (checks / "table2.json").unlink()
    guard = tree_guard(pages, readme)
    assert main(["report", "--readme", str(readme), "--checks", str(checks)]) == 2
    err = one_line_error()
    assert "the committed totals were built with `--config tier=ci`, the check reports with " \
           "`--config tier=ci device=cuda`" in err  # fmt: skip
    assert main(["report", "--checks", str(checks), "--command", "snakemake table1 --config tier=ci device=cpu"]) == 2
    assert "--command says training=none" in one_line_error()
    assert main(["report", "--checks", str(checks), "--command", "snakemake table1 --config tier=ci device=cuda"]) == 0
    guard.check()


def test_checks_json_records_the_plans_settings_without_local_folders() -> None:
    from benchmark.tables.assemble import comparable_settings

    got = comparable_settings({"data_root": "/x", "weights_dir": "/w", "tier": "ci", "device": "cuda"})
    assert got == {"device": "cuda", "tier": "ci"}
