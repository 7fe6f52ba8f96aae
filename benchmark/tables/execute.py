"""Run a target's jobs in this process, without Snakemake (same files, same order of steps).

For machines without Snakemake (a lent GPU box, a notebook): ``flb run fedcof_table3`` plans the target once
(writing its immutable plan file ``results/plans/<target>-<sha12>.json`` and pointing
``results/plans/<target>.json`` at it, as the Snakemake DAG does), produces exactly the files the Snakemake
rules would (pointer JSONs, partitions, run CSVs: each typed job of :mod:`benchmark.jobs` runs its own step,
inputs first) and then assembles the table from that plan file. Existing outputs are kept, as Snakemake would
keep them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.jobs import Job, run_jobs
from benchmark.tables.plan import write_plan
from benchmark.tables.records import plan_with_records
from benchmark.tables.spec import SPEC_DIR


def run_planned(
    target: str, config: Mapping[str, Any], results: Path = Path("results"), folder: Path = SPEC_DIR,
    ledger: Path | None = None,
) -> tuple[Path, list[Job]]:
    """Plan ``target`` (writing its plan file), the ledger of recorded runs applied (``ledger``: default the
    checkout's ``runs/``; jobs it records are filled from it and do not run), then run every job it needs; return
    the plan file (assemble from exactly this one: ``build_table(target, plan=...)``) and the jobs."""
    plan = plan_with_records(target, config, ledger, folder)
    path = write_plan(plan, results)
    run_jobs(plan.jobs, config)
    return path, plan.jobs


def run_target(
    target: str, config: Mapping[str, Any], results: Path = Path("results"), folder: Path = SPEC_DIR,
    ledger: Path | None = None,
) -> list[Job]:
    """Plan ``target`` (writing its plan file), then run every job it needs; return the jobs."""
    return run_planned(target, config, results, folder, ledger)[1]
