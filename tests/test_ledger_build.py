"""The build uses the ledger of recorded runs (issue 24, :mod:`benchmark.tables.records`): a planned job that a
record matches is filled from it instead of running, and every cell it fills says so.

A toy runner plug-in (tests/plugins/toy_ledger_runner.py, loaded through ``$FLB_RUNNER_MODULES``) plans one job
per seed for one cell of legate2023 Table 3, only when training is allowed (``cpu_training``), like the real
training runners; its job appends its path to ``executed.log`` when it runs, so a test sees which jobs ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from toy_specs import write_toy_spec

from benchmark.errors import CorruptFileError
from benchmark.ledger import Provenance, marker_path, write_record
from benchmark.workflow import load_config

CELL = "cifar10/fedavg/fedncm"
OUTPUTS = [f"results/runs/toy_ledger/toy_ncm/seed{s}.csv" for s in (0, 1)]
PROVENANCE = Provenance(code_commit="0123456789abcdef", machine="x86_64 16 cpu (AMD EPYC; avx2); NVIDIA H100",
                        versions="torch 2.5", device="cuda", start="2026-11-20T10:00:00", end="2026-11-20T11:00:00")
#: The fields of a checks JSON that say where a verdict came from (the only ones a recorded build adds).
PROVENANCE_FIELDS = ("provenance", "recorded", "stale", "recorded_counts")


@pytest.fixture
def toy(tmp_path, runner_plugin):
    """The toy training runner plug-in installed (tests/plugins/toy_ledger_runner.py; registries restored
    afterwards); the spec in ``tmp_path/specs``."""
    write_toy_spec(tmp_path / "specs", "toy_ledger", "toy_ledger", seeds=(0, 1))
    return runner_plugin("toy_ledger_runner")


def build(work: Path, specs: Path, ledger: Path, monkeypatch, **config: Any) -> dict[str, Any]:
    """``flb run`` + ``flb table`` of the toy target in ``work`` with ``ledger``: the checks JSON."""
    from benchmark.tables.assemble import build_table
    from benchmark.tables.execute import run_planned

    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    cfg = {**load_config(), **config}
    plan_file, _ = run_planned("toy_ledger", cfg, Path("results"), folder=specs, ledger=ledger)
    build_table("toy_ledger", Path("results"), plan_file=plan_file)
    return json.loads((work / "results/checks/toy_ledger.json").read_text())


def executed(work: Path) -> list[str]:
    log = work / "executed.log"
    return log.read_text().split() if log.is_file() else []


def toy_cell(checks: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in checks["cells"] if c["cell"] == CELL)


def without_provenance(checks: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in checks.items() if k not in PROVENANCE_FIELDS}
    out["cells"] = [{k: v for k, v in c.items() if k not in PROVENANCE_FIELDS} for c in checks["cells"]]
    return out


@pytest.fixture
def recorded(tmp_path, toy, monkeypatch) -> Path:
    """A ledger holding the toy jobs, recorded from a build that ran them (in ``tmp_path/ran``)."""
    build(tmp_path / "ran", tmp_path / "specs", tmp_path / "empty", monkeypatch, cpu_training=True)
    assert executed(tmp_path / "ran") == OUTPUTS
    ledger = tmp_path / "ledger"
    for job in toy.ToyJob("toy_ncm", 0), toy.ToyJob("toy_ncm", 1):
        write_record(job, PROVENANCE, root=tmp_path / "ran", ledger=ledger)
    return ledger


def test_a_build_from_records_equals_the_build_that_ran_the_jobs_and_runs_none(tmp_path, recorded, monkeypatch):
    """Same checks JSON apart from the provenance fields; no job runs; the tables say ``FAIL (recorded)`` with
    the record's date, machine and commit. Without training (the cell is NOT RUN on this machine otherwise) the
    records fill the same cells."""
    ran = json.loads((tmp_path / "ran/results/checks/toy_ledger.json").read_text())
    checks = build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch, cpu_training=True)
    assert executed(tmp_path / "rec") == []
    assert without_provenance(checks) == without_provenance(ran)
    notrain = build(tmp_path / "notrain", tmp_path / "specs", recorded, monkeypatch)  # cpu_training: false
    assert executed(tmp_path / "notrain") == [] and notrain["settings"]["cpu_training"] is False
    assert without_provenance(notrain)["cells"] == without_provenance(ran)["cells"]
    assert notrain["cells"] == checks["cells"]
    cell = toy_cell(checks)
    assert cell["verdict"] == "FAIL" and cell["provenance"] == "recorded"
    assert cell["recorded"]["label"] == "recorded 2026-11-20 on NVIDIA H100, commit 01234567"
    assert cell["recorded"]["all_jobs"] and [j["job"] for j in cell["recorded"]["jobs"]] == OUTPUTS
    assert checks["recorded_counts"] == {"FAIL": 1} and "provenance" not in toy_cell(ran)
    for out, job in zip(OUTPUTS, cell["recorded"]["jobs"], strict=True):
        assert job["record"].startswith("runs/toy_ledger/")  # as the checkout names it, not this machine's folder
        assert (tmp_path / "rec" / marker_path(out)).read_text().strip() == str(
            recorded / job["record"].removeprefix("runs/"))
    md = (tmp_path / "rec/results/tables/toy_ledger.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("|") and "FAIL" in line)
    assert "FAIL (recorded)" in row and "recorded 2026-11-20 on NVIDIA H100, commit 01234567" in row
    assert "FAIL 1 (1 recorded)" in md
    tex = (tmp_path / "rec/results/tables/toy_ledger.tex").read_text()
    assert "FAIL (recorded)" in tex


def test_a_rebuild_from_records_keeps_the_files_and_the_plan(tmp_path, recorded, monkeypatch):
    """A second build finds the materialised files equal to the records: nothing rewritten, the same plan."""
    build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch)
    stamps = {o: (tmp_path / "rec" / o).stat().st_mtime_ns for o in OUTPUTS}
    plans = sorted((tmp_path / "rec/results/plans").glob("toy_ledger-*.json"))
    build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch)
    assert {o: (tmp_path / "rec" / o).stat().st_mtime_ns for o in OUTPUTS} == stamps
    assert sorted((tmp_path / "rec/results/plans").glob("toy_ledger-*.json")) == plans
    assert executed(tmp_path / "rec") == []


def test_the_report_and_the_site_count_recorded_cells_apart(tmp_path, recorded, monkeypatch):
    from benchmark.report import Stamp, index_page, load_checks, results_section, target_page
    from benchmark.site.inputs import load_tables
    from benchmark.site.render import table_section

    build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch)
    reports = load_checks(tmp_path / "rec/results/checks")
    section = results_section(reports, when="now", machine="m", commit="c" * 12, command=None)
    assert "FAIL 1 (1 recorded)" in section and "PASS 0," in section
    stamp = Stamp("now", "m", "c" * 12, None)
    assert "FAIL 1 (1 recorded)" in index_page(reports, stamp)
    page = target_page(reports[0], stamp)
    assert "FAIL (recorded)" in page and "recorded 2026-11-20 on NVIDIA H100" in page
    tables, _ = load_tables(tmp_path / "rec/results/checks")
    html = table_section(tables[0])
    assert "FAIL 1 (1 recorded)" in html and "FAIL (recorded)" in html and "NVIDIA H100" in html


def test_a_stale_record_is_shown_never_counted_nor_used(tmp_path, recorded, toy, monkeypatch):
    """The runner's numerics changed since the records were made: without training the cell is NOT RUN with
    the stale record named, nothing is materialised; with training the job runs and the cell names the record
    it did not use."""
    monkeypatch.setattr(toy.ToyJob, "NUMERICS", 2)
    checks = build(tmp_path / "stale", tmp_path / "specs", recorded, monkeypatch)
    cell = toy_cell(checks)
    assert cell["verdict"] == "NOT RUN" and "provenance" not in cell and "recorded_counts" not in checks
    assert "the ledger's record is stale, not used" in cell["reason"]
    assert "STALE: numerics v1, the code is v2" in cell["reason"] and [s["job"] for s in cell["stale"]] == OUTPUTS
    assert not any((tmp_path / "stale" / o).exists() for o in OUTPUTS) and executed(tmp_path / "stale") == []
    assert "STALE" in (tmp_path / "stale/results/tables/toy_ledger.md").read_text()

    checks = build(tmp_path / "stale", tmp_path / "specs", recorded, monkeypatch, cpu_training=True)
    cell = toy_cell(checks)
    assert executed(tmp_path / "stale") == OUTPUTS  # computed here, not fed from the stale record
    assert cell["verdict"] == "FAIL" and "provenance" not in cell and "recorded_counts" not in checks
    assert "a stale record was not used" in (tmp_path / "stale/results/tables/toy_ledger.md").read_text()
    assert not any((tmp_path / "stale" / marker_path(o)).exists() for o in OUTPUTS)


def test_a_stale_materialised_output_is_removed_and_its_job_runs(tmp_path, recorded, toy, monkeypatch):
    build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch, cpu_training=True)
    assert executed(tmp_path / "rec") == [] and (tmp_path / "rec" / marker_path(OUTPUTS[0])).is_file()
    monkeypatch.setattr(toy.ToyJob, "NUMERICS", 2)
    checks = build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch, cpu_training=True)
    assert executed(tmp_path / "rec") == OUTPUTS and "provenance" not in toy_cell(checks)
    assert not (tmp_path / "rec" / marker_path(OUTPUTS[0])).exists()


def test_use_records_false_ignores_the_ledger(tmp_path, recorded, monkeypatch):
    """``use_records: false``: the copies a record put here are removed and the jobs run; no record is listed."""
    build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch, cpu_training=True)
    assert executed(tmp_path / "rec") == [] and "provenance" in toy_cell(
        json.loads((tmp_path / "rec/results/checks/toy_ledger.json").read_text()))
    checks = build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch, cpu_training=True,
                   use_records=False)
    assert executed(tmp_path / "rec") == OUTPUTS
    assert not any((tmp_path / "rec" / marker_path(o)).exists() for o in OUTPUTS)
    assert "provenance" not in toy_cell(checks) and toy_cell(checks)["verdict"] == "FAIL"
    # without training, use_records=false leaves the cell NOT RUN (no record fills it)
    checks = build(tmp_path / "off", tmp_path / "specs", recorded, monkeypatch, use_records=False)
    assert toy_cell(checks)["verdict"] == "NOT RUN" and executed(tmp_path / "off") == []


def test_an_output_computed_here_is_kept_over_a_record(tmp_path, recorded, monkeypatch):
    checks = build(tmp_path / "ran", tmp_path / "specs", recorded, monkeypatch, cpu_training=True)
    assert "provenance" not in toy_cell(checks) and executed(tmp_path / "ran") == OUTPUTS  # only the first build


def test_a_tampered_record_is_one_clear_error_naming_the_file(tmp_path, recorded, monkeypatch):
    damaged = next(recorded.glob(f"toy_ledger/*/files/{OUTPUTS[1]}"))
    damaged.write_text(damaged.read_text().replace("41.0", "91.0"))
    with pytest.raises(CorruptFileError, match="does not match its sha256") as err:
        build(tmp_path / "rec", tmp_path / "specs", recorded, monkeypatch)
    assert str(damaged) in err.value.what and executed(tmp_path / "rec") == []
    assert not (tmp_path / "rec/results/checks/toy_ledger.json").exists()


def test_snakemake_rules_drop_the_inputs_of_a_recorded_output(tmp_path, monkeypatch):
    """A recorded pfl evaluation needs no training run: its rule has no inputs (the Snakefile's plug-in rules and
    the closed-form / fl-run rules: :func:`benchmark.tables.records.recorded_output`); ``flb run`` does not run
    the inputs of a recorded job either."""
    from benchmark.jobs import ClosedFormJob, run_jobs
    from benchmark.runners.pfl import PFLEvalJob
    from benchmark.workflow import plugin_job_inputs, run_inputs

    job = PFLEvalJob(dataset="cifar10", model="cnn4", bn="none", scheme="shards", scheme_param="10", clients=100,
                     server_fraction="0", algorithm="fedbabu", participation="0.1", local_epochs=1, rounds=2,
                     momentum="0.9", head_lr="1", head_init="he", prox_mu="default", selection="best", seed=0,
                     evaluation="personalised", ft_part="full", ft_epochs=5, ft_lr="0.001", ft_momentum="0.9")
    cf = ClosedFormJob("cifar10", "squeezenet1_1", "substitute", "p", "fp32", "all", "iid", "suite", 0)
    monkeypatch.chdir(tmp_path)
    inputs = plugin_job_inputs(PFLEvalJob)
    wild = {**job.__dict__}
    assert inputs(wild) == [job.training().path] and run_inputs(cf)
    for j in (job, cf):
        Path(j.path).parent.mkdir(parents=True, exist_ok=True)
        Path(j.path).write_text("{}")
        marker_path(j.path).write_text("runs/x/y\n")
    assert inputs(wild) == [] and run_inputs(cf) == {}
    ran: list[str] = []
    run_jobs([job, cf], {}, run=lambda j: ran.append(j.path))
    assert ran == []


def test_a_record_whose_dependants_must_run_is_not_used(tmp_path, recorded, toy, monkeypatch):
    """The training run is recorded, its evaluation is not: the evaluation reads the training's weights, which the
    ledger does not keep, so the training is not filled from its record (both run); once the evaluation is
    recorded too, both come from the ledger and nothing runs."""
    import dataclasses

    from benchmark.jobs import run_jobs
    from benchmark.tables.plan import make_plan
    from benchmark.tables.records import apply_ledger

    ev = toy.ToyEvalJob("toy_ncm", 0)
    work = tmp_path / "dep"
    work.mkdir()
    monkeypatch.chdir(work)
    cfg = {**load_config(), "cpu_training": True}

    def plan():
        p = make_plan("toy_ledger", cfg, tmp_path / "specs")
        cells = tuple(dataclasses.replace(c, jobs=(ev,)) if c.cell.id == CELL else c for c in p.cells)
        return apply_ledger(dataclasses.replace(p, cells=cells), cfg, recorded)

    p = plan()
    assert not Path(OUTPUTS[0]).exists() and next(c for c in p.cells if c.cell.id == CELL).recorded == ()
    run_jobs(p.jobs, cfg)
    assert executed(work) == [OUTPUTS[0], ev.path]
    write_record(ev, PROVENANCE, root=work, ledger=recorded)
    work = tmp_path / "dep2"
    work.mkdir()
    monkeypatch.chdir(work)
    p = plan()
    assert [r.job for r in next(c for c in p.cells if c.cell.id == CELL).recorded] == [ev.path]
    assert Path(OUTPUTS[0]).is_file() and Path(ev.path).is_file()  # both materialised, the training first
    assert Path(OUTPUTS[0]).stat().st_mtime_ns <= Path(ev.path).stat().st_mtime_ns
    run_jobs(p.jobs, cfg)
    assert executed(work) == []


def test_a_record_whose_weights_are_on_disk_fills_its_output_for_a_dependant(tmp_path, recorded, toy, monkeypatch):
    """The training run is recorded and its weights are on disk beside its output (a run here, or restored by
    ``flb harvest`` from ``runs/parked/``): the record fills the training and only the evaluation runs."""
    import dataclasses

    from benchmark.jobs import run_jobs
    from benchmark.ledger import materialised_from
    from benchmark.tables.plan import make_plan
    from benchmark.tables.records import apply_ledger

    ev = toy.ToyEvalJob("toy_ncm", 0)
    work = tmp_path / "weights"
    work.mkdir()
    monkeypatch.chdir(work)
    cfg = {**load_config(), "cpu_training": True}
    weights = Path(OUTPUTS[0]).with_suffix(".model.pt")
    weights.parent.mkdir(parents=True, exist_ok=True)
    weights.write_bytes(b"weights")
    p = make_plan("toy_ledger", cfg, tmp_path / "specs")
    cells = tuple(dataclasses.replace(c, jobs=(ev,)) if c.cell.id == CELL else c for c in p.cells)
    p = apply_ledger(dataclasses.replace(p, cells=cells), cfg, recorded)
    assert Path(OUTPUTS[0]).is_file() and materialised_from(OUTPUTS[0]) is not None
    run_jobs(p.jobs, cfg)
    assert executed(work) == [ev.path]


def test_a_record_under_a_dependant_computed_here_is_dated_before_it(tmp_path, recorded, toy, monkeypatch):
    """The evaluation was computed here and its training run's output is gone: the training comes from its record,
    dated before the evaluation (Snakemake does not run the evaluation again), and nothing runs."""
    import dataclasses
    import os

    from benchmark.jobs import run_jobs
    from benchmark.tables.plan import make_plan
    from benchmark.tables.records import apply_ledger

    ev = toy.ToyEvalJob("toy_ncm", 0)
    monkeypatch.chdir(tmp_path / "ran")
    cfg = {**load_config(), "cpu_training": True}
    run_jobs([ev], cfg)  # the training exists there: only the evaluation runs
    Path(OUTPUTS[0]).unlink()
    os.utime(ev.path, (1e9, 1e9))
    p = make_plan("toy_ledger", cfg, tmp_path / "specs")
    p = apply_ledger(dataclasses.replace(p, cells=tuple(
        dataclasses.replace(c, jobs=(ev,)) if c.cell.id == CELL else c for c in p.cells)), cfg, recorded)
    assert Path(OUTPUTS[0]).is_file() and Path(OUTPUTS[0]).stat().st_mtime < Path(ev.path).stat().st_mtime
    assert next(c for c in p.cells if c.cell.id == CELL).recorded == ()  # the cell's own job is computed here
