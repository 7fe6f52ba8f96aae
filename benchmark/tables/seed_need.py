"""Which numbers one seed cannot decide, and the training units whose second seed would (issue 27: "a second seed
wherever one seed cannot decide the cell").

A cell judged on one seed passes iff ``|δ| <= T1 = max(2·σ_paper, 1)`` (:func:`benchmark.verdict.judge`; σ_ours is
0 with one seed). With a second seed two things move: the mean, by half the difference of the two seeds, and the
tolerance, which becomes ``T2 = max(2·sqrt(σ_paper² + s²), 1)`` with ``s`` the two seeds' sample standard deviation.
With σ the spread of one seed's value (its standard deviation across seeds):

* the mean moves by up to ``√2·σ`` (two standard deviations of half the difference of two seeds, ``σ/√2``);
* ``s`` is taken at σ, its scale. (At the upper end of its own spread, ``2σ``, nearly every FAIL within ``4σ``
  would count as undecided: a two-seed standard deviation is that noisy.)

So a one-seed PASS is undecided when ``|δ| + √2·σ > T1``, and a one-seed FAIL when ``|δ| − √2·σ <=
max(2·sqrt(σ_paper² + σ²), 1)``; every other verdict stands. This is a rule for ordering the work, not a verdict. σ is not known for the cell itself (it has one
seed): it is the median of the spreads measured on other training units for the same kind of number
(:func:`measure_of`; a median, so that one seed that collapsed, like FedAvg s = 2, τ = 4's seed 0, does not set every
other unit's spread), taken from the most similar units that have one (:data:`PFL_LEVELS`: the same algorithm and
heterogeneity, then the same heterogeneity, then the same algorithm, then the same dataset and model). A number with no measured spread at
any level is listed apart, undecided by default.

Cells that print the same number (fedbabu's Table 14 repeats Table 12's) are one :class:`Number`. The verdicts and
values come from a build's check reports, the jobs (typed) from its plans; :mod:`benchmark.seeds_cli` prints the
units with the ``flb harvest`` command that records their next seed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from benchmark.jobs import Job
from benchmark.tables.unit_seeds import training_job_of
from benchmark.verdict import accuracy_tolerance

#: Levels of similarity of two pfl units, most similar first: (name, the job fields they share). Two units of one
#: level share a seed spread.
PFL_LEVELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("same algorithm and partition", ("dataset", "model", "algorithm", "scheme", "scheme_param")),
    ("same partition, other algorithms", ("dataset", "model", "scheme", "scheme_param")),
    ("same algorithm, other partitions", ("dataset", "model", "algorithm")),
    ("other algorithms and partitions", ("dataset", "model")),
)
#: Verdicts this reasoning applies to (the accuracy rule with the paper's weights; PASS* is a PASS under a named
#: departure, judged by the same rule).
JUDGED = ("PASS", "PASS*", "FAIL")


@dataclass(frozen=True)
class JudgedCell:
    """One cell of a build: its key, the jobs its plan holds, our per-seed values and its verdict."""

    key: str
    jobs: tuple[Job, ...]
    values: tuple[float, ...]
    paper: float
    paper_std: float  # σ_paper as the verdict uses it (0 unless the printed ± is over seeds)
    verdict: str


@dataclass(frozen=True)
class Spread:
    """A seed spread (standard deviation across seeds of one number) and where it was measured."""

    std: float  # the median over the measured units
    level: str  # how the measured units resemble the number's unit (a name of :data:`PFL_LEVELS`)
    measured: tuple[str, ...]  # the measured units' training outputs (seed 0)


@dataclass(frozen=True)
class Number:
    """A number one or more cells print: the same training unit (seed 0) and :func:`measure_of` its evaluation."""

    unit: Job
    measure: tuple[str, str]
    cells: tuple[JudgedCell, ...]

    @property
    def seeds(self) -> int:
        return len(self.cells[0].values)

    @property
    def delta(self) -> float:
        cell = self.cells[0]
        return statistics.fmean(cell.values) - cell.paper


@dataclass(frozen=True)
class SeedNeed:
    """A one-seed number, the spread it is judged with, and whether a second seed could change its verdict."""

    number: Number
    spread: Spread | None
    undecided: bool


def measure_of(job: Job) -> tuple[str, str]:
    """What kind of number ``job`` produces: its kind and, for an evaluation, what it evaluates (``ncm_cosine``,
    ``personalised``...). Spreads are shared between numbers of one kind only."""
    return job.KIND, str(getattr(job, "evaluation", ""))


def training_unit(job: Job, kind: str) -> Job | None:
    """The training job of ``job`` (:func:`~benchmark.tables.unit_seeds.training_job_of`) at seed 0."""
    unit = training_job_of(job, kind)
    return None if unit is None else replace(unit, seed=0)  # type: ignore[type-var]


def numbers(cells: Iterable[JudgedCell], kind: str) -> list[Number]:
    """The cells grouped into the numbers they print (the same unit and measure, the same values)."""
    groups: dict[tuple[Job, tuple[str, str]], list[JudgedCell]] = {}
    for cell in cells:
        if not cell.jobs:
            continue
        unit = training_unit(cell.jobs[0], kind)
        if unit is not None:
            groups.setdefault((unit, measure_of(cell.jobs[0])), []).append(cell)
    return [Number(unit, measure, tuple(group)) for (unit, measure), group in groups.items()]


def _fields(job: Job, names: Sequence[str]) -> tuple[object, ...]:
    return tuple(getattr(job, n, None) for n in names)


def spread_for(number: Number, measured: Sequence[Number],
               levels: Sequence[tuple[str, tuple[str, ...]]] = PFL_LEVELS) -> Spread | None:  # fmt: skip
    """The median seed spread measured (numbers of two or more seeds) on the units most similar to ``number``'s,
    for the same measure; ``None`` if none is."""
    for name, fields in levels:
        same = [m for m in measured if m.measure == number.measure and m.unit != number.unit
                and _fields(m.unit, fields) == _fields(number.unit, fields)]  # fmt: skip
        if same:
            stds = [statistics.stdev(m.cells[0].values) for m in same]
            return Spread(statistics.median(stds), name, tuple(m.unit.path for m in same))
    return None


def undecided(number: Number, sigma: float) -> bool:
    """Whether a second seed could change ``number``'s one-seed verdict, given a seed spread ``sigma`` (module
    docstring)."""
    cell = number.cells[0]
    d = abs(number.delta)
    if cell.verdict == "FAIL":
        return d - math.sqrt(2) * sigma <= accuracy_tolerance(cell.paper_std, sigma)
    return d + math.sqrt(2) * sigma > accuracy_tolerance(cell.paper_std, 0.0)


def seed_needs(cells: Iterable[JudgedCell], kind: str,
               levels: Sequence[tuple[str, tuple[str, ...]]] = PFL_LEVELS) -> list[SeedNeed]:  # fmt: skip
    """Every one-seed number of ``cells`` (verdicts :data:`JUDGED`) with its spread and whether it is undecided;
    undecided first, then by unit."""
    nums = numbers((c for c in cells if c.verdict in JUDGED), kind)
    measured = [n for n in nums if n.seeds >= 2]
    out = []
    for n in nums:
        if n.seeds != 1:
            continue
        spread = spread_for(n, measured, levels)
        out.append(SeedNeed(n, spread, True if spread is None else undecided(n, spread.std)))
    return sorted(out, key=lambda s: (not s.undecided, s.spread is None, s.number.unit.path, s.number.measure))


__all__ = ["JUDGED", "PFL_LEVELS", "JudgedCell", "Number", "SeedNeed", "Spread", "measure_of", "numbers",
           "seed_needs", "spread_for", "training_unit", "undecided"]  # fmt: skip
