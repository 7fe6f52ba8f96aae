"""fedbabu App. A.3's LG-FedAvg after FedAvg (``pfl_lg_fedavg: after_fedavg``, the default): planned as a training
whose input is the FedAvg training of the same setting, seed and selection with four times its rounds; started
from that training's selected model (checked against its record), trained at a constant lr 0.001 with the head
aggregated and every client's body its own. ``from_scratch`` keeps the suite's earlier version, a named departure.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
import yaml

from benchmark.errors import ConfigError
from benchmark.pfl.algorithms import ALGORITHMS
from benchmark.pfl.partition import DirichletPartitioner
from benchmark.pfl.parts import is_head
from benchmark.pfl.trainer import WARM_START_DEFAULTS, PFLConfig
from benchmark.runners.pfl import PFLTrainJob, cell_departures, chosen_algorithm
from benchmark.tables.plan import plan_target

CELL = "s-10/f-0_1/tau-10/personalized-accuracy/lg-fedavg"


def _plan(data_root, **config):
    """The cell's plan with the real CIFAR-10 (planning a cell checks that its dataset is there)."""
    base = yaml.safe_load(open("config/config.yaml"))
    cfg = {**base, "cpu_training": True, "data_root": str(data_root), **config}
    return next(p for p in plan_target("fedbabu_table13", cfg) if p.cell.id.endswith(CELL))


def test_lg_fedavg_is_planned_after_the_fedavg_training_of_its_setting_by_default(real_data_root):
    plan = _plan(real_data_root)
    assert plan.status == "planned" and plan.method == "lg_fedavg_after_fedavg"
    (evaluation,) = plan.jobs
    train = evaluation.training()
    (source,) = train.inputs()
    assert (train.algorithm, train.rounds, source.algorithm, source.rounds) == ("lg_fedavg_after_fedavg", 8, "fedavg", 32)
    same = {k: v for k, v in train.train_fields().items() if k not in ("algorithm", "rounds")}
    assert same == {k: v for k, v in source.train_fields().items() if k not in ("algorithm", "rounds")}
    cfg = train.pfl_config({})
    assert (cfg.lr, cfg.lr_decay, cfg.init_model) == (0.001, False, source.path)
    assert [cfg.lr_at(r) for r in range(8)] == [0.001] * 8  # no x0.1 steps at R/2 and 3R/4
    assert cell_departures(plan, [8]) == ()  # the paper's protocol: a match is a PASS
    assert not train.writes_sibling({"pfl_both_selections": True})  # the other selection starts from another model


def test_without_training_the_cell_says_it_runs_after_fedavg_and_counts_both_trainings(real_data_root):
    plan = _plan(real_data_root, cpu_training=False, device="cpu")
    assert plan.status != "planned"
    detail = plan.not_run.detail
    assert "after the fedavg training of its setting" in detail and "from scratch" not in detail
    # FedAvg's 32 rounds x 10 clients x 10 epochs x 500 images, and LG-FedAvg's 8 rounds: 1.6 M + 0.4 M
    assert "1 seed(s) x 2.00 M training images" in detail


def test_from_scratch_is_the_named_departure_and_a_wrong_value_is_one_error(real_data_root):
    plan = _plan(real_data_root, pfl_lg_fedavg="from_scratch")
    (evaluation,) = plan.jobs
    train = evaluation.training()
    assert (plan.method, train.rounds, train.inputs()) == ("lg_fedavg", 32, ())
    assert train.pfl_config({}).to_dict().keys().isdisjoint(WARM_START_DEFAULTS)  # as recorded before the option
    assert cell_departures(plan, [32]) == ("lg_fedavg_from_scratch",)
    with pytest.raises(ConfigError, match=r"pfl_lg_fedavg='paper'.*after_fedavg, from_scratch"):
        chosen_algorithm("lg_fedavg", {"pfl_lg_fedavg": "paper"})
    assert chosen_algorithm("fedavg", {"pfl_lg_fedavg": "from_scratch"}) == "fedavg"


