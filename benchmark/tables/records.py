"""The ledger of recorded runs at plan time (issue 24): a planned job that a record matches is filled from the
record instead of running, and the plan says so per cell.

:func:`apply_ledger` takes a target's plan (:func:`benchmark.tables.plan.make_plan`) before Snakemake builds its
DAG (or before ``flb run`` runs the jobs) and, with ``use_records`` (the default):

* for every planned job and its input jobs, inputs first: when ``runs/<kind>/<id>/`` (:mod:`benchmark.ledger`)
  holds a verified, non-stale record of the job and the job's output is missing or was itself materialised from
  a record, copies the record's files to the job's output paths (:func:`benchmark.ledger.materialise`; files
  already equal to the record's are left untouched, so an unchanged build keeps its time stamps). A damaged
  record that matches a planned job is one :class:`~benchmark.errors.CorruptFileError` naming the file, never
  skipped. An output computed here (no ``.recorded`` marker) is kept and the record is not used;
* a record of a job that other planned jobs read (a training run whose evaluations read its weights, which the
  ledger never keeps) is used only when every one of those dependants is filled from a record too or already
  computed here (the record's files are then dated before that output, so that it is not run again);
* a cell not run only because this machine does not train (``cpu_training: false`` and no CUDA device) is
  planned when records fill every one of its jobs: its verdict then needs no training on any machine;
* an output materialised from a record that is no longer usable (removed, or stale) is removed, so its job runs
  (or its cell is NOT RUN) instead of being fed silently from it.

Every cell lists the jobs it takes from records (:class:`RecordedJob`: record folder, date, machine, commit) and
the stale records that match its jobs (:class:`StaleRecord`); a cell whose jobs cannot run here and whose record
is stale is NOT RUN with the stale record named in its reason. With ``use_records: false`` every output a
record put at a planned job's path is removed (the job runs) and no record is used or listed.

The Snakefile's rules drop the inputs of a job whose output came from a record (:func:`recorded_output`), so
Snakemake neither runs the job nor the jobs it would have read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.io import sha256_file
from benchmark.jobs import Job, job_closure
from benchmark.ledger import (
    LEDGER_DIR,
    RunRecord,
    materialise,
    materialised_from,
    read_record,
    record_folder,
    unmaterialise,
    weight_files,
)
from benchmark.tables.availability import training_allowed
from benchmark.tables.plan import TargetPlan, make_plan, plan_cell, write_plan
from benchmark.tables.recorded import RecordedJob, StaleRecord, ledger_name
from benchmark.tables.spec import SPEC_DIR, load_spec


def recorded_output(job: Job, root: Path = Path(".")) -> bool:
    """Whether ``job``'s output under ``root`` was materialised from a record (its rule then has no inputs)."""
    return materialised_from(job.path, root) is not None and (root / job.path).is_file()


def find_record(job: Job, ledger: Path) -> RunRecord | None:
    """The record of ``job`` in ``ledger``, every file verified (a damaged one raises
    :class:`~benchmark.errors.CorruptFileError` naming the file); ``None`` when the ledger has none."""
    folder = record_folder(job, ledger)
    if not (folder / "record.json").is_file():
        return None
    return read_record(folder)


def _in_place(record: RunRecord, root: Path) -> bool:
    """The record's files are at their paths under ``root`` as recorded, marked as coming from it."""
    if materialised_from(record.job.path, root) != str(record.folder):
        return False
    return all((root / f).is_file() and sha256_file(root / f) == m["sha256"] for f, m in record.files.items())


