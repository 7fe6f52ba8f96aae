"""The harvester (issue 24): units ordered by cells per estimated minute (cheapest seed first), workers stopped at
the budget and resumed by the next harvest to the numbers of an uninterrupted run, records for the jobs that
finished, ``--dry-run``, and a bad ``--budget`` as one error line."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from benchmark import harvest as harvest_mod
from benchmark import harvest_cli
from benchmark.fl.estimate import extraction_rate, native_rate
from benchmark.harvest import Progress, Unit, group_units, harvest, last_round, manifest
from benchmark.harvest_estimate import Estimate, job_estimate
from benchmark.harvest_park import restore_parked
from benchmark.jobs import ExtractJob, Job, checkpoint_for
from benchmark.ledger import read_record
from benchmark.runners.pfl import PFLEvalJob, PFLTrainJob


# ------------------------------------------------------------------------------- (a) ordering, pure
@dataclass(frozen=True)
class _Part(Job):
    KIND: ClassVar[str] = "partition"
    PATTERN: ClassVar[str] = "results/p/{name}.json"
    name: str


@dataclass(frozen=True)
class _Train(Job):
    KIND: ClassVar[str] = "pfl_train"
    PATTERN: ClassVar[str] = "results/t/{name}/seed{seed}.json"
    name: str
    seed: int

    def inputs(self) -> tuple[Job, ...]:
        return (_Part(self.name),)


@dataclass(frozen=True)
class _Eval(Job):
    KIND: ClassVar[str] = "pfl_eval"
    PATTERN: ClassVar[str] = "results/t/{name}/seed{seed}/{what}.json"
    name: str
    seed: int
    what: str

    def inputs(self) -> tuple[Job, ...]:
        return (_Train(self.name, self.seed),)


def test_units_go_by_cells_per_estimated_minute_then_the_cheapest_seed():
    """Many cells and short jobs first; between seeds of the same cells, the cheaper (then the lower) seed
    first; a unit runs its training's inputs, the training, then the jobs that read it."""
    minutes = {"wide": 10, "short": 1, "tie": 5, "cheap": 3}
    seeds_cost = {("cheap", 0): 4, ("cheap", 1): 3}  # seed 1 of "cheap" is the cheaper one

    def seconds(job: Job) -> float:
        if isinstance(job, _Train):
            return 60.0 * seeds_cost.get((job.name, job.seed), minutes[job.name])
        return 0.0

    planned = [(f"T:wide{i}", _Eval("wide", 0, f"e{i}")) for i in range(4)]  # 4 cells / 10 min = 0.4
    planned += [("T:short", _Train("short", 0))]  # 1 cell / 1 min = 1.0
    planned += [(f"T:tie{s}", _Eval("tie", s, "e")) for s in (1, 0)]  # 1 cell / 5 min each: seed 0 first
    planned += [(f"T:cheap{s}", _Eval("cheap", s, "e")) for s in (0, 1)]  # 1/4 vs 1/3: seed 1 first
    units = group_units(planned, seconds)
    order = [(u.root.name, u.root.seed) for u in units]
    assert order == [("short", 0), ("wide", 0), ("cheap", 1), ("cheap", 0), ("tie", 0), ("tie", 1)]
    assert [round(u.value, 3) for u in units] == [1.0, 0.4, 0.333, 0.25, 0.2, 0.2]
    wide = units[1]
    assert [j.KIND for j in wide.jobs] == ["partition", "pfl_train"] + ["pfl_eval"] * 4
    assert wide.prereq == 1 and wide.root == _Train("wide", 0) and len(wide.cells) == 4


def test_the_plan_says_what_fits_in_the_budget():
    units = [Unit((_Train(n, 0),), (f"T:{n}",), est) for n, est in (("a", 600.0), ("b", 600.0), ("c", 900.0))]
    fit, cut = harvest_cli.schedule(units, 1500.0, workers=1)
    assert fit == units[:2] and cut == units[2:]  # c starts at 20 min and is stopped at 25
    fit2, cut2 = harvest_cli.schedule(units, 1500.0, workers=2)
    assert fit2 == units and cut2 == []
    plan = harvest_cli.HarvestPlan(tuple(units), skipped=1, unmeasured=2)
    text = "\n".join(harvest_cli.describe_plan(plan, "cpu", 1500.0, 1))
    assert "3 training unit(s)" in text and "35.0 min in all" in text and "2 job(s) with no measured rate" in text
    assert "fits in the budget: 2 unit(s), 2 cell(s)" in text and "1 more start and are stopped" in text


def test_only_keeps_the_matching_units_and_a_pattern_matching_none_is_an_error():
    units = [Unit((_Train(n, 0),), (f"T:{n}",), 60.0) for n in ("tau1-a", "tau4-b", "tau4-c")]
    plan = harvest_cli.HarvestPlan(tuple(units), skipped=3, unmeasured=0)
    kept = harvest_cli.keep_only(plan, ["tau4-"])
    assert [u.root.name for u in kept.units] == ["tau4-b", "tau4-c"] and kept.skipped == 3
    assert harvest_cli.keep_only(plan, []) is plan
    assert [u.root.name for u in harvest_cli.keep_only(plan, ["a/", "c/"]).units] == ["tau1-a", "tau4-c"]
    with pytest.raises(harvest_cli.ConfigError, match="'tau10-' matches none of the 3 unit"):
        harvest_cli.keep_only(plan, ["tau4-", "tau10-"])
    with pytest.raises(harvest_cli.ConfigError, match="not a regular expression"):
        harvest_cli.keep_only(plan, ["tau("])


def test_units_done_on_disk_or_recorded_are_skipped_and_not_estimated(tmp_path, monkeypatch):
    """A unit whose jobs are all on disk or recorded is skipped; a unit's estimate counts its jobs not done."""
    planned = [("T:a", _Eval("a", 0, "e")), ("T:b", _Eval("b", 0, "e")), ("T:c", _Eval("c", 0, "e"))]
    monkeypatch.setattr(harvest_cli, "plan_units", lambda targets, config, seconds, seeds=None: group_units(planned, seconds))
    monkeypatch.setattr(harvest_cli, "job_estimate", lambda job, device, config: Estimate(60.0, True))
    on_disk = [_Part("a"), _Train("a", 0), _Eval("a", 0, "e"), _Part("c")]
    for job in on_disk:
        (tmp_path / job.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / job.path).write_text("{}")
    recorded = {_Part("b").path, _Train("b", 0).path, _Eval("b", 0, "e").path}
    plan = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, recorded, root=tmp_path)
    assert [u.root.name for u in plan.units] == ["c"] and plan.skipped == 2
    assert plan.units[0].est_s == 120.0  # c's training and evaluation; its partition is on disk


def test_units_with_a_job_of_no_measured_rate_come_after_every_measured_one(tmp_path, monkeypatch):
    """An assumed 10 minutes says nothing of a job's cost (a ResNet-50 training on a CPU would rank first on it):
    such units go last, and the plan says their estimate is assumed."""
    planned = [(f"T:{n}", _Train(n, 0)) for n in ("resnet", "convnet")]
    monkeypatch.setattr(harvest_cli, "plan_units", lambda targets, config, seconds, seeds=None: group_units(planned, seconds))

    def estimate(job, device, config):
        if job.KIND == "partition":
            return Estimate(5.0, True)
        return Estimate(600.0, False) if job.name == "resnet" else Estimate(3600.0, True)

    monkeypatch.setattr(harvest_cli, "job_estimate", estimate)
    plan = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, set(), root=tmp_path)
    assert [(u.root.name, u.unmeasured) for u in plan.units] == [("convnet", False), ("resnet", True)]
    assert plan.units[1].value > plan.units[0].value  # more cells per assumed minute, still after
    assert "(no measured rate: assumed)" in "\n".join(harvest_cli.describe_plan(plan, "cpu", 3600.0, 1))


class _CkptTrain(_Train):
    """A training job that checkpoints, as pfl / fl / zo training jobs do."""

    def checkpoint_file(self) -> Path:
        return checkpoint_for(self.path)


