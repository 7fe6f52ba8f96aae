"""Bad inputs give one clear error, never a plausible number (issue 9): swapped splits, a partition of other
data, NaN/inf features, broken pointer files, a missing tidy file, an unknown Snakemake target, a bad subset,
a corrupt cache entry, another data root, and a results folder moved with its cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from benchmark import pipeline
from benchmark import workflow as wf
from benchmark.cli import main
from benchmark.closed_form.heads import LinearHead, evaluate
from benchmark.data.partition import PartitionData, make_partition
from benchmark.data.registry import DatasetSplit
from benchmark.errors import CacheCorruptError, ConfigError, DataMissingError
from benchmark.features import extract as ex
from benchmark.features.cache import FeatureCache, FeatureKey
from benchmark.features.pointer import load_features, pointer_dict
from benchmark.features.preprocess import get_preprocess
from benchmark.io import atomic_write_json
from benchmark.models.weights import WeightsIdentity

ROOT = Path(__file__).resolve().parents[1]
D = 8


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("flb: error: ") and "\n" not in err and "Traceback" not in err
    return err


def _features(
    results: Path, split: str, x: np.ndarray, y: np.ndarray, *, subset: str = "all", dataset: str = "cifar10",
    checksum: str = "data-all",
) -> Path:  # fmt: skip
    """A cache entry and its pointer, written as ``flb extract`` writes them (cache under ``results/cache``)."""
    cache = FeatureCache(results / "cache")
    key = FeatureKey(dataset, split, checksum, "squeezenet1_1", WeightsIdentity("substitute", "w", "0" * 64),
                     json.dumps({"name": "legate2023_cifar", "split": split}), "fp32")  # fmt: skip
    fs = cache.put(key, x, y, {})
    fields = {"dataset": dataset, "split": split, "subset": subset, "backbone": "squeezenet1_1",
              "num_classes": int(y.max()) + 1, "data_checksum": checksum, "precision": "fp32"}  # fmt: skip
    path = results / "features" / subset / f"{split}.json"
    atomic_write_json(path, pointer_dict(fs, cache, fields))
    return path


def _partition(results: Path, y: np.ndarray, *, subset: str = "all", checksum: str = "data-all") -> Path:
    part = make_partition("dirichlet", y, 0, num_clients=100, alpha=0.1)
    part = part.with_data(PartitionData("cifar10", subset, "train", len(y), checksum))
    path = results / "partitions" / subset / "seed0.json"
    part.to_json(path)
    return path


@pytest.fixture()
def run_inputs(tmp_path) -> tuple[Path, Path, Path]:
    """CIFAR-10-like features (2,000 train, 500 test rows) and a 100-client partition of the train rows."""
    g = np.random.default_rng(0)
    means = np.abs(g.standard_normal((10, D))) * 2
    y, yt = np.arange(2000) % 10, np.arange(500) % 10
    x = np.abs(means[y] + g.standard_normal((2000, D))).astype(np.float32)
    xt = np.abs(means[yt] + g.standard_normal((500, D))).astype(np.float32)
    res = tmp_path / "results"
    return _features(res, "train", x, y), _features(res, "test", xt, yt), _partition(res, y)


def _closed_form(train: Path, test: Path, part: Path, out: Path) -> int:
    return main(["closed-form", "--train", str(train), "--test", str(test), "--partition", str(part),
                 "--methods", "fedncm", "--out", str(out)])  # fmt: skip


def test_good_inputs_run(run_inputs, tmp_path) -> None:
    """The fixtures themselves are accepted (so every refusal below is caused by the one bad input)."""
    train, test, part = run_inputs
    assert _closed_form(train, test, part, tmp_path / "ok.csv") == 0
    assert (tmp_path / "ok.csv").exists()


# ------------------------------------------------------------------------------------------------ swapped
def test_swapped_train_and_test_is_one_error(run_inputs, tmp_path, capsys) -> None:
    from benchmark.fl.jobs import load_inputs
    from benchmark.fl.protocols import get_protocol

    train, test, part = run_inputs
    assert _closed_form(test, train, part, tmp_path / "x.csv") == 2
    err = _one_line_error(capsys)
    assert str(test) in err and "'split'" in err and "swapped" in err
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(ConfigError, match="swapped"):  # flb fl-run reads its inputs through the same loader
        load_inputs(test, train, part, get_protocol("legate2023_cifar10"))


# ------------------------------------------------------------------------------------------------ partition identity
def test_partition_of_other_data_is_one_error(run_inputs, tmp_path, capsys) -> None:
    from benchmark.fl.jobs import load_inputs
    from benchmark.fl.protocols import get_protocol

    train, test, _ = run_inputs
    y = np.arange(200) % 10  # a stratified20 partition used with the features of all rows
    other = _partition(tmp_path / "results", y, subset="stratified20", checksum="data-s20")
    assert _closed_form(train, test, other, tmp_path / "x.csv") == 2
    err = _one_line_error(capsys)
    assert str(other) in err and str(train) in err and "stratified20" in err and "flb partition" in err
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(CacheCorruptError, match="was drawn on"):
        load_inputs(train, test, other, get_protocol("legate2023_cifar10"))
    # same sizes, another data root or subset seed: only the checksum tells them apart
    same_size = _partition(tmp_path / "other", np.arange(2000) % 10, checksum="data-elsewhere")
    with pytest.raises(CacheCorruptError, match="data_checksum"):
        load_inputs(train, test, same_size, get_protocol("legate2023_cifar10"))


def test_partition_without_data_record_says_rebuild(run_inputs, tmp_path, capsys) -> None:
    train, test, part = run_inputs
    old = json.loads(part.read_text())
    del old["data"]  # the file as the previous version wrote it
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(old))
    assert _closed_form(train, test, legacy, tmp_path / "x.csv") == 2
    err = _one_line_error(capsys)
    assert "older version" in err and f"--out {legacy}" in err and "--scheme dirichlet" in err


def test_partition_step_records_its_data(tmp_path, monkeypatch) -> None:
    y = np.arange(300) % 3
    split = DatasetSplit(
        "toy", "train", y, ("a", "b", "c"), "toy-sum", images=np.zeros((300, 2, 2, 3), np.uint8)
    )
    monkeypatch.setattr(pipeline, "load_dataset", lambda *a, **k: split)
    out = tmp_path / "p.json"
    pipeline.partition_step(
        dataset="toy", subset="all", scheme="iid", seed=0, out=out, params={"num_clients": 3}
    )
    assert json.loads(out.read_text())["data"] == {
        "dataset": "toy", "subset": "all", "split": "train", "num_samples": 300, "data_checksum": "toy-sum"
    }  # fmt: skip


# ------------------------------------------------------------------------------------------------ NaN / inf
def test_non_finite_test_features_are_refused(run_inputs, tmp_path, capsys) -> None:
    train, test, part = run_inputs
    _, te = load_features(test, "test")
    xt = te.features.copy()
    xt[3, 1] = np.nan
    xt[7, 0] = np.inf
    bad = _features(tmp_path / "nan", "test", xt, te.labels)
    assert _closed_form(train, bad, part, tmp_path / "x.csv") == 2
    err = _one_line_error(capsys)
    assert "NaN/inf" in err and str(bad) in err and not (tmp_path / "x.csv").exists()
    # evaluation refuses them too (a caller that bypasses the loader), and a non-finite head's logits
    head = LinearHead(np.ones((10, D), np.float32), np.zeros(10, np.float32))
    with pytest.raises(ConfigError, match="NaN"):
        evaluate(head, xt, te.labels)
    nan_head = LinearHead(np.full((10, D), np.nan, np.float32), np.zeros(10, np.float32))
    with pytest.raises(ConfigError, match="head's weights"):
        evaluate(nan_head, te.features, te.labels)


def _toy_split(n: int = 4, split: str = "train") -> DatasetSplit:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    return DatasetSplit("toy", split, np.arange(n) % 2, ("a", "b"), "toy-checksum", images=images)


@pytest.mark.parametrize("split", ["train", "test"])
def test_extraction_refuses_non_finite_features(tmp_path, monkeypatch, split) -> None:
    real = ex.forward_features

    def poisoned(*a, **k):
        out = real(*a, **k)
        out[0, 0] = float("nan")
        return out

    monkeypatch.setattr(ex, "forward_features", poisoned)
    cache = FeatureCache(tmp_path)
    with pytest.raises(ConfigError, match=r"NaN/inf.*nothing was cached"):
        ex.extract_features(_toy_split(split=split), "squeezenet1_1", "random", get_preprocess("fedbabu_cifar10"),
                            cache=cache, progress=False)  # fmt: skip
    assert not cache.root.exists() or not any(cache.root.iterdir())


# ------------------------------------------------------------------------------------------------ pointer files
@pytest.mark.parametrize("damage", ["missing", "truncated", "keyless", "no tensors field"])
def test_broken_pointer_files_are_one_line(run_inputs, tmp_path, capsys, damage) -> None:
    train, test, part = run_inputs
    bad = tmp_path / "bad.json"
    text = train.read_text()
    if damage == "truncated":
        bad.write_text(text[: len(text) // 2])
    elif damage == "keyless":
        bad.write_text("{}")
    elif damage == "no tensors field":
        bad.write_text(json.dumps({k: v for k, v in json.loads(text).items() if k != "tensors"}))
    assert _closed_form(bad, test, part, tmp_path / "x.csv") == 2
    err = _one_line_error(capsys)
    assert str(bad) in err and ("extract" in err or "does not exist" in err)
    if damage != "missing":
        assert "tensors" in err or "JSON" in err


def test_collect_of_a_missing_file_is_one_line(tmp_path, capsys) -> None:
    assert main(["collect", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "all.csv")]) == 2
    assert "nope.csv does not exist" in _one_line_error(capsys)
    (tmp_path / "empty.csv").write_text("")
    assert main(["collect", str(tmp_path / "empty.csv"), "--out", str(tmp_path / "all.csv")]) == 2
    assert "empty.csv" in _one_line_error(capsys) and not (tmp_path / "all.csv").exists()


# ------------------------------------------------------------------------------------------------ corrupt cache entry
def _extract(results: Path, monkeypatch) -> Path:
    """``flb extract``'s step on a toy split (the registry lookups stubbed), cache under ``results/cache``."""
    import benchmark.data.registry as registry

    monkeypatch.setattr(registry, "dataset_info", lambda name: None)
    monkeypatch.setattr(pipeline, "load_dataset", lambda name, split, root=None: _toy_split(split=split))
    out = results / "features" / "train.json"
    pipeline.extract_step(dataset="toy", split="train", backbone="squeezenet1_1", weights="random",
                          preprocess="fedbabu_cifar10", out=out, cache_dir=str(results / "cache"))  # fmt: skip
    return out


