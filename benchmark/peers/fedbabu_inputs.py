"""The inputs both sides of the fedbabu peer comparison share (issue 26): this suite's client index lists and
initial weights, written in the form the released code's driver reads (``drivers/fedbabu_driver.py``).

* the partition of :mod:`benchmark.pfl.partition` for ``(scheme, s, K, seed)`` as ``{"train": [[...], ...],
  "test": [[...], ...]}`` (indices into CIFAR's official train / test order, which torchvision's loader keeps);
* the initial state of :class:`benchmark.pfl.trainer.PFLTrainer` for ``seed`` (``seed_model_init`` then
  ``build_model``), renamed to the released network's keys (:func:`to_released_keys`);
* the clients each round samples (:class:`benchmark.federated.sampling.FedBABUSampler`), so the released loop
  can be handed the same clients (the driver's ``client_schedule``).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.data.registry import load_dataset
from benchmark.errors import ConfigError
from benchmark.federated.sampling import FedBABUSampler
from benchmark.io import atomic_write_json
from benchmark.pfl.models import build_model
from benchmark.pfl.partition import ClientSplit, make_partitioner
from benchmark.pfl.streams import CLIENT_SAMPLING, KEYED_SAFE_ROUNDS, PFLStreams

#: this suite's ConvNet body index (4 modules per block: conv, BN, ReLU, max-pool) -> the released
#: ``CNNCifar.features.<block>.<module>``
_CONV_KEY = re.compile(r"^body\.(\d+)\.(.+)$")
_RELEASED_KEY = re.compile(r"^features\.(\d+)\.(\d+)\.(.+)$")


def to_released_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """This suite's ``4convnet`` state renamed to the released ``CNNCifar`` keys (``body.4b+j.x`` ->
    ``features.b.j.x``; ``linear.*`` unchanged)."""
    out = {}
    for k, v in state.items():
        m = _CONV_KEY.match(k)
        if m:
            n = int(m.group(1))
            k = f"features.{n // 4}.{n % 4}.{m.group(2)}"
        elif not k.startswith("linear."):
            raise ConfigError(f"state entry {k!r} has no released-code name", "compare the 4convnet only")
        out[k] = v.detach().cpu().clone()
    return out


def from_released_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of :func:`to_released_keys`."""
    out = {}
    for k, v in state.items():
        m = _RELEASED_KEY.match(k)
        if m:
            k = f"body.{4 * int(m.group(1)) + int(m.group(2))}.{m.group(3)}"
        out[k] = v
    return out


def our_split(dataset: str, shards: int, clients: int, seed: int, data_root: str | None, *,
              rounds: int = KEYED_SAFE_ROUNDS) -> ClientSplit:  # fmt: skip
    """This suite's shards partition of ``dataset`` for ``seed`` (the one its pfl runner trains on in a run of
    ``rounds`` rounds: the stream scheme depends on it, :mod:`benchmark.pfl.streams`)."""
    tr = load_dataset(dataset, "train", data_root)
    te = load_dataset(dataset, "test", data_root)
    return make_partitioner("shards", clients, shards_per_client=shards)(tr.labels, te.labels, PFLStreams.for_run(seed, rounds))


def our_init_state(model: str, num_classes: int, seed: int, *, rounds: int = KEYED_SAFE_ROUNDS
                   ) -> dict[str, torch.Tensor]:  # fmt: skip
    """The initial state PFLTrainer builds for ``seed`` in a run of ``rounds`` rounds (float32, CPU)."""
    PFLStreams.for_run(seed, rounds).seed_model_init()
    net = build_model(model, num_classes)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def client_schedule(clients: int, per_round: int, seed: int, rounds: int) -> list[list[int]]:
    """The clients this suite's sampler draws in each round for ``seed``."""
    streams = PFLStreams.for_run(seed, rounds)
    sampler = FedBABUSampler(clients, per_round, seed, rng_for_round=partial(streams.numpy, CLIENT_SAMPLING))
    return [[int(i) for i in sampler.sample(r)] for r in range(rounds)]


def write_inputs(
    folder: Path, *, dataset: str, model: str, num_classes: int, shards: int, clients: int, seed: int,
    data_root: str | None, rounds: int = KEYED_SAFE_ROUNDS,
) -> dict[str, Any]:  # fmt: skip
    """Write ``partition-seed<k>.json`` and ``init-seed<k>.pt`` (released keys) into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    split = our_split(dataset, shards, clients, seed, data_root, rounds=rounds)
    part = folder / f"partition-s{shards}-K{clients}-seed{seed}.json"
    atomic_write_json(part, {"train": [np.asarray(t).tolist() for t in split.train],
                             "test": [np.asarray(t).tolist() for t in split.test]})  # fmt: skip
    init = folder / f"init-{model}-seed{seed}.pt"
    torch.save(to_released_keys(our_init_state(model, num_classes, seed, rounds=rounds)), init)
    return {"partition": str(part), "init_state": str(init), "split": split}
