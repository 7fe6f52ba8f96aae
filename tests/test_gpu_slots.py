"""Several small jobs share one GPU (issue 28, benchmark/gpu_slots.py): under the local profile (4 slots per GPU)
a dry run of a legate2023 table and a fedbabu table on ``device=cuda`` gives every job that fills the GPU (FT,
tuning, extraction) all four slots and every 4convNet pfl job one; on ``device=cpu`` no job asks for a slot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from benchmark.gpu_slots import SLOTS_PER_GPU, job_gpu_slots

ROOT = Path(__file__).resolve().parents[1]
JOB = re.compile(r"^(?:local)?rule (\S+):$")
WHOLE = {"job_fl_train", "job_fl_tune", "extract"}
SMALL = {"job_pfl_train", "job_pfl_eval"}


def _slots_by_rule(out: str) -> dict[str, set[str]]:
    """rule -> the gpu_slots values its jobs ask for in a dry run's output (absent: '-')."""
    found: dict[str, set[str]] = {}
    rule = None
    for line in out.splitlines():
        if m := JOB.match(line):
            rule = m.group(1)
        elif rule and line.strip().startswith("resources: "):
            res = dict(kv.split("=", 1) for kv in line.split("resources: ", 1)[1].split(", "))
            found.setdefault(rule, set()).add(res.get("gpu_slots", "-"))
            rule = None
    return found


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_small_pfl_jobs_share_the_gpu_and_the_rest_fill_it(tmp_path, real_data_root, real_weights_dir, device):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--workflow-profile", str(ROOT / "workflow/profiles/local"),
         "-s", str(ROOT / "workflow" / "Snakefile"), "--directory", str(tmp_path), "table3", "fedbabu_table12",
         "--config", f"device={device}", f"data_root={real_data_root}", f"weights_dir={real_weights_dir}"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "FLB_OFFLINE": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    slots = _slots_by_rule(proc.stdout)
    if device == "cpu":  # a CPU build plans no training of these tables (NOT RUN cells); nothing asks for a slot
        assert "extract" in slots and all(v <= {"0", "-"} for v in slots.values()), slots
        return
    assert WHOLE | SMALL <= set(slots), sorted(slots)
    for rule in WHOLE:
        assert slots[rule] == {str(SLOTS_PER_GPU)}, (rule, slots[rule])
    for rule in SMALL:
        assert slots[rule] == {"1"}, (rule, slots[rule])


def test_the_profiles_offer_the_slots_a_whole_gpu_job_asks_for():
    for name in ("local", "default"):
        prof = yaml.safe_load((ROOT / "workflow" / "profiles" / name / "config.yaml").read_text())
        assert f"gpu_slots={SLOTS_PER_GPU}" in prof["resources"], name
        assert not any(str(r).startswith("gpu=") for r in prof["resources"]), name  # slots, not whole GPUs


@pytest.mark.parametrize(
    ("kind", "model", "device", "slots"),
    [("pfl_train", "4convnet", "cuda", 1), ("pfl_eval", "4convnet", "cuda:1", 1),
     ("pfl_train", "mobilenet_cifar", "cuda", SLOTS_PER_GPU), ("fl_train", None, "cuda", SLOTS_PER_GPU),
     ("pfl_train", "4convnet", "cpu", 0), ("fl_train", None, "cpu", 0)],
)  # fmt: skip
def test_slots_per_job(kind, model, device, slots):
    assert job_gpu_slots(SimpleNamespace(KIND=kind, model=model), device) == slots
