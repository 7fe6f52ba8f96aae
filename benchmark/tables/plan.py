"""Plan a paper-table target: for every reported cell, the runner, the typed jobs it needs, or why not.

The plan is a function of the spec, the expected file, the config and what is on disk (which datasets and
weights are here). It is computed once, when Snakemake builds the DAG (or by ``flb run``), and written to
``results/plans/<target>.json`` (:func:`write_plan`); the assembly step reads that file (:func:`read_plan`)
and never plans again. Jobs are :mod:`benchmark.jobs` values; each cell's runner is a plug-in of
:mod:`benchmark.runners`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError
from benchmark.expected import ReportedCell, load_table
from benchmark.io import atomic_write_text
from benchmark.jobs import Job, job_from_dict, job_to_dict
from benchmark.runners import get_runner
from benchmark.tables.availability import choose_weights, dataset_blocker
from benchmark.tables.spec import SPEC_DIR, TableSpec, load_spec


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
    jobs: tuple[Job, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    protocol: str | None = (
        None  # closed-form or training protocol (closed_form/protocols.py, fl/protocols.py)
    )

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


def plan_target(target: str, config: Mapping[str, Any], folder: Path = SPEC_DIR) -> list[CellPlan]:
    """Plan every cell of ``target`` under ``config`` (data_root, weights_dir, precision, tier)."""
    spec = load_spec(target, folder)
    return [plan_cell(spec, cell, config) for cell in expected_cells(spec)]


def runner_protocol(spec: TableSpec, cell: ReportedCell) -> dict[str, Any] | None:
    """The clients / images per class / participation the spec's runner would use for ``cell`` (``None``:
    no runner, or one that takes the cell's own stated inputs, like the cost runner). A value ``None``
    means the runner does not fix it (closed-form methods send once per client: no participation)."""
    rule = spec.rule_for(_match_view(cell))
    runner = None if rule is None else get_runner(rule.runner)
    if runner is None:
        return None
    return runner.runner_protocol(spec, cell, rule, _alias(spec, "dataset", cell.protocol.get("dataset")))


def protocol_disagreements(spec: TableSpec, cell: ReportedCell) -> list[str]:
    """Where the runner's protocol differs from the one ``cell`` states (clients, images per class taken
    from the train split (``subset.per_class``; runners use the whole split), participation); empty when
    they agree or the cell states none of them."""
    ours = runner_protocol(spec, cell)
    if ours is None:
        return []
    stated = cell.protocol
    out = []
    if stated.get("clients") is not None and ours["clients"] is not None:
        if int(stated["clients"]) != int(ours["clients"]):
            out.append(f"{stated['clients']} clients stated, the runner uses {ours['clients']}")
    per_class = (stated.get("subset") or {}).get("per_class")
    if per_class is not None and ours["per_class"] != per_class:
        out.append(f"{per_class} images per class stated, the runner uses the whole train split")
    if stated.get("participation") is not None and ours["participation"] is not None:
        if abs(float(stated["participation"]) - float(ours["participation"])) > 1e-9:
            out.append(
                f"participation {stated['participation']} stated, the runner uses {ours['participation']}"
            )
    return out


def plan_cell(spec: TableSpec, cell: ReportedCell, config: Mapping[str, Any]) -> CellPlan:
    view = _match_view(cell)
    rule = spec.rule_for(view)
    if rule is None:
        return CellPlan(cell, None, "not_run", spec.not_run_reason)
    wanted = config.get("cell_filter")
    if wanted and not re.search(str(wanted), cell.id):
        return CellPlan(cell, rule.runner, "not_run", f"not selected by cell_filter={wanted!r}")
    differ = protocol_disagreements(spec, cell)
    if differ:
        return CellPlan(
            cell, rule.runner, "not_run", f"the runner cannot take the cell's protocol: {'; '.join(differ)}"
        )
    if cell.illegible or cell.mean is None:
        return CellPlan(
            cell, rule.runner, "not_run", "the printed value is illegible or absent (see expected/)"
        )
    runner = get_runner(rule.runner)
    if runner is not None and not runner.needs_data:
        return runner.plan(spec, rule, CellPlan(cell, rule.runner, "not_run"), config)
    proto = cell.protocol
    dataset = _alias(spec, "dataset", proto.get("dataset"))
    model = _alias(spec, "model", proto.get("model"))
    method = rule.params.get("methods", {}).get(proto.get("method"))
    plan = CellPlan(
        cell, rule.runner, "not_run", dataset=dataset, model=model, method=method, params=dict(rule.params)
    )
    if method is None:
        plan.reason = f"method {proto.get('method')!r} is not implemented by the {rule.runner} runner"
        return plan
    root, wdir = config.get("data_root"), config.get("weights_dir")
    missing = dataset_blocker(dataset, root)  # None also when a fetch_data job will get it
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
        plan.reason = ci_reason(dataset, model, allowed)
        return plan
    if runner is None:
        plan.reason = f"runner {rule.runner!r} does not run on this machine yet"
        return plan
    return runner.plan(spec, rule, plan, config)


#: Why a (dataset, backbone) pair's features are not extracted in the CI tier (measured on the 2-core CPU
#: machine CI runs on; tier=full runs them).
CI_EXCLUDED_WHY: dict[str, str] = {
    "mobilenet_v2": "MobileNetV2 feature extraction takes about 35 min per CIFAR dataset on CI's CPU, beyond "
    "CI's ~45 min budget",
}


def ci_reason(dataset: str | None, model: str | None, allowed: list[tuple[str, ...]]) -> str:
    """The NOT RUN reason of a closed-form cell outside the CI tier."""
    why = CI_EXCLUDED_WHY.get(str(model), f"CI extracts features only for {allowed}")
    return f"outside the CI tier ({dataset} x {model}: {why}); runs with --config tier=full"


def choose_preprocess(presets: Mapping[str, str], dataset: str | None, image_size: Any = None) -> str | None:
    """The spec's preset for a cell: ``<dataset>@<image_size>`` (e.g. ``cifar10@32`` for legate2023's CIFAR-10
    x32 row, fed at 32 px), else ``<dataset>``, else ``default``."""
    if image_size is not None and f"{dataset}@{image_size}" in presets:
        return presets[f"{dataset}@{image_size}"]
    return presets.get(str(dataset), presets.get("default"))


def target_jobs(target: str, config: Mapping[str, Any]) -> list[str]:
    """All run files a target needs (deduplicated, sorted)."""
    return sorted({j.path for p in plan_target(target, config) for j in p.jobs})


# ------------------------------------------------------------------------------------- the plan file

#: The config keys a plan depends on and the assembly step reads back (``settings`` of the plan file).
PLAN_SETTINGS = (
    "data_root",
    "weights_dir",
    "precision",
    "tier",
    "table_subset",
    "ci_closed_form",
    "ci_training",
    "device",
    "cpu_training",
    "train_precision",
    "pfl_selection",
    "pfl_ncm_metric",
    "cell_filter",
    "zo_k_shot",
    "zo_lr",
    "zo_rounds",
    "zo_encoder",
    "zo_eval_every",
    "zo_test_limit",
)


@dataclass(frozen=True)
class TargetPlan:
    """A target's plan as written to ``results/plans/<target>.json``."""

    target: str
    settings: Mapping[str, Any]
    cells: tuple[CellPlan, ...]
    spec_folder: Path = SPEC_DIR

    @property
    def jobs(self) -> list[Job]:
        """Every job of the target, deduplicated, in path order."""
        return sorted({j.path: j for c in self.cells for j in c.jobs}.values(), key=lambda j: j.path)


