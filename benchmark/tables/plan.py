"""Plan a paper-table target: for every reported cell, the runner, the typed jobs it needs, or why not.

The plan is a function of the spec, the expected file, the config and what is on disk (which datasets and
weights are here). It is computed once, when Snakemake builds the DAG (or by ``flb run``), and written to
``results/plans/<target>.json`` (:func:`write_plan`); the assembly step reads that file (:func:`read_plan`)
and never plans again. Jobs are :mod:`benchmark.jobs` values; each cell's runner is a plug-in of
:mod:`benchmark.runners`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError, ConfigError
from benchmark.expected import ReportedCell, load_table
from benchmark.features.flip_config import flip_stream_of
from benchmark.io import atomic_write_text, sha256_bytes
from benchmark.jobs import Job, job_from_dict, job_to_dict
from benchmark.reasons import (
    NotRunReason,
    ReasonKind,
    not_implemented_method,
    outside_ci_tier,
    reason_from_json,
)
from benchmark.runners import get_runner
from benchmark.tables.availability import choose_weights, dataset_blocker, training_allowed, weights_blocker
from benchmark.tables.recorded import RecordedJob, StaleRecord
from benchmark.tables.spec import SPEC_DIR, TableSpec, load_spec


@dataclass
class CellPlan:
    """How one reported cell is (or is not) produced."""

    cell: ReportedCell  # the reported cell (its protocol is the table's, overlaid by the cell's own)
    runner: str | None
    status: str  # "planned" | "not_run"
    #: Why the cell is NOT RUN (typed; :attr:`reason` is its text); ``None`` for a planned cell.
    not_run: NotRunReason | None = None
    method: str | None = None  # the suite's method name
    dataset: str | None = None
    model: str | None = None
    weights: str | None = None
    jobs: tuple[Job, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    protocol: str | None = (
        None  # closed-form or training protocol (closed_form/protocols.py, fl/protocols.py)
    )
    #: The jobs filled from the ledger of recorded runs, and the stale records matching its jobs (issue 24;
    #: :mod:`benchmark.tables.records`).
    recorded: tuple[RecordedJob, ...] = ()
    stale: tuple[StaleRecord, ...] = ()

    @property
    def reason(self) -> str:
        """The NOT RUN reason's text (:meth:`NotRunReason.render`), ``""`` for a planned cell."""
        return self.not_run.render() if self.not_run is not None else ""

    @property
    def substitute(self) -> bool:
        return self.weights == "substitute"

    @property
    def from_records(self) -> bool:
        """Every job of the cell was filled from a record (none computed in this build): its verdict is a
        recorded one (``PASS (recorded)``)."""
        return bool(self.jobs) and {r.job for r in self.recorded} >= {j.path for j in self.jobs}


def expected_cells(spec: TableSpec) -> tuple[ReportedCell, ...]:
    """The reported cells the spec's expected file holds."""
    return load_table(spec.expected_paper, spec.expected_table).cells


def _match_view(cell: ReportedCell) -> dict[str, Any]:
    return {**cell.protocol, "metric": cell.metric, "unit": cell.unit, "id": cell.id}


def _alias(spec: TableSpec, kind: str, value: Any) -> Any:
    return spec.aliases.get(kind, {}).get(value, value)


def plan_target(target: str, config: Mapping[str, Any], folder: Path = SPEC_DIR,
                seeds: tuple[int, ...] | None = None) -> list[CellPlan]:  # fmt: skip
    """Plan every cell of ``target`` under ``config`` (data_root, weights_dir, precision, tier); ``seeds``
    replaces the seeds of every cell (:meth:`TableSpec.with_seeds`; ``None``: the spec's)."""
    spec = load_spec(target, folder)
    if seeds is not None:
        spec = spec.with_seeds(seeds)
    return [plan_cell(spec, cell, config) for cell in expected_cells(spec)]


