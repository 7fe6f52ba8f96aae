"""The ``pfl`` runner (fedbabu): machine-independent planning, per-client collection, the verdict and table text
of ``std_over: clients`` cells, and the selection departure."""

from __future__ import annotations

import collections
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmark.errors import ConfigError
from benchmark.jobs import job_from_dict, job_to_dict
from benchmark.runners import get_runner
from benchmark.runners.pfl import PFLEvalJob, PFLTrainJob
from benchmark.tables.assemble import CellOutcome, _cell_text
from benchmark.tables.plan import plan_target
from benchmark.tables.spec import load_spec
from benchmark.verdict import Status, judge
from benchmark.workflow import load_config

TABLES = [1, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25]


@pytest.fixture()
def cfg(real_data_root, monkeypatch):
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))

    def make(**over):
        return load_config(overrides={"data_root": str(real_data_root), **over})

    return make


def test_table5_with_device_cuda_plans_one_training_and_one_personalisation_per_cell(cfg, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # planning never looks at the machine
    plans = plan_target("fedbabu_table5", cfg(device="cuda"))
    status = collections.Counter(p.status for p in plans)
    assert status == {"planned": 129}
    kinds = collections.Counter(j.KIND for p in plans for j in p.jobs)
    assert kinds == {"pfl_eval": 126, "pfl_train": 3}  # Local-only (s = 100, 50, 10): its models are the cell
    trainings = {j.training().path for p in plans for j in p.jobs if j.KIND == "pfl_eval"}
    assert len(trainings) == 126  # 7 algorithms x 3 s x 2 f x 3 tau
    local = [j for p in plans for j in p.jobs if j.KIND == "pfl_train"]
    assert {(j.algorithm, j.rounds, j.participation) for j in local} == {("local_only", 160, "1")}


def test_without_a_gpu_every_cell_is_not_run_with_its_cost(cfg):
    plans = plan_target("fedbabu_table1", cfg())
    assert {p.status for p in plans} == {"not_run"}
    reason = plans[0].reason
    assert "needs a GPU" in reason and "M training images" in reason and "cpu_training=true" in reason


def test_cpu_training_is_an_explicit_opt_in(cfg):
    plans = plan_target("fedbabu_table1", cfg(cpu_training=True))
    assert {p.status for p in plans} == {"planned"}


def test_initial_cells_share_the_training_job_of_the_personalised_cells(cfg):
    plans = plan_target("fedbabu_table1", cfg(device="cuda"))
    initial = {j.path for p in plans if p.cell.protocol["stage"] == "initial" for j in p.jobs}
    personal = {
        j.training().path for p in plans if p.cell.protocol["stage"] == "personalized" for j in p.jobs
    }
    assert initial == personal and len(initial) == 18


def test_every_fedbabu_table_plans_or_says_why(cfg):
    reasons = collections.Counter()
    for t in TABLES:
        for p in plan_target(f"fedbabu_table{t}", cfg(device="cuda")):
            assert p.status == "planned" or p.reason, (t, p.cell.id)
            if p.status != "planned":
                reasons[p.reason.split(" (")[0][:60]] += 1
    assert sum(reasons.values()) < 400  # most of the 1,273 cells plan; the rest name what is missing


def test_tables_14_and_15_route_each_local_update_part_to_the_algorithm_updating_it(cfg):
    """fedbabu App. F.3: Conv1 / Conv12 / Conv123 run the fedbabu_conv* algorithms, Conv1234 FedBABU and
    Conv1234+Linear FedAvg (the same trainings as Tables 12/13); every cell plans."""
    for t in (14, 15):
        plans = plan_target(f"fedbabu_table{t}", cfg(device="cuda"))
        assert {p.status for p in plans} == {"planned"}
        assert {(p.cell.protocol["local_update_parts"], p.method) for p in plans} == {
            ("conv1", "fedbabu_conv1"), ("conv12", "fedbabu_conv12"), ("conv123", "fedbabu_conv123"),
            ("conv1234", "fedbabu"), ("conv1234_linear", "fedavg"),
        }  # fmt: skip


def test_a_spec_routing_a_local_update_part_to_an_algorithm_updating_another_is_one_clear_error(cfg):
    spec = load_spec("fedbabu_table14")
    plan = next(p for p in plan_target("fedbabu_table14", cfg(device="cuda"))
                if p.cell.protocol["local_update_parts"] == "conv1")  # fmt: skip
    babu_rule = next(r for r in spec.runners if r.when.get("local_update_parts") == "conv1234")
    for config in (cfg(device="cuda"), cfg()):  # also where the cell would be NOT RUN (no training here)
        with pytest.raises(ConfigError, match=r"cell s-10/.*conv1 is routed to 'fedbabu', which updates 'body'"):
            get_runner("pfl").plan(spec, babu_rule, plan, config)


def test_emnist_cells_name_the_download_command(cfg):
    plans = plan_target("fedbabu_table19", cfg(device="cuda"))
    assert all("flb data fetch emnist" in p.reason for p in plans)


def test_jobs_round_trip_through_plan_files_and_wildcards(cfg):
    job = next(j for p in plan_target("fedbabu_table4", cfg(device="cuda")) for j in p.jobs)
    assert isinstance(job, PFLEvalJob)
    assert job_from_dict(job_to_dict(job)) == job
    fields = {k: v for k, v in job_to_dict(job).items() if k != "kind"}
    assert PFLEvalJob.from_wildcards(fields) == job
    assert job.inputs() == (job.training(),) and isinstance(job.training(), PFLTrainJob)


def _write_record(job: PFLTrainJob, per_client: list[float], selected: int) -> None:
    path = Path(job.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"initial": {"per_client": per_client}, "selected_round": selected,
                                "git_commit": "x", "versions": "v", "machine": "m"}))  # fmt: skip


