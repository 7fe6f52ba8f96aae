"""The figure registry: every figure of the five documents, producible here or not, and why.

Modelled on timm's ``@register_model``: each catalogue module (:data:`CATALOGUE_MODULES`, one per document)
calls :func:`register_figure` at import; :func:`list_figures` imports them all and returns the entries in name
order, so the Snakemake targets (``workflow/rules/figures.smk``), ``flb figure`` and the report
(:mod:`benchmark.site`) derive from one list and the tests are parametrised over it.

A :class:`FigureSpec` either draws (``draw`` is a function of the workflow config returning a
:class:`DrawnFigure`) or is catalogued with the reason it cannot be drawn here (``draw is None``: a diagram,
a t-SNE of models we cannot train, data we do not have). Whether a drawable figure runs under a given config
(training runs need ``device=cuda`` or ``cpu_training``; some data is missing) is ``unavailable(config)``:
``None`` when it runs, else the reason, which the report shows as NOT RUN.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchmark.errors import ConfigError
from benchmark.papers import PAPER_FILES
from benchmark.registry import lookup

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

#: Catalogue modules, one per document; each registers its figures on import.
CATALOGUE_MODULES: tuple[str, ...] = (
    "benchmark.figures.legate2023",
    "benchmark.figures.fedcof",
    "benchmark.figures.bernier2024",
    "benchmark.figures.fedbabu",
)

Config = Mapping[str, Any]


@dataclass(frozen=True)
class Reading:
    """A value the paper prints or states for a figure (``source`` = ``document:line``), beside ours."""

    series: str
    x: float | str | None
    paper: float
    ours: float | None
    source: str


@dataclass(frozen=True)
class DrawnFigure:
    """What a figure's ``draw`` returns: the matplotlib figure (object API, Agg canvas), the tidy data it
    plots (columns ``series, x, y`` and optionally ``y_lo, y_hi, n_seeds``), the paper's readings beside ours,
    and notes (departures from the paper's setup, substitutes, reduced budgets, series not run)."""

    figure: Figure
    data: pd.DataFrame
    readings: tuple[Reading, ...] = ()
    notes: tuple[str, ...] = ()


def _always(config: Config) -> str | None:
    return None


def _no_inputs(config: Config) -> list[str]:
    return []


@dataclass(frozen=True)
class FigureSpec:
    """One figure of one document.

    ``name`` is the Snakemake target and the file stem under ``results/figures/``; ``label`` the figure's
    number as printed; ``line`` the 1-based line of its caption in the document's text
    (:mod:`benchmark.papers`). ``inputs(config)`` lists the files other rules make that ``draw`` reads;
    ``unavailable(config)`` says why the figure cannot run under ``config`` (``None``: it runs).
    ``draw is None`` catalogues a figure this suite cannot produce, with ``reason``."""

    name: str
    paper: str
    label: str
    line: int
    title: str
    draw: Callable[[Config], DrawnFigure] | None = None
    inputs: Callable[[Config], list[str]] = _no_inputs
    unavailable: Callable[[Config], str | None] = _always
    reason: str = ""
    copies: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.paper not in PAPER_FILES:
            raise ConfigError(
                f"figure {self.name}: unknown paper {self.paper!r}", f"use one of {sorted(PAPER_FILES)}"
            )
        if self.draw is None and not self.reason:
            raise ConfigError(f"figure {self.name} has no draw and no reason", "say why it cannot be drawn")

    @property
    def drawable(self) -> bool:
        return self.draw is not None

    def why_not(self, config: Config) -> str | None:
        """``None`` when the figure runs under ``config``, else why not (the report's NOT RUN reason)."""
        if self.draw is None:
            return self.reason
        return self.unavailable(config)


@dataclass(frozen=True)
class FigureStatus:
    """A registered figure under one config: ``reason is None`` means it runs (``snakemake NAME``)."""

    spec: FigureSpec
    reason: str | None


_REGISTRY: dict[str, FigureSpec] = {}
_loaded = False


def register_figure(spec: FigureSpec) -> FigureSpec:
    """Add ``spec`` to the registry (a name may be registered once)."""
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise ConfigError(f"figure {spec.name!r} registered twice", "give each figure its own name")
    _REGISTRY[spec.name] = spec
    return spec


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in CATALOGUE_MODULES:
            importlib.import_module(module)
        _loaded = True


def list_figures(paper: str | None = None, drawable: bool | None = None) -> list[FigureSpec]:
    """Registered figures in name order, optionally of one paper / only (un)drawable ones."""
    _load()
    specs = sorted(_REGISTRY.values(), key=lambda s: (s.paper, natural_key(s.name)))
    if paper is not None:
        specs = [s for s in specs if s.paper == paper]
    if drawable is not None:
        specs = [s for s in specs if s.drawable == drawable]
    return specs


def natural_key(name: str) -> tuple:
    """Natural order, digit runs compared as numbers: fig2 before fig10, fig3_10 after fig3_9, table2 before
    table10 (also the report's table order)."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def get_figure(name: str) -> FigureSpec:
    _load()
    return lookup(_REGISTRY, name, f"no figure {name!r}")


def figure_status(config: Config) -> list[FigureStatus]:
    """Every registered figure with the reason it does not run under ``config`` (``None``: it runs)."""
    return [FigureStatus(spec, spec.why_not(config)) for spec in list_figures()]


def runnable_figures(config: Config) -> list[str]:
    """Names of the figures that run under ``config`` (the ``figures`` target)."""
    return [st.spec.name for st in figure_status(config) if st.reason is None]