def make_plan(target: str, config: Mapping[str, Any], folder: Path = SPEC_DIR) -> TargetPlan:
    settings = {k: config.get(k) for k in PLAN_SETTINGS}
    settings["tier"] = settings["tier"] or "full"
    settings["table_subset"] = settings["table_subset"] or "all"
    return TargetPlan(target, settings, tuple(plan_target(target, config, folder)), folder)


def plan_path(target: str, results: Path = Path("results")) -> Path:
    return results / "plans" / f"{target}.json"


def _cell_plan_dict(p: CellPlan) -> dict[str, Any]:
    return {
        "cell": p.cell.id, "runner": p.runner, "status": p.status, "reason": p.reason, "method": p.method,
        "dataset": p.dataset, "model": p.model, "weights": p.weights, "protocol": p.protocol,
        "params": p.params, "jobs": [job_to_dict(j) for j in p.jobs],
    }  # fmt: skip


def plan_json(plan: TargetPlan) -> str:
    body = {
        "target": plan.target, "spec_folder": str(plan.spec_folder), "settings": dict(plan.settings),
        "cells": [_cell_plan_dict(c) for c in plan.cells],
    }  # fmt: skip
    return json.dumps(body, indent=1, sort_keys=True, default=str) + "\n"


def write_plan(plan: TargetPlan, results: Path = Path("results")) -> Path:
    """Write ``results/plans/<target>.json``, only when its content changes (an unchanged plan keeps its
    time stamp, so Snakemake does not re-assemble the table; a changed plan re-assembles it)."""
    path = plan_path(plan.target, results)
    text = plan_json(plan)
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return path


def read_plan(target: str, results: Path = Path("results")) -> TargetPlan:
    """The plan written for ``target``; every cell is rebuilt from ``expected/`` by its id."""
    path = plan_path(target, results)
    if not path.is_file():
        raise ConfigError(
            f"no plan {path} for target {target!r}",
            f"build the target with `snakemake --cores all {target}` or `flb run {target}`, which write it",
        )
    raw = json.loads(path.read_text())
    folder = Path(raw.get("spec_folder") or SPEC_DIR)
    cells = {c.id: c for c in expected_cells(load_spec(target, folder))}
    out = []
    for c in raw["cells"]:
        if c["cell"] not in cells:
            raise ConfigError(
                f"{path}: cell {c['cell']!r} is not in the expected file any more", "re-plan the target"
            )
        out.append(
            CellPlan(
                cells[c["cell"]],
                c["runner"],
                c["status"],
                c["reason"],
                method=c["method"],
                dataset=c["dataset"],
                model=c["model"],
                weights=c["weights"],
                jobs=tuple(job_from_dict(j) for j in c["jobs"]),
                params=c["params"],
                protocol=c["protocol"],
            )
        )
    if len(out) != len(cells):
        raise ConfigError(
            f"{path}: {len(out)} cells planned, the expected file has {len(cells)}", "re-plan the target"
        )
    return TargetPlan(raw["target"], raw["settings"], tuple(out), folder)


def plan_inputs(target: str, config: Mapping[str, Any]) -> list[str]:
    """The inputs of the Snakefile's ``paper_table`` rule: the plan file (written here, once per DAG) and the
    output of every job the plan holds."""
    plan = make_plan(target, config)
    return [str(write_plan(plan)), *(j.path for j in plan.jobs)]
