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
from typing import TYPE_CHECKING, Any

from benchmark.jobs import FLRunJob, partition_tag
from benchmark.reasons import outside_ci_tier
from benchmark.runners import CellResult, register_runner
from benchmark.runners._features import ProtocolRunner, collect_runs, report_metric, seeded_jobs

if TYPE_CHECKING:
    from benchmark.fl.protocols import Protocol


class LPFeaturesRunner(ProtocolRunner):
    name = "lp_features"
    catalogue = "benchmark/fl/protocols.py"

    @staticmethod
    def get_protocol(name: str) -> Protocol:
        """The catalogue's protocol ``name`` (the catalogue is validated when first read, which imports torch:
        a table step that plans or collects no LP cell never does)."""
        from benchmark.fl.protocols import get_protocol  # local: torch, through the catalogue's checks

        return get_protocol(name)

    def plan_under(self, fl: Protocol, spec, plan, config: Mapping[str, Any]):
        fl.method(str(plan.method))  # unknown method: a clear error naming the valid ones
        pair = f"{fl.name}/{plan.method}"
        if config.get("tier", "full") == "ci" and pair not in config.get("ci_training", []):
            plan.not_run = outside_ci_tier(
                f"training run {pair}", "minutes to an hour of CPU per seed, see config 'ci_training'"
            )
            return plan
        plan.protocol = fl.name
        plan.jobs = seeded_jobs(
            FLRunJob, spec, plan, config,
            preprocess=fl.preprocess, ptag=partition_tag(fl.partition()), protocol=fl.name, method=str(plan.method),
        )  # fmt: skip
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings) -> CellResult:
        """Each seed's accuracy at the round ``fl_report_round`` names (default the last; issue 26)."""
        return collect_runs(spec, plan, report_metric(settings))

    def artefacts(self, plan) -> dict[str, list[str]]:
        """The per-round curve files of the cell's seeds (plotted beside the table)."""
        return {"curves": [j.curve_path for j in plan.jobs if Path(j.curve_path).is_file()]}


register_runner(LPFeaturesRunner())