def test_a_stopped_training_is_estimated_for_the_rounds_its_checkpoint_has_left(tmp_path, monkeypatch):
    """A unit a previous harvest stopped at round 60 of 80 costs a quarter of its training (its evaluations in
    full) and so ranks before the units of the same cells that start from round 0; the plan says where it
    resumes. An unreadable checkpoint (damaged) counts as no checkpoint: the estimate of a run from its start."""
    from benchmark.federated.checkpoint import save_checkpoint

    planned = [(f"T:{n}", _CkptTrain(n, 0)) for n in ("a", "b", "c")]
    monkeypatch.setattr(harvest_cli, "plan_units", lambda targets, config, seconds, seeds=None: group_units(planned, seconds))
    monkeypatch.setattr(harvest_cli, "job_estimate", lambda job, device, config: Estimate(60.0 if job.KIND == "partition" else 600.0, True))
    state = {"run": {"config": {}, "method": "x", "stage": "", "start_round": 0, "rounds": 80}, "round": 60,
             "trainer": {}, "history": [], "costs": {}}  # fmt: skip
    save_checkpoint(tmp_path / _CkptTrain("c", 0).checkpoint_file(), state)
    save_checkpoint(tmp_path / _CkptTrain("b", 0).checkpoint_file(), state)
    damaged = tmp_path / _CkptTrain("b", 0).checkpoint_file()
    damaged.write_bytes(damaged.read_bytes()[:-10])
    plan = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, set(), root=tmp_path)
    assert [u.root.name for u in plan.units] == ["c", "a", "b"]
    by = {u.root.name: u for u in plan.units}
    assert by["c"].est_s == 60.0 + 600.0 * 20 / 80 and by["c"].resumes == (60, 80)
    assert by["a"].est_s == by["b"].est_s == 660.0 and by["b"].resumes is None
    assert "(resumes at round 60/80)" in "\n".join(harvest_cli.describe_plan(plan, "cpu", 3600.0, 1))
    assert by["c"].to_dict()["resumes"] == [60, 80]
    # a plan made without restoring the parked checkpoints (flb estimate) counts the further one, as a harvest would
    park = tmp_path / "runs" / "parked"
    save_checkpoint(park / _CkptTrain("a", 0).checkpoint_file(), {**state, "round": 40})
    save_checkpoint(park / _CkptTrain("c", 0).checkpoint_file(), {**state, "round": 20})  # behind the local 60
    parked = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, set(), root=tmp_path, park=park)
    assert [(u.root.name, u.resumes) for u in parked.units] == [("c", (60, 80)), ("a", (40, 80)), ("b", None)]


class _WarmTrain(_CkptTrain):
    """A training that starts from another training's model (LG-FedAvg after FedAvg, App. A.3)."""

    PATTERN: ClassVar[str] = "results/w/{name}/seed{seed}.json"

    def inputs(self) -> tuple[Job, ...]:
        return (_CkptTrain(self.name, self.seed),)


def test_a_training_among_a_units_inputs_is_estimated_for_the_rounds_its_checkpoint_has_left(tmp_path, monkeypatch):
    """LG-FedAvg's unit trains its FedAvg model first: when that training is parked at round 60 of 80, the unit
    costs a quarter of it (the LG-FedAvg training in full), and the plan says where the input resumes. Before this,
    the input counted whole (2026-12-06: 96 min estimated for a unit whose FedAvg was parked at 74/80)."""
    from benchmark.federated.checkpoint import save_checkpoint

    planned = [(f"T:{n}", _WarmTrain(n, 0)) for n in ("a", "b")]
    monkeypatch.setattr(harvest_cli, "plan_units", lambda targets, config, seconds, seeds=None: group_units(planned, seconds))
    monkeypatch.setattr(harvest_cli, "job_estimate", lambda job, device, config: Estimate(60.0 if job.KIND == "partition" else 600.0, True))
    state = {"run": {"config": {}, "method": "x", "stage": "", "start_round": 0, "rounds": 80}, "round": 60,
             "trainer": {}, "history": [], "costs": {}}  # fmt: skip
    park = tmp_path / "runs" / "parked"
    save_checkpoint(park / _CkptTrain("b", 0).checkpoint_file(), state)
    plan = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, set(), root=tmp_path, park=park)
    by = {u.root.name: u for u in plan.units}
    assert [j.KIND for j in by["b"].jobs] == ["partition", "pfl_train", "pfl_train"] and by["b"].prereq == 2
    assert by["b"].est_s == 60.0 + 600.0 * 20 / 80 + 600.0 and by["a"].est_s == 60.0 + 600.0 + 600.0
    assert by["b"].resumes is None and by["b"].input_resumes == (("pfl_train", 60, 80),)
    assert [u.root.name for u in plan.units] == ["b", "a"]
    text = "\n".join(harvest_cli.describe_plan(plan, "cpu", 3600.0, 1))
    assert "(its input pfl_train resumes at round 60/80)" in text and "(resumes at" not in text


def test_a_recorded_training_whose_evaluation_is_still_to_run_is_estimated_and_run_again(tmp_path, monkeypatch):
    """The ledger keeps no weights: an evaluation still to run needs its training run again, so the training
    counts in the estimate (recorded, or only materialised from a record), but not when it is on disk with its
    weights (trained here)."""
    from benchmark.harvest import must_run
    from benchmark.ledger import MARKER_SUFFIX

    planned = [("T:a", _Eval("a", 0, "e")), ("T:b", _Eval("b", 0, "e")), ("T:c", _Eval("c", 0, "e"))]
    monkeypatch.setattr(harvest_cli, "plan_units", lambda targets, config, seconds, seeds=None: group_units(planned, seconds))
    monkeypatch.setattr(harvest_cli, "job_estimate", lambda job, device, config: Estimate(60.0, True))
    for job in (_Part("a"), _Train("a", 0), _Part("b"), _Train("b", 0), _Part("c")):  # a: trained here
        (tmp_path / job.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / job.path).write_text("{}")
    (tmp_path / (_Train("b", 0).path + MARKER_SUFFIX)).write_text("runs/x")  # b: materialised from a record
    recorded = {_Train("c", 0).path}  # c: recorded, not on disk
    plan = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, recorded, root=tmp_path)
    est = {u.root.name: u.est_s for u in plan.units}
    assert est == {"a": 60.0, "b": 120.0, "c": 120.0}  # a: its evaluation; b, c: training again + evaluation
    units = {u.root.name: u for u in plan.units}
    assert not must_run(_Train("a", 0), units["a"], tmp_path) and must_run(_Train("b", 0), units["b"], tmp_path)
    assert not must_run(_Part("b"), units["b"], tmp_path)  # on disk, not materialised from a record


def test_estimates_are_scaled_by_the_recorded_runs_of_this_machine():
    """calibrate: per kind, the median of actual / estimate over the records of this machine and device class,
    siblings (written by another job's run) and other machines left out; a kind with one run is not scaled."""
    from types import SimpleNamespace as NS

    from benchmark.harvest_estimate import calibrate

    job = _pfl(selection="last", participation="0.1", local_epochs=4, rounds=80)
    est = job_estimate(job, "cpu").seconds
    here = "x86_64 2 cpu (AMD EPYC; avx512f avx2)"

    def rec(wall, machine=here, device="cpu", notes=()):
        return NS(job=job, provenance=NS(machine=machine, device=device, wall_s=wall, notes=notes))

    records = [rec(2 * est), rec(3 * est), rec(10 * est), rec(50 * est, machine="another box"),
               rec(0.1 * est, device="cuda"), rec(40 * est, notes=("written by the run of x",))]  # fmt: skip
    cal = calibrate(records, "cpu", here)
    assert cal.factors == {"pfl_train": (3.0, 3)} and cal.factor("pfl_train") == 3.0 and cal.factor("pfl_eval") == 1.0
    assert "pfl_train x3.00 (median of 3)" in cal.describe()
    assert calibrate(records[:1], "cpu", here).factor("pfl_train") == 1.0  # one run: not scaled
    gpu = calibrate(records, "cuda", here)  # the GPU record alone counts there (native.h100.4convnet is measured)
    assert set(gpu.factors) == {"pfl_train"} and gpu.factors["pfl_train"][1] == 1 and gpu.factor("pfl_train") == 1.0


