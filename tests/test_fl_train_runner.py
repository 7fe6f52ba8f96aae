"""The ``fl_train`` runner's planning: machine-independent (config only), NOT RUN with an estimate without a GPU,
training protocols that agree with the papers' printed protocol tables, and the learning-rate choice."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
import yaml

from benchmark.errors import ConfigError
from benchmark.fl.train_protocols import get_train_protocol, list_train_protocols, load_train_protocols
from benchmark.jobs import job_from_dict, job_to_dict
from benchmark.runners.fl_train import FLTrainJob, FLTuneJob, LRChoiceJob
from benchmark.tables.plan import plan_target
from benchmark.workflow import load_config

ROOT = Path(__file__).resolve().parents[1]


def _all_jobs(plans):
    seen = {}

    def visit(j):
        if j.path not in seen:
            seen[j.path] = j
            for d in j.inputs():
                visit(d)

    for p in plans:
        for j in p.jobs:
            visit(j)
    return seen


@pytest.fixture()
def cfg(real_data_root, real_weights_dir, monkeypatch):
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    monkeypatch.setenv("FLB_WEIGHTS_DIR", str(real_weights_dir))

    def make(**over):
        return load_config(
            overrides={"data_root": str(real_data_root), "weights_dir": str(real_weights_dir), **over}
        )

    return make


def test_table3_with_device_cuda_plans_every_training_job_on_a_cpu_machine(cfg, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # whatever this machine has
    plans = plan_target("table3", cfg(device="cuda"))
    jobs = _all_jobs(plans)
    kinds = collections.Counter(j.KIND for j in jobs.values())
    # CIFAR-10 x {FedAvg, FedProx, FedAdam} x {FT, FedNCM+FT} x 3 seeds; FedNCM's closed-form jobs beside them
    assert kinds["fl_train"] == 18
    # the FedNCM cells' cached features: the test split's, and each seed's train split (flip_stream: run_seed)
    assert kinds["closed_form"] == 3 and kinds["extract"] == 4
    # the unprinted learning rates are tuned first: one choice per (algorithm, method), 9 or 20 grid points each
    assert kinds["fl_lr_choice"] == 6
    assert kinds["fl_tune"] == 2 * (9 + 9 + 20)
    trains = [j for j in jobs.values() if j.KIND == "fl_train"]
    assert {(j.algorithm, j.method) for j in trains} == {
        (a, m) for a in ("fedavg", "fedprox", "fedadam") for m in ("ft", "fedncm_ft")
    }
    # FedNCM+FT fits its head in the run (the body's features of the clients' images) and reads the tuned lr
    ncm = next(j for j in trains if j.method == "fedncm_ft")
    assert {d.KIND for d in ncm.inputs()} == {"partition", "fl_lr_choice"}
    flowers = [p for p in plans if p.cell.id.startswith("flowers102")]
    assert flowers and all(p.status == "not_run" and "flowers102" in p.reason for p in flowers)


def test_without_a_gpu_the_training_cells_say_what_they_cost_and_how_to_run_them(cfg):
    plans = plan_target("table3", cfg(device="cpu"))
    train = [p for p in plans if p.runner == "fl_train" and p.cell.id.startswith("cifar10")]
    assert len(train) == 6 and not any(p.jobs for p in train)
    for p in train:
        assert "GPU-hours on one H100" in p.reason and "days on this CPU" in p.reason, p.reason
        assert "device=cuda" in p.reason and "slurm" in p.reason and "cpu_training=true" in p.reason
    # the plan does not depend on the machine: no device (auto) plans nothing either
    assert not any(p.jobs for p in plan_target("table3", cfg()) if p.runner == "fl_train")


def test_cpu_training_is_an_explicit_opt_in(cfg):
    plans = plan_target("table3", cfg(device="cpu", cpu_training=True))
    assert sum(len(p.jobs) for p in plans if p.runner == "fl_train") == 18


def test_every_training_protocol_loads_and_its_rounds_are_the_papers():
    """legate2023 Table 4 prints the FedAvg rounds per dataset and method: the protocols use exactly those."""
    assert "legate2023_cifar10" in list_train_protocols()
    table4 = yaml.safe_load((ROOT / "expected" / "legate2023" / "table4.yaml").read_text())
    by_setting = {"cifar10": "legate2023_cifar10", "cifar10_32": "legate2023_cifar10_32",
                  "flowers102": "legate2023_flowers102", "cub200": "legate2023_cub200",
                  "stanford_cars": "legate2023_stanford_cars", "eurosat_sub": "legate2023_eurosat_sub"}  # fmt: skip
    checked = 0
    for cell in table4["cells"]:
        setting, method, _ = cell["id"].split("/")
        proto = get_train_protocol(by_setting[setting]) if setting in by_setting else None
        if proto is None or method not in proto.methods:
            continue
        assert proto.methods[method].rounds == cell["mean"], cell["id"]
        checked += 1
    assert checked >= 15


def test_a_grid_name_that_does_not_exist_is_one_clear_error(tmp_path):
    src = (ROOT / "benchmark" / "protocols" / "fl_train.yaml").read_text()
    (tmp_path / "fl_train.yaml").write_text(
        src.replace("client_lr_grid: legate2023_fedavg_flowers", "client_lr_grid: nope", 1)
    )
    with pytest.raises(ConfigError) as err:
        load_train_protocols(tmp_path)
    msg = str(err.value)
    assert "fl_train.yaml" in msg and "legate2023_flowers102" in msg and "nope" in msg


def test_jobs_round_trip_through_plan_files_and_wildcards():
    job = FLTrainJob(
        dataset="cifar10", model="squeezenet1_1", weights="substitute", preprocess="legate2023_cifar",
        subset="all", protocol="legate2023_cifar10", algorithm="fedadam", method="fedncm_ft",
        train_precision="fp32", ptag="dirichlet-alpha0.1-num_clients100", lr_from="tuned", seed=2,
    )  # fmt: skip
    assert job_from_dict(json.loads(json.dumps(job_to_dict(job)))) == job
    import dataclasses

    assert (
        FLTrainJob.from_wildcards({f.name: str(getattr(job, f.name)) for f in dataclasses.fields(job)}) == job
    )
    choice = job.choice()
    assert isinstance(choice, LRChoiceJob) and len(choice.grid()) == 20
    point = choice.grid()[0]
    assert isinstance(point.client_lr, float) and isinstance(point.server_lr, float)
    fields = {f.name: str(getattr(point, f.name)) for f in dataclasses.fields(point)}
    assert FLTuneJob.from_wildcards(fields) == point  # the rates are floats again, not a tag parsed back
    tiny = FLTuneJob(**{**dataclasses.asdict(point), "client_lr": 0.0001, "server_lr": 1e-06})
    assert tiny.path.endswith("/lrc0.0001_s1e-06.csv")
    assert FLTuneJob.from_wildcards({k: str(v) for k, v in dataclasses.asdict(tiny).items()}) == tiny


def test_choose_lr_takes_the_best_validation_accuracy_first_in_grid_order_on_ties(tmp_path):
    from benchmark.fl.train_tuning import choose_lr
    from benchmark.tidy import make_row, write_tidy

    points = []
    for i, (lr, acc) in enumerate([(0.1, float("nan")), (0.05, 71.0), (0.01, 73.5), (0.005, 73.5)]):
        path = tmp_path / f"p{i}.csv"
        write_tidy(
            [make_row(dataset="cifar10", method="ft", metric="accuracy", value=acc, unit="percent", seed=0)],
            path,
        )
        points.append((lr, 1.0, path))
    rec = choose_lr(points, out=tmp_path / "choice.json", what={"method": "ft"})
    assert rec["choice"] == {"client_lr": 0.01, "server_lr": 1.0}
    assert json.loads((tmp_path / "choice.json").read_text())["choice"]["client_lr"] == 0.01


def test_every_training_cell_of_every_table_plans_when_data_and_weights_are_there(monkeypatch):
    """With every dataset and checkpoint present (patched) and device=cuda, each cell a spec routes to fl_train
    gets one job per seed: no spec names a protocol, method or algorithm the catalogue lacks."""
    from benchmark.tables import plan as planner
    from benchmark.tables.spec import list_specs

    monkeypatch.setattr(planner, "dataset_blocker", lambda name, root=None: None)
    monkeypatch.setattr(planner, "choose_weights", lambda model, root=None, wdir=None: ("torchvision", ""))
    cfg = load_config(overrides={"device": "cuda"})
    seen = collections.Counter()
    for target in list_specs():
        for p in plan_target(target, cfg):
            if p.runner != "fl_train":
                continue
            assert p.status == "planned" and len(p.jobs) == len(p.jobs[0:]) > 0, (target, p.cell.id, p.reason)
            seen[target] += 1
    # legate2023 Tables 2, 3, 6, 8 and their workshop / thesis copies, fedcof Tables 4, 7, 8
    assert {"table2", "table3", "table6", "table8", "legate2023ws_table1", "legate2023ws_table2",
            "legate2023ws_tableE_4", "bernier2024_table3_2", "bernier2024_table3_3", "bernier2024_tableA_3",
            "bernier2024_tableA_5", "fedcof_table4", "fedcof_table7", "fedcof_table8"} <= set(seen)  # fmt: skip
    assert seen["table3"] == 12 and seen["table2"] == 18 and seen["fedcof_table4"] == 15
