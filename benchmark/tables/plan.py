"""Plan a paper-table target: for every reported cell, the runner, the run files it needs, or why not.

The plan is a pure function of the spec, the expected file, the config and what is on disk, so the
Snakefile (which needs the run files as inputs) and the assembly step (which reads them) compute the same
plan independently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmark.expected import ReportedCell, load_table
from benchmark.tables.availability import choose_weights, dataset_missing
from benchmark.tables.spec import TableSpec, load_spec
from benchmark.workflow import closed_form_path, partition_tag


@dataclass
class CellPlan:
    """How one reported cell is (or is not) produced."""

    cell: ReportedCell  # the reported cell (its protocol is the table's, overlaid by the cell's own)
    runner: str | None
    status: str  # "planned" | "not_run"
    reason: str = ""
    method: str | None = None  # the suite's method name
    dataset: str | None = None
    model: str | None = None
    weights: str | None = None
    jobs: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def substitute(self) -> bool:
        return self.weights == "substitute"


def expected_cells(spec: TableSpec) -> tuple[ReportedCell, ...]:
    """The reported cells the spec's expected file holds."""
    return load_table(spec.expected_paper, spec.expected_table).cells


def _match_view(cell: ReportedCell) -> dict[str, Any]:
    return {**cell.protocol, "metric": cell.metric, "unit": cell.unit, "id": cell.id}


def _alias(spec: TableSpec, kind: str, value: Any) -> Any:
    return spec.aliases.get(kind, {}).get(value, value)


def plan_target(target: str, config: Mapping[str, Any]) -> list[CellPlan]:
    """Plan every cell of ``target`` under ``config`` (data_root, weights_dir, precision, tier)."""
    spec = load_spec(target)
    return [plan_cell(spec, cell, config) for cell in expected_cells(spec)]


def plan_cell(spec: TableSpec, cell: ReportedCell, config: Mapping[str, Any]) -> CellPlan:
    view = _match_view(cell)
    rule = spec.rule_for(view)
    if rule is None:
        return CellPlan(cell, None, "not_run", spec.not_run_reason)
    if cell.illegible or cell.mean is None:
        return CellPlan(cell, rule.runner, "not_run", "the printed value is illegible or absent (see expected/)")
    if rule.runner == "cost":
        return CellPlan(cell, "cost", "planned")
    proto = cell.protocol
    dataset = _alias(spec, "dataset", proto.get("dataset"))
    model = _alias(spec, "model", proto.get("model"))
    method = rule.params.get("methods", {}).get(proto.get("method"))
    plan = CellPlan(cell, rule.runner, "not_run", dataset=dataset, model=model, method=method, params=dict(rule.params))
    if method is None:
        plan.reason = f"method {proto.get('method')!r} is not implemented by the {rule.runner} runner"
        return plan
    root, wdir = config.get("data_root"), config.get("weights_dir")
    missing = dataset_missing(dataset, root)
    if missing:
        plan.reason = missing
        return plan
    weights, why = choose_weights(model, root, wdir)
    if weights is None:
        plan.reason = why
        return plan
    plan.weights = weights
    tier = config.get("tier", "full")
    allowed = [tuple(x) for x in config.get("ci_closed_form", [])]
    if tier == "ci" and (dataset, model) not in allowed:
        plan.reason = (
            f"outside the CI tier (CI extracts features only for {allowed}); "
            "runs with --config tier=full"
        )
        return plan
    if rule.runner == "closed_form":
        preprocess = rule.params.get("preprocess", {})
        pre = preprocess.get(dataset, preprocess.get("default"))
        part = dict(rule.params.get("partition", {}))
        if dataset in rule.params.get("natural_users", []):
            part = {"scheme": "natural"}
        tag = partition_tag(part)
        plan.jobs = [
            closed_form_path(dataset, model, weights, pre, config.get("precision", "fp32"), "all", tag, s)
            for s in spec.seeds
        ]
        plan.status = "planned"
        return plan
    plan.reason = f"runner {rule.runner!r} does not run on this machine yet"
    return plan


def target_jobs(target: str, config: Mapping[str, Any]) -> list[str]:
    """All run files a target needs (deduplicated, sorted)."""
    return sorted({j for p in plan_target(target, config) for j in p.jobs})
