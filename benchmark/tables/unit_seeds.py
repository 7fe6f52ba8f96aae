"""Seeds per training unit: one list for every table that prints a number of that unit (issue 27).

A training run fills cells of several tables (fedbabu's FedAvg at s = 2, τ = 10 is Table 12's "w/ classifier",
Table 14's conv1234+linear row, and its evaluations fill Tables 12, 13 and 15). When one seed cannot decide such a
number, its second seed must be judged in every one of those tables, or one table passes what another fails on
fewer seeds. A spec therefore names its paper's unit-seeds file (``unit_seeds: fedbabu.yaml``, read from
``paper_tables/unit_seeds/``), which lists the training units by the fields of their training job::

    job: pfl_train
    units:
      - when: {dataset: cifar10, model: 4convnet, scheme_param: 2, participation: 0.1, local_epochs: 10,
               algorithm: [fedavg, fedbabu]}
        seeds: [0, 1]
        why: the seed spread of FedAvg s = 2 (docs/runs/cpu_harvest21)

A cell whose training job (its own job of kind ``job``, or the one an evaluation job reads) matches an entry is
planned and collected with that entry's seeds instead of the spec's (:func:`benchmark.tables.plan.cell_spec`); the
first matching entry wins. ``when`` tests job fields (:func:`benchmark.jobs.job_fields`; numbers compare as
numbers, so ``0.1`` matches the field's text ``"0.1"``), a list means any of its values. The schema is strict: an
unknown key, a field the job kind lacks or a bad seed list is one error naming the file and the line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.jobs import JOB_KINDS, Job, job_fields
from benchmark.schema import Where, check_mapping, check_seeds, coerce, read_yaml
from benchmark.suggest import did_you_mean

#: Where a spec's ``unit_seeds`` file lives, relative to the specs' folder.
UNIT_SEEDS_DIR = "unit_seeds"
_TOP = {"job": "the job kind whose fields the entries test (e.g. pfl_train)", "units": "list of {when, seeds, why}"}
_ENTRY = {"when": "job field -> value or list of values", "seeds": "distinct non-negative integers",
          "why": "why the unit needs these seeds (the record that measured its spread)"}  # fmt: skip
_SCALAR = str | int | float | bool


def _as_text(value: Any) -> str:
    """A field value as compared: numbers (and number-like text) in ``%g`` form, anything else as text."""
    if isinstance(value, bool):
        return str(value)
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


@dataclass(frozen=True)
class UnitSeedRule:
    """The seeds of the training units whose job fields match ``when``."""

    when: Mapping[str, frozenset[str]]  # field -> accepted values, as :func:`_as_text` writes them
    seeds: tuple[int, ...]
    why: str

    def matches(self, job: Job) -> bool:
        fields = vars(job)
        return all(_as_text(fields[key]) in accepted for key, accepted in self.when.items())


@dataclass(frozen=True)
class UnitSeeds:
    """A paper's unit-seeds file (module docstring)."""

    source: Path
    job_kind: str
    rules: tuple[UnitSeedRule, ...]

    def seeds_for(self, jobs: Iterable[Job]) -> tuple[int, ...] | None:
        """The seeds of the first entry matching the training unit of any of ``jobs``, ``None`` if none does."""
        for job in jobs:
            unit = training_job_of(job, self.job_kind)
            if unit is None:
                continue
            rule = next((r for r in self.rules if r.matches(unit)), None)
            if rule is not None:
                return rule.seeds
        return None


def training_job_of(job: Job, kind: str) -> Job | None:
    """The training job of ``job``: itself when it is of ``kind``, else the one it reads directly (an evaluation's
    training; a run warm-started from another training is its own unit, not its source's); ``None`` if none."""
    if job.KIND == kind:
        return job
    return next((j for j in job.inputs() if j.KIND == kind), None)


def load_unit_seeds(name: Any, where: Where, folder: Path) -> UnitSeeds:
    """Read ``<folder>/unit_seeds/<name>`` (``where``: the spec's ``unit_seeds`` field, for the error when the
    file is missing) and check it against the strict schema."""
    if not isinstance(name, str) or not name.endswith(".yaml") or "/" in name:
        raise where.error(f"expected a file name like 'fedbabu.yaml', got {name!r}",
                          f"name a file of {folder / UNIT_SEEDS_DIR}")  # fmt: skip
    path = folder / UNIT_SEEDS_DIR / name
    if not path.is_file():
        raise where.error(f"unit-seeds file {path} does not exist", "create it or fix the 'unit_seeds' field")
    src = read_yaml(path)
    top = Where.of(src)
    raw = check_mapping(src.data, top, allowed=_TOP, required=tuple(_TOP))
    kind = raw["job"]
    if kind not in JOB_KINDS:
        near = did_you_mean(str(kind), JOB_KINDS)
        raise top.at("job").error(f"unknown job kind {kind!r}", f"{near + ' ' if near else ''}use one of: {', '.join(sorted(JOB_KINDS))}")
    fields = {k: t for k, t in job_fields(JOB_KINDS[kind]).items() if k != "seed"}
    entries = coerce(raw["units"], list, top.at("units"))
    rules = []
    for i, entry in enumerate(entries):
        at = top.at("units", i)
        body = check_mapping(entry, at, allowed=_ENTRY, required=("when", "seeds", "why"))
        when = check_mapping(body["when"], at.at("when"), allowed=fields,
                             listing=f"a field of a {kind} job (the seed is the entry's seeds)")  # fmt: skip
        if not when:
            raise at.at("when").error("is empty: it would give every unit these seeds", "name the unit's fields")
        accepted = {}
        for key, want in when.items():
            values = coerce(want, _SCALAR | list[_SCALAR], at.at("when", key))
            accepted[key] = frozenset(_as_text(v) for v in (values if isinstance(values, list) else [values]))
        why = coerce(body["why"], str, at.at("why"))
        rules.append(UnitSeedRule(accepted, check_seeds(body["seeds"], at.at("seeds")), why))
    return UnitSeeds(path, kind, tuple(rules))


__all__ = ["UNIT_SEEDS_DIR", "UnitSeedRule", "UnitSeeds", "load_unit_seeds", "training_job_of"]