@dataclass
class _Ledger:
    """The records matching one plan's jobs, and which of them this build uses."""

    ledger: Path
    root: Path
    records: dict[str, RunRecord | None] = dataclasses.field(default_factory=dict)

    def record(self, job: Job) -> RunRecord | None:
        if job.path not in self.records:
            self.records[job.path] = find_record(job, self.ledger)
        return self.records[job.path]

    def usable(self, job: Job) -> RunRecord | None:
        """A non-stale record that may fill ``job``: its output is missing or came from a record."""
        rec = self.record(job)
        if rec is None or rec.stale:
            return None
        out = self.root / job.path
        if out.is_file() and materialised_from(job.path, self.root) is None:
            return None  # computed here: kept
        return rec

    def computed(self, path: str) -> bool:
        """An output present here and not from a record."""
        return (self.root / path).is_file() and materialised_from(path, self.root) is None

    def choose(self, jobs: list[Job]) -> tuple[dict[str, RunRecord], dict[str, list[str]]]:
        """The records used for ``jobs`` (a closure, inputs first), and the planned dependants of every job: a
        job with planned dependants is filled only when each dependant is filled too or already computed here
        (a dependant that runs may read files a record does not keep, such as a training run's weights), or when
        those weights are on disk beside its output (:func:`~benchmark.ledger.weight_files`: left by a run here,
        or restored by ``flb harvest`` from ``runs/parked/``); the dependant checks them against the record."""
        dependants: dict[str, list[str]] = {}
        for j in jobs:
            for dep in j.inputs():
                dependants.setdefault(dep.path, []).append(j.path)
        chosen: dict[str, RunRecord] = {}
        for j in reversed(jobs):  # dependants before their inputs
            rec = self.usable(j)
            if rec is not None and (all(d in chosen or self.computed(d) for d in dependants.get(j.path, []))
                                    or weight_files(j, self.root)):  # fmt: skip
                chosen[j.path] = rec
        return chosen, dependants


def apply_ledger(plan: Any, config: Mapping[str, Any], ledger: Path, root: Path = Path(".")) -> Any:
    """``plan`` (a :class:`~benchmark.tables.plan.TargetPlan`) with the ledger applied (module docstring): the
    record files materialised under ``root``, the cells' ``recorded`` and ``stale`` filled, cells not run only
    for want of training planned when records fill them. ``use_records: false``: the outputs records put at the
    plan's job paths removed, the plan unchanged."""
    if not config.get("use_records", True):
        for job in job_closure(plan.jobs):
            unmaterialise(job, root)
        return plan
    led = _Ledger(Path(ledger), Path(root))
    cells = list(plan.cells)
    if any(Path(ledger).glob("*/*/record.json")):  # no record: no cell to re-plan (the DAG is built as fast)
        spec = load_spec(plan.target, plan.spec_folder)
        cells = [_adopt_recorded(c, spec, config, led) for c in cells]
    chosen = _put_in_place(led, [j for c in cells for j in c.jobs])
    out = [_annotate(c, chosen, led) for c in cells]
    return TargetPlan(plan.target, plan.settings, tuple(out), plan.spec_folder)


def _put_in_place(led: _Ledger, planned: Iterable[Job]) -> dict[str, RunRecord]:
    """Materialise the records chosen for ``planned`` and their inputs (:meth:`_Ledger.choose`), inputs first so
    that a dependant's files are never older than its inputs'; remove what a record that can no longer be used
    put there. Returns the records used, by output path."""
    jobs = job_closure(planned)
    chosen, dependants = led.choose(jobs)
    for job in jobs:
        rec = chosen.get(job.path)
        if rec is not None:
            if not _in_place(rec, led.root):
                computed = [led.root / d for d in dependants.get(job.path, []) if led.computed(d)]
                _older_than(materialise(rec, led.root), computed)
        elif materialised_from(job.path, led.root) is not None:
            unmaterialise(job, led.root)  # its record is gone, stale, or cannot be used: the job runs
    return chosen


def apply_to_jobs(jobs: Iterable[Job], config: Mapping[str, Any], ledger: Path,
                  root: Path = Path(".")) -> dict[str, RunRecord]:  # fmt: skip
    """The ledger applied to jobs outside a table plan (a figure's training runs): the same rules as
    :func:`apply_ledger`; ``use_records: false`` removes what records put at their paths."""
    jobs = list(jobs)
    if not config.get("use_records", True):
        for job in job_closure(jobs):
            unmaterialise(job, root)
        return {}
    return _put_in_place(_Ledger(Path(ledger), Path(root)), jobs)