def _cell_plan(cfg, target: str, stage: str = "initial"):
    plans = plan_target(target, cfg(device="cuda"))
    return load_spec(target), next(
        p for p in plans if p.status == "planned" and p.cell.protocol["stage"] == stage
    )


def test_collect_reports_the_mean_over_clients_and_keeps_every_client(cfg, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec, plan = _cell_plan(cfg, "fedbabu_table1")
    job = plan.jobs[0]
    acc = [50.0, 60.0, 70.0, 80.0]
    _write_record(job, acc, selected=job.rounds)
    res = get_runner("pfl").collect(spec, plan, {}, {})
    assert res.values == [65.0]
    assert res.extra == {"std_over": "clients", "ours_client_std": pytest.approx(float(np.std(acc)))}
    per_client = [r for r in res.rows if r["metric"] == "client_accuracy"]
    assert [r["value"] for r in per_client] == acc and per_client[2]["note"] == "client=2"
    assert res.departures == ()  # the last round was the best: nothing departs from the paper's last model

    assert "seeds" not in res.note  # one seed: nothing to show apart


def test_a_cell_on_two_seeds_shows_each_seeds_value_in_its_note(cfg, tmp_path, monkeypatch):
    """A wide spread between the seeds widens the tolerance (expected/README.md): the note shows both values, so a
    PASS that rests on it is seen (fedbabu FedAvg s = 2, tau = 4: 10.00 and 25.68 against 26.72)."""
    monkeypatch.chdir(tmp_path)
    spec, plan = _cell_plan(cfg, "fedbabu_table1")
    two = replace(plan, jobs=(plan.jobs[0], replace(plan.jobs[0], seed=1)))
    _write_record(two.jobs[0], [10.0, 10.0], selected=two.jobs[0].rounds)
    _write_record(two.jobs[1], [25.0, 26.36], selected=two.jobs[1].rounds)
    res = get_runner("pfl").collect(spec, two, {}, {})
    assert res.values == [10.0, 25.68] and res.note.endswith("; seeds 0, 1: 10.00 / 25.68")

def test_a_model_selected_on_the_test_sets_before_the_last_round_is_a_named_departure(
    cfg, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    spec, plan = _cell_plan(cfg, "fedbabu_table1")
    _write_record(plan.jobs[0], [plan.cell.mean] * 3, selected=plan.jobs[0].rounds - 1)
    res = get_runner("pfl").collect(spec, plan, {}, {})
    assert res.departures == ("selected_on_test",)
    v = judge(plan.cell, res.values, substitute=False, not_run_reason=None, departures=res.departures)
    assert v.status is Status.PASS_DEPARTURE and "last model" in v.reason


@pytest.mark.parametrize(
    ("method", "over", "departures"),
    [("fedavg", {}, ()), ("lg_fedavg_after_fedavg", {}, ()),
     ("lg_fedavg", {"pfl_lg_fedavg": "from_scratch"}, ("lg_fedavg_from_scratch",)),
     ("per_fedavg", {}, ("per_fedavg_fine_tuned",)), ("fedrep", {}, ()),
     ("fedrep", {"pfl_fedrep_finetune": "joint"}, ("fedrep_joint_fine_tuned",)),
     ("fedrep", {"pfl_fedrep_momentum": "released"}, ("fedrep_released_momentum",)),
     ("per_fedavg", {"pfl_per_fedavg_eval": "released_step"}, ("per_fedavg_released_step",))],
)
def test_a_personalised_cell_of_a_method_run_off_the_papers_protocol_matches_only_as_pass_star(
    cfg, tmp_path, monkeypatch, method, over, departures
):
    """fedbabu App. A.3 starts LG-FedAvg from FedAvg's model at lr 0.001 (``pfl_lg_fedavg: after_fedavg``, the
    default; ``from_scratch`` departs), Per-FedAvg is not personalised by Algorithm 2, and Algorithm 2 fine-tunes
    FedRep sequentially (``pfl_fedrep_finetune: sequential``, the default; ``joint`` departs): where ours departs, a
    value equal to the paper's is PASS*, never PASS (FedAvg, LG-FedAvg after FedAvg, FedRep sequential stay PASS)."""
    monkeypatch.chdir(tmp_path)
    plans = plan_target("fedbabu_table13", cfg(device="cuda", **over))
    plan = next(p for p in plans if p.status == "planned" and p.method == method)
    for job in plan.jobs:
        path = Path(job.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"per_client": [plan.cell.mean] * 4, "selected_round": job.rounds}))
    assert any(getattr(j, "evaluation", None) in ("personalised", "per_fedavg_step") for j in plan.jobs)
    res = get_runner("pfl").collect(load_spec("fedbabu_table13"), plan, {}, {})
    assert res.departures == departures
    v = judge(plan.cell, res.values, substitute=False, not_run_reason=None, departures=res.departures)
    assert v.status is (Status.PASS_DEPARTURE if departures else Status.PASS)
    assert all(d in v.reason for d in departures)


