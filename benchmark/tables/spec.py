"""Paper-table specs (``paper_tables/<target>.yaml``): which runner fills which reported cell.

A spec names the ``expected/`` file it checks and a list of ``runners``; each runner has a ``when``
filter on the cell's (merged) protocol and metric, and the parameters it needs::

    target: fedcof_table3
    expected: fedcof/table3.yaml
    seeds: [0, 1, 2, 3, 4]
    runners:
      - when: {metric: accuracy}
        runner: closed_form
        methods: {fedncm: fedncm, fed3r: fed3r_fedcof, fedcof: fedcof, fedcof_oracle: fedcof_oracle}
        partition: {scheme: dirichlet, alpha: 0.1, num_clients: 100}
        preprocess: {default: fedcof_folder, cifar100: fedcof_cifar}
      - when: {metric: comm_mb}
        runner: cost

A runner entry may list its own ``seeds``: the cells it takes run those seeds instead of the spec's. Seeds that
belong to a training unit rather than to cells (a second seed for a number one seed cannot decide, which several
tables print) go in the paper's unit-seeds file, named by ``unit_seeds`` (:mod:`benchmark.tables.unit_seeds`), so
that every table judges that number on the same seeds; a cell given seeds both ways is an error at plan time.

A cell that no runner takes is ``not_run`` with the spec's ``not_run_reason`` (or a default). The table
layout is the expected file's own row and column labels, so nothing about the layout is repeated here.

The schema is strict (:func:`load_spec`, at plan time): an unknown key at the top level, in a runner entry
(``runner``, ``when`` and the runner's own :attr:`~benchmark.runners.Runner.params`), in ``when`` (the
cell-protocol keys of :data:`benchmark.expected.PROTOCOL_KEYS` and ``metric``, ``unit``, ``id``) or in
``aliases`` is one error naming the file, the line and the closest valid key; seeds are distinct
non-negative integers. A misspelled key therefore never turns every cell into a silent NOT RUN.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError, UnknownNameError
from benchmark.expected import METRICS, PROTOCOL_KEYS
from benchmark.reasons import NotRunReason, ReasonKind
from benchmark.runners import Runner, load_runners, runner_names
from benchmark.schema import Where, check_mapping, check_seeds, coerce, read_yaml
from benchmark.suggest import did_you_mean
from benchmark.tables.unit_seeds import UNIT_SEEDS_DIR, UnitSeeds, load_unit_seeds

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "paper_tables"
EXPECTED_DIR = ROOT / "expected"


@dataclass(frozen=True)
class RunnerRule:
    """One runner and the cells it takes."""

    runner: str
    when: Mapping[str, Any]
    params: Mapping[str, Any]
    seeds: tuple[int, ...] | None = None  # the cells it takes run these seeds (None: the spec's)

    def matches(self, cell: Mapping[str, Any]) -> bool:
        for key, want in self.when.items():
            have = cell.get(key)
            if isinstance(want, list):
                if have not in want:
                    return False
            elif have != want:
                return False
        return True


#: The reason of a cell no runner takes, when the spec states none.
NO_RUNNER = NotRunReason(ReasonKind.NO_RUNNER, "a runner for the cell", "no runner in this suite fills this cell yet")


@dataclass(frozen=True)
class TableSpec:
    """A paper table target."""

    target: str
    paper: str
    table: str
    expected: Path
    seeds: tuple[int, ...]
    runners: tuple[RunnerRule, ...]
    aliases: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    not_run_reason: NotRunReason = NO_RUNNER
    notes: tuple[str, ...] = ()
    #: Seeds per training unit, shared by the paper's tables (:mod:`benchmark.tables.unit_seeds`); ``None``: none.
    unit_seeds: UnitSeeds | None = None

    @property
    def expected_paper(self) -> str:
        return self.expected.parent.name

    @property
    def expected_table(self) -> str:
        return self.expected.stem.removeprefix("table")

    def rule_for(self, cell: Mapping[str, Any]) -> RunnerRule | None:
        return next((r for r in self.runners if r.matches(cell)), None)

    def with_seeds(self, seeds: tuple[int, ...]) -> TableSpec:
        """This spec with ``seeds`` for every cell (the spec's, every runner entry's and the unit seeds replaced):
        what ``flb harvest --seeds`` plans, to record more seeds of a cell before its spec asks for them."""
        rules = tuple(replace(r, seeds=None) for r in self.runners)
        return replace(self, seeds=tuple(seeds), runners=rules, unit_seeds=None)


#: Top-level keys of a spec (name -> what it is); the first five are required.
SPEC_KEYS: dict[str, str] = {
    "target": "the file name without .yaml",
    "paper": "paper id",
    "table": "table number as printed",
    "expected": "expected/ file, relative to expected/",
    "runners": "list of {runner, when, <runner params>}",
    "seeds": "distinct non-negative integers (default [0])",
    "not_run_reason": "reason of the cells no runner takes: text (kind 'no runner'), or {kind, missing, detail}",
    "aliases": "dataset / model: the paper's name -> the suite's",
    "notes": "list of notes printed under the table",
    "unit_seeds": f"a file of {UNIT_SEEDS_DIR}/ giving the seeds of training units (benchmark/tables/unit_seeds.py)",
}
REQUIRED = ("target", "paper", "table", "expected", "runners")
#: Keys a ``when`` filter may test: the cell's protocol keys and its metric, unit and id.
WHEN_EXTRA = ("metric", "unit", "id")
#: What ``aliases`` may rename (the planner's lookups).
ALIAS_KINDS = ("dataset", "model")
_SCALAR = str | int | float | bool | None


def list_specs(folder: Path = SPEC_DIR) -> list[str]:
    """Target names of all specs."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def when_keys() -> frozenset[str]:
    """The keys a ``when`` filter may test."""
    return PROTOCOL_KEYS | frozenset(WHEN_EXTRA)


