"""How long a full-model training job takes: the estimate a NOT RUN training cell states.

From the measured throughputs of ``throughput.yaml`` (training images/s of SqueezeNet 1.1 at 224 px on one
H100 and on this project's 2-core CPU), scaled to another backbone by its measured forward throughput and to
another image size by the pixel count (an estimate, stated as one). A run processes, per round, the sampled
clients' images for ``local_epochs`` (legate2023 App. A: 3F each) and evaluates the test set every
``eval_every`` rounds (1F per image).

A rate in ``throughput.yaml`` is either a number with its ``source``, or a reference to the suite's own benchmark
JSON (issue 28: "the throughput table is refreshed from the suite's own benchmark, not a hand-copied number")::

    training:
      h100:
        squeezenet1_1: {bench: measured/fl_train_bench_h100.json, mode: loop, precision: fp32}

read by :func:`bench_rates` from ``tools/fl_train_bench.py``'s output (the path relative to ``throughput.yaml``'s
folder). The reference is checked when it is read: the benchmark's model is SqueezeNet 1.1 at the reference
224 px, its device is the table's machine (an H100 for ``h100``, a CPU for ``cpu``), the row of that mode and
precision exists and ran, and ``fp32`` means TF32 off (the suite's numerics for paper tables); anything else is
one :class:`~benchmark.errors.ConfigError` naming the file and the field. The same row's evaluation images/s is
then the evaluation rate; a plain number keeps the 1F = 1/3 of a training image rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from benchmark.errors import ConfigError

THROUGHPUT_FILE = Path(__file__).with_name("throughput.yaml")
REFERENCE_SIZE = 224


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load(THROUGHPUT_FILE.read_text())


@dataclass(frozen=True)
class BenchRates:
    """SqueezeNet 1.1 at 224 px on one machine: training and evaluation images/s, and where they come from."""

    training: float
    evaluation: float | None
    source: str


#: The GPU name a ``cuda`` benchmark must report to stand for a machine of the table.
GPU_OF_MACHINE = {"h100": "H100"}


def _read_reference(entry: dict, keys: tuple[str, ...], where: str, table_file: Path, tool: str) -> tuple[Path, dict]:
    """The benchmark JSON a ``{bench, ...}`` reference of ``throughput.yaml`` names (path relative to the table's
    folder), after checking the reference's keys; one :class:`ConfigError` naming ``where`` otherwise."""
    if "bench" not in entry or set(entry) - set(keys):
        raise ConfigError(f"{where}: a benchmark reference has the keys {', '.join(keys)} (got {sorted(entry)}); "
                          "or give a number")  # fmt: skip
    path = table_file.parent / str(entry["bench"])
    try:
        return path, json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot read the benchmark {path} ({exc}); run {tool} on that machine, "
                          "or give a number") from exc  # fmt: skip


def _device_problems(device: Any, info: Any, machine: str) -> list[str]:
    """Why a benchmark run on ``device`` (``info``: its recorded machine / GPU) does not stand for the table's
    ``machine``: an H100 row needs a CUDA run on an H100, a CPU row a CPU run."""
    on_gpu = str(device or "").startswith("cuda")
    gpu = GPU_OF_MACHINE.get(machine)
    if gpu is not None and not (on_gpu and gpu in json.dumps(info)):
        return [f"it did not run on an {gpu} (config.device {device!r})"]
    if gpu is None and on_gpu:
        return [f"it ran on a GPU, the table's {machine!r} is a CPU"]
    return []


