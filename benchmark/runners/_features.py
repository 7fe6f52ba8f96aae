"""What the training runners share (``closed_form``, ``lp_features``, ``fl_train``): the protocol a spec maps a
cell's setting to, one job per seed, and reading their run files into a cell's values and rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from benchmark.errors import ConfigError, CorruptFileError
from benchmark.features.flip_config import flip_stream_of
from benchmark.io import RERUN
from benchmark.reasons import NotRunReason, ReasonKind
from benchmark.runners import CellResult, Runner
from benchmark.schema import check_one_per_seed

if TYPE_CHECKING:
    from benchmark.expected import ReportedCell
    from benchmark.tables.plan import CellPlan
    from benchmark.tables.spec import TableSpec


#: ``fl_report_round`` (config.yaml) -> the metric of a training run's tidy rows that is the cell's value.
REPORT_ROUNDS: dict[str, str] = {"last": "accuracy_last", "best_on_test": "accuracy_best"}


def report_metric(settings: Mapping[str, Any]) -> str:
    """The recorded metric a training cell reports under ``settings['fl_report_round']`` (issue 26): ``last``
    (default: the legate2023 / FLSim code reports the last round's model, papers-code.md §1.6) or
    ``best_on_test`` (the best test accuracy over the evaluations: selection on the test set). Every run records
    both, so the choice needs no re-run. An unknown value is one :class:`~benchmark.errors.ConfigError`."""
    value = settings.get("fl_report_round") or "last"
    if value not in REPORT_ROUNDS:
        raise ConfigError(f"fl_report_round {value!r} unknown", f"set fl_report_round to one of: {', '.join(REPORT_ROUNDS)}")
    return REPORT_ROUNDS[value]


def run_preprocess(preset: str, config: Mapping[str, Any]) -> str:
    """The preprocessing a run of ``preset`` uses under the config's ``flip_stream`` (:func:`flip_stream_of`)
    and ``resize`` (default ``float``) (issue 26; :func:`benchmark.features.preprocess.preprocess_variant`)."""
    from benchmark.features.preprocess import preprocess_variant  # local: heavy import (torch)

    return preprocess_variant(preset, flip_stream=flip_stream_of(config), resize=str(config.get("resize") or "float"))


def seeded_jobs(
    job_type: type, spec: TableSpec, plan: CellPlan, config: Mapping[str, Any], **fields: Any
) -> tuple[Any, ...]:
    """One ``job_type`` per seed of ``spec`` on the cell's features (dataset, backbone, weights, the run's
    precision and subset); ``fields`` are the job type's own (preprocess, partition tag, protocol, ...). The
    ``preprocess`` field is the preset under the config's ``flip_stream`` / ``resize`` (:func:`run_preprocess`)."""
    if "preprocess" in fields:
        fields = {**fields, "preprocess": run_preprocess(str(fields["preprocess"]), config)}
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


def collect_runs(spec: TableSpec, plan: CellPlan, metric: str = "accuracy") -> CellResult:
    """The cell's accuracy per seed (the method's ``metric`` rows with status ok, by seed: ``accuracy``, or for a
    training cell :func:`report_metric`'s ``accuracy_last`` / ``accuracy_best``), and every metric
    the runs recorded for the method (accuracy, and for training runs also best / last accuracy, uplink /
    downlink bytes, compute in F, rounds), labelled with the cell.

    Each run file holds at most one such row; when some hold one, every one must (a run file that lost the
    row, e.g. truncated at a row boundary before checksums existed, would silently drop its seed): otherwise
    one :class:`~benchmark.errors.CorruptFileError` naming the file."""
    import pandas as pd  # local: heavy import (pandas)

    from benchmark.tidy import read_tidy  # local: heavy import (pandas)

    frames = [read_tidy(j.path) for j in plan.jobs]
    found = [len(_accuracy(f, plan.method, metric)) for f in frames]
    for job, frame, n in zip(plan.jobs, frames, found, strict=True):
        check_one_per_seed(_accuracy(frame, plan.method, metric)["seed"], job.path)  # one seed twice
        if n > 1 or (n == 0 and any(found)):
            raise CorruptFileError(
                f"run file {job.path} has {n} {metric} rows of method {plan.method!r} (one expected, as in the "
                "cell's other run files)",
                RERUN,
            )
    runs = pd.concat(frames, ignore_index=True)
    sel = _accuracy(runs, plan.method, metric)
    check_one_per_seed(sel["seed"], f"cell {plan.cell.id} (runs of method {plan.method})")
    values = [float(v) for v in sel.sort_values("seed")["value"]]
    rows: list[dict[str, Any]] = []
    for rec in runs[runs["method"] == plan.method].to_dict("records"):
        rec.update(paper=spec.paper, table=spec.table, cell=plan.cell.id)
        rows.append(rec)
    why = None if values else NotRunReason(ReasonKind.NO_VALUE, "a value", "the runs produced no value for this cell")
    return CellResult(values, rows, not_run=why)


