"""``flb estimate``: what building targets would cost, asked before spending (issue 28: "A user asks before
spending").

    flb estimate TARGET [TARGET ...] [--config KEY=VALUE ...] [--units N]

The targets are planned as ``snakemake`` would plan them under the config (``config/config.yaml`` overlaid by
``--config``; ``device=cuda`` plans the training jobs for a GPU, ``device=cpu cpu_training=true`` for this CPU).
Every job of the plans and every job they read is counted **once** (the union: table2 and table3 share runs), and
estimated by :func:`benchmark.harvest_estimate.job_estimate` from the suite's measured throughputs (on a CPU
build also scaled by the recorded runs of this machine, :func:`benchmark.harvest_estimate.calibrate`). Printed:

* per job kind: the jobs and hours, and how many have no measured rate (:data:`~benchmark.harvest_estimate.
  DEFAULT_JOB_S` each assumed);
* with several targets, the hours the shared jobs save against building each target alone;
* the jobs this checkout already has (outputs in ``results/`` or recorded in ``runs/``) and what is left;
* on a GPU build with small pfl jobs (``benchmark/gpu_slots.py``: one slot each), the GPU hours of the first
  build when they share the GPU, their hours divided by the measured gain (``throughput.yaml`` ``sharing``);
* the training units still to run, most cells per estimated hour first: the order in which ``flb harvest`` runs
  them (:func:`benchmark.harvest_cli.plan_harvest`, the same estimates; parked checkpoints count for the rounds
  they have left), the first ``--units`` of them (default 10; issue 27). One difference: a recorded training
  whose weights a harvest restored is counted as trained again here (an estimate writes nothing), where the
  harvest only evaluates it;
* as the last line, ``H100-hours: first build <x>, with recorded choices <y>`` (``CPU-hours: ...`` for a CPU
  build): the first build runs every job; with recorded choices the learning-rate grids
  (:data:`CHOICE_KINDS`) are read from the ledger instead of run. The GPU hours are the throughput table's H100
  rates (``benchmark/fl/throughput.yaml``).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.fl.estimate import sharing_gain
from benchmark.gpu_slots import SLOTS_PER_GPU, job_gpu_slots
from benchmark.harvest_cli import HarvestPlan, ledger_records, plan_harvest, recorded_paths
from benchmark.harvest_estimate import DEFAULT_JOB_S, Calibration, calibrate, job_estimate, machine_key
from benchmark.harvest_park import PARK_DIR
from benchmark.jobs import Job, job_closure
from benchmark.ledger import LEDGER_DIR
from benchmark.provenance import machine
from benchmark.reasons import ReasonKind
from benchmark.tables.plan import plan_target
from benchmark.tables.spec import load_spec
from benchmark.workflow import load_config, parse_kv

#: Job kinds whose only product is a choice (a learning-rate grid point): a recorded choice stands for them.
CHOICE_KINDS = frozenset({"fl_tune", "fl_lr_halving", "zo_val_curve"})


@dataclass(frozen=True)
class KindCost:
    """The jobs of one kind in a build: how many, their estimated seconds, how many without a measured rate."""

    kind: str
    jobs: int
    seconds: float
    unmeasured: int


@dataclass(frozen=True)
class BuildEstimate:
    """The cost of building some targets: per kind, the union of their jobs; ``alone_s``: the sum over the
    targets built one by one; ``done`` / ``left_s``: the jobs this checkout has and the seconds of the rest."""

    targets: tuple[str, ...]
    device: str
    kinds: tuple[KindCost, ...]
    alone_s: float
    done: int
    left_s: float  # the jobs a build here still runs (below a done job, nothing is run)
    unplanned_training: int = 0  # cells that need training the config does not plan (device=cpu without cpu_training)
    shared: tuple[tuple[str, int], ...] = ()  # (kind, jobs) of the jobs two or more targets hold
    slot_shared_s: float | None = None  # first build's GPU wall clock with the one-slot jobs sharing (gpu_slots)

    @property
    def first_s(self) -> float:
        return sum(k.seconds for k in self.kinds)

    @property
    def with_choices_s(self) -> float:
        return sum(k.seconds for k in self.kinds if k.kind not in CHOICE_KINDS)

    @property
    def jobs(self) -> int:
        return sum(k.jobs for k in self.kinds)


def _plan(target: str, config: Mapping[str, Any]) -> tuple[list[Job], list[Job], int]:
    """The jobs the cells of ``target`` read, the same with every job they read, and how many of its cells need
    training that the config does not plan."""
    plans = plan_target(target, config)
    unplanned = sum(1 for p in plans if p.not_run is not None and p.not_run.kind == ReasonKind.NEEDS_TRAINING)
    top = [j for plan in plans for j in plan.jobs]
    return top, job_closure(top), unplanned


def _still_to_run(top: Sequence[Job], done: set[str]) -> dict[str, Job]:
    """The jobs a build of ``top`` runs in this checkout: not done, and read by a job that runs (a job done here
    or recorded is not run, and neither are the jobs it read: a recorded learning-rate choice stands for its
    grid, as the ledger's materialisation makes Snakemake do)."""
    out: dict[str, Job] = {}

    def visit(job: Job) -> None:
        if job.path in done or job.path in out:
            return
        out[job.path] = job
        for dep in job.inputs():
            visit(dep)

    for job in top:
        visit(job)
    return out


def estimate_build(targets: Sequence[str], config: Mapping[str, Any], recorded: set[str],
                   calibration: Calibration | None = None, root: Path = Path(".")) -> BuildEstimate:  # fmt: skip
    """:class:`BuildEstimate` of ``targets`` under ``config`` (module docstring)."""
    device = str(config.get("device") or "cpu")
    calibration = calibration or Calibration()
    cache: dict[str, tuple[float, bool]] = {}

    def seconds(job: Job) -> tuple[float, bool]:
        if job.path not in cache:
            est = job_estimate(job, device, config)
            cache[job.path] = (est.seconds * (calibration.factor(job.KIND) if est.measured else 1.0), est.measured)
        return cache[job.path]

    planned = {t: _plan(t, config) for t in targets}
    per_target = {t: jobs for t, (_, jobs, _) in planned.items()}
    union = {j.path: j for jobs in per_target.values() for j in jobs}
    count, secs, unmeasured = Counter(), defaultdict(float), Counter()
    for job in union.values():
        s, measured = seconds(job)
        count[job.KIND] += 1
        secs[job.KIND] += s
        unmeasured[job.KIND] += not measured
    kinds = tuple(sorted((KindCost(k, count[k], secs[k], unmeasured[k]) for k in count), key=lambda k: -k.seconds))
    alone = sum(seconds(j)[0] for jobs in per_target.values() for j in jobs)
    done = {p for p in union if (root / p).exists() or p in recorded}
    top = [j for t in targets for j in planned[t][0]]
    left = sum(seconds(j)[0] for j in _still_to_run(top, done).values())
    unplanned = sum(n for *_, n in planned.values())
    holders = Counter(p for jobs in per_target.values() for p in {j.path for j in jobs})
    shared = Counter(union[p].KIND for p, n in holders.items() if n > 1)
    slot_shared = None
    if (gain := sharing_gain(machine_key(device))) is not None and any(job_gpu_slots(j, device) == 1 for j in union.values()):
        slot_shared = sum(seconds(j)[0] / (gain if job_gpu_slots(j, device) == 1 else 1.0) for j in union.values())
    return BuildEstimate(tuple(targets), device, kinds, alone, len(done), left, unplanned, tuple(sorted(shared.items())),
                         slot_shared)  # fmt: skip


def describe_units(plan: HarvestPlan, device: str, show: int = 10) -> list[str]:
    """The first ``show`` training units still to run, most cells per estimated hour first (the order of
    ``flb harvest``), with their cells, hours and cells per hour (issue 27)."""
    if show <= 0 or not plan.units:
        return []
    where = "H100" if machine_key(device) != "cpu" else "CPU"
    lines = [f"training units left: {len(plan.units)}, most cells per {where}-hour first (the order flb harvest runs "
             "them)"]  # fmt: skip
    for i, u in enumerate(plan.units[:show], 1):
        hours = u.est_s / 3600
        rate = f"{len(u.cells) / hours:6.2f}" if hours > 0 else "     -"
        marks = "" if u.resumes is None else f"  (resumes at round {u.resumes[0]}/{u.resumes[1]})"
        marks += "  (no measured rate: assumed)" if u.unmeasured else ""
        lines.append(f"  {i:3d}. {len(u.cells):3d} cells  {hours:7.2f} h  {rate} cells/h  {u.root.path}{marks}")
    if len(plan.units) > show:
        lines.append(f"  ... and {len(plan.units) - show} more (--units N shows more)")
    return lines


def describe(est: BuildEstimate, calibration: Calibration | None = None,
             units: Sequence[str] = ()) -> list[str]:  # fmt: skip
    """The lines ``flb estimate`` prints (module docstring), ``units`` (:func:`describe_units`) before this
    checkout's line; the last one is the hours line."""
    gpu = machine_key(est.device) != "cpu"
    unit = "H100-hours" if gpu else "CPU-hours"
    lines = [f"flb estimate: {' '.join(est.targets)} on {est.device} "
             f"({'the H100 rates of benchmark/fl/throughput.yaml' if gpu else 'this CPU'})",
             f"  {'job kind':<20} {'jobs':>6} {'hours':>9}"]  # fmt: skip
    for k in est.kinds:
        note = f"   {k.unmeasured} with no measured rate: {DEFAULT_JOB_S / 60:.0f} min each assumed" if k.unmeasured else ""
        choice = "   (learning-rate grid: a recorded choice stands for it)" if k.kind in CHOICE_KINDS else ""
        lines.append(f"  {k.kind:<20} {k.jobs:>6} {k.seconds / 3600:>9.2f}{note}{choice}")
    lines.append(f"  {'all':<20} {est.jobs:>6} {est.first_s / 3600:>9.2f}")
    if calibration is not None and not gpu:
        lines.append(f"  ({calibration.describe()})")
    if len(est.targets) > 1:
        what = ", ".join(f"{n} {k}" for k, n in est.shared) or "none"
        lines.append(f"shared jobs counted once ({what}): {est.alone_s / 3600:.2f} hours if each target were built "
                     f"alone, {est.first_s / 3600:.2f} together")  # fmt: skip
    if est.unplanned_training:
        lines.append(f"not counted: {est.unplanned_training} cell(s) need training this config does not plan "
                     "(--config device=cuda, or device=cpu cpu_training=true)")  # fmt: skip
    lines += units
    lines.append(f"this checkout: {est.done} of {est.jobs} jobs done (results/ or recorded); "
                 f"{est.left_s / 3600:.2f} hours left")  # fmt: skip
    if est.slot_shared_s is not None:
        lines.append(f"with {SLOTS_PER_GPU} small pfl jobs sharing the GPU (gpu_slots; measured gain "
                     f"{sharing_gain(machine_key(est.device)):.2f}, throughput.yaml sharing): first build "
                     f"{est.slot_shared_s / 3600:.1f} hours of the GPU")  # fmt: skip
    lines.append(f"{unit}: first build {est.first_s / 3600:.1f}, with recorded choices {est.with_choices_s / 3600:.1f}")
    return lines


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flb estimate", description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="+", help="paper-table targets (as snakemake takes them)")
    ap.add_argument("--config", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                    help="config overrides, as snakemake --config (device=cuda for a GPU build)")  # fmt: skip
    ap.add_argument("--units", type=int, default=10, metavar="N",
                    help="list the first N training units left, most cells per hour first (default 10; 0: none)")  # fmt: skip
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    for t in args.targets:
        load_spec(t)  # an unknown target is one error naming the targets, before anything is planned
    config = load_config(None, parse_kv(args.config))
    ledgers = [LEDGER_DIR]
    calibration = None
    if machine_key(str(config.get("device") or "cpu")) == "cpu":
        calibration = calibrate(ledger_records(ledgers), "cpu", machine(), config)
    recorded = recorded_paths(ledgers)
    est = estimate_build(args.targets, config, recorded, calibration)
    units: list[str] = []
    if args.units > 0:
        plan = plan_harvest(args.targets, config, recorded, calibration=calibration, park=LEDGER_DIR / PARK_DIR)
        units = describe_units(plan, str(config.get("device") or "cpu"), args.units)
    for line in describe(est, calibration, units):
        print(line)
    return 0
