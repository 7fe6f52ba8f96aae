"""The golden-run guard of issue 25 (tools/golden_runs.py): every registered run of the fl, pfl and zo
families reproduces tests/golden/golden_runs.json -- bit for bit (state sha256 included) on the machine that
recorded it, within the file's tolerance elsewhere -- and the comparison catches a moved value.

The full check runs in a subprocess (``python -m tools.golden_runs check``: a fresh interpreter, so no state
another test left in torch or the global RNGs can reach it); about 25 s on one core of the recording machine.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "golden_runs.json"


def _golden(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.golden_runs", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_the_golden_file_registers_every_run_and_states_its_tolerance():
    doc = json.loads(GOLDEN.read_text())
    listed = _golden("list").stdout.split()
    assert sorted(doc["runs"]) == sorted(listed) and len(listed) >= 20
    assert {n.split("_")[0] for n in listed} == {"fl", "pfl", "zo"}
    assert doc["tolerance_other_machine"] == {"rel": 1e-4, "abs": 1e-6}
    assert all(r["rounds"] > 0 and len(r["state_sha256"]) == 64 for r in doc["runs"].values())


def test_every_golden_run_reproduces_the_recorded_file():
    done = _golden("check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(json.loads(GOLDEN.read_text())['runs'])} runs agree" in done.stdout


def test_check_names_the_first_moved_value(tmp_path):
    """A copy of a freshly recorded run with one loss moved by one ulp, then one with its state digest
    changed: the check fails and names the field (recorded here, so the fingerprint is this machine's and
    the comparison is exact)."""
    path = tmp_path / "golden.json"
    assert _golden("record", "--only", "fl_ft_fedprox", "--file", str(path)).returncode == 0
    assert _golden("check", "--only", "fl_ft_fedprox", "--file", str(path)).returncode == 0
    original = path.read_text()

    doc = json.loads(original)
    row = doc["runs"]["fl_ft_fedprox"]["history"][2]
    row["train_loss"] = math.nextafter(row["train_loss"], math.inf)
    path.write_text(json.dumps(doc))
    done = _golden("check", "--only", "fl_ft_fedprox", "--file", str(path))
    assert done.returncode == 1 and ".history[2].train_loss" in done.stdout, done.stdout

    doc = json.loads(original)
    doc["runs"]["fl_ft_fedprox"]["state_sha256"] = "0" * 64
    path.write_text(json.dumps(doc))
    done = _golden("check", "--only", "fl_ft_fedprox", "--file", str(path))
    assert done.returncode == 1 and ".state_sha256" in done.stdout, done.stdout


def test_another_machine_skips_the_digest_but_still_compares_the_numbers(tmp_path):
    path = tmp_path / "golden.json"
    _golden("record", "--only", "fl_ft_fedadam", "--file", str(path))
    doc = json.loads(path.read_text())
    doc["fingerprint"]["cpu"] = "another CPU"
    run = doc["runs"]["fl_ft_fedadam"]
    run["state_sha256"] = "0" * 64  # skipped there
    run["history"][1]["test_loss"] *= 1 + 1e-6  # within the tolerance
    path.write_text(json.dumps(doc))
    done = _golden("check", "--only", "fl_ft_fedadam", "--file", str(path))
    assert done.returncode == 0 and "NOT compared" in done.stdout, done.stdout
    run["history"][1]["test_loss"] *= 1 + 1e-3  # beyond it
    path.write_text(json.dumps(doc))
    done = _golden("check", "--only", "fl_ft_fedadam", "--file", str(path))
    assert done.returncode == 1 and ".history[1].test_loss" in done.stdout, done.stdout
