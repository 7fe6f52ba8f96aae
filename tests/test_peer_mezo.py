"""flb peer mezo (issue 26): MeZO's released step methods beside this suite's MeZO step and FedMeZO with one
client, bit for bit, on a tiny model. Needs a checkout of princeton-nlp/MeZO ($FLB_MEZO_CHECKOUT, or
../peers/MeZO beside the checkout); skipped without one. The z-stream tests need none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from benchmark.peers.registry import PeerRequest, get_family
from benchmark.zo.mezo import ZOConfig, _directions, trainable_parameters

CHECKOUT = Path(os.environ.get("FLB_MEZO_CHECKOUT", Path(__file__).resolve().parents[1].parent / "peers" / "MeZO"))
needs_checkout = pytest.mark.skipif(
    not (CHECKOUT / "large_models" / "trainer.py").is_file(),
    reason=f"no princeton-nlp/MeZO checkout at {CHECKOUT} (set FLB_MEZO_CHECKOUT)",
)


def _compare(config: str, tmp_path: Path, seeds=(0,)):
    family = get_family("mezo")
    return family.run(PeerRequest("mezo", config, tuple(seeds), CHECKOUT, tmp_path / config))


def test_mezo_stream_draws_the_reference_z():
    """z_stream='mezo' gives torch.manual_seed(seed) + torch.normal per parameter (the reference), without
    touching the global generator; the default stream draws other numbers."""
    from benchmark.peers.mezo import build_case

    model, _batch, _loss = build_case({"kind": "toy", "examples": 4, "length": 3, "vocab": 20, "hidden": 4,
                                       "seed": 0})  # fmt: skip
    params = trainable_parameters(model)
    state = torch.get_rng_state()
    ours = [z for _, _, z in _directions(params, 1234, 0, "mezo")]
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(1234)
    theirs = [torch.normal(mean=0, std=1, size=p.data.size(), dtype=p.dtype) for _, p in params]
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    default = [z for _, _, z in _directions(params, 1234, 0, "flb")]
    assert not all(torch.equal(a, b) for a, b in zip(default, theirs, strict=True))
    with pytest.raises(Exception, match="z_stream"):
        ZOConfig(lr=1e-3, z_stream="other")


@pytest.mark.slow
@needs_checkout
def test_mezo_step_is_the_released_step_bit_for_bit(tmp_path):
    """5 steps of zo/mezo.py (z_stream='mezo', restore='inplace') == 5 steps of the released trainer's methods:
    every seed, loss pair, projected gradient and the weights' hash, two seeds."""
    comparison = _compare("tiny", tmp_path, seeds=(0, 1))
    outcome = comparison.outcome()
    assert outcome.status == "AGREE", outcome.lines
    assert len(outcome.checks) == 2 * (5 * 4 + 3)  # per seed: 5 x (seed, loss1, loss2, g), final, 2 hashes
    assert comparison.official_commit not in ("", "unknown")


@pytest.mark.slow
@needs_checkout
def test_fedmezo_one_client_is_the_released_centralised_steps(tmp_path):
    """FedMeZO with one client (size weighting, the released code's seeds) reconstructs their steps exactly."""
    outcome = _compare("tiny-fedmezo", tmp_path).outcome()
    assert outcome.status == "AGREE", outcome.lines
    assert any("params_sha256_52:" in line for line in outcome.lines)


@pytest.mark.slow
@needs_checkout
def test_default_stream_disagrees(tmp_path):
    """The rule can fail: the suite's default z stream draws other z, so the comparison says DISAGREE."""
    outcome = _compare("tiny-flb", tmp_path).outcome()
    assert outcome.status == "DISAGREE"