def bench_rates(entry: Any, machine: str, table_file: Path = THROUGHPUT_FILE) -> BenchRates:
    """The rates an entry of ``training.<machine>.squeezenet1_1`` gives: a number (evaluation then unknown), or a
    ``{bench, mode, precision}`` reference to a ``tools/fl_train_bench.py`` JSON, checked (module docstring)."""
    where = f"{table_file}: training.{machine}.squeezenet1_1"
    if not isinstance(entry, dict):
        return BenchRates(float(entry), None, where)
    path, doc = _read_reference(entry, ("bench", "mode", "precision"), where, table_file,
                                "tools/fl_train_bench.py --out <folder>")  # fmt: skip
    mode, precision = entry.get("mode", "loop"), entry.get("precision", "fp32")
    cfg, info = doc.get("config", {}), doc.get("machine", {})
    problems = []
    if "squeezenet1_1" not in str(doc.get("model", "")):
        problems.append(f"model is {doc.get('model')!r}, not squeezenet1_1")
    if cfg.get("image_size") != REFERENCE_SIZE:
        problems.append(f"config.image_size is {cfg.get('image_size')}, not {REFERENCE_SIZE}")
    on_gpu = str(cfg.get("device", "")).startswith("cuda")
    problems += _device_problems(cfg.get("device"), info, machine)
    rows = [r for r in doc.get("results", [])
            if r.get("mode") == mode and r.get("precision") == precision and r.get("layout", "contiguous") == "contiguous"]  # fmt: skip
    if len(rows) != 1 or rows[0].get("status") != "ok":
        problems.append(f"no single finished row of mode {mode!r}, precision {precision!r}, contiguous layout")
    elif precision == "fp32" and on_gpu and rows[0].get("tf32") is not False:
        problems.append("its fp32 row does not record TF32 off (a benchmark from before the tf32 precision)")
    if problems:
        raise ConfigError(f"{where}: benchmark {path}: " + "; ".join(problems))
    row = rows[0]
    commit = str(info.get("git_commit") or "?")[:10]
    evaluation = row.get("eval_images_per_s")
    return BenchRates(float(row["images_per_s"]), None if evaluation is None else float(evaluation),
                      f"{path.name} ({mode}, {precision}, commit {commit})")  # fmt: skip


def _rates(machine: str) -> BenchRates:
    return bench_rates(_table()["training"][machine]["squeezenet1_1"], machine)


def _size_scale(image_size: int) -> float:
    """How much faster than at 224 px an input of ``image_size`` runs, conservatively: 224 / size (not its square),
    never below 1."""
    return max(1.0, REFERENCE_SIZE / max(int(image_size), 1))


def _backbone_scale(machine: str, backbone: str, image_size: int) -> float:
    fwd = _table()["forward"][machine]
    scale = float(fwd.get(backbone, fwd["squeezenet1_1"])) / float(fwd["squeezenet1_1"])
    return scale * _size_scale(image_size)


def training_rate(machine: str, backbone: str, image_size: int = REFERENCE_SIZE) -> float:
    """Estimated training images/s of ``backbone`` on ``machine`` (``h100`` | ``cpu``)."""
    return _rates(machine).training * _backbone_scale(machine, backbone, image_size)


def evaluation_rate(machine: str, backbone: str, image_size: int = REFERENCE_SIZE) -> float:
    """Estimated evaluation images/s: the benchmark's measured rate where the table refers to one, else three
    times the training rate (1F against 3F)."""
    measured = _rates(machine).evaluation
    if measured is None:
        return 3.0 * training_rate(machine, backbone, image_size)
    return measured * _backbone_scale(machine, backbone, image_size)


def extraction_rate(machine: str, backbone: str, image_size: int = REFERENCE_SIZE) -> float | None:
    """Estimated images/s of a feature extraction (one forward pass each) of ``backbone`` on ``machine``: the
    measured bare forward rate at 224 px (``forward`` in throughput.yaml), scaled to a smaller input like the
    training rates (:func:`_size_scale`); ``None`` for a backbone not measured there.
    The bare forward leaves out decoding and resizing: end to end ran at 73% of it on the H100 and 99% on the CPU
    (docs/performance.md, Benchmarks), so an estimate from it may be short by up to a quarter on a GPU."""
    rate = _table()["forward"].get(machine, {}).get(backbone)
    if rate is None:
        return None
    return float(rate) * _size_scale(image_size)


def native_rate(machine: str, model: str) -> float | None:
    """Measured training images/s of a network trained at its own input size (``native`` in throughput.yaml:
    the pfl runner's CIFAR networks), or ``None`` where it was not measured on ``machine``. An entry is a number
    or a ``{bench, mode}`` reference to a ``tools/pfl_bench.py`` JSON (:func:`native_bench_rate`)."""
    entry = _table().get("native", {}).get(machine, {}).get(model)
    if entry is None:
        return None
    return native_bench_rate(entry, machine, model) if isinstance(entry, dict) else float(entry)


