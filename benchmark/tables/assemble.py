"""Assemble a paper-table target: runs -> tidy rows -> per-cell verdicts -> rendered tables and checks.

Writes ``results/tidy/<target>.csv`` (one row per run x metric, plus one ``not_run`` row per cell that did
not run), ``results/tables/<target>.md`` and ``.tex`` (per cell: ours mean ± std | paper | delta | verdict,
laid out with the paper's own row and column labels), ``results/checks/<target>.json`` (every cell with
its verdict, tolerance and reason). Assembly itself always succeeds when the run files exist (Snakemake
would delete the outputs of a failing job); ``flb verdict <target>`` (the target rule) and ``flb ci-gate``
turn FAILs into a non-zero exit (:mod:`benchmark.tables.gate`).

Each planned cell's values and rows come from its runner plug-in (:mod:`benchmark.runners`); the plan is
the immutable file written when the target was planned (``flb table <target> --plan <file>``: the Snakemake
rule passes the one its DAG wrote; without it, the newest plan; :func:`benchmark.tables.plan.read_plan`).
Every run file is read (and checked: :mod:`benchmark.io` checksums and structure) before anything is written,
so a damaged run file is one :class:`~benchmark.errors.CorruptFileError` naming it and the target's command
that rebuilds it, and the target's previous tidy table, tables and checks stay as they were. The tidy CSV and
the checks JSON are written with checksum sidecars.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from benchmark.errors import ConfigError, CorruptFileError
from benchmark.io import atomic_write_json, atomic_write_text
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.runners import CellResult, get_runner
from benchmark.schema import check_planned_seeds
from benchmark.tables.plan import CellPlan, cell_spec, read_plan
from benchmark.tables.spec import load_spec
from benchmark.tidy import frame, make_row, write_tidy
from benchmark.verdict import judge, shown_status

RESULTS = Path("results")


@dataclass
class CellOutcome:
    plan: CellPlan
    values: list[float]
    verdict: Any  # benchmark.verdict.Verdict
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # cost cells: classification, model facts

    @property
    def recorded(self) -> bool:
        """The verdict rests on recorded runs (jobs of the cell filled from the ledger, issue 24), not on jobs
        computed in this build; never for NOT RUN."""
        return bool(self.plan.recorded) and str(self.verdict.status) != "NOT RUN"

    @property
    def shown_verdict(self) -> str:
        """The verdict as the tables show it: ``PASS (recorded)`` for a recorded cell
        (:func:`benchmark.verdict.shown_status`)."""
        return shown_status(str(self.verdict.status), self.recorded)

    def record_label(self) -> str:
        """Where the recorded runs of the cell come from (one label per distinct record provenance) and the
        stale records that match its jobs; empty for a cell computed in this build with no stale record."""
        parts = list(dict.fromkeys(r.label() for r in self.plan.recorded)) if self.recorded else []
        if self.plan.stale and str(self.verdict.status) != "NOT RUN":
            parts += [f"a stale record was not used: {s.label}" for s in self.plan.stale]
        return "; ".join(parts)

    def recorded_json(self) -> dict[str, Any]:
        """The ``provenance`` / ``recorded`` / ``stale`` fields of the cell's checks JSON entry (none for a cell
        computed in this build without stale records, so such a cell's entry is as before the ledger)."""
        out: dict[str, Any] = {}
        if self.recorded:
            recs = self.plan.recorded
            out["provenance"] = "recorded"
            out["recorded"] = {
                "label": "; ".join(dict.fromkeys(r.label() for r in recs)),
                "date": max(r.date for r in recs), "machine": ", ".join(dict.fromkeys(r.machine for r in recs)),
                "commit": ", ".join(dict.fromkeys(r.commit for r in recs)),
                "all_jobs": self.plan.from_records, "jobs": [r.to_dict() for r in recs],
            }  # fmt: skip
        if self.plan.stale:
            out["stale"] = [s.to_dict() for s in self.plan.stale]
        return out


@dataclass
class TableReport:
    target: str
    outcomes: list[CellOutcome] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.outcomes:
            key = str(o.verdict.status)
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))

    def recorded_counts(self) -> dict[str, int]:
        """Of :meth:`counts`, the cells whose verdict rests on recorded runs (counted apart, issue 24)."""
        out: dict[str, int] = {}
        for o in self.outcomes:
            if o.recorded:
                out[str(o.verdict.status)] = out.get(str(o.verdict.status), 0) + 1
        return dict(sorted(out.items()))

    def counts_text(self) -> str:
        """``PASS 12 (3 recorded), NOT RUN 4``."""
        rec = self.recorded_counts()
        return ", ".join(f"{k} {v}" + (f" ({rec[k]} recorded)" if rec.get(k) else "") for k, v in self.counts().items())

    @property
    def failed(self) -> bool:  # any FAIL, explained or not (`flb verdict` separates them)
        return any(str(o.verdict.status) in ("FAIL", "SUBSTITUTE-FAIL") for o in self.outcomes)

    def summary(self) -> str:
        rec = self.recorded_counts()
        counts = ", ".join(f"{k}: {v}" + (f" ({rec[k]} recorded)" if rec.get(k) else "") for k, v in self.counts().items())
        return f"{self.target}: {len(self.outcomes)} cells ({counts}) -> results/tables/{self.target}.md"