def test_fedrep_is_personalised_as_algorithm_2_says_unless_the_config_says_joint(cfg):
    """Algorithm 2 lines 17 and 20-21: FedRep's personalised cells fine-tune sequentially (``ft_part`` sequential)
    by default and jointly (``full``) under ``pfl_fedrep_finetune: joint``; the other methods keep the parts their
    cells state (Table 4's body / head included); a value outside the two is one clear error."""
    from benchmark.errors import ConfigError
    from benchmark.runners.pfl import personalised_part

    def parts(**over):
        plans = plan_target("fedbabu_table13", cfg(device="cuda", **over))
        return {(p.method, j.ft_part) for p in plans if p.status == "planned" for j in p.jobs if j.KIND == "pfl_eval"}

    default, joint = parts(), parts(pfl_fedrep_finetune="joint")
    assert {m for m, part in default if part == "sequential"} == {"fedrep"}
    assert ("fedrep", "full") not in default and ("fedrep", "full") in joint
    assert default - {("fedrep", "sequential")} == joint - {("fedrep", "full")}
    assert personalised_part("fedrep", "head", {}) == "head" and personalised_part("fedbabu", "full", {}) == "full"
    with pytest.raises(ConfigError, match=r"pfl_fedrep_finetune='paper'.*sequential, joint"):
        personalised_part("fedrep", "full", {"pfl_fedrep_finetune": "paper"})


def test_fedrep_at_the_released_momentum_is_an_option_for_fedrep_only(cfg):
    """``pfl_fedrep_momentum: released`` trains and fine-tunes FedRep at 0.5 (the released run_fedrep.sh passes no
    --momentum); every other method's jobs, and FedRep's by default, keep the cell's 0.9; a value outside the two
    is one clear error."""
    from benchmark.errors import ConfigError
    from benchmark.runners.pfl import momenta

    def momentums(**over):
        plans = plan_target("fedbabu_table13", cfg(device="cuda", **over))
        return {(p.method, j.momentum, getattr(j, "ft_momentum", None)) for p in plans if p.status == "planned"
                for j in p.jobs}  # fmt: skip

    default, released = momentums(), momentums(pfl_fedrep_momentum="released")
    assert {m for m, mo, _ in default if mo != "0.9"} == set() and ("fedrep", "0.9", "0.9") in default
    assert {(m, mo, ft) for m, mo, ft in released if m == "fedrep"} == {("fedrep", "0.5", "0.5")}
    assert {r for r in default if r[0] != "fedrep"} == {r for r in released if r[0] != "fedrep"}
    with pytest.raises(ConfigError, match=r"pfl_fedrep_momentum='0.5'.*paper, released"):
        momenta("fedrep", {}, {"pfl_fedrep_momentum": "0.5"})