def cell_spec(spec: TableSpec, cell: ReportedCell, jobs: tuple[Job, ...] = ()) -> TableSpec:
    """``spec`` as the runner of ``cell`` sees it: with the seeds of the runner entry that takes the cell when
    the entry lists its own, or with the seeds the paper's unit-seeds file gives the training unit of ``jobs``
    (the cell's planned jobs: :mod:`benchmark.tables.unit_seeds`), else unchanged. Planning and collecting both
    go through it, so a cell's jobs and its collection agree on the seeds; a cell given seeds both ways is one
    error naming the cell and both places."""
    rule = spec.rule_for(_match_view(cell))
    own = rule.seeds if rule is not None else None
    unit = spec.unit_seeds.seeds_for(jobs) if spec.unit_seeds is not None else None
    if own is not None and unit is not None:
        raise ConfigError(
            f"{spec.target}: cell {cell.id} gets seeds {list(own)} from its runner entry and {list(unit)} from "
            f"{spec.unit_seeds.source}",  # type: ignore[union-attr]
            "give the cell's seeds in one place: the unit-seeds file when the number is a training unit's",
        )
    seeds = unit if unit is not None else own
    return replace(spec, seeds=seeds) if seeds is not None else spec


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
    """How ``cell`` is produced under ``config``: planned with the spec's seeds (or its runner entry's), then,
    when the paper's unit-seeds file gives the training unit of those jobs other seeds, planned with those. A
    training cell NOT RUN because this machine does not train is matched by the jobs it would train, so its
    reason states the cost of the unit's seeds."""
    first = cell_spec(spec, cell)
    plan = _plan_cell(first, cell, config)
    if spec.unit_seeds is None:
        return plan
    jobs = plan.jobs
    if not jobs and plan.status == "not_run" and plan.runner is not None and not training_allowed(config):
        jobs = _plan_cell(first, cell, {**config, "cpu_training": True}).jobs
    unit = cell_spec(spec, cell, jobs)
    return plan if unit.seeds == first.seeds else _plan_cell(unit, cell, config)


def _plan_cell(spec: TableSpec, cell: ReportedCell, config: Mapping[str, Any]) -> CellPlan:
    """:func:`plan_cell` with ``spec``'s seeds (already the cell's)."""
    view = _match_view(cell)
    rule = spec.rule_for(view)
    if rule is None:
        return CellPlan(cell, None, "not_run", spec.not_run_reason)
    wanted = config.get("cell_filter")
    if wanted and not re.search(str(wanted), cell.id):
        why = NotRunReason(ReasonKind.NOT_SELECTED, str(wanted), f"not selected by cell_filter={wanted!r}")
        return CellPlan(cell, rule.runner, "not_run", why)
    differ = protocol_disagreements(spec, cell)
    if differ:
        why = NotRunReason(ReasonKind.PROTOCOL_MISMATCH, "a runner protocol matching the cell's",
                           f"the runner cannot take the cell's protocol: {'; '.join(differ)}")  # fmt: skip
        return CellPlan(cell, rule.runner, "not_run", why)
    if cell.illegible or cell.mean is None:
        why = NotRunReason(ReasonKind.ILLEGIBLE, "the printed value",
                           "the printed value is illegible or absent (see expected/)")  # fmt: skip
        return CellPlan(cell, rule.runner, "not_run", why)
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
        plan.not_run = not_implemented_method(proto.get("method"), f"the {rule.runner} runner")
        return plan
    root, wdir = config.get("data_root"), config.get("weights_dir")
    missing = dataset_blocker(dataset, root)  # None also when a fetch_data job will get it
    if missing:
        plan.not_run = missing
        return plan
    weights, _ = choose_weights(model, root, wdir)
    if weights is None:
        plan.not_run = weights_blocker(model, root, wdir)
        return plan
    plan.weights = weights
    tier = config.get("tier", "full")
    allowed = [tuple(x) for x in config.get("ci_closed_form", [])]
    if tier == "ci" and (dataset, model) not in allowed:
        plan.not_run = ci_reason(dataset, model, allowed)
        return plan
    if runner is None:
        plan.not_run = NotRunReason(ReasonKind.NOT_IMPLEMENTED, f"the {rule.runner} runner",
                                    f"runner {rule.runner!r} does not run on this machine yet")  # fmt: skip
        return plan
    return runner.plan(spec, rule, plan, config)


#: Why a (dataset, backbone) pair's features are not extracted in the CI tier (measured on the 2-core CPU
#: machine CI runs on; tier=full runs them).
CI_EXCLUDED_WHY: dict[str, str] = {
    "mobilenet_v2": "MobileNetV2 feature extraction takes about 35 min per CIFAR dataset on CI's CPU, beyond "
    "CI's ~45 min budget",
}


