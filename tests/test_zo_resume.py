"""Every zo algorithm on the round loop resumes from the engine's checkpoint bit-identically (issue 25): a
DistMeZO or SLoRA run killed after round k and started again from its checkpoint ends with the same weights
and the same history as a run that was never stopped (FedMeZO's log replay: ``test_zo_fedmezo.py``)."""

from __future__ import annotations

import pytest
import torch
from test_zo_fedmezo import ZO, split, tiny_data
from test_zo_fedmezo import tiny_model as tiny_bert
from test_zo_slora import CLIENTS, TEST, config, tiny_model

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec
from benchmark.zo.distmezo import DistMeZOConfig, run_distmezo
from benchmark.zo.fedmezo import FedMeZOConfig
from benchmark.zo.slora import SLoRAEvent, run_slora

pytest.importorskip("peft")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Killed(Exception):
    """The job is killed once round ``k``'s checkpoint is on disk."""


def kill_after(k: int):
    def on_round_end(done: int) -> None:
        if done == k:
            raise Killed

    return on_round_end


@pytest.mark.parametrize("k", [1, 3])
def test_a_killed_distmezo_run_resumes_bit_identically(tmp_path, k) -> None:
    clients, test = split(tiny_data(24, 6), [8, 0, 16]), tiny_data(10, 10)
    dist = DistMeZOConfig(FedMeZOConfig(ZO, rounds=4, seed=2, eval_every=2), local_steps=2)
    full = run_distmezo(tiny_bert(), clients, dist, test)
    ckpt = CheckpointSpec(tmp_path / "run.ckpt", every=1)
    with pytest.raises(Killed):
        run_distmezo(tiny_bert(), clients, dist, test, checkpoint=ckpt, on_round_end=kill_after(k))
    resumed = run_distmezo(tiny_bert(), clients, dist, test, checkpoint=ckpt)
    assert resumed.params_sha256 == full.params_sha256
    assert resumed.rounds == full.rounds and resumed.traffic == full.traffic
    assert resumed.initial_accuracy == full.initial_accuracy is not None
    # another local step count is another run: its checkpoint is refused, not resumed
    other = DistMeZOConfig(dist.fed, local_steps=3)
    with pytest.raises(ConfigError, match="local_steps"):
        run_distmezo(tiny_bert(), clients, other, test, checkpoint=ckpt)


def slora(checkpoint: CheckpointSpec | None = None):
    """A SLoRA run (4 rounds, the switch to LoRA opening round 2) and its global model after the last round."""
    last: dict[str, torch.Tensor] = {}

    def keep(event: SLoRAEvent) -> None:
        if event.kind == "round":
            last.clear()
            last.update({n: v.detach().clone() for n, v in event.model.state_dict().items()})

    res = run_slora(tiny_model(), CLIENTS, TEST, config(), progress=keep, checkpoint=checkpoint)
    return res, last


@pytest.mark.parametrize("k", [1, 2, 3])  # in stage 1, at the switch, in stage 2 (LoRA in place)
def test_a_killed_slora_run_resumes_bit_identically(tmp_path, k) -> None:
    full, weights = slora()
    ckpt = CheckpointSpec(tmp_path / "run.ckpt", every=1)
    with pytest.raises(Killed):
        run_slora(tiny_model(), CLIENTS, TEST, config(), checkpoint=ckpt, progress=kill_event(k))
    resumed, again = slora(ckpt)
    assert resumed == full  # history (losses, accuracies, bytes), totals, Eq. 7, stage-2 size
    assert again.keys() == weights.keys()
    for name, value in weights.items():
        assert torch.equal(again[name], value), name


def kill_event(k: int):
    """SLoRA's ``progress`` hook killing the run after round ``k`` (its checkpoint is on disk by then)."""

    def on_event(event: SLoRAEvent) -> None:
        if event.kind == "round" and event.round + 1 == k:
            raise Killed

    return on_event