def _older_than(files: list[Path], outputs: list[Path]) -> None:
    """Date ``files`` (just materialised) one second before the oldest of ``outputs`` (dependants computed here
    from an earlier copy of them), so that Snakemake does not run those dependants again for a newer input."""
    if not outputs:
        return

    stamp = min(o.stat().st_mtime for o in outputs) - 1.0
    for f in files:
        os.utime(f, (stamp, stamp))


def _annotate(cell: Any, chosen: Mapping[str, RunRecord], led: _Ledger) -> Any:
    """``cell`` with its recorded jobs and the stale records matching its jobs."""
    recorded = tuple(RecordedJob.of(chosen[j.path]) for j in cell.jobs if j.path in chosen)
    stale = tuple(
        StaleRecord(j.path, ledger_name(r), r.label())
        for j in cell.jobs
        if (r := led.record(j)) is not None and r.stale
    )
    cell = dataclasses.replace(cell, recorded=recorded, stale=stale) if (recorded or stale) else cell
    return cell


def _adopt_recorded(cell: Any, spec: Any, config: Mapping[str, Any], led: _Ledger) -> Any:
    """``cell``, or, when it is NOT RUN only because this machine does not train, its plan with training
    allowed if records fill all of its jobs; a stale record among them is named in the NOT RUN reason."""
    if cell.status != "not_run" or training_allowed(config) or cell.runner is None:
        return cell
    trained = plan_cell(spec, cell.cell, {**config, "cpu_training": True})
    if trained.status != "planned" or not trained.jobs:
        return cell
    records = [led.record(j) for j in trained.jobs]
    stale = [r for r in records if r is not None and r.stale]
    if stale:
        for r in stale:  # an output it put here before it went stale is not kept
            unmaterialise(r.job, led.root)
        return dataclasses.replace(
            cell,
            not_run=cell.not_run.with_note(
                "the ledger's record is stale, not used: " + "; ".join(f"{ledger_name(r)} ({r.label()})" for r in stale)
            ),
            stale=tuple(StaleRecord(r.job.path, ledger_name(r), r.label()) for r in stale),
        )
    if all(r is not None and led.usable(j) is not None for j, r in zip(trained.jobs, records, strict=True)):
        return trained
    return cell


def plan_with_records(
    target: str, config: Mapping[str, Any], ledger: Path | None = None, folder: Path = SPEC_DIR
) -> TargetPlan:
    """:func:`make_plan`, then the ledger of recorded runs applied (:func:`benchmark.tables.records.apply_ledger`:
    jobs a record matches are materialised from it, or, with ``use_records: false``, outputs records put there
    removed). ``ledger``: the checkout's ``runs/`` (default: that of this package's checkout)."""
    ledger = ledger if ledger is not None else checkout_ledger()
    return apply_ledger(make_plan(target, config, folder), config, ledger)


def checkout_ledger() -> Path:
    """The ledger of the checkout this package is in (``<checkout>/runs``, :data:`benchmark.ledger.LEDGER_DIR`)."""
    return SPEC_DIR.parent / LEDGER_DIR  # the spec folder's checkout (tests point SPEC_DIR elsewhere)


def plan_inputs(target: str, config: Mapping[str, Any], ledger: Path | None = None) -> dict[str, Any]:
    """The named inputs of the Snakefile's ``paper_table`` rule: ``plan``, the plan's immutable file (written
    here when the DAG is built, :func:`write_plan`; the rule passes it to ``flb table --plan``), and ``runs``,
    the output of every job the plan holds. Jobs the ledger ``ledger`` (the Snakefile's checkout's ``runs/``)
    records are materialised here, before Snakemake looks at their outputs (:func:`plan_with_records`)."""
    plan = plan_with_records(target, config, ledger)
    return {"plan": str(write_plan(plan)), "runs": [j.path for j in plan.jobs]}
