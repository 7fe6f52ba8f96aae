"""The throughput table takes a rate from the suite's own benchmark JSON instead of a hand-copied number
(``benchmark.fl.estimate.bench_rates``, issue 28), and refuses a benchmark that does not measure what the table
means (another model, image size, machine, precision, or fp32 with TF32 on), with the file and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from tool_scripts import load_tool

from benchmark.errors import ConfigError
from benchmark.fl import estimate
from benchmark.fl.estimate import bench_rates

fl_train_bench = load_tool("fl_train_bench")


def _run_tool(main, argv: list[str]) -> None:
    """Run a benchmark tool's ``main`` in this process; torch's thread count is restored afterwards."""
    before = torch.get_num_threads()
    try:
        assert main(argv) == 0
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def cpu_bench(tmp_path_factory) -> Path:
    """A real run of tools/fl_train_bench.py on this CPU at the reference 224 px (toy client count)."""
    out = tmp_path_factory.mktemp("bench")
    _run_tool(fl_train_bench.main, [
            "--out", str(out), "--device", "cpu", "--clients", "2", "--per-client", "4", "--batch", "4",
            "--image-size", "224", "--stored-size", "8", "--test-size", "4", "--rounds", "1", "--central-steps", "1",
            "--modes", "loop", "--threads", "1", "--no-check",
    ])  # fmt: skip
    return out / "fl_train_bench.json"


def _table(folder: Path, entry) -> Path:
    path = folder / "throughput.yaml"
    path.write_text(yaml.safe_dump({"training": {"cpu": {"squeezenet1_1": entry}}}))
    return path


def test_a_rate_is_read_from_the_benchmark_it_names(cpu_bench: Path) -> None:
    row = next(r for r in json.loads(cpu_bench.read_text())["results"] if r["mode"] == "loop")
    got = bench_rates({"bench": cpu_bench.name, "mode": "loop", "precision": "fp32"}, "cpu", _table(cpu_bench.parent, None))
    assert got.training == row["images_per_s"] and got.evaluation == row["eval_images_per_s"]
    assert cpu_bench.name in got.source and "loop, fp32" in got.source
    assert bench_rates(17, "cpu").training == 17.0 and bench_rates(17, "cpu").evaluation is None


def test_the_repository_table_loads() -> None:
    for machine in ("h100", "cpu"):
        assert estimate.training_rate(machine, "squeezenet1_1") > 0
        assert estimate.evaluation_rate(machine, "squeezenet1_1") > 0


@pytest.mark.parametrize(
    ("change", "entry", "machine", "says"),
    [
        (lambda d: d["config"].update(image_size=32), {}, "cpu", "config.image_size is 32, not 224"),
        (lambda d: d.update(model="resnet18"), {}, "cpu", "not squeezenet1_1"),
        (None, {}, "h100", "did not run on an H100"),
        (None, {"precision": "bf16"}, "cpu", "no single finished row of mode 'loop', precision 'bf16'"),
        (lambda d: d["config"].update(device="cuda:0"), {}, "cpu", "ran on a GPU"),
        (lambda d: (d["config"].update(device="cuda"), d["machine"].update(gpu="NVIDIA H100 80GB HBM3"),
                    [r.pop("tf32") for r in d["results"]]), {}, "h100", "does not record TF32 off"),
        (None, {"typo": 1}, "cpu", "a benchmark reference has the keys bench, mode, precision"),
    ],
)
def test_a_benchmark_that_measures_something_else_is_refused(cpu_bench, tmp_path, change, entry, machine, says):
    doc = json.loads(cpu_bench.read_text())
    if change is not None:
        change(doc)
    (tmp_path / "b.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as err:
        bench_rates({"bench": "b.json", "mode": "loop", "precision": "fp32", **entry}, machine, _table(tmp_path, None))
    assert says in str(err.value) and "throughput.yaml" in str(err.value)


def test_a_missing_benchmark_names_the_file_and_the_command(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the benchmark .*nope\.json.*tools/fl_train_bench\.py"):
        bench_rates({"bench": "nope.json"}, "cpu", _table(tmp_path, None))


# -- native rates (the pfl runner's CIFAR networks) from tools/pfl_bench.py ------------------------------------------

pfl_bench = load_tool("pfl_bench")


@pytest.fixture(scope="module")
def cpu_pfl_bench(tmp_path_factory) -> Path:
    """A real run of tools/pfl_bench.py on this CPU (4convNet, toy client count)."""
    out = tmp_path_factory.mktemp("pfl_bench")
    _run_tool(pfl_bench.main, [
            "--out", str(out), "--device", "cpu", "--model", "4convnet", "--clients", "2",
            "--images-per-client", "20", "--rounds", "1", "--num-classes", "10", "--batch-size", "10",
            "--modes", "loop", "--no-check", "--threads", "1",
            "--peak-batch", "2", "--peak-matmul", "64", "--peak-repeats", "1",
    ])  # fmt: skip
    return out / "pfl_bench.json"


def test_a_native_rate_is_read_from_the_pfl_benchmark_it_names(cpu_pfl_bench: Path) -> None:
    doc = json.loads(cpu_pfl_bench.read_text())
    got = estimate.native_bench_rate({"bench": cpu_pfl_bench.name}, "cpu", "4convnet", cpu_pfl_bench.parent / "t.yaml")
    assert got == doc["results"]["loop"]["images_per_s"] > 0


@pytest.mark.parametrize(
    ("change", "entry", "machine", "model", "says"),
    [
        (None, {}, "cpu", "mobilenet_cifar", "config.model is '4convnet', not 'mobilenet_cifar'"),
        (None, {}, "h100", "4convnet", "did not run on an H100"),
        (lambda d: d["config"].update(device="cuda"), {}, "cpu", "4convnet", "ran on a GPU"),
        (None, {"mode": "vectorised"}, "cpu", "4convnet", "no finished row of mode 'vectorised'"),
        (lambda d: d["results"]["loop"].update(layout="channels_last"), {}, "cpu", "4convnet", "not contiguous"),
        (None, {"precision": "fp32"}, "cpu", "4convnet", "a benchmark reference has the keys bench, mode"),
    ],
)
def test_a_pfl_benchmark_that_measures_something_else_is_refused(cpu_pfl_bench, tmp_path, change, entry, machine,
                                                                  model, says) -> None:  # fmt: skip
    doc = json.loads(cpu_pfl_bench.read_text())
    if change is not None:
        change(doc)
    (tmp_path / "p.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as err:
        estimate.native_bench_rate({"bench": "p.json", **entry}, machine, model, tmp_path / "throughput.yaml")
    assert says in str(err.value) and "native." in str(err.value)


def test_the_repository_rates_come_from_the_h100_benchmarks() -> None:
    """The H100 rates are the measured files' rows (benchmark/fl/measured/, from a lent H100), not typed numbers."""
    folder = estimate.THROUGHPUT_FILE.parent
    table = yaml.safe_load(estimate.THROUGHPUT_FILE.read_text())
    ft = json.loads((folder / table["training"]["h100"]["squeezenet1_1"]["bench"]).read_text())
    kept = next(r for r in ft["results"] if r["mode"] == "kept" and r["precision"] == "fp32")
    assert kept["tf32"] is False and "H100" in ft["machine"]["gpu"]
    assert estimate.training_rate("h100", "squeezenet1_1") == kept["images_per_s"]
    assert estimate.evaluation_rate("h100", "squeezenet1_1") == kept["eval_images_per_s"]
    pfl = json.loads((folder / table["native"]["h100"]["4convnet"]["bench"]).read_text())
    assert estimate.native_rate("h100", "4convnet") == pfl["results"]["loop"]["images_per_s"]
    assert estimate.native_rate("h100", "mobilenet_cifar") is None
