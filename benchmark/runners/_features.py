"""What the runners on cached features share: reading their run files into a cell's values and rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from benchmark.errors import CorruptFileError
from benchmark.io import RERUN
from benchmark.reasons import NotRunReason, ReasonKind
from benchmark.runners import CellResult
from benchmark.schema import check_one_per_seed

if TYPE_CHECKING:
    from benchmark.tables.plan import CellPlan
    from benchmark.tables.spec import TableSpec


def seeded_jobs(
    job_type: type, spec: TableSpec, plan: CellPlan, config: Mapping[str, Any], **fields: Any
) -> tuple[Any, ...]:
    """One ``job_type`` per seed of ``spec`` on the cell's features (dataset, backbone, weights, the run's
    precision and subset); ``fields`` are the job type's own (preprocess, partition tag, protocol, ...)."""
    return tuple(
        job_type(
            dataset=plan.dataset,
            model=plan.model,
            weights=plan.weights,
            precision=config.get("precision", "fp32"),
            subset=str(config.get("table_subset", "all")),
            seed=s,
            **fields,
        )
        for s in spec.seeds
    )


def collect_runs(spec: TableSpec, plan: CellPlan) -> CellResult:
    """The cell's accuracy per seed (the method's ``accuracy`` rows with status ok, by seed), and every metric
    the runs recorded for the method (accuracy, and for training runs also best / last accuracy, uplink /
    downlink bytes, compute in F, rounds), labelled with the cell.

    Each run file holds at most one such row; when some hold one, every one must (a run file that lost the
    row, e.g. truncated at a row boundary before checksums existed, would silently drop its seed): otherwise
    one :class:`~benchmark.errors.CorruptFileError` naming the file."""
    import pandas as pd  # local: heavy import (pandas)

    from benchmark.tidy import read_tidy  # local: heavy import (pandas)

    frames = [read_tidy(j.path) for j in plan.jobs]
    found = [len(_accuracy(f, plan.method)) for f in frames]
    for job, frame, n in zip(plan.jobs, frames, found, strict=True):
        check_one_per_seed(_accuracy(frame, plan.method)["seed"], job.path)  # a duplicated row: one seed twice
        if n > 1 or (n == 0 and any(found)):
            raise CorruptFileError(
                f"run file {job.path} has {n} accuracy rows of method {plan.method!r} (one expected, as in the "
                "cell's other run files)",
                RERUN,
            )
    runs = pd.concat(frames, ignore_index=True)
    sel = _accuracy(runs, plan.method)
    check_one_per_seed(sel["seed"], f"cell {plan.cell.id} (runs of method {plan.method})")
    values = [float(v) for v in sel.sort_values("seed")["value"]]
    rows: list[dict[str, Any]] = []
    for rec in runs[runs["method"] == plan.method].to_dict("records"):
        rec.update(paper=spec.paper, table=spec.table, cell=plan.cell.id)
        rows.append(rec)
    why = None if values else NotRunReason(ReasonKind.NO_VALUE, "a value", "the runs produced no value for this cell")
    return CellResult(values, rows, not_run=why)


def _accuracy(runs: Any, method: Any) -> Any:
    """The rows of ``runs`` that are a value of the cell: ``method``'s accuracy, status ok."""
    return runs[(runs["method"] == method) & (runs["metric"] == "accuracy") & (runs["status"] == "ok")]


def no_protocol(key: str, where: str) -> NotRunReason:
    """A training cell whose setting ``key`` (``<dataset>`` or ``<dataset>@<size>``) the spec maps to no
    protocol (``where``: the protocol file)."""
    return NotRunReason(ReasonKind.NOT_IMPLEMENTED, f"a training protocol for {key}",
                        f"no training protocol for {key} in this spec ({where})")  # fmt: skip


def protocol_elsewhere(name: str, protocol: tuple[Any, Any], cell: tuple[Any, Any]) -> NotRunReason:
    """A training cell whose spec maps it to protocol ``name`` of another (dataset, backbone) than its own."""
    return NotRunReason(ReasonKind.PROTOCOL_MISMATCH, f"a protocol for {cell[0]} x {cell[1]}",
                        f"protocol {name} is for {protocol[0]} x {protocol[1]}, not {cell[0]} x {cell[1]}")  # fmt: skip
