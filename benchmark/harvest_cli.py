"""``flb harvest``: spend a window of scarce compute (a lent GPU for minutes, a CPU in the background) on the
planned training jobs that fill the most cells per estimated minute, and bring every finished job back as a
recorded run (issue 24).

    flb harvest --device cuda|cpu --budget 25m [--grace 5m] [--targets T ...] [--only REGEX ...] [--out DIR] [--workers N]
                [--config key=value ...] [--dry-run] [--nice]

1. The config is ``config/config.yaml`` overlaid by ``--config`` and validated as ``flb run`` does
   (:func:`benchmark.workflow.load_config`), with the device set so that training jobs are planned (``cpu``
   also sets ``cpu_training``). Two keys belong to the harvester only and are taken out before validation:
   ``tf32`` (default false: fp32 means fp32) and ``threads_per_worker``.
2. The targets (default: every paper table) are planned; the training units (:mod:`benchmark.harvest`: a
   training job, its inputs and the jobs that read it) whose jobs are all done (output in ``results/`` or
   recorded in the ledger ``--out`` / ``runs/``) are skipped; the rest are ordered by cells per estimated
   minute (:func:`benchmark.harvest.group_units`; estimates :mod:`benchmark.harvest_estimate`).
3. The plan is printed before anything runs: units, cells, estimated minutes, and what fits in the budget.
   ``--dry-run`` stops there.
4. The units run in ``--workers`` processes with a progress bar (units done, cells filled, elapsed vs budget).
   A unit still running when the budget ends is stopped: a training ends the round in progress and writes its
   checkpoint there (within ``--grace``, default 5 min; other jobs stop at once), and the next harvest resumes it.
5. Every job that finished is written as a record (:func:`benchmark.ledger.write_record`) into ``--out``
   (default ``runs/``), with its provenance; the harvest's manifest goes to
   ``results/harvest/harvest-<UTC stamp>.json`` beside its work folder.

``--only REGEX``: keep only the units whose training output path matches one of the regular expressions
(``re.search``), e.g. ``--only tau4-`` for the 4-epoch runs; a pattern that matches no unit to run is an error.

``--seeds S ...``: plan these seeds for every cell instead of each spec's (:meth:`~benchmark.tables.spec.TableSpec.
with_seeds`): a second seed of the cells one seed cannot decide is recorded first (``--seeds 1 --only ...``),
then the paper's unit-seeds file lists the unit with ``seeds: [0, 1]`` (:mod:`benchmark.tables.unit_seeds`) and
every table that prints it uses both.

``--nice``: the harvester and its workers run at the lowest priority (``os.nice(19)``) with one torch thread
per worker on a CPU, so a harvest can run in the background beside other work.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmark.errors import BenchmarkError, ConfigError
from benchmark.harvest import (
    STOP_GRACE_S,
    Progress,
    Unit,
    harvest,
    logged_entries,
    manifest,
    must_run,
    plan_units,
    precision_of,
    resume_point,
    written_by,
)
from benchmark.harvest_estimate import (
    DEFAULT_JOB_S,
    PROCS_NOTE,
    RESUMED_NOTE,
    Calibration,
    calibrate,
    job_estimate,
    rounds_left_share,
)
from benchmark.harvest_park import PARK_DIR, PARK_MAX_BYTES, clear_recorded, park_checkpoints, restore_parked
from benchmark.io import atomic_write_json
from benchmark.jobs import Job
from benchmark.ledger import (
    LEDGER_DIR,
    Provenance,
    RunRecord,
    materialise,
    read_record,
    record_folder,
    record_folders,
    weight_files,
    write_record,
)
from benchmark.provenance import machine
from benchmark.runners import load_runners
from benchmark.tables.spec import list_specs, load_spec
from benchmark.workflow import load_config, parse_kv

#: Config keys of the harvester only (not in the workflow's schema): name -> type.
HARVEST_KEYS: dict[str, type] = {"tf32": bool, "threads_per_worker": int}
#: Where a harvest keeps its work folders and manifests.
HARVEST_DIR = Path("results/harvest")
_BUDGET = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h)")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0}
#: Keys of a job's own output JSON that name the inputs it read.
INPUT_KEYS = ("data_checksum", "partition_hash", "weights_sha256", "encoder_sha256", "dataset_sha256")


def parse_budget(text: str, option: str = "--budget", allow_zero: bool = False) -> float:
    """Seconds of a duration written ``90s``, ``25m`` or ``2h`` (a positive number, or zero with ``allow_zero``,
    and a unit); anything else is one :class:`ConfigError` naming ``option``."""
    m = _BUDGET.fullmatch(str(text).strip().lower())
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)] if m else -1.0
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(f"{option} {text!r} is not a time budget",
                          f"write a {'' if allow_zero else 'positive '}number and s, m or h: 90s, 25m, 2h")  # fmt: skip
    return seconds


def harvest_config(device: str, overrides: Mapping[str, Any], *, workers: int = 1, nice: bool = False,
                   base: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The validated config a harvest plans and runs with: ``overrides`` (``--config``) over the default config,
    the device set so training jobs are planned, ``progress`` on (each worker's round lines go to its output
    file, ``unitNNN.log``, and the bar shows every running unit's latest round: :func:`benchmark.harvest.last_round`), and the
    harvester's own keys (:data:`HARVEST_KEYS`) checked apart: ``tf32`` false unless asked,
    ``threads_per_worker`` 1 with ``nice`` on a CPU, else the CPUs shared among the workers."""
    own = {k: overrides[k] for k in HARVEST_KEYS if k in overrides}
    for key, value in own.items():
        kind = HARVEST_KEYS[key]
        if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
            raise ConfigError(f"config field {key!r}: {value!r} is not a {kind.__name__}",
                              f"e.g. --config {key}={'false' if kind is bool else 1}")  # fmt: skip
    rest = {k: v for k, v in overrides.items() if k not in HARVEST_KEYS}
    forced = {"device": device, **({"cpu_training": True} if device == "cpu" else {})}
    cfg = load_config(None, {**rest, **forced}, base=base)
    threads = 1 if nice and device == "cpu" else max(1, (os.cpu_count() or 1) // max(workers, 1))
    return {**cfg, "progress": True, "tf32": bool(own.get("tf32", False)),
            "threads_per_worker": int(own.get("threads_per_worker", threads))}  # fmt: skip


def ledger_records(ledgers: Sequence[Path]) -> list[RunRecord]:
    """The readable records of the ledgers (a damaged one is left out: ``flb runs verify`` names it)."""
    out = []
    for ledger in ledgers:
        for folder in record_folders(ledger):
            try:
                out.append(read_record(folder, verify=False))
            except BenchmarkError:
                continue
    return out


def recorded_paths(ledgers: Sequence[Path]) -> set[str]:
    """Output paths of the jobs the ledgers record and the code can use (not stale); a damaged record counts as
    not recorded (``flb runs verify`` names it)."""
    return {rec.job.path for rec in ledger_records(ledgers) if not rec.stale}


@dataclass(frozen=True)
class HarvestPlan:
    """The units to run (best first), the units skipped as done, and how many jobs have no measured rate."""

    units: tuple[Unit, ...]
    skipped: int
    unmeasured: int
    calibration: Calibration = field(default_factory=Calibration)

    @property
    def cells(self) -> int:
        return sum(len(u.cells) for u in self.units)

    @property
    def est_s(self) -> float:
        return sum(u.est_s for u in self.units)


def _recorded(job: Job, ledgers: Sequence[Path]) -> RunRecord | None:
    """The first ledger's usable (not stale) record of ``job``, or None."""
    for ledger in ledgers:
        folder = record_folder(job, ledger)
        if (folder / "record.json").is_file():
            rec = read_record(folder)
            return None if rec.stale else rec
    return None


def fill_weighted_trainings(units: Sequence[Unit], ledgers: Sequence[Path], root: Path = Path(".")) -> list[str]:
    """Materialise the recorded training of each unit whose weights are on disk (restored from ``runs/parked/``,
    :mod:`benchmark.harvest_park`) and whose output is not, with the unit's recorded evaluations of that
    training: the unit then runs only the evaluations still missing (:func:`benchmark.harvest.must_run`). Returns
    the outputs filled."""
    filled = []
    for unit in units:
        job = unit.root
        if (root / job.path).exists() or not weight_files(job, root):
            continue
        rec = _recorded(job, ledgers)
        if rec is None:
            continue
        for one in (rec, *(_recorded(j, ledgers) for j in unit.jobs if j is not job and not (root / j.path).exists())):
            if one is not None:
                materialise(one, root)
                filled.append(one.job.path)
    return filled


def plan_harvest(targets: Sequence[str], config: Mapping[str, Any], recorded: set[str],
                 root: Path = Path("."), seeds: tuple[int, ...] | None = None,
                 calibration: Calibration | None = None, ledgers: Sequence[Path] = (),
                 park: Path | None = None) -> HarvestPlan:  # fmt: skip
    """The training units of ``targets`` with a job not yet done (its output absent under ``root`` and not in
    ``recorded``), ordered by cells per estimated minute. A unit's estimate counts the jobs that running it runs
    (:func:`benchmark.harvest.must_run`): those not on disk, a recorded training among them (the ledger keeps no
    weights, so an evaluation still to run needs it trained again), each scaled by ``calibration`` (the recorded
    runs' actual / estimate of its kind on this machine, :func:`benchmark.harvest_estimate.calibrate`). Units with a
    job of no measured rate on the device come after every measured one: their assumed minutes say nothing of
    their cost (a ResNet-50 training on a CPU would rank first on an assumed 10 minutes). A training
    that a previous harvest stopped is estimated for the rounds its checkpoint has left (:func:`resume_point`), so
    a nearly finished unit ranks as the cheap one it is, and so is a training among a unit's inputs (LG-FedAvg's
    FedAvg model, App. A.3: :attr:`~benchmark.harvest.Unit.input_resumes`); with ``park``, a parked checkpoint
    further on counts as the harvest would restore it (:func:`~benchmark.harvest_park.restore_parked`), so that a plan made without
    restoring (``flb estimate``) has the harvest's order. With ``ledgers``, a recorded training whose weights are on
    disk is materialised first (:func:`fill_weighted_trainings`): only its evaluations are estimated and run."""
    unmeasured: set[str] = set()
    calibration = calibration or Calibration()

    def done(job: Job) -> bool:
        return (root / job.path).exists() or job.path in recorded

    def seconds(job: Job) -> float:
        est = job_estimate(job, str(config.get("device") or "cpu"), config)
        if not est.measured:
            unmeasured.add(job.path)
            return est.seconds
        return est.seconds * calibration.factor(job.KIND)

    def checkpointed(job: Job) -> tuple[int, int] | None:  # the further of its local and parked checkpoints
        return max((p for p in (resume_point(job, root), park and resume_point(job, park)) if p), default=None)

    units = plan_units(targets, config, lambda job: 0.0, seeds)
    fill_weighted_trainings(units, ledgers, root)
    todo = []
    for u in units:
        if all(done(j) for j in u.jobs):
            continue
        shared = bool(config.get("pfl_both_selections"))
        runs = [must_run(j, u, root) and not written_by(j, u.root, shared_selections=shared) for j in u.jobs]
        points = {j.path: checkpointed(j) for j, run in zip(u.jobs, runs, strict=True) if run}
        per_job = tuple(seconds(j) * rounds_left_share(points.get(j.path)) if run else 0.0
                        for j, run in zip(u.jobs, runs, strict=True))  # fmt: skip
        guessed = any(run and j.path in unmeasured for j, run in zip(u.jobs, runs, strict=True))
        inputs = tuple((j.KIND, *p) for j in u.jobs[: u.prereq] if (p := points.get(j.path)) is not None)
        todo.append(dataclasses.replace(u, est_s=sum(per_job), resumes=points.get(u.root.path), job_est_s=per_job,
                                        unmeasured=guessed, input_resumes=inputs))  # fmt: skip
    todo.sort(key=lambda u: (u.unmeasured, -u.value, u.seed, u.root.path))
    return HarvestPlan(tuple(todo), len(units) - len(todo), len(unmeasured), calibration)


def parked_jobs_to_keep(whole: HarvestPlan, narrowed: bool, plain: Callable[[], HarvestPlan]) -> list[Job]:
    """The jobs whose parked checkpoints a harvest keeps though the ledger records them
    (:func:`~benchmark.harvest_park.clear_recorded`): those of its whole plan (``--only`` aside: a later harvest
    may want them) and, when ``narrowed`` (``--targets``, ``--seeds`` or ``--config`` leave units out of that
    plan), those of ``plain()``, the plan of a harvest without them (every spec, the specs' own seeds, the
    default config), whose units a later harvest resumes. A narrowed harvest sees too little to call a parked
    checkpoint unwanted: a ``--seeds 1`` harvest (2026-12-07) removed so the parked FedAvg retraining that
    LG-FedAvg after FedAvg (App. A.3), seed 0, starts from, at round 145 of 320."""
    jobs = [job for unit in whole.units for job in unit.jobs]
    if narrowed:
        jobs += [job for unit in plain().units for job in unit.jobs]
    return jobs


def keep_only(plan: HarvestPlan, patterns: Sequence[str]) -> HarvestPlan:
    """``plan`` with only the units whose root path matches one of ``patterns`` (``re.search``); a pattern that
    is not a regular expression, or matches no unit of the plan, is one :class:`ConfigError` (a typed filter
    is never silently ignored)."""
    if not patterns:
        return plan
    compiled = []
    for text in patterns:
        try:
            compiled.append(re.compile(text))
        except re.error as err:
            raise ConfigError(f"--only {text!r} is not a regular expression: {err}", "e.g. --only tau4-") from None
    for text, rx in zip(patterns, compiled, strict=True):
        if not any(rx.search(u.root.path) for u in plan.units):
            raise ConfigError(f"--only {text!r} matches none of the {len(plan.units)} unit(s) left to run",
                              "see the unit paths with --dry-run (without --only)")  # fmt: skip
    kept = tuple(u for u in plan.units if any(rx.search(u.root.path) for rx in compiled))
    return dataclasses.replace(plan, units=kept)


def schedule(units: Sequence[Unit], budget_s: float, workers: int) -> tuple[list[Unit], list[Unit]]:
    """Which units finish within the budget and which start but are stopped by it (to resume next time),
    running in order on ``workers`` lanes by their estimates."""
    lanes = [0.0] * max(workers, 1)
    fit, cut = [], []
    for u in units:
        i = min(range(len(lanes)), key=lanes.__getitem__)
        if lanes[i] >= budget_s:
            break
        (fit if lanes[i] + u.est_s <= budget_s else cut).append(u)
        lanes[i] += u.est_s
    return fit, cut


def describe_plan(plan: HarvestPlan, device: str, budget_s: float, workers: int, show: int = 12) -> list[str]:
    """The lines printed before a harvest starts (module docstring, step 3)."""
    jobs = sum(len(u.jobs) for u in plan.units)
    lines = [f"flb harvest: device {device}, budget {budget_s / 60:.1f} min, {workers} worker(s)",
             f"to run: {len(plan.units)} training unit(s), {jobs} job(s), {plan.cells} cell(s); estimated "
             f"{plan.est_s / 60:,.1f} min in all"]  # fmt: skip
    lines.append(f"  ({plan.calibration.describe()})")
    if plan.unmeasured:
        lines.append(f"  ({plan.unmeasured} job(s) with no measured rate on {device}: {DEFAULT_JOB_S / 60:.0f} min "
                     "each assumed)")  # fmt: skip
    if plan.skipped:
        lines.append(f"skipped: {plan.skipped} unit(s) already done (outputs in results/ or recorded)")
    fit, cut = schedule(plan.units, budget_s, workers)
    lines.append(f"fits in the budget: {len(fit)} unit(s), {sum(len(u.cells) for u in fit)} cell(s), estimated "
                 f"{sum(u.est_s for u in fit) / 60:.1f} min" + (f"; {len(cut)} more start and are stopped at the "
                 "budget (their checkpoints resume next time)" if cut else ""))  # fmt: skip
    for i, u in enumerate(plan.units[:show], 1):
        mark = "fits" if u in fit else "cut" if u in cut else "later"
        resumed = "" if u.resumes is None else f"  (resumes at round {u.resumes[0]}/{u.resumes[1]})"
        resumed += "".join(f"  (its input {kind} resumes at round {done}/{rounds})"
                           for kind, done, rounds in u.input_resumes)  # fmt: skip
        resumed += "  (no measured rate: assumed)" if u.unmeasured else ""
        lines.append(f"  {i:3d}. {len(u.cells):3d} cells  est {u.est_s / 60:8.1f} min  [{mark}]  {u.root.path}"
                     + resumed)  # fmt: skip
    if len(plan.units) > show:
        lines.append(f"  ... and {len(plan.units) - show} more")
    return lines


# ----------------------------------------------------------------------------------------------- records
def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def _own_output(job: Job, root: Path) -> dict[str, Any]:
    """The job's own output JSON (the record of a training run), where it has one; ``{}`` otherwise."""
    for rel in (job.path, getattr(job, "record_path", None)):
        if rel and str(rel).endswith(".json") and (root / rel).is_file():
            try:
                raw = json.loads((root / rel).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(raw, dict):
                return raw
    return {}


def provenance_for(job: Job, entry: Mapping[str, Any], config: Mapping[str, Any], run: Mapping[str, Any],
                   source: str, root: Path = Path("."), notes: tuple[str, ...] = (),
                   estimate_s: float | None = None) -> Provenance:  # fmt: skip
    """A record's provenance: times, wall and command from the harvest's log ``entry``; commit, machine and
    versions from the job's own output where it states them (else the harvest ``run``'s manifest); device,
    threads and precision from the config the worker ran with; the plan's ``estimate_s`` of the job."""
    own = _own_output(job, root)
    return Provenance(
        code_commit=str(own.get("git_commit") or run.get("git_commit") or "unknown"),
        machine=str(own.get("machine") or run.get("machine") or ""),
        versions=str(own.get("versions") or run.get("versions") or ""),
        device=str(own.get("device") or config.get("device") or ""),
        threads=config.get("threads_per_worker"), precision=precision_of(config),
        start=_iso(float(entry["start"])), end=_iso(float(entry["end"])),
        wall_s=round(float(entry.get("wall_s", float(entry["end"]) - float(entry["start"]))), 3),
        command=str(entry.get("command", "")), source=source, notes=notes,
        estimate_s=None if not estimate_s else round(float(estimate_s), 1),
    )  # fmt: skip


def record_finished(units: Sequence[Unit], entries: Sequence[Mapping[str, Any]], missing_before: set[str],
                    config: Mapping[str, Any], run: Mapping[str, Any], out: Path, source: str,
                    root: Path = Path("."), print_fn: Callable[[str], None] = print) -> list[RunRecord]:  # fmt: skip
    """Write a record into ledger ``out`` for every job that finished in this harvest: each ``done`` log entry,
    and the outputs a training wrote for its sibling job (:func:`benchmark.harvest.written_by`), with the
    training's times. A job the ledger already records with other files keeps its record (one line says so)."""
    load_runners()
    done = {e["path"]: e for e in entries if e.get("status") == "done"}
    estimates = {j.path: s for u in units for j, s in zip(u.jobs, u.job_est_s, strict=False)}
    todo: list[tuple[Job, Mapping[str, Any], tuple[str, ...]]] = []
    for unit in units:
        for job in unit.jobs:
            if job.path in done:
                todo.append((job, done[job.path], ()))
            elif (written_by(job, unit.root, shared_selections=bool(config.get("pfl_both_selections")))
                  and unit.root.path in done and job.path in missing_before
                  and (root / job.path).is_file()):  # fmt: skip
                note = f"written by the training of {unit.root.path} (one training, both model selections)"
                todo.append((job, done[unit.root.path], (note,)))
    seen: set[str] = set()
    records = []
    for job, entry, notes in todo:
        if job.path in seen:
            continue
        seen.add(job.path)
        own = _own_output(job, root)
        try:
            resumed = entry.get("resumed_from")
            own_notes = (RESUMED_NOTE.format(done=resumed[0], rounds=resumed[1]),) if resumed and not notes else ()
            procs = job.threads(config) if hasattr(job, "threads") and not notes else 1
            own_notes += (PROCS_NOTE.format(procs=procs),) if procs > 1 else ()
            prov = provenance_for(job, entry, config, run, source, root, notes + own_notes,
                                  None if notes else estimates.get(job.path))  # fmt: skip
            rec = write_record(job, prov, root=root,
                               ledger=out, inputs={k: own[k] for k in INPUT_KEYS if k in own})  # fmt: skip
        except BenchmarkError as err:
            print_fn(f"[harvest] not recorded: {job.path}: {err}")
            continue
        records.append(rec)
    return records


# ------------------------------------------------------------------------------------------------ running
@dataclass(frozen=True)
class HarvestOutcome:
    entries: list[dict[str, Any]]
    records: list[RunRecord]
    manifest_path: Path


def run_harvest(units: Sequence[Unit], config: Mapping[str, Any], budget_s: float, *, workers: int = 1,
                out: Path = LEDGER_DIR, root: Path = Path("."), stamp: str | None = None,
                print_fn: Callable[[str], None] = print, on_tick: Callable[[Progress], None] | None = None,
                clock: Callable[[], float] | None = None, park: Path | None = None,
                grace_s: float = STOP_GRACE_S) -> HarvestOutcome:  # fmt: skip
    """Run ``units`` for ``budget_s`` (:func:`benchmark.harvest.harvest`, work folder
    ``results/harvest/<stamp>/``), write the manifest beside it and a record into ``out`` for every finished
    job (:func:`record_finished`); with ``park``, the checkpoints of the stopped trainings are parked there
    (:func:`benchmark.harvest_park.park_checkpoints`). The jobs write under the current directory (``root``: ``.``)."""
    stamp = stamp or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    work = root / HARVEST_DIR / stamp
    missing_before = {j.path for u in units for j in u.jobs if not (root / j.path).exists()}
    interrupted = None
    try:
        entries = harvest(list(units), config, budget_s, workers, work, print_fn=print_fn, on_tick=on_tick,
                          clock=clock or time.time, grace_s=grace_s)  # fmt: skip
    except KeyboardInterrupt as stop:  # its workers are stopped; the jobs that finished are still recorded
        interrupted, entries = stop, logged_entries(work)
        print_fn(f"[harvest] interrupted ({stop or 'Ctrl-C'}): recording the {sum(e.get('status') == 'done' for e in entries)} job(s) "
                 "that finished")  # fmt: skip
    run = manifest(entries, config, budget_s, grace_s)
    manifest_path = root / HARVEST_DIR / f"harvest-{stamp}.json"
    atomic_write_json(manifest_path, run)
    records = record_finished(units, entries, missing_before, config, run, out,
                              f"flb harvest ({manifest_path})", root, print_fn)  # fmt: skip
    if park is not None:
        parking = park_checkpoints(units, park, root)
        for local, size in parking.too_large:
            print_fn(f"[harvest] not parked: {local} ({size / 2**20:.1f} MiB, above the {PARK_MAX_BYTES // 2**20} MiB "
                     "limit of files committed with the ledger); it stays on this machine only")  # fmt: skip
        if parking.parked:
            print_fn(f"[harvest] parked {len(parking.parked)} checkpoint(s) in {park}: commit them with the records, "
                     "and the next harvest on any machine resumes from them")  # fmt: skip
    if interrupted is not None:
        raise interrupted
    return HarvestOutcome(entries, records, manifest_path)


class _Bar:
    """The progress display: elapsed vs budget, units done, cells filled (tqdm). Redrawn every second on a
    terminal, every minute into a file (a background harvest's log stays short)."""

    def __init__(self, budget_s: float) -> None:
        self.every = 1.0 if sys.stderr.isatty() else 60.0
        self.last = time.monotonic() - self.every
        self.bar = tqdm(total=round(budget_s), unit="s", desc="harvest", dynamic_ncols=True, file=sys.stderr,
                        mininterval=self.every, bar_format="{desc}: {bar} {n_fmt}/{total_fmt} s{postfix}")  # fmt: skip

    def tick(self, p: Progress) -> None:
        self.bar.n = round(p.elapsed_s)
        rounds = f": round {', '.join(p.rounds)}" if p.rounds else ""
        self.bar.set_postfix_str(f"units {p.units_done}/{p.units_total} (running {p.running}{rounds}), "
                                 f"cells {p.cells_filled}", refresh=False)  # fmt: skip
        if time.monotonic() - self.last >= self.every:
            self.last = time.monotonic()
            self.bar.refresh()

    def write(self, line: str) -> None:
        self.bar.write(line, file=sys.stdout)

    def close(self) -> None:
        self.bar.refresh()
        self.bar.close()


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flb harvest", description=__doc__.splitlines()[0])
    ap.add_argument("--device", required=True, choices=["cuda", "cpu"], help="where the training jobs run")
    ap.add_argument("--budget", required=True, help="wall-clock budget: 90s, 25m, 2h")
    ap.add_argument("--grace", default=f"{STOP_GRACE_S / 60:g}m",
                    help="at the end of the budget, how long a running job may go on (a training to end its round "
                         "and checkpoint there, an evaluation to finish) before it is stopped where it is (default "
                         "%(default)s; 0s: at once)")  # fmt: skip
    ap.add_argument("--targets", nargs="+", default=None, help="paper-table targets (default: every table)")
    ap.add_argument("--only", nargs="+", action="extend", default=[], metavar="REGEX",
                    help="keep only the units whose training output path matches one of these (re.search)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, metavar="S",
                    help="plan these seeds for every cell (default: each spec's): record a second seed before a "
                         "spec asks for it")  # fmt: skip
    ap.add_argument("--out", type=Path, default=LEDGER_DIR, help="ledger folder for the records (default runs/)")
    ap.add_argument("--workers", type=int, default=1, help="units run at the same time (default 1)")
    ap.add_argument("--config", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                    help="config overrides, as snakemake --config (plus tf32=, threads_per_worker=)")  # fmt: skip
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the estimate; run nothing")
    ap.add_argument("--nice", action="store_true", help="lowest priority, one torch thread per worker on a CPU")
    ap.add_argument("--no-park", action="store_true",
                    help="do not park the stopped trainings' checkpoints in <out>/parked/ (nor restore them)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """``flb harvest`` (module docstring). Exit 0 when every unit it ran finished or was stopped by the budget,
    1 when one failed; bad input is one :class:`BenchmarkError` (one line)."""
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    budget_s = parse_budget(args.budget)
    grace_s = parse_budget(args.grace, "--grace", allow_zero=True)
    if args.workers < 1:
        raise ConfigError(f"--workers {args.workers} is not a number of worker processes", "use 1 or more")
    targets = args.targets or list_specs()
    for t in targets:
        load_spec(t)  # an unknown target is one error naming the targets, before anything is planned
    if args.nice:
        os.nice(19)  # the workers inherit it
    config = harvest_config(args.device, parse_kv(args.config), workers=args.workers, nice=args.nice)
    ledgers = [args.out] + ([LEDGER_DIR] if args.out.resolve() != LEDGER_DIR.resolve() else [])
    procs = int(config.get("pfl_client_procs", 1))
    if procs > 1 and args.workers * procs > (os.cpu_count() or 1):
        print(f"flb harvest: note: {args.workers} worker(s) x pfl_client_procs {procs} = {args.workers * procs} "
              f"processes on {os.cpu_count()} CPU(s): they share them (e.g. --workers 1)", flush=True)  # fmt: skip
    print(f"flb harvest: planning {len(targets)} target(s) on {args.device} ...", flush=True)
    seeds = tuple(args.seeds) if args.seeds else None
    if seeds is not None and (len(set(seeds)) != len(seeds) or min(seeds) < 0):
        raise ConfigError(f"--seeds {' '.join(map(str, seeds))}: seeds must be distinct non-negative integers",
                          "e.g. --seeds 1, or --seeds 0 1")  # fmt: skip
    try:  # the machine text names the GPU once torch is imported, as in the records the workers wrote
        import torch  # noqa: F401
    except ImportError:  # pragma: no cover
        pass
    park = None if args.no_park else args.out / PARK_DIR
    records = ledger_records(ledgers)
    if park is not None and (restored := restore_parked(park)):
        print(f"flb harvest: restored {len(restored)} parked checkpoint(s) from {park}", flush=True)
    calibration = calibrate(records, args.device, machine(), config)
    whole = plan_harvest(targets, config, recorded_paths(ledgers), seeds=seeds, calibration=calibration,
                         ledgers=ledgers)  # fmt: skip
    plan = keep_only(whole, args.only)
    overrides = parse_kv(args.config)
    narrowed = seeds is not None or set(targets) != set(list_specs()) or any(k not in HARVEST_KEYS for k in overrides)

    def plain() -> HarvestPlan:
        own = {k: v for k, v in overrides.items() if k in HARVEST_KEYS}
        cfg = harvest_config(args.device, own, workers=args.workers, nice=args.nice)
        return plan_harvest(list_specs(), cfg, recorded_paths(ledgers))

    if park is not None and park.is_dir() and any(p.is_file() for p in park.rglob("*")):  # plain() only then
        if cleared := clear_recorded(park, (r.job for r in records), parked_jobs_to_keep(whole, narrowed, plain)):
            print(f"flb harvest: removed {len(cleared)} parked checkpoint(s) of recorded trainings from {park}",
                  flush=True)  # fmt: skip
    for line in describe_plan(plan, args.device, budget_s, args.workers):
        print(line)
    if args.dry_run or not plan.units:
        print("dry run: nothing was run" if args.dry_run else "nothing to run")
        return 0
    sys.stdout.flush()
    bar = _Bar(budget_s)
    try:
        outcome = run_harvest(plan.units, config, budget_s, workers=args.workers, out=args.out,
                              print_fn=bar.write, on_tick=bar.tick, park=park, grace_s=grace_s)  # fmt: skip
    finally:
        bar.close()
    statuses = [e.get("status", "") for e in outcome.entries]
    failed = [s for s in statuses if s.startswith("error")]
    print(f"flb harvest: {statuses.count('done')} job(s) finished, {statuses.count('stopped')} stopped by the "
          f"budget (resumed next time), {len(failed)} failed; {len(outcome.records)} record(s) in {args.out}; "
          f"manifest {outcome.manifest_path}")  # fmt: skip
    return 1 if failed else 0
