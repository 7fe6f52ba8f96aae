"""The SLURM workflow profile (workflow/profiles/slurm, docs/cluster.md) asks for the right hardware per job.

A dry run of ``table3`` with the profile, as on a login node without a GPU: the profile's own config file sets
``device: cuda``, so the full-model training jobs are planned (a ``--config`` on the command line adds to it);
every ``job_fl_train`` / ``job_fl_tune`` job then requests exactly one GPU on the GPU partition, extraction one
GPU as on a workstation, and every other job none, on the CPU partition. The resources checked are those
Snakemake resolves and prints for each job, i.e. what it hands the executor plug-in; the GPU flag of the sbatch
call is then rendered by the plug-in's own function. Nothing is submitted (no ``sbatch`` here).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from toy_plugins import plugin_module

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "workflow" / "profiles" / "slurm"
TRAINING = ("job_fl_train", "job_fl_tune")
GPU_RULES = {*TRAINING, "extract", "fl_run"}
JOB = re.compile(r"^(?:local)?rule (\S+):$")


def _needs_plugin() -> None:
    """The profile names the slurm executor, which Snakemake loads even for a dry run."""
    pytest.importorskip(
        "snakemake_executor_plugin_slurm", reason="the cluster extra: pip install -e '.[cluster]'"
    )


def _profile() -> dict:
    return yaml.safe_load((PROFILE / "config.yaml").read_text())


def _parse_resources(line: str) -> dict[str, str]:
    items = (kv.split("=", 1) for kv in line.split("resources: ", 1)[1].split(", "))
    return dict(items)


def _dry_run_jobs(out: str) -> list[tuple[str, dict[str, str], str]]:
    """(rule, resources, wildcards line) of every job a dry run prints."""
    jobs: list[tuple[str, dict[str, str], str]] = []
    rule, wildcards = None, ""
    for line in out.splitlines():
        if m := JOB.match(line):
            rule, wildcards = m.group(1), ""
        elif rule and line.strip().startswith("wildcards: "):
            wildcards = line.strip()
        elif rule and line.strip().startswith("resources: "):
            jobs.append((rule, _parse_resources(line), wildcards))
            rule = None
    return jobs


@pytest.fixture(scope="module")
def table3_jobs(tmp_path_factory, real_data_root, real_weights_dir) -> list[tuple[str, dict[str, str], str]]:
    _needs_plugin()
    work = tmp_path_factory.mktemp("slurm_dry_run")
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--workflow-profile", str(PROFILE), "-s",
         str(ROOT / "workflow" / "Snakefile"), "--directory", str(work), "table3",
         "--config", f"data_root={real_data_root}", f"weights_dir={real_weights_dir}"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "FLB_OFFLINE": "1"},
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "cluster-config.yaml" in out  # the profile's config file was read
    return _dry_run_jobs(proc.stdout)


def test_training_jobs_request_one_gpu_and_the_rest_none(table3_jobs) -> None:
    prof = _profile()
    cpu_partition = str(prof["default-resources"]["slurm_partition"])
    gpu_partition = str(prof["set-resources"]["job_fl_train"]["slurm_partition"])
    assert gpu_partition != cpu_partition
    counts: dict[str, int] = {}
    for rule, res, wildcards in table3_jobs:
        counts[rule] = counts.get(rule, 0) + 1
        if rule in GPU_RULES:
            assert res.get("gpu") == "1", (rule, wildcards, res)
            assert res["slurm_partition"] == gpu_partition, (rule, res)
        else:
            assert "gpu" not in res and "gres" not in res, (rule, wildcards, res)
            assert res["slurm_partition"] == cpu_partition, (rule, res)
        if rule in TRAINING:
            assert "method=random" not in wildcards  # Table 3 has no Random cell: the base runtime applies
            assert res["runtime"] == "240" and res["mem_mb"] == "32000" and res["cpus_per_task"] == "8", res
    # device: cuda reached the plan despite the --config on the command line: legate2023 Table 3 trains FT and
    # FedNCM+FT under FedAvg, FedProx and FedAdam, 3 seeds each, after their learning-rate grids.
    assert counts.get("job_fl_train") == 18 and counts.get("job_fl_tune", 0) > 0, counts
    assert counts["extract"] >= 1 and {"partition", "job_fl_lr_choice", "paper_table"} <= set(counts), counts


def test_runtime_scales_for_random_and_is_capped() -> None:
    """The training runtime expression, evaluated as Snakemake evaluates a profile's resource expression."""
    from snakemake.resources import Resource

    expr = _profile()["set-resources"]["job_fl_train"]["runtime"]

    def minutes(method: str) -> int:
        return Resource.cli_evaluator(
            "runtime", expr, wildcards=SimpleNamespace(method=method), input=None, attempt=1, async_run=None
        )

    assert minutes("ft") == minutes("fedncm_ft") == 240
    assert minutes("random") == 1440  # 15 x 240, capped at 24 h: a longer run resumes on resubmission
    assert _profile()["set-resources"]["job_fl_tune"] == _profile()["set-resources"]["job_fl_train"]


