"""Which frozen flips a build's runs see (``flip_stream``, issue 26), resolved from the config without importing
torch (the planner records the resolved value in every plan's settings)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def flip_stream_of(config: Mapping[str, Any]) -> str:
    """The config's ``flip_stream``. ``auto`` (the default): ``run_seed`` (the frozen flips keyed by the run seed,
    as each run of the papers' unseeded code draws its own), except in the CI tier, where it is ``fixed`` (one
    stream for every seed, the suite before issue 26): per-seed flips need a second feature pass of every 224 px
    training split (both orientations), 8-16 more minutes of CI than its budget has; the CI tier's seed spreads
    of FedNCM-like methods are then 0.00 (docs/protocols.md says so)."""
    value = str(config.get("flip_stream") or "auto")
    if value == "auto":
        return "fixed" if str(config.get("tier") or "full") == "ci" else "run_seed"
    return value
