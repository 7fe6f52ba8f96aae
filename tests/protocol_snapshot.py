"""What every protocol evaluates to, as JSON: the fixture ``tests/data/protocols_snapshot.json`` was written
from the Python definitions before they moved to ``benchmark/protocols/*.yaml`` (``python -m
tests.protocol_snapshot > tests/data/protocols_snapshot.json``); ``test_protocol_catalogue.py`` checks that the
YAML catalogue still evaluates to exactly the same values (types included: ``1`` is not ``1.0``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from benchmark.closed_form.protocols import (
    PAPER_PROTOCOL,
    PROTOCOLS,
    paper_protocol_options,
    protocol_methods,
    protocol_options,
)
from benchmark.closed_form.registry import METHODS
from benchmark.fl.protocols import get_protocol, list_protocols
from benchmark.models.backbones import list_backbones

#: Backbone names beyond the registered ones that ``default_gamma`` resolves by family.
_EXTRA_MODELS = ("MobileNetV2", "vit_b16", None)
_PAPERS = ("fedcof", "fedcof-multiround", "legate2023", "legate2023-code", "nope")


def _call(fn, *args, **kw) -> Any:
    try:
        return {"ok": fn(*args, **kw)}
    except Exception as err:  # the error a call raises is part of the behaviour
        return {"error": type(err).__name__, "message": str(err)}


def snapshot() -> dict[str, Any]:
    models = [*list_backbones(), *_EXTRA_MODELS]
    closed: dict[str, Any] = {
        "protocols": list(PROTOCOLS),
        "paper_protocol": dict(PAPER_PROTOCOL),
        "methods": {p: list(protocol_methods(p)) for p in PROTOCOLS},
        "options": {
            f"{p}|{m}|{s}": _call(protocol_options, p, m, seed=s)
            for p in PROTOCOLS
            for m in models
            if m is not None
            for s in (None, 3)
        },
        "paper_options": {
            f"{meth}|{paper}|{m}": _call(paper_protocol_options, meth, paper=paper, model_name=m)
            for meth in [*METHODS.names(), "nope"]
            for paper in _PAPERS
            for m in models
        },
        "unknown": _call(protocol_options, "nope", "squeezenet1_1"),
    }
    fl: dict[str, Any] = {"names": list_protocols(), "unknown": _call(get_protocol, "nope")}
    for name in list_protocols():
        p = get_protocol(name)
        fl[name] = {
            "record": p.to_dict(),
            "types": {f.name: type(getattr(p, f.name)).__name__ for f in dataclasses.fields(p)},
            "fl_config": {m: dataclasses.asdict(p.fl_config(m, seed=1, device="cpu")) for m in p.methods},
        }
    return {"closed_form": closed, "fl": fl}


def dumps(obj: Any) -> str:
    """Canonical JSON (sorted keys): equal strings = equal values and JSON types."""
    return json.dumps(obj, sort_keys=True, indent=1, default=repr)


if __name__ == "__main__":
    print(dumps(snapshot()))
