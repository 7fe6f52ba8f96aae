"""How long one planned job takes on a device: the harvester's estimate (issue 24: "picks unrun planned jobs
by cells filled per estimated minute").

Every number comes from the suite's measured throughputs (:mod:`benchmark.fl.estimate`,
``benchmark/fl/throughput.yaml``) or the cost constants its runners already state (the FedMeZO runner's CPU
rates); a job kind, or a device, with no measured rate gets :data:`DEFAULT_JOB_S` and is counted as such, so
the harvester can say how much of its estimate is a guess. Jobs that only read files (partitions, learning-rate
choices, evaluations without training) cost :data:`LIGHT_JOB_S`.

The throughput table was measured on an idle machine; a harvest runs beside other work, several workers
sharing the cores. :func:`calibrate` checks the estimator against the ledger: for each job kind, the median of
``actual wall time / estimate`` over the recorded runs of this machine and device class (the estimate recomputed
by this code for the recorded job), and the harvester scales its estimates by it where at least
:data:`CALIBRATION_MIN_RUNS` runs say so (the plan prints the factors and how many runs they rest on). A kind
with too few runs on this machine borrows the factor of machines of the same family (:func:`machine_family`:
the same architecture, core count, CPU model and GPU, other vector extensions), and the plan says so: a fresh
machine of a pool then starts from its siblings' measured slowdown instead of the idle-machine table.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmark.errors import BenchmarkError
from benchmark.fl.estimate import REFERENCE_SIZE, extraction_rate, native_rate, run_cost
from benchmark.fl.train_protocols import get_train_protocol
from benchmark.jobs import Job
from benchmark.runners import fedmezo
from benchmark.runners.fl_train import _split_size
from benchmark.runners.pfl import FORWARD_SPEEDUP, pfl_job_seconds

#: Seconds assumed for a job whose kind has no measured rate on the device (stated in the harvest plan).
DEFAULT_JOB_S = 600.0
#: Seconds of a job that trains nothing (a partition, a learning-rate choice, an initial evaluation).
LIGHT_JOB_S = 5.0
#: Recorded runs of a kind needed before its estimates are scaled by them (:func:`calibrate`).
CALIBRATION_MIN_RUNS = 2
#: Kinds that train nothing (:data:`LIGHT_JOB_S`).
LIGHT_KINDS = frozenset({"partition", "fl_lr_choice"})


def machine_key(device: str) -> str:
    """The throughput table's machine for a device: ``cuda[:N]`` -> ``h100`` (the GPU it was measured on), else
    ``cpu``."""
    return "h100" if str(device).startswith("cuda") else "cpu"


@dataclass(frozen=True)
class Estimate:
    """Estimated seconds of one job; ``measured``: from a measured rate (else :data:`DEFAULT_JOB_S`)."""

    seconds: float
    measured: bool


def _central(job: Any, machine: str) -> float | None:
    rate = native_rate(machine, job.model)
    if rate is None:
        return None
    images = 50_000 if job.train_images in ("all", "None") else int(job.train_images)
    return job.epochs * images / rate + job.epochs * 10_000 / (rate * FORWARD_SPEEDUP)


def _fl_train(job: Any, machine: str, data_root: str | None) -> float | None:
    proto = get_train_protocol(job.protocol)
    n_train = _split_size(job.dataset, "train", job.subset, data_root)
    n_test = _split_size(job.dataset, "test", job.subset, data_root)
    if n_train is None or n_test is None:
        return None
    rounds = proto.real_rounds(job.method) + proto.method(job.method).lp_stage_rounds
    cost = run_cost(proto.images_per_round(n_train), rounds, proto.eval_interval(), n_test)
    if job.KIND == "fl_tune":
        cost = cost * (1 - proto.val_fraction)
    return cost.seconds(machine, proto.backbone, REFERENCE_SIZE)


def _extract(job: Any, machine: str, data_root: str | None) -> float | None:
    """One forward pass per image of the split (:func:`benchmark.fl.estimate.extraction_rate`), at the size the
    preprocessing gives a square 32 px source (CIFAR's; the other datasets' presets resize to a fixed size). A run seed's frozen-flip train split composes two
    cached passes (plain and mirrored) that every other seed shares, so one pass per job is what a few seeds cost
    on average (two seeds: exact), not an upper bound."""
    from benchmark.features.preprocess import PreprocessName, get_preprocess  # local: imports torch

    n = _split_size(job.dataset, job.split, job.subset, data_root)
    if n is None:
        return None
    pre = get_preprocess(PreprocessName.parse(job.preprocess).preset)
    rate = extraction_rate(machine, job.backbone, min(pre.output_size(32, 32)))
    return None if rate is None else n / rate


def _fl_halving(job: Any, machine: str, data_root: str | None) -> float | None:
    """A successive-halving search: the point-rounds its rungs train (:func:`benchmark.fl.lr_halving.rounds_spent`)
    at the cost per round of one grid point's run (evaluations included, as the rungs evaluate on cadence)."""
    from benchmark.fl.lr_halving import rounds_spent

    grid = job.grid_choice().grid()
    one = _fl_train(grid[0], machine, data_root)
    if one is None:
        return None
    plan = job.plan()
    return one * rounds_spent(plan) / plan[-1].rounds