def native_bench_rate(entry: dict, machine: str, model: str, table_file: Path = THROUGHPUT_FILE) -> float:
    """The training images/s of ``native.<machine>.<model>`` read from the ``tools/pfl_bench.py`` JSON it names,
    checked like :func:`bench_rates`: the benchmark trained ``model`` at the contiguous layout (the runner's
    default, ``channels_last: false``), on the table's machine (an H100 for ``h100``, a CPU for ``cpu``), and
    its row of ``mode`` (default ``loop``, the per-client loop) finished; else one :class:`ConfigError`."""
    where = f"{table_file}: native.{machine}.{model}"
    path, doc = _read_reference(entry, ("bench", "mode"), where, table_file, f"tools/pfl_bench.py --model {model}")
    mode = str(entry.get("mode", "loop"))
    cfg, problems = doc.get("config", {}), []
    if cfg.get("model") != model:
        problems.append(f"config.model is {cfg.get('model')!r}, not {model!r}")
    problems += _device_problems(cfg.get("device"), doc.get("device", {}), machine)
    row = doc.get("results", {}).get(mode)
    if not isinstance(row, dict) or row.get("status") != "ok":
        problems.append(f"no finished row of mode {mode!r}")
    elif row.get("layout", "contiguous") != "contiguous":
        problems.append(f"its {mode!r} row ran at layout {row.get('layout')!r}, not contiguous")
    if problems:
        raise ConfigError(f"{where}: benchmark {path}: " + "; ".join(problems))
    return float(row["images_per_s"])


@dataclass(frozen=True)
class RunCost:
    """Images one run trains on and evaluates (forward passes, 1F each = 1/3 of a training image)."""

    train_images: float
    eval_images: float

    def seconds(self, machine: str, backbone: str, image_size: int = REFERENCE_SIZE) -> float:
        return (self.train_images / training_rate(machine, backbone, image_size)
                + self.eval_images / evaluation_rate(machine, backbone, image_size))  # fmt: skip

    def __add__(self, other: RunCost) -> RunCost:
        return RunCost(self.train_images + other.train_images, self.eval_images + other.eval_images)

    def __mul__(self, k: float) -> RunCost:
        return RunCost(self.train_images * k, self.eval_images * k)


def run_cost(images_per_round: float, rounds: int, eval_every: int, eval_size: int) -> RunCost:
    return RunCost(images_per_round * rounds, (rounds // max(eval_every, 1) + 1) * eval_size)


def describe(cost: RunCost, backbone: str, image_size: int = REFERENCE_SIZE) -> str:
    """``≈ N GPU-hours on one H100, ≈ M days on this CPU`` (estimates from throughput.yaml)."""
    gpu_h = cost.seconds("h100", backbone, image_size) / 3600.0
    cpu_d = cost.seconds("cpu", backbone, image_size) / 86400.0
    return f"≈ {gpu_h:.2g} GPU-hours on one H100, ≈ {cpu_d:.2g} days on this CPU"


def sharing_gain(machine: str, table_file: Path = THROUGHPUT_FILE) -> float | None:
    """How much more one GPU trains when :data:`benchmark.gpu_slots.SLOTS_PER_GPU` small jobs share it
    (``sharing.<machine>`` in throughput.yaml: a ``tools/gpu_share_bench.py`` folder and the copies to read): the
    training loop's images/s summed over the K copies, over one copy's alone. None where nothing was measured."""
    entry = yaml.safe_load(table_file.read_text()).get("sharing", {}).get(machine)
    if entry is None:
        return None
    where = f"{table_file}: sharing.{machine}"
    folder, copies = table_file.parent / str(entry.get("bench", "")), int(entry.get("copies", 0))

    def loop_rates(k: int) -> list[float]:
        files = sorted((folder / f"copies-{k}").glob("copy-*/pfl_bench.json"))
        rates = [json.loads(f.read_text()).get("results", {}).get("loop", {}).get("images_per_s") for f in files]
        if len(files) != k or any(not isinstance(r, (int, float)) for r in rates):
            raise ConfigError(f"{where}: {folder}/copies-{k}/ does not hold {k} finished pfl_bench loop rows; "
                              "run tools/gpu_share_bench.py with --copies 1," + str(k))  # fmt: skip
        return [float(r) for r in rates]

    return sum(loop_rates(copies)) / loop_rates(1)[0]