def _accuracy(runs: Any, method: Any, metric: str = "accuracy") -> Any:
    """The rows of ``runs`` that are a value of the cell: ``method``'s ``metric``, status ok."""
    return runs[(runs["method"] == method) & (runs["metric"] == metric) & (runs["status"] == "ok")]


class ProtocolRunner(Runner):
    """A training runner whose spec maps each cell's setting (``<dataset>@<image_size>``, or ``<dataset>`` when the
    table states no size) to a protocol of one catalogue (``protocols:``); ``methods:`` maps the paper's labels.
    A cell mapped to no protocol, or to one of another (dataset, backbone), is NOT RUN saying so; the others are
    planned by :meth:`plan_under` (the runner's own part)."""

    params: ClassVar[dict[str, Any]] = {"methods": dict[str, str], "protocols": dict[str, str]}
    #: Where the catalogue's protocols live (named in the NOT RUN reason of a cell mapped to none).
    catalogue: ClassVar[str] = ""
    #: The catalogue's protocol of a name (``staticmethod(get_...)``).
    get_protocol: Callable[[str], Any]

    def plan_under(self, proto: Any, spec: TableSpec, plan: CellPlan, config: Mapping[str, Any]) -> CellPlan:
        """Plan a cell the spec maps to ``proto`` (a protocol for the cell's dataset and backbone)."""
        raise NotImplementedError

    @staticmethod
    def _protocol_of(params: Mapping[str, Any], dataset: Any, cell: ReportedCell) -> tuple[str, str | None]:
        size = cell.protocol.get("image_size")
        key = f"{dataset}@{size}" if size is not None else str(dataset)
        return key, params.get("protocols", {}).get(key)

    def runner_protocol(self, spec, cell, rule, dataset) -> dict[str, Any] | None:
        """The clients and participation of the protocol the spec maps the cell to (``None``: none)."""
        name = self._protocol_of(rule.params, dataset, cell)[1]
        if name is None:
            return None
        proto = self.get_protocol(name)
        return {"clients": proto.num_clients, "per_class": None, "participation": proto.participation}

    def plan(self, spec, rule, plan, config: Mapping[str, Any]) -> CellPlan:
        key, name = self._protocol_of(plan.params, plan.dataset, plan.cell)
        if name is None:
            plan.not_run = NotRunReason(ReasonKind.NOT_IMPLEMENTED, f"a training protocol for {key}",
                                        f"no training protocol for {key} in this spec ({self.catalogue})")  # fmt: skip
            return plan
        proto = self.get_protocol(name)
        if (proto.dataset, proto.backbone) != (plan.dataset, plan.model):
            plan.not_run = NotRunReason(
                ReasonKind.PROTOCOL_MISMATCH, f"a protocol for {plan.dataset} x {plan.model}",
                f"protocol {name} is for {proto.dataset} x {proto.backbone}, not {plan.dataset} x {plan.model}",
            )  # fmt: skip
            return plan
        return self.plan_under(proto, spec, plan, config)