def ci_reason(dataset: str | None, model: str | None, allowed: list[tuple[str, ...]]) -> NotRunReason:
    """The NOT RUN reason of a closed-form cell outside the CI tier."""
    why = CI_EXCLUDED_WHY.get(str(model), f"CI extracts features only for {allowed}")
    return outside_ci_tier(f"{dataset} x {model}", why)


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
    "pfl_lg_fedavg",
    "pfl_fedrep_finetune",
    "pfl_fedrep_momentum",
    "pfl_per_fedavg_eval",
    "pfl_ditto",
    "fl_report_round",
    "flip_stream",
    "resize",
    "fedncm_bias",
    "lr_search",
    "lr_halving_eta",
    "lr_halving_keep",
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
    settings["flip_stream"] = flip_stream_of(config)  # what ``auto`` resolved to under the tier
    return TargetPlan(target, settings, tuple(plan_target(target, config, folder)), folder)


def _cell_plan_dict(p: CellPlan) -> dict[str, Any]:
    """A cell of the plan file; ``recorded`` and ``stale`` only when not empty, so that a plan using no record
    is the same file (and name) as before the ledger existed."""
    out = {
        "cell": p.cell.id, "runner": p.runner, "status": p.status,
        "not_run": p.not_run.to_dict() if p.not_run is not None else None, "method": p.method,
        "dataset": p.dataset, "model": p.model, "weights": p.weights, "protocol": p.protocol,
        "params": p.params, "jobs": [job_to_dict(j) for j in p.jobs],
    }  # fmt: skip
    if p.recorded:
        out["recorded"] = [r.to_dict() for r in p.recorded]
    if p.stale:
        out["stale"] = [r.to_dict() for r in p.stale]
    return out


def plan_json(plan: TargetPlan) -> str:
    body = {
        "target": plan.target, "spec_folder": str(plan.spec_folder), "settings": dict(plan.settings),
        "cells": [_cell_plan_dict(c) for c in plan.cells],
    }  # fmt: skip
    return json.dumps(body, indent=1, sort_keys=True, default=str) + "\n"


#: A plan file's name: the target and the first 12 hex digits of the sha256 of its content.
_PLAN_NAME = re.compile(r"^(?P<target>.+)-(?P<sha>[0-9a-f]{12})\.json$")


def plan_path(target: str, results: Path = Path("results"), text: str | None = None) -> Path:
    """``results/plans/<target>-<sha12>.json``, the immutable file of the plan whose content is ``text``;
    without ``text``, ``results/plans/<target>.json``: the pointer to the target's newest plan."""
    if text is None:
        return results / "plans" / f"{target}.json"
    return results / "plans" / f"{target}-{sha256_bytes(text.encode())[:12]}.json"


def _replan_fix(target: str) -> str:
    return f"re-plan it with `snakemake --cores all {target}` (or `flb run {target}`)"


def write_plan(plan: TargetPlan, results: Path = Path("results")) -> Path:
    """Write the plan to its content-addressed file ``results/plans/<target>-<sha12>.json`` and return that path.

    A plan file is never changed once written (a build passes its path to ``flb table --plan``, so a dry run with
    another config can only add a file beside it); a damaged one (content no longer matching its name) is
    written again. ``results/plans/<target>.json`` points (a symbolic link, replaced atomically) at the newest
    plan, for ``flb table <target>`` without ``--plan`` and for reading. Time stamps keep Snakemake's rerun
    rule of the plan as an input: an unchanged plan keeps its time stamp (the table is not re-assembled); a
    plan other than the newest one is touched when it becomes the newest, so switching back to an earlier
    config re-assembles the table, as a changed plan does."""
    text = plan_json(plan)
    path = plan_path(plan.target, results, text)
    pointer = plan_path(plan.target, results)
    newest = _newest(pointer)
    if not path.is_file() or path.read_bytes() != text.encode():
        atomic_write_text(path, text)
    elif newest != path.name:
        os.utime(path)
    if newest != path.name:
        _point(pointer, path)
    return path


def _newest(pointer: Path) -> str | None:
    """The name of the plan file the pointer stands for: the link's target, or for a plain file (a copy, or
    the single plan file of earlier versions) the content-addressed name of its content; ``None`` if absent."""
    try:
        return os.readlink(pointer)
    except OSError:
        pass
    try:
        return f"{pointer.stem}-{sha256_bytes(pointer.read_bytes())[:12]}.json"
    except OSError:
        return None


