"""Which client executor a pfl run uses where the workflow says ``train_exec: auto``: measured on the machine
that trains, not assumed from the device kind (issue 27: "the executor chosen per device from a measurement";
on this suite's CPU the per-client loop runs a 4convNet round at 1.1x of centralised training, the lock-step
executor at 0.56x, while on an H100 lock-step is 4.7x the loop).

:func:`choose_executor` times one round of each executor -- :class:`~benchmark.pfl.trainer.PFLTrainer`'s own
``train_round``, loop and ``vectorised`` -- on the run's model (its ``bn``, dtype, memory layout), algorithm
and client batch size, with ``CAL_CLIENTS`` clients (at most the round's and the chunk's) of one batch each on
synthetic images on the run's device: a warm-up round of each, then ``CAL_REPEATS`` timed rounds of each,
interleaved, the best kept. Lock-step is chosen only when its images/s beats the loop's by ``MARGIN`` (the loop
is the reference's execution). The measurement is cached as JSON under ``<cache>/pfl_executor/`` (the first
writable of the cache folders given: the runner passes the workflow's cache dir, then ``results/cache``),
keyed by
everything it depends on (:func:`calibration_key`: machine, device, torch and its thread count, model, bn,
dtype, layout, algorithm, batch size, calibration clients), so a machine measures once per key and a resumed
run (whose checkpoint identity holds ``client_exec``) finds the same choice. An algorithm or model that cannot
run in lock-step (:func:`benchmark.pfl.vectorised.loop_reason`) gets the loop without a measurement.

Deterministic in effect: both executors train the same model to floating-point rounding (float64: ~1e-14 of
the update, ``tests/test_pfl_vectorised.py``); the training record says which ran and why
(``executor_choice``), and ``client_exec`` in its config.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.federated.checkpoint import peek_checkpoint
from benchmark.federated.images import NORMALISATION, DeviceImages
from benchmark.io import atomic_write_json
from benchmark.pfl.models import pfl_model_info
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.trainer import PFLConfig, PFLTrainer
from benchmark.pfl.vectorised import loop_reason
from benchmark.provenance import machine

CAL_CLIENTS = 4  # clients of the calibration round (fewer when the round or the chunk has fewer)
CAL_REPEATS = 2  # timed rounds of each executor after its warm-up, interleaved; the best is kept
MARGIN = 1.05  # lock-step must beat the loop by 5 % (timer noise must not flip the choice to it)
CAL_VERSION = 1  # bump when the measurement changes: older cached choices are then measured again


@dataclass(frozen=True)
class ExecutorChoice:
    """The executor a run uses and why: ``source`` ``measured`` / ``cached`` (then both images/s are set),
    ``ineligible`` (the loop, ``reason`` says why lock-step cannot run) or ``resumed`` (the executor of the
    checkpoint the run resumes: :func:`resumed_choice`)."""

    executor: str
    source: str
    key: dict[str, Any]
    loop_images_per_s: float | None = None
    vectorised_images_per_s: float | None = None
    reason: str = ""
    measured_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibration_clients(cfg: PFLConfig) -> int:
    """Clients of the calibration round: ``CAL_CLIENTS``, at most the round's and the lock-step chunk's."""
    return max(1, min(CAL_CLIENTS, cfg.clients_per_round, cfg.vector_chunk or CAL_CLIENTS))


def calibration_key(cfg: PFLConfig, device: torch.device) -> dict[str, Any]:
    """Everything a calibration's result depends on (its cache key)."""
    return {
        "version": CAL_VERSION,
        "machine": machine(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": cfg.model,
        "bn": cfg.bn,
        "dtype": cfg.dtype,
        "channels_last": cfg.channels_last,
        "algorithm": cfg.algorithm,
        "batch_size": cfg.batch_size,
        "clients": calibration_clients(cfg),
    }


def _synthetic(n: int, num_classes: int, device: torch.device, channels: int, side: int) -> DeviceImages:
    g = torch.Generator().manual_seed(0)
    mean, std = NORMALISATION["cifar10" if channels == 3 else "emnist"]
    return DeviceImages(
        torch.randint(0, 256, (n, channels, side, side), generator=g, dtype=torch.uint8),
        torch.randint(0, num_classes, (n,), generator=g),
        torch.tensor(mean).view(1, -1, 1, 1),
        torch.tensor(std).view(1, -1, 1, 1),
        device=device,
    )


def _trainers(cfg: PFLConfig, device: torch.device, num_classes: int) -> dict[str, PFLTrainer]:
    """A loop and a lock-step trainer of the calibration round (``c`` clients of one batch each)."""
    info = pfl_model_info(cfg.model)
    c, n = calibration_clients(cfg), cfg.batch_size
    train = _synthetic(c * n, num_classes, device, info.in_channels, info.image_size)
    test = _synthetic(1, num_classes, device, info.in_channels, info.image_size)
    split = ClientSplit(tuple(np.arange(i * n, (i + 1) * n) for i in range(c)),
                        tuple(np.arange(0) for _ in range(c)))  # fmt: skip
    base = replace(cfg, clients=c, participation=1.0, local_epochs=1, vector_chunk=c, eval_clients=None,
                   init_model=None, init_model_sha256=None)  # timing only: a random initialisation does
    return {mode: PFLTrainer(replace(base, client_exec=mode), train, test, split, num_classes, progress=False)
            for mode in ("loop", "vectorised")}  # fmt: skip


def _round_seconds(trainer: PFLTrainer, r: int, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    trainer.train_round(r, np.arange(trainer.cfg.clients), trainer.cfg.lr)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def measure(cfg: PFLConfig, device: torch.device, num_classes: int) -> dict[str, float]:
    """Images/s of one calibration round of each executor (module docstring), or ``{"reason": ...}`` when
    lock-step cannot run this configuration."""
    trainers = _trainers(cfg, device, num_classes)
    reason = loop_reason(trainers["vectorised"])
    if reason:
        return {"reason": reason}
    images = calibration_clients(cfg) * cfg.batch_size
    best = {mode: float("inf") for mode in trainers}
    for r in range(CAL_REPEATS + 1):  # round 0: the warm-up of each
        for mode, trainer in trainers.items():
            sec = _round_seconds(trainer, r, device)
            if r > 0:
                best[mode] = min(best[mode], sec)
    return {f"{mode}_images_per_s": round(images / sec, 2) for mode, sec in best.items()}


def resumed_choice(cfg: PFLConfig, device: torch.device, checkpoint: Path | None) -> ExecutorChoice | None:
    """The executor of the run that ``checkpoint`` resumes, or None when there is none to resume.

    A run keeps the executor it started with: a checkpoint's identity holds ``client_exec``, and the measured
    choice can differ between the machine that parked it and the one that resumes it (a CPU picks the loop, a
    GPU lock-step; seen 2026-11-27 when an H200 harvest refused a checkpoint parked on a CPU). Both executors
    train the same model to rounding, so continuing with the checkpoint's executor is the run the checkpoint
    began, only slower or faster where it ends."""
    state = None if checkpoint is None else peek_checkpoint(checkpoint)
    if state is None:
        return None
    executor = state["run"].get("config", {}).get("client_exec")
    if executor not in ("loop", "vectorised"):
        return None
    return ExecutorChoice(executor, "resumed", calibration_key(cfg, device),
                          reason=f"the checkpoint {checkpoint} that this run resumes was trained with it")  # fmt: skip


def choose_executor(
    cfg: PFLConfig, device: torch.device, num_classes: int, cache: Path | Sequence[Path] | None = None
) -> ExecutorChoice:
    """The executor of ``cfg`` on ``device``: from the first of the ``cache`` folders that holds this key's
    measurement, else measured and written to the first of them that is writable."""
    key = calibration_key(cfg, device)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    if cache is None:
        folders: list[Path] = []
    else:
        folders = [Path(cache)] if isinstance(cache, (str, Path)) else [Path(c) for c in cache]
    paths = [c / "pfl_executor" / f"{digest}.json" for c in folders]
    for path in paths:
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(stored, dict) and stored.get("key") == key:
            return ExecutorChoice(**{**stored, "source": "cached"})
    t0 = time.perf_counter()
    got = measure(cfg, device, num_classes)
    wall = round(time.perf_counter() - t0, 3)
    if "reason" in got:
        return ExecutorChoice("loop", "ineligible", key, reason=str(got["reason"]), measured_s=wall)
    loop, vec = got["loop_images_per_s"], got["vectorised_images_per_s"]
    executor = "vectorised" if vec > MARGIN * loop else "loop"
    why = f"lock-step {vec / loop:.2f}x the loop's images/s (chosen above {MARGIN}x)"
    choice = ExecutorChoice(executor, "measured", key, loop, vec, why, wall)
    for path in paths:  # the first writable folder; none (a read-only FLB_CACHE_DIR only): measured next time
        try:
            atomic_write_json(path, choice.to_dict())
            break
        except OSError:
            continue
    return choice
