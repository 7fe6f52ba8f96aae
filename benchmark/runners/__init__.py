"""Runner plug-ins: one module per runner under ``benchmark/runners/``, registering itself here.

A runner fills the cells of paper tables that a spec (``paper_tables/<target>.yaml``, ``runner: <name>``)
routes to it. It says

* which protocol it would run a cell under (:meth:`Runner.runner_protocol`; a cell stating another one is
  NOT RUN with the difference),
* the typed jobs it plans for a cell (:meth:`Runner.plan`, jobs of :mod:`benchmark.jobs`, possibly its own
  job types registered with :func:`benchmark.jobs.register_job`), and
* how the outputs of those jobs become the cell's values and tidy rows (:meth:`Runner.collect`).

Adding a runner is one module here that defines a :class:`Runner` subclass and calls
:func:`register_runner`; :func:`load_runners` imports every module of this package (and any module named in
``$FLB_RUNNER_MODULES``, comma separated, e.g. a test's toy runner), so nothing else lists it
(``docs/extending.md``).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.reasons import NotRunReason

if TYPE_CHECKING:
    from benchmark.expected import ReportedCell
    from benchmark.schema import Where
    from benchmark.tables.plan import CellPlan
    from benchmark.tables.spec import RunnerRule, TableSpec

#: Runners a spec may name although no module implements them yet: their cells are NOT RUN with a reason
#: after the dataset / weights / tier checks (so the reason says what else is missing first).
DECLARED_ONLY: tuple[str, ...] = ()


@dataclass
class CellResult:
    """What a runner made of one planned cell: ``values`` (one per seed) are what the verdict judges;
    ``rows`` are its tidy rows; ``not_run`` set means NOT RUN (with no values; :attr:`reason` is its text)."""

    values: list[float] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    departures: tuple[str, ...] = ()
    not_run: NotRunReason | None = None

    @property
    def reason(self) -> str | None:
        """The NOT RUN reason's text, ``None`` for a cell that ran."""
        return self.not_run.render() if self.not_run is not None else None


class Runner:
    """Base class of runner plug-ins (see the module docstring)."""

    #: The name specs use (``runner: <name>``).
    name: ClassVar[str] = ""
    #: Whether a cell needs a dataset, weights and the tier's permission before :meth:`plan` is called (the
    #: planner checks them and fills ``plan.dataset/model/method/weights``); False for arithmetic runners.
    needs_data: ClassVar[bool] = True
    #: The parameters a spec's entry for this runner may give besides ``runner`` and ``when`` (name -> type,
    #: checked when the spec is loaded: an unknown or ill-typed one is an error naming its line). By default
    #: ``methods`` (the paper's method name -> the suite's), which the planner reads for every runner.
    params: ClassVar[Mapping[str, Any]] = {"methods": dict[str, str]}

    def check_params(self, params: Mapping[str, Any], where: Where) -> None:
        """Check the values of a spec's parameters for this runner when the spec is loaded (their keys and
        types are already checked against :attr:`params`); raise ``where.at(key).error(...)``. Nothing by
        default."""

    def runner_protocol(
        self, spec: TableSpec, cell: ReportedCell, rule: RunnerRule, dataset: Any
    ) -> dict[str, Any] | None:
        """The clients / images per class / participation this runner would use for ``cell`` (``None``:
        it takes the cell's own)."""
        return None

    def plan(self, spec: TableSpec, rule: RunnerRule, plan: CellPlan, config: Mapping[str, Any]) -> CellPlan:
        """Fill ``plan.jobs`` (and ``protocol``) and set ``status = "planned"``, or set ``not_run`` (a
        :class:`~benchmark.reasons.NotRunReason`)."""
        raise NotImplementedError

    def collect(
        self, spec: TableSpec, plan: CellPlan, labels: Mapping[str, Any], settings: Mapping[str, Any]
    ) -> CellResult:
        """The cell's values and tidy rows from the outputs of ``plan.jobs`` (``settings``: the plan's
        recorded config: tier, table_subset, data_root, ...)."""
        raise NotImplementedError

    def artefacts(self, plan: CellPlan) -> dict[str, list[str]]:
        """Extra files of a planned cell that the table step shows (e.g. training curves); none by default."""
        return {}


_RUNNERS: dict[str, Runner] = {}


def register_runner(runner: Runner) -> Runner:
    """Make ``runner`` available to specs under ``runner.name``; a second runner of that name is an error."""
    if not runner.name:
        raise ConfigError(f"runner {type(runner).__name__} has no name", "set the class attribute `name`")
    old = _RUNNERS.get(runner.name)
    if old is not None and type(old) is not type(runner):
        raise ConfigError(f"runner {runner.name!r} is registered twice", "give the new runner another name")
    _RUNNERS[runner.name] = runner
    return runner


@functools.cache
def _import_package_modules() -> None:
    """Import every runner module of this package, once a process (:func:`load_runners` is called for every cell a
    table plans: scanning the package folder each time cost seconds per Snakemake start)."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


def load_runners(extra: Sequence[str] = ()) -> dict[str, Runner]:
    """Import every runner module of this package, then those in ``extra`` and ``$FLB_RUNNER_MODULES``."""
    _import_package_modules()
    env = [m for m in os.environ.get("FLB_RUNNER_MODULES", "").split(",") if m.strip()]
    for module in (*extra, *env):
        importlib.import_module(module.strip())
    return dict(_RUNNERS)


def runner_names() -> tuple[str, ...]:
    """Every name a spec may use: the registered runners and the declared-only ones."""
    return tuple(sorted({*load_runners(), *DECLARED_ONLY}))


def get_runner(name: str) -> Runner | None:
    """The registered runner ``name``; ``None`` for a declared-only runner; unknown names are an error."""
    runners = load_runners()
    if name in runners:
        return runners[name]
    if name in DECLARED_ONLY:
        return None
    raise UnknownNameError(f"no runner {name!r}", f"use one of: {', '.join(runner_names())}")
