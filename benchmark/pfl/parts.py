"""Which state entries are the head and which the body (fedbabu's reference: ``'linear' in name``); torch-free,
so that the algorithm registry (:mod:`benchmark.pfl.algorithms`) and the planner that reads it import no torch."""

from __future__ import annotations

#: The head's name in every pfl network (:mod:`benchmark.pfl.models`): the reference's final ``linear`` layer.
HEAD_KEY = "linear"


def is_head(key: str) -> bool:
    """Whether a state or parameter name belongs to the head (the reference's ``'linear' in name``)."""
    return HEAD_KEY in key