def test_a_new_machine_borrows_the_factor_of_its_family_and_says_so():
    """A fresh machine of the same family (architecture, cores, CPU model; other vector extensions) starts from its
    siblings' recorded slowdown; its own runs win once there are enough; another family is never used."""
    from types import SimpleNamespace as NS

    from benchmark.harvest_estimate import calibrate, machine_family

    job = _pfl(selection="last", participation="0.1", local_epochs=4, rounds=80)
    est = job_estimate(job, "cpu").seconds
    old, new = "x86_64 2 cpu (AMD EPYC; avx512f avx2)", "x86_64 2 cpu (AMD EPYC; avx2)"
    assert machine_family(old) == machine_family(new) == "x86_64 2 cpu (AMD EPYC)"
    gpu = "x86_64 16 cpu (Intel(R) Xeon(R) Processor; amx_tile avx512f avx2); NVIDIA H200"
    assert machine_family(gpu) == "x86_64 16 cpu (Intel(R) Xeon(R) Processor); NVIDIA H200"

    def rec(wall, machine):
        return NS(job=job, provenance=NS(machine=machine, device="cpu", wall_s=wall, notes=()))

    records = [rec(4 * est, old), rec(6 * est, old), rec(50 * est, "x86_64 2 cpu (Intel Xeon; avx2)")]
    cal = calibrate(records, "cpu", new)
    assert cal.factor("pfl_train") == 5.0 and cal.borrowed == {"pfl_train": old}
    assert f"pfl_train x5.00 (median of 2 on {old}, none here yet)" in cal.describe()
    mine = calibrate([*records, rec(2 * est, new), rec(2 * est, new)], "cpu", new)
    assert mine.factor("pfl_train") == 2.0 and mine.borrowed == {}  # enough runs of its own
    assert calibrate(records[2:], "cpu", new).factors == {}  # another CPU model: not this family


def test_a_resumed_run_is_compared_with_the_share_of_the_estimate_it_ran():
    from types import SimpleNamespace as NS

    from benchmark.harvest_estimate import RESUMED_NOTE, calibrate, resumed_fraction

    job = _pfl(selection="last", participation="0.1", local_epochs=4, rounds=80)
    est = job_estimate(job, "cpu").seconds
    here = "x86_64 2 cpu (AMD EPYC; avx2)"
    note = RESUMED_NOTE.format(done=60, rounds=80)
    assert resumed_fraction([note]) == 0.25 and resumed_fraction(["another note"]) == 1.0

    def rec(wall, notes=()):
        return NS(job=job, provenance=NS(machine=here, device="cpu", wall_s=wall, notes=notes))

    # 20 of 80 rounds in a quarter of twice the estimate: the same x2 as the whole runs
    cal = calibrate([rec(2 * est), rec(0.5 * est, (note,))], "cpu", here)
    assert cal.factors == {"pfl_train": (2.0, 2)}


def test_a_run_in_client_processes_is_compared_with_the_estimate_of_its_own_processes():
    """``pfl_client_procs`` shares a training among processes: the plan's estimate shrinks, the records made with
    one process keep their factor under a harvest with two, and a record made with two (its note) counts as such."""
    from types import SimpleNamespace as NS

    from benchmark.harvest_estimate import PROCS_NOTE, calibrate, procs_of

    job = _pfl(selection="last", participation="0.1", local_epochs=4, rounds=80)
    one, two = (job_estimate(job, "cpu", {"pfl_client_procs": p}).seconds for p in (1, 2))
    assert two < one
    here = "x86_64 2 cpu (AMD EPYC; avx2)"
    note = PROCS_NOTE.format(procs=2)
    assert procs_of([note]) == 2 and procs_of(["another note"]) == 1

    def rec(wall, notes=()):
        return NS(job=job, provenance=NS(machine=here, device="cpu", wall_s=wall, notes=notes))

    records = [rec(2 * one), rec(2 * one), rec(2 * two, (note,))]
    for cfg in ({}, {"pfl_client_procs": 2}):
        assert calibrate(records, "cpu", here, cfg).factors == {"pfl_train": (2.0, 3)}


def test_estimates_come_from_the_measured_rates_else_a_stated_default():
    job = _pfl(rounds=32, participation="0.1", local_epochs=10)
    est = job_estimate(job, "cpu")
    rate = 860.0  # throughput.yaml: native cpu 4convnet
    assert est.measured and est.seconds == pytest.approx(32 * 10 * 10 * 500 / rate + 32 * 100 * 100 / (3 * rate))
    last = job_estimate(_pfl(rounds=32, participation="0.1", local_epochs=10, selection="last"), "cpu")
    assert last.seconds == pytest.approx(32 * 10 * 10 * 500 / rate + 1 * 100 * 100 / (3 * rate))  # evaluated once
    gpu = job_estimate(job, "cuda")  # native.h100.4convnet: the measured H100 loop
    assert gpu.measured and gpu.seconds == pytest.approx(est.seconds * rate / native_rate("h100", "4convnet"))
    mobilenet = _pfl(rounds=32, participation="0.1", local_epochs=10)
    mobilenet = dataclasses.replace(mobilenet, model="mobilenet_cifar")
    assert job_estimate(mobilenet, "cuda") == Estimate(harvest_cli.DEFAULT_JOB_S, False)  # no GPU rate measured yet


def test_an_extraction_is_estimated_from_the_measured_forward_rate_at_its_input_size(real_data_root):
    config = {"data_root": str(real_data_root)}

    def extract(preprocess: str, split: str = "train", backbone: str = "squeezenet1_1", subset: str = "all"):
        return ExtractJob("cifar10", backbone, "substitute", preprocess, "fp32", subset, split)

    big = job_estimate(extract("legate2023_cifar@flip1"), "cuda", config)  # 50,000 images resized to 224 px
    assert big.measured and big.seconds == pytest.approx(50_000 / 25_256)  # throughput.yaml forward.h100
    assert job_estimate(extract("legate2023_cifar", "test"), "cpu", config).seconds == pytest.approx(10_000 / 107)
    small = job_estimate(extract("legate2023_cifar32"), "cpu", config)  # no resize: CIFAR's own 32 px
    assert small.seconds == pytest.approx(50_000 / (107 * 224 / 32))
    assert job_estimate(extract("legate2023_cifar", subset="stratified100"), "cpu", config).seconds == pytest.approx(
        1_000 / 107)
    assert extraction_rate("cpu", "vit_b_16") is None  # not measured: the stated default, counted as such
    assert job_estimate(extract("legate2023_cifar", backbone="vit_b_16"), "cpu", config) == Estimate(
        harvest_cli.DEFAULT_JOB_S, False)


# --------------------------------------------------------------------------- the parent's bookkeeping
class _FakeProc:
    """A worker that ends with ``rc`` after ``runs_s`` (never, if None), or when terminated."""

    def __init__(self, rc: int, runs_s: float | None) -> None:
        self.rc, self.until, self.returncode = rc, None if runs_s is None else time.time() + runs_s, None
        self.terminated = False

    def poll(self):
        if self.returncode is None and self.until is not None and time.time() >= self.until:
            self.returncode = self.rc
        return self.returncode

    def wait(self, timeout=None):
        import subprocess

        end = time.time() + (timeout if timeout is not None else 30.0)
        while self.poll() is None:
            if time.time() > end:
                raise subprocess.TimeoutExpired("worker", timeout)
            time.sleep(0.01)
        return self.returncode

    def terminate(self):
        self.terminated, self.returncode = True, -15

    def kill(self):
        self.returncode = -9


def test_the_parent_closes_every_worker_log_and_stops_workers_at_the_budget(tmp_path, monkeypatch):
    """Each worker's output file is closed when the worker ends (done, failed, or stopped at the budget), and
    the progress counts the units done and the cells they filled."""
    opened: list[io.TextIOWrapper] = []
    real_open = open

    def tracking_open(*a, **k):
        fh = real_open(*a, **k)
        opened.append(fh)
        return fh

    procs = iter([_FakeProc(0, 0.0), _FakeProc(1, 0.0), _FakeProc(0, None)])
    made: list[_FakeProc] = []

    def popen(*a, **k):
        made.append(next(procs))
        return made[-1]

    monkeypatch.setattr(harvest_mod, "open", tracking_open, raising=False)
    monkeypatch.setattr(harvest_mod.subprocess, "Popen", popen)
    units = [Unit((_Train(n, 0),), tuple(f"T:{n}{i}" for i in range(k)), 60.0) for n, k in (("a", 2), ("b", 1),
                                                                                          ("c", 5))]  # fmt: skip
    ticks: list[Progress] = []
    harvest(units, {}, budget_s=0.5, workers=1, work=tmp_path / "w", print_fn=lambda s: None,
            on_tick=ticks.append, poll_s=0.01)  # fmt: skip
    assert len(opened) == 3 and all(fh.closed for fh in opened)
    assert made[2].terminated and not made[0].terminated  # the third ran past the budget
    assert ticks[-1].units_done == 1 and ticks[-1].cells_filled == 2 and ticks[-1].units_total == 3


