"""Both FL protocol catalogues (cached-feature LP and full-model training) share one federation
(:mod:`benchmark.fl.protocol_base`, issue 25): every protocol of either file turns its federation into the
engine's configuration by the same arithmetic, written out here independently of the code."""

from __future__ import annotations

import math

import pytest

from benchmark.errors import UnknownNameError
from benchmark.fl.protocol_base import FederatedProtocol
from benchmark.fl.protocols import get_protocol, list_protocols
from benchmark.fl.train_protocols import get_train_protocol, list_train_protocols

CASES = [("lp", n) for n in list_protocols()] + [("train", n) for n in list_train_protocols()]


def _configs(kind: str, name: str):
    """(protocol, [(method, nominal rounds, FLConfig), ...]) for every method (first algorithm, its first lrs)."""
    if kind == "lp":
        p = get_protocol(name)
        return p, [
            (m, p.rounds if s.rounds is None else s.rounds, p.fl_config(m, seed=0, device="cpu"))
            for m, s in p.methods.items()
        ]
    p = get_train_protocol(name)
    alg = next(iter(p.algorithms))
    c_lr, s_lr = p.lr_grid(alg)[0]
    return p, [
        (m, s.rounds, p.fl_config(m, alg, seed=0, client_lr=c_lr, server_lr=s_lr, device="cpu"))
        for m, s in p.methods.items()
    ]


@pytest.mark.parametrize(("kind", "name"), CASES, ids=[f"{k}:{n}" for k, n in CASES])
def test_every_protocol_runs_its_federation_by_the_same_arithmetic(kind: str, name: str) -> None:
    """m = max(1, round(participation * K)); an FLSim epoch is ceil(K / m) rounds; evaluation once an epoch."""
    proto, configs = _configs(kind, name)
    assert isinstance(proto, FederatedProtocol)
    m = max(1, min(proto.num_clients, round(proto.participation * proto.num_clients)))
    epoch = math.ceil(proto.num_clients / m)
    for method, nominal, cfg in configs:
        want_rounds = nominal * epoch if proto.rounds_unit == "flsim_epochs" else nominal
        want_eval = epoch if proto.eval_every == "flsim_epoch" else proto.eval_every
        assert (cfg.rounds, cfg.eval_every) == (want_rounds, want_eval), method
        assert (cfg.num_clients, cfg.participation, cfg.local_epochs, cfg.batch_size) == (
            proto.num_clients,
            proto.participation,
            proto.local_epochs,
            proto.batch_size,
        ), method
        assert (cfg.client_shuffle, cfg.client_momentum, cfg.selection) == (
            proto.client_shuffle,
            proto.client_momentum,
            proto.selection,
        ), method
    with pytest.raises(UnknownNameError, match=f"protocol {name!r} has no method 'nope'"):
        proto.method("nope")
