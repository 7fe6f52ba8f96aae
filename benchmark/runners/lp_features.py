"""The ``lp_features`` runner: federated training on cached features (LP, MLP head, LP after a closed-form
head), one :class:`~benchmark.jobs.FLRunJob` per seed (``flb fl-run``, :mod:`benchmark.fl.jobs`).

The spec maps ``<dataset>@<image_size>`` (or ``<dataset>`` when the table states no size) to a protocol of
:mod:`benchmark.fl.protocols`, which fixes the features (preprocessing), the partition and every training
knob; a cell with no protocol for its setting is NOT RUN with that reason. In the CI tier only the
``protocol/method`` pairs of ``config['ci_training']`` run (each is minutes of CPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from benchmark.jobs import FLRunJob, partition_tag
from benchmark.reasons import outside_ci_tier
from benchmark.runners import CellResult, Runner, register_runner
from benchmark.runners._features import collect_runs, no_protocol, protocol_elsewhere, seeded_jobs


def _protocol_key(dataset: Any, image_size: Any) -> str:
    return f"{dataset}@{image_size}" if image_size is not None else str(dataset)


class LPFeaturesRunner(Runner):
    name = "lp_features"
    params: ClassVar[dict[str, Any]] = {"methods": dict[str, str], "protocols": dict[str, str]}

    def runner_protocol(self, spec, cell, rule, dataset) -> dict[str, Any] | None:
        name = rule.params.get("protocols", {}).get(_protocol_key(dataset, cell.protocol.get("image_size")))
        if name is None:
            return None
        from benchmark.fl.protocols import get_protocol  # local: heavy import (scipy, torch, torchvision)

        fl = get_protocol(name)
        return {"clients": fl.num_clients, "per_class": None, "participation": fl.participation}

    def plan(self, spec, rule, plan, config: Mapping[str, Any]):
        from benchmark.fl.protocols import get_protocol  # local: heavy import (scipy, torch, torchvision)

        key = _protocol_key(plan.dataset, plan.cell.protocol.get("image_size"))
        name = plan.params.get("protocols", {}).get(key)
        if name is None:
            plan.not_run = no_protocol(key, "benchmark/fl/protocols.py")
            return plan
        fl = get_protocol(name)
        if (fl.dataset, fl.backbone) != (plan.dataset, plan.model):
            plan.not_run = protocol_elsewhere(name, (fl.dataset, fl.backbone), (plan.dataset, plan.model))
            return plan
        fl.method(str(plan.method))  # unknown method: a clear error naming the valid ones
        pair = f"{name}/{plan.method}"
        if config.get("tier", "full") == "ci" and pair not in config.get("ci_training", []):
            plan.not_run = outside_ci_tier(
                f"training run {pair}", "minutes to an hour of CPU per seed, see config 'ci_training'"
            )
            return plan
        plan.protocol = name
        part: dict[str, Any] = {"scheme": fl.partition_scheme, "num_clients": fl.num_clients}
        if fl.alpha is not None:
            part["alpha"] = fl.alpha
        plan.jobs = seeded_jobs(
            FLRunJob, spec, plan, config,
            preprocess=fl.preprocess, ptag=partition_tag(part), protocol=name, method=str(plan.method),
        )  # fmt: skip
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings) -> CellResult:
        return collect_runs(spec, plan)

    def artefacts(self, plan) -> dict[str, list[str]]:
        """The per-round curve files of the cell's seeds (plotted beside the table)."""
        return {"curves": [j.curve_path for j in plan.jobs if Path(j.curve_path).is_file()]}


register_runner(LPFeaturesRunner())
