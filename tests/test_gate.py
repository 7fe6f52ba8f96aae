"""Table targets exit non-zero on FAIL; the CI gate fails on an undocumented FAIL and on a stale finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmark.cli import main
from benchmark.errors import ConfigError
from benchmark.reasons import NotRunReason, ReasonKind
from benchmark.tables.gate import Finding, gate_problems, load_findings

ROOT = Path(__file__).resolve().parents[1]
KEY_A = "legate2023/table2#cub200/ft/comm_gb"
KEY_B = "legate2023/table2#cub200/lp/comm_gb"
KEY_C = "fedcof/table3#cifar100/squeezenet1_1/fedncm/accuracy"


def _checks(tier: str, verdicts: dict[str, str], target: str = "table2") -> dict:
    cells = [
        {"key": k, "cell": k.split("#")[1], "verdict": v, "printed": "1", "ours_mean": 1.0}
        for k, v in verdicts.items()
    ]
    return {"target": target, "tier": tier, "cells": cells}


def _finding(key: str, verdict: str = "FAIL", tiers=("ci", "full")) -> Finding:
    return Finding(key, verdict, "paper-inconsistency", "a written reason", tuple(tiers))


def test_gate_passes_when_every_fail_is_listed() -> None:
    checks = [_checks("ci", {KEY_A: "FAIL", KEY_B: "PASS"})]
    assert gate_problems(checks, [_finding(KEY_A)]) == []


def test_gate_fails_on_an_undocumented_fail() -> None:
    checks = [_checks("ci", {KEY_A: "FAIL", KEY_B: "FAIL"})]
    problems = gate_problems(checks, [_finding(KEY_A)])
    assert len(problems) == 1 and problems[0].startswith("unlisted FAIL: " + KEY_B)


def test_gate_fails_on_a_stale_finding() -> None:
    """A listed cell that now passes (or is not run in a tier the entry covers) must be removed."""
    checks = [_checks("ci", {KEY_A: "PASS", KEY_B: "NOT RUN"})]
    problems = gate_problems(checks, [_finding(KEY_A), _finding(KEY_B)])
    assert len(problems) == 2 and all(p.startswith("stale finding") for p in problems)


def test_gate_fails_on_a_changed_verdict_and_on_unchecked_findings() -> None:
    checks = [_checks("ci", {KEY_C: "SUBSTITUTE-FAIL"}, target="fedcof_table3")]
    problems = gate_problems(checks, [_finding(KEY_C, "FAIL")])
    assert problems and "listed as FAIL, now SUBSTITUTE-FAIL" in problems[0]
    problems = gate_problems(checks, [_finding(KEY_C, "SUBSTITUTE-FAIL"), _finding(KEY_A)])
    assert problems == [f"finding {KEY_A} not checked: results/checks/table2.json was not given"]
    assert gate_problems(checks, [_finding(KEY_C, "SUBSTITUTE-FAIL"), _finding(KEY_A)], partial=True) == []


def test_gate_respects_tiers() -> None:
    """A full-tier finding neither covers a CI FAIL nor goes stale when the cell is NOT RUN in CI."""
    full_only = [_finding(KEY_C, "SUBSTITUTE-FAIL", tiers=("full",))]
    assert gate_problems([_checks("ci", {KEY_C: "NOT RUN"}, "fedcof_table3")], full_only) == []
    problems = gate_problems([_checks("ci", {KEY_C: "SUBSTITUTE-FAIL"}, "fedcof_table3")], full_only)
    assert problems and problems[0].startswith("unlisted SUBSTITUTE-FAIL")


@pytest.mark.parametrize(("entry", "needle"), [
    ({"verdict": "FAIL", "kind": "paper-inconsistency", "reason": "x"}, "'cell'"),
    ({"cell": KEY_A, "verdict": "FAIL", "kind": "paper-inconsistency", "reason": " "}, "'reason'"),
    ({"cell": "legate2023/table2#nope", "verdict": "FAIL", "kind": "paper-inconsistency", "reason": "x"}, "not a cell"),
    ({"cell": KEY_A, "verdict": "PASS", "kind": "paper-inconsistency", "reason": "x"}, "verdict"),
    ({"cell": KEY_A, "verdict": "FAIL", "kind": "whatever", "reason": "x"}, "kind"),
    ({"cell": KEY_A, "verdict": "FAIL", "kind": "paper-inconsistency", "reason": "x", "tiers": ["nightly"]}, "tiers"),
    ({"cell": KEY_A, "verdict": "FAIL", "kind": "paper-inconsistency", "reason": "x", "value": 3}, "unknown field"),
])  # fmt: skip
def test_findings_file_is_validated(tmp_path, entry, needle) -> None:
    p = tmp_path / "f.yaml"
    p.write_text(yaml.safe_dump({"findings": [entry]}))
    with pytest.raises(ConfigError, match=needle):
        load_findings(p)


def test_duplicate_findings_are_refused(tmp_path) -> None:
    entry = {"cell": KEY_A, "verdict": "FAIL", "kind": "paper-inconsistency", "reason": "x"}
    p = tmp_path / "f.yaml"
    p.write_text(yaml.safe_dump({"findings": [entry, entry]}))
    with pytest.raises(ConfigError, match="twice"):
        load_findings(p)


def test_the_project_findings_file_is_valid() -> None:
    findings = load_findings()
    assert findings and all(len(f.reason) > 20 for f in findings)


def test_cli_gate_and_verdict_exit_codes(tmp_path, capsys) -> None:
    (tmp_path / "checks").mkdir()
    path = tmp_path / "checks" / "table2.json"
    path.write_text(json.dumps(_checks("ci", {KEY_A: "FAIL", KEY_B: "PASS"})))
    good = tmp_path / "good.yaml"
    good.write_text(
        yaml.safe_dump(
            {
                "findings": [
                    {
                        "cell": KEY_A,
                        "verdict": "FAIL",
                        "kind": "paper-inconsistency",
                        "reason": "Eq. 4 needs an inferred P",
                    }
                ]
            }
        )
    )
    assert main(["ci-gate", str(path), "--findings", str(good)]) == 0
    assert "ci-gate: OK" in capsys.readouterr().out
    empty = tmp_path / "empty.yaml"
    empty.write_text(yaml.safe_dump({"findings": []}))
    assert main(["ci-gate", str(path), "--findings", str(empty)]) == 1
    out = capsys.readouterr().out
    assert "unlisted FAIL: " + KEY_A in out and "ci-gate: FAILED" in out
    path.write_text(json.dumps(_checks("ci", {KEY_B: "PASS"})))
    assert main(["verdict", "table2", "--results", str(tmp_path)]) == 0
    assert main(["verdict", "table9", "--results", str(tmp_path)]) == 2  # no checks file: one-line error


def _verdict_checks(tmp_path: Path, verdicts: dict[str, str]) -> Path:
    (tmp_path / "checks").mkdir(exist_ok=True)
    data = _checks("ci", verdicts)
    for c in data["cells"]:
        if c["verdict"] == "NOT RUN":
            why = NotRunReason(ReasonKind.MISSING_DATA, "cub200",
                               "dataset files absent: cub200: expected images.txt under /data/CUB_200_2011")  # fmt: skip
            c["reason"], c["not_run"] = why.render(), why.to_dict()
        if c["verdict"] == "PASS*":
            c["reason"] = "matches only under a departure from the stated setup: participation_ignored (...)"
    (tmp_path / "checks" / "table2.json").write_text(json.dumps(data))
    return tmp_path


def test_verdict_exits_0_when_every_fail_is_documented(tmp_path, capsys) -> None:
    """`flb verdict` (the Snakemake target rule): documented FAILs are no crash; the summary has the counts."""
    findings = tmp_path / "f.yaml"
    findings.write_text(yaml.safe_dump({"findings": [
        {"cell": KEY_A, "verdict": "FAIL", "kind": "paper-inconsistency", "reason": "Eq. 4 needs an inferred P"}
    ]}))  # fmt: skip
    keys = {KEY_A: "FAIL", KEY_B: "PASS*", "legate2023/table2#cub200/random/comm_gb": "NOT RUN"}
    results = _verdict_checks(tmp_path, keys)
    assert main(["verdict", "table2", "--results", str(results), "--findings", str(findings)]) == 0
    out = capsys.readouterr().out
    assert "3 cells, 2 run" in out and "PASS 0 | PASS* 1" in out
    assert "PASS 0 | PASS* 1 | SUBSTITUTE-PASS 0 | SUBSTITUTE-PASS* 0 | FAIL 1 | SUBSTITUTE-FAIL 0 | NOT RUN 1" in out
    assert "FAIL + SUBSTITUTE-FAIL 1: 1 explained in expected/known_findings.yaml, 0 unexplained" in out
    assert "1  no data for cub200" in out and "put cub200 under $FLB_DATA_ROOT" in out
    assert "exit 0: every FAIL is a documented finding" in out


def test_verdict_exits_1_on_an_unexplained_fail(tmp_path, capsys) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text(yaml.safe_dump({"findings": []}))
    results = _verdict_checks(tmp_path, {KEY_A: "FAIL", KEY_B: "PASS"})
    assert main(["verdict", "table2", "--results", str(results), "--findings", str(empty)]) == 1
    out = capsys.readouterr().out
    assert "FAIL + SUBSTITUTE-FAIL 1: 0 explained in expected/known_findings.yaml, 1 unexplained" in out
    assert f"unexplained FAIL: {KEY_A}" in out and "exit 1" in out
    # a FAIL listed with another verdict is not explained either (the gate's own rule)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump({"findings": [
        {"cell": KEY_A, "verdict": "SUBSTITUTE-FAIL", "kind": "substitute-weights", "reason": "substitute weights"}
    ]}))  # fmt: skip
    assert main(["verdict", "table2", "--results", str(results), "--findings", str(wrong)]) == 1


_FETCH = "flb data fetch eurosat_sub --data-root /d"
_GPU = "run with --config device=cuda or the slurm profile"


@pytest.mark.parametrize(("reason", "group", "fillable"), [
    (NotRunReason(ReasonKind.MISSING_DATA, "flowers102", "dataset files absent: flowers102: expected x"),
     "no data for flowers102", True),
    (NotRunReason(ReasonKind.MISSING_DATA, "eurosat_sub", "dataset files absent: eurosat: x",
                  f"the network is not reachable: run `{_FETCH}` where there is network", _FETCH),
     "no data for eurosat_sub", True),
    (NotRunReason(ReasonKind.MISSING_WEIGHTS, "vit_b_16", "no weights for vit_b_16: not in the torch hub cache"),
     "no weights for vit_b_16", True),
    (NotRunReason(ReasonKind.NEEDS_TRAINING, "full-backbone training", "full-model training needs a GPU: 3 seed(s)",
                  _GPU, "--config device=cuda"), "needs full-backbone training", True),
    (NotRunReason(ReasonKind.OUTSIDE_TIER, "cifar100 x mobilenet_v2", "outside the CI tier (...)",
                  "runs with --config tier=full", "--config tier=full"), "outside the CI tier", True),
    (NotRunReason(ReasonKind.INPUT_NOT_STATED, "the LoRA size of Eq. 7", "input not stated: the LoRA size. note"),
     "input not stated (the LoRA size of Eq. 7)", False),
    (NotRunReason(ReasonKind.NOT_IMPLEMENTED, "FedBABU body-only", "FedBABU body-only training is not implemented"),
     "not implemented in this suite", False),
])  # fmt: skip
def test_not_run_reasons_are_grouped(reason, group, fillable) -> None:
    """The summary groups a typed reason by its kind and names it by its missing item (issue 25)."""
    from benchmark.tables.summary import reason_group

    g = reason_group(reason, "table2")
    assert g.name.startswith(group) and (g.command is not None) == fillable
    if fillable:
        assert "snakemake --cores all table2" in g.command
        assert (_FETCH in g.command) == (reason.command == _FETCH)


@pytest.mark.parametrize("kind", list(ReasonKind))
def test_every_reason_kind_has_a_group(kind) -> None:
    """Each kind of reason has a summary group (a kind added without one fails here, not in a build)."""
    from benchmark.tables.summary import reason_group

    g = reason_group(NotRunReason(kind, "x", "why"), "table2")
    assert g.name and (g.command is not None or g.why_not)


def _snakemake(target: str, workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "-s", str(ROOT / "workflow" / "Snakefile"), "--directory",
         str(workdir), target, *extra],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip


def test_table_target_exit_status_and_outputs(tmp_path) -> None:
    """Cost-only tables: a target whose cells all PASS succeeds, and so does one whose only FAILs are documented
    findings (fedcof Table 8): no RuleException, the run ends with the summary; every output is written."""
    run = _snakemake("fedcof_table5", tmp_path, "fedcof_table8", "--keep-going")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "== fedcof_table5 (tier full): 10 cells, 5 run ==" in log and "PASS 5 | PASS* 0" in log
    assert "FAIL + SUBSTITUTE-FAIL 8: 8 explained in expected/known_findings.yaml, 0 unexplained" in log
    assert "Error in rule" not in log and "RuleException" not in log
    for f in (
        "tables/fedcof_table8.md",
        "tables/fedcof_table8.tex",
        "checks/fedcof_table8.json",
        "tidy/fedcof_table8.csv",
    ):
        assert (tmp_path / "results" / f).is_file(), f
    checks = json.loads((tmp_path / "results/checks/fedcof_table8.json").read_text())
    assert checks["counts"]["FAIL"] == 8 and checks["counts"].get("PASS", 0) == 0
    assert main(["verdict", "fedcof_table5", "--results", str(tmp_path / "results")]) == 0
    empty = tmp_path / "empty.yaml"
    empty.write_text(yaml.safe_dump({"findings": []}))
    assert main(["verdict", "fedcof_table8", "--results", str(tmp_path / "results"), "--findings", str(empty)]) == 1


def _report_inputs(log: str) -> str:
    block = log.split("rule report:", 1)[1]
    return block.split("output:", 1)[0]


def test_the_report_waits_for_the_targets_named_beside_it(tmp_path) -> None:
    """`snakemake T report` builds T first (its outputs are inputs of the claims and the report); `report` alone
    builds nothing else (it reads whatever results exist)."""
    (tmp_path / "expected").mkdir()
    (tmp_path / "expected" / "known_findings.yaml").write_text((ROOT / "expected" / "known_findings.yaml").read_text())
    beside = _snakemake("fedcof_table5", tmp_path, "report", "-n")
    assert beside.returncode == 0, (beside.stdout + beside.stderr)[-3000:]
    assert "results/checks/fedcof_table5.json" in _report_inputs(beside.stdout)
    alone = _snakemake("report", tmp_path, "-n")
    assert alone.returncode == 0, (alone.stdout + alone.stderr)[-3000:]
    assert "results/checks/" not in _report_inputs(alone.stdout) and "fedcof_table5" not in alone.stdout


@pytest.mark.realdata
def test_the_report_waits_for_the_figures_named_beside_it(tmp_path, real_data_root, monkeypatch) -> None:
    """`snakemake figures report` (CI's last build) draws the figures before the report reads them, although
    `figures` lists its inputs through a function (which figures run is asked only when it is a target): every
    figure the `figures` rule needs is an input of the report."""
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    (tmp_path / "expected").mkdir()
    (tmp_path / "expected" / "known_findings.yaml").write_text((ROOT / "expected" / "known_findings.yaml").read_text())
    run = _snakemake("figures", tmp_path, "report", "-n", "--config", "tier=ci")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    drawn = {line.split("input: ", 1)[1] for line in run.stdout.split("rule figures:", 1)[1].split("\n")[:3]
             if "input: " in line}  # fmt: skip
    figures = {f for line in drawn for f in line.split(", ")}
    assert figures and all(f.startswith("results/figures/") for f in figures), figures
    assert figures <= set(_report_inputs(run.stdout).strip().removeprefix("input: ").split(", ")), figures
