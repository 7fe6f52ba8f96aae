"""The golden-run guard of issue 25 (tools/golden_runs.py): every registered run of the fl, pfl and zo
families reproduces tests/golden/golden_runs.json -- bit for bit (state sha256 included) on the machine that
recorded it, within the file's tolerance elsewhere -- and the comparison catches a moved value.

The full check runs in a subprocess (``python -m tools.golden_runs check``: a fresh interpreter, so no state
another test left in torch or the global RNGs can reach it); about 25 s on one core of the recording machine.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "golden_runs.json"
_spec = importlib.util.spec_from_file_location("golden_runs", ROOT / "tools" / "golden_runs.py")
golden_runs = importlib.util.module_from_spec(_spec)
sys.modules["golden_runs"] = golden_runs  # dataclasses look their module up while the class is built
_spec.loader.exec_module(golden_runs)


def test_the_golden_file_registers_every_run_and_states_its_tolerance():
    doc = json.loads(GOLDEN.read_text())
    assert sorted(doc["runs"]) == sorted(golden_runs.RUNS) and len(golden_runs.RUNS) >= 20
    assert {n.split("_")[0] for n in golden_runs.RUNS} == {"fl", "pfl", "zo"}
    assert doc["tolerance_other_machine"] == golden_runs.TOLERANCE == {"rel": 1e-4, "abs": 1e-6}
    assert all(r["rounds"] > 0 and len(r["state_sha256"]) == 64 for r in doc["runs"].values())


def test_every_golden_run_reproduces_the_recorded_file():
    """The whole check, in a fresh interpreter (``python -m tools.golden_runs check``)."""
    done = subprocess.run([sys.executable, "-m", "tools.golden_runs", "check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(golden_runs.RUNS)}/{len(golden_runs.RUNS)} runs agree" in done.stdout


@pytest.fixture()
def recorded(tmp_path) -> Path:
    """A golden file of two quick runs, recorded here (so its fingerprint is this machine's)."""
    path = tmp_path / "golden.json"
    assert golden_runs.record(["fl_ft_fedprox", "fl_ft_fedadam"], path) == 0
    return path


def _check(path: Path, doc: dict, capsys) -> tuple[int, str]:
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    rc = golden_runs.check(["fl_ft_fedprox", "fl_ft_fedadam"], path)
    return rc, capsys.readouterr().out


def test_check_names_the_first_moved_value(recorded, capsys):
    """One recorded loss moved by one ulp, then one state digest changed: the check fails and names the field
    (same fingerprint: exact comparison)."""
    original = json.loads(recorded.read_text())
    assert _check(recorded, original, capsys)[0] == 0

    doc = json.loads(json.dumps(original))
    row = doc["runs"]["fl_ft_fedprox"]["history"][2]
    row["train_loss"] = math.nextafter(row["train_loss"], math.inf)
    rc, out = _check(recorded, doc, capsys)
    assert (
        rc == 1
        and "FAIL fl_ft_fedprox" in out
        and ".history[2].train_loss" in out
        and "ok   fl_ft_fedadam" in out
    )

    doc = json.loads(json.dumps(original))
    doc["runs"]["fl_ft_fedadam"]["state_sha256"] = "0" * 64
    rc, out = _check(recorded, doc, capsys)
    assert rc == 1 and "FAIL fl_ft_fedadam" in out and ".state_sha256" in out


def test_another_machine_skips_the_digest_but_still_compares_the_numbers(recorded, capsys):
    doc = json.loads(recorded.read_text())
    doc["fingerprint"]["cpu"] = "another CPU"
    run = doc["runs"]["fl_ft_fedadam"]
    run["state_sha256"] = "0" * 64  # not compared there
    run["history"][1]["test_loss"] *= 1 + 1e-6  # within the tolerance
    rc, out = _check(recorded, doc, capsys)
    assert rc == 0 and "NOT compared" in out, out
    run["history"][1]["test_loss"] *= 1 + 1e-3  # beyond it
    rc, out = _check(recorded, doc, capsys)
    assert rc == 1 and ".history[1].test_loss" in out, out
    run["history"][1]["test_loss"] /= (1 + 1e-3) * (1 + 1e-6)
    run["history"][1]["clients"][0] += 1  # integers stay exact
    rc, out = _check(recorded, doc, capsys)
    assert rc == 1 and ".history[1].clients[0]" in out, out
