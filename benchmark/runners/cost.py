"""The ``cost`` runner: printed compute / communication cells, recomputed by the cost model
(:mod:`benchmark.tables.cost_runner`, :mod:`benchmark.costs`). Costs are arithmetic: they need no dataset,
weights or tier permission to be planned, and plan no job (fedcof's partition-dependent costs replay the
partition from the dataset's labels at assembly, where those are under the plan's ``data_root``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from benchmark.runners import CellResult, Runner, register_runner


class CostRunner(Runner):
    name = "cost"
    needs_data = False

    def plan(self, spec, rule, plan, config: Mapping[str, Any]):
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings) -> CellResult:
        from benchmark.provenance import peak_rss_mb
        from benchmark.tables.assemble import provenance
        from benchmark.tables.cost_runner import cost_result
        from benchmark.tidy import make_row

        cell = plan.cell
        t0 = time.perf_counter()
        res = cost_result(
            spec.expected_paper,
            spec.expected_table,
            _cell_dict(cell),
            data_root=settings.get("data_root"),
            seeds=spec.seeds,
        )
        wall = round(time.perf_counter() - t0, 4)
        out = CellResult(note=res.note)
        out.extra = {
            "classification": res.classification, "model_facts": res.model_facts,
            "facts_from_torchvision": res.facts_from_torchvision, "departures": list(res.departures),
        }  # fmt: skip
        if res.status != "ok":
            out.reason = res.reason
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