def test_corrupt_cache_entry_error_names_everything_to_delete(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLB_CACHE_DIR", str(tmp_path / "results" / "cache"))
    ptr = _extract(tmp_path / "results", monkeypatch)
    tensors = next((tmp_path / "results" / "cache" / "features").glob("*.safetensors"))
    blob = bytearray(tensors.read_bytes())
    blob[-3] ^= 0xFF
    tensors.write_bytes(bytes(blob))
    with pytest.raises(CacheCorruptError) as info:
        load_features(ptr, "train")
    named = [ptr, tensors, tensors.with_suffix(".json")]
    assert all(str(p) in info.value.fix for p in named)
    for p in named:  # doing what the one message says is enough: extraction then loads cleanly
        p.unlink()
    _extract(tmp_path / "results", monkeypatch)
    assert load_features(ptr, "train")[1].features.shape[0] == 4


# ------------------------------------------------------------------------------------------------ moved results
def test_results_folder_moved_with_its_cache_still_loads(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("FLB_CACHE_DIR", raising=False)
    first = tmp_path / "checkout-a"
    _extract(first / "results", monkeypatch)
    assert not Path(json.loads((first / "results/features/train.json").read_text())["tensors"]).is_absolute()
    second = tmp_path / "checkout-b"
    shutil.copytree(first, second)
    shutil.rmtree(first)
    monkeypatch.chdir(second)  # the default cache root, results/cache, of the other checkout
    _, fs = load_features("results/features/train.json", "train")
    assert fs.features.shape == (4, 512)
    monkeypatch.chdir(tmp_path)  # elsewhere: FLB_CACHE_DIR names the copied cache
    monkeypatch.setenv("FLB_CACHE_DIR", str(second / "results" / "cache"))
    assert load_features(second / "results/features/train.json", "train")[1].features.shape == (4, 512)
    monkeypatch.setenv("FLB_CACHE_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DataMissingError, match="FLB_CACHE_DIR"):
        load_features(second / "results/features/train.json", "train")


def test_old_absolute_pointer_loads_while_its_file_exists(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLB_CACHE_DIR", str(tmp_path / "elsewhere"))
    ptr_path = _extract(tmp_path / "results", monkeypatch)
    ptr = json.loads(ptr_path.read_text())
    tensors = (tmp_path / "results" / "cache" / ptr["tensors"]).resolve()
    old = {k: v for k, v in ptr.items() if k != "cache_root"} | {"tensors": str(tensors)}
    ptr_path.write_text(json.dumps(old))
    assert load_features(ptr_path, "train")[1].features.shape == (4, 512)
    shutil.rmtree(tmp_path / "results" / "cache")
    with pytest.raises(DataMissingError, match="not in the cache"):
        load_features(ptr_path, "train")


# ------------------------------------------------------------------------------------------------ config / snakemake
def test_subset_stratified0_is_rejected_naming_the_field() -> None:
    from benchmark.data.subsets import parse_subset

    cfg = yaml.safe_load(wf.DEFAULT_CONFIG.read_text())
    for bad in ("stratified0", "stratified007"):
        with pytest.raises(ConfigError, match="table_subset"):
            wf.validate_config({**cfg, "table_subset": bad})
        with pytest.raises(ConfigError, match="unknown subset"):
            parse_subset(bad)
    wf.validate_config({**cfg, "table_subset": "stratified10"})


def test_unknown_snakemake_target_says_how_to_list_the_targets(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "bogus_target", "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "unknown snakemake target 'bogus_target' -- list every target with `snakemake --list-target-rules`" in out
    assert "fedcof_table3" not in out  # one line, not every name (tests/robustness/test_workflow.py: the closest)


def test_data_reading_rules_carry_the_data_root(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FLB_DATA_ROOT", str(tmp_path / "a"))
    a = wf.data_root_identity({"data_root": None})
    monkeypatch.setenv("FLB_DATA_ROOT", str(tmp_path / "b"))
    assert wf.data_root_identity({"data_root": None}) != a == str((tmp_path / "a").resolve())
    assert wf.data_root_identity({"data_root": str(tmp_path / "a")}) == a


@pytest.mark.realdata
@pytest.mark.slow
def test_another_data_root_reruns_the_data_jobs(tmp_path, real_data_root) -> None:
    """Snakemake's params trigger: a partition built from one data root is rebuilt for another."""
    target = "results/partitions/cifar10/stratified10/iid-num_clients2/seed0.json"
    other = tmp_path / "other-root"  # another root (same files, linked): the job must run again
    other.mkdir()
    for item in real_data_root.iterdir():
        (other / item.name).symlink_to(item)

    def snake(root: Path, *extra: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "FLB_DATA_ROOT": str(root), "PYTHONPATH": str(ROOT)}
        return subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "1", "-s", str(ROOT / "workflow" / "Snakefile"),
             "--directory", str(tmp_path), *extra, target],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip

    built = snake(real_data_root)
    assert built.returncode == 0, built.stderr[-2000:]
    same = snake(real_data_root, "-n")
    assert "Nothing to be done" in same.stdout + same.stderr
    moved = snake(other, "-n")
    assert (
        "rule partition" in moved.stdout + moved.stderr and "params" in (moved.stdout + moved.stderr).lower()
    )
