"""Run a target's jobs in this process, without Snakemake (same files, same order of steps).

For machines without Snakemake (a lent GPU box, a notebook): ``flb run fedcof_table3`` plans the target once
(writing ``results/plans/<target>.json``, as the Snakemake DAG does), produces exactly the files the
Snakemake rules would (pointer JSONs, partitions, run CSVs: each typed job of :mod:`benchmark.jobs` runs its
own step, inputs first) and then assembles the table from that plan. Existing outputs are kept, as Snakemake
would keep them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.jobs import Job, run_jobs
from benchmark.tables.plan import make_plan, write_plan
from benchmark.tables.spec import SPEC_DIR


def run_target(
    target: str, config: Mapping[str, Any], results: Path = Path("results"), folder: Path = SPEC_DIR
) -> list[Job]:
    """Plan ``target`` (writing its plan file), then run every job it needs; return the jobs."""
    plan = make_plan(target, config, folder)
    write_plan(plan, results)
    run_jobs(plan.jobs, config)
    return plan.jobs
