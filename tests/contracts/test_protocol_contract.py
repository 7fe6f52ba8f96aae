"""Every closed-form protocol names registered methods with options their fits accept (over PROTOCOLS)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.closed_form.protocols import PROTOCOLS, protocol_methods, protocol_options
from benchmark.closed_form.registry import METHODS
from benchmark.models.backbones import BACKBONES


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_protocol_methods_are_registered_and_accept_their_options(protocol: str) -> None:
    rng = np.random.default_rng(0)
    y = np.arange(40) % 3
    x = (rng.normal(size=(3, 4))[y] + rng.normal(size=(40, 4))).astype(np.float32)
    clients = [np.arange(i, 40, 4) for i in range(4)]
    for backbone in BACKBONES.names():
        opts = protocol_options(protocol, backbone, seed=0)
        assert set(opts) == set(protocol_methods(protocol))
        for method in protocol_methods(protocol):
            assert METHODS.get(method).fit(x, y, 3, clients, **opts[method]).head.W.shape == (3, 4)