def test_a_cell_whose_rounds_are_not_a_multiple_of_four_is_not_run():
    from benchmark.runners.pfl import cell_jobs

    proto = {"partition": {"kind": "shards", "shards_per_user": 10}, "participation": 0.1, "local_epochs": 10,
             "rounds": 30, "stage": "personalized"}  # fmt: skip
    jobs, why = cell_jobs(proto, "lg_fedavg_after_fedavg", "4convnet", "cifar10", (0,), {})
    assert jobs == () and "not a multiple of 4" in why.detail


@pytest.fixture()
def small_partition(monkeypatch):
    from benchmark.pfl import run

    monkeypatch.setattr(run, "make_partitioner",
                        lambda *, num_clients, beta, **_: DirichletPartitioner(num_clients, beta, 60, 40))  # fmt: skip
    return {"kind": "dirichlet", "beta": 0.5}


def _cfg(**kw) -> PFLConfig:
    base = {"dataset": "cifar10", "model": "4convnet", "clients": 2, "participation": 1.0, "local_epochs": 1,
            "rounds": 4, "seed": 0, "selection": "last", "eval_every": 4}  # fmt: skip
    return PFLConfig(**{**base, **kw})


@pytest.mark.realdata
@pytest.mark.usefixtures("one_torch_thread")
def test_the_run_starts_from_the_fedavg_model_and_trains_the_head_globally(real_data_root, tmp_path, small_partition):
    """A 4-round FedAvg, then LG-FedAvg after it for 1 round through ``train_step``: the record names the source
    and its model's sha256; every client's body and the global head start as FedAvg's model (a trainer built
    from it holds exactly those tensors); the round's lr is 0.001; the head is aggregated, the bodies personal."""
    from benchmark.pfl import run
    from benchmark.pfl.trainer import PFLTrainer

    fedavg = tmp_path / "fedavg" / "seed0.json"
    src = run.train_step(_cfg(algorithm="fedavg"), small_partition, fedavg, data_root=str(real_data_root),
                         device="cpu", progress=False)  # fmt: skip
    lg_cfg = _cfg(algorithm="lg_fedavg_after_fedavg", rounds=1, eval_every=1, lr=0.001, lr_decay=False,
                  init_model=str(fedavg))  # fmt: skip
    rec = run.train_step(lg_cfg, small_partition, tmp_path / "lg" / "seed0.json", data_root=str(real_data_root),
                         device="cpu", progress=False)  # fmt: skip
    assert rec["config"]["init_model"] == str(fedavg) and rec["config"]["init_model_sha256"] == src["model_sha256"]
    assert [h["lr"] for h in rec["history"]] == [0.001]

    _, sel = run.load_selected(fedavg)
    train, test, split, meta = run.load_run_data(lg_cfg, small_partition, torch.device("cpu"), str(real_data_root))
    cfg, init = run.warm_start(lg_cfg, meta)
    trainer = PFLTrainer(cfg, train, test, split, meta["num_classes"], progress=False, init_state=init)
    start = {**trainer.broadcast, **trainer.init_personal}
    assert start.keys() == sel["broadcast"].keys()
    assert all(torch.equal(start[k], sel["broadcast"][k]) for k in start)
    assert set(trainer.broadcast) == {k for k in start if is_head(k)} and trainer.broadcast

    model = torch.load(tmp_path / "lg" / "seed0.model.pt", weights_only=True)
    assert set(model["broadcast"]) == set(trainer.broadcast) and set(model["personal"]) == {"0", "1"}
    bodies = [model["personal"][i] for i in ("0", "1")]
    assert any(not torch.equal(bodies[0][k], bodies[1][k]) for k in bodies[0])  # each client trained its own body
    assert ALGORITHMS["lg_fedavg_after_fedavg"].departures == ()


