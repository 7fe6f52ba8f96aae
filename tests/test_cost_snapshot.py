"""Every cost cell of every table spec, recomputed and judged, against a committed snapshot.

Cost cells are arithmetic (integer parameter counts, stated dataset facts, Decimal rounding), so their
values, verdicts, reasons and notes are the same on every machine: this pins them while the cost model's code
is reorganised (issue 10: "no verdict and no number changes"). The snapshot has two parts: ``no_data`` (no
dataset on disk: the partition-dependent fedcof cells take their partition-free branch) and ``data`` (the
real CIFAR-100 labels under ``FLB_DATA_ROOT``: the fedcof sharder's partitions are replayed); the second is
skipped without the data.

A changed cell fails the test with the cells that differ. A deliberate change to a cost cell (a corrected
transcription, a new convention) rewrites the snapshot, in the same commit, with
``python tests/test_cost_snapshot.py --write`` (and ``FLB_DATA_ROOT`` set for the ``data`` part).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmark.tables.cost_runner import cost_result
from benchmark.tables.plan import expected_cells
from benchmark.tables.spec import list_specs, load_spec
from benchmark.verdict import judge

SNAPSHOT = Path(__file__).parent / "data" / "cost_cells_snapshot.json"


def _cell_dict(cell: Any) -> dict[str, Any]:
    return {
        "id": cell.id, "row": list(cell.row), "column": list(cell.column), "metric": cell.metric,
        "unit": cell.unit, "printed": cell.printed, "mean": cell.mean, "protocol": dict(cell.protocol),
    }  # fmt: skip


def compute_snapshot(data_root: str) -> dict[str, dict[str, Any]]:
    """``{target/cell id: outcome}`` for every cell a spec gives to the cost runner (``data_root`` written
    as ``<data root>`` in the texts, so that the snapshot does not depend on where the data lies)."""
    out: dict[str, dict[str, Any]] = {}
    for target in list_specs():
        spec = load_spec(target)
        for cell in expected_cells(spec):
            rule = spec.rule_for({**cell.protocol, "metric": cell.metric, "unit": cell.unit, "id": cell.id})
            if rule is None or rule.runner != "cost" or cell.illegible or cell.mean is None:
                continue
            res = cost_result(
                spec.expected_paper,
                spec.expected_table,
                _cell_dict(cell),
                data_root=data_root,
                seeds=spec.seeds,
            )
            if res.status == "ok":
                v = judge(
                    cell, list(res.values), substitute=False, not_run_reason=None, departures=res.departures
                )
            else:
                v = judge(cell, None, substitute=False, not_run_reason=res.not_run)
            outcome = {
                "verdict": str(v.status),
                "ours": [repr(x) for x in res.values],
                "ours_printed": v.ours_printed,
                "reason": v.reason,
                "classification": res.classification,
                "departures": list(res.departures),
                "note": res.note,
                "model_facts": res.model_facts,
                "partition_hashes": [str(h) for h in res.partition_hashes],
            }
            text = json.dumps(outcome, ensure_ascii=False).replace(json.dumps(data_root)[1:-1], "<data root>")
            out[f"{target}/{cell.id}"] = json.loads(text)
    return out


def _diff(want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    lines = [f"missing: {k}" for k in sorted(set(want) - set(got))]
    lines += [f"new: {k}" for k in sorted(set(got) - set(want))]
    for k in sorted(set(want) & set(got)):
        for field, w in want[k].items():
            if got[k].get(field) != w:
                lines.append(f"{k}: {field}: {w!r} -> {got[k].get(field)!r}")
    return lines


def _check(part: str, data_root: str) -> None:
    want = json.loads(SNAPSHOT.read_text())[part]
    diff = _diff(want, compute_snapshot(data_root))
    assert not diff, f"{len(diff)} cost cells changed:\n" + "\n".join(diff[:40])


def test_cost_cells_unchanged_without_data(tmp_path) -> None:
    _check("no_data", str(tmp_path))


def test_cost_cells_unchanged_with_replayed_partitions(real_data_root) -> None:
    _check("data", str(real_data_root))


def test_snapshot_comparison_can_fail() -> None:
    """A changed value, verdict or reason is reported (the comparison is not vacuous)."""
    want = json.loads(SNAPSHOT.read_text())["no_data"]
    key = next(iter(want))
    got = {k: dict(v) for k, v in want.items()}
    got[key]["verdict"] = "FAIL" if got[key]["verdict"] != "FAIL" else "PASS"
    assert _diff(want, got) == [f"{key}: verdict: {want[key]['verdict']!r} -> {got[key]['verdict']!r}"]
    assert len(want) > 100  # every cost-bearing table contributes


if __name__ == "__main__" and "--write" in sys.argv:
    root = os.environ.get("FLB_DATA_ROOT")
    with tempfile.TemporaryDirectory() as empty:
        snap = {"no_data": compute_snapshot(empty), "data": compute_snapshot(root) if root else {}}
    tmp = SNAPSHOT.with_suffix(".tmp")
    tmp.write_text(json.dumps(snap, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    tmp.replace(SNAPSHOT)
    print(f"wrote {SNAPSHOT}: {len(snap['no_data'])} cells without data, {len(snap['data'])} with data")