def load_spec(target: str, folder: Path = SPEC_DIR) -> TableSpec:
    """Read ``paper_tables/<target>.yaml`` and check it against the strict schema (module docstring); every
    problem is one :class:`ConfigError` naming the file, the line and the field."""
    path = folder / f"{target}.yaml"
    if not path.is_file():
        raise UnknownNameError(f"no table spec {path}", f"use one of: {', '.join(list_specs(folder))}")
    src = read_yaml(path)
    top = Where.of(src)
    raw = check_mapping(src.data, top, allowed=SPEC_KEYS, required=REQUIRED)
    for key in ("target", "paper", "expected"):
        if key in raw:
            _text(raw[key], top.at(key))
    coerce(raw["table"], str | int, top.at("table"))
    if raw["target"] != target:
        raise top.at("target").error(f"is {raw['target']!r}", f"it must equal the file name {target!r}")
    seeds = check_seeds(raw.get("seeds", [0]), top.at("seeds"))
    rules = _rules(raw["runners"], top.at("runners"))
    aliases = check_mapping(raw.get("aliases", {}), top.at("aliases"), allowed=ALIAS_KINDS)
    for kind, names in aliases.items():
        coerce(names, dict[str, str], top.at("aliases", kind))
    notes = coerce(raw.get("notes", []), list[str], top.at("notes"))
    units = load_unit_seeds(raw["unit_seeds"], top.at("unit_seeds"), folder) if "unit_seeds" in raw else None
    expected = EXPECTED_DIR / raw["expected"]
    if not expected.is_file():
        raise top.at("expected").error(f"expected file {expected} does not exist", "fix the 'expected' field")
    return TableSpec(
        target=target,
        paper=str(raw["paper"]),
        table=str(raw["table"]),
        expected=expected,
        seeds=seeds,
        runners=tuple(rules),
        aliases=aliases,
        not_run_reason=_not_run_reason(raw["not_run_reason"], top.at("not_run_reason"))
        if "not_run_reason" in raw
        else NO_RUNNER,
        notes=tuple(notes),
        unit_seeds=units,
    )