def _point(pointer: Path, path: Path) -> None:
    """Make ``pointer`` name ``path`` (beside it), atomically; a copy where links are not supported."""
    tmp = pointer.with_name(f".{pointer.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        os.symlink(path.name, tmp)
    except OSError:
        atomic_write_text(pointer, path.read_text())
        return
    os.replace(tmp, pointer)


def read_plan(target: str, results: Path = Path("results"), path: Path | str | None = None) -> TargetPlan:
    """The plan of ``target`` in ``path`` (default: the newest, ``results/plans/<target>.json``); every cell
    is rebuilt from ``expected/`` by its id. A file whose content does not match the checksum in its name, or
    that is not a complete plan of ``target``, is a :class:`ConfigError` naming it and the command that
    re-plans."""
    path = Path(path) if path is not None else plan_path(target, results)
    if not path.is_file():
        raise ConfigError(
            f"no plan {path} for target {target!r}",
            f"build the target with `snakemake --cores all {target}` or `flb run {target}`, which write it",
        )
    raw = _load_plan_file(target, path)
    folder = Path(raw.get("spec_folder") or SPEC_DIR)
    cells = {c.id: c for c in expected_cells(load_spec(target, folder))}
    out = []
    for c in raw["cells"]:
        if c["cell"] not in cells:
            raise ConfigError(
                f"{path}: cell {c['cell']!r} is not in the expected file any more", _replan_fix(target)
            )
        out.append(
            CellPlan(
                cells[c["cell"]],
                c["runner"],
                c["status"],
                _plan_reason(path, target, c),
                method=c["method"],
                dataset=c["dataset"],
                model=c["model"],
                weights=c["weights"],
                jobs=tuple(job_from_dict(j) for j in c["jobs"]),
                params=c["params"],
                protocol=c["protocol"],
                recorded=tuple(RecordedJob.from_dict(r) for r in c.get("recorded") or ()),
                stale=tuple(StaleRecord.from_dict(r) for r in c.get("stale") or ()),
            )
        )
    if len(out) != len(cells):
        raise ConfigError(
            f"{path}: {len(out)} cells planned, the expected file has {len(cells)}", _replan_fix(target)
        )
    return TargetPlan(raw["target"], raw["settings"], tuple(out), folder)


#: The fields of a plan file and of each of its cells (:func:`plan_json`).
_PLAN_FIELDS = {"target", "spec_folder", "settings", "cells"}
_CELL_FIELDS = {"cell", "runner", "status", "not_run", "method", "dataset", "model", "weights", "protocol", "params",
                "jobs"}  # fmt: skip


def _plan_reason(path: Path, target: str, cell: Mapping[str, Any]) -> NotRunReason | None:
    """The typed NOT RUN reason of a plan file's cell; a malformed one is a :class:`ConfigError` naming the file."""
    try:
        return reason_from_json(cell["not_run"])
    except BenchmarkError as err:
        raise ConfigError(f"plan file {path}: cell {cell['cell']!r}: {err.what}", _replan_fix(target)) from None


def _load_plan_file(target: str, path: Path) -> dict[str, Any]:
    """The parsed plan file, checked: its checksum (the name's ``<sha12>``, resolving the pointer), a JSON
    object of the plan fields for ``target``; else one :class:`ConfigError` naming the file."""
    data = path.read_bytes()
    named = _PLAN_NAME.match(path.resolve().name)
    shown = f"{path} -> {os.readlink(path)}" if path.is_symlink() else str(path)
    damaged = f"plan file {shown} is damaged"
    if named and sha256_bytes(data)[:12] != named["sha"]:
        raise ConfigError(f"{damaged} (truncated or changed: its content does not match the checksum "
                          f"{named['sha']} in its name)", _replan_fix(target))  # fmt: skip
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(f"{damaged} (not JSON: {err})", _replan_fix(target)) from None
    ok = (
        isinstance(raw, dict) and _PLAN_FIELDS <= set(raw) and isinstance(raw["cells"], list)
        and all(isinstance(c, dict) and _CELL_FIELDS <= set(c) for c in raw["cells"])
    )  # fmt: skip
    if not ok:
        raise ConfigError(f"{damaged} (not a complete plan: fields missing)", _replan_fix(target))
    if raw["target"] != target:
        raise ConfigError(f"plan file {shown} is the plan of {raw['target']!r}, not of {target!r}",
                          f"pass a plan of {target} (results/plans/{target}-*.json)")  # fmt: skip
    return raw
