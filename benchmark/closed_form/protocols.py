"""Closed-form run protocols: which methods one run computes, and with which options.

A paper table is reproduced under that paper's protocol, the options its reference code used
(:func:`~benchmark.closed_form.registry.paper_protocol_options`, papers-code.md §1.4, §2.4, §6). The protocol
is part of the run file's path (``results/runs/closed_form/.../<protocol>/seed<k>.csv``), so runs of two
papers on the same features and partition never share a file, and it is written in every tidy row.

================  =====================================================================================
protocol          methods and options
================  =====================================================================================
``fedcof``        fedcof Tables 2, 3, 6 (path A of the fedcof code): every federated server in float32 with
                  ``pinv`` (``solver="pinv32"``); FedNCM without bias; Fed3R ``lam = 0.01``; FedCOF and the
                  oracle with the code's per-backbone gamma (SqueezeNet / ViT 1.0, MobileNetV2 0.1), no extra
                  ridge. Centralised heads for Table 2: ridge (Eq. 10) and the within-class Gram (Eq. 11),
                  both with the table's ``lambda = 0.01``, no shrinkage (Table 2 states no gamma) and the
                  same float32 ``pinv`` as the federated servers.
``legate2023``    legate2023 / its workshop version / bernier2024 chapter 3: FedNCM as the paper's text
                  states it, bias 0 (§3.2), float32.
``legate2023-code``  FedNCM as legate2023's reference code runs it: the random ``nn.Linear`` bias init kept
                  (U(+-1/sqrt(d)), drawn from the run's seed). Explicit option, not used by any table spec.
``suite``         every registered closed-form method with the suite's defaults (float64 solves; FedCOF's
                  gamma by backbone): free-form experiments such as ``smoke``.
================  =====================================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmark.closed_form.registry import METHODS, suite_methods
from benchmark.errors import UnknownNameError

#: Every closed-form method of the suite, in the order runs compute them (derived from the registry).
ALL_METHODS: tuple[str, ...] = suite_methods()
_GAMMA_METHODS = tuple(m for m in ALL_METHODS if METHODS.get(m).suite_gamma)
#: The federated methods of fedcof's tables (protocol data, not a copy of the registry: a newly registered
#: method is in ``suite`` only).
_FEDCOF_FEDERATED = ("fedncm", "fed3r_fedcof", "fed3r_official", "fedcof", "fedcof_oracle")

PROTOCOLS: dict[str, tuple[str, ...]] = {
    "fedcof": (*_FEDCOF_FEDERATED, "centralised_ncm", "centralised_ridge", "centralised_within_class"),
    "legate2023": ("fedncm", "centralised_ncm"),
    "legate2023-code": ("fedncm",),
    "suite": ALL_METHODS,
}

#: The protocol a paper's tables run under when a spec does not name one.
PAPER_PROTOCOL: dict[str, str] = {
    "fedcof": "fedcof",
    "legate2023": "legate2023",
    "legate2023ws": "legate2023",
    "bernier2024": "legate2023",
}


def check_protocol(protocol: str) -> str:
    """``protocol`` if it is known; :class:`UnknownNameError` listing the known ones otherwise."""
    if protocol not in PROTOCOLS:
        raise UnknownNameError(
            f"unknown closed-form protocol {protocol!r}", f"use one of: {', '.join(PROTOCOLS)}"
        )
    return protocol


def protocol_methods(protocol: str) -> tuple[str, ...]:
    """The methods a run under ``protocol`` computes."""
    return PROTOCOLS[check_protocol(protocol)]


def protocol_options(protocol: str, model_name: str, *, seed: int | None = None) -> dict[str, dict[str, Any]]:
    """Per-method options of ``protocol`` for backbone ``model_name`` (``seed``: the run's seed, used by
    ``legate2023-code``'s random bias)."""
    from benchmark.closed_form.fedcof import default_gamma
    from benchmark.closed_form.registry import paper_protocol_options

    check_protocol(protocol)
    if protocol == "suite":
        return {m: ({"gamma": default_gamma(model_name)} if m in _GAMMA_METHODS else {}) for m in ALL_METHODS}
    if protocol == "fedcof":
        opts = {
            m: paper_protocol_options(m, paper="fedcof", model_name=model_name) for m in _FEDCOF_FEDERATED
        }
        opts.update(
            centralised_ncm={},
            centralised_ridge={"lam": 0.01, "solver": "pinv32"},
            centralised_within_class={"gamma": 0.0, "ridge": 0.01, "solver": "pinv32"},
        )
        return opts
    fedncm = paper_protocol_options("fedncm", paper=protocol)
    if protocol == "legate2023-code":
        return {"fedncm": {**fedncm, "seed": 0 if seed is None else int(seed)}}
    return {"fedncm": fedncm, "centralised_ncm": {}}


def merge_options(
    base: Mapping[str, Mapping[str, Any]], override: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """``base`` with the per-method ``override`` options laid over it (``--options`` of the CLI)."""
    out = {m: dict(o) for m, o in base.items()}
    for method, opts in (override or {}).items():
        out.setdefault(method, {}).update(opts)
    return out