def _zo_train(job: Any, machine: str, data_root: str | None) -> float | None:
    if machine != "cpu" or job.method == "slora":  # measured on this suite's CPU only; SLoRA backpropagates
        return None
    if job.k_shot == "16":
        return job.rounds * fedmezo.CPU_ROUND_S_KSHOT16
    examples = fedmezo._train_examples(job.dataset, job.k_shot, {"data_root": data_root})
    passes = 2 * job.num_z * job.rounds * max(job.local_steps, 1)
    return passes * examples / fedmezo.CPU_FORWARD_EXAMPLES_PER_S


def job_estimate(job: Job, device: str, config: Mapping[str, Any] | None = None) -> Estimate:
    """Estimated seconds of ``job`` on ``device`` (``cpu`` / ``cuda``): from the measured throughput of its kind
    on that machine, else :data:`DEFAULT_JOB_S` with ``measured=False``. Never raises for a job it cannot
    estimate (a missing dataset, an unknown protocol): that is the default too."""
    machine = machine_key(device)
    data_root = (config or {}).get("data_root")
    if job.KIND in LIGHT_KINDS:
        return Estimate(LIGHT_JOB_S, True)
    try:
        if job.KIND in ("pfl_train", "pfl_eval"):
            s = pfl_job_seconds(job, machine, config or {})
        elif job.KIND == "pfl_central_curve":
            s = _central(job, machine)
        elif job.KIND in ("fl_train", "fl_tune"):
            s = _fl_train(job, machine, data_root)
        elif job.KIND == "fl_lr_halving":
            s = _fl_halving(job, machine, data_root)
        elif job.KIND == "zo_train":
            s = _zo_train(job, machine, data_root)
        elif job.KIND == "extract":
            s = _extract(job, machine, data_root)
        else:
            s = None
    except (BenchmarkError, AttributeError, KeyError, ValueError, TypeError):
        s = None
    return Estimate(float(s), True) if s is not None else Estimate(DEFAULT_JOB_S, False)


#: How a record's note says its wall time covers only the rounds after a checkpoint (:func:`resumed_fraction`).
RESUMED_NOTE = "resumed from its checkpoint at round {done}/{rounds}: the wall time covers the rounds after it"
_RESUMED = re.compile(r"^resumed from its checkpoint at round (\d+)/(\d+):")
#: How a record's note says a training ran its rounds' clients in worker processes (:func:`procs_of`).
PROCS_NOTE = "its rounds' clients trained in {procs} processes (pfl_client_procs): the wall time is theirs"
_PROCS = re.compile(r"^its rounds' clients trained in (\d+) processes")


def procs_of(notes: Iterable[str]) -> int:
    """The client processes a recorded training ran with (:data:`PROCS_NOTE`), else 1."""
    for note in notes:
        if m := _PROCS.match(note):
            return int(m.group(1))
    return 1


def rounds_left_share(point: tuple[int, int] | None) -> float:
    """The share of a training's rounds still to run from a checkpoint at ``point`` (rounds done, rounds): ``1 -
    done/rounds``; 1 without one."""
    if point is None or point[1] <= 0:
        return 1.0
    return max(0.0, 1.0 - point[0] / point[1])


def resumed_fraction(notes: Iterable[str]) -> float:
    """The share of a job's rounds its recorded wall time covers: ``1 - done/rounds`` where a note says it resumed
    (:data:`RESUMED_NOTE`), else 1."""
    for note in notes:
        if m := _RESUMED.match(note):
            return rounds_left_share((int(m.group(1)), int(m.group(2))))
    return 1.0


