"""pfl's random streams by purpose (benchmark/pfl/streams.py, issue 27): the keyed scheme reproduces the draws of
the recorded runs, no two passes of a keyed run share a key up to KEYED_SAFE_ROUNDS (and they do beyond, which is
why longer runs are named), the named scheme is benchmark.seeding's, and a named run's checkpoint identity says
so."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from benchmark.errors import ConfigError
from benchmark.pfl import streams as st
from benchmark.pfl.streams import KEYED_SAFE_ROUNDS, PFLStreams, as_streams, scheme_for
from benchmark.pfl.trainer import PFLConfig
from benchmark.seeding import int_seed, keyed_rng, keyed_torch_generator, numpy_rng, torch_generator

#: The integer keys each pass used before the purposes were named (written out here independently of
#: ``streams.KEYED_BATCHES``: the recorded runs were drawn with these).
LEGACY = {
    st.LOCAL: lambda r, i, e: (r, i, e),
    st.DITTO_PERSONAL: lambda r, i, e: (r, i, 0xD1, e),
    st.FINE_TUNE: lambda i, e: (0xF7, i, e),
    st.NCM_CROPS: lambda i: (0xCE, i),
    st.CENTRALISED: lambda e: (0xCE17, e),
    st.LOCAL_ONLY: lambda i, e: (0x10CA1, i, e),
}


def _same(a: torch.Generator, b: torch.Generator) -> bool:
    return torch.equal(torch.rand(8, generator=a), torch.rand(8, generator=b))


@pytest.mark.parametrize(("purpose", "keys"), [(st.LOCAL, (3, 7, 1)), (st.DITTO_PERSONAL, (3, 7, 1)),
                                               (st.FINE_TUNE, (7, 4)), (st.NCM_CROPS, (7,)), (st.CENTRALISED, (9,)),
                                               (st.LOCAL_ONLY, (7, 2))])  # fmt: skip
def test_the_keyed_scheme_draws_what_the_recorded_runs_drew(purpose, keys):
    keyed = PFLStreams(5, "keyed")
    assert _same(keyed.batches(purpose, *keys), keyed_torch_generator(5, *LEGACY[purpose](*keys)))
    assert not _same(PFLStreams(5, "named").batches(purpose, *keys), keyed_torch_generator(5, *LEGACY[purpose](*keys)))
    assert _same(PFLStreams(5, "named").batches(purpose, *keys), torch_generator(5, purpose, *keys))


def test_numpy_streams_and_model_init_in_both_schemes():
    keyed, named = PFLStreams(2, "keyed"), PFLStreams(2, "named")
    assert keyed.numpy(st.CLIENT_SAMPLING, 4).integers(1 << 30) == keyed_rng(2, 0x5A, 4).integers(1 << 30)
    assert keyed.numpy(st.PARTITION_SHARDS).integers(1 << 30) == keyed_rng(2, 0x5A4D).integers(1 << 30)
    assert keyed.numpy(st.PARTITION_DIRICHLET).integers(1 << 30) == keyed_rng(2, 0xD1).integers(1 << 30)
    assert named.numpy(st.CLIENT_SAMPLING, 4).integers(1 << 30) == numpy_rng(2, "client_sampling", 4).integers(1 << 30)
    keyed.seed_model_init()
    a = torch.rand(3)
    torch.manual_seed(2)
    assert torch.equal(a, torch.rand(3))
    named.seed_model_init()
    b = torch.rand(3)
    torch.manual_seed(int_seed(2, "model_init"))
    assert torch.equal(b, torch.rand(3)) and not torch.equal(a, b)


def _padded(seed: int, keys: tuple[int, ...]) -> tuple[int, ...]:
    """``SeedSequence([seed, *keys])``'s pool: an entropy of fewer than 4 words is padded with zeros (so
    ``[s, 206, i]`` and ``[s, 206, i, 0]`` are the same generator)."""
    words = (seed, *keys)
    return words + (0,) * (4 - len(words)) if len(words) < 4 else words


def _keyed_passes(rounds: int, clients: int, tau: int, ft_epochs: int, passes: int = 3):
    """Every pass a keyed run of ``rounds`` rounds can draw (any client sampled in any round; FedRep's body epoch
    ``tau``; Per-FedAvg's passes; Ditto's personal epochs), and its evaluations (fine-tuning, the NCM crops)."""
    for r, i in itertools.product(range(rounds), range(clients)):
        for e in range(tau + 1):
            yield (st.LOCAL, (r, i, e))
            yield (st.DITTO_PERSONAL, (r, i, e))
            for p in range(passes):
                yield (st.LOCAL, (r, i, e, p))
    for i in range(clients):
        yield (st.NCM_CROPS, (i,))
        yield (st.PER_FEDAVG_STEP, (i,))
        for e in range(ft_epochs):
            yield (st.FINE_TUNE, (i, e))


def _shared(rounds: int) -> set[tuple[int, ...]]:
    seen: dict[tuple[int, ...], tuple[str, tuple[int, ...]]] = {}
    shared = set()
    for purpose, keys in _keyed_passes(rounds, clients=3, tau=2, ft_epochs=3):
        pool = _padded(0, st.KEYED_BATCHES[purpose](keys))
        if pool in seen and seen[pool] != (purpose, keys):
            shared.add(pool)
        seen[pool] = (purpose, keys)
    return shared


def test_no_two_passes_of_a_keyed_run_share_a_key_up_to_the_safe_length_and_some_do_beyond():
    assert _shared(KEYED_SAFE_ROUNDS) == set()
    beyond = _shared(KEYED_SAFE_ROUNDS + 1)  # round 206's first epoch of client i = client i's NCM crops
    assert beyond and all(pool[1] == 0xCE for pool in beyond)
    assert _padded(0, (0xCE, 1)) in _shared(248) and _padded(0, (0xF7, 1, 0)) in _shared(248)


def test_the_scheme_follows_the_run_length_and_a_named_run_says_so_in_its_checkpoint_identity():
    assert scheme_for(32) == scheme_for(80) == scheme_for(KEYED_SAFE_ROUNDS) == "keyed"
    assert scheme_for(KEYED_SAFE_ROUNDS + 1) == scheme_for(320) == "named"
    short, long = PFLConfig(rounds=80, local_epochs=4), PFLConfig(rounds=320, local_epochs=1)
    assert short.streams == PFLStreams(0, "keyed") and "random_streams" not in short.identity()
    assert long.streams == PFLStreams(0, "named") and long.identity()["random_streams"] == "named"
    named = long.streams
    assert as_streams(3) == PFLStreams(3, "keyed") and as_streams(named) is named
    with pytest.raises(ConfigError, match="scheme 'other'"):
        PFLStreams(0, "other")
    with pytest.raises(ConfigError, match="no keyed form"):
        PFLStreams(0).batches("data_order/unknown", 1)


def test_a_long_run_samples_its_clients_from_the_named_stream():
    from functools import partial

    from benchmark.federated.sampling import FedBABUSampler

    cfg = PFLConfig(clients=100, participation=0.1, rounds=320, local_epochs=1, seed=4)
    sampler = FedBABUSampler(100, 10, 4, rng_for_round=partial(cfg.streams.numpy, st.CLIENT_SAMPLING))
    want = np.sort(numpy_rng(4, "client_sampling", 7).choice(100, 10, replace=False))
    assert np.array_equal(sampler.sample(7), want)
    assert not np.array_equal(sampler.sample(7), FedBABUSampler(100, 10, 4).sample(7))


def _seed_words(rounds: int, tau: int, seed: int) -> list[int]:
    """The 32-bit torch seeds of every pass a keyed f = 0.1 run of 100 clients draws (the clients its sampler
    picks, FedRep's extra body epoch, the NCM crops, Per-FedAvg's evaluation step, 5 fine-tuning epochs)."""
    from benchmark.federated.sampling import FedBABUSampler

    sampler = FedBABUSampler(100, 10, seed)
    keys = [st.KEYED_BATCHES[st.LOCAL]((r, int(i), e)) for r in range(rounds) for i in sampler.sample(r)
            for e in range(tau + 1)]  # fmt: skip
    keys += [st.KEYED_BATCHES[st.NCM_CROPS]((i,)) for i in range(100)]
    keys += [st.KEYED_BATCHES[st.PER_FEDAVG_STEP]((i,)) for i in range(100)]
    keys += [st.KEYED_BATCHES[st.FINE_TUNE]((i, e)) for i in range(100) for e in range(5)]
    return [int(np.random.SeedSequence([seed, *k]).generate_state(1)[0]) for k in keys]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_recorded_configurations_share_no_torch_seed_and_a_320_round_keyed_run_would(seed):
    """The keyed scheme seeds torch with 32 bits: in the recorded runs' configurations (32 rounds x tau 10, 80 x 4)
    no two passes share a seed, not even by chance; a 320-round keyed run would (hence named streams there)."""
    for rounds, tau in ((32, 10), (80, 4)):
        words = _seed_words(rounds, tau, seed)
        assert len(set(words)) == len(words)
    words = _seed_words(320, 1, seed)
    assert len(words) - len(set(words)) > 0
