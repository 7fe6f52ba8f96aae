"""``flb seeds-needed``: the numbers of a build that one seed cannot decide, and the training units whose next seed
would decide them (issue 27; the reasoning: :mod:`benchmark.tables.seed_need`).

    flb seeds-needed TARGET [TARGET ...] [--results DIR] [--decided | --patterns]

Reads the build's plans (``DIR/plans/<target>.json``: the typed jobs of each cell) and check reports
(``DIR/checks/<target>.json``: our per-seed values and the verdict), so it answers for the build that is there,
e.g. the CI tier's, whose pfl cells are all recorded runs. Printed per training unit, those with undecided numbers
first: each number's cells, verdict, distance to the paper, the seed spread it is judged with and where that was
measured, and the ``flb harvest`` command that records the unit's next seed. Once that seed is recorded, the unit
goes into the paper's unit-seeds file (``paper_tables/unit_seeds/``) and every table judges it on both.

``--patterns`` prints only the undecided units' next-seed outputs as ``flb harvest --only`` patterns, one per line,
so that one harvest records them all, most cells per estimated minute first::

    flb harvest --device cpu --budget 2h --nice --seeds 1 --only $(flb seeds-needed TARGET ... --patterns)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from benchmark.errors import ConfigError
from benchmark.jobs import Job
from benchmark.tables.compare_checks import load_checks
from benchmark.tables.plan import read_plan
from benchmark.tables.seed_need import JudgedCell, SeedNeed, seed_needs
from benchmark.tables.spec import load_spec
from benchmark.verdict import paper_seed_std


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flb seeds-needed", description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="+", help="table targets of the build (e.g. fedbabu_table12 ... fedbabu_table15)")
    ap.add_argument("--results", default="results", help="the build's results folder (plans/ and checks/)")
    ap.add_argument("--decided", action="store_true", help="also list the numbers one seed decides")
    ap.add_argument("--patterns", action="store_true",
                    help="print only the undecided units' next-seed outputs, as flb harvest --only patterns")  # fmt: skip
    ap.add_argument("--unit-kind", default="pfl_train", help="the job kind of a training unit (default pfl_train)")
    return ap


def judged_cells(targets: Sequence[str], results: Path) -> list[JudgedCell]:
    """The planned cells of ``targets`` in the build under ``results``, with their checks."""
    checks = load_checks(results / "checks")
    out = []
    for target in targets:
        if target not in checks:
            raise ConfigError(f"no check report {results / 'checks' / target}.json",
                              f"build the target first (`snakemake --cores all {target}`)")  # fmt: skip
        plan = read_plan(target, results)
        for cp in plan.cells:
            check = checks[target].get(cp.cell.key)
            if cp.status != "planned" or check is None or not check.get("ours") or cp.cell.mean is None:
                continue
            if cp.substitute or cp.cell.comparison == "exact":
                continue  # the flat substitute rule and exact cost cells have no seed spread to weigh
            out.append(JudgedCell(cp.cell.key, cp.jobs, tuple(float(v) for v in check["ours"]), float(cp.cell.mean),
                                  paper_seed_std(cp.cell), str(check["verdict"])))  # fmt: skip
    return out


def next_seed_pattern(unit: Job) -> str:
    """The ``flb harvest --only`` pattern of ``unit``'s seed-1 training output (its path, escaped)."""
    return re.escape(replace(unit, seed=1).path)  # type: ignore[type-var]


def describe(needs: Sequence[SeedNeed], decided: bool) -> list[str]:
    """The report's lines: per unit its numbers, then the harvest command of its next seed; a summary last."""
    lines: list[str] = []
    shown = [n for n in needs if n.undecided or decided]
    units: dict[str, list[SeedNeed]] = {}
    for need in shown:
        units.setdefault(need.number.unit.path, []).append(need)
    for path, group in units.items():
        unit = group[0].number.unit
        lines.append(f"unit {path}")
        for need in group:
            n = need.number
            cells = ", ".join(c.key for c in n.cells)
            if need.spread is None:
                spread = "no seed spread measured for this kind of number"
            else:
                spread = f"seed std {need.spread.std:.2f} ({need.spread.level}: {len(need.spread.measured)} unit(s))"
            state = "UNDECIDED" if need.undecided else "decided"
            lines.append(f"  {state:<9} {n.cells[0].verdict:<5} {n.delta:+6.2f}  {spread}  [{n.measure[1] or n.measure[0]}] {cells}")
        if any(n.undecided for n in group):
            lines.append(f"  next seed: flb harvest --device cpu --seeds 1 --only '{next_seed_pattern(unit)}'")
    undecided = [n for n in needs if n.undecided]
    unknown = sum(n.spread is None for n in undecided)
    lines.append(
        f"{len(undecided)} of {len(needs)} one-seed numbers undecided ({unknown} of them with no measured seed "
        f"spread) on {len({n.number.unit for n in undecided})} training units; {len(needs) - len(undecided)} decided"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    for t in args.targets:
        load_spec(t)  # an unknown target is one error naming the targets
    needs = seed_needs(judged_cells(args.targets, Path(args.results)), args.unit_kind)
    if args.patterns:
        for unit in dict.fromkeys(n.number.unit for n in needs if n.undecided):
            print(next_seed_pattern(unit))
        return 0
    for line in describe(needs, args.decided):
        print(line)
    return 0