class _TrainingProc(_FakeProc):
    """A worker in a training's round loop: the first SIGTERM lets it end its round (``round_s``) and exit with
    STOPPED; a second stops it at once."""

    def __init__(self, round_s: float) -> None:
        super().__init__(harvest_mod.STOPPED, None)
        self.round_s, self.terms = round_s, 0

    def terminate(self):
        self.terms += 1
        if self.terms == 1:
            self.until = time.time() + self.round_s
        else:
            self.returncode = -15


def test_at_the_budget_a_training_gets_the_grace_to_end_its_round_then_a_second_sigterm(tmp_path, monkeypatch):
    """At the end of the budget every worker gets SIGTERM; one whose round ends within the grace exits by itself
    (its checkpoint written there), one still running after the grace gets a second SIGTERM."""
    made = [_TrainingProc(0.05), _TrainingProc(60.0)]
    procs = iter(made)
    monkeypatch.setattr(harvest_mod.subprocess, "Popen", lambda *a, **k: next(procs))
    units = [Unit((_Train(n, 0),), (f"T:{n}",), 60.0) for n in ("a", "b")]
    t0 = time.time()
    harvest(units, {}, budget_s=0.2, workers=2, work=tmp_path / "w", print_fn=lambda s: None, poll_s=0.01,
            grace_s=0.5)  # fmt: skip
    assert (made[0].terms, made[0].returncode) == (1, harvest_mod.STOPPED)
    assert (made[1].terms, made[1].returncode) == (2, -15)
    assert time.time() - t0 < 5.0


def test_a_workers_first_sigterm_lets_its_job_go_on_and_a_second_stops_it(tmp_path, monkeypatch):
    """The first SIGTERM asks for a stop (benchmark.federated.loop.request_stop: a training ends its round) and
    the job goes on; the unit's next job does not start; a second SIGTERM stops the job where it is."""
    from benchmark.federated import loop

    ran: list[str] = []
    monkeypatch.setattr(harvest_mod, "must_run", lambda job, unit: True)
    monkeypatch.setattr(_Part, "execute", lambda self, config: ran.append(self.name), raising=False)

    def first_job(self, config):  # SIGTERM arrives while the first job runs: it goes on and finishes
        harvest_mod._on_sigterm(signal.SIGTERM, None)
        assert loop.stop_requested()
        ran.append(self.name)

    monkeypatch.setattr(_Train, "execute", first_job, raising=False)
    log: list[dict] = []
    monkeypatch.chdir(tmp_path)
    try:
        with pytest.raises(harvest_mod._Stopped):
            harvest_mod.run_unit(Unit((_Train("a", 0), _Part("b")), ("T:a",), 60.0), {}, log.append)
        assert ran == ["a"] and [e["status"] for e in log] == ["done"]  # b never started
        with pytest.raises(harvest_mod._Stopped):  # the second signal
            harvest_mod._on_sigterm(signal.SIGTERM, None)
    finally:
        loop.clear_stop_request()


def test_two_workers_never_run_the_same_job(tmp_path, monkeypatch):
    """Units sharing an unfinished job (two seeds' learning-rate grid) do not run at the same time: the next unit
    that shares none starts instead."""
    started: list[str] = []

    def popen(args, **k):
        started.append(json.loads(Path(args[3]).read_text())["jobs"][-1]["name"])
        return _FakeProc(0, None)  # runs until the budget

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(harvest_mod.subprocess, "Popen", popen)
    shared, other = _Part("grid"), _Part("own")
    units = [Unit((shared, _Train("a", 0)), ("T:a",), 60.0, 0, 1), Unit((shared, _Train("b", 0)), ("T:b",), 60.0, 0, 1),
             Unit((other, _Train("c", 0)), ("T:c",), 60.0, 0, 1)]  # fmt: skip
    harvest(units, {}, budget_s=0.3, workers=2, work=tmp_path / "w", print_fn=lambda s: None, poll_s=0.01)
    assert started == ["a", "c"]


# ---------------------------------------------------------------------- (c) records of finished jobs
def _pfl(**kw) -> PFLTrainJob:
    base = dict(dataset="cifar10", model="4convnet", bn="batch", scheme="shards", scheme_param="2", clients=100,
                server_fraction="0", algorithm="fedbabu", participation="0.02", local_epochs=1, rounds=3,
                momentum="0.9", head_lr="1", head_init="default", prox_mu="default", selection="best", seed=0)  # fmt: skip
    return PFLTrainJob(**{**base, **kw})


def _fake_outputs(root: Path, job: PFLTrainJob) -> None:
    out = root / job.path
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"initial": {"per_client": [50.0]}, "git_commit": "abc123", "machine": "the GPU box",
                               "versions": "torch=9", "device": "cuda:0", "partition_hash": "ph"}))  # fmt: skip
    out.with_name("seed0.curve.csv").write_text("round,acc\n1,50\n")
    out.with_name("seed0.model.pt").write_bytes(b"weights")  # never recorded


def test_finished_jobs_are_recorded_and_read_back(tmp_path):
    """A record per finished job (and for the other model selection its training wrote), with the times and
    command of the log, commit / machine / versions from the job's own output, and the precision and threads
    of the worker's config, never of this process's torch flags; each reads back through ``read_record``."""
    import torch

    best, last = _pfl(), _pfl(selection="last")
    ev = PFLEvalJob(**best.train_fields(), evaluation="initial", ft_part="full", ft_epochs=1, ft_lr="0.001",
                    ft_momentum="0.9")  # fmt: skip
    unit = group_units([("T:a", ev), ("T:b", PFLEvalJob(**{**ev.train_fields(), "selection": "last"},
                        evaluation="initial", ft_part="full", ft_epochs=1, ft_lr="0.001", ft_momentum="0.9"))],
                       lambda j: 60.0)[0]  # fmt: skip
    assert unit.root == best and last in unit.jobs
    unit = dataclasses.replace(unit, job_est_s=tuple(123.4 if j == best else 0.0 for j in unit.jobs))
    assert Unit.from_dict(json.loads(json.dumps(unit.to_dict()))) == unit  # what a worker reads
    for job in (best, last):
        _fake_outputs(tmp_path, job)
    entries = [{"job": {}, "path": best.path, "start": 1_700_000_000.0, "end": 1_700_000_100.0, "wall_s": 100.0,
                "command": "flb job {...}", "status": "done"},
               {"job": {}, "path": ev.path, "start": 1_700_000_100.0, "end": 1_700_000_101.0, "status": "stopped"}]  # fmt: skip
    config = {"device": "cuda", "threads_per_worker": 4, "train_precision": "fp32", "tf32": False,
              "pfl_both_selections": True}  # fmt: skip
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # this process's flags must not leak into the records
    try:
        run = manifest(entries, config, 600.0)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert run["precision"] == "fp32; tf32 off" and run["cuda"]["matmul_allow_tf32"] is False
    recs = harvest_cli.record_finished([unit], entries, {best.path, last.path, ev.path}, config, run,
                                       tmp_path / "ledger", "test", tmp_path, print_fn=lambda s: None)  # fmt: skip
    assert sorted(r.job.path for r in recs) == sorted([best.path, last.path])  # not the stopped evaluation
    for rec in recs:
        back = read_record(rec.folder)
        assert back.job == rec.job and back.provenance == rec.provenance and back.inputs == {"partition_hash": "ph"}
        p = back.provenance
        assert (p.code_commit, p.machine, p.versions, p.device) == ("abc123", "the GPU box", "torch=9", "cuda:0")
        assert (p.threads, p.precision, p.wall_s, p.command) == (4, "fp32; tf32 off", 100.0, "flb job {...}")
        assert p.start == "2023-11-14T22:13:20+00:00" and p.end == "2023-11-14T22:15:00+00:00"
        assert not any(f.endswith(".pt") for f in back.files)
    sibling = next(r for r in recs if r.job == last)
    assert sibling.provenance.notes and best.path in sibling.provenance.notes[0]
    # the plan's estimate beside the wall time (the estimator can be checked); none for the sibling's outputs
    assert next(r for r in recs if r.job == best).provenance.estimate_s == 123.4 and sibling.provenance.estimate_s is None