def test_per_fedavgs_released_evaluation_is_an_option_for_per_fedavgs_personalised_cells_only(cfg):
    """``pfl_per_fedavg_eval: released_step`` evaluates Per-FedAvg's personalised cells by the released step
    (``per_fedavg_step``, no fine-tuning) from the same training jobs; every other job is the default's; a value
    outside the two is one clear error."""
    from benchmark.errors import ConfigError

    def jobs(**over):
        plans = plan_target("fedbabu_table13", cfg(device="cuda", **over))
        return {(p.method, j.path) for p in plans if p.status == "planned" for j in p.jobs} | {
            (p.method, j.training().path) for p in plans if p.status == "planned" for j in p.jobs
            if j.KIND == "pfl_eval"}  # fmt: skip

    default, released = jobs(), jobs(pfl_per_fedavg_eval="released_step")
    changed_off, changed_on = default - released, released - default
    assert changed_off and {m for m, _ in changed_off | changed_on} == {"per_fedavg"}
    assert all("/personalised-" in p for _, p in changed_off)
    assert all(p.endswith("/per_fedavg_step-none-e0-lr0-m0.9.json") for _, p in changed_on)
    assert len(changed_off) == len(changed_on)
    with pytest.raises(ConfigError, match=r"pfl_per_fedavg_eval.*'support_query' is not one of \['fine_tune', 'released_step'\]"):
        plan_target("fedbabu_table13", cfg(device="cuda", pfl_per_fedavg_eval="support_query"))


def test_ditto_as_released_is_an_option_whose_personalised_cells_read_the_training_not_a_fine_tuning(
    cfg, tmp_path, monkeypatch
):
    """``pfl_ditto: released`` runs the released main_ditto.py (``ditto_reference``) and reads its cells from the
    training's own evaluation of the clients' models after the last round, as main_ditto.py reports them (no
    Algorithm 2 fine-tuning): Ditto's jobs are trainings of ``ditto_reference``, every other job is the default's,
    a value equal to the paper's is PASS* (``ditto_released``), and a value outside the two is one clear error."""
    from benchmark.errors import ConfigError

    monkeypatch.chdir(tmp_path)

    def planned(**over):
        return [p for p in plan_target("fedbabu_table13", cfg(device="cuda", **over)) if p.status == "planned"]

    default, released = planned(), planned(pfl_ditto="released")
    ditto = [p for p in released if p.method == "ditto_reference"]
    assert ditto and not any(p.method == "ditto" for p in released)
    assert {p.cell.id for p in ditto} == {p.cell.id for p in default if p.method == "ditto"}
    assert all(j.KIND == "pfl_train" and j.algorithm == "ditto_reference" for p in ditto for j in p.jobs)
    assert all(any(j.KIND == "pfl_eval" and j.evaluation == "personalised" for j in p.jobs)
               for p in default if p.method == "ditto")  # fmt: skip
    others = {(p.cell.id, j.path) for p in default if p.method != "ditto" for j in p.jobs}
    assert others == {(p.cell.id, j.path) for p in released if p.method != "ditto_reference" for j in p.jobs}
    plan = ditto[0]
    for job in plan.jobs:
        _write_record(job, [plan.cell.mean] * 4, selected=job.rounds)
    res = get_runner("pfl").collect(load_spec("fedbabu_table13"), plan, {}, {})
    assert res.values == [plan.cell.mean] and res.departures == ("ditto_released",)
    v = judge(plan.cell, res.values, substitute=False, not_run_reason=None, departures=res.departures)
    assert v.status is Status.PASS_DEPARTURE and "main_ditto.py" in v.reason
    with pytest.raises(ConfigError, match=r"pfl_ditto.*'reference' is not one of \['paper', 'released'\]"):
        plan_target("fedbabu_table13", cfg(device="cuda", pfl_ditto="reference"))


def test_the_paper_client_std_is_not_a_seed_std_and_the_table_shows_ours_beside_it(
    cfg, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    _spec, plan = _cell_plan(cfg, "fedbabu_table1")
    assert plan.cell.std_over == "clients" and plan.cell.std > 1.0
    # 1.5 points off with a 5-point client spread: the spread is not an uncertainty of the mean -> FAIL
    values = [plan.cell.mean + 1.5]
    v = judge(plan.cell, values, substitute=False, not_run_reason=None)
    assert v.status is Status.FAIL and v.paper_std_used == 0.0 and v.tolerance == 1.0
    text = _cell_text(CellOutcome(plan, values, v, "", {"std_over": "clients", "ours_client_std": 4.25}))
    assert text["ours"] == f"{values[0]:.2f}±4.25 (clients)"


def test_cli_booleans_are_booleans_and_other_strings_are_still_refused():
    from benchmark.errors import ConfigError
    from benchmark.workflow import coerce_cli_booleans, validate_config

    cfg = coerce_cli_booleans({"cpu_training": "true", "channels_last": "False", "tier": "ci"})
    assert cfg == {"cpu_training": True, "channels_last": False, "tier": "ci"}
    with pytest.raises(ConfigError, match="cpu_training"):
        validate_config(coerce_cli_booleans({**load_config(), "cpu_training": "yes please"}))
