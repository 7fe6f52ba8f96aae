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
from benchmark.tables.availability import choose_weights, dataset_blocker
from benchmark.tables.spec import TableSpec, load_spec
from benchmark.workflow import closed_form_path, fl_run_path, partition_tag


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


def plan_target(target: str, config: Mapping[str, Any]) -> list[CellPlan]:
    """Plan every cell of ``target`` under ``config`` (data_root, weights_dir, precision, tier)."""
    spec = load_spec(target)
    return [plan_cell(spec, cell, config) for cell in expected_cells(spec)]


def runner_protocol(spec: TableSpec, cell: ReportedCell) -> dict[str, Any] | None:
    """The clients / images per class / participation the spec's runner would use for ``cell`` (``None``:
    no runner, or the cost runner, whose arithmetic takes the cell's own stated inputs). A value ``None``
    means the runner does not fix it (closed-form methods send once per client: no participation)."""
    rule = spec.rule_for(_match_view(cell))
    if rule is None or rule.runner == "cost":
        return None
    dataset = _alias(spec, "dataset", cell.protocol.get("dataset"))
    if rule.runner == "closed_form":
        natural = dataset in rule.params.get("natural_users", [])
        clients = None if natural else rule.params.get("partition", {}).get("num_clients")
        return {"clients": clients, "per_class": None, "participation": None}
    size = cell.protocol.get("image_size")
    name = rule.params.get("protocols", {}).get(f"{dataset}@{size}" if size is not None else str(dataset))
    if name is None:
        return None
    from benchmark.fl.protocols import get_protocol

    fl = get_protocol(name)
    return {"clients": fl.num_clients, "per_class": None, "participation": fl.participation}


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
    differ = protocol_disagreements(spec, cell)
    if differ:
        return CellPlan(
            cell, rule.runner, "not_run", f"the runner cannot take the cell's protocol: {'; '.join(differ)}"
        )
    if cell.illegible or cell.mean is None:
        return CellPlan(
            cell, rule.runner, "not_run", "the printed value is illegible or absent (see expected/)"
        )
    if rule.runner == "cost":
        return CellPlan(cell, "cost", "planned")
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
    if rule.runner == "closed_form":
        from benchmark.closed_form.protocols import PAPER_PROTOCOL, check_protocol

        plan.protocol = check_protocol(
            str(rule.params.get("protocol") or PAPER_PROTOCOL.get(spec.paper, "suite"))
        )
        pre = choose_preprocess(rule.params.get("preprocess", {}), dataset, proto.get("image_size"))
        part = dict(rule.params.get("partition", {}))
        if dataset in rule.params.get("natural_users", []):
            part = {"scheme": "natural"}
        tag = partition_tag(part)
        plan.jobs = [
            closed_form_path(
                dataset,
                model,
                weights,
                pre,
                config.get("precision", "fp32"),
                str(config.get("table_subset", "all")),
                tag,
                s,
                plan.protocol,
            )
            for s in spec.seeds
        ]
        plan.status = "planned"
        return plan
    if rule.runner == "lp_features":
        return _plan_lp_features(plan, proto, config, spec.seeds)
    plan.reason = f"runner {rule.runner!r} does not run on this machine yet"
    return plan


def _plan_lp_features(
    plan: CellPlan, proto: Mapping[str, Any], config: Mapping[str, Any], seeds: tuple[int, ...]
) -> CellPlan:
    """A federated run on cached features (``flb fl-run``, :mod:`benchmark.fl.jobs`) per seed.

    The spec maps ``<dataset>@<image_size>`` (or ``<dataset>`` when the table states no size) to a protocol
    of :mod:`benchmark.fl.protocols`, which fixes the features (preprocessing), the partition and every
    training knob; a cell with no protocol for its setting is NOT RUN with that reason. In the CI tier only
    the ``protocol/method`` pairs of ``config['ci_training']`` run (each is minutes of CPU).
    """
    from benchmark.fl.protocols import get_protocol

    size = proto.get("image_size")
    key = f"{plan.dataset}@{size}" if size is not None else str(plan.dataset)
    name = plan.params.get("protocols", {}).get(key)
    if name is None:
        plan.reason = f"no training protocol for {key} in this spec (benchmark/fl/protocols.py)"
        return plan
    fl = get_protocol(name)
    if (fl.dataset, fl.backbone) != (plan.dataset, plan.model):
        plan.reason = (
            f"protocol {name} is for {fl.dataset} x {fl.backbone}, not {plan.dataset} x {plan.model}"
        )
        return plan
    fl.method(str(plan.method))  # unknown method: a clear error naming the valid ones
    pair = f"{name}/{plan.method}"
    if config.get("tier", "full") == "ci" and pair not in config.get("ci_training", []):
        plan.reason = (
            f"outside the CI tier (training run {pair}: minutes to an hour of CPU per seed, see "
            "config 'ci_training'); runs with --config tier=full"
        )
        return plan
    plan.protocol = name
    part = {"scheme": fl.partition_scheme, "num_clients": fl.num_clients}
    if fl.alpha is not None:
        part["alpha"] = fl.alpha
    tag = partition_tag(part)
    subset = str(config.get("table_subset", "all"))
    precision = config.get("precision", "fp32")
    plan.jobs = [
        fl_run_path(
            plan.dataset,
            plan.model,
            plan.weights,
            fl.preprocess,
            precision,
            subset,
            tag,
            name,
            plan.method,
            s,
        )  # type: ignore[arg-type]
        for s in seeds
    ]
    plan.status = "planned"
    return plan


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
    return sorted({j for p in plan_target(target, config) for j in p.jobs})
