"""``flb estimate`` (issue 28: ask before spending): the union of the targets' jobs counted once, per job kind,
the learning-rate grids dropped once their choices are recorded, the jobs this checkout has, and the last line
``H100-hours: first build <x>, with recorded choices <y>`` (CPU-hours on a CPU build)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace as NS
from typing import ClassVar

import pytest

from benchmark import estimate_cli
from benchmark.harvest_estimate import Estimate
from benchmark.jobs import Job
from benchmark.reasons import NotRunReason, ReasonKind


@dataclass(frozen=True)
class _Tune(Job):
    KIND: ClassVar[str] = "fl_tune"
    PATTERN: ClassVar[str] = "results/tune/{name}.json"
    name: str


@dataclass(frozen=True)
class _Train(Job):
    KIND: ClassVar[str] = "fl_train"
    PATTERN: ClassVar[str] = "results/train/{name}.json"
    name: str

    def inputs(self) -> tuple[Job, ...]:
        return (_Tune(self.name),)


@dataclass(frozen=True)
class _Odd(Job):
    KIND: ClassVar[str] = "extract"
    PATTERN: ClassVar[str] = "results/odd/{name}.json"
    name: str


PLANS = {
    "A": [NS(jobs=[_Train("shared"), _Train("a")], not_run=None), NS(jobs=[], not_run=None)],
    "B": [NS(jobs=[_Train("shared"), _Odd("b")], not_run=None),
          NS(jobs=[], not_run=NotRunReason(ReasonKind.NEEDS_TRAINING, "training", "needs a GPU"))],
}  # fmt: skip
SECONDS = {"fl_tune": 3600.0, "fl_train": 1800.0}


@pytest.fixture()
def fake(monkeypatch):
    monkeypatch.setattr(estimate_cli, "plan_target", lambda target, config: PLANS[target])
    monkeypatch.setattr(estimate_cli, "job_estimate",
                        lambda job, device, config: Estimate(SECONDS[job.KIND], True) if job.KIND in SECONDS
                        else Estimate(600.0, False))  # fmt: skip


def test_the_union_of_the_targets_per_kind_and_the_hours_line(fake, tmp_path):
    (tmp_path / _Train("a").path).parent.mkdir(parents=True)
    (tmp_path / _Train("a").path).write_text("{}")  # on disk
    est = estimate_cli.estimate_build(["A", "B"], {"device": "cuda"}, {_Tune("a").path}, root=tmp_path)
    kinds = {k.kind: (k.jobs, k.seconds, k.unmeasured) for k in est.kinds}
    assert kinds == {"fl_tune": (2, 7200.0, 0), "fl_train": (2, 3600.0, 0), "extract": (1, 600.0, 1)}
    assert est.first_s == 11400.0 and est.with_choices_s == 4200.0
    assert est.alone_s == 11400.0 + 5400.0  # the shared training and its grid once more
    assert est.done == 2 and est.left_s == 11400.0 - 1800.0 - 3600.0 and est.unplanned_training == 1
    lines = estimate_cli.describe(est)
    assert lines[-1] == "H100-hours: first build 3.2, with recorded choices 1.2"
    text = "\n".join(lines)
    assert "1 with no measured rate: 10 min each assumed" in text and "4.67 hours if each target were built alone" in text
    assert est.shared == (("fl_train", 1), ("fl_tune", 1)) and "(1 fl_train, 1 fl_tune)" in text
    assert "not counted: 1 cell(s) need training" in text and "this checkout: 2 of 5 jobs done" in text


def test_below_a_recorded_job_nothing_is_run(fake):
    """A recorded training (or learning-rate choice) stands for the grid it read: the grid is not left to run."""
    est = estimate_cli.estimate_build(["A", "B"], {"device": "cuda"}, {_Train("shared").path, _Train("a").path})
    assert est.done == 2 and est.left_s == 600.0  # only the unrecorded extract job; neither grid


def test_a_cpu_build_says_cpu_hours(fake):
    est = estimate_cli.estimate_build(["A"], {"device": "cpu"}, set())
    assert estimate_cli.describe(est)[-1] == "CPU-hours: first build 3.0, with recorded choices 1.0"


def test_the_real_table3_plan_on_a_gpu(real_data_root, real_weights_dir, monkeypatch, capsys):
    """table3 under device=cuda: its grids are most of the first build, and the last line says so."""
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    monkeypatch.setenv("FLB_WEIGHTS_DIR", str(real_weights_dir))
    assert estimate_cli.main(["table3", "--config", "device=cuda"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("H100-hours: first build ") and any(line.lstrip().startswith("fl_tune") for line in out)
    first, choices = (float(x.split()[-1]) for x in out[-1].removeprefix("H100-hours: ").split(", "))
    assert first > 3 * choices > 0


@dataclass(frozen=True)
class _Pfl(Job):
    KIND: ClassVar[str] = "pfl_train"
    PATTERN: ClassVar[str] = "results/pfl/{name}.json"
    name: str
    model: str = "4convnet"


def test_small_pfl_jobs_sharing_the_gpu_are_counted_at_the_measured_gain(monkeypatch):
    """gpu_slots: a one-slot job (4convNet pfl) costs its hours / the measured sharing gain of GPU wall clock; the
    whole-GPU jobs their hours. The hours line itself stays the unshared sum; a CPU build prints no sharing line."""
    from benchmark.fl.estimate import sharing_gain

    plans = {"P": [NS(jobs=[_Pfl("a"), _Pfl("b"), _Train("t")], not_run=None)]}  # _Train reads a _Tune: 4 jobs
    monkeypatch.setattr(estimate_cli, "plan_target", lambda target, config: plans[target])
    monkeypatch.setattr(estimate_cli, "job_estimate", lambda job, device, config: Estimate(3600.0, True))
    gain = sharing_gain("h100")
    assert gain is not None and gain > 1
    est = estimate_cli.estimate_build(["P"], {"device": "cuda"}, set())
    assert est.first_s == 4 * 3600.0 and est.slot_shared_s == pytest.approx(2 * 3600.0 / gain + 2 * 3600.0)
    lines = estimate_cli.describe(est)
    assert f"measured gain {gain:.2f}" in lines[-2] and f"first build {est.slot_shared_s / 3600:.1f} hours" in lines[-2]
    assert lines[-1] == "H100-hours: first build 4.0, with recorded choices 3.0"  # its grid (_Tune) a choice
    cpu = estimate_cli.estimate_build(["P"], {"device": "cpu"}, set())
    assert cpu.slot_shared_s is None and not any("sharing" in line for line in estimate_cli.describe(cpu))


def test_the_training_units_left_are_listed_in_the_harvests_order_before_the_hours_line(fake):
    """Issue 27: ``flb estimate`` tells the order in which ``flb harvest`` runs the units (most cells per hour
    first), with their cells, hours and cells per hour, where a unit resumes, and how many more there are."""
    from benchmark.harvest import Unit
    from benchmark.harvest_cli import HarvestPlan

    units = (Unit((_Train("b"),), ("T:1", "T:2"), 1800.0, resumes=(60, 80)), Unit((_Train("a"),), ("T:3",), 3600.0),
             Unit((_Train("c"),), ("T:4",), 7200.0, unmeasured=True))  # fmt: skip
    lines = estimate_cli.describe_units(HarvestPlan(units, 0, 1), "cpu", show=2)
    assert lines[0] == "training units left: 3, most cells per CPU-hour first (the order flb harvest runs them)"
    assert lines[1].split()[:6] == ["1.", "2", "cells", "0.50", "h", "4.00"]
    assert lines[1].endswith(f"{_Train('b').path}  (resumes at round 60/80)")
    assert lines[2].split()[:6] == ["2.", "1", "cells", "1.00", "h", "1.00"] and lines[2].endswith(_Train("a").path)
    assert lines[3] == "  ... and 1 more (--units N shows more)"
    assert "H100-hour" in estimate_cli.describe_units(HarvestPlan(units, 0, 1), "cuda")[0]
    assert estimate_cli.describe_units(HarvestPlan(units, 0, 1), "cpu", show=0) == []
    est = estimate_cli.estimate_build(["A"], {"device": "cpu"}, set())
    out = estimate_cli.describe(est, units=lines)
    assert out[-1].startswith("CPU-hours: ") and out[-2].startswith("this checkout: ") and out[-6:-2] == lines
