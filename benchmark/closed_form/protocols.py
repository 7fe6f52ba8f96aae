"""Closed-form run protocols: which methods one run computes, and with which options.

The values live in the catalogue ``benchmark/protocols/closed_form.yaml`` (per protocol its ``source`` and
``note``; per paper key the reference-code options of :func:`paper_protocol_options`),
loaded and validated on import (:func:`load_closed_form_catalogue`).

A paper table is reproduced under that paper's protocol, the options its reference code used
(:func:`paper_protocol_options`, papers-code.md §1.4, §2.4, §6). The protocol
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
                  (``bias: torch_default_init``, U(+-1/sqrt(d)), drawn from the run seed's ``fedncm_bias``
                  stream). Explicit option: a table uses it under ``fedncm_bias: torch_default_init``.
``suite``         every registered closed-form method with the suite's defaults (float64 solves; FedCOF's
                  gamma by backbone): free-form experiments such as ``smoke``.
================  =====================================================================================
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.closed_form.fedcof import default_gamma
from benchmark.closed_form.registry import METHODS, get_method, run_method, suite_methods
from benchmark.errors import ConfigError, UnknownNameError
from benchmark.protocols import Where, check_mapping, check_name, load_catalogue
from benchmark.seeding import int_seed

#: Every closed-form method of the suite, in the order runs compute them (derived from the registry).
ALL_METHODS: tuple[str, ...] = suite_methods()
#: Option values filled in at run time: fedcof's gamma of the run's backbone, the run's seed (0 if none).
BACKBONE_GAMMA = "@backbone_gamma"
RUN_SEED = "@run_seed"
#: The run seed's ``fedncm_bias`` stream (:func:`benchmark.seeding.int_seed`): FedNCM's random bias under
#: ``bias: torch_default_init``, the same draw as the FedNCM stage of FedNCM+FT (:func:`benchmark.fl.jobs.closed_form_init`).
FEDNCM_BIAS_SEED = "@fedncm_bias_seed"
_RUNTIME = (BACKBONE_GAMMA, RUN_SEED, FEDNCM_BIAS_SEED)


@dataclass(frozen=True)
class MethodEntry:
    """One method of a protocol: the options of paper key ``paper_options`` (if any), ``options`` over them."""

    paper_options: str | None
    options: Mapping[str, Any]


@dataclass(frozen=True)
class ClosedFormCatalogue:
    """``closed_form.yaml``, validated."""

    paper_options: Mapping[str, Mapping[str, Mapping[str, Any]]]
    """paper key -> method -> options (may hold the run-time values :data:`BACKBONE_GAMMA` / :data:`RUN_SEED`)."""
    protocols: Mapping[str, Mapping[str, MethodEntry]]
    """protocol -> method -> entry, in run order."""
    paper_protocol: Mapping[str, str]
    sources: Mapping[str, str]
    """protocol or paper key -> its ``source`` (and ``note``) citation."""


def option_names(method: str) -> tuple[str, ...] | None:
    """The options closed-form method ``method`` takes: the keyword parameters of its ``plan`` (federated
    methods, with those of :func:`~benchmark.closed_form.registry.run_method` for multi-round runs), of its
    ``head`` (centralised methods) or of its ``fit``; ``None`` when its function takes any keyword."""
    info = METHODS.get(method)
    own = inspect.signature(info.plan or info.head or info.fit).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in own):
        return None
    runner = inspect.signature(run_method).parameters.values() if info.federated else ()
    names = {p.name for p in (*own, *runner) if p.kind is inspect.Parameter.KEYWORD_ONLY}
    return tuple(sorted(names - {"rounds", "on_round"}))


def _options(raw: Any, where: Where, method: str) -> dict[str, Any]:
    opts = check_mapping(raw, where, allowed=option_names(method))
    for key, value in opts.items():
        if value is not None and not isinstance(value, str | int | float | bool):
            raise where.at(key).error(f"wrong type: expected a number, string or boolean, got {value!r}")
        if isinstance(value, str) and value.startswith("@") and value not in _RUNTIME:
            raise where.at(key).error(f"unknown run-time value {value!r}", f"use one of: {', '.join(_RUNTIME)}")
    return dict(opts)


def _source(data: Mapping[str, Any], where: Where) -> str:
    for key in ("source", "note"):
        if key in data and not isinstance(data[key], str):
            raise where.at(key).error(f"wrong type: expected str, got {type(data[key]).__name__}")
    return " ".join(data[k] for k in ("source", "note") if k in data)


def load_closed_form_catalogue(folder: Path | None = None) -> ClosedFormCatalogue:
    """``closed_form.yaml`` (in ``folder``, default :mod:`benchmark.protocols`) validated: unknown fields, wrong
    types, unregistered methods and unknown paper keys raise :class:`ConfigError` naming file, protocol, field."""
    src = load_catalogue("closed_form", folder)
    top = check_mapping(
        src.data,
        Where.of(src),
        allowed={"paper_options": "paper key -> options", "protocols": "name -> protocol",
                 "paper_protocol": "paper -> protocol"},
        required=("paper_options", "protocols", "paper_protocol"),
    )  # fmt: skip
    sources: dict[str, str] = {}
    papers: dict[str, dict[str, dict[str, Any]]] = {}
    for paper, raw in check_mapping(top["paper_options"], Where.of(src, "paper_options")).items():
        where = Where(src.path, paper, (), src, ("paper_options", paper), shown=("paper_options",))
        entry = check_mapping(raw, where, allowed={"source": "citation", "methods": "method -> options"},
                              required=("source", "methods"))  # fmt: skip
        sources[paper] = _source(entry, where)
        papers[paper] = {
            check_name(m, where.at("methods", m), lambda: METHODS, "closed-form method"): _options(
                o, where.at("methods", m), m
            )
            for m, o in check_mapping(entry["methods"], where.at("methods")).items()
        }
    protocols: dict[str, dict[str, MethodEntry]] = {}
    for name, raw in check_mapping(top["protocols"], Where.of(src, "protocols")).items():
        where = Where.of(src, "protocols", name, protocol=name)
        entry = check_mapping(
            raw, where, allowed={"source": "citation", "note": "text", "methods": "'all' or method -> entry"},
            required=("source", "methods"),
        )  # fmt: skip
        sources[name] = _source(entry, where)
        if entry["methods"] == "all":
            protocols[name] = {
                m: MethodEntry(None, {"gamma": BACKBONE_GAMMA} if METHODS.get(m).suite_gamma else {})
                for m in ALL_METHODS
            }
            continue
        methods: dict[str, MethodEntry] = {}
        for m, spec in check_mapping(entry["methods"], where.at("methods")).items():
            mw = where.at("methods", m)
            check_name(m, mw, lambda: METHODS, "closed-form method")
            spec = check_mapping(
                spec, mw, allowed={"paper_options": "paper key", "options": "option -> value"}
            )
            key = spec.get("paper_options")
            if key is not None:
                check_name(key, mw.at("paper_options"), lambda: papers, "paper key")
                if m not in papers[key]:
                    raise mw.at("paper_options").error(
                        f"paper key {key!r} has no options for {m!r}", f"use one of: {', '.join(papers[key])}"
                    )
            methods[m] = MethodEntry(key, _options(spec.get("options", {}), mw.at("options"), m))
        if not methods:
            raise where.at("methods").error("no method", "list at least one method or write 'all'")
        protocols[name] = methods
    paper_protocol = {
        paper: check_name(p, Where.of(src, "paper_protocol", paper), lambda: protocols, "protocol")
        for paper, p in check_mapping(top["paper_protocol"], Where.of(src, "paper_protocol")).items()
    }
    return ClosedFormCatalogue(papers, protocols, paper_protocol, sources)


CATALOGUE = load_closed_form_catalogue()

PROTOCOLS: dict[str, tuple[str, ...]] = {name: tuple(m) for name, m in CATALOGUE.protocols.items()}

#: The protocol a paper's tables run under when a spec does not name one.
PAPER_PROTOCOL: dict[str, str] = dict(CATALOGUE.paper_protocol)


def resolve_options(
    options: Mapping[str, Any], *, model_name: str | None, seed: int | None, what: str
) -> dict[str, Any]:
    """``options`` with the run-time values filled in (:data:`BACKBONE_GAMMA` needs ``model_name``)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value == BACKBONE_GAMMA:
            if model_name is None:
                raise ConfigError(f"{what} needs model_name", "pass the backbone name")
            value = default_gamma(model_name)
        elif value == RUN_SEED:
            value = 0 if seed is None else int(seed)
        elif value == FEDNCM_BIAS_SEED:
            value = int_seed(0 if seed is None else int(seed), "fedncm_bias")
        out[key] = value
    return out


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
    out: dict[str, dict[str, Any]] = {}
    for method, entry in CATALOGUE.protocols[check_protocol(protocol)].items():
        base = (
            paper_protocol_options(method, paper=entry.paper_options, model_name=model_name)
            if entry.paper_options is not None
            else {}
        )
        extra = resolve_options(entry.options, model_name=model_name, seed=seed, what=f"protocol {protocol!r}")
        out[method] = {**base, **extra}
    return out