def provenance() -> dict[str, Any]:
    """Commit, package versions and machine of this process (every tidy row carries them)."""
    return {"git_commit": git_commit(), "versions": package_versions(), "machine": machine()}


def build_table(target: str, results: Path = RESULTS, plan_file: Path | str | None = None) -> TableReport:
    """Assemble ``target`` from its plan file ``plan_file`` (``results/plans/<target>-<sha12>.json``, written when
    the target was planned; default: the newest plan, ``results/plans/<target>.json``) and the run files of
    its jobs (which must exist for every planned cell)."""
    plan = read_plan(target, results, plan_file)
    spec = load_spec(target, plan.spec_folder)
    report = TableReport(target)
    tidy_rows: list[dict[str, Any]] = []
    for cp in plan.cells:
        cell = cp.cell
        proto = cell.protocol
        part = proto.get("partition") or {}
        labels = dict(
            paper=spec.paper, table=spec.table, cell=cell.id, dataset=cp.dataset or proto.get("dataset"),
            model=cp.model or proto.get("model"), method=cp.method or proto.get("method"),
            fl_algorithm=proto.get("fl_algorithm"), partition=part.get("kind"), alpha=part.get("alpha"),
            clients=proto.get("clients"), participation=proto.get("participation"),
        )  # fmt: skip
        res = CellResult(not_run=cp.not_run if cp.status == "not_run" else None)
        if cp.status == "planned":
            runner = get_runner(str(cp.runner))
            if runner is None:
                raise ConfigError(f"{target}: cell {cell.id} is planned for runner {cp.runner!r}, which has no module",
                                  "re-plan the target")  # fmt: skip
            check_planned_seeds(cp.jobs, f"{target}: cell {cell.id}")  # two runs of one seed are no average
            try:
                res = runner.collect(cell_spec(spec, cell, cp.jobs), cp, labels, plan.settings)
            except CorruptFileError as err:  # the one command that rebuilds it: this target's
                raise CorruptFileError(err.what, rebuild_fix(target)) from None
        tidy_rows.extend(res.rows)
        if res.reason is not None:
            tidy_rows.append(
                make_row(
                    **labels,
                    metric=cell.metric,
                    unit=cell.unit,
                    status="not_run",
                    reason=res.reason,
                    protocol=cp.protocol,
                    **provenance(),
                )
            )
        verdict = judge(
            cell, res.values or None, substitute=cp.substitute, not_run_reason=res.not_run,
            departures=res.departures,
        )  # fmt: skip
        report.outcomes.append(CellOutcome(cp, res.values, verdict, res.note, res.extra))
    try:  # the curves are read (and checked) here too: before the tidy table and the checks are written
        plot_training_curves(
            report, results / "tables" / f"{target}.curves.png", title=f"{spec.paper} Table {spec.table}"
        )
    except CorruptFileError as err:
        raise CorruptFileError(err.what, rebuild_fix(target)) from None
    write_tidy(frame(tidy_rows), results / "tidy" / f"{target}.csv")
    tier = str(plan.settings.get("tier") or "full")
    if (plan.settings.get("table_subset") or "all") != "all":
        tier += f" ({plan.settings['table_subset']} subset: not comparable with the paper)"
    _write_outputs(spec, report, results, tier=tier, settings=comparable_settings(plan.settings))
    return report


#: Plan settings that name this machine's folders, not how the verdicts were computed.
_LOCAL_SETTINGS = ("data_root", "weights_dir")


def comparable_settings(settings: Any) -> dict[str, Any]:
    """The plan settings a checks JSON records (``settings``): what decides which cells ran and how (tier,
    subset, cell filter, device / cpu_training, precisions, ...), without this machine's folders; read by
    :mod:`benchmark.report_guard` to label totals with the configuration that produced them."""
    return {k: v for k, v in sorted(dict(settings).items()) if k not in _LOCAL_SETTINGS}


def rebuild_fix(target: str) -> str:
    """What to do about a damaged run file of ``target``: delete it; the target's build runs its job again."""
    return f"delete it and rerun `snakemake --cores all {target}` (its job runs again)"


