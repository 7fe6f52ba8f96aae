"""Command line errors are one clear line; the Snakemake DAG resolves; config values are validated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmark import workflow as wf
from benchmark.cli import main
from benchmark.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("flb: error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_missing_data_root_is_one_line(tmp_path, capsys) -> None:
    rc = main(["extract", "--dataset", "cifar10", "--split", "train", "--backbone", "squeezenet1_1",
               "--preprocess", "legate2023_cifar", "--data-root", str(tmp_path / "none"), "--out", str(tmp_path / "p.json")])  # fmt: skip
    assert rc == 2
    assert f"data root {tmp_path / 'none'} (named by --data-root) does not exist" in _one_line_error(capsys)
    assert not (tmp_path / "p.json").exists()
    (tmp_path / "none").mkdir()  # a data root without the dataset: the loader's error names the files
    assert main(["extract", "--dataset", "cifar10", "--split", "train", "--backbone", "squeezenet1_1",
                 "--preprocess", "legate2023_cifar", "--data-root", str(tmp_path / "none"), "--out", str(tmp_path / "p.json")]) == 2  # fmt: skip
    assert "cifar-10-batches-py" in _one_line_error(capsys)
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(("flag", "value", "needle"), [
    ("--dataset", "mnist", "unknown dataset"),
    ("--backbone", "alexnet", "unknown backbone"),
    ("--preprocess", "nope", "unknown preprocessing"),
])  # fmt: skip
def test_unknown_names_are_one_line(tmp_path, capsys, flag, value, needle) -> None:
    args = {"--dataset": "cifar10", "--backbone": "squeezenet1_1", "--preprocess": "legate2023_cifar"}
    args[flag] = value
    argv = ["extract", "--split", "train", "--out", str(tmp_path / "p.json"), "--data-root", str(tmp_path)]
    for k, v in args.items():
        argv += [k, v]
    assert main(argv) == 2
    assert needle in _one_line_error(capsys)


def test_bad_json_option_is_one_line(tmp_path, capsys) -> None:
    rc = main(["closed-form", "--train", "a", "--test", "b", "--partition", "c", "--methods", "fedncm",
               "--options", "{oops", "--out", str(tmp_path / "x.csv")])  # fmt: skip
    assert rc == 2 and "--options" in _one_line_error(capsys)


def _config() -> dict:
    return yaml.safe_load(wf.DEFAULT_CONFIG.read_text())


def test_default_config_is_valid() -> None:
    wf.validate_config(_config())


@pytest.mark.parametrize(("path", "value", "field"), [
    (("precision",), "fp16", "precision"),
    (("batch_size",), 0, "batch_size"),
    (("targets", "smoke", "weights"), "imagenet", "targets.smoke.weights"),
    (("targets", "smoke", "seeds"), [], "targets.smoke.seeds"),
    (("targets", "smoke", "subset"), "half", "targets.smoke.subset"),
    (("tier",), "nightly", "tier"),
])  # fmt: skip
def test_bad_config_values_name_the_field(path, value, field) -> None:
    cfg = _config()
    node = cfg
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=f"config field '{field}'"):
        wf.validate_config(cfg)


def test_partition_tag_roundtrip() -> None:
    part = {"scheme": "dirichlet", "alpha": 0.1, "num_clients": 100}
    tag = wf.partition_tag(part)
    assert tag == "dirichlet-alpha0.1-num_clients100"


def _dry_run(target: str, tmp_path: Path) -> str:
    """A dry run of ``target`` in ``tmp_path`` (Snakemake's .snakemake/ and the plans go there)."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", target, "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def test_snakemake_dry_run_smoke(tmp_path) -> None:
    out = _dry_run("smoke", tmp_path)
    assert "collect" in out or "Nothing to be done" in out


def test_top_level_snakefile_runs_the_workflow(tmp_path) -> None:
    """The repository root's Snakefile (an include of workflow/Snakefile, issue 25) plans a target with this
    checkout's config and finds the default profile (rerun-incomplete) through profiles/default."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "fedcof_table5", "-s", str(ROOT / "Snakefile"),
         "--directory", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, env={**os.environ, "FLB_OFFLINE": "1"},
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert f"Using workflow specific profile {ROOT / 'profiles' / 'default'}" in out
    assert "paper_table" in out and (tmp_path / "results" / "plans" / "fedcof_table5.json").is_file()


def test_pointer_json_shape(tmp_path) -> None:
    """parse_kv turns key=value pairs into typed parameters for the partition step."""
    from benchmark.pipeline import parse_kv

    assert parse_kv(["alpha=0.1", "num_clients=100", "name=x"]) == {
        "alpha": 0.1,
        "num_clients": 100,
        "name": "x",
    }
    with pytest.raises(ConfigError):
        parse_kv(["alpha"])
    json.dumps(parse_kv([]))


def test_ci_tables_extracts_each_feature_set_once(tmp_path, real_data_root, real_weights_dir) -> None:
    """`ci_tables` under tier=ci: one extract job per (dataset, backbone, preprocessing, split), SqueezeNet only."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "ci_tables", "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path), "--config", "tier=ci", f"data_root={real_data_root}",
         f"weights_dir={real_weights_dir}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    outputs = [
        line.split("output: ", 1)[1]
        for line in proc.stdout.splitlines()
        if "output: results/features/" in line
    ]
    assert len(outputs) == len(set(outputs)) == 6  # CIFAR-10 at 224 and 32 px, CIFAR-100; train and test
    assert all("/squeezenet1_1-" in o and ("/cifar10/" in o or "/cifar100/" in o) for o in outputs)
    assert "paper_table" in proc.stdout and "ci_tables" in proc.stdout