def machine_family(machine: str) -> str:
    """``machine`` (:func:`benchmark.provenance.machine`) without its vector-extension list: ``x86_64 2 cpu (AMD
    EPYC; avx512f avx2)`` -> ``x86_64 2 cpu (AMD EPYC)``; a GPU suffix is kept."""
    return re.sub(r"; [a-z0-9_ ]+\)", ")", machine)


@dataclass(frozen=True)
class Calibration:
    """``actual / estimated`` wall time per job kind over the recorded runs of one machine and device class:
    ``kind -> (median factor, number of runs)``. Kinds with fewer than :data:`CALIBRATION_MIN_RUNS` runs are not
    scaled. ``borrowed``: ``kind -> machine`` for the kinds whose factor comes from another machine of this one's
    family (:func:`calibrate`)."""

    factors: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    borrowed: Mapping[str, str] = field(default_factory=dict)

    def factor(self, kind: str) -> float:
        got = self.factors.get(kind)
        return got[0] if got is not None and got[1] >= CALIBRATION_MIN_RUNS else 1.0

    def describe(self) -> str:
        used = {k: v for k, v in sorted(self.factors.items()) if v[1] >= CALIBRATION_MIN_RUNS}
        if not used:
            return "estimates not scaled: no job kind has recorded runs on this machine"
        parts = ", ".join(f"{k} x{f:.2f} (median of {n}{self._source(k)})" for k, (f, n) in used.items())
        where = "this machine (else its family, named)" if self.borrowed else "this machine"
        return f"estimates scaled by actual/estimate of the recorded runs on {where}: {parts}"

    def _source(self, kind: str) -> str:
        other = self.borrowed.get(kind)
        return f" on {other}, none here yet" if other else ""


def calibrate(records: Iterable[Any], device: str, machine: str, config: Mapping[str, Any] | None = None
              ) -> Calibration:  # fmt: skip
    """:class:`Calibration` from ledger records (:class:`benchmark.ledger.RunRecord`): those made on ``machine``
    (the provenance's machine text, :func:`benchmark.provenance.machine`) on the device class of ``device``
    (``cpu`` or ``cuda``), with a wall time, and not written by another job's run (a training's sibling
    selection carries that training's time). A job the estimator cannot rate (a default) is left out; a job
    resumed from a checkpoint is compared with the share of the estimate its rounds are
    (:func:`resumed_fraction`; records from before that note count whole), and a training with the client
    processes it ran with (:func:`procs_of`; the harvest's own ``pfl_client_procs`` does not rescale the past). A kind
    with fewer than :data:`CALIBRATION_MIN_RUNS` such runs takes the factor of the other machines of
    ``machine``'s family (:func:`machine_family`), pooled, named in :attr:`Calibration.borrowed`."""
    want = machine_key(device)
    family = machine_family(machine)
    here: dict[str, list[float]] = {}
    kin: dict[str, list[float]] = {}
    kin_machines: dict[str, set[str]] = {}
    for rec in records:
        prov = rec.provenance
        if machine_family(prov.machine) != family or machine_key(prov.device or "cpu") != want or not prov.wall_s:
            continue
        if any("written by" in note for note in prov.notes):
            continue
        # the estimate of the run as it ran: with its own client processes, not those of this harvest
        est = job_estimate(rec.job, device, {**(config or {}), "pfl_client_procs": procs_of(prov.notes)})
        share = resumed_fraction(prov.notes)  # a resumed run's wall time covers only the rounds it ran
        if est.measured and est.seconds > 0 and share > 0:
            ratio = float(prov.wall_s) / (est.seconds * share)
            if prov.machine == machine:
                here.setdefault(rec.job.KIND, []).append(ratio)
            else:
                kin.setdefault(rec.job.KIND, []).append(ratio)
                kin_machines.setdefault(rec.job.KIND, set()).add(prov.machine)
    factors = {k: (statistics.median(v), len(v)) for k, v in here.items()}
    borrowed: dict[str, str] = {}
    for kind, ratios in kin.items():
        if len(here.get(kind, ())) < CALIBRATION_MIN_RUNS and len(ratios) >= CALIBRATION_MIN_RUNS:
            factors[kind] = (statistics.median(ratios), len(ratios))
            borrowed[kind] = " / ".join(sorted(kin_machines[kind]))
    return Calibration(factors, borrowed)
