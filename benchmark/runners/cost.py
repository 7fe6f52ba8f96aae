"""The ``cost`` runner: printed compute / communication cells, recomputed by the cost model
(:mod:`benchmark.tables.cost_runner`, :mod:`benchmark.costs`). Costs are arithmetic: they need no dataset,
weights or tier permission to be planned, and most plan no job.

fedcof's partition-dependent costs (uplink of the training-free methods: the (client, present class) pairs of
the fedcof sharder's partitions, seeds of the table) are jobs: for such a cell this runner plans, per seed,
the :class:`~benchmark.jobs.PartitionJob` of the partition (``dirichlet_fedcof`` on the full train split, the
same file a closed-form run on it reads) and a :class:`ClassCountsJob` that counts each client's classes in
it. At assembly :meth:`CostRunner.collect` reads those counts; it loads no dataset. A cell whose partition
cannot be drawn here (dataset absent) plans no job and keeps the typed reason, found while planning, in the plan
(``params["partition_unavailable"]``, :meth:`~benchmark.reasons.NotRunReason.to_dict`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from benchmark.data.partition import Partition
from benchmark.errors import ConfigError
from benchmark.io import atomic_write_json, read_verified_json
from benchmark.jobs import Job, PartitionJob, parse_partition_tag, partition_tag, register_job
from benchmark.provenance import peak_rss_mb
from benchmark.reasons import NotRunReason
from benchmark.runners import CellResult, Runner, register_runner


@register_job
@dataclass(frozen=True)
class ClassCountsJob(Job):
    """Per-client class counts of one partition file (its input), with its (client, present class) pair
    count, the partition's sha256 and the checksum of the data it indexes: what a partition-dependent cost
    cell needs (fedcof Table 1 messages, App. I: a client sends statistics for the classes it holds)."""

    KIND: ClassVar[str] = "class_counts"
    PATTERN: ClassVar[str] = "results/costs/class_counts/{dataset}/{subset}/{ptag}/seed{seed}.json"
    dataset: str
    subset: str
    ptag: str
    seed: int

    def partition(self) -> PartitionJob:
        return PartitionJob(self.dataset, self.subset, self.ptag, self.seed)

    def inputs(self) -> tuple[Job, ...]:
        return (self.partition(),)

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark.pipeline import split_labels  # local: heavy import (pandas, scipy, torch, torchvision)
        from benchmark.tables.cost_runner import class_pairs  # local: heavy import (torch, torchvision)

        src = self.partition().path
        part = Partition.from_json(src)
        data = split_labels(self.dataset, "train", self.subset, 0, config.get("data_root"))
        if part.data is not None and part.data.data_checksum != data.checksum:
            raise ConfigError(
                f"{src} indexes data of checksum {part.data.data_checksum[:12]}, the labels under the data "
                f"root have {data.checksum[:12]}",
                "delete the partition file and rebuild it from this data root",
            )
        counts = part.client_class_counts(data.labels, data.num_classes)
        atomic_write_json(
            self.path,
            {
                "partition": src, "seed": self.seed, "partition_sha256": part.sha256,
                "data_checksum": data.checksum, "num_classes": int(data.num_classes),
                "pairs": class_pairs(part, data.labels, data.num_classes),
                "counts": counts.astype(int).tolist(),
            },
            checksum=True,
        )  # fmt: skip


def class_counts_jobs(need: Any) -> tuple[ClassCountsJob, ...]:
    """The jobs of a :class:`~benchmark.tables.cost_runner.PartitionNeed`, one per seed."""
    tag = partition_tag(need.partition)
    return tuple(ClassCountsJob(need.dataset, need.SUBSET, tag, s) for s in need.seeds)


def pairs_from_jobs(plan: Any) -> Any:
    """The :data:`~benchmark.tables.cost_runner.PairsSource` of a planned cell: the reason recorded while
    planning, or the pair counts its :class:`ClassCountsJob` outputs hold (no dataset is read)."""
    from benchmark.tables.cost_runner import ClassPairs  # local: heavy import (torch, torchvision)

    def source(need: Any) -> Any:
        unavailable = plan.params.get("partition_unavailable")
        if unavailable is not None:
            return NotRunReason.from_dict(unavailable)
        jobs = [j for j in plan.jobs if isinstance(j, ClassCountsJob)]
        if not jobs or [j.seed for j in jobs] != list(need.seeds):
            raise ConfigError(
                f"the plan of cell {plan.cell.id} has no class-count jobs for seeds {list(need.seeds)}",
                "re-plan the target (delete results/plans/<target>.json)",
            )
        out, checksums = [], set()
        for j in jobs:
            if parse_partition_tag(j.ptag)[1] != {"alpha": need.alpha, "num_clients": need.num_clients}:
                raise ConfigError(
                    f"plan job {j.path} is not the partition {need.partition}", "re-plan the target"
                )
            if not Path(j.path).is_file():
                raise ConfigError(
                    f"no class counts {j.path} for cell {plan.cell.id}",
                    "build the target with snakemake or `flb run`, which run its jobs first",
                )
            raw = read_verified_json(j.path)
            out.append(ClassPairs(int(raw["seed"]), int(raw["pairs"]), str(raw["partition_sha256"])))
            checksums.add(str(raw["data_checksum"]))
        if len(checksums) != 1:
            raise ConfigError(
                f"the class counts of cell {plan.cell.id} come from different data ({sorted(checksums)})",
                "rebuild the partitions from one data root",
            )
        return tuple(out), checksums.pop()

    return source


class CostRunner(Runner):
    name = "cost"
    params: ClassVar[dict[str, Any]] = {}
    needs_data = False

    def plan(self, spec, rule, plan, config: Mapping[str, Any]):
        from benchmark.tables.cost_runner import needs_partitions  # local: heavy import (torch, torchvision)

        need = needs_partitions(spec.expected_paper, spec.expected_table, _cell_dict(plan.cell), spec.seeds)
        if need is not None:
            reason = need.unavailable(config.get("data_root"))
            plan.params = {**plan.params, "partition": need.partition}
            if reason is not None:
                plan.params["partition_unavailable"] = reason.to_dict()
            plan.jobs = () if reason else class_counts_jobs(need)
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings) -> CellResult:
        from benchmark.tables.assemble import provenance  # local: heavy import (pandas)
        from benchmark.tables.cost_runner import cost_result  # local: heavy import (torch, torchvision)
        from benchmark.tidy import make_row  # local: heavy import (pandas)

        cell = plan.cell
        t0 = time.perf_counter()
        res = cost_result(
            spec.expected_paper,
            spec.expected_table,
            _cell_dict(cell),
            data_root=settings.get("data_root"),
            seeds=spec.seeds,
            pairs=pairs_from_jobs(plan),
        )
        wall = round(time.perf_counter() - t0, 4)
        out = CellResult(note=res.note)
        out.extra = {
            "classification": res.classification, "model_facts": res.model_facts,
            "facts_from_torchvision": res.facts_from_torchvision, "departures": list(res.departures),
        }  # fmt: skip
        if res.status != "ok":
            out.not_run = res.not_run
            return out
        out.values = list(res.values)
        out.departures = res.departures
        for v, seed, phash in zip(out.values, res.seeds, res.partition_hashes, strict=True):
            out.rows.append(
                make_row(
                    **labels,
                    weights="n/a (arithmetic)",
                    seed=seed,
                    metric=cell.metric,
                    value=v,
                    unit=cell.unit,
                    protocol="cost model",
                    note=f"{res.note} | model facts: {res.model_facts}",
                    data_checksum=res.data_checksum,
                    partition_hash=phash,
                    wall_s=wall,
                    peak_rss_mb=round(peak_rss_mb(), 1),
                    **provenance(),
                )
            )
        return out


def _cell_dict(cell: Any) -> dict[str, Any]:
    return {
        "id": cell.id, "row": list(cell.row), "column": list(cell.column), "metric": cell.metric, "unit": cell.unit,
        "printed": cell.printed, "mean": cell.mean, "protocol": dict(cell.protocol),
    }  # fmt: skip


register_runner(CostRunner())
