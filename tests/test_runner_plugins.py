"""Runner plug-ins (:mod:`benchmark.runners`): a runner is one module that registers itself; adding a toy one
(tests/plugins/toy_runner.py, loaded through ``$FLB_RUNNER_MODULES``) makes a toy table cell run end to end
through the same plan -> jobs -> assembly path as the real runners, with no other file touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from toy_specs import write_toy_spec

from benchmark import runners
from benchmark.errors import ConfigError
from benchmark.workflow import load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy(tmp_path, monkeypatch, runner_plugin):
    """``toy()`` installs the toy runner plug-in (tests/plugins/toy_runner.py: 40 + seed per seed); the spec is
    in ``tmp_path/specs``, the working folder ``tmp_path``."""
    write_toy_spec(tmp_path / "specs", "toy_table", "toy")
    monkeypatch.chdir(tmp_path)
    return lambda: runner_plugin("toy_runner")


def test_a_toy_runner_module_fills_a_toy_cell_end_to_end(tmp_path, toy) -> None:
    from benchmark.tables.assemble import build_table
    from benchmark.tables.execute import run_target
    from benchmark.tables.plan import read_plan

    toy()
    jobs = run_target("toy_table", load_config(), tmp_path / "results", folder=tmp_path / "specs")
    assert [j.path for j in jobs] == [f"results/runs/toy/toy_ncm/seed{s}.csv" for s in (0, 1, 2)]
    assert all((tmp_path / j.path).is_file() for j in jobs)
    plan = read_plan("toy_table", tmp_path / "results")  # the one plan, typed again from its file
    assert [type(j).__name__ for j in plan.jobs] == ["ToyJob"] * 3
    report = build_table("toy_table", tmp_path / "results")
    checks = json.loads((tmp_path / "results/checks/toy_table.json").read_text())
    toy_cell = next(c for c in checks["cells"] if c["cell"] == "cifar10/fedavg/fedncm")
    assert toy_cell["runner"] == "toy" and toy_cell["ours"] == [40.0, 41.0, 42.0]
    assert toy_cell["verdict"] == "FAIL"  # the paper prints 64.8 for FedNCM on CIFAR-10
    others = [c for c in checks["cells"] if c["cell"] != "cifar10/fedavg/fedncm"]
    assert others and all(c["verdict"] == "NOT RUN" and "toy cell" in c["reason"] for c in others)
    assert report.counts() == {"FAIL": 1, "NOT RUN": len(others)}


def test_a_spec_naming_an_unregistered_runner_is_refused(tmp_path, toy) -> None:
    from benchmark.tables.spec import load_spec

    with pytest.raises(ConfigError, match=r"runners\[0\]\.runner is 'toy'"):
        load_spec("toy_table", tmp_path / "specs")  # the module is not installed: no runner 'toy'


def test_the_real_runners_are_plugins_including_full_model_training() -> None:
    assert {"closed_form", "cost", "lp_features", "fl_train"} <= set(runners.load_runners())
    assert runners.get_runner("fl_train") is not None and not runners.DECLARED_ONLY


def test_snakemake_runs_a_plugin_job_through_its_generated_rule(tmp_path, toy) -> None:
    """workflow/rules/plugins.smk gives every plug-in job type a rule: Snakemake rebuilds the toy job from the
    wildcards of its output pattern and runs it with `flb job`; no rule file names the toy runner."""
    import os
    import subprocess
    from pathlib import Path

    import pandas as pd

    toy()
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "tests" / "plugins"), str(root)])}
    out = tmp_path / "work" / "results/runs/toy/toy_ncm/seed1.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "-s", str(root / "workflow" / "Snakefile"),
         "--directory", str(tmp_path / "work"), "results/runs/toy/toy_ncm/seed1.csv"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job_toy" in proc.stderr + proc.stdout
    assert pd.read_csv(out)["value"].tolist() == [41.0]


def test_loading_every_runner_and_collecting_a_pfl_table_imports_no_torch() -> None:
    """Spec validation loads every runner plug-in in each of the ~56 table jobs of a build; torch and torchvision
    (about 6 s a process on a 2-core CPU) are imported only where a job computes with them (measured: the table
    step of fedbabu_table3 went from 12 s to 1.4 s). Fails when a runner module imports them at its top."""
    code = (
        "import sys\n"
        "from benchmark.runners import load_runners\n"
        "from benchmark.tables.spec import load_spec\n"
        "load_runners()\n"
        "load_spec('fedbabu_table12'); load_spec('table3'); load_spec('fedcof_table2')\n"
        "import benchmark.curve_plots, benchmark.tables.assemble\n"
        "heavy = sorted(m for m in ('torch', 'torchvision', 'scipy') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
