"""Partition-dependent cost cells are jobs (issue 10): the ``cost`` runner plans the partitions a fedcof cost
cell rests on and a class-count job per seed, and the table stage computes the cell from those files alone."""

from __future__ import annotations

import pytest

from benchmark.data import registry as data_registry
from benchmark.errors import ConfigError
from benchmark.jobs import PartitionJob, run_jobs
from benchmark.runners.cost import ClassCountsJob, pairs_from_jobs
from benchmark.tables.cost_runner import cost_result
from benchmark.tables.plan import expected_cells, plan_cell
from benchmark.tables.spec import load_spec

CELL = "cifar100/squeezenet1_1/fedncm/comm_mb"


def _plan(data_root: str, cell_id: str = CELL, target: str = "fedcof_table3"):
    spec = load_spec(target)
    cell = next(c for c in expected_cells(spec) if c.id == cell_id)
    return spec, plan_cell(spec, cell, {"data_root": data_root, "tier": "ci"})


def _cell_dict(cell):
    from benchmark.runners.cost import _cell_dict

    return _cell_dict(cell)


def test_cost_cell_plans_partition_and_class_count_jobs(real_data_root) -> None:
    _, plan = _plan(str(real_data_root))
    assert plan.runner == "cost" and plan.status == "planned"
    assert [type(j) for j in plan.jobs] == [ClassCountsJob] * 5 and [j.seed for j in plan.jobs] == [
        0,
        1,
        2,
        3,
        4,
    ]
    part = plan.jobs[0].inputs()[0]
    assert isinstance(part, PartitionJob)
    # the same partition file the closed-form runs of the table read
    assert part.path == "results/partitions/cifar100/all/dirichlet_fedcof-alpha0.1-num_clients100/seed0.json"
    # cells whose cost does not depend on the partition plan nothing
    _, fedavg = _plan(str(real_data_root), "cifar100/fed_lp/comm_mb", "fedcof_table6")
    assert fedavg.runner == "cost" and fedavg.jobs == () and "partition" not in fedavg.params


def test_cost_cell_without_the_dataset_keeps_the_reason_in_the_plan(tmp_path) -> None:
    _, plan = _plan(str(tmp_path))
    assert plan.jobs == () and plan.params["partition_unavailable"]["kind"] == "missing data"
    got = cost_result(
        "fedcof", "3", _cell_dict(plan.cell), pairs=pairs_from_jobs(plan), data_root=str(tmp_path)
    )
    want = cost_result("fedcof", "3", _cell_dict(plan.cell), data_root=str(tmp_path))
    assert got == want and got.status == "not_run" and "partition" in got.reason


def test_cost_cell_from_job_outputs_loads_no_dataset(real_data_root, tmp_path, monkeypatch) -> None:
    """Run the planned jobs, then compute the cell with dataset loading disabled: same result as the
    in-process replay (values, hashes, checksum, note)."""
    _, plan = _plan(str(real_data_root))
    want = cost_result("fedcof", "3", _cell_dict(plan.cell), data_root=str(real_data_root))
    monkeypatch.chdir(tmp_path)
    run_jobs(list(plan.jobs), {"data_root": str(real_data_root)})

    def no_data(*args, **kwargs):
        raise AssertionError("the table stage loaded a dataset")

    monkeypatch.setattr(data_registry, "load_dataset", no_data)
    got = cost_result("fedcof", "3", _cell_dict(plan.cell), pairs=pairs_from_jobs(plan), data_root=None)
    assert got.values == want.values and got.partition_hashes == want.partition_hashes
    assert got.data_checksum == want.data_checksum and got.note == want.note and got.extra == want.extra
    # a class-count file that disagrees changes the number: the cell is computed from the files
    path = tmp_path / plan.jobs[0].path
    from benchmark.io import atomic_write_text

    # rewritten with its checksum sidecar (an edit that leaves the sidecar is a damaged file: test_integrity)
    atomic_write_text(path, path.read_text().replace('"pairs": 2870', '"pairs": 3000'), checksum=True)
    changed = cost_result("fedcof", "3", _cell_dict(plan.cell), pairs=pairs_from_jobs(plan))
    assert changed.values != want.values


def test_class_count_job_rebuilds_from_wildcards(tmp_path, monkeypatch) -> None:
    job = ClassCountsJob("cifar100", "all", "dirichlet_fedcof-alpha0.1-num_clients100", 3)
    assert (
        ClassCountsJob.from_wildcards({"dataset": "cifar100", "subset": "all", "ptag": job.ptag, "seed": "3"})
        == job
    )
    monkeypatch.chdir(tmp_path)  # no job output here: one clear error, not a raw FileNotFoundError
    with pytest.raises(ConfigError, match="no class counts"):
        pairs_from_jobs(type("P", (), {"params": {}, "jobs": (job,), "cell": type("C", (), {"id": "x"})})())(
            type("N", (), {"seeds": (3,), "alpha": 0.1, "num_clients": 100, "partition": {}})()
        )