def merge_options(
    base: Mapping[str, Mapping[str, Any]], override: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """``base`` with the per-method ``override`` options laid over it (``--options`` of the CLI)."""
    out = {m: dict(o) for m, o in base.items()}
    for method, opts in (override or {}).items():
        out.setdefault(method, {}).update(opts)
    return out


def paper_protocol_options(
    method: str, *, paper: str = "fedcof", model_name: str | None = None
) -> dict[str, Any]:
    """Options reproducing the reference code behind a paper's tables (papers-code.md 1.4, 2.4, 3, 6).

    The values are the ``paper_options`` of the catalogue ``benchmark/protocols/closed_form.yaml``:

    * ``paper="fedcof"`` (fedcof Table 3, path A of its code): every server in float32 with ``pinv``
      (``solver="pinv32"``); FedNCM without bias; Fed3R ``lam=0.01``; FedCOF/oracle ``gamma`` by backbone
      (:func:`~benchmark.closed_form.fedcof.default_gamma`, needs ``model_name``), no extra ridge
      (the paper text's ``lambda = 0.01`` is not in the code), K_c = 1 handled as the code does.
      Official Fed3R: float32 ``solve`` (``solver="solve32"``).
    * ``paper="fedcof-multiround"`` (Fig. 3-4, path B): as above, but FedCOF adds ``gamma I`` once more
      to the estimated Gram (``ridge = gamma``) and a class seen on one client only gets the noisy-copy
      covariance (``single_client="path_b_noise"``).
    * ``paper="legate2023"``: FedNCM as the paper's text states it (§3.2: "the bias term to 0"), float32.
    * ``paper="legate2023-code"``: FedNCM as the legate2023 reference code runs it, with the random
      ``nn.Linear`` bias init kept (``bias="torch_default_init"``, papers-code.md 1.4), float32. An explicit
      option (config ``fedncm_bias``), never the default of the legate2023 tables.
    """
    get_method(method)
    papers = list(CATALOGUE.paper_options)
    if paper not in CATALOGUE.paper_options:
        raise UnknownNameError(
            f"unknown paper protocol {paper!r}", f"use {', '.join(papers[:-1])} or {papers[-1]}"
        )
    table = CATALOGUE.paper_options[paper]
    if method not in table:
        raise ConfigError(
            f"paper protocol {paper!r} has no closed-form method {method!r}", f"use one of: {', '.join(table)}"
        )
    what = f"paper_protocol_options({method!r})"
    return resolve_options(table[method], model_name=model_name, seed=None, what=what)