#: The fields of a spec's ``not_run_reason`` mapping (:class:`benchmark.reasons.NotRunReason`).
_REASON_KEYS = {"kind": "a NOT RUN kind (benchmark/reasons.py)", "missing": "the item that is missing",
                "detail": "the reason's text", "fix": "how to fill the cells", "command": "the command in fix"}  # fmt: skip


def _not_run_reason(value: Any, where: Where) -> NotRunReason:
    """A spec's ``not_run_reason``: a text is a reason of kind ``no runner`` (the spec routes no runner to the
    cell); a mapping gives the kind, the missing item and the text (issue 25: reasons are typed)."""
    if isinstance(value, str):
        return NotRunReason(ReasonKind.NO_RUNNER, "a runner for the cell", _text(value, where))
    raw = check_mapping(value, where, allowed=_REASON_KEYS, required=("kind", "missing", "detail"))
    for key, text in raw.items():
        _text(text, where.at(key))
    try:
        return NotRunReason.from_dict(raw)
    except BenchmarkError as err:
        raise where.error(err.what, err.fix) from None


def _text(value: Any, where: Where) -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"expected a non-empty string, got {value!r}")
    return value


def _rules(value: Any, where: Where) -> list[RunnerRule]:
    """The ``runners`` list: each entry names a known runner, a ``when`` filter on known keys, and only the
    parameters that runner declares (with their types)."""
    if not isinstance(value, list):
        raise where.error(f"expected a list of runner entries, got {type(value).__name__}")
    names = runner_names()  # the runner plug-ins (benchmark/runners/) and the declared-only names
    plugins = load_runners()
    valid_when = when_keys()
    rules = []
    for i, entry in enumerate(value):
        at = where.at(i)
        if not isinstance(entry, dict):
            raise at.error(f"expected a mapping with 'runner' and 'when', got {type(entry).__name__}")
        name = entry.get("runner")
        if not isinstance(name, str) or name not in names:
            near = did_you_mean(str(name), names)
            raise at.at("runner").say(
                f"runners[{i}].runner is {name!r}", f"{near + ' ' if near else ''}use one of: {', '.join(names)}"
            )
        plugin = plugins.get(name)
        declared = dict(plugin.params if plugin is not None else Runner.params)
        check_mapping(entry, at, allowed=["runner", "when", "seeds", *declared])
        when = check_mapping(entry.get("when", {}), at.at("when"), allowed=valid_when,
                             listing="a cell-protocol key (benchmark.expected.PROTOCOL_KEYS) or metric, unit, id")  # fmt: skip
        for key, want in when.items():
            coerce(want, _SCALAR | list[_SCALAR], at.at("when", key))
        _check_metrics(when.get("metric"), at.at("when", "metric"))
        params = {k: v for k, v in entry.items() if k not in ("runner", "when", "seeds")}
        seeds = check_seeds(entry["seeds"], at.at("seeds")) if "seeds" in entry else None
        for key, hint in declared.items():
            if key in params:
                coerce(params[key], hint, at.at(key))
        if plugin is not None:  # a declared-only runner (no module yet) takes the base class's parameters
            plugin.check_params(params, at)
        rules.append(RunnerRule(name, when, params, seeds))
    return rules


def _check_metrics(value: Any, where: Where) -> None:
    """A ``when.metric`` names metrics of :data:`benchmark.expected.METRICS` (a typo would match no cell)."""
    for metric in value if isinstance(value, list) else ([] if value is None else [value]):
        if metric not in METRICS:
            near = did_you_mean(str(metric), METRICS)
            raise where.error(f"unknown metric {metric!r}", f"{near + ' ' if near else ''}use one of: {', '.join(METRICS)}")


__all__ = ["SPEC_DIR", "RunnerRule", "TableSpec", "list_specs", "load_spec", "when_keys"]