def test_the_plugin_turns_the_gpu_resource_into_one_sbatch_gpu(table3_jobs) -> None:
    """The GPU part of the sbatch call, as snakemake-executor-plugin-slurm 2.x writes it for these resources."""
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    def gres(res: dict[str, str]) -> str:
        typed = {k: int(v) if v.isdigit() else v for k, v in res.items()}
        return set_gres_string(SimpleNamespace(resources=SimpleNamespace(get=typed.get, **typed))).strip()

    rendered = {(rule, gres(res)) for rule, res, _ in table3_jobs}
    assert {r for r, g in rendered if g == "--gpus=1"} == {"job_fl_train", "job_fl_tune", "extract"}
    assert {g for r, g in rendered if r not in GPU_RULES} == {""}


TOY = plugin_module(
    """
class ToyGpuJob(Job):
    KIND: ClassVar[str] = "toy_gpu"
    PATTERN: ClassVar[str] = "results/runs/toy_gpu/{method}/seed{seed}.csv"
    RESOURCES: ClassVar[dict] = {"gpu": 1, "runtime": lambda job: 10 * (job.seed + 1)}
    method: str
    seed: int

    def execute(self, config):
        raise AssertionError("dry run only")
"""
)


def test_a_plugin_job_class_declares_its_rule_resources(tmp_path) -> None:
    """workflow/rules/plugins.smk passes a job class's ``RESOURCES`` to its generated rule (a callable value is
    evaluated on the job the wildcards name), so hardware needs hold under every executor and profile."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "toy_gpu_runner.py").write_text(TOY)
    env = {
        **os.environ, "FLB_OFFLINE": "1", "FLB_RUNNER_MODULES": "toy_gpu_runner",
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "mods"), str(ROOT)]),
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path / "work"), "results/runs/toy_gpu/x/seed2.csv"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    [(rule, res, _)] = _dry_run_jobs(proc.stdout)
    assert rule == "job_toy_gpu" and res["gpu"] == "1" and res["runtime"] == "30", res


def test_every_plugin_gpu_job_goes_to_the_gpu_partition() -> None:
    """A runner plug-in's job class that declares a GPU (``RESOURCES``) has a ``set-resources`` entry of its
    rule (``job_<kind>``) on the GPU partition asking for one GPU: without one the job would land on the CPU
    partition with ``--gpus=1`` (docs/cluster.md, "Adding a GPU job type")."""
    from benchmark.workflow import plugin_job_types

    prof = _profile()
    gpu_partition = prof["set-resources"]["job_fl_train"]["slurm_partition"]
    gpu_kinds = [k for k, cls in plugin_job_types().items() if getattr(cls, "RESOURCES", {}).get("gpu")]
    assert {"pfl_train", "fl_train"} <= set(gpu_kinds)
    for kind in gpu_kinds:
        res = prof["set-resources"].get(f"job_{kind}")
        assert res and res["slurm_partition"] == gpu_partition and res.get("gpu") == 1, (kind, res)
