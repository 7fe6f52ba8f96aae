"""The pfl models' channels-last option (issue 27; ``PFLConfig.channels_last``, :func:`benchmark.pfl.models.
place_model`): a layout only. Off (the default) the checkpoint identity is the one before the option existed;
on, the model's 4-d weights are channels-last, stay so through a round's state loads and averaging, the round
trains the same model to rounding (other kernels, so not bit for bit: the option is part of the identity and
of the record), and the workflow's ``channels_last`` key reaches the trainer through ``pfl_config``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmark.errors import ConfigError
from benchmark.federated.images import NORMALISATION, DeviceImages
from benchmark.pfl.models import build_model, place_model
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.trainer import PFLConfig, PFLTrainer
from benchmark.runners.pfl import PFLTrainJob

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _images(n: int, seed: int) -> DeviceImages:
    g = torch.Generator().manual_seed(seed)
    mean, std = NORMALISATION["cifar10"]
    return DeviceImages(
        torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8),
        torch.randint(0, 10, (n,), generator=g),
        torch.tensor(mean).view(1, -1, 1, 1),
        torch.tensor(std).view(1, -1, 1, 1),
    )


def _trainer(channels_last: bool, algorithm: str = "fedavg") -> PFLTrainer:
    split = ClientSplit(tuple(np.arange(i * 20, (i + 1) * 20) for i in range(2)),
                        tuple(np.arange(i * 10, (i + 1) * 10) for i in range(2)))  # fmt: skip
    cfg = PFLConfig(dataset="cifar10", model="4convnet", algorithm=algorithm, clients=2, participation=1.0,
                    local_epochs=1, rounds=2, batch_size=10, lr=0.05, selection="last", eval_every=2,
                    dtype="float64", channels_last=channels_last)  # fmt: skip
    return PFLTrainer(cfg, _images(40, 0), _images(20, 1), split, 10, progress=False)


def _is_nhwc(t: torch.Tensor) -> bool:
    return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


def test_channels_last_off_keeps_the_identity_and_the_layout() -> None:
    cfg = PFLConfig()
    assert cfg.channels_last is False and "channels_last" not in cfg.identity()
    assert cfg.identity() == {k: v for k, v in cfg.to_dict().items() if k != "channels_last"}
    assert PFLConfig(channels_last=True).identity()["channels_last"] is True
    t = _trainer(False)
    assert not any(_is_nhwc(p) for p in t.model.parameters())
    assert "channels_last" not in t.round_plan().identity["config"]


def test_channels_last_trains_the_same_model_to_rounding_in_nhwc() -> None:
    runs = {}
    for cl in (False, True):
        t = _trainer(cl)
        convs = [p for p in t.model.parameters() if p.dim() == 4]
        assert convs and all(_is_nhwc(p) for p in convs) == cl
        res = t.run()
        assert all(_is_nhwc(p) for p in convs) == cl  # state loads copy into the layout, never replace it
        assert t.round_plan().identity["config"].get("channels_last", False) == cl
        runs[cl] = res
    a, b = runs[False].selected_state, runs[True].selected_state
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=1e-9, atol=1e-12), k
    np.testing.assert_allclose(runs[True].client_accuracy, runs[False].client_accuracy)


def test_place_model_puts_4d_weights_channels_last_only_when_asked() -> None:
    for cl in (False, True):
        m = place_model(build_model("mobilenet_cifar", 10), "cpu", torch.float64, cl)
        convs = [p for p in m.parameters() if p.dim() == 4]
        fmt = torch.channels_last if cl else torch.contiguous_format
        assert all(p.is_contiguous(memory_format=fmt) and p.dtype == torch.float64 for p in convs)
        assert any(_is_nhwc(p) for p in convs) == cl  # the 3x3 convs (1x1 ones are both layouts at once)
        assert all(p.is_contiguous() for p in m.parameters() if p.dim() != 4)


def test_channels_last_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match="channels_last"):
        PFLConfig(channels_last="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("knob", [None, False, True])
def test_the_workflow_channels_last_key_reaches_the_trainer(knob: bool | None) -> None:
    job = PFLTrainJob(dataset="cifar10", model="4convnet", bn="batch", scheme="shards", scheme_param="2",
                      clients=10, server_fraction="0", algorithm="fedavg", participation="0.1", local_epochs=1,
                      rounds=2, momentum="0.9", head_lr="1", head_init="default", prox_mu="default",
                      selection="last", seed=0)  # fmt: skip
    config = {} if knob is None else {"channels_last": knob}
    assert job.pfl_config(config).channels_last is bool(knob)


def test_a_checkpoint_resumes_only_in_the_layout_it_was_trained_in(tmp_path) -> None:
    """A harvest run with ``--config channels_last=true`` meets a parked contiguous checkpoint: one error naming the
    file and the field, nothing resumed in the other layout; without the option the same file resumes."""
    ckpt = tmp_path / "run.pt"
    _trainer(False).run(checkpoint=ckpt, checkpoint_every=1)
    assert ckpt.is_file()
    with pytest.raises(ConfigError, match=r"run\.pt belongs to another run.*config\.channels_last"):
        _trainer(True).run(checkpoint=ckpt, checkpoint_every=1)
    _trainer(False).run(checkpoint=ckpt, checkpoint_every=1)  # resumed after its last round: evaluated only