def training_curves(report: TableReport) -> dict[str, list[Path]]:
    """Per cell that ran with per-round curves (label = its row / column), the curve files of its seeds."""
    out: dict[str, list[Path]] = {}
    for o in report.outcomes:
        runner = get_runner(str(o.plan.runner)) if o.plan.status == "planned" else None
        if runner is None or not o.values:
            continue
        curves = [Path(c) for c in runner.artefacts(o.plan).get("curves", [])]
        if curves:
            out[" / ".join(map(str, [*o.plan.cell.row, *o.plan.cell.column]))] = curves
    return out


def plot_training_curves(report: TableReport, path: Path, *, title: str) -> Path | None:
    """Accuracy vs rounds / communication / compute of the table's training cells, methods overlaid (legate2023
    Fig. 1, fedcof Fig. 3-4), beside the table; nothing when the table has no training cell that ran."""
    series = training_curves(report)
    if not series:
        return None
    from benchmark.curve_plots import plot_curves  # local: matplotlib, only for tables with training runs

    return plot_curves(series, path, title=title)


def _fmt(mean: float | None, std: float | None, digits: int = 1) -> str:
    if mean is None:
        return ""
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None and std == std else "")


def _cell_text(o: CellOutcome) -> dict[str, str]:
    v = o.verdict
    if v.ours_printed is not None:
        return {
            "ours": v.ours_printed,
            "paper": o.plan.cell.printed,
            "delta": "" if v.delta is None else f"{v.delta:+.4g}",
            "verdict": o.shown_verdict,
        }
    digits = 2 if o.plan.cell.metric == "accuracy" else 3
    ours = _fmt(v.ours_mean, v.ours_std, digits)
    if o.extra.get("std_over") == "clients" and v.ours_mean is not None:
        # the paper's ± is the spread across clients (fedbabu): show ours the same way, and any seed spread apart
        ours = f"{v.ours_mean:.{digits}f}±{o.extra['ours_client_std']:.{digits}f} (clients)"
        if v.n_ours > 1:
            ours += f", ± {v.ours_std:.{digits}f} over {v.n_ours} seeds"
    return {
        "ours": ours,
        "paper": o.plan.cell.printed,
        "delta": "" if v.delta is None else f"{v.delta:+.{digits}f}",
        "verdict": o.shown_verdict,
    }


def _write_outputs(
    spec: Any, report: TableReport, results: Path, tier: str = "full", settings: Any = None
) -> None:
    records = []
    for o in report.outcomes:
        c = o.plan.cell
        t = _cell_text(o)
        records.append({
            "row": " / ".join(map(str, c.row)), "column": " / ".join(map(str, c.column)),
            **t, "weights": o.plan.weights or ("n/a" if o.plan.runner == "cost" else ""),
            "note": "; ".join(x for x in (o.record_label(), o.note or o.verdict.reason or "") if x),
        })  # fmt: skip
    headers = ["row", "column", "ours", "paper", "delta", "verdict", "weights", "note"]
    rows = [[r[h] for h in headers] for r in records]
    counts = report.counts_text()
    md = (
        f"# {spec.target}: {spec.paper} Table {spec.table}\n\n"
        f"Verdicts: {counts}. Tier: {tier}. Tolerance policy: `expected/README.md`.\n\n"
        + tabulate(rows, headers=headers, tablefmt="github")
        + "\n"
        + "".join(f"\n- {n}" for n in spec.notes)
    )
    atomic_write_text(results / "tables" / f"{spec.target}.md", md)
    atomic_write_text(
        results / "tables" / f"{spec.target}.tex",
        tabulate(rows, headers=headers, tablefmt="latex_booktabs") + "\n",
    )
    checks = [
        {
            "key": o.plan.cell.key,
            "cell": o.plan.cell.id,
            "row": list(o.plan.cell.row),
            "column": list(o.plan.cell.column),
            "metric": o.plan.cell.metric,
            "paper": o.plan.cell.mean,
            "printed": o.plan.cell.printed,
            "ours": o.values,
            "ours_mean": o.verdict.ours_mean,
            "ours_std": o.verdict.ours_std,
            "ours_printed": o.verdict.ours_printed,
            "delta": o.verdict.delta,
            "tolerance": o.verdict.tolerance,
            "verdict": str(o.verdict.status),
            "weights": o.plan.weights or ("n/a" if o.plan.runner == "cost" else None),
            "runner": o.plan.runner,
            "protocol": o.plan.protocol,
            "reason": o.verdict.reason,
            "note": o.note,
            **o.extra,
            **o.recorded_json(),
            **({"not_run": o.verdict.not_run.to_dict()} if o.verdict.not_run is not None else {}),
        }
        for o in report.outcomes
    ]
    atomic_write_json(
        results / "checks" / f"{spec.target}.json",
        {"target": spec.target, "tier": tier, "settings": dict(settings or {}), "counts": report.counts(),
         **({"recorded_counts": report.recorded_counts()} if report.recorded_counts() else {}), "cells": checks},
        checksum=True,
    )
