"""How long a full-model training job takes: the estimate a NOT RUN training cell states.

From the measured throughputs of ``throughput.yaml`` (training images/s of SqueezeNet 1.1 at 224 px on one
H100 and on this project's 2-core CPU), scaled to another backbone by its measured forward throughput and to
another image size by the pixel count (an estimate, stated as one). A run processes, per round, the sampled
clients' images for ``local_epochs`` (legate2023 App. A: 3F each) and evaluates the test set every
``eval_every`` rounds (1F per image).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

THROUGHPUT_FILE = Path(__file__).with_name("throughput.yaml")
REFERENCE_SIZE = 224


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load(THROUGHPUT_FILE.read_text())


def training_rate(machine: str, backbone: str, image_size: int = REFERENCE_SIZE) -> float:
    """Estimated training images/s of ``backbone`` on ``machine`` (``h100`` | ``cpu``)."""
    t = _table()
    base = float(t["training"][machine]["squeezenet1_1"])
    fwd = t["forward"][machine]
    rate = base * float(fwd.get(backbone, fwd["squeezenet1_1"])) / float(fwd["squeezenet1_1"])
    return rate * max(1.0, (REFERENCE_SIZE / max(int(image_size), 1)) ** 2) ** 0.5


def native_rate(machine: str, model: str) -> float | None:
    """Measured training images/s of a network trained at its own input size (``native`` in throughput.yaml:
    the pfl runner's CIFAR networks), or ``None`` where it was not measured on ``machine``."""
    rate = _table().get("native", {}).get(machine, {}).get(model)
    return None if rate is None else float(rate)


@dataclass(frozen=True)
class RunCost:
    """Images one run trains on and evaluates (forward passes, 1F each = 1/3 of a training image)."""

    train_images: float
    eval_images: float

    def seconds(self, machine: str, backbone: str, image_size: int = REFERENCE_SIZE) -> float:
        rate = training_rate(machine, backbone, image_size)
        return (self.train_images + self.eval_images / 3.0) / rate

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