def test_an_interrupted_harvest_still_records_the_jobs_that_finished(tmp_path, monkeypatch):
    """Ctrl-C: the workers are stopped (above) and every job that finished before is recorded all the same, then
    the interruption goes on; a job that finished but was never recorded would be skipped by the next harvest
    (its output is on disk) and never reach the ledger."""
    job = _pfl()
    unit = group_units([("T:a", job)], lambda j: 60.0)[0]
    _fake_outputs(tmp_path, job)
    monkeypatch.chdir(tmp_path)

    def interrupted(units, config, budget_s, workers, work, **kw):
        work.mkdir(parents=True, exist_ok=True)
        entry = {"job": {}, "path": job.path, "start": 1_700_000_000.0, "end": 1_700_000_100.0, "wall_s": 100.0,
                 "command": "flb job {...}", "status": "done"}  # fmt: skip
        (work / "unit001.jsonl").write_text(json.dumps(entry) + "\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(harvest_cli, "harvest", interrupted)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        harvest_cli.run_harvest([unit], {"device": "cpu"}, 60.0, out=Path("ledger"), stamp="s1", print_fn=said.append)
    (folder,) = [p for p in (tmp_path / "ledger" / "pfl_train").iterdir()]
    assert read_record(folder).job == job and any("recording the 1 job(s)" in line for line in said)


# ------------------------------------------------------------------------------- (d), (e) the command
def test_dry_run_prints_the_plan_and_runs_nothing(real_data_root, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    monkeypatch.setattr(harvest_cli, "run_harvest", lambda *a, **k: pytest.fail("a dry run ran the harvest"))
    code = harvest_cli.main(["--device", "cpu", "--budget", "2h", "--targets", "fedbabu_table12", "--dry-run",
                             "--config", f"data_root={real_data_root}"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "dry run: nothing was run" in out
    assert "training unit(s)" in out and "fits in the budget:" in out and "[fits]" in out
    assert "results/runs/pfl/cifar10/" in out
    assert not (tmp_path / "results").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("budget", ["25x", "", "m", "0m", "-5m", "25", "1h30m"])
def test_a_bad_budget_is_one_error_line(budget, capsys):
    from benchmark.cli import main

    code = main(["harvest", "--device", "cpu", f"--budget={budget}", "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("flb: error: --budget") and "90s, 25m, 2h" in err


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90.0), ("25m", 1500.0), ("2h", 7200.0), ("1.5h", 5400.0)])
def test_budgets_parse(text, seconds):
    assert harvest_cli.parse_budget(text) == seconds


def test_harvest_keys_are_checked_apart_from_the_schema(monkeypatch):
    cfg = harvest_cli.harvest_config("cpu", {"tf32": True, "checkpoint_every": 2}, workers=1, nice=True)
    assert cfg["tf32"] is True and cfg["threads_per_worker"] == 1 and cfg["cpu_training"] is True
    assert cfg["checkpoint_every"] == 2 and cfg["device"] == "cpu"
    from benchmark.errors import ConfigError

    with pytest.raises(ConfigError, match="tf32"):
        harvest_cli.harvest_config("cpu", {"tf32": "yes"})


# ------------------------------------------------------- (b) stopped at the budget, resumed to the same numbers
def _tensors(tree, prefix=""):
    """(name, tensor) of a nested dict of tensors. The model files are compared by their tensors: their bytes
    differ after a resume only by pickle's memo of the key strings (a resumed state's keys are other str
    objects), not by any number."""
    for k, v in tree.items():
        yield from _tensors(v, f"{prefix}{k}.") if isinstance(v, dict) else [(prefix + str(k), v)]


def _checkpoint(job: PFLTrainJob) -> Path:
    return Path("results/checkpoints/" + job.path.removeprefix("results/").removesuffix(".json") + ".pt")


def test_the_bar_shows_the_latest_round_each_worker_printed(tmp_path) -> None:
    out = tmp_path / "unit001.log"
    assert last_round(out) is None  # no output yet
    out.write_text("loading\n[pfl fedbabu] round 4/80  0.02 rounds/s  ETA 00:59:00  acc 0.3100\n"
                   "[pfl fedbabu] round 8/80  0.02 rounds/s  ETA 00:55:00  acc 0.4200\nnoise round 9/9\n")  # fmt: skip
    assert last_round(out) == "8/80"
    out.write_text("x" * 10_000 + "\n[ncm] round 2/5  1.00 rounds/s  ETA 00:00:03  acc 0.5000\n")
    assert last_round(out) == "2/5"  # read from the end of a long file
    shown = []
    bar = harvest_cli._Bar(100.0)
    bar.bar.set_postfix_str = lambda text, refresh=False: shown.append(text)
    bar.tick(Progress(0, 3, 0, 2, 10.0, 100.0, ("8/80", "2/5")))
    bar.close()
    assert shown == ["units 0/3 (running 2: round 8/80, 2/5), cells 0"]


def _run(units, config, budget_s: float, clock=None, park=None):
    return harvest_cli.run_harvest(units, config, budget_s, out=Path("runs"), stamp=f"s{time.time_ns()}",
                                   print_fn=lambda s: None, clock=clock, park=park)  # fmt: skip


@pytest.mark.slow
def test_a_harvest_stopped_by_its_budget_resumes_to_the_numbers_of_an_uninterrupted_run(
    real_data_root, tmp_path, monkeypatch
):
    """A real pfl training (CIFAR-10, 4convNet, 3 rounds, no periodic checkpoint before the last round) harvested
    three times: a 1 s budget stops the worker before anything is written; a budget that ends once round 1 is done
    stops it after round 2, the round in progress, with its checkpoint written there (no output, no record, the
    checkpoint kept); the next harvest resumes from that
    checkpoint (its rows, wall times included, are the first rows of the final history) and ends with the same
    per-client accuracies, selected round, history (wall times aside) and model as one uninterrupted harvest."""
    import torch

    from benchmark.io import read_sealed

    job = _pfl()
    units = group_units([("T:cell", job)], lambda j: 10.0)
    config = {"device": "cpu", "data_root": str(real_data_root), "checkpoint_every": 100, "progress": True,
              "pfl_eval_clients": 10, "threads_per_worker": 1, "pfl_both_selections": False, "tf32": False}  # fmt: skip

    (tmp_path / "whole").mkdir()
    monkeypatch.chdir(tmp_path / "whole")
    whole = _run(units, config, 600.0)
    assert [e["status"] for e in whole.entries] == ["done"] and len(whole.records) == 1
    (output,) = Path("results/harvest").glob("*/unit001.log")  # the worker's round lines, what the bar shows
    assert last_round(output) == "3/3"
    want = json.loads((read_record(whole.records[0].folder).folder / "files" / job.path).read_text())

    (tmp_path / "cut").mkdir()
    monkeypatch.chdir(tmp_path / "cut")
    t0 = time.time()
    first = _run(units, config, 1.0)
    assert time.time() - t0 < 30 and first.records == [] and not Path(job.path).exists()

    ckpt = _checkpoint(job)

    def after_round_one() -> float:  # the budget ends once the worker has printed round 1/3
        logs = sorted(Path("results/harvest").glob("s*/unit001.log"))
        return time.time() + (1e6 if logs and last_round(logs[-1]) else 0.0)

    second = _run(units, config, 600.0, clock=after_round_one, park=Path("runs/parked"))
    assert [e["status"] for e in second.entries] == ["stopped"] and second.records == []
    assert second.entries[0]["stopped_after_round"] == 2  # the round in progress at the stop was ended
    assert not Path(job.path).exists() and ckpt.is_file() and not list(Path("runs").glob("*/*/record.json"))
    state = torch.load(io.BytesIO(read_sealed(ckpt)), weights_only=True)
    assert state["round"] == 2  # written by the stop: none was due (checkpoint_every 100)
    parked = Path("runs/parked") / ckpt
    assert parked.read_bytes() == ckpt.read_bytes()  # parked in the ledger folder, to be committed

    # another machine: a fresh checkout (no results/) with the ledger; the parked checkpoint is restored
    ckpt.unlink()
    assert restore_parked(Path("runs/parked")) == [ckpt] and ckpt.read_bytes() == parked.read_bytes()
    assert restore_parked(Path("runs/parked")) == []  # the local one is as far on: nothing to do

    third = _run(units, config, 600.0, park=Path("runs/parked"))
    assert not parked.exists()  # the training finished: its parked checkpoint is cleared
    assert [e["status"] for e in third.entries] == ["done"] and not ckpt.exists()
    assert third.entries[0]["resumed_from"] == [state["round"], 3] and "resumed_from" not in whole.entries[0]
    rec = read_record(third.records[0].folder)
    assert rec.provenance.notes == (f"resumed from its checkpoint at round {state['round']}/3: the wall time covers "
                                    "the rounds after it",)  # fmt: skip
    got = json.loads((rec.folder / "files" / job.path).read_text())
    kept = lambda rows: [(h["round"], h["train_loss"], h["wall_s"]) for h in rows]  # the loop's rows in the checkpoint
    assert kept(got["history"][: state["round"]]) == kept(state["history"])  # resumed, not restarted
    strip = lambda h: [{k: v for k, v in row.items() if k != "wall_s"} for row in h]
    assert strip(got["history"]) == strip(want["history"]) and len(got["history"]) == 3
    assert got["initial"] == want["initial"] and got["selected_round"] == want["selected_round"]
    models = [torch.load(Path(d) / job.path.replace(".json", ".model.pt"), weights_only=True)
              for d in (tmp_path / "whole", tmp_path / "cut")]  # fmt: skip
    flat = lambda m: {f"{k}/{n}": t for k, part in m.items() for n, t in _tensors(part)}
    a, b = flat(models[0]), flat(models[1])
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # the same weights, bit for bit
    assert rec.provenance.precision == "fp32; tf32 off" and rec.provenance.threads == 1
    assert rec.provenance.device == "cpu" and rec.provenance.command.startswith("flb job ")


def test_without_both_selections_each_selection_is_its_own_training():
    """Issue 27: with ``pfl_both_selections: false`` (the default) a training writes only its own selection, so
    the ``last`` cells' unit is the ``last`` training (not the ``best`` one, which would leave ``last`` to run a
    second training)."""
    last = _pfl(selection="last")
    ev = PFLEvalJob(**last.train_fields(), evaluation="initial", ft_part="full", ft_epochs=1, ft_lr="0.001",
                    ft_momentum="0.9")  # fmt: skip
    own = group_units([("T:a", ev)], lambda j: 60.0, shared_selections=False)[0]
    assert own.root == last and own.jobs[-1] == ev
    shared = group_units([("T:a", ev)], lambda j: 60.0)[0]
    assert shared.root == _pfl(selection="best") and last in shared.jobs


def test_pfl_eval_every_follows_the_selection_rule():
    """Every round where a best-on-test model is kept; otherwise only after the last round; a number where it
    is compatible; one error otherwise."""
    from benchmark.errors import ConfigError
    from benchmark.runners.pfl import pfl_eval_every

    assert pfl_eval_every({}, "last", 32, sibling=False) == 32
    assert pfl_eval_every({"pfl_eval_every": "auto"}, "best", 32, sibling=False) == 1
    assert pfl_eval_every({}, "last", 32, sibling=True) == 1
    assert pfl_eval_every({"pfl_eval_every": 4}, "last", 32, sibling=False) == 4
    with pytest.raises(ConfigError, match="best-on-test"):
        pfl_eval_every({"pfl_eval_every": 4}, "best", 32, sibling=False)
    with pytest.raises(ConfigError, match="pfl_eval_every='often'"):
        pfl_eval_every({"pfl_eval_every": "often"}, "last", 32, sibling=False)


def test_an_interrupted_harvest_stops_its_workers_and_a_nice_one_starts_them_in_their_own_session(
        tmp_path, monkeypatch):  # fmt: skip
    """A --nice harvest starts each worker in its own session (so that the worker can lower its scheduler group:
    Linux's autogroups share the CPU equally between sessions, whatever a process's nice value); a worker in its
    own session does not get the terminal's Ctrl-C, so an interrupted harvester stops every running worker."""
    made: list[tuple[_FakeProc, dict]] = []

    def popen(*a, **k):
        made.append((_FakeProc(0, None), k))
        return made[-1][0]

    monkeypatch.setattr(harvest_mod.subprocess, "Popen", popen)
    monkeypatch.setattr(harvest_mod.os, "nice", lambda inc: 19)  # as after os.nice(19)
    units = [Unit((_Train("a", 0),), ("T:a",), 60.0)]

    def interrupt(progress: Progress) -> None:
        if progress.running:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        harvest(units, {}, budget_s=60, workers=1, work=tmp_path / "w", print_fn=lambda s: None,
                on_tick=interrupt, poll_s=0.01)  # fmt: skip
    proc, kwargs = made[0]
    assert proc.terminated and kwargs["start_new_session"] is True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_stops_the_workers_like_ctrl_c(tmp_path, monkeypatch, signum):
    """``kill`` (SIGTERM), a closed terminal (SIGHUP) or ``kill -INT`` of a harvest started with ``&`` (whose SIGINT
    the shell ignores) stops the workers and raises Terminated (a KeyboardInterrupt: ``flb harvest`` then records
    the jobs that finished); without this, SIGTERM ended the harvester and left its workers running. A second
    signal while stopping is ignored, and the previous handlers are back afterwards."""
    made: list[_FakeProc] = []

    def popen(*a, **k):
        made.append(_FakeProc(0, None))
        return made[-1]

    monkeypatch.setattr(harvest_mod.subprocess, "Popen", popen)
    units = [Unit((_Train("a", 0),), ("T:a",), 60.0), Unit((_Train("b", 0),), ("T:b",), 60.0)]
    sent: list[int] = []

    def kill_me(progress: Progress) -> None:
        if progress.running == 2 and not sent:
            sent.append(signum)
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # the handler runs here, in the main thread
            os.kill(os.getpid(), signum)  # while stopping: ignored

    before = {s: signal.getsignal(s) for s in harvest_mod.STOP_SIGNALS}
    with pytest.raises(harvest_mod.Terminated, match=signal.Signals(signum).name):
        harvest(units, {}, budget_s=60, workers=2, work=tmp_path / "w", print_fn=lambda s: None,
                on_tick=kill_me, poll_s=0.01)  # fmt: skip
    assert sent and len(made) == 2 and all(p.terminated for p in made)
    assert {s: signal.getsignal(s) for s in harvest_mod.STOP_SIGNALS} == before


def test_lower_autogroup_writes_the_nice_value_and_says_when_it_cannot(tmp_path):
    from benchmark.harvest import lower_autogroup

    group = tmp_path / "autogroup"
    group.write_text("/autogroup-7 nice 0\n")
    assert lower_autogroup(group) and group.read_text() == "19\n"
    assert not lower_autogroup(tmp_path / "no" / "autogroup")


def test_a_pfl_clients_images_are_the_split_shared_among_its_clients():
    """Shards deal the 50,000 / 10,000 CIFAR images out among the K clients (fedbabu Table 11's K = 500: 100 / 20
    each), so a 500-client run costs a fifth of the images per client of a 100-client one; Dirichlet draws a fixed
    500 / 100 (benchmark/pfl/partition.py)."""
    from benchmark.runners.pfl import images_per_client, pfl_job_seconds, training_images

    assert images_per_client(_pfl()) == (500, 100) and images_per_client(_pfl(clients=500)) == (100, 20)
    assert images_per_client(_pfl(scheme="dirichlet", scheme_param="0.3", clients=500)) == (500, 100)
    k100, k500 = _pfl(participation="0.1", rounds=32, local_epochs=10), _pfl(participation="0.1", rounds=32,
                                                                           local_epochs=10, clients=500)  # fmt: skip
    assert training_images(k100) == 32 * 10 * 10 * 500 and training_images(k500) == 32 * 50 * 10 * 100
    assert pfl_job_seconds(k500, "cpu", {}) < pfl_job_seconds(k100, "cpu", {}) * 1.01


def test_parked_checkpoints_restore_only_when_further_on_and_never_damaged(tmp_path):
    """restore_parked copies a parked checkpoint where the local one is missing or behind, keeps a local one that
    is as far or further, and leaves a damaged parked file alone (not restored)."""
    import torch

    from benchmark.io import write_sealed

    def ckpt(path: Path, done: int) -> None:
        buf = io.BytesIO()
        torch.save({"round": done, "run": {"rounds": 80}}, buf)
        write_sealed(path, buf.getvalue())

    park, root = tmp_path / "runs" / "parked", tmp_path / "work"
    rel = Path("results/checkpoints/pfl/a.pt"), Path("results/checkpoints/pfl/b.pt"), Path("results/checkpoints/pfl/c.pt")
    ckpt(park / rel[0], 60)  # local missing: restored
    ckpt(park / rel[1], 20)  # local further on: kept
    ckpt(root / rel[1], 40)
    (park / rel[2]).write_bytes(b"flb-sealed 1 sha256=00 bytes=3\nabc")  # damaged: ignored
    assert restore_parked(park, root) == [root / rel[0]]
    assert (root / rel[0]).read_bytes() == (park / rel[0]).read_bytes() and not (root / rel[2]).exists()
    from benchmark.federated.checkpoint import checkpoint_progress

    assert checkpoint_progress(root / rel[1]) == (40, 80)


def test_a_checkpoint_too_large_to_commit_is_not_parked_and_the_harvest_says_so(tmp_path, monkeypatch):
    """Parked files are committed with the ledger: one above PARK_MAX_BYTES (Ditto's 47 MB of personal models) stays
    on its machine, and is reported; a small one is parked."""
    from benchmark import harvest_park
    from benchmark.federated.checkpoint import save_checkpoint
    from benchmark.harvest_park import park_checkpoints

    state = {"run": {"config": {}, "method": "x", "stage": "", "start_round": 0, "rounds": 80}, "round": 20,
             "trainer": {}, "history": [], "costs": {}}  # fmt: skip
    small, large = _CkptTrain("small", 0), _CkptTrain("large", 0)
    save_checkpoint(tmp_path / small.checkpoint_file(), state)
    save_checkpoint(tmp_path / large.checkpoint_file(), {**state, "trainer": {"blob": "x" * 50_000}})
    limit = (tmp_path / small.checkpoint_file()).stat().st_size + 1000
    assert (tmp_path / large.checkpoint_file()).stat().st_size > limit
    monkeypatch.setattr(harvest_park, "PARK_MAX_BYTES", limit)
    park = tmp_path / "runs" / "parked"
    done = park_checkpoints([Unit((small,), ("T:s",), 60.0), Unit((large,), ("T:l",), 60.0)], park, tmp_path)
    assert done.parked == [park / small.checkpoint_file()] and not (park / large.checkpoint_file()).exists()
    assert [p for p, _ in done.too_large] == [tmp_path / large.checkpoint_file()]


def test_parked_checkpoints_of_recorded_trainings_are_cleared(tmp_path):
    """clear_recorded removes the parked checkpoint of a training the ledger records (it finished, here or on
    another machine, so no plan of a harvest contains it any more) and keeps the others'."""
    from benchmark.harvest_park import clear_recorded

    park = tmp_path / "parked"
    done, running = _pfl(rounds=32, local_epochs=10), _pfl(rounds=80, local_epochs=4)
    for job in (done, running):
        (park / job.checkpoint_file()).parent.mkdir(parents=True, exist_ok=True)
        (park / job.checkpoint_file()).write_bytes(b"x")
    evaluation = _Eval("a", 0, "e")  # a recorded job without a checkpoint
    assert clear_recorded(park, [done, evaluation]) == [park / done.checkpoint_file()]
    assert not (park / done.checkpoint_file()).exists() and (park / running.checkpoint_file()).is_file()
    assert clear_recorded(park, [done]) == []


def test_a_recorded_training_retrained_for_its_missing_evaluation_keeps_its_parked_checkpoint(tmp_path):
    """A recorded training whose unit still lacks an evaluation (no parked weights) is trained again in a planned
    unit; its parked checkpoint is that retraining's progress and stays (a harvest of 2026-11-27 lost FedBABU
    s = 5, tau = 4 at round 32/80 so). Once no planned unit runs it, it goes."""
    from benchmark.harvest_park import clear_recorded

    park = tmp_path / "parked"
    retrained = _pfl(rounds=80, local_epochs=4)
    (park / retrained.checkpoint_file()).parent.mkdir(parents=True, exist_ok=True)
    (park / retrained.checkpoint_file()).write_bytes(b"x")
    assert clear_recorded(park, [retrained], running=[retrained]) == []
    assert (park / retrained.checkpoint_file()).is_file()
    assert clear_recorded(park, [retrained], running=[]) == [park / retrained.checkpoint_file()]


def test_the_weights_of_a_trained_unit_with_evaluations_left_are_parked_and_restored(tmp_path):
    """A unit stopped between its training and its evaluations: the training's weights are parked, restored on
    a fresh machine, and with the recorded training materialised beside them the training is not run again;
    once every job of the unit is done the parked weights are removed."""
    from benchmark.harvest import must_run
    from benchmark.harvest_park import park_checkpoints
    from benchmark.ledger import MARKER_SUFFIX

    unit = group_units([("T:a", _Eval("a", 0, "e"))], lambda job: 1.0)[0]
    train, evaluation = _Train("a", 0), _Eval("a", 0, "e")
    here, fresh, park = tmp_path / "here", tmp_path / "fresh", tmp_path / "runs" / "parked"
    model = Path(train.path).with_name("seed0.model.pt")
    for rel, data in ((_Part("a").path, "{}"), (train.path, "{}"), (str(model), "weights")):
        (here / rel).parent.mkdir(parents=True, exist_ok=True)
        (here / rel).write_text(data)
    parking = park_checkpoints([unit], park, here)
    assert parking.parked == [park / model] and (park / model).read_text() == "weights"

    # a fresh machine: the training only as a materialised record (no weights): it would run again ...
    for rel in (_Part("a").path, train.path, train.path + MARKER_SUFFIX):
        (fresh / rel).parent.mkdir(parents=True, exist_ok=True)
        (fresh / rel).write_text("{}")
    assert must_run(train, unit, fresh)
    # ... until the parked weights are restored
    assert restore_parked(park, fresh) == [fresh / model] and (fresh / model).read_text() == "weights"
    assert not must_run(train, unit, fresh) and must_run(evaluation, unit, fresh)
    (fresh / model).write_text("newer")  # weights present here are never overwritten
    assert restore_parked(park, fresh) == [] and (fresh / model).read_text() == "newer"

    (here / evaluation.path).parent.mkdir(parents=True, exist_ok=True)
    (here / evaluation.path).write_text("{}")  # the unit is done: the parked weights go
    assert park_checkpoints([unit], park, here).cleared == [park / model] and not (park / model).exists()


def test_a_recorded_training_with_its_weights_on_disk_is_filled_and_only_evaluated(tmp_path, monkeypatch):
    """plan_harvest with the ledgers: a recorded training whose weights were restored (runs/parked/) is
    materialised from its record before the estimate, so its unit costs only the evaluation; without the weights
    (or without a record) it is trained again."""
    from types import SimpleNamespace as NS

    from benchmark.ledger import MARKER_SUFFIX

    planned = [("T:c", _Eval("c", 0, "e")), ("T:d", _Eval("d", 0, "e"))]
    monkeypatch.setattr(harvest_cli, "plan_units", lambda targets, config, seconds, seeds=None: group_units(planned, seconds))
    monkeypatch.setattr(harvest_cli, "job_estimate", lambda job, device, config: Estimate(60.0, True))
    ledger = tmp_path / "runs"
    for name in ("c", "d"):
        (ledger / name / "record.json").parent.mkdir(parents=True)
        (ledger / name / "record.json").write_text("{}")
    monkeypatch.setattr(harvest_cli, "record_folder", lambda job, led: led / job.name)
    monkeypatch.setattr(harvest_cli, "read_record", lambda folder: NS(stale=False, job=_Train(folder.name, 0)))

    def materialise(rec, root):
        (root / rec.job.path).write_text("{}")
        (root / (rec.job.path + MARKER_SUFFIX)).write_text("runs/x")

    monkeypatch.setattr(harvest_cli, "materialise", materialise)
    for rel in (_Part("c").path, _Part("d").path, _Train("c", 0).path.replace(".json", ".model.pt")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("w")  # c: its weights restored; d: none
    recorded = {_Train("c", 0).path, _Train("d", 0).path}
    plan = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, recorded, root=tmp_path, ledgers=[ledger])
    est = {u.root.name: u.est_s for u in plan.units}
    assert est == {"c": 60.0, "d": 120.0}  # c: the evaluation only; d: trained again, then evaluated
    assert (tmp_path / _Train("c", 0).path).is_file() and not (tmp_path / _Train("d", 0).path).exists()


def test_a_filled_training_brings_its_recorded_evaluations_so_only_the_missing_ones_run(tmp_path, monkeypatch):
    """A recorded training materialised from its restored weights brings the unit's recorded evaluations of it
    along: the harvest runs only the evaluation no record holds (an H200 and a CPU harvest of 2026-11-27 re-ran
    a recorded NCM evaluation of FedAvg s = 2, tau = 1 before this)."""
    from types import SimpleNamespace as NS

    train, done_eval, open_eval = _Train("c", 0), _Eval("c", 0, "ncm"), _Eval("c", 0, "personalised")
    planned = [("T:a", done_eval), ("T:b", open_eval)]
    monkeypatch.setattr(harvest_cli, "plan_units", lambda targets, config, seconds, seeds=None: group_units(planned, seconds))
    monkeypatch.setattr(harvest_cli, "job_estimate", lambda job, device, config: Estimate(60.0, True))
    ledger = tmp_path / "runs"
    folders = {}
    for job in (train, done_eval):
        folder = ledger / job.KIND / job.path.replace("/", "_")
        (folder / "record.json").parent.mkdir(parents=True)
        (folder / "record.json").write_text("{}")
        folders[folder] = job
    monkeypatch.setattr(harvest_cli, "record_folder", lambda job, led: led / job.KIND / job.path.replace("/", "_"))
    monkeypatch.setattr(harvest_cli, "read_record", lambda folder: NS(stale=False, job=folders[folder]))
    def materialise(rec, root):
        (root / rec.job.path).parent.mkdir(parents=True, exist_ok=True)
        (root / rec.job.path).write_text("{}")

    monkeypatch.setattr(harvest_cli, "materialise", materialise)
    for rel in (_Part("c").path, train.path.replace(".json", ".model.pt")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("w")
    plan = harvest_cli.plan_harvest(["T"], {"device": "cpu"}, {train.path, done_eval.path}, root=tmp_path,
                                    ledgers=[ledger])  # fmt: skip
    assert [u.est_s for u in plan.units] == [60.0]  # the open evaluation only
    assert (tmp_path / train.path).is_file() and (tmp_path / done_eval.path).is_file()
    assert not (tmp_path / open_eval.path).exists()


def test_the_harvester_and_its_runners_import_no_snakemake() -> None:
    """A lent GPU machine has no snakemake (its image; ``tools/gpu_harvest.sh`` carries only jsonschema's wheels):
    the harvester, its worker module and every runner plug-in must load without it."""
    code = ("import sys; import benchmark.cli, benchmark.harvest_cli, benchmark.harvest; "
            "from benchmark.runners import load_runners; load_runners(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'snakemake'}))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    assert out.stdout.strip() == "[]"


def test_a_training_that_another_starts_from_is_parked_with_its_record_and_replaces_the_ledgers(tmp_path):
    """LG-FedAvg after FedAvg: the unit runs the FedAvg training first. Stopped between the two, the FedAvg run
    made here is parked whole (record, sidecar, curve, weights: the ledger may hold another machine's FedAvg run,
    which these weights would not match); on a fresh machine it replaces the record materialised from the ledger
    (the marker goes), so FedAvg is not trained again; once the unit is done the parked files go."""
    from benchmark.harvest import must_run
    from benchmark.harvest_park import park_checkpoints
    from benchmark.ledger import MARKER_SUFFIX

    lg = _pfl(algorithm="lg_fedavg_after_fedavg", participation="0.1", rounds=8, local_epochs=10, selection="last")
    evaluation = PFLEvalJob(**lg.train_fields(), evaluation="personalised", ft_part="full", ft_epochs=5,
                            ft_lr="0.001", ft_momentum="0.9")  # fmt: skip
    (unit,) = group_units([("T:lg", evaluation)], lambda job: 1.0)
    (fedavg,) = lg.inputs()
    assert [j.path for j in unit.jobs] == [fedavg.path, lg.path, evaluation.path] and unit.root == lg
    stem = fedavg.path.removesuffix(".json")
    files = [fedavg.path, fedavg.path + ".sha256", stem + ".curve.csv", stem + ".model.pt"]
    here, fresh, park = tmp_path / "here", tmp_path / "fresh", tmp_path / "runs" / "parked"
    for rel in files:
        (here / rel).parent.mkdir(parents=True, exist_ok=True)
        (here / rel).write_text(f"here {Path(rel).name}")
    parking = park_checkpoints([unit], park, here)
    assert sorted(parking.parked) == sorted(park / rel for rel in files)

    for rel in (fedavg.path, fedavg.path + ".sha256", fedavg.path + MARKER_SUFFIX):  # the ledger's other run
        (fresh / rel).parent.mkdir(parents=True, exist_ok=True)
        (fresh / rel).write_text("the ledger's")
    assert must_run(fedavg, unit, fresh)
    assert sorted(restore_parked(park, fresh)) == sorted(fresh / rel for rel in files)
    assert all((fresh / rel).read_text() == f"here {Path(rel).name}" for rel in files)
    assert not (fresh / (fedavg.path + MARKER_SUFFIX)).exists() and not must_run(fedavg, unit, fresh)

    # a FedAvg run materialised from its record with the weights beside it parks the weights only
    (here / (fedavg.path + MARKER_SUFFIX)).write_text("")
    (park / fedavg.path).unlink()
    assert park_checkpoints([unit], park, here).parked == []
    assert not (park / fedavg.path).exists() and (park / (stem + ".model.pt")).is_file()

    for job in (lg, evaluation):  # the unit is done: its parked files go
        (here / job.path).parent.mkdir(parents=True, exist_ok=True)
        (here / job.path).write_text("{}")
    assert (park / (stem + ".model.pt")) in park_checkpoints([unit], park, here).cleared


def test_a_harvest_narrowed_by_its_seeds_keeps_the_parked_checkpoint_a_plain_harvest_resumes(tmp_path, monkeypatch):
    """A recorded training retrained as another unit's input (LG-FedAvg after FedAvg, App. A.3: the ledger keeps
    no weights) is parked unfinished. A harvest narrowed by ``--seeds`` (or ``--targets``, ``--config``) does not
    plan that unit, yet a later plain one resumes it: the parked checkpoint stays (a ``--seeds 1`` harvest of
    2026-12-07 removed the seed-0 FedAvg at 145/320 so). A plain harvest whose plan no longer runs it removes it."""
    from types import SimpleNamespace as NS

    from benchmark.harvest_estimate import Calibration

    retrained, second_seed = _pfl(rounds=320, seed=0), _pfl(rounds=32, local_epochs=10, seed=1)
    lg_unit = [("T:lg", retrained)]  # the plain plan: the unit that starts from the retrained training

    def plan_units(targets, config, seconds, seeds=None):
        return group_units([("T:s1", second_seed)] if seeds == (1,) else lg_unit, seconds)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(harvest_cli, "plan_units", plan_units)
    monkeypatch.setattr(harvest_cli, "list_specs", lambda: ["T"])
    monkeypatch.setattr(harvest_cli, "load_spec", lambda target: None)
    monkeypatch.setattr(harvest_cli, "ledger_records", lambda ledgers: [NS(job=retrained, stale=False)])
    monkeypatch.setattr(harvest_cli, "recorded_paths", lambda ledgers: set())  # LG-FedAvg itself is not recorded
    monkeypatch.setattr(harvest_cli, "calibrate", lambda *a, **k: Calibration())
    monkeypatch.setattr(harvest_cli, "job_estimate", lambda job, device, config: Estimate(60.0, True))
    parked = tmp_path / "runs" / "parked" / retrained.checkpoint_file()
    parked.parent.mkdir(parents=True)
    parked.write_bytes(b"145/320")
    args = ["--device", "cpu", "--budget", "1h", "--dry-run"]

    assert harvest_cli.main([*args, "--seeds", "1"]) == 0
    assert parked.read_bytes() == b"145/320"  # the narrowed harvest kept it
    assert harvest_cli.main(args) == 0
    assert parked.is_file()  # the plain plan runs it
    lg_unit.clear()  # the unit is done: no plan runs the training any more
    assert harvest_cli.main(args) == 0
    assert not parked.exists()
