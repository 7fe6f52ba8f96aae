"""The ledger of recorded runs (benchmark/ledger.py, issue 24): a record round-trips, a tampered record is
refused, a stale record is shown and never used, import records what a plan would run, and the records
committed in runs/ verify."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark import ledger as L
from benchmark.errors import ConfigError, CorruptFileError
from benchmark.io import atomic_write_json
from benchmark.jobs import PartitionJob

ROOT = Path(__file__).resolve().parents[1]
JOB = PartitionJob(dataset="cifar10", subset="all", ptag="iid-num_clients2", seed=3)


def _outputs(root: Path, value: int = 1) -> None:
    """What the job writes: its JSON (with a checksum sidecar), a curve beside it and a weight file."""
    atomic_write_json(root / JOB.path, {"value": value, "machine": "x86_64 2 cpu (Test CPU; avx2)",
                                        "versions": "python=3", "git_commit": "abc123"}, checksum=True)  # fmt: skip
    stem = root / JOB.path.removesuffix(".json")
    Path(f"{stem}.curve.csv").write_text("round,accuracy\n1,50.0\n")
    Path(f"{stem}.model.pt").write_bytes(b"weights")  # never recorded


def _prov() -> L.Provenance:
    return L.Provenance(code_commit="abc123", machine="x86_64 2 cpu (Test CPU; avx2)", versions="python=3",
                        device="cpu", threads=1, precision="float32", start="2026-11-25T10:00:00+00:00",
                        end="2026-11-25T11:00:00+00:00", wall_s=3600.0, command="flb job ...")  # fmt: skip


def test_a_record_round_trips_and_materialises_the_same_bytes(tmp_path):
    _outputs(tmp_path / "a")
    rec = L.write_record(JOB, _prov(), root=tmp_path / "a", ledger=tmp_path / "runs")
    assert rec.folder == tmp_path / "runs" / "partition" / L.record_id(JOB)
    assert sorted(rec.files) == sorted([JOB.path, JOB.path + ".sha256", JOB.path.removesuffix(".json") + ".curve.csv"])
    back = L.read_record(rec.folder)
    assert back.job == JOB and back.provenance == _prov() and dict(back.files) == dict(rec.files)
    assert not back.stale and back.label() == "recorded 2026-11-25 on Test CPU, commit abc123"
    caveat = L.RunRecord(JOB, 1, L.Provenance("abc123", "m", "", end="2026-11-25", caveats=("lr tuned on train",)), {})
    assert caveat.label() == "recorded 2026-11-25 on m, commit abc123; lr tuned on train"
    written = L.materialise(back, tmp_path / "b")
    for rel in rec.files:
        assert (tmp_path / "b" / rel).read_bytes() == (tmp_path / "a" / rel).read_bytes()
    assert len(written) == 3 and L.materialised_from(JOB.path, tmp_path / "b") == str(rec.folder)
    assert not (tmp_path / "b" / JOB.path.replace(".json", ".model.pt")).exists()  # weights never travel
    assert L.unmaterialise(JOB, tmp_path / "b") and not (tmp_path / "b" / JOB.path).exists()
    assert L.materialised_from(JOB.path, tmp_path / "b") is None
    # the same run recorded again is a no-op; another run of the job is kept unless replace
    assert L.write_record(JOB, _prov(), root=tmp_path / "a", ledger=tmp_path / "runs").files == rec.files
    _outputs(tmp_path / "c", value=2)
    with pytest.raises(L.RecordExistsError, match="already records"):
        L.write_record(JOB, _prov(), root=tmp_path / "c", ledger=tmp_path / "runs")
    again = L.write_record(JOB, _prov(), root=tmp_path / "c", ledger=tmp_path / "runs", replace=True)
    assert json.loads((again.folder / "files" / JOB.path).read_text())["value"] == 2


@pytest.mark.parametrize("what", ["file", "record"])
def test_a_tampered_record_is_refused_naming_the_file(tmp_path, what):
    _outputs(tmp_path / "a")
    rec = L.write_record(JOB, _prov(), root=tmp_path / "a", ledger=tmp_path / "runs")
    if what == "file":
        target = rec.folder / "files" / JOB.path.removesuffix(".json")
        target = Path(f"{target}.curve.csv")
        target.write_text("round,accuracy\n1,99.0\n")
    else:
        target = rec.folder / "record.json"
        raw = json.loads(target.read_text())
        raw["provenance"]["machine"] = "a faster machine"
        target.write_text(json.dumps(raw))
    with pytest.raises(CorruptFileError) as err:
        L.read_record(rec.folder)
    assert str(target) in str(err.value) or target.name in str(err.value)
    good, bad = L.verify_all(tmp_path / "runs")
    assert not good and len(bad) == 1


def test_a_stale_record_is_shown_and_never_used(tmp_path, monkeypatch):
    _outputs(tmp_path / "a")
    rec = L.write_record(JOB, _prov(), root=tmp_path / "a", ledger=tmp_path / "runs")
    monkeypatch.setattr(PartitionJob, "NUMERICS", 2)  # the code's numbers changed since the run
    back = L.read_record(rec.folder)
    assert back.stale and "STALE: numerics v1, the code is v2" in back.label()
    with pytest.raises(ConfigError, match="stale"):
        L.materialise(back, tmp_path / "b")
    assert not (tmp_path / "b" / JOB.path).exists()


def test_import_records_planned_jobs_with_the_manifest_provenance(tmp_path):
    from benchmark.ledger_import import ImportOptions, import_results

    _outputs(tmp_path / "gpu")
    manifest = {"machine": "m", "threads_per_worker": 1, "config": {"device": "cpu"},
                "jobs": [{"path": JOB.path, "status": "done", "start": 1764064800.0, "end": 1764068400.0,
                          "wall_s": 3600.0, "command": "flb job X"}]}  # fmt: skip
    other = PartitionJob(dataset="cifar10", subset="all", ptag="iid-num_clients2", seed=4)  # not run: skipped
    recs = import_results(tmp_path / "gpu" / "results", [JOB, other],
                          ImportOptions(commit="def456", notes=("n",), source="gpu", manifest=manifest),
                          tmp_path / "runs")  # fmt: skip
    assert len(recs) == 1
    p = L.read_record(recs[0].folder).provenance
    assert (p.code_commit, p.reported_commit, p.command, p.threads) == ("def456", "abc123", "flb job X", 1)
    assert p.start == "2025-11-25T10:00:00+00:00" and p.end == "2025-11-25T11:00:00+00:00"
    assert p.notes[0] == "n" and "abc123" in p.notes[1]


def _flb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmark.cli", "runs", *args], cwd=cwd, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip


def test_flb_runs_list_verify_show(tmp_path):
    _outputs(tmp_path / "a")
    rec = L.write_record(JOB, _prov(), root=tmp_path / "a", ledger=tmp_path / "runs")
    out = _flb("list", cwd=tmp_path)
    assert out.returncode == 0 and L.record_id(JOB) in out.stdout and "1 records (0 stale)" in out.stdout
    assert _flb("verify", cwd=tmp_path).returncode == 0
    shown = _flb("show", "iid-num_clients2", cwd=tmp_path)
    assert "code_commit: abc123" in shown.stdout and "wall_s: 3600.0" in shown.stdout
    # a cell of a built table names the record it came from: `show <cell>` finds it
    checks = tmp_path / "results" / "checks"
    checks.mkdir(parents=True)
    cell = {"key": "toy/table1#row-a/acc", "verdict": "PASS", "provenance": "recorded",
            "recorded": {"jobs": [{"record": f"runs/partition/{L.record_id(JOB)}", "job": JOB.path}]}}  # fmt: skip
    (checks / "toy_table1.json").write_text(json.dumps({"cells": [cell]}))
    by_cell = _flb("show", "row-a/acc", cwd=tmp_path)
    assert by_cell.returncode == 0 and "fills: toy_table1: toy/table1#row-a/acc" in by_cell.stdout
    (rec.folder / "files" / JOB.path).write_text("{}")
    bad = _flb("verify", cwd=tmp_path)
    assert bad.returncode == 1 and "DAMAGED" in bad.stdout and "1 damaged" in bad.stdout
    missing = _flb("show", "nothing-like-it", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("flb: error: no record matches")


def test_the_committed_ledger_verifies():
    """Every record in runs/ matches its checksums, names a known job kind and is not stale (a change of numerics
    must come with re-runs or an explicit note)."""
    good, bad = L.verify_all(ROOT / "runs")
    assert not bad, bad
    assert good, "runs/ holds no record"
    for rec in good:
        assert not any(f.endswith(L.WEIGHT_SUFFIXES) for f in rec.files), rec.folder


def test_import_one_job_output_records_that_job_only(tmp_path, real_data_root):
    """`flb runs import <job output>` records the planned job whose output the file is, nothing else; a file that
    is no planned job's output is one error."""
    out = "results/runs/pfl/cifar10/4convnet-bnbatch/shards-10-K100-p0/fedavg/f0.1-tau10-R32-m0.9-hl1-default-mudefault/best/seed0.json"
    other = out.replace("fedavg", "fedbabu")
    for rel in (out, other):
        atomic_write_json(tmp_path / "gpu" / rel, {"machine": "m", "git_commit": "abc"}, checksum=True)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "FLB_DATA_ROOT": str(real_data_root)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "benchmark.cli", "runs", "--ledger", str(tmp_path / "runs"),
                                     "import", *a, "--targets", "fedbabu_table12"], capture_output=True, text=True,
                                    env=env, cwd=ROOT)  # fmt: skip
    proc = run(str(tmp_path / "gpu" / out))
    assert proc.returncode == 0, proc.stderr
    assert [r.job.path for r in L.load_ledger(tmp_path / "runs").values()] == [out]
    bad = run(str(tmp_path / "gpu" / "results" / "runs" / "x.json"))
    assert bad.returncode == 2 and bad.stderr.startswith("flb: error: ") and "does not exist" in bad.stderr