@pytest.mark.realdata
@pytest.mark.usefixtures("one_torch_thread")
def test_a_source_of_another_setting_or_with_personal_parts_is_refused(real_data_root, tmp_path, small_partition):
    from benchmark.pfl import run

    fedper = tmp_path / "fedper" / "seed0.json"
    run.train_step(_cfg(algorithm="fedper", rounds=1, eval_every=1), small_partition, fedper,
                   data_root=str(real_data_root), device="cpu", progress=False)  # fmt: skip
    lg = _cfg(algorithm="lg_fedavg_after_fedavg", rounds=1, eval_every=1, lr=0.001, lr_decay=False,
              init_model=str(fedper))  # fmt: skip
    with pytest.raises(ConfigError, match="keeps personal entries"):
        run.train_step(lg, small_partition, tmp_path / "lg" / "seed0.json", data_root=str(real_data_root),
                       device="cpu", progress=False)  # fmt: skip
    record = json.loads(fedper.read_text())
    with pytest.raises(ConfigError, match=r"another setting.*seed"):
        run.train_step(replace(lg, seed=1), small_partition, tmp_path / "lg1" / "seed1.json",
                       data_root=str(real_data_root), device="cpu", progress=False)  # fmt: skip
    assert not (tmp_path / "lg" / "seed0.json").exists() and record["config"]["algorithm"] == "fedper"


def test_a_training_job_with_a_source_reads_it():
    fields = dict(dataset="cifar10", model="4convnet", bn="batch", scheme="shards", scheme_param="2", clients=100,
                  server_fraction="0", algorithm="lg_fedavg_after_fedavg", participation="0.1", local_epochs=1,
                  rounds=80, momentum="0.9", head_lr="1", head_init="default", prox_mu="default", selection="last",
                  seed=1)  # fmt: skip
    job = PFLTrainJob(**fields)
    (src,) = job.inputs()
    assert src.path == PFLTrainJob(**{**fields, "algorithm": "fedavg", "rounds": 320}).path
    assert PFLTrainJob(**{**fields, "algorithm": "fedavg"}).inputs() == ()


def test_a_warm_start_draws_under_its_sources_stream_scheme_so_both_share_the_client_partition():
    """LG-FedAvg after FedAvg at tau = 1: 80 rounds (``keyed`` by their length) after FedAvg's 320 (``named``). The
    run takes its source's scheme, hence its source's partition (the run's check refused the other partition,
    2026-12-07); at tau = 4 both lengths are keyed and the config (the records') is what it was."""
    import numpy as np

    from benchmark.pfl.partition import make_partitioner
    from benchmark.pfl.streams import PFLStreams

    fields = dict(dataset="cifar10", model="4convnet", bn="batch", scheme="shards", scheme_param="10", clients=100,
                  server_fraction="0", algorithm="lg_fedavg_after_fedavg", participation="0.1", local_epochs=1,
                  rounds=80, momentum="0.9", head_lr="1", head_init="default", prox_mu="default", selection="last",
                  seed=0)  # fmt: skip
    lg = PFLTrainJob(**fields).pfl_config({})
    (source,) = PFLTrainJob(**fields).inputs()
    fedavg = PFLTrainJob(**{**fields, "algorithm": "fedavg", "rounds": 320}).pfl_config({})
    assert source.path == PFLTrainJob(**{**fields, "algorithm": "fedavg", "rounds": 320}).path
    assert lg.streams == fedavg.streams == PFLStreams(0, "named")
    assert lg.to_dict()["random_streams"] == "named" and lg.identity()["random_streams"] == "named"

    labels = np.repeat(np.arange(10), 500)
    split = make_partitioner("shards", 100, shards_per_client=10)
    ours, theirs = split(labels, labels[::5], lg.streams), split(labels, labels[::5], fedavg.streams)
    by_length = split(labels, labels[::5], PFLStreams.for_run(0, 80))  # the draws before the fix
    assert all(np.array_equal(a, b) for a, b in zip(ours.train + ours.test, theirs.train + theirs.test, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(ours.train, by_length.train, strict=True))

    lg4 = PFLTrainJob(**{**fields, "local_epochs": 4, "rounds": 20}).pfl_config({})
    assert lg4.random_streams is None and "random_streams" not in lg4.to_dict() and lg4.streams.scheme == "keyed"
    assert replace(lg4, random_streams="keyed").random_streams is None  # its own length's scheme: stored as None
    with pytest.raises(ConfigError, match="random_streams"):
        replace(lg4, random_streams="other")
