"""``key=value`` command-line parameters (``--param``, ``--set``, ``--label``, ``--config``) as typed values.

One parser for every command that takes them (``flb partition``, ``flb table``, ``flb figure``, ``flb runs``,
``flb harvest``, ``flb tune-lr``); it lives at the bottom of the package so that the steps
(:mod:`benchmark.pipeline`) and the workflow helpers (:mod:`benchmark.workflow`) share it without importing
each other (issue 25).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from benchmark.errors import ConfigError


def parse_kv(items: Sequence[str]) -> dict[str, Any]:
    """``["alpha=0.1", "clients=100"]`` -> ``{"alpha": 0.1, "clients": 100}`` (JSON values where they parse)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"expected key=value, got {item!r}", "write parameters as key=value")
        k, v = item.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out
